#!/usr/bin/env python3
"""Peer figures for bench_cuda, on the same GPU, for the checkpoint bench_cuda
saved. One line on stdout:

  gen TOKENS_PER_S mem BYTES     (default) transformers generate in bf16:
      `completions` completions of each of `prompts` prompts (`prompt-len`
      tokens) in one call, exactly `new` tokens each
  train TOKENS_PER_S mem BYTES compile SECONDS   (--train) one training
      step of a `batch` x `seq` batch as bench_cuda takes it, forward,
      backward and fused AdamW, as `--peer` says:
        eager          fp32 weights, bf16 autocast (the same numerics as sapo)
        compile        the same under torch.compile
        compile-bf16   bf16 weights and AdamW state, torch.compile
      compile is the seconds of the first call (the compilation), 0 eager

Each the median over `reps` timed calls after one warm-up; mem is torch's
peak allocation. Exits non-zero, printing nothing, when torch has no CUDA
device; `--device cpu` runs the same code on the CPU (tests/t_peer_cuda.sh,
with a tiny model: the peers checked before a GPU is lent)."""
import argparse
import statistics
import sys
import time

import torch
from transformers import AutoModelForCausalLM


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def timed(fn, reps, device):
    """the median seconds of reps calls after one untimed, and the seconds
    of that first call"""
    times = []
    for r in range(reps + 1):
        sync(device)
        t0 = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times[1:]), times[0]


def gen(a):
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.bfloat16).to(a.device).eval()
    ids = torch.tensor([[ord("a") + (i + q) % 26 for i in range(a.prompt_len)] for q in range(a.prompts)]).to(a.device)

    def once():
        with torch.no_grad():
            model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=True, temperature=1.0, top_k=0,
                           top_p=1.0, max_new_tokens=a.new, min_new_tokens=a.new,
                           num_return_sequences=a.completions, pad_token_id=0)

    return a.prompts * a.completions * a.new / timed(once, a.reps, a.device)[0], 0.0


def train(a):
    bf16 = a.peer == "compile-bf16"
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.bfloat16 if bf16 else torch.float32)
    model = model.to(a.device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6, fused=True)
    g = torch.Generator(device=a.device).manual_seed(0)
    ids = torch.randint(0, model.config.vocab_size, (a.batch, a.seq), device=a.device, generator=g)
    forward = torch.compile(model) if a.peer != "eager" else model

    def once():
        opt.zero_grad(set_to_none=True)
        if bf16:
            loss = forward(input_ids=ids, labels=ids).loss
        else:
            with torch.autocast(a.device, dtype=torch.bfloat16):
                loss = forward(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()

    step, first = timed(once, a.reps, a.device)
    return a.batch * a.seq / step, (first - step if a.peer != "eager" else 0.0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--train", action="store_true")
    ap.add_argument("--peer", choices=("eager", "compile", "compile-bf16"), default="eager")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--reps", type=int, required=True)
    for name in ("prompts", "completions", "prompt-len", "new", "batch", "seq"):
        ap.add_argument("--" + name, type=int, default=0)
    a = ap.parse_args()
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.exit(1)
    torch.manual_seed(0)
    rate, compile_s = train(a) if a.train else gen(a)
    mem = torch.cuda.max_memory_allocated() if a.device == "cuda" else 0
    line = f"{'train' if a.train else 'gen'} {rate:.1f} mem {mem}"
    print(line + (f" compile {compile_s:.1f}" if a.train else ""))


if __name__ == "__main__":
    main()
