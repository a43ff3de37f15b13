#!/usr/bin/env python3
"""Held-out pass@1 before and after, paired question by question.

    python3 docs/results-cuda-prep/paired.py COMPLETIONS.jsonl[.gz] [REGEX]

COMPLETIONS.jsonl is what scripts/gpu_node.sh writes (completions.jsonl):
every greedy held-out completion of its evaluations, the start's first,
each with its round, policy version, question and score. The evaluations
answer the same questions, so a question right in one and wrong in the
other is the evidence; the p value is McNemar's exact test (two-sided
binomial over the questions that changed). The earliest round is paired
with each later one in turn (two evaluations, or more with gpu_node.sh's
--eval-every or versions' completions appended). With REGEX (Python's, case ignored), it also counts
the answers whose text matches it, before and after, over every question
and over those that turned right. A name ending in .gz is read through
gzip."""
import gzip
import json
import re
import sys
from math import comb


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: paired.py COMPLETIONS.jsonl [REGEX]")
    evals = {}
    with (gzip.open if sys.argv[1].endswith(".gz") else open)(sys.argv[1], "rt") as f:
        for n, line in enumerate(f, 1):
            try:
                r = json.loads(line)
                answers = evals.setdefault((r["round"], r["policy_version"]), {})
                q = (r["family"], r["question"])
                # a question drawn twice is paired with its own second drawing
                while q in answers:
                    q += ("again",)
                answers[q] = (r["score"] >= 1, r["completion"])
            except (ValueError, KeyError) as e:
                sys.exit(f"paired.py: {sys.argv[1]} line {n}: not a completion record ({e})")
    if len(evals) < 2:
        sys.exit(f"paired.py: {sys.argv[1]} holds {len(evals)} evaluation, not 2 or more")
    (k0, before), *later = sorted(evals.items())
    for n, (k1, after) in enumerate(later):
        if n:
            print()
        compare(k0, before, k1, after)


def compare(k0, before, k1, after):
    common = sorted(set(before) & set(after))
    if not common:
        sys.exit("paired.py: the two evaluations share no question")
    right0 = {q: before[q][0] for q in common}
    right1 = {q: after[q][0] for q in common}
    lost = sum(right0[q] and not right1[q] for q in common)
    gained = sum(right1[q] and not right0[q] for q in common)
    both = sum(right0[q] and right1[q] for q in common)
    changed = lost + gained
    tail = sum(comb(changed, i) for i in range(min(lost, gained) + 1)) / 2**changed if changed else 1.0
    p = min(1.0, 2 * tail)
    n = len(common)
    print(f"questions in both evaluations: {n}")
    print(f"pass@1 round {k0[0]} (policy version {k0[1]}): {(both + lost) / n:.3f}")
    print(f"pass@1 round {k1[0]} (policy version {k1[1]}): {(both + gained) / n:.3f}")
    print(f"right in both {both}, only before {lost}, only after {gained}, in neither {n - both - changed}")
    print(f"change {(gained - lost) / n:+.3f}; McNemar exact p {p:.3g}")
    if len(sys.argv) == 3:
        pattern = re.compile(sys.argv[2], re.I)
        turned = [q for q in common if right1[q] and not right0[q]]
        for name, qs in (("every question", common), ("those that turned right", turned)):
            m0 = sum(bool(pattern.search(before[q][1])) for q in qs)
            m1 = sum(bool(pattern.search(after[q][1])) for q in qs)
            print(f"answers matching {sys.argv[2]!r}, {name} ({len(qs)}): {m0} before, {m1} after")


if __name__ == "__main__":
    main()
