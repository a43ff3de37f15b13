#!/usr/bin/env python3
"""Scoring fixtures for the task families, with reasoning-gym's score_answer
as the oracle.

For every family given (default: all of them), two kinds of file in
tests/golden/tasks/:

  rg_<family>.jsonl    entries made by reasoning-gym at several configs,
                       each with many near-miss answers (case, whitespace,
                       other formats, off by one, unreduced, swapped,
                       lists, empty, None, garbage, ...) and the score
                       reasoning-gym gives each
  sapo_<family>.jsonl  (only with --sapo, for families whose variants this
                       script knows) entries made by sapo's generator,
                       scored by reasoning-gym with their own answer and
                       the same variants; each line also holds the seed,
                       index and config that made it, so the C test can
                       check that sapo regenerates the same entry

Each line is one entry with its answers: {question, answer, metadata,
variants: [[response, score], ...][, seed, index, config]}; a response null
stands for None. For arc_1d, bf and propositional_logic, whose tests read
one answer per line, a line is {question, answer, metadata, response,
score} instead. A case where reasoning-gym raises instead of returning a
score is its bug: left out, and listed on stderr.

decimal_arithmetic scores in the process's decimal context, which
reasoning-gym sets to the dataset's precision when it generates an entry;
every entry is generated (or, for sapo's, one entry of a dataset with the
same config) right before its answers are scored, as a Python node would.

Run from the repository root:
  .venv/bin/python tests/oracle/tasks_fixtures.py [--families a,b] [--sapo]
      [--generator "build/release/bin/verifier generate"]
Reruns give identical files: fixed seeds, no randomness in the variants.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
from decimal import Decimal, localcontext

import reasoning_gym

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden", "tasks")
ALL = ["base_conversion", "basic_arithmetic", "arc_1d", "bf", "propositional_logic",
       "fraction_simplification", "decimal_arithmetic", "calendar_arithmetic", "binary_matrix", "gsm_symbolic"]
MINE = ["base_conversion", "basic_arithmetic", "fraction_simplification", "decimal_arithmetic",
        "calendar_arithmetic", "binary_matrix"]

# (config, number of entries) per family; the first is reasoning-gym's default
CONFIGS = {
    "base_conversion": [({}, 30), ({"min_base": 2, "max_base": 36, "max_value": 1000000}, 20),
                        ({"min_base": 9, "max_base": 18, "min_value": 1000, "max_value": 100000}, 10)],
    "basic_arithmetic": [({}, 30), ({"max_terms": 3, "max_digits": 2}, 15),
                         ({"format_style": "natural", "whitespace": "no_space"}, 10),
                         ({"whitespace": "random", "operators": ["+", "*", "/"]}, 10),
                         ({"allow_parentheses": False}, 5)],
    "fraction_simplification": [({}, 30), ({"max_value": 100, "max_factor": 10}, 15),
                                ({"styles": ["latex_frac"]}, 8),
                                ({"min_value": 1000, "max_value": 10000, "max_factor": 1000}, 8)],
    "decimal_arithmetic": [({}, 30),
                           ({"min_num_decimal_places": 2, "max_num_decimal_places": 6, "precision": 10,
                             "max_terms": 8}, 15),
                           ({"min_num_decimal_places": 2, "max_num_decimal_places": 4, "precision": 6}, 10),
                           ({"min_num_decimal_places": 8, "max_num_decimal_places": 8, "precision": 12}, 8),
                           ({"min_num_decimal_places": 14, "max_num_decimal_places": 16, "precision": 18}, 4)],
    "calendar_arithmetic": [({}, 24), ({"offset_upper_bound": 365, "year": 2024}, 10),
                            ({"tasks": ["count_business_days", "count_days"], "offset_upper_bound": 30}, 6)],
    "binary_matrix": [({}, 8), ({"min_n": 1, "max_n": 4, "p_zero": 0.5}, 6), ({"min_n": 12, "max_n": 14}, 1)],
    "arc_1d": [({}, 6)],
    "bf": [({}, 6)],
    "propositional_logic": [({}, 8)],
    "gsm_symbolic": [({}, 24)],
}

ARABIC = str.maketrans("0123456789", "\u0660\u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668\u0669")


def generic(a):
    """Near misses any answer string has."""
    out = [a, None, "", " ", " " + a + " ", "\u00a0" + a + "\u3000", a + "\n", "\t" + a, a.upper(), a.lower(),
           a.title(), a.swapcase(), a + a, a + " " + a, "The answer is " + a, a + ".", '"' + a + '"',
           "[" + a + "]", a[:-1], a[1:], a[::-1], "garbage", "None", "0", "-1", a.replace(" ", ""),
           a.replace(" ", "  "), a.replace("\n", " "), "<answer>" + a + "</answer>", "\u00e9" + a]
    return out


def base_conversion(e):
    md = e["metadata"]
    v, t, s = md["decimal_value"], md["target_base"], md["source_base"]

    def rep(n, b):
        d = ""
        while n:
            d = "0123456789abcdefghijklmnopqrstuvwxyz"[n % b] + d
            n //= b
        return d or "0"
    a = e["answer"]
    return [rep(v + 1, t), rep(max(v - 1, 0), t), rep(v, s), str(v), "0x" + a, "0b" + a, "0" + a, a + "_" + str(t),
            "(" + a + ")_" + str(t), a.upper(), md["source_repr"], rep(v, 16).upper(), format(v, "x"), format(v, "b")]


def basic_arithmetic(e):
    v = int(e["answer"])
    return [str(v + 1), str(v - 1), str(-v), str(float(v)), str(v) + ".0", f"{v:,}", "+" + str(v), "0" + str(v),
            str(v).replace("-", "\u2212"), e["metadata"]["expression"] + " = " + str(v), "= " + str(v),
            str(v) + " ", f"{v:e}", str(v * 10), "1_" + str(abs(v))]


def fraction_simplification(e):
    md = e["metadata"]
    n, d = md["simplified_numerator"], md["simplified_denominator"]
    N, D = md["numerator"], md["denominator"]
    out = [f"{n}/{d}", f"${n}/{d}$", f"$\\frac{{{n}}}{{{d}}}$", f"\\dfrac{{{n}}}{{{d}}}", f"\\FRAC{{{n}}}{{{d}}}",
           f"\\frac {{ {n} }} {{ {d} }}", f"{n} / {d}", f" {n}/{d} ", f"{d}/{n}", f"{N}/{D}", f"{N}/{d}", f"{n}/{D}",
           f"{n + 1}/{d}", f"{n}/{d + 1}", f"-{n}/{d}", f"+{n}/{d}", f"{n}/{d}/1", f"{n}/", f"/{d}", f"{n}:{d}",
           str(n / d), f"{{{n}}}/{{{d}}}", f"$${n}/{d}$$", f"\\frac{{{n}}}{{{d}}} or so", f"\\frac{{{n}}}{{x}}",
           f"\\frac\u2003{{{n}}}{{{d}}}", f"{n}/{d}.", f" ${n}/{d}$ ", f"$\\frac{{{N}}}{{{D}}}$",
           f"{n}/{d}".translate(ARABIC), f"\\frac{{{n}}}{{{d}}}".translate(ARABIC), f"{n} over {d}",
           f"{N // 1}/{D + 1}", f"{n + 1}/{D}", f"0{n}/0{d}", f"{n}/{d} ", f"\\tfrac{{{n}}}{{{d}}}",
           f"\\frac{{{n}}}{{{d}}}/2", f"{n}/ {d}", f"{n} /{d}", f"{n}\u00a0/\u00a0{d}", f"{n}.0/{d}"]
    sn = str(n)
    if len(sn) > 1:
        out += [sn[0] + "_" + sn[1:] + "/" + str(d), sn[0] + "__" + sn[1:] + "/" + str(d)]
    return out


def decimal_arithmetic(e):
    a = e["answer"]
    k = e["metadata"]["difficulty"]["decimal_places"][1]
    with localcontext() as ctx:
        ctx.prec = 200
        c = Decimal(a)
        tol = Decimal(10) ** -k
        near = [c + tol, c - tol, c + tol * Decimal("1.0000000001"), c - tol * Decimal("1.0000000001"),
                c + tol + Decimal("1e-20"), c - tol - Decimal("1e-20"), c + tol + Decimal("1e-9"),
                c + tol / 2, c + 2 * tol, c - tol / 3, -c, c * 10, c + Decimal("1e-30"), c.quantize(tol),
                c + tol * Decimal("0.99999999999999")]
        out = [str(x) for x in near]
        out += [f"{c:.{k}f}", f"{c:.{k + 3}f}", f"{c:e}", f"{c:.3e}", a + "0000", "0" + a, a.replace(".", ","),
                "1_" + a.lstrip("-"), "NaN", "sNaN", "Infinity", "-inf", "nan123", "1e999999999", "1e-999999",
                " " + a + " ", a + "x", repr(float(c)), f"{float(c):.17g}", f"{float(c):.6g}", "-0", "+" + a,
                a.translate(ARABIC), "." + a, a + ".", a + "e0", a + "E-0", "--" + a]
    return out


WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def calendar_arithmetic(e):
    a, task = e["answer"], e["metadata"]["task"]
    if a in WEEKDAYS:
        return WEEKDAYS + [a.lower(), a.upper(), a[:3], a + ".", "mOnDaY", "\u017funday", "monday tuesday",
                           "Day: " + a, a + "day", "It is " + a, "\u0130" + a[1:], a.lower() + " ", "1"]
    if task == "is_leap_year":
        return ["yes", "YES", " Yes ", "no", "No", "NO", "y", "n", "True", "False", "Yes.", "Yes No", "\u00a0no",
                "YeS", "nO"]
    v = int(a)
    return [str(v + 1), str(v - 1), str(v + 5), str(v - 5), "0", "-1", str(2 * v), "+" + str(v), f" {v} ", f"{v}.0",
            "0" + str(v), "1_0", str(v).translate(ARABIC), "99999999999999999999999", "-0", f"{v} days",
            str(v * 100), str(-v), "1" * 4400, f"{v}_", f"_{v}"]


def binary_matrix(e):
    sol = e["metadata"]["solution"]
    a = e["answer"]
    n = len(sol)
    t = [list(r) for r in zip(*sol)]
    changed = [list(r) for r in sol]
    changed[-1][-1] += 1
    out = [str(sol), json.dumps(sol), repr(tuple(tuple(r) for r in sol)), str(sol).replace(" ", ""),
           "[" + ",\n ".join(str(r) for r in sol) + "]", str([[str(x) for x in r] for r in sol]),
           str([" ".join(str(x) for x in r) for r in sol]), str([[" ".join(str(x) for x in r)] for r in sol]),
           str(t), str(changed), str([[float(x) for x in r] for r in sol]),
           str([[hex(x) for x in r] for r in sol]).replace("'", ""),
           "[" + ", ".join("b'" + "".join(f"\\x{x:02x}" for x in r) + "'" for r in sol) + "]",
           ", ".join(str(r) for r in sol), str(sol) + ",", "[" + " ".join(str(r).replace(",", "") for r in sol) + "]",
           a.replace("\n", " "), a + "\n", "\n".join(r + " " for r in a.split("\n")), "# distances\n" + str(sol),
           str(sol) + "  # done", "\n\n" + str(sol) + "\n", str([[bool(x) for x in r] for r in sol]),
           str([["+" + str(x) for x in r] for r in sol]).replace("'", ""),
           str([["-" + str(x) for x in r] for r in sol]).replace("'", ""),
           str([[str(x) + "_0" for x in r] for r in sol]).replace("'", ""),
           str([["0" + str(x) for x in r] for r in sol]).replace("'", ""),
           str(sol)[:-1], str(sol) + ";", "[" + str(sol) + "]", str(sol[:-1]), "'" + a.replace("\n", "\\n") + "'",
           '"""' + a + '"""', "r'" + a.replace("\n", " ") + "'", str(sol).replace("[", "(").replace("]", ")"),
           str(sol) + "\n[[0]]", str([[str(x) for x in r] for r in sol]).replace("'", '"'),
           "{" + str(sol)[1:-1] + "}", "[[None]]", "[[1j]]", str(sol).replace("0", "0.")]
    if n == 1:
        out += ["'" + a + "'", "[['" + a + "']]", "(" + a + ",)", "[" + a + "]"]
    return out


FULLWIDTH = str.maketrans("0123456789", "\uff10\uff11\uff12\uff13\uff14\uff15\uff16\uff17\uff18\uff19")


def gsm_symbolic(e):
    """The first number in the answer, read by a regex with \\b at both
    ends: signs, decimals, separators, and what counts as a word character
    around it."""
    v = int(e["answer"])
    s = str(v)
    return [str(v + 1), str(v - 1), "-" + s, "x-" + s, "a -" + s, "(-" + s + ")", s + ".0", s + ".00", s + ".5",
            s + ".", "." + s, s + ".0a", s + ".5x", s + ".5.5", s + "..0", f"{v:,}", f"{v * 1000:,}", "$" + s,
            s + " dollars", "about " + s + " or " + str(v + 1), str(v + 1) + " or " + s, s + "%", s + "e3",
            "1e" + s, s + "x", "x" + s, "x " + s, s + "_", "_" + s, s + "_0", s + "\u00b2", "\u00b2" + s,
            s + "\u0301", s + "\u00e9", "\u00e9" + s, "\u2160" + s, s + "\u2160", s.translate(ARABIC),
            s.translate(FULLWIDTH), "\u0661" + s, s + "/1", s + "-1", s + "-" + s, "0" + s, "00" + s + ".000",
            s + "\n" + str(v + 1), str(v + 1) + "\n" + s, "\u2212" + s, "+" + s, s + " apples", "#### " + s,
            s[:-1] + " " + s[-1:], "9" * 400, "9" * 400 + "." + "9" * 30, "0." + "0" * 330 + "1", "-0", "0",
            s + "\u00a0", "\u3000" + s, "[" + s + "]", s + ")", "nan", "inf", "NaN " + s, str(float(v)),
            f"{float(v):e}"]


PIECES = ["0", "1", "9", "-", "+", ".", "e", "E", "_", "/", "$", "\\frac{", "\\dfrac", "{", "}", "[", "]", "(", ")",
          ",", " ", "\n", "'", '"', "\\", "\\x4", "\\u00", "b'", "r'", "0x", "0b", "0o", "j", "#", "True", "None",
          "NaN", "Inf", "sNaN", "e99", "\u00a0", "\u0663", "\u017f", "Monday", "yes", "1_0", "'" * 3, '"' * 3,
          "99999999999999999999999"]


def has_code(text):
    """True where eval() would run more than a literal: binary_matrix's
    scorer here reads literals only (see lib/tasks/README.md)."""
    import ast

    def plain(v):
        if isinstance(v, (dict, set)):
            return False
        if isinstance(v, (list, tuple)):
            return all(plain(x) for x in v)
        return True
    try:
        return not plain(ast.literal_eval(text))
    except Exception:
        try:
            eval(text, {"__builtins__": {}})
        except Exception:
            return False
        return True


def mutations(family, e, count=24):
    """The truth cut and spliced with pieces the parsers look for: a
    deterministic fuzz of every scorer against reasoning-gym's."""
    import random
    rng = random.Random(json.dumps(e, sort_keys=True))
    a = e["answer"] if isinstance(e["answer"], str) else ""
    out = []
    while len(out) < count:
        cut = rng.randint(0, len(a))
        m = a[:cut] + "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 4))) + a[cut + rng.randint(0, 1):]
        if family == "binary_matrix" and has_code(m):
            continue
        out.append(m)
    return out


