"""Backward and forward + backward attention throughput: flashcute's backends beside torch SDPA's flash
(FlashAttention-2) and cuDNN backends and FlashAttention-4, all measured in the same run on the same GPU.

Shapes are bench_fwd.py's paper grid: batch * seqlen = 16k tokens, hidden 2048 (heads = 2048 / head_dim), seqlen
512 ... 16k, head dims 64, 128, 256, causal and not. FLOPs: the backward's are 2.5x the forward's (4 * batch *
heads * seqlen_q * seqlen_k * head_dim, halved for causal), forward + backward 3.5x. Times are
triton.testing.do_bench medians:
- backward: flashcute's op, torch.ops.flashcute.bwd, called directly on a forward computed once (no autograd);
  each peer's torch.autograd.grad(out, (q, k, v), dout, retain_graph=True) on a forward graph built once;
- forward + backward: every implementation through autograd, torch.autograd.grad(attention(q, k, v), (q, k, v),
  dout) (grad rather than .backward(), so that no .grad accumulation is timed).
With --rounds N each shape times every implementation in turn N times and reports the median of the N rounds
(all rounds in the JSON), so that a clock or power dip during one implementation's turn does not move its ratio.
Before a shape is timed, flashcute's dq, dk and dv are checked against torch's flash backward in the same dtype:
the largest differences are printed, with a warning where one exceeds 5% of torch's largest gradient. Also
reported, as in bench_fwd.py: the extension's load times, each implementation's extra peak memory per call, and
the matmul rate of each dtype timed the same way, of which each flashcute figure is given as a fraction. The run
ends with each flashcute backend's geometric-mean ratio to each peer over the paper shapes, per pass, and whether
issue #18's bar for the SM80 backward is met (geomean >= 1.0x torch's flash backward, no shape below 0.9x) and
issue #19's for the SM90 backward (sm90_bar_line).

FlashAttention-4 (`from flash_attn.cute import flash_attn_func`: the flash-attn-4 wheel, CuTe DSL; its backward
needs SM90 or newer) runs where it imports; elsewhere the run says why and goes on without it. It compiles each
configuration on first use, in the first shape of each (dtype, head dim, causal), whose printed time includes it.

    python benchmarks/bench_bwd.py                         # the full paper grid, bf16 and fp16
    python benchmarks/bench_bwd.py --dtypes bf16 --head-dims 128 --seqlens 1024,4096   # a quick look
    python benchmarks/bench_bwd.py --peers flash,cudnn     # without FlashAttention-4
    python benchmarks/bench_bwd.py --dtypes bf16 --head-dims 64,128 --peers cudnn,fa4 --rounds 3   # #19's ratios

Results (JSON and markdown, named by date and device) go to benchmarks/results/ or --out.
"""

import argparse
import contextlib
import importlib.metadata
import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel

from _common import (DTYPE_NAMES, PEERS, RESULTS, add_grid_args, build_times, csv, first_line, flashcute_backends, geomean,
                     geomean_lines, git_commit, matmul_rates, measure, paper_ratios, paper_shapes, run_meta,
                     shape_text, table, versions, write_results)
import flashcute  # this checkout's: _common put it first on sys.path

PASSES = {"bwd": 2.5, "fwd+bwd": 3.5}  # FLOPs, in forward FLOPs
GRADS = ("dq", "dk", "dv")
CHECK_TOLERANCE = 0.05  # flashcute's gradients may differ from torch flash's by this fraction of its largest


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_grid_args(parser)
    parser.add_argument("--peers", default="flash,cudnn,fa4",
                        help="torch SDPA backends (flash, cudnn, efficient) and fa4 (FlashAttention-4) to run beside")
    parser.add_argument("--rounds", type=int, default=1,
                        help="time every implementation of a shape in turn this many times; report the median")
    parser.add_argument("--out", default=str(RESULTS), help="folder for the JSON and markdown")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    return args


