"""flashcute's SM90 backward beside FlashAttention-3's (C++ CUTLASS, the design ours follows) and FlashAttention-4's
(CuTe DSL), in one run: is the SM90 backward's gap to FlashAttention-4 flashcute's own, or FlashAttention-3's too?

bf16, the paper grid at head dims 64 and 128 (batch x seqlen = 16k, hidden 2048), causal and not. FlashAttention-3
runs through benchmarks/fa3_bwd (its library built by build.sh from a FlashAttention checkout's hopper/ folder),
on flashcute's forward outputs; flashcute's op, torch.ops.flashcute.bwd, on the same; FlashAttention-4 through
autograd on its own forward, as bench_bwd.py times it. Each implementation's gradients are checked against
flashcute's (largest difference over the largest gradient) before it is timed. Two times per shape, each the best
over --rounds rounds taken in turn: triton's do_bench median (L2 flushed before each call, as bench_bwd.py) and
sustained back-to-back calls (40, after 5 warm-up calls), where the power cap sets the clock.

    benchmarks/fa3_bwd/build.sh path/to/flash-attention/hopper /tmp/fa3
    python benchmarks/bench_fa3_bwd.py --fa3-lib /tmp/fa3/libfa3bwd.so --rounds 2

Results (JSON and markdown, named by date and device) go to benchmarks/results/ or --out.
"""

import argparse
import ctypes
import sys

import torch

from _common import RESULTS, csv, first_line, geomean, git_commit, run_meta, write_results
import flashcute  # noqa: F401  (this checkout's: _common put it first on sys.path)

IMPLS = ("flashcute", "fa3", "fa4")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fa3-lib", required=True, help="libfa3bwd.so from benchmarks/fa3_bwd/build.sh")
    parser.add_argument("--head-dims", default="64,128")
    parser.add_argument("--seqlens", default="512,1024,2048,4096,8192,16384")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args()
    if not set(csv(args.head_dims, int)) <= {64, 128}:
        parser.error(f"--head-dims: FlashAttention-3's library is built for 64 and 128, got {args.head_dims}")
    return args


