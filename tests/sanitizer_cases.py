"""A quick set of backward calls to run under compute-sanitizer (not a pytest file: pytest collects test_*.py only).

    compute-sanitizer --tool memcheck python tests/sanitizer_cases.py [--backends sm90,sm80] [--head-dims 64,128]
    compute-sanitizer --tool racecheck python tests/sanitizer_cases.py --backends sm90 --head-dims 128

Each case runs the forward and the backward op once on small shapes that reach every path of the backward's dQ
handling: the in-kernel zeroing of short queries (dq_claims) and the preprocess's of longer ones, the per-block
completion counters (dq_done), deterministic turnstiles, GQA's float32 dK / dV accumulators, causal with sq != sk,
and packed batches with empty, single-row and ragged sequences. The gradients land in NaN-poisoned memory and are
compared with the float64 reference (a loose bound: the tests hold the 2x-PyTorch rule; this catches a stale or
unwritten block, which a sanitizer does not see). Exits non-zero on the first case that fails.
"""

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reference import attention_grads_ref  # noqa: E402
from test_fwd import make_qkv, poison_next_allocations  # noqa: E402
from test_varlen import cu_seqlens, make_packed, reference  # noqa: E402

import flashcute  # noqa: E402

DTYPE = torch.bfloat16
TOLERANCE = 0.05  # of the reference gradient's largest magnitude

# (batch, seqlen_q, seqlen_k, heads_q, heads_kv, causal, deterministic)
FIXED = [
    (2, 200, 200, 2, 2, False, False),   # queries <= 1024: the kernel zeroes dQ's accumulator (dq_claims)
    (1, 1100, 1100, 1, 1, False, False),  # longer: the preprocess zeroes it
    (2, 130, 257, 4, 2, True, False),     # causal, sq != sk, GQA
    (2, 257, 130, 4, 2, False, True),     # deterministic, GQA (dK / dV turnstiles)
    (1, 300, 300, 2, 2, True, True),      # deterministic, causal
]
# (lengths of q, lengths of k, heads_q, heads_kv, causal, deterministic)
PACKED = [
    ([1, 0, 17, 113, 203, 64], [239, 7, 0, 203, 113, 64], 4, 2, False, False),
    ([1, 0, 17, 113, 203, 64], [239, 7, 0, 203, 113, 64], 4, 2, True, True),
]


def check(name, grads, ref):
    for label, g, r in zip(("dq", "dk", "dv"), grads, ref):
        scale = r.abs().max().item() or 1.0
        err = (g.float() - r).abs().max().item() if g.numel() else 0.0
        if not err <= TOLERANCE * scale:  # NaN fails too
            sys.exit(f"{name}: {label} max |error| {err:.3e} over {TOLERANCE} x {scale:.3e}")
    print(f"ok  {name}", flush=True)


def run_fixed(backend, head_dim, case):
    b, sq, sk, hq, hkv, causal, deterministic = case
    q, k, v = make_qkv(b, sq, sk, hq, hkv, head_dim, DTYPE, "contiguous", seed=sq * 31 + sk)
    dout = torch.randn_like(q)
    out, lse = torch.ops.flashcute.fwd(q, k, v, None, causal, False, backend)
    poison_next_allocations(*((t.shape, t.dtype) for t in (q, k, v)))
    grads = torch.ops.flashcute.bwd(dout, q, k, v, out, lse, None, causal, False, deterministic, backend)
    torch.cuda.synchronize()
    ref = attention_grads_ref(q, k, v, dout, causal=causal)
    check(f"{backend} d{head_dim} fixed {case}", grads, ref)


def run_packed(backend, head_dim, case):
    lens_q, lens_k, hq, hkv, causal, deterministic = case
    q, k, v = make_packed(lens_q, lens_k, hq, hkv, head_dim, DTYPE, "contiguous", seed=sum(lens_q) + 7)
    dout = torch.randn_like(q)
    seqlens = (cu_seqlens(lens_q), cu_seqlens(lens_k), max(lens_q), max(lens_k), None, causal)
    out, lse = torch.ops.flashcute.fwd_varlen(q, k, v, *seqlens, None, backend)
    poison_next_allocations(*((t.shape, t.dtype) for t in (q, k, v)))
    grads = torch.ops.flashcute.bwd_varlen(dout, q, k, v, out, lse, *seqlens, None, deterministic, backend)
    torch.cuda.synchronize()
    check(f"{backend} d{head_dim} packed {case}", grads, reference(q, k, v, dout, lens_q, lens_k, causal)[True][2])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default="sm90,sm80")
    parser.add_argument("--head-dims", default="64,128")
    args = parser.parse_args()
    flashcute.load_extension()
    built = torch.ops.flashcute.built_kernels()
    for backend in args.backends.split(","):
        for head_dim in (int(d) for d in args.head_dims.split(",")):
            if f"bwd_{backend}_bf16_hdim{head_dim}" not in built:
                print(f"skip {backend} d{head_dim}: not built", flush=True)
                continue
            for case in FIXED:
                run_fixed(backend, head_dim, case)
            for case in PACKED:
                run_packed(backend, head_dim, case)


if __name__ == "__main__":
    main()