def load_fa4():
    """(FlashAttention-4's flash_attn_func, its version), or (None, why it does not import)."""
    try:
        from flash_attn.cute import flash_attn_func
    except Exception as error:  # not installed, or its CuTe DSL cannot load here
        return None, f"{type(error).__name__}: {first_line(error)}"
    try:
        return flash_attn_func, importlib.metadata.version("flash-attn-4")
    except importlib.metadata.PackageNotFoundError:
        return flash_attn_func, "version unknown"


# ------------------------------------------------------------------------------------------- measuring

def bench_shape(dtype, head_dim, causal, batch, seqlen, heads_q, heads_kv, paper, backends, peers, fa4, rounds=1):
    """Two rows, the backward's and the forward + backward's; the backward row also holds the gradient check.
    Every implementation is timed once per round, in turn; the rows hold the median round."""
    fwd_flops = 4 * batch * heads_q * seqlen * seqlen * head_dim / (2 if causal else 1)
    q = torch.randn(batch, seqlen, heads_q, head_dim, device="cuda", dtype=dtype)
    k = torch.randn(batch, seqlen, heads_kv, head_dim, device="cuda", dtype=dtype)
    v = torch.randn_like(k)
    dout = torch.randn_like(q)
    rows = {kind: {"dtype": str(dtype).removeprefix("torch."), "d": head_dim, "causal": causal, "b": batch, "s": seqlen,
                   "hq": heads_q, "hkv": heads_kv, "paper": paper, "pass": kind, "tflops": {}, "peak_mib": {}, "notes": {}}
            for kind in PASSES}

    def attempt(name, fn, kinds=tuple(PASSES)):
        """fn(), or None once the reason name did not run is noted in the rows of kinds."""
        try:
            return fn()
        except Exception as error:  # an implementation that does not serve this shape (FlashAttention-4 asserts)
            torch.cuda.synchronize()  # a crashed kernel's sticky CUDA error raises here and ends the run
            for kind in kinds:
                rows[kind]["notes"][name] = first_line(error)
            return None

    timings = []  # (kind, name, fn, context factory): each timed once per round, in this order

    def time_rounds():
        ms_rounds = {}
        for _ in range(rounds):
            for kind, name, fn, context in timings:
                if name in rows[kind]["notes"]:  # failed in an earlier round
                    continue
                with context():
                    timed = attempt(name, lambda: measure(fn), [kind])
                if timed:
                    ms, peak = timed
                    ms_rounds.setdefault((kind, name), []).append(ms)
                    rows[kind]["peak_mib"][name] = max(peak, rows[kind]["peak_mib"].get(name, 0.0))
        for (kind, name), times in ms_rounds.items():
            if name in rows[kind]["notes"]:
                continue
            rates = [PASSES[kind] * fwd_flops / (ms * 1e-3) / 1e12 for ms in times]
            rows[kind]["tflops"][name] = statistics.median(rates)
            if rounds > 1:
                rows[kind].setdefault("tflops_rounds", {})[name] = rates

    # Autograd leaves: (b, s, h, d) for flashcute and FlashAttention-4, contiguous (b, h, s, d) for SDPA (its
    # preferred layout), GQA through enable_gqa.
    leaves = [t.detach().requires_grad_() for t in (q, k, v)]
    leaves_t = [t.transpose(1, 2).contiguous().requires_grad_() for t in (q, k, v)]
    dout_t = dout.transpose(1, 2).contiguous()
    gqa = heads_q != heads_kv

    def sdpa():
        return F.scaled_dot_product_attention(*leaves_t, is_causal=causal, enable_gqa=gqa)

    # The check, before any timing: flashcute's gradients against torch's flash backward.
    saved, grads = {}, {}
    for backend in backends:
        def forward_backward():
            out, lse = torch.ops.flashcute.fwd(q, k, v, None, causal, False, backend)
            return (out, lse), torch.ops.flashcute.bwd(dout, q, k, v, out, lse, None, causal, False, False, backend)

        result = attempt(f"flashcute_{backend}", forward_backward)
        if result:
            saved[backend], grads[backend] = result
    with sdpa_kernel(PEERS["flash"]):
        reference = attempt("check", lambda: torch.autograd.grad(sdpa(), leaves_t, dout_t), ["bwd"])
    check = rows["bwd"]["check"] = {"max_abs_flash": {}, "max_abs_diff": {}, "ok": {}}
    if reference:
        reference = {name: g.transpose(1, 2) for name, g in zip(GRADS, reference)}
        check["max_abs_flash"] = {name: g.abs().max().item() for name, g in reference.items()}
        for backend, gs in grads.items():
            diffs = {name: (g.float() - reference[name].float()).abs().max().item() for name, g in zip(GRADS, gs)}
            check["max_abs_diff"][backend] = diffs
            # written so that a NaN fails
            check["ok"][backend] = all(diffs[n] <= CHECK_TOLERANCE * check["max_abs_flash"][n] for n in GRADS)
    del grads, reference

    # Default arguments bind each iteration's values (the lambdas run after the loops).
    for backend, (out, lse) in saved.items():
        timings.append(("bwd", f"flashcute_{backend}", lambda out=out, lse=lse, backend=backend: torch.ops.flashcute.bwd(
            dout, q, k, v, out, lse, None, causal, False, False, backend), contextlib.nullcontext))
        timings.append(("fwd+bwd", f"flashcute_{backend}", lambda backend=backend: torch.autograd.grad(
            flashcute.flash_attn_func(*leaves, causal=causal, backend=backend), leaves, dout), contextlib.nullcontext))

    for name in peers:
        if name == "fa4":
            forward, inputs, grad = lambda: fa4(*leaves, causal=causal)[0], leaves, dout
            context = contextlib.nullcontext
        else:
            forward, inputs, grad = sdpa, leaves_t, dout_t
            context = lambda name=name: sdpa_kernel(PEERS[name])  # noqa: E731  (one context per use)
        with context():
            out = attempt(name, forward)  # the graph its backward is timed on
        if out is None:
            continue
        timings.append(("bwd", name, lambda out=out, inputs=inputs, grad=grad: torch.autograd.grad(
            out, inputs, grad, retain_graph=True), context))
        timings.append(("fwd+bwd", name, lambda forward=forward, inputs=inputs, grad=grad: torch.autograd.grad(
            forward(), inputs, grad), context))
    time_rounds()
    return rows["bwd"], rows["fwd+bwd"]


