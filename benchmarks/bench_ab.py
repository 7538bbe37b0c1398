"""A/B check of flashcute's forward or backward between two checkouts, in one run on one GPU: did a change make any
shape slower? Each checkout is timed in its own process (each loads its own extension), alternating A, B, A, B, ...,
so the run-to-run noise (A against A) is measured beside the difference (B against A). Several B checkouts
(comma-separated) are each timed in every round, A, B1, B2, ..., and each compared with A.

    python benchmarks/bench_ab.py --a /path/to/old/checkout --b . [--rounds 2] [--backends sm90,sm80]
    python benchmarks/bench_ab.py --a /path/to/main --b /path/to/probe1,/path/to/probe2 --op bwd --head-dims 128
    python benchmarks/bench_ab.py --a /path/to/old/checkout --op bwd --backends sm90 --dtypes bf16 --head-dims 64,128
    python benchmarks/bench_ab.py --a /path/to/old/checkout --op varlen-bwd --backends auto --dtypes bf16 --head-dims 128

Shapes: the FlashAttention-paper grid of bench_fwd.py (batch * seqlen = 16k, hidden 2048, head dims 64/128/256,
seqlen 512-16k, causal and not, bf16 and fp16), or for the varlen ops bench_varlen.py's two packed mixes
(varlen_mixes.py) at those head dims, causal and not; narrowed by --dtypes and --head-dims. Times:
triton.testing.do_bench medians of flash_attn_func (--op fwd), torch.ops.flashcute.fwd_varlen (--op varlen-fwd), or
torch.ops.flashcute.bwd / bwd_varlen on a forward computed once (--op bwd / varlen-bwd, the default mode). Prints a
table and the geometric means, and writes JSON and markdown to benchmarks/results/ (or --out).
"""

import argparse
import datetime
import json
import math
import os
import subprocess
import sys
from pathlib import Path

from varlen_mixes import mixes

REPO = Path(__file__).resolve().parents[1]
SHAPES = [(dtype, d, s, causal) for dtype in ("bf16", "fp16") for d in (64, 128, 256)
          for s in (512, 1024, 2048, 4096, 8192, 16384) for causal in (False, True)]
OPS = ("fwd", "bwd", "varlen-fwd", "varlen-bwd")

# Runs inside one checkout's process: times every (backend, shape) of one op, prints one JSON line. A shape is
# (dtype, head dim, seqlen or mix name, causal); mixes maps a mix name to its sequences' lengths.
TIMER = r"""
import json, sys, torch, triton
sys.path.insert(0, sys.argv[1])
import flashcute
shapes, backends, op, mixes = (json.loads(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4],
                               json.loads(sys.argv[5]))
dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16}
times = {}
for dtype, d, s, causal in shapes:
    h = 2048 // d
    if op.startswith("varlen"):
        lengths = mixes[s]
        cu = torch.tensor([0] + lengths, device="cuda", dtype=torch.int32).cumsum(0, dtype=torch.int32)
        q, k, v, dout = (torch.randn(sum(lengths), h, d, device="cuda", dtype=dtypes[dtype]) for _ in range(4))
        seqlens = (cu, cu, max(lengths), max(lengths), None, causal)
    else:
        q, k, v, dout = (torch.randn(16384 // s, s, h, d, device="cuda", dtype=dtypes[dtype]) for _ in range(4))
    for backend in backends:
        if op == "fwd":
            fn = lambda: flashcute.flash_attn_func(q, k, v, causal=causal, backend=backend)
        elif op == "bwd":
            out, lse = torch.ops.flashcute.fwd(q, k, v, None, causal, False, backend)
            fn = lambda: torch.ops.flashcute.bwd(dout, q, k, v, out, lse, None, causal, False, False, backend)
        elif op == "varlen-fwd":
            fn = lambda: torch.ops.flashcute.fwd_varlen(q, k, v, *seqlens, None, backend)
        else:
            out, lse = torch.ops.flashcute.fwd_varlen(q, k, v, *seqlens, None, backend)
            fn = lambda: torch.ops.flashcute.bwd_varlen(dout, q, k, v, out, lse, *seqlens, None, False, backend)
        times[f"{backend} {dtype} {d} {s} {causal}"] = triton.testing.do_bench(fn, warmup=25, rep=100,
                                                                               return_mode="median")
print("TIMES " + json.dumps(times))
"""


