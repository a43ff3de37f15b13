"""The paper preset's seeds read together from their cumulative-*.tsv files
(each one seed's run: config, seed, nodes, rounds, cumulative own reward,
cumulative batch reward): per configuration the per-seed values, their
mean, the ratio of means to 8/0's and Welch's two-sided p against 8/0, for
the own and the batch reward; then selection's share of the batch gain,
(4/4u's ratio - 1) / (4/4's ratio - 1).

    python3 seeds.py cumulative-base-b7ebe24f-seed1.tsv cumulative-base-b7ebe24f-seed2.tsv cumulative-base-1d77e626-seed3.tsv
"""
import csv
import math
import sys


def betacf(a, b, x):
    """the continued fraction of the regularized incomplete beta function (modified Lentz)"""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1 + num * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return h


def betai(a, b, x):
    if x <= 0 or x >= 1:
        return 0.0 if x <= 0 else 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(1 - x))
    if x < (a + 1) / (a + b + 2):
        return front * betacf(a, b, x) / a
    return 1 - front * betacf(b, a, 1 - x) / b


def welch_p(xs, ys):
    """two-sided p of Welch's t-test"""
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    vx = sum((x - mx) ** 2 for x in xs) / (len(xs) - 1) / len(xs)
    vy = sum((y - my) ** 2 for y in ys) / (len(ys) - 1) / len(ys)
    if vx + vy == 0:
        return float("nan")
    t = (mx - my) / math.sqrt(vx + vy)
    df = (vx + vy) ** 2 / (vx ** 2 / (len(xs) - 1) + vy ** 2 / (len(ys) - 1))
    return betai(df / 2, 0.5, df / (df + t * t))


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