# ------------------------------------------------------------------------------------------- reporting

def check_lines(row):
    """The gradient check of one shape: its largest differences, and a warning per gradient off by too much."""
    check = row["check"]
    if not check["max_abs_flash"]:
        return [f"  WARNING: gradients not checked: torch's flash did not run: {row['notes'].get('check')}"]
    parts = [f"{backend} " + " ".join(f"{n} {d[n]:.2e} ({d[n] / check['max_abs_flash'][n]:.2%})" for n in GRADS)
             for backend, d in check["max_abs_diff"].items()]
    lines = ["  max |flashcute - torch flash| (of torch's largest): " + "; ".join(parts)]
    for backend, diffs in check["max_abs_diff"].items():
        for n in GRADS:
            if not diffs[n] <= CHECK_TOLERANCE * check["max_abs_flash"][n]:
                lines.append(f"  WARNING: flashcute {backend} {n} differs from torch's flash by {diffs[n]:.3g}, over "
                             f"{CHECK_TOLERANCE:.0%} of its largest value ({check['max_abs_flash'][n]:.3g})")
    return lines


def check_summary(rows, backends):
    """Over all shapes: each backend's largest relative gradient difference and the shapes that failed."""
    parts = []
    for backend in backends:
        checked = [row["check"] for row in rows if backend in row["check"]["max_abs_diff"]]
        failed = sum(not row["check"]["ok"].get(backend, False) for row in rows)
        worst = {n: max((c["max_abs_diff"][backend][n] / c["max_abs_flash"][n] for c in checked), default=None) for n in GRADS}
        worst_text = ", ".join(f"{n} {w:.2%}" for n, w in worst.items() if w is not None) or "nothing checked"
        parts.append(f"{backend}: largest max |diff| / max |torch flash| {worst_text}; {failed} of {len(rows)} shapes "
                     f"failed or unchecked")
    return (f"Gradients checked before timing against torch's flash backward in the same dtype (a shape fails over "
            f"{CHECK_TOLERANCE:.0%}): " + "; ".join(parts))


