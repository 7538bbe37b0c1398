"""A probe for #21 (s44), to be folded into the decode kernel or removed once measured: hdim-64 decoding with four
K/V heads per CTA through the hdim-256 kernel, no kernel change. K/V heads h..h+3 of a (b, s, hkv, 64) cache are one
contiguous 256-wide chunk of a cache row, so the cache is viewed as (b, s, hkv / 4, 256) for free; each query row
gets its own head's 64 columns of a 256-wide q' that is zero elsewhere (S = q . k of its own head exactly), the scale
stays 1 / sqrt(64), and each row's output is its own head's 64 columns of O' = P . V'. The kernel then reads each
cache row in 512-byte runs where the hdim-64 kernel reads 128 bytes, over a quarter of the lanes. Needs a build with
bf16 hdims 64 and 256.

    python benchmarks/probe_packed_heads.py [rounds]

It checks the packing against a float64 reference on the CPU first, then times, per shape, the plan, the packed
kernel alone (q' built beforehand), the packed call with its packing and unpacking, and cuDNN
(benchmarks/notes.md#j-s44).
"""
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import _common  # noqa: F401  (puts this checkout first on sys.path)

PACK = 4


def pack_q(q, hkv):
    """q (b, sq, hq, 64) -> q' (b, sq, hq, 256): query head j (of K/V head j // group) keeps its 64 values in the
    column block of its K/V head within the packed group of PACK K/V heads, zeros elsewhere."""
    b, sq, hq, d = q.shape
    group = hq // hkv
    slot = (torch.arange(hq, device=q.device) // group) % PACK  # which of the PACK heads of its packed K/V head
    qp = q.new_zeros(b, sq, hq, PACK * d)
    idx = (slot[:, None] * d + torch.arange(d, device=q.device)[None, :])  # (hq, d) column of each value
    qp.scatter_(3, idx.expand(b, sq, hq, d), q)
    return qp, idx


def unpack_o(op, idx):
    b, sq, hq, _ = op.shape
    return op.gather(3, idx.expand(b, sq, hq, idx.shape[1]))


def pack_kv(t):
    """A (b, s, hkv, 64) cache whose heads are adjacent in each row, viewed as (b, s, hkv / PACK, PACK * 64)."""
    b, s, hkv, d = t.shape
    assert hkv % PACK == 0 and t.stride(3) == 1 and t.stride(2) == d
    return t.as_strided((b, s, hkv // PACK, PACK * d), (t.stride(0), t.stride(1), PACK * d, 1))


def packed_attention(attn, q, k, v, **kw):
    """attn(q', k', v', softmax_scale=...) on the packed problem; the result unpacked to (b, sq, hq, 64)."""
    qp, idx = pack_q(q, k.shape[2])
    return unpack_o(attn(qp, pack_kv(k), pack_kv(v), softmax_scale=q.shape[3] ** -0.5, **kw), idx)


def reference(q, k, v, softmax_scale=None):  # (b, s, h, d), float64, GQA
    hq, hkv = q.shape[2], k.shape[2]
    qb, kb, vb = (t.transpose(1, 2).double() for t in (q, k, v))
    kb, vb = kb.repeat_interleave(hq // hkv, 1), vb.repeat_interleave(hq // hkv, 1)
    return F.scaled_dot_product_attention(qb, kb, vb, scale=softmax_scale).transpose(1, 2)


def self_check():  # the packing's algebra, on the CPU against the reference
    torch.manual_seed(0)
    for hq, hkv in ((32, 8), (32, 32), (8, 4)):
        q = torch.randn(2, 3, hq, 64)
        k, v = torch.randn(2, 50, hkv, 64), torch.randn(2, 50, hkv, 64)
        err = (packed_attention(reference, q, k, v) - reference(q, k, v)).abs().max().item()
        assert err < 1e-12, (hq, hkv, err)
    print("packing self-check: ok")


SHAPES = [  # (heads_kv, batch, keys), 32 query heads, sq 1: #21's hdim-64 shapes
    (8, 128, 2048), (8, 64, 8192), (8, 8, 131072), (8, 1, 524288),
    (32, 128, 2048), (32, 64, 8192), (32, 8, 131072), (32, 1, 524288),
]


def main():
    self_check()
    if not torch.cuda.is_available():
        return
    from triton.testing import do_bench

    import flashcute

    flashcute.load_extension()
    built = set(torch.ops.flashcute.built_kernels())
    missing = {f"decode_sm80_bf16_hdim{d}" for d in (64, 256)} - built
    if missing:
        sys.exit(f"the probe needs bf16 decode kernels of head dims 64 and 256; this build lacks {sorted(missing)} "
                 "(FLASHCUTE_DTYPES=bf16 FLASHCUTE_HDIMS=64,256)")
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    for hkv, b, sk in SHAPES:
        torch.manual_seed(0)
        q = torch.randn(b, 1, 32, 64, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(b, sk, hkv, 64, device="cuda", dtype=torch.bfloat16)
        v = torch.randn_like(k)
        lengths = torch.full((b,), sk, device="cuda", dtype=torch.int32)
        nbytes = 2 * k.numel() * k.element_size() + 2 * q.numel() * q.element_size()

        def kvcache(q, k, v, **kw):
            return flashcute.flash_attn_with_kvcache(q, k, v, cache_seqlens=lengths, **kw)

        q_packed, _ = pack_q(q, hkv)
        k_packed, v_packed = pack_kv(k), pack_kv(v)
        q_bhsd, k_bhsd, v_bhsd = (t.transpose(1, 2) for t in (q, k, v))

        def cudnn():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return F.scaled_dot_product_attention(q_bhsd, k_bhsd, v_bhsd, enable_gqa=hkv != 32)

        variants = {
            "plan": lambda: kvcache(q, k, v),
            "packed_kernel": lambda: kvcache(q_packed, k_packed, v_packed, softmax_scale=0.125),
            "packed_all": lambda: packed_attention(kvcache, q, k, v),
            "cudnn": cudnn,
        }
        expected = reference(q[:1], k[:1], v[:1])
        errors = {n: (variants[n]()[:1].double() - expected).abs().max().item() for n in ("plan", "packed_all")}
        gbps = {n: [] for n in variants}
        for _ in range(rounds):
            for name, fn in variants.items():
                fn()
                torch.cuda.synchronize()
                gbps[name].append(nbytes / (do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e-3) / 1e9)
        best = {name: max(values) for name, values in gbps.items()}
        print(f"d64 {'gqa' if hkv == 8 else 'mha'} ({b}, {sk}): max error against float64, plan "
              f"{errors['plan']:.1e}, packed {errors['packed_all']:.1e}; GB/s "
              + "  ".join(f"{n} {'/'.join(f'{x:.0f}' for x in gbps[n])}" for n in gbps)
              + "; / cuDNN " + "  ".join(f"{n} {best[n] / best['cudnn']:.3f}" for n in gbps if n != "cudnn"))
        del q, k, v, q_packed, k_packed, v_packed, variants
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
