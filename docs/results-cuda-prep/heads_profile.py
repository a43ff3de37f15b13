"""What moving heads costs a layer in the H200's ncu profile of the
two-layer step (docs/results-cuda-h200/call2-ncu-2-layers.csv): the
kernels of layer 0's forward pass (launches 2 to 30) and of its backward
pass with the forward pass run again (launches 229 to 285), by kind.

    .venv/bin/python docs/results-cuda-prep/heads_profile.py
"""
import csv
import os

here = os.path.dirname(os.path.abspath(__file__))
path = os.path.join(here, "..", "results-cuda-h200", "call2-ncu-2-layers.csv")
rows = [l for l in open(path) if not l.startswith("==")]
us = {}
for r in csv.DictReader(rows):
    if r["Metric Name"] != "gpu__time_duration.sum":
        continue
    scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3}[r["Metric Unit"]]
    us[int(r["ID"])] = (r["Kernel Name"].split("(")[0], float(r["Metric Value"].replace(",", "")) * scale)
layer = [i for i in list(range(2, 31)) + list(range(229, 286))]
total = sum(us[i][1] for i in layer)
moving = sum(us[i][1] for i in layer if us[i][0] in ("heads_split_kernel", "heads_merge_kernel"))
softmax = sum(us[i][1] for i in layer if us[i][0].startswith("causal_softmax"))
# the batched products of attention: the launches right after the splits and softmaxes
attention_ids = []
for i in layer:
    if us[i][0] in ("heads_split_kernel", "heads_merge_kernel") or us[i][0].startswith("causal_softmax"):
        attention_ids.append(i)
    elif us[i][0].startswith("nvjet") and any(us[j][0] in ("heads_split_kernel",) or us[j][0].startswith("causal_softmax")
                                              for j in (i - 1, i - 2)):
        attention_ids.append(i)
    elif us[i][0].startswith("nvjet") and us[i + 1][0] == "heads_merge_kernel":
        attention_ids.append(i)
attention = sum(us[i][1] for i in attention_ids)
print("layer 0, forward and backward (with forward again): %.0f us over %d launches" % (total, len(layer)))
print("  attention: %.0f us (heads_split/heads_merge %.0f, softmax and its backward %.0f, batched products %.0f)"
      % (attention, moving, softmax, attention - moving - softmax))
for name in ("heads_split_kernel", "heads_merge_kernel"):
    ts = [us[i][1] for i in layer if us[i][0] == name]
    print("  %s: %d launches, %s us" % (name, len(ts), ", ".join("%.1f" % t for t in ts)))