VARIANTS = {"base_conversion": base_conversion, "basic_arithmetic": basic_arithmetic,
            "fraction_simplification": fraction_simplification, "decimal_arithmetic": decimal_arithmetic,
            "calendar_arithmetic": calendar_arithmetic, "binary_matrix": binary_matrix,
            "gsm_symbolic": gsm_symbolic}


def variants(family, e):
    a = e["answer"] if isinstance(e["answer"], str) else ""
    out = generic(a)
    if family in VARIANTS:
        out += VARIANTS[family](e) + mutations(family, e)
    return out


def scored(ds, entry, answers, extra=None):
    """The entry with reasoning-gym's score of every distinct answer."""
    pairs, seen = [], set()
    for a in answers:
        key = json.dumps(a)
        if key in seen:
            continue
        seen.add(key)
        try:
            s = ds.score_answer(a, entry)
        except Exception as ex:  # reasoning-gym raising is its bug; recorded, not a fixture
            print(f"{entry['metadata']['source_dataset']}: reasoning-gym raises {type(ex).__name__} "
                  f"scoring {a!r:.80}", file=sys.stderr)
            continue
        pairs.append([a, float(s)])
    base = {"question": entry["question"], "answer": entry["answer"], "metadata": entry["metadata"]}
    if extra:
        base.update(extra)
    if entry["metadata"]["source_dataset"] in VARIANTS:
        return [dict(base, variants=pairs)]
    return [dict(base, response=a, score=s) for a, s in pairs]


