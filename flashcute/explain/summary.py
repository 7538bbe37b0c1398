"""Every number in one dict and as text, and the entry points: ``explain`` writes the drawings and the summary
for one shipped configuration, ``main`` is ``python -m flashcute.explain``."""

import argparse
import json
from pathlib import Path

from .. import kernel_configs
from .backward import BWD_PICTURES, explain_backward
from .decode import explain_decode
from .draw import PICTURES, VARLEN_EXAMPLE, draw_pictures, thread_path
from .occupancy import occupancy_numbers
from .problem import predicted_counts, problem_numbers, tile_numbers
from .smem import NOT_MODELLED, kernel_access_reports


def summarize(cfg, batch, heads, seqlen_q, seqlen_k, thread=0):
    """Every number explain reports, as a JSON-able dict."""
    reports = kernel_access_reports(cfg)
    problem = problem_numbers(cfg, batch, heads, seqlen_q, seqlen_k)
    config = {"arch": cfg.arch, "dtype": cfg.dtype, "head_dim": cfg.head_dim, "block_m": cfg.block_m,
              "block_n": cfg.block_n}
    if cfg.arch == "sm80":
        config.update({"n_warps": cfg.n_warps, "threads": cfg.n_threads, "kv_stages": cfg.kv_stages})
    else:
        config.update({"causal": cfg.causal, "variant": cfg.variant, "threads": cfg.n_threads,
                       "mma_warpgroups": cfg.n_mma_warpgroups,
                       "kv_stages": cfg.stages, "mma_atoms": [cfg.tiled_mma_s.atom.name, cfg.tiled_mma_o.atom.name]})
    return {
        "config": config,
        "layouts": cfg.printed(),
        "smem_bytes": cfg.smem_bytes,
        "occupancy": occupancy_numbers(cfg),
        "tile": tile_numbers(cfg),
        "problem": problem,
        "bank_conflicts": [r.row() for r in reports],
        "not_modelled": list(NOT_MODELLED[cfg.arch]),
        "predicted_ncu": predicted_counts(reports, problem),
        "thread_path": {"thread": thread, "panels": [
            {"panel": title, "addresses": int(named.sum()), "registers": int(held.sum())}
            for title, _, named, held, _, _ in thread_path(cfg, thread)]},
    }, reports


def _si(x):
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.3g} {unit}"
    return f"{x:g} "


