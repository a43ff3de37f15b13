#!/usr/bin/env python3
"""Golden files for the real models read from GGUF (tests/test_gguf_model.c), from
transformers 5.23 + gguf 0.19 loading the same GGUF file (`gguf_file=`), in fp32.

For each model file given (by the name scripts/model.sh gets it under) it writes
tests/golden/gguf/<name>.model.json:
  texts      strings covering ASCII, digits, contractions, whitespace runs, newlines,
             accents, CJK, emoji and special tokens written in the text
  text_ids   transformers' token ids of each text (no special tokens added)
  prompts    chat prompts (ChatML, with the node's default system instruction)
  ids        each prompt's token ids followed by a reference answer's
  logp       log_softmax(logits)[next id] at every position but the last, one
             list per prompt (float32 computed, written with 9 digits)

  .venv/bin/python tests/oracle/gguf_model_golden.py NAME=PATH [NAME=PATH ...]
  e.g. smollm2-135m=$(scripts/model.sh path smollm2-135m)
"""
import json
import os
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden", "gguf")

SYSTEM = ("Solve the problem. You may reason briefly first. Then write your final answer, and nothing else, "
          "between <answer> and </answer>, for example <answer>42</answer>.")

TEXTS = [
    "Hello world",
    "37 + 48 = 105",
    "What is 12345 plus 678? It's 13023, isn't it? They'll say we'd've known.",
    "  leading spaces,\ttabs\t\tand   runs   of spaces  \n\n\nnewlines\r\n",
    "Caf\u00e9 na\u00efve \u00fcber \u00c5ngstr\u00f6m",
    "\u4e2d\u6587\u6d4b\u8bd5\uff1a\u4f60\u597d\uff0c\u4e16\u754c\u3002",
    "emoji \U0001F600\U0001F680 and symbols \u2211\u221a\u03c0 \u00bd \u2154",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n",
    "<answer>3/4</answer> and <answer>0b1011</answer>",
    "Convert the base-2 number 1101 to base-16.",
]

QUESTIONS = [
    ("What is 37 + 48?", "37 + 48 = 85. <answer>85</answer>"),
    ("Simplify the fraction 12/18 to its lowest terms.", "<answer>2/3</answer>"),
    ("Convert the base-2 number 1101 to base-10.", "1101 in base 2 is 8 + 4 + 1 = 13.\n<answer>13</answer>"),
]


def chatml(system, user):
    return f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"


def golden(name, path):
    folder, file = os.path.split(os.path.abspath(path))
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=file)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=file, dtype=torch.float32)
    model.eval()
    out = {"texts": TEXTS, "text_ids": [tok.encode(t, add_special_tokens=False) for t in TEXTS],
           "prompts": [], "ids": [], "logp": []}
    for q, a in QUESTIONS:
        prompt = chatml(SYSTEM, q)
        ids = tok.encode(prompt + a, add_special_tokens=False)
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0].float()
        lp = torch.log_softmax(logits, dim=-1)
        out["prompts"].append(prompt + a)
        out["ids"].append(ids)
        out["logp"].append([float(f"{lp[t, ids[t + 1]].item():.9g}") for t in range(len(ids) - 1)])
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, f"{name}.model.json"), "w") as f:
        json.dump(out, f, ensure_ascii=False)
        f.write("\n")
    print(name, "written", [len(i) for i in out["ids"]])


if __name__ == "__main__":
    torch.set_num_threads(2)
    for arg in sys.argv[1:]:
        name, path = arg.split("=", 1)
        golden(name, path)
