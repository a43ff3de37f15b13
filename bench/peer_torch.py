#!/usr/bin/env python3
"""Peer figures for bench_model and bench_real: the same checkpoint (a folder, or a
GGUF file dequantized by transformers as sapo dequantizes it) in PyTorch eager
(transformers' default sdpa attention, fp32) with the same threads. Prints one line:
    train TOKENS_PER_S gen TOKENS_PER_S genb TOKENS_PER_S trainbf16 TOKENS_PER_S
train: median of forward + backward of sum(w * logp) over a (batch, seq) batch;
trainbf16: the same with the forward under torch.autocast to bfloat16 (on a CPU
with AMX tiles oneDNN runs the linear layers on them; parameters stay fp32);
gen: median of transformers generate sampling `completions` completions of a
`prompt-len` token prompt, exactly `new` tokens each; genb: the same for
`prompts` prompts in one generate call."""
import argparse
import os
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
    if a.model.endswith(".gguf"):
        folder, file = os.path.split(os.path.abspath(a.model))
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=file, dtype=torch.float32)
    else:
        model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32)
    V = model.config.vocab_size

    tokens = torch.randint(0, min(V, 256), (a.batch, a.seq))
    targets = torch.roll(tokens, -1, 1)
    w = torch.randn(a.batch, a.seq) * 1e-2
    w[:, -1] = 0

    def train_rate(bf16):
        times = []
        for r in range(a.reps + 1):
            t0 = time.perf_counter()
            model.zero_grad(set_to_none=False)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                logits = model(input_ids=tokens).logits
            logp = torch.log_softmax(logits.float(), -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
            (w * logp).sum().backward()
            if r:
                times.append(time.perf_counter() - t0)
        return a.batch * a.seq / statistics.median(times)

    train = train_rate(False)
    train_bf16 = train_rate(True)

    model.eval()

    def gen_rate(prompts, calls):
        """tokens/s of `calls` generate calls, each on `prompts` prompts at once"""
        ids = torch.tensor([[ord("a") + (i + q) % 26 for i in range(a.prompt_len)] for q in range(prompts)])
        times = []
        with torch.no_grad():
            for r in range(a.reps):
                t0 = time.perf_counter()
                for q in range(calls):
                    model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=True,
                                   temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=a.new,
                                   min_new_tokens=a.new, num_return_sequences=a.completions,
                                   pad_token_id=0)
                times.append(time.perf_counter() - t0)
        return prompts * calls * a.completions * a.new / statistics.median(times)

    # one request per prompt: the rate of one such request stands for all
    gen = gen_rate(1, 1)
    genb = gen_rate(a.prompts, 1)
    print(f"train {train:.1f} gen {gen:.1f} genb {genb:.1f} trainbf16 {train_bf16:.1f}")


if __name__ == "__main__":
    main()
