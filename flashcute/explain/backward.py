"""The backward kernels explained: their tiles, registers, shared memory and the pictures of their layouts.

    python -m flashcute.explain --op bwd --arch sm90 --dtype bf16 --hdim 128 -o DIR
    python -m flashcute.explain --op bwd --arch sm80 --dtype bf16 --hdim 128 -o DIR

Everything comes from flashcute.kernel_configs' Sm90BwdConfig and Sm80BwdConfig, which tests/test_kernel_layouts.py
holds equal to csrc/sm90/bwd_kernel_traits.h and csrc/sm80/bwd_kernel_traits.h. DIR receives (PNG and SVG):

- SM90: smem_<Layout> (the first bank of every 16-byte chunk of Q, K and dS, or SmemLayoutPdS, the P and dS
  stages, with queries along M), mma_tv_SdP (S^T = K.Q^T: keys along M, 64 per consumer warpgroup; or S = Q.K^T
  with the keys split over the warpgroups), mma_tv_dKV_A (keys along M: P^T and dS^T as the dV / dK gemms'
  register A operand) or mma_tv_dKV (queries along M: dK^T = Q^T.dS, both operands in shared memory), mma_tv_dQ
  (dQ = dS.K);
- SM80: smem_<Layout> of Q (= dO), K (= V) and P (= dS), bank_conflicts (every shared-memory instruction of the
  kernel, swizzled and not: SM80_BWD_ACCESSES), and mma_tv_SdP (S = Q.K^T), mma_tv_dKV (dV = P^T.dO), mma_tv_dQ
  (dQ = dS.K): each gemm's own warp arrangement;

and summary.txt / summary.json.
"""

import json
from pathlib import Path

from .. import kernel_configs, kernel_table
from ..layout import to_str
from ..layout.draw import draw_mma, draw_tv
from . import ptxas
from .draw import _save_drawing, draw_bank_conflicts, draw_chunk_banks
from .smem import SM80_BWD_ACCESSES, kernel_access_reports

# the pictures of each arch's backward (the SM90 backward's operands are read by wgmma through descriptors, whose
# shared-memory reads the bank model does not cover)
BWD_PICTURES = {"sm80": ("smem", "bank_conflicts", "mma_tv"), "sm90": ("smem", "mma_tv")}


def bwd_config(dtype, head_dim, arch="sm90"):
    """The shipped backward configuration for (arch, dtype, head_dim); ValueError naming the choices otherwise."""
    if arch not in kernel_configs.ARCHS:
        raise ValueError(f"arch must be one of {kernel_configs.ARCHS}, got {arch!r}")
    kernel = kernel_configs.shipped_kernel("bwd", arch, dtype, head_dim, f"the {arch.upper()} backward")
    return kernel_configs.config_for(kernel, dtype)


def bwd_summary(cfg):
    """The backward's numbers as a JSON-able dict (SM80: sm80_bwd_summary): tile, threads and registers, shared
    memory, what each consumer thread holds in registers across the Q blocks and per step, and ptxas's spills."""
    if cfg.arch == "sm80":
        return sm80_bwd_summary(cfg)
    consumers = cfg.n_mma_warpgroups * 128
    kernel = kernel_table.find("bwd", "sm90", cfg.head_dim, "all")
    spills = {("causal" if causal else "non-causal"): ptxas.numbers(kernel, cfg.dtype, "sm_90a", causal)
              for causal in ptxas.causal_flags(kernel)}
    # the accumulators as the plan holds them: queries along M, dK^T and dV^T, S and dP
    dkv, sdp = ("dK + dV", "S^T + dP^T") if cfg.keys_along_m else ("dK^T + dV^T", "S + dP")
    return {
        "config": {"arch": "sm90", "op": "bwd", "dtype": cfg.dtype, "head_dim": cfg.head_dim,
                   "block_m": cfg.block_m, "block_n": cfg.block_n, "stages": cfg.stages, "atom_dq_m": cfg.atom_dq_m,
                   "keys_along_m": cfg.keys_along_m, "atom_dkv_m": cfg.atom_dkv_m,
                   "threads": cfg.n_threads, "mma_warpgroups": cfg.n_mma_warpgroups,
                   "mma_atoms": [m.atom.name for m in (cfg.tiled_mma_sdp, cfg.tiled_mma_dkv, cfg.tiled_mma_dq)]},
        "layouts": cfg.printed(),
        "smem_bytes": cfg.smem_bytes,
        "registers": {"launch": cfg.launch_regs, "producer": cfg.producer_regs, "consumer": cfg.consumer_regs},
        # float32 accumulators per consumer thread: dK and dV live across the Q blocks; S, dP and dQ per step
        "accumulators_per_thread": {
            dkv: 2 * cfg.block_n * cfg.head_dim // consumers,
            sdp: 2 * cfg.block_n * cfg.block_m // consumers,
            "dQ": cfg.block_m * cfg.head_dim // consumers,
        },
        "ptxas": {variant: {"registers": n[0], "spill_store_bytes": n[1], "spill_load_bytes": n[2]}
                  for variant, n in spills.items() if n is not None},
    }


