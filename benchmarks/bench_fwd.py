"""Forward attention throughput: flashcute's backends beside torch SDPA's flash, cuDNN and efficient backends,
all measured in the same run on the same GPU.

Shapes follow the FlashAttention papers: batch * seqlen = 16k tokens, hidden 2048 (heads = 2048 / head_dim),
seqlen 512 ... 16k, causal and not. FLOPs = 4 * batch * heads * seqlen_q * seqlen_k * head_dim, halved for
causal. Times are triton.testing.do_bench medians. Also reported: the extension's JIT build time (cold) and
its cached load time, each implementation's extra peak memory per call, and the matmul rate of each dtype
timed the same way (torch.mm, 8192^3): long runs settle at the clock the board's power cap allows, well
below a short burst's, and that is the rate the attention kernels compete with: each flashcute figure is also
given as a fraction of it. The run ends with each flashcute backend's geometric-mean ratio to each peer over
the paper shapes.

    python benchmarks/bench_fwd.py                         # the full paper grid, bf16 and fp16
    python benchmarks/bench_fwd.py --dtypes bf16 --head-dims 128 --seqlens 1024,4096   # a quick look
    python benchmarks/bench_fwd.py --extras                # + head dims 96/192 at seqlen 8448, and GQA 64/8
    python benchmarks/bench_fwd.py --cold-build            # + a fresh JIT build into a temporary cache, timed

Results (JSON and markdown, named by date and device) go to benchmarks/results/ or --out.
"""

import argparse
import json
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel

from _common import (CAUSAL, DTYPES, HIDDEN, PEERS, RESULTS, TOKENS, add_grid_args, build_times, csv, first_line,
                     flashcute_backends, geomean_lines, git_commit, matmul_rates, measure, paper_shapes, run_meta,
                     shape_text, table, versions, write_results)
import flashcute  # this checkout's: _common put it first on sys.path


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_grid_args(parser)
    parser.add_argument("--peers", default="flash,cudnn,efficient", help="torch SDPA backends to run beside")
    parser.add_argument("--extras", action="store_true", help="head dims 96/192 at seqlen 8448, and GQA 64q/8kv d128 16k")
    parser.add_argument("--cold-build", action="store_true", help="also time a fresh JIT build into a temporary cache")
    parser.add_argument("--out", default=str(RESULTS), help="folder for the JSON and markdown")
    return parser.parse_args()


def bench_shape(dtype, head_dim, causal, batch, seqlen, heads_q, heads_kv, paper, backends, peers):
    flops = 4 * batch * heads_q * seqlen * seqlen * head_dim / (2 if causal else 1)
    q = torch.randn(batch, seqlen, heads_q, head_dim, device="cuda", dtype=dtype)
    k = torch.randn(batch, seqlen, heads_kv, head_dim, device="cuda", dtype=dtype)
    v = torch.randn_like(k)
    row = {"dtype": str(dtype).removeprefix("torch."), "d": head_dim, "causal": causal, "b": batch, "s": seqlen,
           "hq": heads_q, "hkv": heads_kv, "paper": paper, "tflops": {}, "peak_mib": {}, "notes": {}}

    def record(name, fn):
        try:
            ms, peak = measure(fn)
        except RuntimeError as error:  # a peer that does not serve this shape
            row["notes"][name] = first_line(error)
            return
        row["tflops"][name] = flops / (ms * 1e-3) / 1e12
        row["peak_mib"][name] = peak

    outputs = {}
    for backend in backends:
        record(f"flashcute_{backend}", lambda: flashcute.flash_attn_func(q, k, v, causal=causal, backend=backend))
        outputs[backend] = flashcute.flash_attn_func(q, k, v, causal=causal, backend=backend)

    # Peers get contiguous (b, h, s, d) tensors, their preferred layout; GQA through enable_gqa.
    qt, kt, vt = (t.transpose(1, 2).contiguous() for t in (q, k, v))
    del q, k, v
    gqa = heads_q != heads_kv
    for name in peers:
        with sdpa_kernel(PEERS[name]):
            record(name, lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, enable_gqa=gqa))
            if name == "flash" and "flash" in row["tflops"]:  # a sanity check of flashcute against torch's flash
                reference = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, enable_gqa=gqa).transpose(1, 2)
                row["max_abs_diff_vs_flash"] = {b: (o.float() - reference.float()).abs().max().item() for b, o in outputs.items()}
    return row


def main():
    args = parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench_fwd.py needs a CUDA GPU")
    library, times = build_times(args.cold_build)
    backends = flashcute_backends(args, "fwd")
    peers = csv(args.peers)

    shapes = []  # (dtype, head_dim, causal, batch, seqlen, heads_q, heads_kv, on the paper grid)
    for dtype_name in csv(args.dtypes):
        shapes += paper_shapes(args, dtype_name)
        if args.extras:
            for head_dim in (96, 192):
                for causal in CAUSAL[args.causal]:
                    heads = round(HIDDEN / head_dim)
                    shapes.append((DTYPES[dtype_name], head_dim, causal, round(TOKENS / 8448), 8448, heads, heads, False))
            for causal in CAUSAL[args.causal]:
                shapes.append((DTYPES[dtype_name], 128, causal, 1, 16384, 64, 8, False))

    device, commit = torch.cuda.get_device_name(), git_commit()
    print(f"{device}, {versions(commit)}, backends {backends}, peers {peers}")
    print(f"extension: {times}")
    matmul, matmul_text = matmul_rates(csv(args.dtypes))
    print(f"matmul{matmul_text}")
    rows = []
    for shape in shapes:
        row = bench_shape(*shape, backends, peers)
        rows.append(row)
        summary = "  ".join(f"{k.removeprefix('flashcute_')} {v:.1f}" for k, v in row["tflops"].items())
        print(f"{shape_text(row)}: {summary}", flush=True)
        for name, note in row["notes"].items():
            print(f"  {name} did not run: {note}")
        for name, diff in row.get("max_abs_diff_vs_flash", {}).items():
            if diff > 0.05:
                print(f"  WARNING: flashcute {name} differs from torch's flash by {diff:.3f}")

    markdown = table(rows, backends, peers, matmul, ratio_peers=("flash", "cudnn"))
    ratio_lines = geomean_lines(rows, backends, peers)
    print()
    print(markdown)
    print()
    print("\n".join(ratio_lines))
    meta = {**run_meta(device, commit), "extension": {**times, "path": str(library.path)}, "backends": backends,
            "peers": peers, "matmul_tflops": matmul}
    write_results(args.out, "fwd", "flashcute forward", meta, rows,
                  f"{versions(commit)}. TFLOP/s (do_bench median); ratios flashcute/peer; "
                  f"<backend>/matmul: fraction of the same dtype's matmul rate; extra peak memory of one call in MiB.\n\n"
                  f"Extension: {json.dumps(times)}\n\n"
                  f"Matmul{matmul_text}\n\n{markdown}\n\n" + "".join(f"- {line}\n" for line in ratio_lines))


if __name__ == "__main__":
    main()
