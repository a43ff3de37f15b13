"""The paper preset's seeds read together from their cumulative-*.tsv files
(each one seed's run: config, seed, nodes, rounds, cumulative own reward,
cumulative batch reward): per configuration the per-seed values, their
mean, the ratio of means to 8/0's and Welch's two-sided p against 8/0, for
the own and the batch reward; then selection's share of the batch gain,
(4/4u's ratio - 1) / (4/4's ratio - 1).

    .venv/bin/python docs/results-paper/seeds.py cumulative-base-b7ebe24f-seed1.tsv cumulative-base-b7ebe24f-seed2.tsv cumulative-base-1d77e626-seed3.tsv
"""
import csv
import sys

from scipy import stats  # the project's .venv (tests/oracle/setup.sh): the oracle lib/stats' Welch test is checked against


def welch_p(xs, ys):
    """two-sided p of Welch's t-test"""
    return stats.ttest_ind(xs, ys, equal_var=False).pvalue


values = {}
for path in sys.argv[1:]:
    for row in csv.DictReader(open(path), delimiter="\t"):
        for kind in ("cumulative", "cumulative_batch"):
            values.setdefault((row["config"], kind), []).append(float(row[kind]))
ratio = {}
for kind, name in (("cumulative", "own"), ("cumulative_batch", "batch")):
    base = values[("8/0", kind)]
    print(f"{name} reward")
    for config in ("8/0", "4/4", "4/4u"):
        xs = values.get((config, kind))
        if not xs:
            continue
        ratio[(config, kind)] = (sum(xs) / len(xs)) / (sum(base) / len(base))
        p = "" if config == "8/0" else f", Welch p {welch_p(xs, base):.2g}"
        print(f"  {config}: {', '.join('%.2f' % x for x in xs)}; mean {sum(xs) / len(xs):.2f}, "
              f"ratio to 8/0 {ratio[(config, kind)]:.3f}{p}")
if ("4/4u", "cumulative_batch") in ratio:
    share = (ratio[("4/4u", "cumulative_batch")] - 1) / (ratio[("4/4", "cumulative_batch")] - 1)
    print(f"selection's share of the batch gain: {100 * share:.0f} %")
