#!/usr/bin/env python3
"""Family-specific scoring fixtures for arc_1d, bf and propositional_logic,
with reasoning-gym's score_answer as the oracle.

tests/oracle/tasks_fixtures.py covers every family with generic near-miss
answers; these three need their own: formulas that parse in surprising ways
(propositional_logic's reader treats any unparsable text as one variable),
rows of cells in other notations (arc_1d), program outputs with stray
characters (bf). Two files per family in tests/golden/tasks/:

  variants_<family>.jsonl  entries made by reasoning-gym (and, for
                           propositional_logic, a few hand-written premise
                           sets), each with many answers
  sapo_<family>.jsonl      entries made by sapo (bin/verifier generate, or
                           --generator CMD) scored by reasoning-gym with
                           their own answer and variants; each line also
                           holds the seed, index and config that made it,
                           so the C test can check it regenerates the same

Each line is one entry with all its answers, in the shape of
tests/oracle/tasks_fixtures.py's files: {question, answer, metadata[, seed,
index, config], variants: [[response, score], ...]}; a response null means
None. Answers on which reasoning-gym raises
instead of returning a score are left out and listed on stderr.

Run from the repository root: .venv/bin/python tests/oracle/tasks_variants.py
[--families a,b] [--generator "build/release/bin/verifier generate"]
Fixed seeds: reruns give identical files.
"""
import argparse
import json
import os
import random
import shlex
import subprocess
import sys

import reasoning_gym

from tasks_fixtures import scored  # the same oracle call and exception policy

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden", "tasks")
FAMILIES = ["arc_1d", "bf", "propositional_logic"]

AND, OR, NOT, IMP, IFF = "\u2227", "\u2228", "\u00ac", "\u2192", "\u2194"


def arc_variants(entry, rng):
    a = entry["answer"]
    cells = a.split(" ")
    test_in = entry["metadata"]["test_example"]["input"]
    out = [a, " " + a + " ", a + "\n", "".join(cells), ",".join(cells), ", ".join(cells),
           "[" + ", ".join(cells) + "]", "\n".join(cells), "  ".join(cells), "Output: " + a,
           a + " " + a, a[:-2], a + " 0", " ".join(str(x) for x in test_in),
           " ".join(reversed(cells)), "", None, a.replace(" ", "\t")]
    for _ in range(3):
        c = list(cells)
        i = rng.randrange(len(c))
        c[i] = str((int(c[i]) + 1) % 10)
        out.append(" ".join(c))
    return out


def bf_variants(entry, rng):
    a = entry["answer"]
    out = [a, a.upper(), a.title(), " " + a, a + "\n", '"' + a + '"', "Output: " + a, a + a,
           a[:-1], a[1:], "", None, "<" + a + ">", a + ".", a[::-1]]
    if a.isdigit():
        out += [str(int(a) + 1), str(int(a) - 1), a + ".0", "0" + a, f"{int(a):,}"]
    else:
        out += [a[:2] + a[2].upper() + a[3:], " ".join(a)]
    return out


def formula(rng, variables, depth):
    """A random formula as reasoning-gym prints them."""
    if depth <= 1:
        return rng.choice(variables)
    op = rng.choice([AND, OR, NOT, IMP, IFF])
    if op == NOT:
        return NOT + formula(rng, variables, depth - 1)
    return f"({formula(rng, variables, depth - 1)} {op} {formula(rng, variables, depth - 1)})"


def logic_variants(entry, rng):
    md = entry["metadata"]
    ex, prem, vs = md["example_answer"], md["premises"], md["variables"]
    p, q = vs[0], vs[1 % len(vs)]
    out = [ex, None, "", "   ", " " + ex + " ", "\u00a0" + ex + "\u3000", ex.replace(" ", ""),
           "\t" + ex + "\n", NOT + ex, NOT + NOT + ex, "(" + ex + ")", "((" + ex + "))",
           ex.replace(AND, OR), ex.replace(OR, AND), ex.replace(IMP, IFF), ex.replace(IFF, IMP),
           ex.lower(), ex.replace("(", "").replace(")", ""),
           p, q, NOT + p, f"({p} {OR} {NOT}{p})", f"({p} {AND} {NOT}{p})", f"{p} {OR} {NOT}{p}",
           f"({p} {IMP} {p})", f"{p} {IFF} {p}", f"{p} and {q}", f"{p} & {q}", f"{p} | {q}", f"~{p}",
           f"{p} -> {q}", f"{p} <-> {q}", f"!{p}", f"{p} v {q}", "Z", "A", f"({p}", f"{p})", "()", "(())",
           NOT, f"{p} {AND}", f"{AND} {q}", f"{p} {AND} {AND} {q}", f"({p} {AND} {q}) {OR}", "foo",
           "1", "True", f"{p} {OR} foo", f"{p} {OR} ({q}", f"{p} {AND} {q} {OR} {p}",
           f"{p} {IFF} {q} {IMP} {p}", f"{p}{IMP}{q}{IMP}{p}", f"({p} {OR} {q}))(", f")({p}",
           f"{NOT}({p} {AND} {q})", f"{NOT} {p}", f"{p} {NOT}", "(" * 40 + p + ")" * 40,
           NOT * 60 + p, f" {OR} ".join("abcdefghijkl"), f"({p} {OR} {NOT}{p}) {AND} x",
           ex + ".", "The conclusion is " + ex, "p", f"{p}{q}", f"{p} {OR} {q} {OR} {p} {OR} {q}"]
    out += prem
    if len(prem) > 1:
        out.append(f"({prem[0]} {AND} {prem[1]})")
        out.append(f" {AND} ".join(prem))
    for _ in range(16):
        out.append(formula(rng, vs, rng.randint(1, 3)))
    # random token soup: the reader's corner cases that nobody thought of
    tokens = vs + ["(", ")", " ", AND, OR, NOT, IMP, IFF, "p", "x", "A", "\u00a0", "((", "))", NOT + NOT,
                   f"{p} {AND} {q}", f"({p} {OR} {q})", "\t", "1"]
    for _ in range(24):
        out.append("".join(rng.choice(tokens) for _ in range(rng.randint(1, 14))))
    return out