class FA3:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)

    def backward(self, q, k, v, out, lse, dout, causal):
        """A call with its outputs and workspaces allocated once, as flashcute's op allocates its own per call."""
        batch, seqlen, heads, head_dim = q.shape
        block_m = self.lib.fa3_block_m(head_dim, int(causal))
        rows = (seqlen + block_m - 1) // block_m * block_m
        f32 = dict(device=q.device, dtype=torch.float32)
        grads = [torch.full_like(t, float("nan")) for t in (q, k, v)]
        work = [torch.empty(batch, heads, rows, **f32), torch.empty(batch, heads, rows, **f32),
                torch.empty(batch, heads, rows * head_dim, **f32),
                torch.empty(rows // block_m, batch, heads, device=q.device, dtype=torch.int32)]
        buffers = (q, k, v, out, dout, *grads, lse, *work)
        ptrs = [ctypes.c_void_p(t.data_ptr()) for t in buffers]

        def call():
            rc = self.lib.fa3_bwd(*ptrs, batch, seqlen, k.shape[1], heads, head_dim, ctypes.c_float(head_dim ** -0.5),
                                  int(causal), ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
            if rc != 0:
                raise RuntimeError(f"fa3_bwd returned {rc}")
            return grads
        # The library sees raw pointers only: the call holds every tensor behind them, or the caching allocator
        # would hand the freed workspaces to the next allocation while FlashAttention-3 still writes there.
        call.buffers = buffers
        return call


def sustained(fn, calls=40):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / calls


def time_shape(fa3, fa4, do_bench, head_dim, causal, seqlen, rounds):
    """One paper shape: each implementation's gradients against flashcute's, then its times, as a results row."""
    batch, heads = 16384 // seqlen, 2048 // head_dim
    q, k, v, dout = (torch.randn(batch, seqlen, heads, head_dim, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    out, lse = torch.ops.flashcute.fwd(q, k, v, None, causal, False, "sm90")
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    out4 = fa4(*leaves, causal=causal)[0]
    fns = {"flashcute": lambda: torch.ops.flashcute.bwd(dout, q, k, v, out, lse, None, causal, False, False, "sm90"),
           "fa3": fa3.backward(q, k, v, out, lse, dout, causal),
           "fa4": lambda: torch.autograd.grad(out4, leaves, dout, retain_graph=True)}
    ref = fns["flashcute"]()
    error = {}
    for name in ("fa3", "fa4"):
        grads = fns[name]()
        error[name] = max(((g.float() - r.float()).abs().max() / r.float().abs().max()).item() for g, r in zip(grads, ref))
    flops = 4 * batch * heads * seqlen * seqlen * head_dim * 2.5 / (2 if causal else 1)
    times = {mode: {name: [] for name in IMPLS} for mode in ("do_bench", "sustained")}
    for _ in range(rounds):
        for name in IMPLS:
            times["do_bench"][name].append(do_bench(fns[name], warmup=25, rep=100, return_mode="median"))
            times["sustained"][name].append(sustained(fns[name]))
    tflops = {mode: {n: flops / min(t) / 1e9 for n, t in m.items()} for mode, m in times.items()}
    print(f"d {head_dim} {'causal' if causal else 'nc    '} {seqlen:5d} | do_bench "
          + " ".join(f"{n} {tflops['do_bench'][n]:5.1f}" for n in IMPLS) + " | sustained "
          + " ".join(f"{n} {tflops['sustained'][n]:5.1f}" for n in IMPLS)
          + f" | error fa3 {error['fa3']:.1e} fa4 {error['fa4']:.1e}", flush=True)
    return {"d": head_dim, "causal": causal, "seqlen": seqlen, "batch": batch, "heads": heads,
            "error_vs_flashcute": error, "ms": times, "tflops": tflops}


def main():
    args = parse_args()
    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
        sys.exit("bench_fa3_bwd.py: needs a Hopper GPU (FlashAttention-3's library is built for sm_90a)")
    try:
        fa3 = FA3(args.fa3_lib)
    except OSError as error:
        sys.exit(f"bench_fa3_bwd.py: --fa3-lib {args.fa3_lib} does not load ({error}); build it with "
                 "benchmarks/fa3_bwd/build.sh")
    try:
        from flash_attn.cute import flash_attn_func as fa4
    except Exception as error:  # not installed, or its CuTe DSL cannot load here
        sys.exit(f"bench_fa3_bwd.py: FlashAttention-4 does not import ({first_line(error)}); this comparison needs "
                 "the flash-attn-4 wheel")
    from triton.testing import do_bench  # with torch's CUDA wheels

    device = torch.cuda.get_device_name()
    commit = git_commit()
    print(device, commit)
    rows = []
    for head_dim in csv(args.head_dims, int):
        for causal in (False, True):
            for seqlen in csv(args.seqlens, int):
                rows.append(time_shape(fa3, fa4, do_bench, head_dim, causal, seqlen, args.rounds))
                torch.cuda.empty_cache()

    lines = ["TFLOP/s (x FlashAttention-4 in the same run); backward FLOPs = 2.5 x 4 b h s^2 d, halved for causal.", "",
             "| hdim | causal | seqlen | do_bench flashcute | fa3 | fa4 | sustained flashcute | fa3 | fa4 | flashcute / fa3 (do_bench, sustained) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        b, s = r["tflops"]["do_bench"], r["tflops"]["sustained"]
        lines.append(f"| {r['d']} | {'yes' if r['causal'] else 'no'} | {r['seqlen']} | {b['flashcute']:.1f} ({b['flashcute'] / b['fa4']:.3f}) "
                     f"| {b['fa3']:.1f} ({b['fa3'] / b['fa4']:.3f}) | {b['fa4']:.1f} | {s['flashcute']:.1f} ({s['flashcute'] / s['fa4']:.3f}) "
                     f"| {s['fa3']:.1f} ({s['fa3'] / s['fa4']:.3f}) | {s['fa4']:.1f} | {b['flashcute'] / b['fa3']:.3f}, {s['flashcute'] / s['fa3']:.3f} |")
    lines += ["", "Geometric means per head dim (min-max):", ""]
    for mode in ("do_bench", "sustained"):
        for a, c in (("flashcute", "fa3"), ("flashcute", "fa4"), ("fa3", "fa4")):
            for head_dim in csv(args.head_dims, int):
                ratios = [r["tflops"][mode][a] / r["tflops"][mode][c] for r in rows if r["d"] == head_dim]
                lines.append(f"- {mode}, {a} / {c}, hdim {head_dim}: {geomean(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})")
    worst = max(max(r["error_vs_flashcute"].values()) for r in rows)
    lines += ["", f"Largest gradient difference from flashcute's, over its largest gradient: {worst:.1e}.", "",
              f"{device}; {commit}; best of {args.rounds} rounds per time."]
    text = "\n".join(lines) + "\n"
    print("\n" + text)
    write_results(args.out, "bwd_fa3", "SM90 backward: flashcute, FlashAttention-3, FlashAttention-4 (bf16)",
                  {**run_meta(device, commit), "rounds": args.rounds}, rows, text)


if __name__ == "__main__":
    main()
