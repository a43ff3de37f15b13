#!/usr/bin/env bash
# A node's TensorBoard event files, read by TensorBoard's own reader
# (EventAccumulator, from the tensorboard package in .venv: installed there
# with tests/oracle/setup.sh tensorboard when missing; without PyPI the
# test skips with the reason):
#   - a node of the micro model runs 8 rounds with its evaluator scoring
#     every 2; its learner is SIGKILLed after round 3 and started again;
#   - every number of every metrics.jsonl and eval.jsonl line is a scalar
#     in tb/ at the line's round, equal to it as a 32-bit float, under the
#     tag its path and group give (train/loss, local/zero_adv_share,
#     heldout/pass1, ...), and nothing else is;
#   - no record of any file fails its CRCs (checked here, record by record);
#   - the restarted learner wrote a file of its own, and the killed one's
#     file still reads whole;
#   - a file cut in the middle of its last record (a process killed
#     mid-write) is read by TensorBoard up to the record before;
#   - the manifest is a text at the learner's first round;
#   - live: TensorBoard's server (its default loader) serving copies of
#     a learner's and the evaluator's files cut to half their records
#     shows both files' last steps there, and after the copies grow to
#     the whole files, the last steps of both;
#   - SAPO_TENSORBOARD=0: a learner that starts writes no file (with 1 the
#     same start writes one).
set -u
cd "$(dirname "$0")/.."
bin=${SAPO_BIN:-build/asan/bin}
tmp=$(mktemp -d)
. tests/nodes.sh
need tensorboard broker learner sampler generator verifier evaluate redis-server python3
trap "${KEEP_TMP:+:} nodes_cleanup" EXIT
check() { if eval "$2"; then echo "PASS tensorboard_$1"; else echo "FAIL tensorboard_$1"; fi; }

py=.venv/bin/python
if ! "$py" -c 'import tensorboard' 2> /dev/null; then
  tests/oracle/setup.sh tensorboard > "$tmp/setup.log" 2>&1
  "$py" -c 'import tensorboard' 2> /dev/null ||
    { echo "SKIP tensorboard: TensorBoard could not be installed in .venv (tests/oracle/setup.sh tensorboard): $(tail -n 1 "$tmp/setup.log")"; exit 0; }
fi

nodes_init tensorboard
port=$((20000 + $$ % 20000))
redis-server --port $port --bind 127.0.0.1 --save "" --appendonly no > /dev/null 2>&1 &
redis_pid=$!
export SAPO_REDIS=redis://127.0.0.1:$port SAPO_LOCAL_GROUPS=4 SAPO_EXTERNAL_GROUPS=0 SAPO_ROUNDS=8 SAPO_CHECKPOINT_EVERY=2 \
       SAPO_SWARM=tb$$
