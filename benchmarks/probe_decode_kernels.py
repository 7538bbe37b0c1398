"""Probe (#21): where a decoding step's time goes, kernel by kernel, flashcute beside torch SDPA's cuDNN backend.

For each shape (bf16, one query row, cache_seqlens = the whole cache): the call's median time by CUDA events around
it (a 256 MiB buffer zeroed before each call, so the cache comes from DRAM), and from torch.profiler, one call at a
time: each kernel's GPU time, the span from the first kernel's start to the last one's end, and how much of that
span lies after the longest (main) kernel ends. flashcute launches its combine kernel programmatically (PDL): it
starts during the split-KV kernel's last wave and waits there, so what it adds is its part after the split-KV kernel
ends. s54 (benchmarks/results/decode_kernels_2026-11-29_0330_NVIDIA-H200.md) found flashcute's call 7-9 us longer
than its split-KV kernel where it splits, cuDNN's 6-8 us longer than its main kernel.

    python benchmarks/probe_decode_kernels.py                       # the four shapes below
    python benchmarks/probe_decode_kernels.py --shapes 1:512k:8:64,8:128k:32:128   # b:sk:hkv:d, 32 query heads

Prints a markdown table; GB/s count K + V once. The last column is the main kernel's launch (grid, block, dynamic
and static shared memory, registers) from the profiler's trace: the residency a peer chose.
"""

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import length  # noqa: E402  (puts this checkout first on sys.path)

import flashcute  # noqa: E402

SHAPES = "1:512k:8:64,8:128k:8:64,8:128k:32:64,1:512k:8:128"  # b:sk:hkv:d
FLUSH_BYTES = 256 * 2**20


def call_us(fn, flush, calls):
    """Median time of fn by CUDA events around it, the cache flushed from L2 before each call."""
    for _ in range(5):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
    for start, end in zip(starts, ends):
        flush.zero_()
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends)) * 1e3


def kernel_timeline(fn, flush, calls):
    """Medians over calls profiled one at a time: {kernel name: GPU us}, span us, us after the main kernel."""
    times, spans, after_main = {}, [], []
    for _ in range(calls):
        flush.zero_()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
                   and e.time_range.end > e.time_range.start]
        if not kernels:
            raise RuntimeError("the profiler saw no kernel")
        for e in kernels:
            times.setdefault(e.name, []).append(e.time_range.end - e.time_range.start)
        main = max(kernels, key=lambda e: e.time_range.end - e.time_range.start)
        spans.append(max(e.time_range.end for e in kernels) - min(e.time_range.start for e in kernels))
        after_main.append(max(e.time_range.end for e in kernels) - main.time_range.end)
    return ({name: statistics.median(t) for name, t in times.items()}, statistics.median(spans),
            statistics.median(after_main))


def launches(fn):
    """{kernel's short name: its grid, block, shared memory and registers} in one profiled call, from the trace."""
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json") as trace:
        prof.export_chrome_trace(trace.name)
        events = json.load(open(trace.name))["traceEvents"]
    found = {}
    for e in events:
        args = e.get("args", {})
        if e.get("cat") == "kernel" and "grid" in args:
            grid = "x".join(str(g) for g in args["grid"])
            block = "x".join(str(g) for g in args["block"])
            found[short(e["name"])] = (f"grid {grid}, block {block}, {args.get('shared memory', '?')} B smem, "
                                f"{args.get('registers per thread', '?')} regs")
    return found


def short(name):
    """A kernel's name without its template arguments."""
    name = name.removeprefix("void ")
    return name.split("<")[0].split("(")[0][-48:]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", default=SHAPES, help="comma-separated b:sk:hkv:d (32 query heads)")
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()

    flush = torch.empty(FLUSH_BYTES, device="cuda", dtype=torch.int8)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}")
    print("| shape (b, sk, hkv, d) | reader | call us (GB/s) | span us | after main kernel us | kernels (GPU us) | "
          "main kernel's launch |")
    print("|---|---|---|---|---|---|---|")
    for text in args.shapes.split(","):
        b, sk, hkv, d = (length(x) for x in text.split(":"))
        k = torch.randn(b, sk, hkv, d, device="cuda", dtype=torch.bfloat16)
        v = torch.randn_like(k)
        q = torch.randn(b, 1, 32, d, device="cuda", dtype=torch.bfloat16)
        lens = torch.full((b,), sk, device="cuda", dtype=torch.int32)
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))

        def cudnn():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return F.scaled_dot_product_attention(qt, kt, vt, enable_gqa=hkv != 32)

        readers = {"flashcute": lambda: flashcute.flash_attn_with_kvcache(q, k, v, cache_seqlens=lens),
                   "cudnn": cudnn}
        for name, fn in readers.items():
            us = call_us(fn, flush, 3 * args.calls)
            kernels, span, after = kernel_timeline(fn, flush, args.calls)
            gbps = 2 * k.numel() * k.element_size() / us / 1e3
            listed = "; ".join(f"{short(n)} {t:.1f}" for n, t in sorted(kernels.items(), key=lambda kv: -kv[1]))
            main_kernel = max(kernels, key=kernels.get)
            launch = launches(fn).get(short(main_kernel), "?")
            print(f"| ({b}, {text.split(':')[1]}, {hkv}, {d}) | {name} | {us:.1f} ({gbps:.0f}) | {span:.1f} | "
                  f"{after:.1f} | {listed} | {launch} |")


if __name__ == "__main__":
    main()
