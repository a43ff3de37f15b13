"""Direct heads (model_set_direct_heads) emulated on the CPU: the pointer
arrays heads_pointers_kernel fills and the cuBLAS calls gemm_heads makes,
read from flat memory as cuBLAS reads a column-major matrix (element (i, j)
at base + i + j ld), then the attention's output and gradients against a
float64 reference of causal GQA attention. It checks the arrays' offsets,
leading dimensions and transposes, not the CUDA code.

    .venv/bin/python docs/results-cuda-prep/heads_emulate.py
"""
import numpy as np


def heads_pointers(bases, sb, sh, div, B, NH):
    """(buffer name, element offset) of head i = b NH + h of each array"""
    return [[(bases[j], b * sb[j] + (h // div[j]) * sh[j]) for b in range(B) for h in range(NH)]
            for j in range(len(bases))]


def read_col(mem, ptr, rows, cols, ld):
    """a column-major rows x cols matrix at ptr with leading dimension ld"""
    buf, off = ptr
    idx = off + np.arange(rows)[:, None] + np.arange(cols)[None, :] * ld
    return mem[buf][idx]


def write_col(mem, ptr, X, ld):
    buf, off = ptr
    rows, cols = X.shape
    idx = off + np.arange(rows)[:, None] + np.arange(cols)[None, :] * ld
    assert len(np.unique(idx)) == idx.size
    mem[buf][idx] = X


def gemm_heads(mem, ta, tb, M, N, K, alpha, A, lda, Bp, ldb, C, ldc):
    """gemm_heads: cuBLAS computes C^T = op(B)^T op(A)^T column-major, with
    transa = tb and transb = ta, m = N, n = M, k = K, its A = our B"""
    for a_ptr, b_ptr, c_ptr in zip(A, Bp, C):
        # cuBLAS's A (our B): op = T when tb; stored k x m (T) or m x k (N)
        ca = read_col(mem, b_ptr, K, N, ldb).T if tb else read_col(mem, b_ptr, N, K, ldb)
        cb = read_col(mem, a_ptr, M, K, lda).T if ta else read_col(mem, a_ptr, K, M, lda)
        write_col(mem, c_ptr, alpha * (ca @ cb), ldc)


def bf16(x):
    """round to bf16 (nearest even) and back to float32, as __float2bfloat16_rn"""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def check(B, T, NH, NKV, HD, seed, exact, q_ld=None):
    """exact: the emulation in float64 with the probabilities and their
    gradient unrounded, so that only the indexing can part it from the
    reference; else they go through bf16 as on the GPU. q_ld: read q with
    this leading dimension instead of NH HD (a deliberate mistake)"""
    rp = (lambda x: x) if exact else bf16
    ft = np.float64 if exact else np.float32
    rng = np.random.default_rng(seed)
    rep, QD, KD, BH, N = NH // NKV, NH * HD, NKV * HD, B * NH, B * T
    q = rng.standard_normal((B, T, NH, HD)).astype(np.float32)
    k = rng.standard_normal((B, T, NKV, HD)).astype(np.float32)
    v = rng.standard_normal((B, T, NKV, HD)).astype(np.float32)
    dy = rng.standard_normal((B, T, NH, HD)).astype(np.float32)

    # reference in float64 on the same bf16-rounded inputs
    qr, kr, vr, dyr = (bf16(x).astype(np.float64) for x in (q, k, v, dy))
    kx, vx = np.repeat(kr, rep, axis=2), np.repeat(vr, rep, axis=2)
    s = np.einsum("bthd,bshd->bhts", qr, kx) / np.sqrt(HD)
    s = np.where(np.tril(np.ones((T, T), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    y = np.einsum("bhts,bshd->bthd", p, vx)
    dp = np.einsum("bthd,bshd->bhts", dyr, vx)
    ds = p * (dp - (p * dp).sum(-1, keepdims=True)) / np.sqrt(HD)
    dq = np.einsum("bhts,bshd->bthd", ds, kx)
    dk = np.einsum("bhts,bthd->bshd", ds, qr).reshape(B, T, NKV, rep, HD).sum(3)
    dv = np.einsum("bhts,bthd->bshd", p, dyr).reshape(B, T, NKV, rep, HD).sum(3)

    # flat memory as the CUDA code lays it out
    tt, th, hs = T * T, T * HD, N * QD
    mem = {"q": bf16(q).ravel().astype(ft), "k": bf16(k).ravel().astype(ft), "v": bf16(v).ravel().astype(ft),
           "dy": bf16(dy).ravel().astype(ft), "att": np.zeros(BH * tt, ft), "pb": np.zeros(BH * tt, ft),
           "y": np.zeros(N * QD, ft), "dsc": np.zeros(BH * tt, ft), "dq": np.zeros(N * QD, ft),
           "hf": np.zeros(3 * hs, ft)}
    # attention_forward_direct
    Q, K, V, S, P, Y = heads_pointers(["q", "k", "v", "att", "pb", "y"], [T * QD, T * KD, T * KD, NH * tt, NH * tt, T * QD],
                                      [HD, HD, HD, tt, tt, HD], [1, rep, rep, 1, 1, 1], B, NH)
    gemm_heads(mem, False, True, T, T, HD, 1 / np.sqrt(HD), Q, q_ld or QD, K, KD, S, T)
    att = mem["att"].reshape(BH, T, T)
    att = np.where(np.tril(np.ones((T, T), bool)), att, -np.inf)
    att = np.exp(att - att.max(-1, keepdims=True))
    att /= att.sum(-1, keepdims=True)
    mem["att"] = att.astype(ft).ravel()
    mem["pb"] = rp(mem["att"])
    gemm_heads(mem, False, False, T, HD, T, 1.0, P, T, V, KD, Y, QD)
    # attention_backward_direct: dvh at hf, dkh at hf + hs
    DY, DV, DP, DQ, DK = heads_pointers(["dy", "hf", "dsc", "dq", "hf"], [T * QD, NH * th, NH * tt, T * QD, NH * th],
                                        [HD, th, tt, HD, th], [1] * 5, B, NH)
    DK = [("hf", off + hs) for _, off in DK]
    gemm_heads(mem, True, False, T, HD, T, 1.0, P, T, DY, QD, DV, HD)
    gemm_heads(mem, False, True, T, T, HD, 1.0, DY, QD, V, KD, DP, T)
    pr, dpr = mem["att"].reshape(BH, T, T), mem["dsc"].reshape(BH, T, T)
    dsr = pr * (dpr - (pr * dpr).sum(-1, keepdims=True)) / np.sqrt(HD)
    mem["pb"] = rp(np.where(np.tril(np.ones((T, T), bool)), dsr, 0)).ravel()
    gemm_heads(mem, False, False, T, HD, T, 1.0, P, T, K, KD, DQ, QD)
    gemm_heads(mem, True, False, T, HD, T, 1.0, P, T, Q, QD, DK, HD)
    # heads_merge: (B, NH, T, HD) summed over each group into (B, T, NKV, HD)
    merge = lambda x: x.reshape(B, NKV, rep, T, HD).sum(2).transpose(0, 2, 1, 3)
    got = {"y": mem["y"].reshape(B, T, NH, HD), "dq": mem["dq"].reshape(B, T, NH, HD),
           "dk": merge(mem["hf"][hs:2 * hs]), "dv": merge(mem["hf"][:hs])}
    want = {"y": y, "dq": dq, "dk": dk, "dv": dv}
    gaps = {n: float(np.abs(got[n] - want[n]).max() / max(1e-30, np.abs(want[n]).max())) for n in want}
    print("B %d T %2d NH %2d NKV %d HD %2d, %s: largest gap over largest value: %s" %
          (B, T, NH, NKV, HD, "float64" if exact else "bf16 probabilities",
           ", ".join("%s %.2g" % kv for kv in gaps.items())))
    return max(gaps.values())


shapes = [(2, 8, 14, 2, 8, 1), (3, 16, 4, 1, 8, 2), (2, 12, 4, 4, 16, 3), (1, 20, 8, 2, 24, 4)]
# in float64 only the pointers, leading dimensions and transposes can part
# the emulation from the reference
exact = max(check(*sh, exact=True) for sh in shapes)
print("float64: worst %.2g: %s" % (exact, "within 1e-12" if exact < 1e-12 else "TOO FAR"))
# as on the GPU: bf16 probabilities and their gradient in the products
# (2^-8 relative a value, summed over T)
rounded = max(check(*sh, exact=False) for sh in shapes)
print("bf16 probabilities: worst %.2g: %s" % (rounded, "within 2e-2" if rounded < 2e-2 else "TOO FAR"))
# a deliberate mistake is seen: q read with the old layout's rows (HD apart)
wrong = check(2, 8, 14, 2, 8, 1, exact=True, q_ld=8)
print("q read HD apart instead of NH HD: gap %.2g: %s" % (wrong, "caught" if wrong > 1e-3 else "NOT CAUGHT"))
