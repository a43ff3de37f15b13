#!/usr/bin/env bash
# The shared library's layers, kept by a test: every file of lib/ includes
# and calls only its own layer and those below, and no source files call
# each other in a circle. A call (or a read of a table) is a name one
# object of the build leaves undefined and another defines (nm); a circle
# is one among the sources (.c, .cu), whose headers declare and do not
# call.
#
#   layer 0   util, and schemas/ (records.h)
#   layer 1   gguf, tokenizer, sampling, tasks, train, wire, pool, stats, tb
#   layer 2   model
#   layer 3   node
#   layer 4   game
#   above     the programs (broker/ generator/ verifier/ sampler/ learner/ tools/)
#
# Within a layer, folders may use each other, but not in a circle.
set -u
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build/asan}
command -v python3 > /dev/null || { echo "SKIP layers: python3 not installed"; exit 0; }
command -v nm > /dev/null || { echo "SKIP layers: nm not installed"; exit 0; }
ls "$build"/lib/*/*.o > /dev/null 2>&1 || { echo "SKIP layers: $build/lib has no objects (make test builds them)"; exit 0; }
python3 - "$build" <<'PY'
import glob, os, re, subprocess, sys

build = sys.argv[1]
LEVEL = {"util": 0, "schemas": 0, "gguf": 1, "tokenizer": 1, "sampling": 1, "tasks": 1, "train": 1, "wire": 1,
         "pool": 1, "stats": 1, "tb": 1, "model": 2, "node": 3, "game": 4}

def level(path):
    parts = path.split("/")
    return LEVEL[parts[1]] if parts[0] == "lib" else LEVEL["schemas"]

files = [f for f in glob.glob("lib/*/*.*") + glob.glob("lib/*/*/*.*") if re.search(r"\.(c|h|cu|cuh)$", f)]
folders = {os.path.dirname(f).split("/")[1] for f in files}
unknown = sorted(folders - LEVEL.keys())
edges = {}  # source -> {source: the name it calls}
bad = []
for f in files:
    for m in re.finditer(r'^\s*#\s*include\s+"([^"]+)"', open(f, errors="replace").read(), re.M):
        inc = m.group(1)
        for cand in ("lib/" + inc, os.path.join(os.path.dirname(f), inc), "schemas/" + inc):
            if os.path.exists(cand):
                target = os.path.normpath(cand)
                break
        else:
            if inc.endswith("_generated.h") or inc.endswith(".inc") or inc.endswith(".pb-c.h"):
                continue  # made by the build from schemas/, lib/pool/pool.lua and lib/tb/event.proto
            bad.append("%s includes \"%s\", which is not in lib/ or schemas/" % (f, inc))
            continue
        if level(target) > level(f):
            bad.append("%s (layer %d) includes %s (layer %d): an include that climbs" % (f, level(f), target,
                                                                                       level(target)))

# calls and reads: a name one object leaves undefined and another defines
# (objects whose source is gone are left over from an older tree)
defined, wanted = {}, {}
for o in glob.glob(build + "/lib/*/*.o") + glob.glob(build + "/lib/*/*/*.o"):
    rel = os.path.relpath(o, build)
    src = rel[:-2] if rel.endswith(".cu.o") else rel[:-2] + ".c"
    if not os.path.exists(src):
        continue
    out = subprocess.run(["nm", "-P", o], capture_output=True, text=True).stdout
    for line in out.splitlines():
        sym, kind = line.split()[:2]
        if kind == "U":
            wanted.setdefault(src, set()).add(sym)
        elif kind in "TDBRVW":
            defined.setdefault(sym, set()).add(src)
for a, syms in wanted.items():
    for s in syms:
        for b in defined.get(s, ()):
            if a != b:
                edges.setdefault(a, {}).setdefault(b, s)

for a, outs in sorted(edges.items()):
    for b, sym in sorted(outs.items()):
        if level(b) > level(a):
            bad.append("%s (layer %d) calls %s in %s (layer %d): a call that climbs" % (a, level(a), sym, b, level(b)))

# circles: strongly connected components of more than one unit (Tarjan)
index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]
def visit(v):
    index[v] = low[v] = counter[0]
    counter[0] += 1
    stack.append(v)
    on.add(v)
    for w in edges.get(v, {}):
        if w not in index:
            visit(w)
            low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop()
            on.discard(w)
            comp.append(w)
            if w == v:
                break
        if len(comp) > 1:
            comps.append(sorted(comp))
sys.setrecursionlimit(10000)
for v in sorted(set(edges) | {b for outs in edges.values() for b in outs}):
    if v not in index:
        visit(v)
for comp in comps:
    ties = ["%s calls %s" % (a, edges[a][b]) for a in comp for b in comp if b in edges.get(a, {})]
    bad.append("a circle: %s (%s)" % (" <-> ".join(comp), "; ".join(ties)))
for u in unknown:
    bad.append("lib/%s has no layer: give it one in tests/t_layers.sh" % u)

for b in bad:
    print(b)
print("%s layers: %d files, %d calls between sources, %d problems"
      % ("PASS" if not bad else "FAIL", len(files), sum(len(o) for o in edges.values()), len(bad)))
PY
