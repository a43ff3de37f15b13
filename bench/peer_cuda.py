#!/usr/bin/env python3
"""Peer figures for bench_cuda, on the same GPU, for the checkpoint bench_cuda
saved. One line on stdout:

  gen TOKENS_PER_S mem BYTES     (default) transformers generate in bf16:
      `completions` completions of each of `prompts` prompts (`prompt-len`
      tokens) in one call, exactly `new` tokens each
  train TOKENS_PER_S mem BYTES   (--train) one training step of a
      `batch` x `seq` batch as bench_cuda takes it: fp32 weights, bf16
      autocast, forward, backward, fused AdamW

Each the median over `reps` timed calls after one warm-up; mem is torch's
peak allocation. Exits non-zero, printing nothing, when torch has no CUDA
device."""
import argparse
import statistics
import sys
import time

import torch
from transformers import AutoModelForCausalLM


def timed(fn, reps):
    times = []
    for r in range(reps + 1):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        if r:
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def gen(a):
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.bfloat16).cuda().eval()
    ids = torch.tensor([[ord("a") + (i + q) % 26 for i in range(a.prompt_len)] for q in range(a.prompts)]).cuda()

    def once():
        with torch.no_grad():
            model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=True, temperature=1.0, top_k=0,
                           top_p=1.0, max_new_tokens=a.new, min_new_tokens=a.new,
                           num_return_sequences=a.completions, pad_token_id=0)

    return a.prompts * a.completions * a.new / timed(once, a.reps)


def train(a):
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32).cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6, fused=True)
    g = torch.Generator(device="cuda").manual_seed(0)
    ids = torch.randint(0, model.config.vocab_size, (a.batch, a.seq), device="cuda", generator=g)

    def once():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()

    return a.batch * a.seq / timed(once, a.reps)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--train", action="store_true")
    ap.add_argument("--reps", type=int, required=True)
    for name in ("prompts", "completions", "prompt-len", "new", "batch", "seq"):
        ap.add_argument("--" + name, type=int, default=0)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit(1)
    torch.manual_seed(0)
    rate = train(a) if a.train else gen(a)
    print(f"{'train' if a.train else 'gen'} {rate:.1f} mem {torch.cuda.max_memory_allocated()}")


if __name__ == "__main__":
    main()
