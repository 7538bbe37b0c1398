"""The SM90 backward kernel explained: its tiles, registers, shared memory and the pictures of its layouts.

    python -m flashcute.explain --op bwd --arch sm90 --dtype bf16 --hdim 128 -o DIR

Everything comes from flashcute.kernel_configs' Sm90BwdConfig, which tests/test_kernel_layouts.py holds equal to
csrc/sm90/bwd_kernel_traits.h. DIR receives (PNG and SVG) smem_<Layout> (the first bank of every 16-byte chunk of
Q, K and dS), mma_tv_SdP (S^T = K.Q^T: keys along M, 64 per consumer warpgroup), mma_tv_dKV_A (P^T and dS^T as
the dV / dK gemms' register A operand), mma_tv_dQ (dQ = dS.K), and summary.txt / summary.json.
"""

import json
from pathlib import Path

from .. import kernel_configs, kernel_table
from ..layout import to_str
from ..layout.draw import draw_mma, draw_tv
from . import ptxas
from .draw import _save_drawing, draw_chunk_banks

BWD_PICTURES = ("smem", "mma_tv")


def bwd_config(dtype, head_dim):
    """The shipped SM90 backward configuration for (dtype, head_dim); ValueError naming the choices otherwise."""
    if dtype not in kernel_configs.DTYPES:
        raise ValueError(f"dtype must be one of {kernel_configs.DTYPES}, got {dtype!r}")
    shipped = kernel_table.head_dims("bwd", "sm90")
    if head_dim not in shipped:
        raise ValueError(f"head_dim must be one of {shipped} for the SM90 backward, got {head_dim!r}")
    return kernel_configs.config_for(kernel_table.find("bwd", "sm90", head_dim, "all"), dtype)


def bwd_summary(cfg):
    """The backward's numbers as a JSON-able dict: tile, threads and registers, shared memory, what each consumer
    thread holds in registers across the Q blocks and per step, and ptxas's spills."""
    consumers = cfg.n_mma_warpgroups * 128
    kernel = kernel_table.find("bwd", "sm90", cfg.head_dim, "all")
    spills = {("causal" if causal else "non-causal"): ptxas.numbers(kernel, cfg.dtype, "sm_90a", causal)
              for causal in ptxas.causal_flags(kernel)}
    return {
        "config": {"arch": "sm90", "op": "bwd", "dtype": cfg.dtype, "head_dim": cfg.head_dim,
                   "block_m": cfg.block_m, "block_n": cfg.block_n, "stages": cfg.stages, "atom_dq_m": cfg.atom_dq_m,
                   "threads": cfg.n_threads, "mma_warpgroups": cfg.n_mma_warpgroups,
                   "mma_atoms": [m.atom.name for m in (cfg.tiled_mma_sdp, cfg.tiled_mma_dkv, cfg.tiled_mma_dq)]},
        "layouts": cfg.printed(),
        "smem_bytes": cfg.smem_bytes,
        "registers": {"launch": cfg.launch_regs, "producer": cfg.producer_regs, "consumer": cfg.consumer_regs},
        # float32 accumulators per consumer thread: dK and dV live across the Q blocks; S^T, dP^T and dQ per step
        "accumulators_per_thread": {
            "dK + dV": 2 * cfg.block_n * cfg.head_dim // consumers,
            "S^T + dP^T": 2 * cfg.block_n * cfg.block_m // consumers,
            "dQ": cfg.block_m * cfg.head_dim // consumers,
        },
        "ptxas": {variant: {"registers": n[0], "spill_store_bytes": n[1], "spill_load_bytes": n[2]}
                  for variant, n in spills.items() if n is not None},
    }


