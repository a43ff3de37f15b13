"""What the Qwen wrote, from the evaluator's completions files here: for
each file, temperature and family, the completions, right answers, answers
in the tags, completions cut at max-new-tokens, median length in tokens,
completions whose last number is the answer (tags or not), and for sampled
completions how many questions got some right and some wrong.

    python3 tally.py [FILE.jsonl.gz ...]   (default: every completions file here)
"""
import collections
import glob
import gzip
import json
import os
import re
import statistics
import sys


def last_number(text):
    found = re.findall(r"-?\d+(?:\.\d+)?", text)
    return found[-1] if found else None


here = os.path.dirname(os.path.abspath(__file__))
files = sys.argv[1:] or sorted(glob.glob(os.path.join(here, "completions-*.jsonl.gz")))
for path in files:
    lines = [json.loads(l) for l in gzip.open(path, "rt")]
    print(os.path.basename(path))
    for t in sorted({l["temperature"] for l in lines}):
        for fam in sorted({l["family"] for l in lines}):
            s = [l for l in lines if l["temperature"] == t and l["family"] == fam]
            row = (f"  T={t:g} {fam}: {len(s)} completions, right {sum(l['score'] >= 1 for l in s)}, "
                   f"tags {sum(l['formatted'] for l in s)}, cut {sum(not l['finished'] for l in s)}, "
                   f"median tokens {statistics.median(l['tokens'] for l in s):g}, "
                   f"last number right {sum(last_number(l['completion']) == l['answer'] for l in s)}")
            if t > 0:
                by = collections.defaultdict(list)
                for l in s:
                    by[l["question"]].append(l["score"] >= 1)
                mixed = sum(0 < sum(v) < len(v) for v in by.values())
                row += f"; {len(by)} questions: {mixed} mixed, {sum(not any(v) for v in by.values())} never right"
            print(row)