def sm80_bwd_summary(cfg):
    """The SM80 backward's numbers: tile, warps per gemm, shared memory, and what each thread holds in registers
    (its registers and spills are not in flashcute.explain.ptxas's table)."""
    threads = cfg.n_threads
    reports = kernel_access_reports(cfg, SM80_BWD_ACCESSES)
    return {
        "config": {"arch": "sm80", "op": "bwd", "dtype": cfg.dtype, "head_dim": cfg.head_dim,
                   "block_m": cfg.block_m, "block_n": cfg.block_n, "stages": cfg.stages, "warps": cfg.n_warps,
                   "atom_sdp_m": cfg.atom_sdp_m, "atom_dkv_n": cfg.atom_dkv_n, "atom_dq_m": cfg.atom_dq_m,
                   "threads": threads, "mma_atom": cfg.mma_op},
        "layouts": cfg.printed(),
        "smem_bytes": cfg.smem_bytes,
        # float32 accumulators per thread: dK and dV live across the Q blocks; S, dP and dQ per step
        "accumulators_per_thread": {
            "dK + dV": 2 * cfg.block_n * cfg.head_dim // threads,
            "S + dP": 2 * cfg.block_m * cfg.block_n // threads,
            "dQ": cfg.block_m * cfg.head_dim // threads,
        },
        "bank_conflicts": [r.row() for r in reports],
    }


def sm80_bwd_summary_text(s):
    c = s["config"]
    (dkv, n_dkv), (sdp, n_sdp), (_, n_dq) = s["accumulators_per_thread"].items()
    w = c["warps"]
    lines = [f"flashcute sm80 backward {c['dtype']} hdim{c['head_dim']}: {c['block_n']} keys per CTA, Q/dO blocks "
             f"of {c['block_m']} rows in {c['stages']} stages, {c['threads']} threads ({w} warps)",
             f"  MMA atom {c['mma_atom']}; warps (along M x along N): S/dP {c['atom_sdp_m']} x "
             f"{w // c['atom_sdp_m']}, dK/dV {c['atom_dkv_n']} x {w // c['atom_dkv_n']}, dQ {c['atom_dq_m']} x "
             f"{w // c['atom_dq_m']}; dQ added into a float32 accumulator in global memory",
             f"  float32 accumulators per thread: {dkv} {n_dkv} (across the Q blocks), {sdp} {n_sdp} and dQ {n_dq} "
             f"(per step)",
             f"  shared memory: {s['smem_bytes']} bytes ({s['smem_bytes'] / 1024:.1f} KiB)",
             "", "Shared-memory bank conflicts, predicted per CTA (shipped swizzle | without the swizzle):"]
    lines.append(f"  {'access':<22} {'instruction':<18} {'when':<12} {'/thread':>7} {'wavefr.':>8} {'ideal':>7} "
                 f"{'worst':>6} | {'wavefr.':>8} {'worst':>6}")
    for r in s["bank_conflicts"]:
        lines.append(f"  {r['access']:<22} {r['instruction']:<18} {r['when']:<12} {r['instructions_per_thread']:>7} "
                     f"{r['wavefronts']:>8} {r['ideal_wavefronts']:>7} {str(r['worst_degree']) + '-way':>6} | "
                     f"{r['unswizzled_wavefronts']:>8} {str(r['unswizzled_worst_degree']) + '-way':>6}")
    lines.append("  (a row naming two tensors counts one of them: the other's copy is the same)")
    return "\n".join(lines) + "\n"