# premise sets reasoning-gym would rarely draw: unsatisfiable, tautological,
# leaves that are not variables
HAND_LOGIC = [
    (["(P \u2227 \u00acP)"], ["P", "Q"]),
    (["(P \u2228 \u00acP)", "(Q \u2194 Q)"], ["P", "Q"]),
    (["P", "\u00acQ", "(R \u2192 P)"], ["P", "Q", "R"]),
    (["((P \u2192 Q) \u2227 (Q \u2192 R))", "P"], ["P", "Q", "R"]),
    (["(P \u2194 \u00acQ)"], ["P", "Q", "R", "S"]),
]


def variants_for(family, entry, rng):
    return {"arc_1d": arc_variants, "bf": bf_variants, "propositional_logic": logic_variants}[family](entry, rng)


def scored_line(ds, entry, answers, extra=None):
    # tasks_fixtures.scored gives these families one line per answer
    pairs = [[line["response"], line["score"]] for line in scored(ds, entry, answers)]
    line = {"question": entry["question"], "answer": entry["answer"], "metadata": entry["metadata"]}
    if extra:
        line.update(extra)
    line["variants"] = pairs
    return line


def rg_configs(family):
    if family == "arc_1d":
        return [({"min_size": 8, "max_size": 12}, 14), ({}, 3), ({"min_size": 40, "max_size": 50}, 1)]
    if family == "bf":
        return [({"difficulty": 1}, 4), ({"difficulty": 2}, 3), ({"difficulty": 3}, 3)]
    return [({}, 30), ({"min_vars": 3, "max_vars": 6, "min_complexity": 2, "max_complexity": 4}, 15),
            ({"min_vars": 1, "max_vars": 1, "min_statements": 1, "max_statements": 2}, 6),
            ({"min_vars": 8, "max_vars": 10, "min_statements": 3, "max_statements": 6, "max_complexity": 4}, 6)]


def write_variants(family):
    rng = random.Random(2509)
    lines = []
    for k, (config, count) in enumerate(rg_configs(family)):
        ds = reasoning_gym.create_dataset(family, seed=100 + k, size=count, **config)
        for entry in ds:
            lines.append(scored_line(ds, entry, variants_for(family, entry, rng)))
    if family == "propositional_logic":
        ds = reasoning_gym.create_dataset(family, seed=1, size=1)
        for premises, variables in HAND_LOGIC:
            entry = {"question": "", "answer": None,
                     "metadata": {"source_dataset": family, "source_index": 0, "premises": premises,
                                  "variables": variables, "complexity": 3, "example_answer": premises[0]}}
            lines.append(scored_line(ds, entry, variants_for(family, entry, rng)))
    return lines


def write_sapo(family, generator):
    rng = random.Random(2510)
    lines = []
    for k, (config, count) in enumerate(rg_configs(family)):
        seed = 200 + k
        cmd = shlex.split(generator) + ["--family", family, "--seed", str(seed), "--count", str(count),
                                        "--config", json.dumps(config)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        ds = reasoning_gym.create_dataset(family, seed=1, size=1, **config)
        for index, text in enumerate(out.splitlines()):
            entry = json.loads(text)
            lines.append(scored_line(ds, entry, variants_for(family, entry, rng),
                                     {"seed": seed, "index": index, "config": config}))
            if family == "bf":
                import bfi
                got = bfi.interpret(entry["metadata"]["bf_program"], buffer_output=True)
                assert got == entry["answer"], (entry["metadata"]["bf_program"], got, entry["answer"])
    return lines


def save(name, lines):
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, name)
    with open(path, "w") as f:
        for line in lines:
            f.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")
    n = sum(len(line["variants"]) for line in lines)
    print(f"{path}: {len(lines)} entries, {n} answers, {os.path.getsize(path)} bytes")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--generator", default="bin/verifier generate")
    args = ap.parse_args()
    for family in args.families.split(","):
        save(f"variants_{family}.jsonl", write_variants(family))
        save(f"sapo_{family}.jsonl", write_sapo(family, args.generator))


if __name__ == "__main__":
    main()
