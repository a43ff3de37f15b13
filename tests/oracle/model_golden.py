#!/usr/bin/env python3
"""Golden files for tests/test_model.c, from transformers + torch (fp32, eager attention).

For each tiny random Qwen2/Qwen3 model it writes into tests/golden/model/:
  <name>/                 the model, by save_pretrained (one in bf16, one in fp16, one sharded)
  <name>/grads/           the gradient of sum(w * logp) for every parameter, as a
                          checkpoint folder (same config, gradients in place of weights)
  <name>.json             the batch: tokens, targets, lengths, weights w, temperature,
                          the greedy-generation prompt and its output
  <name>.logits.f32       logits (B, T, V) of the batch, little-endian float32
  <name>.logp.f32         log_softmax(logits / temperature)[target] (B, T), 0 where target is -1

  python3 tests/oracle/model_golden.py                 regenerate everything; with
      SAPO_MODEL_SAVE_DIR set, also check the folders test_model saved there
  python3 tests/oracle/model_golden.py --check NAME DIR
      load a folder that sapo saved from model NAME in transformers and compare its
      logits with the golden ones (the round trip of model_save)
"""
import json
import os
import shutil
import sys

import numpy as np
import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, Qwen2Config, Qwen3Config

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden", "model")

MODELS = [
    # name, config class, config kwargs, save options, temperature
    ("qwen2_tied", Qwen2Config,
     dict(hidden_size=48, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
          intermediate_size=96, vocab_size=160, tie_word_embeddings=True, rope_theta=10000.0,
          rms_norm_eps=1e-6, eos_token_id=3, bos_token_id=1), {}, 1.0),
    ("qwen2_bf16", Qwen2Config,
     dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1,
          intermediate_size=64, vocab_size=128, tie_word_embeddings=False, rope_theta=1000000.0,
          rms_norm_eps=1e-5, eos_token_id=3), dict(bf16=True), 0.7),
    ("qwen2_sharded", Qwen2Config,
     dict(hidden_size=64, num_hidden_layers=3, num_attention_heads=8, num_key_value_heads=2,
          intermediate_size=128, vocab_size=128, tie_word_embeddings=False, rope_theta=10000.0,
          rms_norm_eps=1e-6, eos_token_id=[3, 4]), dict(max_shard_size="40KB"), 1.0),
    ("qwen3_tied", Qwen3Config,
     dict(hidden_size=48, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
          head_dim=16, intermediate_size=96, vocab_size=160, tie_word_embeddings=True,
          rope_theta=10000.0, rms_norm_eps=1e-6, attention_bias=False, eos_token_id=3), {}, 1.0),
    ("qwen3_bias", Qwen3Config,
     dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
          head_dim=8, intermediate_size=80, vocab_size=96, tie_word_embeddings=False,
          rope_theta=500000.0, rms_norm_eps=1e-6, attention_bias=True, eos_token_id=3), {}, 1.3),
    ("qwen2_fp16", Qwen2Config,
     dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
          intermediate_size=48, vocab_size=64, tie_word_embeddings=True, rope_theta=10000.0,
          rms_norm_eps=1e-6, eos_token_id=3), dict(fp16=True), 1.0),
]

B, T = 3, 11
LENGTHS = [11, 8, 5]
PROMPT_LEN = 2       # no log-prob wanted for the first positions (a prompt)
GEN_PROMPT = 6
GEN_NEW = 12


