"""A specialised run's evaluations as one table (eval-base-SHA-seedN.tsv):
every node's eval.jsonl under RUN/I8J0/seedN and RUN/I4J4/seedN, one row an
evaluation: config ("8/0 base SHA, R rounds", R from RUN/manifest.json), seed,
node, round, pass@1 on the union, format, and pass@1 on sums, differences
and products.

    python3 docs/results-specialised/eval_tsv.py RUN SEED SHA > eval-base-SHA-seedSEED.tsv
"""
import glob
import json
import os
import sys

run, seed, sha = sys.argv[1], sys.argv[2], sys.argv[3]
rounds = json.load(open(os.path.join(run, "manifest.json")))["rounds"]
print("config\tseed\tnode\tround\tpass1\tformat\tadd\tsub\tmul")
for folder, config in (("I8J0", "8/0"), ("I4J4", "4/4")):
    for path in sorted(glob.glob(os.path.join(run, folder, f"seed{seed}", "n*", "eval.jsonl"))):
        for line in open(path):
            e = json.loads(line)
            f = e["families"]
            print(f"{config} base {sha}, {rounds} rounds\t{seed}\t{e['node']}\t{e['round']}\t{e['pass1']:.4f}\t{e['format']:g}\t"
                  + "\t".join(f"{f['basic_arithmetic#' + op]:g}" for op in ("add", "sub", "mul")))