def bar_line(rows):
    """Issue #18's bar for the SM80 backward over the paper shapes run: geomean >= 1.0x torch's flash backward, no
    shape below 0.9x, every shape measured on both and its SM80 gradients checked."""
    paper = [row for row in rows if row["paper"]]
    ratios = paper_ratios(rows, "flashcute_sm80", "flash")
    if not ratios:
        return "issue #18 bar (SM80 backward / torch's flash backward): not evaluated: no shape ran both"
    values = [r for r, _ in ratios]
    low, low_row = min(ratios, key=lambda pair: pair[0])
    unchecked = sum(not row["check"]["ok"].get("sm80", False) for row in paper)
    met = geomean(values) >= 1.0 and low >= 0.9 and len(ratios) == len(paper) and not unchecked
    return (f"issue #18 bar, SM80 backward / torch's flash backward (geomean >= 1.0, no shape below 0.9): "
            f"{'met' if met else 'NOT met'}: geomean {geomean(values):.3f}, min {low:.3f} ({shape_text(low_row)}), "
            f"{len(ratios)} of {len(paper)} paper shapes ran both, {unchecked} failed or skipped the gradient check")


def sm90_bar_line(bwd_rows, fwd_bwd_rows):
    """Issue #19's bar for the SM90 backward over the paper shapes run: geomean >= 1.0x FlashAttention-4's and
    >= 1.1x cuDNN's backward, no shape below 0.9x the faster of the two, >= 620 TFLOP/s at hdim 128 non-causal
    seqlen >= 8k in bf16, and forward + backward >= 1.0x FlashAttention-4 at every head dim (geomean)."""
    paper = [row for row in bwd_rows if row["paper"]]
    ran = [row for row in paper if "flashcute_sm90" in row["tflops"]]
    if not ran:
        return "issue #19 bar (SM90 backward): not evaluated: the sm90 backward ran on no paper shape"
    parts, met = [], len(ran) == len(paper)
    for peer, target in (("fa4", 1.0), ("cudnn", 1.1)):
        values = [r for r, _ in paper_ratios(bwd_rows, "flashcute_sm90", peer)]
        ok = bool(values) and geomean(values) >= target and len(values) == len(paper)
        met &= ok
        parts.append(f"/{peer} geomean {geomean(values):.3f} (>= {target})" if values else f"/{peer} not run")
    faster = [(row["tflops"]["flashcute_sm90"] / max(row["tflops"][p] for p in ("fa4", "cudnn") if p in row["tflops"]), row)
              for row in ran if any(p in row["tflops"] for p in ("fa4", "cudnn"))]
    if faster:
        low, low_row = min(faster, key=lambda pair: pair[0])
        met &= low >= 0.9
        parts.append(f"min / the faster peer {low:.3f} ({shape_text(low_row)})")
    long_128 = [row["tflops"]["flashcute_sm90"] for row in ran if row["d"] == 128 and not row["causal"]
                and row["s"] >= 8192 and DTYPE_NAMES[row["dtype"]] == "bf16"]
    if long_128:
        met &= min(long_128) >= 620
        parts.append(f"hdim 128 nc >= 8k bf16 min {min(long_128):.0f} TFLOP/s (>= 620)")
    for head_dim in sorted({row["d"] for row in fwd_bwd_rows if row["paper"]}):
        values = [r for r, row in paper_ratios(fwd_bwd_rows, "flashcute_sm90", "fa4") if row["d"] == head_dim]
        met &= bool(values) and geomean(values) >= 1.0
        parts.append(f"fwd+bwd/fa4 hdim {head_dim} " + (f"{geomean(values):.3f}" if values else "not run"))
    return (f"issue #19 bar, SM90 backward: {'met' if met else 'NOT met'}: " + "; ".join(parts)
            + f"; the sm90 backward ran {len(ran)} of {len(paper)} paper shapes")


def summary(row):
    return "  ".join(f"{k.removeprefix('flashcute_')} {v:.1f}" for k, v in row["tflops"].items())


