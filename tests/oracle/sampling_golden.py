"""Golden kept sets for lib/sampling (tests/test_sampling.c): which tokens
Hugging Face's warpers leave for sampling (TemperatureLogitsWarper, then
TopKLogitsWarper, then TopPLogitsWarper, each added only when it is active,
as generate() does), and log_softmax(logits / T) of each kept token, the
log-prob TRL recomputes for a sampled token.

Writes tests/golden/sampling/kept.txt: one array per line, "name count v0 ...".
Run: .venv/bin/python tests/oracle/sampling_golden.py
"""
import os

import torch
import transformers
from transformers.generation.logits_process import (TemperatureLogitsWarper, TopKLogitsWarper,
                                                    TopPLogitsWarper)

OUT = os.path.join(os.path.dirname(__file__), "..", "golden", "sampling")


def put(f, name, t):
    vals = torch.as_tensor(t, dtype=torch.float64).flatten().tolist()
    f.write(f"{name} {len(vals)} " + " ".join(f"{v:.9g}" for v in vals) + "\n")


def kept(logits, temperature, top_k, top_p):
    scores = logits.clone().unsqueeze(0)
    ids = torch.zeros(1, 1, dtype=torch.int64)
    if temperature != 1.0:
        scores = TemperatureLogitsWarper(temperature)(ids, scores)
    if top_k != 0:
        scores = TopKLogitsWarper(top_k=top_k)(ids, scores)
    if top_p < 1.0:
        scores = TopPLogitsWarper(top_p=top_p)(ids, scores)
    return torch.nonzero(torch.isfinite(scores[0])).flatten()


def main():
    g = torch.Generator().manual_seed(3)
    small = 2.0 * torch.randn(64, generator=g)
    small[10] = small[20]                                   # a tie
    small = small.to(torch.float32)
    peaked = (2.5 * torch.randn(1000, generator=g)).to(torch.float32)
    flat = (0.3 * torch.randn(1000, generator=g)).to(torch.float32)
    vectors = [small, peaked, flat]
    params = [(1.0, 0, 0.9), (0.7, 0, 0.5), (1.0, 8, 1.0), (1.3, 20, 0.8), (0.5, 3, 0.99),
              (1.0, 1, 1.0), (1.0, 0, 0.0), (2.0, 100, 0.95), (0.9, 0, 1.0)]
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "kept.txt"), "w") as f:
        f.write(f"# transformers {transformers.__version__}, torch {torch.__version__}\n")
        for j, logits in enumerate(vectors):
            put(f, f"logits{j}", logits)
        cases = [(j, p) for j in range(len(vectors)) for p in params]
        put(f, "cases", [len(cases)])
        for i, (j, (t, k, p)) in enumerate(cases):
            ids = kept(vectors[j], t, k, p)
            put(f, f"params{i}", [j, t, k, p])
            put(f, f"kept{i}", ids)
            put(f, f"logsm{i}", torch.log_softmax(vectors[j] / t, dim=-1)[ids])


if __name__ == "__main__":
    main()
