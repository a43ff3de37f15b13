"""Every 4/4 node-round's external and local groups, from each seed's
metrics (RUN/I4J4/seedN/n*/metrics.jsonl): a round that found fewer
fresh external groups in the pool filled its batch with local ones.

    python3 docs/results-smollm2-specialised/external_tsv.py SEED:RUN ... > external-groups-base-c54ca16c.tsv
"""
import glob
import json
import os
import sys

print("seed\tnode\tround\texternal_groups\tlocal_groups")
for arg in sys.argv[1:]:
    seed, run = arg.split(":", 1)
    for path in sorted(glob.glob(os.path.join(run, "I4J4", f"seed{seed}", "n*", "metrics.jsonl"))):
        for line in open(path):
            m = json.loads(line)
            print(f"{seed}\t{m['node']}\t{m['round']}\t{m['external_groups']}\t{m['local_groups']}")
