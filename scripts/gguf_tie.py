#!/usr/bin/env python3
"""A GGUF file with its input and output embeddings tied: one matrix where
the file held two copies of it.

    gguf_tie.py IN OUT [--keep embedding|output]

A model trained with tied embeddings (Qwen2.5's 0.5B) is often written to
GGUF with the matrix twice, quantized twice: token_embd.weight for the
input and output.weight for the lm_head. A reader that finds no
output.weight ties the two again (sapo, llama.cpp). This writes IN without
output.weight: with --keep embedding (the default) the lm_head then reads
the input embedding's copy; with --keep output, token_embd.weight takes
output.weight's type and bytes, so both read the lm_head's copy. The
header's key-value pairs are copied byte for byte; the tensors keep their
order and are laid out again at the file's alignment. Python's standard
library only: the machine that packs a GPU kit needs nothing else.
"""
import os
import struct
import sys

# the byte sizes of GGUF's scalar value types (4 u32 ... 12 f64); 8 is a
# string, 9 an array
SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


class Reader:
    def __init__(self, data):
        self.data, self.at = data, 0

    def take(self, fmt):
        v = struct.unpack_from("<" + fmt, self.data, self.at)
        self.at += struct.calcsize("<" + fmt)
        return v[0] if len(v) == 1 else v

    def string(self):
        n = self.take("Q")
        s = self.data[self.at:self.at + n]
        self.at += n
        return s.decode("utf-8")

    def skip_value(self, kind):
        if kind in SCALAR:
            self.at += SCALAR[kind]
        elif kind == 8:
            n = self.take("Q")
            self.at += n
        elif kind == 9:
            elem, n = self.take("I"), self.take("Q")
            if elem in SCALAR:
                self.at += SCALAR[elem] * n
            else:
                for _ in range(n):
                    self.skip_value(elem)
        else:
            raise ValueError(f"unknown value type {kind} at byte {self.at}")


def fail(msg):
    print(f"gguf_tie: {msg}", file=sys.stderr)
    sys.exit(1)


def main(argv):
    keep = "embedding"
    args = []
    i = 0
    while i < len(argv):
        if argv[i] == "--keep" and i + 1 < len(argv):
            keep = argv[i + 1]
            i += 2
        else:
            args.append(argv[i])
            i += 1
    if len(args) != 2 or keep not in ("embedding", "output"):
        fail("usage: gguf_tie.py IN OUT [--keep embedding|output]")
    src, dst = args
    with open(src, "rb") as f:
        data = f.read()
    r = Reader(data)
    if data[:4] != b"GGUF":
        fail(f"{src}: not a GGUF file")
    r.at = 4
    version, n_tensors, n_kv = r.take("I"), r.take("Q"), r.take("Q")
    if version < 2:
        fail(f"{src}: GGUF version {version} is not read here (2 or later)")
    kv_start = r.at
    alignment = 32
    for _ in range(n_kv):
        key = r.string()
        kind = r.take("I")
        if key == "general.alignment" and kind == 4:
            alignment = struct.unpack_from("<I", data, r.at)[0]
        r.skip_value(kind)
    kv_bytes = data[kv_start:r.at]
    tensors = []
    for _ in range(n_tensors):
        name = r.string()
        n_dims = r.take("I")
        dims = [r.take("Q") for _ in range(n_dims)]
        kind, offset = r.take("I"), r.take("Q")
        tensors.append([name, dims, kind, offset])
    data_start = (r.at + alignment - 1) // alignment * alignment
    # each tensor's bytes end where the next one (in offset order) begins
    ends = sorted(t[3] for t in tensors) + [len(data) - data_start]
    size = {t[3]: ends[ends.index(t[3]) + 1] - t[3] for t in tensors}
    blobs = {t[0]: data[data_start + t[3]:data_start + t[3] + size[t[3]]] for t in tensors}
    names = [t[0] for t in tensors]
    if "output.weight" not in names:
        fail(f"{src}: no output.weight: its embeddings are tied already")
    if "token_embd.weight" not in names:
        fail(f"{src}: no token_embd.weight")
    out_t = tensors[names.index("output.weight")]
    emb_t = tensors[names.index("token_embd.weight")]
    if out_t[1] != emb_t[1]:
        fail(f"{src}: output.weight {out_t[1]} and token_embd.weight {emb_t[1]} differ in shape")
    if keep == "output":
        emb_t[2] = out_t[2]
        blobs["token_embd.weight"] = blobs["output.weight"]
    tensors = [t for t in tensors if t[0] != "output.weight"]

    head = bytearray(b"GGUF" + struct.pack("<IQQ", version, len(tensors), n_kv) + kv_bytes)
    body = bytearray()
    for name, dims, kind, _ in tensors:
        blob = blobs[name]
        enc = name.encode("utf-8")
        head += struct.pack("<Q", len(enc)) + enc + struct.pack("<I", len(dims))
        head += b"".join(struct.pack("<Q", d) for d in dims)
        head += struct.pack("<IQ", kind, len(body))
        body += blob
        body += b"\0" * (-len(body) % alignment)
    head += b"\0" * (-len(head) % alignment)
    with open(dst + ".tmp", "wb") as f:
        f.write(head)
        f.write(body)
    os.replace(dst + ".tmp", dst)
    print(f"gguf_tie: {dst}: {len(head) + len(body)} bytes ({len(data)} before), "
          f"the lm_head reads {'output' if keep == 'output' else 'token_embd'}.weight's copy")


if __name__ == "__main__":
    main(sys.argv[1:])