def summary_text(s):
    c, t, p = s["config"], s["tile"], s["problem"]
    if c["arch"] == "sm80":
        who = f"{c['threads']} threads ({c['n_warps']} warps)"
    else:
        tiles = {"causal": "causal", "noncausal": "non-causal",
                 "noncausal-longk": f"non-causal seqlen_k >= {kernel_configs.LONG_SEQLEN_K_MIN}"}[c["variant"]]
        who = (f"{tiles} tiles, {c['threads']} threads (1 producer + "
               f"{c['mma_warpgroups']} consumer warpgroups), GMMA atoms {' and '.join(c['mma_atoms'])}")
    lines = [f"flashcute {c['arch']} {c['dtype']} hdim{c['head_dim']}: kBlockM {c['block_m']}, kBlockN "
             f"{c['block_n']}, {who}, {c['kv_stages']} K/V stage(s)",
             "", "Layouts and atoms (cute::print of the mirror, equal to the C++ traits):"]
    width = max(len(k) for k in s["layouts"])
    lines += [f"  {k:<{width}}  {v}" for k, v in s["layouts"].items()]
    lines += ["", f"Shared memory per CTA: {s['smem_bytes']} bytes", "",
              "Registers and occupancy (" + ("ptxas -v, flashcute/explain/ptxas.py" if c["arch"] == "sm80" else
                                            "registers: the launch count, 65536 / threads in steps of 8") + "):"]
    for o in s["occupancy"]:
        if o["registers"] is None:
            lines.append(f"  {o['device']}: registers not recorded for this configuration")
            continue
        spill = (f", spills {o['spill_store_bytes']} B stored / {o['spill_load_bytes']} B loaded"
                 if o["spill_store_bytes"] or o["spill_load_bytes"] else ", no spills")
        variant = (f" (causal kernel: {o['registers_causal']})" if "registers_causal" in o else
                   f" at launch; setmaxnreg then gives the producer {o['setmaxnreg']['producer']} and the "
                   f"consumers {o['setmaxnreg']['consumers']}")
        lines.append(f"  {o['device']}: {o['registers']} registers/thread{variant}{spill}; "
                     f"{o['registers_per_cta']} per CTA")
        lines.append(f"    {o['ctas_per_sm']} CTA(s)/SM = {o['warps_per_sm']} warps ({o['occupancy']:.1%}), limited by "
                     f"{o['limited_by']} (" + ", ".join(f"{k} {v}" for k, v in o["limits"].items()) + ")")
    lines += ["", "One K/V block of one CTA (S = Q.K^T and O += P.V):",
              f"  {_si(t['flops'])}FLOP against {t['gmem_bytes']} bytes of K and V from global memory: "
              f"{t['arithmetic_intensity']:.1f} FLOP/byte",
              "", f"Problem: batch {p['batch']}, heads {p['heads']}, seqlen_q {p['seqlen_q']}, seqlen_k {p['seqlen_k']}"
              " (non-causal)",
              f"  Q/O tiles {p['q_tiles']} (last has {p['q_last_tile_rows']} of {c['block_m']} rows), K/V tiles "
              f"{p['kv_tiles']} (last has {p['kv_last_tile_rows']} of {c['block_n']} rows), {p['ctas']} "
              + ("CTAs" if c["arch"] == "sm80" else "work tiles for the persistent CTAs (one per SM at most)"),
              f"  {_si(p['flops_useful'])}FLOP useful, {_si(p['flops_executed'])}FLOP executed (whole tiles), "
              f"{_si(p['gmem_bytes'])}B global memory (K/V re-read per Q tile): "
              f"{p['arithmetic_intensity']:.1f} FLOP/byte",
              "", "Shared-memory bank conflicts, predicted per CTA (shipped swizzle | without the swizzle):"]
    head = f"  {'access':<15} {'instruction':<18} {'when':<14} {'/thread':>7} {'/CTA':>6} {'wavefr.':>8} " \
           f"{'ideal':>7} {'confl.':>7} {'worst':>6} | {'wavefr.':>8} {'confl.':>7} {'worst':>6}"
    lines.append(head)
    for r in s["bank_conflicts"]:
        lines.append(f"  {r['access']:<15} {r['instruction']:<18} {r['when']:<14} {r['instructions_per_thread']:>7} "
                     f"{r['instructions_per_cta']:>6} {r['wavefronts']:>8} {r['ideal_wavefronts']:>7} "
                     f"{r['conflicts']:>7} {str(r['worst_degree']) + '-way':>6} | {r['unswizzled_wavefronts']:>8} "
                     f"{r['unswizzled_conflicts']:>7} {str(r['unswizzled_worst_degree']) + '-way':>6}")
    lines += [f"  not modelled: {what}" for what in s["not_modelled"]]
    lines += ["", "Whole kernel, as Nsight Compute counts it (predicted, non-causal):"]
    for cls, n in s["predicted_ncu"].items():
        lines.append(f"  {cls:<7} instructions {n['instructions']:>10}  wavefronts {n['wavefronts']:>10}  "
                     f"bank conflicts {n['conflicts']}")
    tp = s["thread_path"]
    lines += ["", f"{'Thread' if c['arch'] == 'sm80' else 'Consumer thread'} {tp['thread']} through one K/V block:"]
    for panel in tp["panels"]:
        lines.append(f"  {panel['panel']:<50} addresses/reads {panel['addresses']:>5} elements, "
                     f"holds {panel['registers']:>4} values")
    return "\n".join(lines) + "\n"


