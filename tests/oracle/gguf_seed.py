#!/usr/bin/env python3
"""Writes fuzz/seeds/fuzz_gguf/micro-llama.gguf with the gguf package: a Llama of one
layer (hidden 8, 2 query heads over 1 key/value head, MLP 16) over a byte-level
vocabulary of the 256 byte characters, one merge and the two ChatML tokens, with a
ChatML template; most tensors F32, the MLP's in Q8_0. Small enough to fuzz, whole
enough that the fuzzer reaches the tokenizer and the model loader.

It also writes tests/golden/gguf/micro-llama-untied.gguf: the same model with its
input embedding written a second time as output.weight, as many GGUF files of tied
models are (tests/t_model_tie.sh unties nothing: it ties this one back).

  .venv/bin/python tests/oracle/gguf_seed.py
"""
import os

import numpy as np
import gguf
from gguf.quants import quantize

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "fuzz", "seeds", "fuzz_gguf")
UNTIED = os.path.join(HERE, "..", "golden", "gguf", "micro-llama-untied.gguf")


def byte_chars():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for _, c in sorted(zip(bs, cs))]


def write(path, untied):
    w = gguf.GGUFWriter(path, "llama")
    C, FF, NH, NKV = 8, 32, 2, 1
    tokens = byte_chars() + ["ab", "<|im_start|>", "<|im_end|>"]
    V = len(tokens)
    w.add_block_count(1)
    w.add_context_length(64)
    w.add_embedding_length(C)
    w.add_feed_forward_length(FF)
    w.add_head_count(NH)
    w.add_head_count_kv(NKV)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types([1] * (V - 2) + [3, 3])
    w.add_token_merges(["a b"])
    w.add_eos_token_id(V - 1)
    w.add_bos_token_id(V - 2)
    w.add_chat_template("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}")
    rng = np.random.default_rng(1)
    hd = C // NH

    def t(name, *shape):
        x = rng.normal(0, 0.1, shape).astype(np.float32)
        w.add_tensor(name, x)
        return x

    embedding = t("token_embd.weight", V, C)
    w.add_tensor("blk.0.attn_norm.weight", np.ones(C, np.float32))
    t("blk.0.attn_q.weight", C, C)
    t("blk.0.attn_k.weight", NKV * hd, C)
    t("blk.0.attn_v.weight", NKV * hd, C)
    t("blk.0.attn_output.weight", C, C)
    w.add_tensor("blk.0.ffn_norm.weight", np.ones(C, np.float32))
    for name, shape in (("ffn_gate", (FF, C)), ("ffn_up", (FF, C)), ("ffn_down", (C, FF))):
        x = rng.normal(0, 0.1, shape).astype(np.float32)
        q = quantize(x, gguf.GGMLQuantizationType.Q8_0) if shape[1] % 32 == 0 else x
        kind = gguf.GGMLQuantizationType.Q8_0 if shape[1] % 32 == 0 else gguf.GGMLQuantizationType.F32
        w.add_tensor(f"blk.0.{name}.weight", q, raw_shape=shape if kind == gguf.GGMLQuantizationType.F32 else None,
                     raw_dtype=kind)
    w.add_tensor("output_norm.weight", np.ones(C, np.float32))
    if untied:
        w.add_tensor("output.weight", embedding)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    os.makedirs(OUT, exist_ok=True)
    write(os.path.join(OUT, "micro-llama.gguf"), False)
    write(UNTIED, True)


if __name__ == "__main__":
    main()