def main():
    args = parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench_bwd.py needs a CUDA GPU")
    peers = csv(args.peers)
    unknown = [p for p in peers if p not in PEERS and p != "fa4"]
    if unknown:
        sys.exit(f"bench_bwd.py: unknown peers {unknown}: choose from {', '.join([*PEERS, 'fa4'])}")
    library, times = build_times(False)
    backends = flashcute_backends(args, "bwd")
    fa4, fa4_version, skipped = None, None, {}
    if "fa4" in peers:
        fa4, text = load_fa4()
        if fa4:
            fa4_version = text
        else:
            skipped["fa4"] = text
            peers.remove("fa4")
    fa4_text = f", flash-attn-4 {fa4_version}" if fa4 else ""
    shapes = [shape for dtype_name in csv(args.dtypes) for shape in paper_shapes(args, dtype_name)]

    device, commit = torch.cuda.get_device_name(), git_commit()
    print(f"{device}, {versions(commit)}, backends {backends}, peers {peers}{fa4_text}")
    for name, why in skipped.items():
        print(f"{name} skipped: {why}")
    print(f"extension: {times}")
    matmul, matmul_text = matmul_rates(csv(args.dtypes))
    print(f"matmul{matmul_text}")
    bwd_rows, fwd_bwd_rows = [], []
    start = time.perf_counter()
    for shape in shapes:
        shape_start = time.perf_counter()
        bwd_row, fwd_bwd_row = bench_shape(*shape, backends, peers, fa4, args.rounds)
        bwd_rows.append(bwd_row)
        fwd_bwd_rows.append(fwd_bwd_row)
        print(f"{shape_text(bwd_row)}: bwd {summary(bwd_row)} | fwd+bwd {summary(fwd_bwd_row)} "
              f"({time.perf_counter() - shape_start:.1f} s)", flush=True)
        for row in (bwd_row, fwd_bwd_row):
            for name, note in row["notes"].items():
                if name != "check":
                    print(f"  {name} {row['pass']} did not run: {note}")
        print("\n".join(check_lines(bwd_row)))
    print(f"{len(shapes)} shapes in {time.perf_counter() - start:.0f} s")

    sections = {"Backward": bwd_rows, "Forward + backward": fwd_bwd_rows}
    tables = {title: table(rows, backends, peers, matmul, ratio_peers=peers) for title, rows in sections.items()}
    ratio_lines = {title: geomean_lines(rows, backends, peers) for title, rows in sections.items()}
    bar, checks = bar_line(bwd_rows) + "\n\n" + sm90_bar_line(bwd_rows, fwd_bwd_rows), check_summary(bwd_rows, backends)
    for title in sections:
        print(f"\n{title}\n\n{tables[title]}\n")
        print("\n".join(f"{title.lower()}: {line}" for line in ratio_lines[title]))
    print(f"\n{checks}\n{bar}")
    meta = {**run_meta(device, commit), "extension": {**times, "path": str(library.path)}, "backends": backends,
            "peers": peers, "skipped_peers": skipped, "flash_attn_4": fa4_version, "matmul_tflops": matmul,
            "check_tolerance": CHECK_TOLERANCE}
    text = (f"{versions(commit)}{fa4_text}. TFLOP/s (do_bench median; backward FLOPs 2.5x the forward's, forward + "
            "backward 3.5x); flashcute's backward is its op called directly, the peers' through torch.autograd.grad "
            "on a retained graph, and forward + backward is through autograd for all; ratios flashcute/peer; "
            "<backend>/matmul: fraction of the same dtype's matmul rate; extra peak memory of one call in MiB.\n\n"
            + "".join(f"{name} skipped: {why}\n\n" for name, why in skipped.items())
            + f"Extension: {json.dumps(times)}\n\nMatmul{matmul_text}\n\n"
            + "".join(f"## {title}\n\n{tables[title]}\n\n" + "".join(f"- {line}\n" for line in ratio_lines[title]) + "\n"
                      for title in sections)
            + f"{checks}\n\n**{bar}**\n")
    write_results(args.out, "bwd", "flashcute backward", meta, bwd_rows + fwd_bwd_rows, text)


if __name__ == "__main__":
    main()
