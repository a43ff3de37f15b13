#!/usr/bin/env bash
# Soak: a 2-node swarm (scripts/swarm.sh) runs for a while; every process's
# resident memory (VmRSS, and RssAnon: its own part, without shared
# library pages) and open file descriptors are sampled, and the growth
# after the warm-up is reported per process, with the error lines
# of the nodes' logs. Fails when a process dies, RSS grows by more than
# --max-growth percent or descriptors grow after the warm-up.
#
#   scripts/soak.sh [--minutes M] [--warmup W] [--interval S] [--run DIR] [--max-growth P]
#   scripts/soak.sh --report [--run DIR] [--warmup W] [--max-growth P]   (the samples of a past run again)
#
# Defaults: 120 minutes, 10 minutes of warm-up, a sample every 10 s,
# 5 % growth allowed. Any SAPO_* variable reaches the nodes (SAPO_MODEL for
# another model than the tiny one). Samples go to DIR/soak.tsv.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=120 warmup=10 interval=10 run=run/soak max_growth=5 report=0
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) minutes=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --interval) interval=$2; shift 2 ;;
    --run) run=$2; shift 2 ;;
    --max-growth) max_growth=$2; shift 2 ;;
    --report) report=1; shift ;;
    *) echo "soak: unknown flag '$1'" >&2; exit 2 ;;
  esac
done
out=$run/soak.tsv
[ "$report" = 0 ] || [ -f "$out" ] || { echo "soak: --report: no samples at $out" >&2; exit 2; }
if [ "$report" = 0 ]; then
scripts/swarm.sh start --nodes 2 --ij 2/2 --rounds 0 --run "$run" > "$run.start.log" 2>&1 ||
  { cat "$run.start.log" >&2; exit 1; }
trap 'scripts/swarm.sh stop --run "$run" > /dev/null' EXIT
# every descendant of the swarm's node runners, as "pid node/name"
procs() {
  local roots
  roots=$(awk '$1 == "node" {print $2}' "$run/pids")
  ps -e -o pid=,ppid=,comm= | awk -v roots="$roots" '
    BEGIN { n = split(roots, r, " "); for (i = 1; i <= n; i++) keep[r[i]] = "n" (i - 1) }
    { pid[NR] = $1; ppid[NR] = $2; comm[NR] = $3 }
    END { changed = 1
          while (changed) { changed = 0
            for (i = 1; i <= NR; i++) if (!(pid[i] in keep) && (ppid[i] in keep)) { keep[pid[i]] = keep[ppid[i]]; changed = 1 } }
          for (i = 1; i <= NR; i++) if ((pid[i] in keep) && comm[i] ~ /^(broker|learner|sampler|generator|verifier)$/)
            print pid[i], keep[pid[i]] "/" comm[i] }'
}
echo -e "t\tproc\tpid\trss_kb\tanon_kb\tfds" > "$out"
start=$(date +%s) end=$(( $(date +%s) + minutes * 60 ))
while [ "$(date +%s)" -lt "$end" ]; do
  t=$(( $(date +%s) - start ))
  procs | while read -r pid name; do
    # VmRSS, and RssAnon: the process's own memory, without the pages of
    # shared libraries it has touched so far (most of a small process)
    read -r rss anon < <(awk '/^VmRSS/ {r = $2} /^RssAnon/ {a = $2} END {print r, a}' "/proc/$pid/status" 2> /dev/null) || continue
    fds=$(ls "/proc/$pid/fd" 2> /dev/null | wc -l)
    [ -n "$rss" ] && echo -e "$t\t$name\t$pid\t$rss\t$anon\t$fds" >> "$out"
  done
  sleep "$interval"
done
fi
python3 - "$out" "$warmup" "$max_growth" "$run" <<'PY'
import sys, glob, collections, statistics
path, warmup, max_growth, run = sys.argv[1], float(sys.argv[2]) * 60, float(sys.argv[3]), sys.argv[4]
rows = [l.rstrip("\n").split("\t") for l in open(path)]
head, rows = rows[0], rows[1:]
col = {name: i for i, name in enumerate(head)}
by = collections.defaultdict(list)
for r in rows:
    anon = int(r[col["anon_kb"]]) if "anon_kb" in col and r[col["anon_kb"]] else 0
    by[r[col["proc"]]].append((int(r[col["t"]]), int(r[col["pid"]]), int(r[col["rss_kb"]]), int(r[col["fds"]]), anon))
bad = False
# A process's resident size moves with its work (a generator's KV cache
# is allocated for each call, mapped on its own, and freed after), so
# "flat" compares levels, not single samples: growth% is the floor of the
# last tenth of the run after the warm-up (its 10th percentile) against
# the floor of its first tenth.
# A leak lifts the floor; work in progress only lifts peak%. The median
# was the level until a 75-minute soak: once completions grew long, a
# generator was mid-call in most samples, and its median rose 7.5 % while
# its floor moved 0.1 % and its heap held under 1 MB. median% is the
# median's growth, shown beside it. anon% is growth% for RssAnon (the
# process's own pages). Descriptors
# compare the first sample with the fewest of the last three (a checkpoint
# file open while sampling is not growth).
print("%-14s %5s %9s %9s %9s %8s %8s %6s %6s %5s %6s" % ("process", "pids", "rss_start", "rss_end", "rss_max",
      "growth%", "median%", "anon%", "peak%", "fd_w", "fd_end"))
for name in sorted(by):
    s = by[name]
    pids = {x[1] for x in s}
    after = [x for x in s if x[0] >= warmup] or s[-1:]
    k = max(1, len(after) // 10)
    level = lambda xs, i: sorted(x[i] for x in xs)[len(xs) // 10]
    start, end = level(after[:k], 2), level(after[-k:], 2)
    growth = 100.0 * (end - start) / start
    m0, m1 = statistics.median(x[2] for x in after[:k]), statistics.median(x[2] for x in after[-k:])
    median = 100.0 * (m1 - m0) / m0
    a0, a1 = level(after[:k], 4), level(after[-k:], 4)
    anon = 100.0 * (a1 - a0) / a0 if a0 else float("nan")
    rss_max = max(x[2] for x in after)
    peak = 100.0 * (rss_max - start) / start
    fd_end = min(x[3] for x in after[-3:])
    bad |= len(pids) > 1 or growth > max_growth or fd_end > after[0][3]
    print("%-14s %5d %9d %9d %9d %8.1f %8.1f %6.1f %6.1f %5d %6d" % (name, len(pids), start, end, rss_max, growth,
          median, anon, peak, after[0][3], fd_end))
errors = [l for f in glob.glob(run + "/n*/node.log") for l in open(f, errors="replace") if " error: " in l]
print("error lines in the node logs:", len(errors))
for l in errors[:5]: print("  " + l.rstrip())
print("soak: " + ("FAIL" if bad or errors else "OK") + " (restarted processes, RSS level growth over %g %% or fd growth after %g min count as failures)" % (max_growth, warmup / 60))
sys.exit(1 if bad or errors else 0)
PY