node_start k0 5
SAPO_NODE=k0 SAPO_RUN=$tmp/k0 SAPO_BROKER=$tmp/k0 SAPO_SEED=5 "$bin/evaluate" 2 1 >> "$tmp/k0/evaluate.log" 2>&1 &
pids+=($!)
pid_k0_evaluate=$!
for _ in $(seq 900); do [ "$(rows k0)" -ge 3 ] && break; sleep 0.2; done
kill -9 "$pid_k0_learner"
wait "$pid_k0_learner" 2> /dev/null
node_proc k0 learner
for _ in $(seq 1200); do kill -0 "$pid_k0_learner" 2> /dev/null || break; sleep 0.2; done
for _ in $(seq 600); do kill -0 "$pid_k0_evaluate" 2> /dev/null || break; sleep 0.2; done
check node_ran 'tail -n 1 "$tmp/k0/metrics.jsonl" | grep -q "\"round\":8," && grep -q "\"round\":8," "$tmp/k0/eval.jsonl" ||
  { tail -n 5 "$tmp"/k0/*.log; false; }'

# a copy of the first learner file, cut 5 bytes into its last record
first=$(ls "$tmp"/k0/tb/*learner* | head -1)
mkdir -p "$tmp/cut"
"$py" - "$first" "$tmp/cut/events.out.tfevents.cut" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
at, starts = 0, []
while at < len(data):
    starts.append(at)
    at += 16 + struct.unpack("<Q", data[at:at + 8])[0]
open(sys.argv[2], "wb").write(data[:starts[-1] + 5])
print(len(starts) - 1, file=open(sys.argv[2] + ".whole", "w"))
PY

"$py" - "$tmp/k0" "$tmp/cut" > "$tmp/verdicts" 2> "$tmp/reader.log" <<'PY'
import glob, json, os, struct, sys
import numpy as np
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

node, cut = sys.argv[1:]
ok = lambda name, cond: print(("PASS" if cond else "FAIL") + " tensorboard_" + name)

# CRC-32C and TFRecord's mask, written here from the definition
table = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
    table.append(c)
def masked(b):
    c = 0xFFFFFFFF
    for x in b:
        c = table[(c ^ x) & 0xFF] ^ (c >> 8)
    c ^= 0xFFFFFFFF
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF
files = sorted(glob.glob(node + "/tb/events.out.tfevents.*"))
bad = records = 0
for f in files:
    data = open(f, "rb").read()
    at = 0
    while at < len(data):
        n = struct.unpack("<Q", data[at:at + 8])[0]
        head_ok = struct.unpack("<I", data[at + 8:at + 12])[0] == masked(data[at:at + 8])
        body_ok = struct.unpack("<I", data[at + 12 + n:at + 16 + n])[0] == masked(data[at + 12:at + 12 + n])
        bad += not (head_ok and body_ok)
        records += 1
        at += 16 + n
print("files:", [os.path.basename(f) for f in files], "records:", records, "bad:", bad, file=sys.stderr)
ok("crc_every_record", records > 10 and bad == 0)
learners = [f for f in files if ".learner" in f]
ok("file_per_learner_start", len(learners) == 2 and sum(".evaluate" in f for f in files) == 1)

acc = EventAccumulator(node + "/tb", size_guidance={"scalars": 0, "tensors": 0})
acc.Reload()
tags = acc.Tags()
seen = {(t, e.step): e.value for t in tags["scalars"] for e in acc.Scalars(t)}

groups = {"reward": ["reward_mean", "reward_external", "batch_reward"],
          "completions": ["completion_length", "completion_length_max", "truncated_share", "format_share", "entropy"],
          "groups": ["local_groups", "external_groups", "skipped_groups", "packed_groups", "external_logprobs",
                     "masked_truncated"],
          "train": ["policy_version", "loss", "grad_norm", "tokens", "lr", "positions", "clip_region", "clip_low",
                    "clip_high", "ratio", "ratio_min", "ratio_max", "kl"],
          "lost": ["rounds_lost", "versions_lost", "rounds_skipped"]}
group_of = {f: g for g, fs in groups.items() for f in fs}
def numbers(obj, path):
    for k, v in obj.items():
        if isinstance(v, bool) or v is None or isinstance(v, str):
            continue
        if isinstance(v, dict):
            yield from numbers(v, path + [k])
        elif isinstance(v, (int, float)):
            yield "/".join(path + [k]), v
want = {}
for line in open(node + "/metrics.jsonl"):
    r = json.loads(line)
    for k, v in r.items():
        if k in ("round", "time"):
            continue
        top = [group_of[k]] if not isinstance(v, dict) and k in group_of else []
        for tag, x in numbers({k: v}, top):
            want[(tag, r["round"])] = x
for line in open(node + "/eval.jsonl"):
    r = json.loads(line)
    for tag, x in numbers({k: v for k, v in r.items() if k not in ("round", "time")}, ["heldout"]):
        want[(tag, r["round"])] = x
missing = [k for k in want if k not in seen]
wrong = [(k, want[k], seen[k]) for k in want if k in seen and np.float32(want[k]) != np.float32(seen[k])]
extra = [k for k in seen if k not in want]
print("scalars:", len(seen), "wanted:", len(want), "missing:", missing[:5], "wrong:", wrong[:5], "extra:", extra[:5],
      file=sys.stderr)
ok("scalars_equal_lines", len(want) > 300 and not missing and not wrong and not extra)
ok("tags_grouped", ("train/loss", 8) in seen and ("heldout/pass1", 8) in seen and ("local/zero_adv_share", 8) in seen
   and ("reward/reward_mean", 1) in seen)
# a round the restarted learner trained again is not logged again, in
# either; one that came too late is skipped in both (metrics.jsonl counts it)
rounds = [json.loads(l)["round"] for l in open(node + "/metrics.jsonl")]
loss = [e.step for e in acc.Scalars("train/loss")]
ok("every_round_once", rounds[-1] == 8 and loss == rounds and rounds == sorted(set(rounds)))

text = acc.Tensors("manifest") if "manifest" in tags["tensors"] else []
body = text[0].tensor_proto.string_val[0].decode() if text else ""
print("manifest:", body[:300], file=sys.stderr)
ok("manifest_text", len(text) == 2 and text[0].step == 0 and "node **k0**" in body and '"tensorboard":' in body)

whole = int(open(cut + "/events.out.tfevents.cut.whole").read())
c = EventAccumulator(cut, size_guidance={"scalars": 0})
c.Reload()
steps = sorted({e.step for t in c.Tags()["scalars"] for e in c.Scalars(t)})
print("cut file:", whole, "whole records, steps read:", steps, file=sys.stderr)
# the version record and the manifest are records without a scalar
ok("cut_file_reads_to_last_record", len(steps) == whole - 2 and steps == list(range(1, whole - 1)))
PY
cat "$tmp/verdicts"
grep -q FAIL "$tmp/verdicts" && cat "$tmp/reader.log"
[ -s "$tmp/verdicts" ] || { echo "FAIL tensorboard_reader"; cat "$tmp/reader.log"; }

# live: a TensorBoard server follows both files of the folder as they grow
mkdir -p "$tmp/live/k0/tb"
"$py" - "$tmp/k0/tb" "$tmp/live" $((30000 + $$ % 20000)) > "$tmp/live.log" 2>&1 <<'PY'
import glob, json, os, struct, subprocess, sys, time, urllib.parse, urllib.request
src, live, port = sys.argv[1], sys.argv[2], sys.argv[3]
# the evaluator's file and the learner file with the most records
files = [max(glob.glob(src + "/*.learner"), key=os.path.getsize)] + glob.glob(src + "/*.evaluate")
def records(f):
    d, out, at = open(f, "rb").read(), [], 0
    while at < len(d):
        n = struct.unpack("<Q", d[at:at + 8])[0]
        out.append(d[at:at + 16 + n])
        at += 16 + n
    return out
recs = {os.path.basename(f): records(f) for f in files}
def write(part):
    for name, rs in recs.items():
        with open(live + "/k0/tb/" + name, "ab") as o:
            o.write(b"".join(part(rs)))
def last(tag):
    u = "http://127.0.0.1:%s/data/plugin/scalars/scalars?%s" % (port, urllib.parse.urlencode({"run": "k0/tb", "tag": tag}))
    try:
        return json.load(urllib.request.urlopen(u, timeout=3))[-1][1]
    except Exception:
        return None
def settle(want):
    for _ in range(60):
        got = (last("train/loss"), last("heldout/pass1"))
        if got == want:
            break
        time.sleep(0.5)
    return got
# a cut after the version record, the manifest and a round
cut = lambda rs: max(len(rs) // 2, 3)
write(lambda rs: rs[:cut(rs)])
tb = subprocess.Popen([sys.executable, "-m", "tensorboard.main", "--logdir", live, "--port", port, "--host", "127.0.0.1",
                       "--reload_interval", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    def ends(d):
        a = EventAccumulator(d, size_guidance={"scalars": 0})
        a.Reload()
        return (a.Scalars("train/loss")[-1].step, a.Scalars("heldout/pass1")[-1].step)
    half = ends(live + "/k0/tb")
    got_half = settle(half)
    write(lambda rs: rs[cut(rs):])
    whole = ends(live + "/k0/tb")
    got_whole = settle(whole)
    print("half:", half, "served", got_half, "whole:", whole, "served", got_whole)
    print("PASS" if got_half == half and got_whole == whole and half != whole else "FAIL")
finally:
    tb.kill()
PY
check live 'tail -n 1 "$tmp/live.log" | grep -qx PASS || { cat "$tmp/live.log"; false; }'

# the setting: a learner past its last round starts and stops; with 0 it
# makes no file, with 1 it makes one
n0=$(ls "$tmp"/k0/tb | wc -l)
SAPO_TENSORBOARD=0 SAPO_NODE=k0 SAPO_RUN=$tmp/k0 SAPO_BROKER=$tmp/k0 SAPO_SEED=5 timeout 60 "$bin/learner" > "$tmp/off.log" 2>&1
n1=$(ls "$tmp"/k0/tb | wc -l)
SAPO_TENSORBOARD=1 SAPO_NODE=k0 SAPO_RUN=$tmp/k0 SAPO_BROKER=$tmp/k0 SAPO_SEED=5 timeout 60 "$bin/learner" > "$tmp/on.log" 2>&1
n2=$(ls "$tmp"/k0/tb | wc -l)
check setting_off '[ "$n1" = "$n0" ] && [ "$n2" = $((n0 + 1)) ] || { echo "files: $n0, off $n1, on $n2"; cat "$tmp/off.log"; false; }'
