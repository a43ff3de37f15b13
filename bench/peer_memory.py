#!/usr/bin/env python3
"""Peer figures for bench_memory: one training step of a checkpoint (a folder,
or a GGUF file dequantized by transformers as sapo dequantizes it) in PyTorch
eager fp32 with the given threads, in this process alone: forward, backward of
sum(w * logp) over a (batch, seq) batch, then an AdamW step (whose two moments
are made at the first step, as sapo's are). With --checkpointing, transformers'
gradient checkpointing (each decoder layer's activations recomputed in the
backward pass from its input). Prints "peak GB" (the process's peak resident
memory, VmHWM, read as sapo reads its own, in 10^9 bytes) and "seconds S" (the
step's time).
Progress lines go to stderr, one at least every PROGRESS_SECONDS."""
import argparse
import os
import sys
import threading
import time
import warnings

os.environ.setdefault("TQDM_DISABLE", "1")

import torch
import transformers
from transformers import AutoModelForCausalLM

PROGRESS_SECONDS = int(os.environ.get("SAPO_PROGRESS_SECONDS", "20"))
T0 = time.perf_counter()


def say(what):
    print(f"peer_memory: {what} ({time.perf_counter() - T0:.0f} s)", file=sys.stderr, flush=True)


def peak_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    for name in ("threads", "batch", "seq"):
        ap.add_argument("--" + name, type=int, required=True)
    ap.add_argument("--checkpointing", type=int, default=0)
    a = ap.parse_args()
    warnings.filterwarnings("ignore")
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    say(f"loading {os.path.basename(a.model)}")
    if a.model.endswith(".gguf"):
        folder, file = os.path.split(os.path.abspath(a.model))
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=file, dtype=torch.float32)
    else:
        model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32)
    if a.checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    V = model.config.vocab_size
    tokens = torch.randint(0, min(V, 256), (a.batch, a.seq))
    w = torch.randn(a.batch, a.seq - 1) * 0.1
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6)
    done = threading.Event()

    def progress():
        while not done.wait(PROGRESS_SECONDS):
            say(f"training step of {a.batch} x {a.seq}{' with checkpointing' if a.checkpointing else ''}")

    threading.Thread(target=progress, daemon=True).start()
    t = time.perf_counter()
    logits = model(tokens, use_cache=False).logits[:, :-1]
    # the target's log-prob without a second (batch, seq, vocabulary)
    # tensor of log-probs beside the logits (TRL's selective_log_softmax)
    logp = logits.gather(-1, tokens[:, 1:, None])[..., 0] - torch.logsumexp(logits, dim=-1)
    del logits
    (logp * w).sum().backward()
    opt.step()
    seconds = time.perf_counter() - t
    done.set()
    print(f"peak {peak_bytes() / 1e9:.4f}", flush=True)
    print(f"seconds {seconds:.2f}", flush=True)


if __name__ == "__main__":
    main()