def bwd_summary_text(s):
    if s["config"]["arch"] == "sm80":
        return sm80_bwd_summary_text(s)
    c, r = s["config"], s["registers"]
    (dkv, n_dkv), (sdp, n_sdp), (_, n_dq) = s["accumulators_per_thread"].items()
    sdp_atom, dkv_atom, dq_atom = c["mma_atoms"]
    if c["keys_along_m"]:
        plan = f"{c['mma_warpgroups']} consumer warpgroups of 64 keys"
        gemms = (f"S^T/dP^T {sdp_atom}, dK/dV {dkv_atom} (A from registers), "
                 f"dQ {dq_atom} ({c['atom_dq_m']} warpgroup(s) along its rows; through shared memory)")
    else:
        plan = f"queries along M: {c['mma_warpgroups']} consumer warpgroups split them in S and dP"
        gemms = (f"S/dP {sdp_atom}, dK^T/dV^T {dkv_atom} (P^T and dS^T from shared memory; {c['atom_dkv_m']} "
                 f"warpgroup(s) along the head dim), dQ {dq_atom} ({c['atom_dq_m']} warpgroup(s) along its rows; "
                 f"added from registers; deterministic: parked over the spent Q/dO stages for bulk reductions)")
    lines = [f"flashcute sm90 backward {c['dtype']} hdim{c['head_dim']}: {c['block_n']} keys per CTA ({plan}), "
             f"Q/dO blocks of {c['block_m']} rows in {c['stages']}-deep pipelines, {c['threads']} threads",
             f"  GMMA atoms: {gemms}",
             f"  registers: {r['launch']} at launch, setmaxnreg {r['producer']} (producer) / {r['consumer']} "
             f"(consumers)",
             f"  float32 accumulators per consumer thread: {dkv} {n_dkv} (across the Q blocks), "
             f"{sdp} {n_sdp} and dQ {n_dq} (per step)",
             f"  shared memory: {s['smem_bytes']} bytes ({s['smem_bytes'] / 1024:.1f} KiB of 227)"]
    for variant, n in s["ptxas"].items():
        lines.append(f"  ptxas ({variant}): {n['registers']} registers, {n['spill_store_bytes']} B spill stores, "
                     f"{n['spill_load_bytes']} B spill loads")
    return "\n".join(lines) + "\n"


def draw_bwd_smem(cfg, out_dir):
    """Q (= dO), K and dS (or P and dS) in 16-byte chunks: the first bank of each, stage 0, the first rows."""
    if cfg.arch == "sm80":
        layouts = (("SmemLayoutQdO", cfg.smem_layout_qdo, "query positions", "16-byte chunks of the head dim (Q, dO)"),
                   ("SmemLayoutKV", cfg.smem_layout_kv, "key positions", "16-byte chunks of the head dim (K, V)"),
                   ("SmemLayoutPdS", cfg.smem_layout_pds, "query positions", "16-byte chunks of the keys (P, dS)"))
    else:
        ds_is = "" if cfg.keys_along_m else " (P's stages and dS's)"
        layouts = (("SmemLayoutQ", cfg.smem_layout_q, "query positions",
                    "16-byte chunks of the head dim (= SmemLayoutdO)"),
                   ("SmemLayoutK", cfg.smem_layout_k, "key positions", "16-byte chunks of the head dim"),
                   (f"SmemLayout{cfg.ds_name}", cfg.smem_layout_ds, "query positions",
                    f"16-byte chunks of the keys{ds_is}"))
    return [path for name, layout, rows_are, cols_are in layouts
            for path in draw_chunk_banks(name, layout, cfg.element_bytes, f"rows: {rows_are}, columns: {cols_are}",
                                         out_dir)]


def _draw_sm80_bwd_mma_tv(cfg, head):
    """The three gemms, each with its own warp arrangement."""
    def title(name, mma, what):
        return f"{name} of {head}: {mma.atom.name}, tile {to_str(mma.tile_shape)}\n{what}"
    return (("mma_tv_SdP", draw_mma(cfg.tiled_mma_sdp, title=title(
                "TiledMmaSdP", cfg.tiled_mma_sdp, "A = Q (queries x head dim), B = K (keys x head dim, drawn K x N), "
                "C = S (queries x keys); dP = dO.V^T alike"))),
            ("mma_tv_dKV", draw_mma(cfg.tiled_mma_dkv, title=title(
                "TiledMmadKV", cfg.tiled_mma_dkv, "A = P^T (keys x queries), B = dO^T (head dim x queries, drawn K x "
                "N), C = dV (keys x head dim); dK = dS^T.Q alike"))),
            ("mma_tv_dQ", draw_mma(cfg.tiled_mma_dq, title=title(
                "TiledMmadQ", cfg.tiled_mma_dq, "A = dS (queries x keys), B = K^T (head dim x keys, drawn K x N), "
                "C = dQ (queries x head dim)"))))


