#!/usr/bin/env python3
"""Copies one seed of the same-task study out of its run folder into the
files this folder keeps (every figure of docs/real-models.md's section is
recomputed from them by figures.py):

    python3 docs/results-smollm2-same-task/collect.py RUN SEED [PART]

RUN is the study's folder (scripts/experiment.sh --run), SEED its seed;
PART names a study that ran some of a seed's configurations (a seed's
8/0 in one session, its 4/4 in another): its files are named
eval-seedS-PART.tsv and so on, read with the others by figures.py:
  eval-seedS.tsv     every held-out evaluation: config, seed, node, round,
                     pass@1, format share, questions
  rounds-seedS.tsv   every node-round: own reward (every own completion the
                     sampler scored), batch reward (every completion trained
                     on), own completions scored, local and external groups,
                     the external groups' reward, training seconds, and the
                     learner's and generator's peak resident memory so far (GB)
  completions-CONFIG-seedS-NODE.jsonl.gz
                     every greedy answer of each evaluation, where the
                     evaluators wrote them (eval-completions.jsonl)
  manifest-seedS.json, summary-seedS.md  the study's own
"""
import glob
import gzip
import json
import os
import shutil
import sys

if len(sys.argv) not in (3, 4):
    sys.exit("usage: collect.py RUN SEED [PART]")
run, seed = sys.argv[1], sys.argv[2]
tag = seed + ("-" + sys.argv[3] if len(sys.argv) == 4 else "")
here = os.path.dirname(os.path.abspath(__file__))
ev = ["config\tseed\tnode\tround\tpass1\tformat\tquestions"]
rd = ["config\tseed\tnode\tround\town_reward\tbatch_reward\town_completions\tlocal_groups\texternal_groups"
      "\texternal_reward\ttrain_seconds\tlearner_peak_gb\tgenerator_peak_gb"]
for cdir in sorted(glob.glob(os.path.join(run, "I*J*"))):
    name = os.path.basename(cdir)
    i, j = name[1:].split("J")
    config = "%s/%s" % (i, j.replace("u", "")) + ("u" if j.endswith("u") else "")
    for node_dir in sorted(glob.glob(os.path.join(cdir, "seed" + seed, "n*"))):
        node = os.path.basename(node_dir)
        for line in open(os.path.join(node_dir, "eval.jsonl")):
            e = json.loads(line)
            ev.append("%s\t%s\t%s\t%d\t%.4f\t%.4f\t%d" % (config, seed, node, e["round"], e["pass1"], e["format"],
                                                       e["questions"]))
        for line in open(os.path.join(node_dir, "metrics.jsonl")):
            m = json.loads(line)
            s = m["sampler"]
            peak = m.get("peak_gb", {})
            rd.append("%s\t%s\t%s\t%d\t%.6f\t%.6f\t%d\t%d\t%d\t%.6f\t%.3f\t%.3f\t%.3f" % (
                config, seed, node, m["round"], s["scored_reward"], m["batch_reward"], s["scored_completions"],
                m["local_groups"], m["external_groups"], m["reward_external"], m["seconds"]["train"],
                peak.get("learner", 0), peak.get("generator", 0)))
        comp = os.path.join(node_dir, "eval-completions.jsonl")
        if os.path.exists(comp):
            out = os.path.join(here, "completions-%s-seed%s-%s.jsonl.gz" % (config.replace("/", "-"), seed, node))
            with open(comp, "rb") as f, gzip.open(out, "wb") as g:
                shutil.copyfileobj(f, g)
open(os.path.join(here, "eval-seed%s.tsv" % tag), "w").write("\n".join(ev) + "\n")
open(os.path.join(here, "rounds-seed%s.tsv" % tag), "w").write("\n".join(rd) + "\n")
shutil.copy(os.path.join(run, "manifest.json"), os.path.join(here, "manifest-seed%s.json" % tag))
summary = os.path.join(run, "results", "summary.md")
if os.path.exists(summary):
    shutil.copy(summary, os.path.join(here, "summary-seed%s.md" % tag))
print("collect: seed %s: %d evaluations, %d node-rounds" % (tag, len(ev) - 1, len(rd) - 1))
