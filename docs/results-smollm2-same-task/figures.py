#!/usr/bin/env python3
"""Every figure of docs/real-models.md's same-task section, from the files
collect.py copied here (plain Python 3, no packages):

    python3 docs/results-smollm2-same-task/figures.py

  - per seed, per node and configuration: held-out greedy pass@1 at round
    0 and at the last round, the change, and where the answers were kept
    (completions-*.jsonl.gz) McNemar's exact p of the change (two-sided
    binomial over the questions that turned);
  - over seeds: each configuration's mean pass@1 at the end (nodes
    averaged within a seed), 4/4 - 8/0 and Welch's p over the seeds;
  - cumulative own reward (every own completion scored) and the paper's
    batch reward (every completion trained on), summed over nodes and
    rounds, per seed, and 4/4's ratio to 8/0;
  - own completions a node-round; 4/4's external groups a round and their
    reward; the learners' and generators' peak resident memory.
"""
import glob
import gzip
import json
import math
import os
import statistics
from math import comb

here = os.path.dirname(os.path.abspath(__file__))


def tsv(pattern):
    rows = []
    for path in sorted(glob.glob(os.path.join(here, pattern))):
        lines = open(path).read().split("\n")
        head = lines[0].split("\t")
        rows += [dict(zip(head, l.split("\t"))) for l in lines[1:] if l]
    return rows


def betainc(a, b, x):
    """the regularized incomplete beta I_x(a, b) (a continued fraction)"""
    if x <= 0 or x >= 1:
        return 0.0 if x <= 0 else 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(1 - x))
    if x > (a + 1) / (a + b + 2):
        return 1 - betainc(b, a, 1 - x)
    f, c, d = 1.0, 1.0, 0.0
    for i in range(400):
        m = i // 2
        if i == 0:
            num = 1.0
        elif i % 2 == 0:
            num = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
        else:
            num = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))
        d = 1 + num * d
        d = 1 / (d if abs(d) > 1e-30 else 1e-30)
        c = 1 + num / (c if abs(c) > 1e-30 else 1e-30)
        f *= c * d
        if abs(1 - c * d) < 1e-12:
            break
    return front * (f - 1) / a


def welch(x, y):
    """Welch's two-sided p for the means of x and y (None under 2 each)"""
    if len(x) < 2 or len(y) < 2:
        return None
    vx, vy = statistics.variance(x) / len(x), statistics.variance(y) / len(y)
    if vx + vy == 0:
        return None
    t = (statistics.mean(x) - statistics.mean(y)) / math.sqrt(vx + vy)
    df = (vx + vy) ** 2 / (vx ** 2 / (len(x) - 1) + vy ** 2 / (len(y) - 1))
    return betainc(df / 2, 0.5, df / (df + t * t))


def mcnemar(path, first, last):
    """questions right at round first and wrong at last, the other way, and
    the exact two-sided p; None without the answers"""
    if not os.path.exists(path):
        return None
    right = {}
    with gzip.open(path, "rt") as f:
        for line in f:
            r = json.loads(line)
            if r.get("sample", 0) != 0 or r["round"] not in (first, last):
                continue
            key = (r["family"], r["question"])
            answers = right.setdefault(r["round"], {})
            while key in answers:
                key += ("again",)
            answers[key] = r["score"] >= 1
    a, b = right.get(first, {}), right.get(last, {})
    lost = sum(1 for q in a if q in b and a[q] and not b[q])
    gained = sum(1 for q in a if q in b and not a[q] and b[q])
    n = lost + gained
    p = min(1.0, 2 * sum(comb(n, k) for k in range(min(lost, gained) + 1)) / 2 ** n) if n else 1.0
    return gained, lost, p