def time_checkout(path, shapes, backends, op):
    result = subprocess.run([sys.executable, "-c", TIMER, str(path), json.dumps(shapes), json.dumps(backends), op,
                             json.dumps(mixes())], capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"timing {path} failed:\n{result.stderr[-3000:]}")
    line = next(line for line in result.stdout.splitlines() if line.startswith("TIMES "))
    return json.loads(line[len("TIMES "):])


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--a", required=True, help="the reference checkout (before)")
    parser.add_argument("--b", default=str(REPO), help="the checkout(s) under test (after), comma-separated")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--backends", default="sm90,sm80")
    parser.add_argument("--op", choices=OPS, default="fwd")
    parser.add_argument("--dtypes", default="bf16,fp16")
    parser.add_argument("--head-dims", default="64,128,256")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results"))
    args = parser.parse_args()
    backends = args.backends.split(",")
    dtypes, head_dims = args.dtypes.split(","), [int(d) for d in args.head_dims.split(",")]
    if args.op.startswith("varlen"):
        shapes = [(dtype, d, mix, causal) for dtype in dtypes for d in head_dims for mix in mixes()
                  for causal in (False, True)]
    else:
        shapes = [shape for shape in SHAPES if shape[0] in dtypes and shape[1] in head_dims]
    checkouts = {"a": args.a}
    bs = [b for b in args.b.split(",") if b]
    names = ["b"] if len(bs) == 1 else [f"b{i + 1}" for i in range(len(bs))]
    checkouts.update(zip(names, bs))
    runs = {side: [] for side in checkouts}
    for r in range(args.rounds):
        for side, path in checkouts.items():
            runs[side].append(time_checkout(path, shapes, backends, args.op))
            print(f"round {r + 1}: {side} timed", flush=True)

    import torch

    device = torch.cuda.get_device_name()
    rows = []
    ratios = {(name, bk): [] for name in names for bk in backends}
    noise = {bk: [] for bk in backends}
    for key in runs["a"][0]:
        a = [run[key] for run in runs["a"]]
        bests = [min(run[key] for run in runs[name]) for name in names]
        for name, b in zip(names, bests):
            ratios[name, key.split()[0]].append(min(a) / b)  # > 1: B faster
        noise[key.split()[0]].append(max(a) / min(a))  # A against A
        rows.append((key, min(a), bests, max(a) / min(a)))
    op_name = {"fwd": "forward", "bwd": "backward (the op on a forward computed once)",
               "varlen-fwd": "packed-batch forward (varlen_mixes.py)",
               "varlen-bwd": "packed-batch backward (varlen_mixes.py; the op on a forward computed once)"}[args.op]
    shape_name = "mix" if args.op.startswith("varlen") else "seqlen"
    labels = [name.upper() for name in names]
    lines = [f"# flashcute A/B {op_name}, {device}, {datetime.datetime.now():%Y-%m-%d %H:%M}",
             f"A = {args.a}, " + ", ".join(f"{label} = {path}" for label, path in zip(labels, bs))
             + f", {args.rounds} rounds each, alternating; best of rounds per shape.", "",
             f"| backend dtype d {shape_name} causal | A ms | "
             + " | ".join(f"{label} ms | A/{label} (>1: {label} faster)" for label in labels)
             + " | A spread (max/min) |",
             "|---|---|" + "---|---|" * len(labels) + "---|"]
    lines += [f"| {k} | {a:.4f} | " + " | ".join(f"{b:.4f} | {a / b:.3f}" for b in bests) + f" | {n:.3f} |"
              for k, a, bests, n in rows]
    lines.append("")
    for bk in backends:
        for name, label in zip(names, labels):
            rs = ratios[name, bk]
            lines.append(f"**{bk}**: A/{label} geomean {geomean(rs):.4f} (min {min(rs):.3f}, max {max(rs):.3f}) over "
                         f"{len(rs)} shapes; A's own round-to-round spread: median "
                         f"{sorted(noise[bk])[len(rs) // 2]:.3f}, max {max(noise[bk]):.3f}")
    text = "\n".join(lines)
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"{args.op}_ab_{datetime.datetime.now():%Y-%m-%d_%H%M}_{device.replace(' ', '-')}"
    (out / f"{stem}.md").write_text(text + "\n")
    (out / f"{stem}.json").write_text(json.dumps({"device": device, **checkouts, "runs": runs}, indent=1))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
