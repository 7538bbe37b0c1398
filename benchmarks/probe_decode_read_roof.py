"""Probe (#21): how fast can a decode grid read a (b, s, h, d) KV cache at all, and does the grid shape matter?

On one H200 (s53) cuDNN read the long caches 1-1.5% faster than flashcute, (1, 512k) and (8, 128k), above the
copy test's read + write rate. flashcute's long-share plan runs lanes x (num_sms // lanes) CTAs, one per SM:
128 of 132 SMs for 8 or 32 K/V heads. This script streams the same cache with a Triton kernel that only reads
(no attention), in the grids below, beside flashcute and torch SDPA's cuDNN backend on the same tensors:

  rows   N CTAs, each reading whole rows (every head) of an equal share of the b * s rows: the read roof
  heads  lanes (K/V heads) x S shares per lane, a CTA reading its head's d columns of its share's rows, the lanes
         of a share side by side in the grid (flashcute's equal-shares order); S = num_sms // lanes is
         flashcute's grid
  heads+tails  one CTA per SM: every lane's rows in num_sms // lanes equal shares of lanes / num_sms of all
         rows, and the lanes' remaining last rows on the other SMs' CTAs (8 heads on 132 SMs: 128 shares of
         1 / 16.5 of a lane's rows, then 4 CTAs each reading two lanes' last 1 / 33)

    python benchmarks/probe_decode_read_roof.py                       # bf16, d 64, 8 K/V heads, (1, 512k)
    python benchmarks/probe_decode_read_roof.py --head-dim 128 --heads-kv 32 --batch 8 --seqlen 128k

If `rows` at num_sms CTAs reads as fast as cuDNN and `heads` at flashcute's grid as slowly as flashcute, the
four idle SMs (or the head-slice reads) are the gap, and `heads+tails` says what a plan using them would read;
if `heads` at flashcute's grid matches `rows`, the gap is inside flashcute's kernel. Prints a table; GB/s
count K + V once.
"""

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import DTYPES, measure  # noqa: E402

import flashcute  # noqa: E402


def length(text):
    return int(text[:-1]) * 1024 if text.endswith("k") else int(text)


def stream_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def stream(k_ptr, v_ptr, out_ptr, rows, row_stride, lanes, rows_per_share, main_ctas, tail_first, lanes_per_tail,
               COLS: tl.constexpr, BLOCK_ROWS: tl.constexpr):
        # CTA pid < main_ctas reads rows [share * rows_per_share, ...) of lane `lane`'s COLS columns of K and V; a
        # CTA past them reads rows [tail_first, rows) of lanes_per_tail lanes, one after another.
        pid = tl.program_id(0)
        if pid < main_ctas:
            lane0 = pid % lanes
            n_lanes = 1
            first = (pid // lanes) * rows_per_share
            last = tl.minimum(first + rows_per_share, rows)
        else:
            lane0 = (pid - main_ctas) * lanes_per_tail
            n_lanes = lanes_per_tail
            first = tail_first
            last = rows
        cols = tl.arange(0, COLS)
        acc = tl.zeros([COLS], dtype=tl.float32)
        for j in range(0, n_lanes):
            for start in range(first, last, BLOCK_ROWS):
                r = start + tl.arange(0, BLOCK_ROWS)
                offsets = r[:, None].to(tl.int64) * row_stride + (lane0 + j) * COLS + cols[None, :]
                mask = (r < last)[:, None]
                acc += tl.sum(tl.load(k_ptr + offsets, mask=mask, other=0.0).to(tl.float32), axis=0)
                acc += tl.sum(tl.load(v_ptr + offsets, mask=mask, other=0.0).to(tl.float32), axis=0)
        tl.store(out_ptr + pid * COLS + cols, acc)

    return stream


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtype", default="bf16", choices=tuple(DTYPES))
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seqlen", type=length, default=512 * 1024)
    parser.add_argument("--heads-q", type=int, default=32)
    parser.add_argument("--heads-kv", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--block-rows", type=int, default=128)
    parser.add_argument("--stages", default="2,3,4", help="Triton num_stages to try per grid")
    args = parser.parse_args()

    dtype, b, s, hkv, d = DTYPES[args.dtype], args.batch, args.seqlen, args.heads_kv, args.head_dim
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    k = torch.randn(b, s, hkv, d, device="cuda", dtype=dtype)
    v = torch.randn_like(k)
    q = torch.randn(b, 1, args.heads_q, d, device="cuda", dtype=dtype)
    cache_bytes = 2 * k.numel() * k.element_size()
    gbps = lambda timing: cache_bytes / timing[0] / 1e6  # noqa: E731  (measure: median ms, peak MiB)
    rows = b * s
    results = []

    seqlens = torch.full((b,), s, device="cuda", dtype=torch.int32)
    results.append(("flashcute", "-", "-", gbps(measure(lambda: flashcute.flash_attn_with_kvcache(
        q, k, v, cache_seqlens=seqlens)))))
    from torch.nn.attention import SDPBackend, sdpa_kernel
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        results.append(("cudnn", "-", "-", gbps(measure(
            lambda: F.scaled_dot_product_attention(qt, kt, vt, enable_gqa=hkv != args.heads_q)))))

    stream = stream_kernel()
    # (mode, lanes, main CTAs' shares per lane, rows per share, tail CTAs)
    grids = [("rows", 1, n, -(-rows // n), 0) for n in (hkv * (sms // hkv), sms, 2 * sms)]
    grids += [("heads", hkv, n, -(-rows // n), 0) for n in sorted({sms // hkv, -(-sms // hkv), 2 * sms // hkv})]
    tails = sms - hkv * (sms // hkv)
    if tails and hkv % tails == 0:  # every SM one CTA: equal shares per lane, the lanes' last rows on the rest
        grids.append(("heads+tails", hkv, sms // hkv, -(-rows * hkv // sms), tails))
    for mode, lanes, shares, rows_per_share, tail_ctas in grids:
        cols = hkv * d if mode == "rows" else d
        main_ctas = lanes * shares
        ctas = main_ctas + tail_ctas
        tail_first = min(rows, shares * rows_per_share)
        out = torch.empty(ctas * cols, device="cuda", dtype=torch.float32)
        block_rows = args.block_rows if mode != "rows" else max(1, args.block_rows * d // cols)
        for stages in map(int, args.stages.split(",")):
            def call():
                stream[(ctas,)](k, v, out, rows, hkv * d, lanes, rows_per_share, main_ctas, tail_first,
                                lanes // max(tail_ctas, 1), COLS=cols, BLOCK_ROWS=block_rows, num_stages=stages,
                                num_warps=4)
            text = f"{lanes} x {shares}" + (f" + {tail_ctas}" if tail_ctas else "") + f" = {ctas}"
            results.append((mode, text, stages, gbps(measure(call))))

    print(f"{torch.cuda.get_device_name()}, {sms} SMs; {args.dtype}, (b, s, hkv, d) = ({b}, {s}, {hkv}, {d}), "
          f"K + V {cache_bytes / 2**30:.2f} GiB")
    print("| reader | CTAs | stages | GB/s |\n|---|---|---|---|")
    for name, ctas, stages, rate in results:
        print(f"| {name} | {ctas} | {stages} | {rate:.0f} |")


if __name__ == "__main__":
    main()
