"""The specialised preset's seeds read together, each from its own run's
files: eval-base-SHA-seedN.tsv (every evaluation: config, seed, node, round,
pass@1 on the union, format, and pass@1 on add, sub and mul),
rewards-base-SHA-seedN.tsv (every node-round's own and batch reward) and
summary-base-SHA-seedN.md (its own completions per node-round).

Per configuration and seed: held-out pass@1 at the last round, the mean
over the three nodes of the union, of the node's own operation (n0 sums,
n1 differences, n2 products) and of the two it never draws; the cumulative
own and batch reward (the sum over nodes and rounds); own completions per
node-round. Then per measure the values, their median and mean, 4/4 - 8/0
(medians) or 4/4 / 8/0 (means) and Welch's two-sided p; the union's
medians at every evaluation; the union's gap seed by seed.

    .venv/bin/python docs/results-specialised/seeds.py [--dir DIR] SHA:SEED ...
    e.g. seeds.py 6f2baefa:1 6f2baefa:2 636300ac:3 636300ac:4 636300ac:5

--dir: the folder that holds the files (default: this one's), for a study
of the same design elsewhere (docs/results-smollm2-specialised).
"""
import csv
import os
import re
import statistics
import sys
import warnings

from scipy import stats  # the project's .venv (tests/oracle/setup.sh)

# two seeds can agree to the digit (zero variance): scipy warns and still answers
warnings.filterwarnings("ignore", category=RuntimeWarning)
HERE = os.path.dirname(os.path.abspath(__file__))
OWN = {"n0": "add", "n1": "sub", "n2": "mul"}


def config_of(label):
    """"8/0 base 6f2baefa, 300 rounds" -> "8/0" """
    return label.split()[0]


def read_seed(folder, sha, seed):
    rows = list(csv.DictReader(open(os.path.join(folder, f"eval-base-{sha}-seed{seed}.tsv")), delimiter="\t"))
    out = {}
    for config in sorted({config_of(r["config"]) for r in rows}):
        mine = [r for r in rows if config_of(r["config"]) == config]
        last = max(int(r["round"]) for r in mine)
        end = [r for r in mine if int(r["round"]) == last]
        union = statistics.mean(float(r["pass1"]) for r in end)
        own = statistics.mean(float(r[OWN[r["node"]]]) for r in end)
        others = statistics.mean(float(r[op]) for r in end for op in ("add", "sub", "mul") if op != OWN[r["node"]])
        by_round = {}
        for r in mine:
            by_round.setdefault(int(r["round"]), []).append(float(r["pass1"]))
        out[config] = {"union": union, "own operation": own, "the two never drawn": others, "round": last,
                       "union by round": {k: statistics.mean(v) for k, v in by_round.items()}}
    for r in csv.DictReader(open(os.path.join(folder, f"rewards-base-{sha}-seed{seed}.tsv")), delimiter="\t"):
        o = out[config_of(r["config"])]
        o["cumulative own"] = o.get("cumulative own", 0) + float(r["reward"])
        o["cumulative batch"] = o.get("cumulative batch", 0) + float(r["batch_reward"])
    summary = open(os.path.join(folder, f"summary-base-{sha}-seed{seed}.md")).read()
    for config, o in out.items():
        # the two-rewards table: | I/J | seeds | own | ratio | p | batch | ratio | p | paper | completions | pass@1 |
        m = re.search(r"^\| " + re.escape(config) + r" \| 1 \|(?:[^|]*\|){7} ([0-9.]+) \|", summary, re.M)
        o["own completions per node-round"] = float(m.group(1))
    return out


def main():
    args, folder = sys.argv[1:], HERE
    if args[:1] == ["--dir"]:
        folder, args = args[1], args[2:]
    seeds = {}
    for arg in args:
        sha, seed = arg.split(":")
        seeds[(sha, int(seed))] = read_seed(folder, sha, int(seed))
    print("seeds: " + ", ".join(f"{s} (base {sha})" for sha, s in seeds))
    measures = ["union", "own operation", "the two never drawn", "cumulative own", "cumulative batch",
                "own completions per node-round"]
    for m in measures:
        a = [v["8/0"][m] for v in seeds.values()]
        b = [v["4/4"][m] for v in seeds.values()]
        fmt = "%.3f" if m in measures[:3] else "%.2f" if m.startswith("cumulative") else "%.1f"
        line = (f"{m}: 8/0 {', '.join(fmt % x for x in a)} (median {fmt % statistics.median(a)}); "
                f"4/4 {', '.join(fmt % x for x in b)} (median {fmt % statistics.median(b)}); ")
        if m in measures[:3]:
            line += (f"4/4 - 8/0 {statistics.median(b) - statistics.median(a):+.3f} (medians), "
                     f"{statistics.mean(b) - statistics.mean(a):+.3f} (means)")
        else:
            line += f"4/4 / 8/0 {statistics.mean(b) / statistics.mean(a):.3f} (means)"
        if len(a) > 1:
            line += f", Welch p {stats.ttest_ind(b, a, equal_var=False).pvalue:.2g}"
        print(line)
    rounds = sorted(next(iter(seeds.values()))["8/0"]["union by round"])
    line = []
    for k in rounds:
        a = statistics.median(v["8/0"]["union by round"][k] for v in seeds.values())
        b = statistics.median(v["4/4"]["union by round"][k] for v in seeds.values())
        line.append(f"{k}: {a:.3f} / {b:.3f} ({b - a:+.3f})")
    print("union by round, medians 8/0 / 4/4: " + "; ".join(line))
    print("4/4 - 8/0 on the union, seed by seed: " +
          ", ".join(f"{v['4/4']['union'] - v['8/0']['union']:+.3f}" for v in seeds.values()))


if __name__ == "__main__":
    main()
