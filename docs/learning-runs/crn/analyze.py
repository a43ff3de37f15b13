"""How much lockstep (common random numbers) shrinks the noise between two
configurations of a study. Reads the rewards.tsv that tools/study writes
(config, seed, node, round, reward) of a study run with --configs
"8/0 4/4", and prints, per file: each configuration's cumulative reward per
seed, the sd across seeds of the seed-by-seed difference against the sd of
an unpaired difference, and the correlation of the two configurations'
rewards node by node over windows of 1, 10 and 20 rounds (each window's
mean over seeds and nodes taken out: the trend both share).
Usage: python3 analyze.py async/rewards.tsv lockstep/rewards.tsv"""
import csv, statistics as st, sys
from collections import defaultdict


def corr(x, y):
    mx, my = st.mean(x), st.mean(y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y))
    return sxy / (sum((a - mx) ** 2 for a in x) * sum((b - my) ** 2 for b in y)) ** 0.5


for path in sys.argv[1:]:
    r = defaultdict(dict)  # (config, seed, node) -> round -> reward
    for row in csv.DictReader(open(path), delimiter="\t"):
        r[row["config"], int(row["seed"]), row["node"]][int(row["round"])] = float(row["reward"])
    seeds = sorted({k[1] for k in r})
    nodes = sorted({k[2] for k in r})
    R = min(len(v) for v in r.values())
    A = {(s, n): [r["8/0", s, n][t] for t in sorted(r["8/0", s, n])][:R] for s in seeds for n in nodes}
    B = {(s, n): [r["4/4", s, n][t] for t in sorted(r["4/4", s, n])][:R] for s in seeds for n in nodes}
    ca = [sum(sum(A[s, n]) for n in nodes) for s in seeds]
    cb = [sum(sum(B[s, n]) for n in nodes) for s in seeds]
    d = [b - a for a, b in zip(ca, cb)]
    print("%s: %d seeds x %d nodes x %d rounds" % (path, len(seeds), len(nodes), R))
    print("  cumulative 8/0 per seed %s, sd %.2f" % (", ".join("%.2f" % x for x in ca), st.stdev(ca)))
    print("  cumulative 4/4 per seed %s, sd %.2f" % (", ".join("%.2f" % x for x in cb), st.stdev(cb)))
    print("  difference 4/4 - 8/0 per seed %s: mean %.2f, sd %.2f; unpaired sd of a difference %.2f; "
          "correlation of the two across seeds %.2f"
          % (", ".join("%.2f" % x for x in d), st.mean(d), st.stdev(d), (st.variance(ca) + st.variance(cb)) ** 0.5,
             corr(ca, cb)))
    for w in (1, 10, 20):
        xs, ys = [], []
        for k in range(0, R - w + 1, w):
            x = [sum(A[s, n][k:k + w]) / w for s in seeds for n in nodes]
            y = [sum(B[s, n][k:k + w]) / w for s in seeds for n in nodes]
            xs += [v - st.mean(x) for v in x]
            ys += [v - st.mean(y) for v in y]
        print("  windows of %2d rounds: correlation of 8/0 and 4/4 node rewards %.3f (%d pairs); "
              "var(difference) / (var 8/0 + var 4/4) %.3f"
              % (w, corr(xs, ys), len(xs), st.variance([b - a for a, b in zip(xs, ys)]) / (st.variance(xs) + st.variance(ys))))
    print("  round 1, node by node (8/0/4/4): %s" % ", ".join("%.3f/%.3f" % (A[s, n][0], B[s, n][0]) for s in seeds for n in nodes))
