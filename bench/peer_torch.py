#!/usr/bin/env python3
"""Peer figures for bench_model: the same checkpoint in PyTorch eager (transformers'
default sdpa attention, fp32) with the same threads. Prints one line:
    train TOKENS_PER_S gen TOKENS_PER_S
train: median of forward + backward of sum(w * logp) over a (batch, seq) batch;
gen: median of transformers generate, sampling `completions` completions of
`prompt-len` tokens for each of `prompts` prompts, exactly `new` tokens each."""
import argparse
import statistics
import time

import torch
from transformers import AutoModelForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    for name in ("threads", "batch", "seq", "prompts", "completions", "prompt-len", "new", "reps"):
        ap.add_argument("--" + name, type=int, required=True)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32)
    V = model.config.vocab_size

    tokens = torch.randint(0, min(V, 256), (a.batch, a.seq))
    targets = torch.roll(tokens, -1, 1)
    w = torch.randn(a.batch, a.seq) * 1e-2
    w[:, -1] = 0
    times = []
    for r in range(a.reps + 1):
        t0 = time.perf_counter()
        model.zero_grad(set_to_none=False)
        logits = model(input_ids=tokens).logits
        logp = torch.log_softmax(logits, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        (w * logp).sum().backward()
        if r:
            times.append(time.perf_counter() - t0)
    train = a.batch * a.seq / statistics.median(times)

    model.eval()
    prompt = torch.tensor([[ord("a") + i % 26 for i in range(a.prompt_len)]])
    times = []
    with torch.no_grad():
        for r in range(a.reps):
            t0 = time.perf_counter()
            for q in range(a.prompts):
                model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=True,
                               temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=a.new,
                               min_new_tokens=a.new, num_return_sequences=a.completions,
                               pad_token_id=0)
            times.append(time.perf_counter() - t0)
    gen = a.prompts * a.completions * a.new / statistics.median(times)
    print(f"train {train:.1f} gen {gen:.1f}")


if __name__ == "__main__":
    main()