def randomize(model, gen):
    """Non-trivial values everywhere, so norms and biases get real gradients."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or "layernorm" in name:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.15 * torch.randn(p.shape, generator=gen))


def batch(V, gen):
    tokens = torch.randint(5, V, (B, T), generator=gen)
    targets = torch.full((B, T), -1, dtype=torch.long)
    mask = torch.zeros((B, T), dtype=torch.long)
    for b, n in enumerate(LENGTHS):
        tokens[b, n:] = 0
        mask[b, :n] = 1
        targets[b, PROMPT_LEN:n - 1] = tokens[b, PROMPT_LEN + 1:n]
    w = torch.randn((B, T), generator=gen) * (targets >= 0)
    return tokens, targets, mask, w


def logp_of(logits, targets, temperature):
    lp = torch.log_softmax(logits / temperature, dim=-1)
    got = lp.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return got * (targets >= 0)


def write_f32(path, t):
    t.detach().to(torch.float32).contiguous().numpy().astype("<f4").tofile(path)


def make(name, cls, kw, save, temperature, seed):
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    cfg = cls(**kw)
    cfg._attn_implementation = "eager"
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").float()
    randomize(model, gen)
    folder = os.path.join(OUT, name)
    shutil.rmtree(folder, ignore_errors=True)
    if save.get("bf16") or save.get("fp16"):
        model = model.to(torch.bfloat16 if save.get("bf16") else torch.float16)
        model.save_pretrained(folder, safe_serialization=True)
        model = model.float()
    elif "max_shard_size" in save:
        model.save_pretrained(folder, safe_serialization=True, max_shard_size=save["max_shard_size"])
    else:
        model.save_pretrained(folder, safe_serialization=True)
    # what was saved is the reference (bf16 rounding included)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager")
    model.eval()

    tokens, targets, mask, w = batch(cfg.vocab_size, gen)
    out = model(input_ids=tokens, attention_mask=mask)
    logits = out.logits
    lp = logp_of(logits, targets, temperature)
    model.zero_grad()
    (w * lp).sum().backward()
    grads = {n: p.grad.detach().clone().contiguous() for n, p in model.named_parameters()}
    gdir = os.path.join(folder, "grads")
    os.makedirs(gdir)
    save_file(grads, os.path.join(gdir, "model.safetensors"), metadata={"format": "pt"})
    shutil.copy(os.path.join(folder, "config.json"), gdir)

    prompt = torch.randint(5, cfg.vocab_size, (1, GEN_PROMPT), generator=gen)
    with torch.no_grad():
        g = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=GEN_NEW,
                           do_sample=False, output_scores=True, return_dict_in_generate=True,
                           pad_token_id=0)
    new = g.sequences[0, GEN_PROMPT:]
    glogp = [torch.log_softmax(s[0].float(), -1)[t].item() for s, t in zip(g.scores, new)]

    write_f32(os.path.join(OUT, name + ".logits.f32"), logits)
    write_f32(os.path.join(OUT, name + ".logp.f32"), lp)
    meta = dict(B=B, T=T, V=cfg.vocab_size, lengths=LENGTHS, temperature=temperature,
                tokens=tokens.flatten().tolist(), targets=targets.flatten().tolist(),
                w=[float(x) for x in w.flatten()], prompt=prompt[0].tolist(),
                greedy=new.tolist(), greedy_logp=glogp)
    with open(os.path.join(OUT, name + ".json"), "w") as f:
        json.dump(meta, f)
    print(f"{name}: {sum(p.numel() for p in model.parameters())} parameters, greedy {new.tolist()}")


def check(name, folder):
    meta = json.load(open(os.path.join(OUT, name + ".json")))
    ref = np.fromfile(os.path.join(OUT, name + ".logits.f32"), dtype="<f4")
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager")
    tokens = torch.tensor(meta["tokens"]).view(meta["B"], meta["T"])
    mask = torch.zeros_like(tokens)
    for b, n in enumerate(meta["lengths"]):
        mask[b, :n] = 1
    with torch.no_grad():
        got = model(input_ids=tokens, attention_mask=mask).logits.numpy().reshape(-1)
    keep = np.repeat(mask.numpy().reshape(-1), meta["V"]).astype(bool)
    err = np.max(np.abs(got[keep] - ref[keep]) / np.maximum(np.abs(ref[keep]), 1e-3))
    print(f"check {name} {folder}: max relative logit difference {err:.3g}")
    return 0 if err < 1e-4 else 1


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--check":
        return check(sys.argv[2], sys.argv[3])
    torch.set_num_threads(2)
    os.makedirs(OUT, exist_ok=True)
    for i, (name, cls, kw, save, temp) in enumerate(MODELS):
        make(name, cls, kw, save, temp, 1000 + i)
    # folders test_model saved there (SAPO_MODEL_SAVE_DIR) must open in transformers
    saved = os.environ.get("SAPO_MODEL_SAVE_DIR")
    bad = 0
    for name, *_ in MODELS:
        if saved and os.path.isdir(os.path.join(saved, name)):
            bad += check(name, os.path.join(saved, name))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