def bwd_summary_text(s):
    c, r, a = s["config"], s["registers"], s["accumulators_per_thread"]
    lines = [f"flashcute sm90 backward {c['dtype']} hdim{c['head_dim']}: {c['block_n']} keys per CTA "
             f"({c['mma_warpgroups']} consumer warpgroups of 64 keys), Q/dO blocks of {c['block_m']} rows in "
             f"{c['stages']}-deep pipelines, {c['threads']} threads",
             f"  GMMA atoms: S^T/dP^T {c['mma_atoms'][0]}, dK/dV {c['mma_atoms'][1]} (A from registers), "
             f"dQ {c['mma_atoms'][2]} ({c['atom_dq_m']} warpgroup(s) along its rows)",
             f"  registers: {r['launch']} at launch, setmaxnreg {r['producer']} (producer) / {r['consumer']} "
             f"(consumers)",
             f"  float32 accumulators per consumer thread: dK + dV {a['dK + dV']} (across the Q blocks), "
             f"S^T + dP^T {a['S^T + dP^T']} and dQ {a['dQ']} (per step)",
             f"  shared memory: {s['smem_bytes']} bytes ({s['smem_bytes'] / 1024:.1f} KiB of 227)"]
    for variant, n in s["ptxas"].items():
        lines.append(f"  ptxas ({variant}): {n['registers']} registers, {n['spill_store_bytes']} B spill stores, "
                     f"{n['spill_load_bytes']} B spill loads")
    return "\n".join(lines) + "\n"


def draw_bwd_smem(cfg, out_dir):
    """Q (= dO), K and dS in 16-byte chunks: the first bank of each, stage 0, the first rows."""
    files = []
    for name, layout, rows_are, cols_are in (
            ("SmemLayoutQ", cfg.smem_layout_q, "query positions", "16-byte chunks of the head dim (= SmemLayoutdO)"),
            ("SmemLayoutK", cfg.smem_layout_k, "key positions", "16-byte chunks of the head dim"),
            ("SmemLayoutdS", cfg.smem_layout_ds, "query positions", "16-byte chunks of the keys")):
        files += draw_chunk_banks(name, layout, cfg.element_bytes, f"rows: {rows_are}, columns: {cols_are}", out_dir)
    return files


def draw_bwd_mma_tv(cfg, out_dir):
    head = f"sm90 {cfg.dtype} hdim{cfg.head_dim} backward"
    sdp, dkv, dq = cfg.tiled_mma_sdp, cfg.tiled_mma_dkv, cfg.tiled_mma_dq
    title_sdp = (f"TiledMmaSdP of {head}: {sdp.atom.name}, tile {to_str(sdp.tile_shape)}\nA = K (keys x head dim), "
                 f"B = Q (queries x head dim, drawn K x N), C = S^T (keys x queries); dP^T = V.dO^T alike")
    m, k = int(dkv.tile_shape[0]), int(dkv.tile_shape[2])
    title_dkv = (f"TiledMmadKV of {head}: {dkv.atom.name}; its A operand, P^T (or dS^T), {m} keys x {k} queries "
                 f"per k-step,\nis the S^T (dP^T) accumulator regrouped in registers; cell: consumer thread T, value V")
    title_dq = (f"TiledMmadQ of {head}: {dq.atom.name}, tile {to_str(dq.tile_shape)}\nA = dS (queries x keys, from "
                f"shared memory), B = K^T (head dim x keys), C = dQ (queries x head dim)")
    return (_save_drawing(draw_mma(sdp, title=title_sdp), out_dir, "mma_tv_SdP")
            + _save_drawing(draw_tv(dkv.get_layoutA_TV(), (m, k), title=title_dkv), out_dir, "mma_tv_dKV_A")
            + _save_drawing(draw_mma(dq, title=title_dq), out_dir, "mma_tv_dQ"))


def explain_backward(dtype, head_dim, out_dir, pictures=BWD_PICTURES):
    """Write the backward's pictures (names from BWD_PICTURES) and summary into ``out_dir``; returns the summary
    dict (also summary.json) with the written files under "files"."""
    cfg = bwd_config(dtype, head_dim)
    if unknown := sorted(set(pictures) - set(BWD_PICTURES)):
        raise ValueError(f"pictures must be among {', '.join(BWD_PICTURES)} for the backward; got {', '.join(unknown)}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = bwd_summary(cfg)
    drawers = {"smem": draw_bwd_smem, "mma_tv": draw_bwd_mma_tv}
    files = [path for name in BWD_PICTURES if name in pictures for path in drawers[name](cfg, out_dir)]
    (out_dir / "summary.txt").write_text(bwd_summary_text(summary))
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1))
    summary["files"] = [str(p) for p in files] + [str(out_dir / "summary.txt"), str(out_dir / "summary.json")]
    return summary