ev = tsv("eval-seed*.tsv")
rd = tsv("rounds-seed*.tsv")
seeds = sorted({r["seed"] for r in ev}, key=int)
configs = sorted({r["config"] for r in ev}, key=lambda c: (-int(c.split("/")[0]), c))
end = {}  # (config, seed) -> [pass1 at the end of each node]
for seed in seeds:
    print("## Seed %s: held-out greedy pass@1, per node\n" % seed)
    print("| node | config | round 0 | last round | pass@1 then | change | turned right / wrong | McNemar p |")
    print("|---|---|---|---|---|---|---|---|")
    nodes = sorted({r["node"] for r in ev if r["seed"] == seed})
    for node in nodes:
        for c in configs:
            rows = sorted((r for r in ev if r["seed"] == seed and r["node"] == node and r["config"] == c),
                          key=lambda r: int(r["round"]))
            if not rows:
                continue
            first, last = rows[0], rows[-1]
            p0, p1 = float(first["pass1"]), float(last["pass1"])
            if int(last["round"]) > 0:
                end.setdefault((c, seed), []).append(p1)
            mc = mcnemar(os.path.join(here, "completions-%s-seed%s-%s.jsonl.gz" % (c.replace("/", "-"), seed, node)),
                         int(first["round"]), int(last["round"]))
            print("| %s | %s | %.3f | %s | %.3f | %+.3f | %s | %s |" % (
                node, c, p0, last["round"], p1, p1 - p0, "%d / %d" % mc[:2] if mc else "n/a",
                "%.3g" % mc[2] if mc else "n/a"))
    print()

print("## Over seeds: mean pass@1 at the last round (nodes averaged within a seed)\n")
print("| config | per seed | mean |")
print("|---|---|---|")
means = {}
for c in configs:
    per = [statistics.mean(end[(c, s)]) for s in seeds if (c, s) in end]
    means[c] = per
    print("| %s | %s | %s |" % (c, ", ".join("%.3f" % x for x in per), "%.3f" % statistics.mean(per) if per else "n/a"))
if "8/0" in means:
    for c in configs:
        if c == "8/0" or not means[c] or not means["8/0"]:
            continue
        p = welch(means[c], means["8/0"])
        print("\n%s - 8/0: %+.3f (Welch p over seeds: %s)" % (
            c, statistics.mean(means[c]) - statistics.mean(means["8/0"]), "%.3g" % p if p is not None else
            "n/a, fewer than 2 seeds a side"))
print()

print("## Rewards, completions and external groups\n")
print("| config | seed | rounds | cumulative own reward | cumulative batch reward | own completions a node-round |"
      " external groups a node-round | their reward |")
print("|---|---|---|---|---|---|---|---|")
cum = {}
for c in configs:
    for s in seeds:
        rows = [r for r in rd if r["config"] == c and r["seed"] == s]
        if not rows:
            continue
        own = sum(float(r["own_reward"]) for r in rows)
        batch = sum(float(r["batch_reward"]) for r in rows)
        cum[(c, s)] = (own, batch)
        ext = [r for r in rows if int(r["external_groups"]) > 0]
        print("| %s | %s | %d | %.2f | %.2f | %.1f | %.2f | %s |" % (
            c, s, max(int(r["round"]) for r in rows), own, batch,
            statistics.mean(int(r["own_completions"]) for r in rows),
            statistics.mean(int(r["external_groups"]) for r in rows),
            "%.3f" % statistics.mean(float(r["external_reward"]) for r in ext) if ext else "n/a"))
peaks = {}  # (config, seed, node) -> the learner's and generator's peaks at the end
for r in rd:
    if "learner_peak_gb" in r:
        k = (r["config"], r["seed"], r["node"])
        old = peaks.get(k, (0, 0))
        peaks[k] = (max(old[0], float(r["learner_peak_gb"])), max(old[1], float(r["generator_peak_gb"])))
if peaks:
    print("\neach node's peak resident memory over its run: learners %.2f to %.2f GB, generators %.2f to %.2f GB" % (
        min(p[0] for p in peaks.values()), max(p[0] for p in peaks.values()),
        min(p[1] for p in peaks.values()), max(p[1] for p in peaks.values())))
for c in configs:
    for s in seeds:
        if c != "8/0" and (c, s) in cum and ("8/0", s) in cum:
            mine, alone = cum[(c, s)], cum[("8/0", s)]
            print("\nseed %s, %s against 8/0: own reward %.3fx, batch reward %.3fx" % (
                s, c, mine[0] / alone[0], mine[1] / alone[1]))
