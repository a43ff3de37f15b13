#!/usr/bin/env python3
"""Peer figures for bench_model and bench_real: the same checkpoint (a folder, or a
GGUF file dequantized by transformers as sapo dequantizes it) in PyTorch eager
(transformers' default sdpa attention, fp32) with the same threads. Prints each
figure on a line of its own as soon as it is measured, "NAME TOKENS_PER_S" or
"NAME skipped REASON":
train: median of forward + backward of sum(w * logp) over a (batch, seq) batch;
trainbf16: the same with the forward under torch.autocast to bfloat16 (on a CPU
with AMX tiles oneDNN runs the linear layers on them; parameters stay fp32);
skipped with --bf16 0 (the caller found no AVX512-BF16 or AMX), and given up
once a step takes BF16_GIVE_UP times the fp32 step (autocast on a CPU without
them: a 76th of fp32's speed on a Zen 3);
gen: median of transformers generate sampling `completions` completions of a
`prompt-len` token prompt, exactly `new` tokens each; genb: the same for
`prompts` prompts in one generate call.
Progress lines go to stderr, one at least every PROGRESS_SECONDS."""
import argparse
import os
import signal
import statistics
import sys
import time
import warnings

# transformers' bars of GGUF tensors: a line per refresh in a log
os.environ.setdefault("TQDM_DISABLE", "1")

import torch
import transformers
from transformers import AutoModelForCausalLM, StoppingCriteria

BF16_GIVE_UP = 4
PROGRESS_SECONDS = int(os.environ.get("SAPO_PROGRESS_SECONDS", "20"))
T0 = time.perf_counter()


def say(what):
    print(f"peer_torch: {what} ({time.perf_counter() - T0:.0f} s)", file=sys.stderr, flush=True)


def figure(name, value):
    print(f"{name} {value:.1f}" if isinstance(value, float) else f"{name} {value}", flush=True)


class TooSlow(Exception):
    pass


class Progress(StoppingCriteria):
    """a line every PROGRESS_SECONDS within one generate call; never stops it"""

    def __init__(self, what, prompt_len, new):
        self.what, self.prompt_len, self.new, self.last = what, prompt_len, new, time.perf_counter()

    def __call__(self, input_ids, scores, **kwargs):
        if time.perf_counter() - self.last >= PROGRESS_SECONDS:
            self.last = time.perf_counter()
            say(f"{self.what}: token {input_ids.shape[1] - self.prompt_len} of {self.new}")
        return torch.zeros(input_ids.shape[0], dtype=torch.bool)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    for name in ("threads", "batch", "seq", "prompts", "completions", "prompt-len", "new", "reps", "bf16"):
        ap.add_argument("--" + name, type=int, required=True)
    a = ap.parse_args()
    warnings.filterwarnings("ignore")
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    say(f"loading {os.path.basename(a.model)}")
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

    def train_rate(bf16, give_up=None):
        """tokens/s; with give_up (seconds), TooSlow once a step takes longer"""
        what = "bf16-autocast" if bf16 else "fp32"
        times = []
        for r in range(a.reps + 1):
            say(f"{what} train step {r + 1} of {a.reps + 1} (the first untimed)")
            if give_up:
                signal.setitimer(signal.ITIMER_REAL, give_up)
            t0 = time.perf_counter()
            model.zero_grad(set_to_none=False)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                logits = model(input_ids=tokens).logits
            logp = torch.log_softmax(logits.float(), -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
            (w * logp).sum().backward()
            signal.setitimer(signal.ITIMER_REAL, 0)
            if r:
                times.append(time.perf_counter() - t0)
        return a.batch * a.seq / statistics.median(times)

    def too_slow(signum, frame):
        raise TooSlow()

    signal.signal(signal.SIGALRM, too_slow)
    train = train_rate(False)
    figure("train", train)
    if not a.bf16:
        figure("trainbf16", "skipped the caller found no AVX512-BF16 or AMX")
    else:
        step = a.batch * a.seq / train
        try:
            figure("trainbf16", train_rate(True, give_up=BF16_GIVE_UP * step))
        except TooSlow:
            signal.setitimer(signal.ITIMER_REAL, 0)
            figure("trainbf16", f"skipped a bf16-autocast step took over {BF16_GIVE_UP} times the fp32 step "
                                f"({step:.1f} s): this CPU's bf16 is not fast")

    model.eval()

    def gen_rate(prompts, calls):
        """tokens/s of `calls` generate calls, each on `prompts` prompts at once"""
        ids = torch.tensor([[ord("a") + (i + q) % 26 for i in range(a.prompt_len)] for q in range(prompts)])
        times = []
        with torch.no_grad():
            for r in range(a.reps):
                what = f"generate, {prompts} x {a.completions} completions, run {r + 1} of {a.reps}"
                say(what)
                progress = Progress(what, a.prompt_len, a.new)
                t0 = time.perf_counter()
                for q in range(calls):
                    model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=True,
                                   temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=a.new,
                                   min_new_tokens=a.new, num_return_sequences=a.completions,
                                   pad_token_id=0, stopping_criteria=[progress])
                times.append(time.perf_counter() - t0)
        return prompts * calls * a.completions * a.new / statistics.median(times)

    # one request per prompt: the rate of one such request stands for all
    figure("gen", gen_rate(1, 1))
    figure("genb", gen_rate(a.prompts, 1))


if __name__ == "__main__":
    main()
