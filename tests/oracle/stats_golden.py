"""Golden values for tests/test_stats.c from scipy: Welch's t-test, exact
permutation tests of |mean difference|, Benjamini-Hochberg and the regularized incomplete beta.
Run from the repository root: .venv/bin/python tests/oracle/stats_golden.py
Writes tests/golden/stats/scipy.txt, one case a line:
  welch NA NB a... b... T DF P
  perm NA NB a... b... P          (exact: every relabelling)
  bh N p... adjusted...
  betai A B X VALUE
  paired N a... b... T P          (a[i] and b[i] a pair: the same seed)"""
import numpy as np
from scipy import special, stats

rng = np.random.default_rng(7)
lines = []


def nums(xs):
    return " ".join(repr(float(x)) for x in xs)


welch_cases = [
    ([561.79, 540.2, 580.0], [1093.31, 1010.5, 1150.2]),
    ([0.1, 0.2, 0.3, 0.4], [0.15, 0.35, 0.2, 0.6, 0.55]),
    (list(rng.normal(0.3, 0.05, 8)), list(rng.normal(0.36, 0.09, 8))),
    (list(rng.normal(10, 1, 2)), list(rng.normal(11, 5, 30))),
]
for a, b in welch_cases:
    r = stats.ttest_ind(a, b, equal_var=False)
    se2 = np.var(a, ddof=1) / len(a) + np.var(b, ddof=1) / len(b)
    df = se2 ** 2 / ((np.var(a, ddof=1) / len(a)) ** 2 / (len(a) - 1) + (np.var(b, ddof=1) / len(b)) ** 2 / (len(b) - 1))
    lines.append(f"welch {len(a)} {len(b)} {nums(a)} {nums(b)} {float(r.statistic)!r} {float(df)!r} {float(r.pvalue)!r}")

perm_cases = [
    ([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]),
    ([0.31, 0.29, 0.35, 0.30], [0.40, 0.33, 0.38, 0.36]),
    (list(rng.normal(0, 1, 6)), list(rng.normal(0.8, 1, 7))),
]
for a, b in perm_cases:
    r = stats.permutation_test((a, b), lambda x, y: abs(np.mean(x) - np.mean(y)), permutation_type="independent",
                               alternative="greater", n_resamples=10 ** 6)
    lines.append(f"perm {len(a)} {len(b)} {nums(a)} {nums(b)} {float(r.pvalue)!r}")

for p in ([0.01, 0.04, 0.03, 0.005, 0.2], list(rng.uniform(0, 0.2, 12))):
    adj = stats.false_discovery_control(p, method="bh")
    lines.append(f"bh {len(p)} {nums(p)} {nums(adj)}")

for a, b, x in [(0.5, 0.5, 0.3), (2.5, 0.5, 0.9), (40.0, 0.5, 0.97), (3.0, 7.0, 0.2), (100.0, 100.0, 0.51)]:
    lines.append(f"betai {a!r} {b!r} {x!r} {float(special.betainc(a, b, x))!r}")

# a study's configurations paired by seed (common random numbers)
paired_rng = np.random.default_rng(11)
base = paired_rng.normal(200, 8, 5)
paired_cases = [
    ([216.91, 217.46, 212.83], [201.45, 198.21, 191.51]),
    (list(base + paired_rng.normal(3, 1, 5)), list(base)),
    (list(paired_rng.normal(0.5, 0.1, 12)), list(paired_rng.normal(0.52, 0.1, 12))),
]
for a, b in paired_cases:
    r = stats.ttest_rel(a, b)
    lines.append(f"paired {len(a)} {nums(a)} {nums(b)} {float(r.statistic)!r} {float(r.pvalue)!r}")

with open("tests/golden/stats/scipy.txt", "w") as f:
    f.write("\n".join(lines) + "\n")
print(f"wrote {len(lines)} cases to tests/golden/stats/scipy.txt")