def _draw_bwd_mma_tv_keys_along_m(cfg, head):
    """S^T = K.Q^T, and the dV / dK gemms' A operand: the S^T (dP^T) accumulator regrouped in registers."""
    sdp, dkv = cfg.tiled_mma_sdp, cfg.tiled_mma_dkv
    title_sdp = (f"TiledMmaSdP of {head}: {sdp.atom.name}, tile {to_str(sdp.tile_shape)}\nA = K (keys x head dim), "
                 f"B = Q (queries x head dim, drawn K x N), C = S^T (keys x queries); dP^T = V.dO^T alike")
    m, k = int(dkv.tile_shape[0]), int(dkv.tile_shape[2])
    title_dkv = (f"TiledMmadKV of {head}: {dkv.atom.name}; its A operand, P^T (or dS^T), {m} keys x {k} queries "
                 f"per k-step,\nis the S^T (dP^T) accumulator regrouped in registers; cell: consumer thread T, value V")
    return (("mma_tv_SdP", draw_mma(sdp, title=title_sdp)),
            ("mma_tv_dKV_A", draw_tv(dkv.get_layoutA_TV(), (m, k), title=title_dkv)))


def _draw_bwd_mma_tv_queries_along_m(cfg, head):
    """S = Q.K^T with the keys split over the warpgroups, and dK^T = Q^T.dS, both of whose operands are in shared
    memory."""
    sdp, dkv = cfg.tiled_mma_sdp, cfg.tiled_mma_dkv
    title_sdp = (f"TiledMmaSdP of {head}: {sdp.atom.name}, tile {to_str(sdp.tile_shape)}\nA = Q (queries x head "
                 f"dim), B = K (keys x head dim, drawn K x N), C = S (queries x keys); dP = dO.V^T alike")
    title_dkv = (f"TiledMmadKV of {head}: {dkv.atom.name}, tile {to_str(dkv.tile_shape)}\nA = Q^T (head dim x "
                 f"queries), B = dS^T (keys x queries, drawn K x N), C = dK^T (head dim x keys); dV^T = dO^T.P alike")
    return (("mma_tv_SdP", draw_mma(sdp, title=title_sdp)), ("mma_tv_dKV", draw_mma(dkv, title=title_dkv)))


def draw_bwd_mma_tv(cfg, out_dir):
    """The three TiledMMAs, as each plan uses them."""
    head = cfg.header
    if cfg.arch == "sm80":
        return [path for stem, drawing in _draw_sm80_bwd_mma_tv(cfg, head)
                for path in _save_drawing(drawing, out_dir, stem)]
    dq = cfg.tiled_mma_dq
    title_dq = (f"TiledMmadQ of {head}: {dq.atom.name}, tile {to_str(dq.tile_shape)}\nA = dS (queries x keys, from "
                f"shared memory), B = K^T (head dim x keys), C = dQ (queries x head dim)")
    plan = _draw_bwd_mma_tv_keys_along_m if cfg.keys_along_m else _draw_bwd_mma_tv_queries_along_m
    drawings = (*plan(cfg, head), ("mma_tv_dQ", draw_mma(dq, title=title_dq)))
    return [path for stem, drawing in drawings for path in _save_drawing(drawing, out_dir, stem)]


def explain_backward(dtype, head_dim, out_dir, pictures=None, arch="sm90"):
    """Write the backward's pictures (names from BWD_PICTURES[arch], default all) and summary into ``out_dir``;
    returns the summary dict (also summary.json) with the written files under "files"."""
    cfg = bwd_config(dtype, head_dim, arch)
    known = BWD_PICTURES[arch]
    pictures = known if pictures is None else pictures
    if unknown := sorted(set(pictures) - set(known)):
        raise ValueError(f"pictures must be among {', '.join(known)} for the {arch.upper()} backward; got "
                         f"{', '.join(unknown)}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = bwd_summary(cfg)
    drawers = {"smem": draw_bwd_smem, "mma_tv": draw_bwd_mma_tv,
               "bank_conflicts": lambda cfg, out: draw_bank_conflicts(
                   cfg, kernel_access_reports(cfg, SM80_BWD_ACCESSES), out, cfg.header)}
    files = [path for name in known if name in pictures for path in drawers[name](cfg, out_dir)]
    (out_dir / "summary.txt").write_text(bwd_summary_text(summary))
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1))
    summary["files"] = [str(p) for p in files] + [str(out_dir / "summary.txt"), str(out_dir / "summary.json")]
    return summary
