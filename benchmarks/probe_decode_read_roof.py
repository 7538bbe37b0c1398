"""Probe (#21): how fast can a decode grid read a (b, s, h, d) KV cache at all, and does the grid shape matter?

On one H200 (s53) cuDNN read the long caches 1-1.5% faster than flashcute, (1, 512k) and (8, 128k), above the
copy test's read + write rate. flashcute's long-share plan runs lanes x (num_sms // lanes) CTAs, one per SM:
128 of 132 SMs for 8 or 32 K/V heads. This script streams the same cache with a kernel that only reads
(probe_decode_read_roof.cu: 16-byte cp.async into shared memory, `--stages` blocks of K and V in flight per CTA, as
the decode kernel's loads; no attention), in the grids below, beside flashcute and torch SDPA's cuDNN backend on the
same tensors:

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
import ctypes
import os
import subprocess
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import DTYPES, length, measure  # noqa: E402

import flashcute  # noqa: E402


def stream_kernel():
    """probe_decode_read_roof.cu built with nvcc (sm_90a or the device's own arch) into a cache, through ctypes."""
    major, minor = torch.cuda.get_device_capability()
    arch = "sm_90a" if (major, minor) == (9, 0) else f"sm_{major}{minor}"
    source = Path(__file__).with_suffix(".cu")
    out_dir = Path(os.environ.get("FLASHCUTE_CACHE_DIR", Path.home() / ".cache" / "flashcute")) / "probes"
    out_dir.mkdir(parents=True, exist_ok=True)
    library = out_dir / f"read_roof_{arch}.so"
    if not library.exists() or library.stat().st_mtime < source.stat().st_mtime:
        subprocess.run(["nvcc", "-O3", f"-arch={arch}", "-shared", "-Xcompiler", "-fPIC", "-o", str(library),
                        str(source)], check=True)
    lib = ctypes.CDLL(str(library))
    i64, i32, ptr = ctypes.c_int64, ctypes.c_int, ctypes.c_void_p
    lib.probe_stream.argtypes = [ptr, ptr, i64, i64, i32, i64, i32, i64, i32, i32, i32, i32, i32, ptr]
    lib.probe_stream.restype = i32
    return lib.probe_stream


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtype", default="bf16", choices=tuple(DTYPES))
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seqlen", type=length, default=512 * 1024)
    parser.add_argument("--heads-q", type=int, default=32)
    parser.add_argument("--heads-kv", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--stage-kib", type=int, default=32, help="K bytes of one stage per CTA (V's as many)")
    parser.add_argument("--stages", default="2,3", help="stages in flight per CTA to try per grid")
    parser.add_argument("--peers", default="flashcute,cudnn", help="of flashcute,cudnn: read beside the probe")
    args = parser.parse_args()

    dtype, b, s, hkv, d = DTYPES[args.dtype], args.batch, args.seqlen, args.heads_kv, args.head_dim
    props = torch.cuda.get_device_properties(0)
    sms, smem_per_cta = props.multi_processor_count, props.shared_memory_per_block_optin
    rows, row_bytes, slice_bytes = b * s, hkv * d * dtype.itemsize, d * dtype.itemsize
    for name, size in (("a head's columns", slice_bytes), ("a cache row", row_bytes)):
        if size % 16 or (size // 16) & (size // 16 - 1):
            parser.error(f"the reader takes rows of a power of two of 16-byte vectors; {name} is {size} bytes")
    k = torch.randn(b, s, hkv, d, device="cuda", dtype=dtype)
    v = torch.randn_like(k)
    q = torch.randn(b, 1, args.heads_q, d, device="cuda", dtype=dtype)
    cache_bytes = 2 * k.numel() * k.element_size()
    gbps = lambda timing: cache_bytes / timing[0] / 1e6  # noqa: E731  (measure: median ms, peak MiB)
    results = []

    peers = args.peers.split(",")
    if "flashcute" in peers:
        seqlens = torch.full((b,), s, device="cuda", dtype=torch.int32)
        results.append(("flashcute", "-", "-", "-", gbps(measure(lambda: flashcute.flash_attn_with_kvcache(
            q, k, v, cache_seqlens=seqlens)))))
    if "cudnn" in peers:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            results.append(("cudnn", "-", "-", "-", gbps(measure(
                lambda: F.scaled_dot_product_attention(qt, kt, vt, enable_gqa=hkv != args.heads_q)))))

    stream = stream_kernel()
    # (mode, lanes, main CTAs' shares per lane, rows per share, tail CTAs)
    grids = [("rows", 1, n, -(-rows // n), 0) for n in (hkv * (sms // hkv), sms, 2 * sms)]
    grids += [("heads", hkv, n, -(-rows // n), 0) for n in sorted({sms // hkv, -(-sms // hkv), 2 * sms // hkv})]
    tails = sms - hkv * (sms // hkv)
    if tails and hkv % tails == 0:  # every SM one CTA: equal shares per lane, the lanes' last rows on the rest
        grids.append(("heads+tails", hkv, sms // hkv, -(-rows * hkv // sms), tails))
    for mode, lanes, shares, rows_per_share, tail_ctas in grids:
        col_bytes = row_bytes if mode == "rows" else slice_bytes
        block_rows = max(1, args.stage_kib * 1024 // col_bytes)
        main_ctas = lanes * shares
        ctas = main_ctas + tail_ctas
        tail_first = min(rows, shares * rows_per_share)
        for stages in map(int, args.stages.split(",")):
            if stages * 2 * block_rows * col_bytes > smem_per_cta:
                continue

            def call():
                err = stream(k.data_ptr(), v.data_ptr(), rows, row_bytes, lanes, rows_per_share, main_ctas,
                             tail_first, lanes // max(tail_ctas, 1), col_bytes, block_rows, ctas, stages,
                             torch.cuda.current_stream().cuda_stream)
                if err:
                    raise RuntimeError(f"probe_stream: error {err}")
            text = f"{lanes} x {shares}" + (f" + {tail_ctas}" if tail_ctas else "") + f" = {ctas}"
            in_flight = f"{stages} x {2 * block_rows * col_bytes // 1024} KiB"
            results.append((mode, text, in_flight, f"{block_rows} x {col_bytes} B", gbps(measure(call))))

    print(f"{torch.cuda.get_device_name()}, {sms} SMs; {args.dtype}, (b, s, hkv, d) = ({b}, {s}, {hkv}, {d}), "
          f"K + V {cache_bytes / 2**30:.2f} GiB")
    print("| reader | CTAs | in flight per CTA | stage (rows x bytes, K and V each) | GB/s |\n|---|---|---|---|---|")
    for name, ctas, in_flight, stage, rate in results:
        print(f"| {name} | {ctas} | {in_flight} | {stage} | {rate:.0f} |")


if __name__ == "__main__":
    main()
