"""Whether the default path's kernels compile to the same PTX before and after
a change: python3 ptx_same.py OLD.ptx NEW.ptx [KERNEL...]. Each pair below is one kernel,
named as it was and as it is (a template's instantiation for float); the names,
labels and line records are set aside, and where the bodies differ the lines
that differ are printed. Make each file with nvcc -std=c++17 -O2 -D_GNU_SOURCE
-DSAPO_HAVE_CUDA -DSAPO_HAVE_CURAND -I<tree>/lib -Ischemas -Ibuild/release/gen
-gencode arch=compute_90,code=sm_90 -ptx <tree>/lib/model/cuda/cuda_model.cu"""
import difflib
import re
import sys

PAIRS = [
    ("_Z22rmsnorm_forward_kernelPfS_PKfS1_if", "_Z22rmsnorm_forward_kernelIfEvPT_PfPKfS4_if"),
    ("_Z21swiglu_forward_kernelPfPKfS1_m", "_Z21swiglu_forward_kernelIfEvPT_PKfS3_m"),
    ("_Z20logp_backward_kernelPfPKfS1_PKiif", "_Z20logp_backward_kernelPfPKfS1_PKiif"),
    ("_Z19logp_forward_kernelPfS_PKfPKiif", "_Z19logp_forward_kernelPfS_PKfPKiif"),
    ("_Z18cache_store_kernelIfEvPT_S1_PKfS3_PKiS5_iii", "_Z18cache_store_kernelIfEvPT_S1_PKfS3_PKiS5_iii"),
    ("_Z18cache_store_kernelI13__nv_bfloat16EvPT_S2_PKfS4_PKiS6_iii",
     "_Z18cache_store_kernelI13__nv_bfloat16EvPT_S2_PKfS4_PKiS6_iii"),
]


def body(path, name):
    s = open(path).read()
    i = s.index(".entry " + name + "(")
    b = s[i + len(".entry " + name):s.index("\n}\n", i)]
    b = re.sub(re.escape(name) + "_param", "P_param", b)
    b = re.sub(r"_ZZ\w+E2sh", "SH", b)
    b = re.sub(r"\$L__\w+", "L", b)
    return [l for l in b.split("\n") if not l.strip().startswith((".loc", "//"))]


# kernels named after the two files: each compared under its one name
if len(sys.argv) > 3:
    PAIRS = [(n, n) for n in sys.argv[3:]]

for old, new in PAIRS:
    a, b = body(sys.argv[1], old), body(sys.argv[2], new)
    print(new, "same PTX" if a == b else "differs:")
    if a != b:
        ops = [[l.split()[0] for l in x if ".f32" in l and not l.split()[0].startswith(("ld.", "st.", "mov."))] for x in (a, b)]
        print("  its float instructions, in order:", "the same" if ops[0] == ops[1] else "differ", len(ops[1]))
        print("\n".join(l for l in difflib.unified_diff(a, b, lineterm="") if l[:1] in "+-" and l[:3] not in ("+++", "---")))
