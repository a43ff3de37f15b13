#!/usr/bin/env python3
"""Peer figure for bench_cuda: transformers generate on the same GPU, in bf16,
for the checkpoint bench_cuda saved. Samples `completions` completions of each
of `prompts` prompts (`prompt-len` tokens) in one generate call, exactly `new`
tokens each, and prints one line:
    gen TOKENS_PER_S mem BYTES
(median over `reps` calls after one warm-up; mem is torch's peak allocation).
Exits non-zero, printing nothing, when torch has no CUDA device."""
import argparse
import statistics
import sys
import time

import torch
from transformers import AutoModelForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    for name in ("prompts", "completions", "prompt-len", "new", "reps"):
        ap.add_argument("--" + name, type=int, required=True)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit(1)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.bfloat16).cuda().eval()
    ids = torch.tensor([[ord("a") + (i + q) % 26 for i in range(a.prompt_len)] for q in range(a.prompts)]).cuda()
    times = []
    with torch.no_grad():
        for r in range(a.reps + 1):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=True, temperature=1.0, top_k=0,
                           top_p=1.0, max_new_tokens=a.new, min_new_tokens=a.new,
                           num_return_sequences=a.completions, pad_token_id=0)
            torch.cuda.synchronize()
            if r:
                times.append(time.perf_counter() - t0)
    rate = a.prompts * a.completions * a.new / statistics.median(times)
    print(f"gen {rate:.1f} mem {torch.cuda.max_memory_allocated()}")


if __name__ == "__main__":
    main()