def explain(arch, dtype, head_dim, out_dir, seqlen_q=2000, seqlen_k=None, batch=1, heads=16, thread=0,
            causal=False, pictures=PICTURES, lengths=VARLEN_EXAMPLE):
    """Write the pictures (``pictures``: names from PICTURES, all by default) and the summary for one shipped
    configuration into ``out_dir``; returns the summary dict (also written as summary.json) with the written
    files under "files". ``causal`` and ``seqlen_k`` pick the SM90 tile configuration as the launcher does (the
    SM80 one depends on neither); ``lengths``: the packed batch varlen_tiling draws."""
    seqlen_k = seqlen_q if seqlen_k is None else seqlen_k
    cfg = kernel_configs.get_config(arch, dtype, head_dim, causal, seqlen_k)
    # A packed batch never takes the long-seqlen_k tile (its seqlen_k is only the longest sequence's).
    varlen_cfg = kernel_configs.get_config(arch, dtype, head_dim, causal, 1)
    if not lengths or any(not isinstance(n, int) or n < 0 for n in lengths) or not sum(lengths):
        raise ValueError(f"lengths must be non-negative integers, not all 0, got {lengths!r}")
    for name, value in (("seqlen_q", seqlen_q), ("seqlen_k", seqlen_k), ("batch", batch), ("heads", heads)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if unknown := sorted(set(pictures) - set(PICTURES)):
        raise ValueError(f"pictures must be among {', '.join(PICTURES)}; got {', '.join(unknown)}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    summary, reports = summarize(cfg, batch, heads, seqlen_q, seqlen_k, thread)
    files = draw_pictures(cfg, pictures, summary["problem"], reports, thread, out_dir, tuple(lengths), varlen_cfg)
    (out_dir / "summary.txt").write_text(summary_text(summary))
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1))
    summary["files"] = [str(p) for p in files] + [str(out_dir / "summary.txt"), str(out_dir / "summary.json")]
    return summary


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m flashcute.explain",
        description="Draw and explain a shipped flashcute kernel configuration (no GPU needed).")
    parser.add_argument("--op", default="fwd", choices=("fwd", "bwd", "decode"),
                        help="the forward kernel, the backward (its layouts and numbers only), or "
                             "the split-KV decode kernel's plan for one step (--seqlen-k cached keys)")
    parser.add_argument("--arch", default="sm80", choices=kernel_configs.ARCHS)
    parser.add_argument("--dtype", default="bf16", choices=kernel_configs.DTYPES)
    parser.add_argument("--hdim", type=int, default=128, help="head dim: one of the shipped ones")
    parser.add_argument("--seqlen", type=int, default=None,
                        help="query length (and key length unless --seqlen-k); default 2000, with --op decode 1")
    parser.add_argument("--seqlen-k", type=int, default=None, help="key length; with --op decode the cached keys")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=16, help="query heads")
    parser.add_argument("--heads-kv", type=int, default=None, help="--op decode: K/V heads (default: --heads)")
    parser.add_argument("--page-size", type=int, default=None, help="--op decode: rows per page of a paged cache")
    parser.add_argument("--seqlen-new", type=int, default=None,
                        help="--op decode: new K/V rows each sequence appends in place (counted in --seqlen-k)")
    parser.add_argument("--causal", action="store_true", help="the causal variant (SM90 tiles depend on it)")
    parser.add_argument("--lengths", default=",".join(map(str, VARLEN_EXAMPLE)),
                        help="a packed batch's sequence lengths, comma-separated, for the varlen_tiling picture")
    parser.add_argument("--thread", type=int, default=0,
                        help="the thread whose path is drawn (SM90: consumer thread, threadIdx.x - 128)")
    parser.add_argument("--pictures", default=None,
                        help=f"which to draw, comma-separated (default: all of {','.join(PICTURES)}; with --op bwd "
                             f"{','.join(BWD_PICTURES['sm90'])} (SM90), {','.join(BWD_PICTURES['sm80'])} (SM80))")
    parser.add_argument("-o", "--out", required=True, help="output folder")
    args = parser.parse_args(argv)
    if args.op == "decode" and args.seqlen_k is None:
        parser.error("--op decode needs --seqlen-k: the keys in the cache")
    if args.op != "decode" and (args.heads_kv is not None or args.page_size is not None or args.seqlen_new is not None):
        parser.error("--heads-kv, --page-size and --seqlen-new are for --op decode")
    default_pictures = BWD_PICTURES[args.arch] if args.op == "bwd" else PICTURES
    pictures = [p for p in (args.pictures or ",".join(default_pictures)).split(",") if p]
    try:
        if args.op == "decode":
            summary = explain_decode(args.dtype, args.hdim, args.out, args.batch, args.heads,
                                     args.heads if args.heads_kv is None else args.heads_kv,
                                     1 if args.seqlen is None else args.seqlen, args.seqlen_k, args.page_size,
                                     seqlen_new=args.seqlen_new or 0)
            print(Path(args.out, "decode.txt").read_text(), end="")
            print(f"\nwrote {len(summary['files'])} files to {args.out}")
            return 0
        if args.op == "bwd":
            summary = explain_backward(args.dtype, args.hdim, args.out, pictures, args.arch)
        else:
            lengths = [int(n) for n in args.lengths.split(",") if n.strip()]
            summary = explain(args.arch, args.dtype, args.hdim, args.out, 2000 if args.seqlen is None else args.seqlen,
                              args.seqlen_k, args.batch,
                              args.heads, args.thread, args.causal, pictures, lengths)
    except ValueError as e:
        parser.error(str(e))
    print(Path(args.out, "summary.txt").read_text(), end="")
    print(f"\nwrote {len(summary['files'])} files to {args.out}")
    return 0