def rg_lines(family):
    lines = []
    for k, (config, count) in enumerate(CONFIGS[family]):
        ds = reasoning_gym.create_dataset(family, seed=300 + k, size=count, **config)
        for i in range(count):
            try:
                entry = ds[i]
            except Exception as ex:
                print(f"{family}: reasoning-gym raises {type(ex).__name__} generating entry {i} of {config}",
                      file=sys.stderr)
                continue
            # gsm_symbolic's variables hold Fractions: written as strings
            entry = json.loads(json.dumps(entry, default=str))
            lines += scored(ds, entry, variants(family, entry))
    if family == "gsm_symbolic":
        lines += gsm_symbolic_truths(ds)
    return lines


def gsm_symbolic_truths(ds):
    """Truths reasoning-gym never writes, read by float(): whitespace,
    underscores, other digits, inf and nan, and ones float() refuses."""
    lines = []
    entry = json.loads(json.dumps(ds[0], default=str))
    answers = ["12", "12.0", "-12", "x-12", "1", "nan", "inf", "12 apples", "٢", "１２", None, ""]
    for truth in [" 12 ", "1_2", "12.0", "1.2e1", "+12", "\u0661\u0662", "\u00a012\u2003", "nan", "-inf",
                  "Infinity", "abc", "0x0c", "1__2", "12_", "_12", "1 2", "", ".5", "5.", "1e", None, "١٢٫٠"]:
        lines += scored(ds, dict(entry, answer=truth), answers)
    return lines


