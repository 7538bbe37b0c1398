"""A probe for #21 (s44), to be folded into the decode kernel or removed once measured: decoding with several K/V
heads per CTA through a wider head dim's kernel, no kernel change. K/V heads h..h+p-1 of a (b, s, hkv, d) cache are
one contiguous (p * d)-wide chunk of a cache row, so the cache is viewed as (b, s, hkv / p, p * d) for free; each
query row gets its own head's d columns of a (p * d)-wide q' that is zero elsewhere (S = q . k of its own head
exactly), the scale stays 1 / sqrt(d), and each row's output is its own head's d columns of O' = P . V'. The kernel
then reads each cache row in runs p times longer, over 1 / p of the lanes. Tried: hdim 64 packed by 2 and 4 (the
hdim-128 and hdim-256 kernels), hdim 128 packed by 2 (the hdim-256 kernel). Needs a build with bf16 hdims 64, 128
and 256.

    python benchmarks/probe_packed_heads.py [rounds]

It checks the packing against a float64 reference on the CPU first, then times, per shape, the plan, each packed
kernel alone (q' built beforehand), the packed call with its packing and unpacking (the widest packing), and cuDNN
(benchmarks/notes.md#j-s44).
"""
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import _common  # noqa: F401  (puts this checkout first on sys.path)

def pack_q(q, hkv, pack):
    """q (b, sq, hq, d) -> q' (b, sq, hq, pack * d): query head j (of K/V head j // group) keeps its d values in the
    column block of its K/V head within the packed group of `pack` K/V heads, zeros elsewhere."""
    b, sq, hq, d = q.shape
    group = hq // hkv
    slot = (torch.arange(hq, device=q.device) // group) % pack  # which of the packed heads is its K/V head
    qp = q.new_zeros(b, sq, hq, pack * d)
    idx = (slot[:, None] * d + torch.arange(d, device=q.device)[None, :])  # (hq, d) column of each value
    qp.scatter_(3, idx.expand(b, sq, hq, d), q)
    return qp, idx


def unpack_o(op, idx):
    b, sq, hq, _ = op.shape
    return op.gather(3, idx.expand(b, sq, hq, idx.shape[1]))


def pack_kv(t, pack):
    """A (b, s, hkv, d) cache whose heads are adjacent in each row, viewed as (b, s, hkv / pack, pack * d)."""
    b, s, hkv, d = t.shape
    assert hkv % pack == 0 and t.stride(3) == 1 and t.stride(2) == d
    return t.as_strided((b, s, hkv // pack, pack * d), (t.stride(0), t.stride(1), pack * d, 1))


def packed_attention(attn, q, k, v, pack, **kw):
    """attn(q', k', v', softmax_scale=...) on the packed problem; the result unpacked to (b, sq, hq, d)."""
    qp, idx = pack_q(q, k.shape[2], pack)
    return unpack_o(attn(qp, pack_kv(k, pack), pack_kv(v, pack), softmax_scale=q.shape[3] ** -0.5, **kw), idx)


def reference(q, k, v, softmax_scale=None):  # (b, s, h, d), float64, GQA
    hq, hkv = q.shape[2], k.shape[2]
    qb, kb, vb = (t.transpose(1, 2).double() for t in (q, k, v))
    kb, vb = kb.repeat_interleave(hq // hkv, 1), vb.repeat_interleave(hq // hkv, 1)
    return F.scaled_dot_product_attention(qb, kb, vb, scale=softmax_scale).transpose(1, 2)


def self_check():  # the packing's algebra, on the CPU against the reference
    torch.manual_seed(0)
    for hq, hkv, pack in ((32, 8, 4), (32, 32, 4), (8, 4, 4), (32, 8, 2), (8, 2, 2)):
        q = torch.randn(2, 3, hq, 64)
        k, v = torch.randn(2, 50, hkv, 64), torch.randn(2, 50, hkv, 64)
        err = (packed_attention(reference, q, k, v, pack) - reference(q, k, v)).abs().max().item()
        assert err < 1e-12, (hq, hkv, pack, err)
    print("packing self-check: ok")


GRIDS = [  # (heads_kv, batch, keys), 32 query heads, sq 1: #21's shapes
    (8, 128, 2048), (8, 64, 8192), (8, 8, 131072), (8, 1, 524288),
    (32, 128, 2048), (32, 64, 8192), (32, 8, 131072), (32, 1, 524288),
]
PACKS = {64: (2, 4), 128: (2,)}  # head dim: the packings tried (the packed width's kernel must be built)


def main():
    self_check()
    if not torch.cuda.is_available():
        return
    import flashcute

    flashcute.load_extension()
    built = set(torch.ops.flashcute.built_kernels())
    missing = {f"decode_sm80_bf16_hdim{d}" for d in (64, 128, 256)} - built
    if missing:
        sys.exit(f"the probe needs bf16 decode kernels of head dims 64, 128 and 256; this build lacks "
                 f"{sorted(missing)} (FLASHCUTE_DTYPES=bf16 FLASHCUTE_HDIMS=64,128,256)")
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    for d, packs in PACKS.items():
        for hkv, b, sk in GRIDS:
            probe(d, packs, hkv, b, sk, rounds)


def probe(d, packs, hkv, b, sk, rounds):
    import flashcute
    from triton.testing import do_bench

    torch.manual_seed(0)
    q = torch.randn(b, 1, 32, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(b, sk, hkv, d, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    lengths = torch.full((b,), sk, device="cuda", dtype=torch.int32)
    nbytes = 2 * k.numel() * k.element_size() + 2 * q.numel() * q.element_size()

    def kvcache(q, k, v, **kw):
        return flashcute.flash_attn_with_kvcache(q, k, v, cache_seqlens=lengths, **kw)

    q_bhsd, k_bhsd, v_bhsd = (t.transpose(1, 2) for t in (q, k, v))

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(q_bhsd, k_bhsd, v_bhsd, enable_gqa=hkv != 32)

    variants = {"plan": lambda: kvcache(q, k, v)}
    for pack in packs:
        q_packed, _ = pack_q(q, hkv, pack)
        variants[f"kernel_x{pack}"] = (lambda qp, kp, vp: lambda: kvcache(qp, kp, vp, softmax_scale=d ** -0.5))(
            q_packed, pack_kv(k, pack), pack_kv(v, pack))
    variants[f"all_x{packs[-1]}"] = lambda: packed_attention(kvcache, q, k, v, packs[-1])
    variants["cudnn"] = cudnn
    expected = reference(q[:1], k[:1], v[:1])
    errors = {n: (variants[n]()[:1].double() - expected).abs().max().item() for n in variants if n[:4] in ("plan", "all_")}
    gbps = {n: [] for n in variants}
    for _ in range(rounds):
        for name, fn in variants.items():
            fn()
            torch.cuda.synchronize()
            gbps[name].append(nbytes / (do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e-3) / 1e9)
    best = {name: max(values) for name, values in gbps.items()}
    print(f"d{d} {'gqa' if hkv == 8 else 'mha'} ({b}, {sk}): max error against float64 "
          + ", ".join(f"{n} {e:.1e}" for n, e in errors.items()) + "; GB/s "
          + "  ".join(f"{n} {'/'.join(f'{x:.0f}' for x in gbps[n])}" for n in gbps)
          + "; / cuDNN " + "  ".join(f"{n} {best[n] / best['cudnn']:.3f}" for n in gbps if n != "cudnn"), flush=True)
    del q, k, v, variants
    torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