def sapo_lines(family, generator):
    lines = []
    for k, (config, count) in enumerate(CONFIGS[family]):
        seed = 400 + k
        cmd = shlex.split(generator) + ["--family", family, "--seed", str(seed), "--count", str(count),
                                        "--config", json.dumps(config)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        ds = reasoning_gym.create_dataset(family, seed=1, size=1, **config)
        for index, text in enumerate(out.splitlines()):
            entry = json.loads(text)
            ds[0]  # the decimal context of a node that generates with this config
            lines += scored(ds, entry, variants(family, entry),
                                  {"seed": seed, "index": index, "config": config})
    return lines


def extract_lines():
    from reasoning_gym.utils import extract_answer
    completions = ["<answer>5</answer>", "x <answer> 5 </answer> y <answer>6</answer>",
                   "<answer>a<answer>b</answer>", "<answer>1</answer><answer>2", "<answer>\n\n5\n</answer>",
                   "<answer>\u00a05\u3000</answer>", "<answer></answer>", "<ANSWER>5</ANSWER>", "no tags",
                   "</answer><answer>3</answer>", "<answer>multi\nline\nanswer</answer>",
                   "<answer>x</answer>tail<answer> y </answer>", "<answer><answer></answer></answer>",
                   "<answer> </answer>", "<answer>\t<b>7</b>\t</answer>", "<answer>1</answer >", "",
                   "<think>3</think><answer>\u00e9t\u00e9</answer>", "<answer>\u2003\u2003</answer>"]
    return [{"completion": c, "extracted": extract_answer(c)} for c in completions]


def save(name, lines):
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, name)
    with open(path, "w") as f:
        for line in lines:
            f.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")
    print(f"{path}: {len(lines)} lines, {os.path.getsize(path)} bytes")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--families", default=",".join(ALL))
    ap.add_argument("--sapo", action="store_true", help="also score sapo's entries (needs the generator)")
    ap.add_argument("--generator", default="bin/verifier generate")
    args = ap.parse_args()
    for family in args.families.split(","):
        if family not in CONFIGS:
            sys.exit(f"unknown family {family}")
        save(f"rg_{family}.jsonl", rg_lines(family))
        if args.sapo and family in VARIANTS:
            save(f"sapo_{family}.jsonl", sapo_lines(family, args.generator))
    save("extract_answer.jsonl", extract_lines())


if __name__ == "__main__":
    main()
