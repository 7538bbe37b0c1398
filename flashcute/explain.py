"""See inside a shipped kernel: its tiles, shared-memory layouts, bank conflicts, MMA layouts and numbers.

    python -m flashcute.explain --arch sm80 --dtype bf16 --hdim 128 [--seqlen 2000] -o DIR
    python -m flashcute.explain --arch sm90 --dtype bf16 --hdim 128 [--causal] -o DIR

Everything is computed with flashcute.layout from flashcute.kernel_configs, which
tests/test_kernel_layouts.py holds equal to the kernels' own C++ traits.  DIR receives (PNG and SVG):

  tiling          Q, K, V, O of the problem cut into the kernel's tiles; the ragged last tile marked
  smem_<Layout>   each shared-memory layout: the first bank of every 16-byte chunk
  bank_conflicts  every shared-memory instruction the threads issue: wavefronts with the shipped swizzle and
                  without it (the unswizzled counterfactual)
  bank_phase      one ldmatrix (SM80) / stmatrix (SM90) phase: the bank each of 8 rows hits, with and without
  mma_tv          the TiledMMA's A, B and C thread-value layouts (SM90: mma_tv_S, and mma_tv_O_A for P)
  thread_path     what one thread touches during one K/V block
  summary.txt / summary.json   the numbers (shared memory, registers, occupancy, FLOPs, bytes, intensity,
                  the whole-kernel counts Nsight Compute should measure)

The bank model is flashcute.layout.banks (phases per access width, ldmatrix/stmatrix per 8x8 matrix); every
address comes from the kernel's TiledCopy thread-value layouts applied to its shared-memory layouts.
"""

import argparse
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import kernel_configs
from .layout import (
    _, as_position_independent_swizzle_layout, banks, get_nonswizzle_portion, is_int, rank, size, to_str,
)

# ------------------------------------------------------------------------------------------------ registers
# Registers per thread and spill bytes (stores, loads) of every kernel, from ptxas (device code only):
#   nvcc <flashcute._build.NVCC_FLAGS> -Icsrc -I<CUTLASS include> -gencode=arch=compute_80,code=sm_80
#        -Xptxas -v -cubin csrc/instantiations/fwd_<arch>_<dtype>_hdim<d>.cu
# and the same with -gencode=arch=compute_90a,code=sm_90a (the SM80 kernel as built for an H100/H200,
# and the SM90 kernel); CUDA 13.0, CUTLASS 4.2.0, csrc/sm80 at 90ee1e8, csrc/sm90 at c349c1a (noncausal-longk
# at 484dcc5).
# (kernel, target, dtype, head dim, variant) -> (registers, spill store bytes, spill load bytes); variant:
# noncausal or causal, and for SM90 also noncausal-longk (the long-seqlen_k tile, kernel_configs).
# Recompile and update when csrc/sm80 or csrc/sm90 change: the registers decide occupancy.
REGISTERS = {
    ('sm80', 'sm_80', 'fp16', 64, 'noncausal'): (254, 0, 0),
    ('sm80', 'sm_80', 'fp16', 64, 'causal'): (255, 104, 160),
    ('sm80', 'sm_80', 'fp16', 96, 'noncausal'): (255, 144, 188),
    ('sm80', 'sm_80', 'fp16', 96, 'causal'): (255, 140, 184),
    ('sm80', 'sm_80', 'fp16', 128, 'noncausal'): (255, 272, 328),
    ('sm80', 'sm_80', 'fp16', 128, 'causal'): (255, 260, 324),
    ('sm80', 'sm_80', 'fp16', 192, 'noncausal'): (255, 0, 0),
    ('sm80', 'sm_80', 'fp16', 192, 'causal'): (254, 0, 0),
    ('sm80', 'sm_80', 'fp16', 256, 'noncausal'): (255, 0, 0),
    ('sm80', 'sm_80', 'fp16', 256, 'causal'): (253, 0, 0),
    ('sm80', 'sm_80', 'bf16', 64, 'noncausal'): (254, 0, 0),
    ('sm80', 'sm_80', 'bf16', 64, 'causal'): (255, 104, 160),
    ('sm80', 'sm_80', 'bf16', 96, 'noncausal'): (255, 136, 184),
    ('sm80', 'sm_80', 'bf16', 96, 'causal'): (255, 132, 176),
    ('sm80', 'sm_80', 'bf16', 128, 'noncausal'): (255, 272, 328),
    ('sm80', 'sm_80', 'bf16', 128, 'causal'): (255, 260, 324),
    ('sm80', 'sm_80', 'bf16', 192, 'noncausal'): (255, 0, 0),
    ('sm80', 'sm_80', 'bf16', 192, 'causal'): (254, 0, 0),
    ('sm80', 'sm_80', 'bf16', 256, 'noncausal'): (255, 0, 0),
    ('sm80', 'sm_80', 'bf16', 256, 'causal'): (253, 0, 0),
    ('sm80', 'sm_90a', 'fp16', 64, 'noncausal'): (254, 0, 0),
    ('sm80', 'sm_90a', 'fp16', 64, 'causal'): (255, 100, 156),
    ('sm80', 'sm_90a', 'fp16', 96, 'noncausal'): (255, 136, 180),
    ('sm80', 'sm_90a', 'fp16', 96, 'causal'): (255, 140, 196),
    ('sm80', 'sm_90a', 'fp16', 128, 'noncausal'): (255, 300, 356),
    ('sm80', 'sm_90a', 'fp16', 128, 'causal'): (255, 288, 352),
    ('sm80', 'sm_90a', 'fp16', 192, 'noncausal'): (255, 0, 0),
    ('sm80', 'sm_90a', 'fp16', 192, 'causal'): (255, 0, 0),
    ('sm80', 'sm_90a', 'fp16', 256, 'noncausal'): (255, 0, 0),
    ('sm80', 'sm_90a', 'fp16', 256, 'causal'): (255, 0, 0),
    ('sm80', 'sm_90a', 'bf16', 64, 'noncausal'): (254, 0, 0),
    ('sm80', 'sm_90a', 'bf16', 64, 'causal'): (255, 100, 156),
    ('sm80', 'sm_90a', 'bf16', 96, 'noncausal'): (255, 136, 180),
    ('sm80', 'sm_90a', 'bf16', 96, 'causal'): (255, 140, 196),
    ('sm80', 'sm_90a', 'bf16', 128, 'noncausal'): (255, 300, 356),
    ('sm80', 'sm_90a', 'bf16', 128, 'causal'): (255, 288, 352),
    ('sm80', 'sm_90a', 'bf16', 192, 'noncausal'): (255, 0, 0),
    ('sm80', 'sm_90a', 'bf16', 192, 'causal'): (255, 0, 0),
    ('sm80', 'sm_90a', 'bf16', 256, 'noncausal'): (255, 0, 0),
    ('sm80', 'sm_90a', 'bf16', 256, 'causal'): (255, 0, 0),
    ('sm90', 'sm_90a', 'fp16', 64, 'noncausal'): (128, 0, 0),
    ('sm90', 'sm_90a', 'fp16', 64, 'causal'): (128, 0, 0),
    ('sm90', 'sm_90a', 'fp16', 96, 'noncausal'): (168, 0, 0),
    ('sm90', 'sm_90a', 'fp16', 96, 'causal'): (168, 0, 0),
    ('sm90', 'sm_90a', 'fp16', 128, 'noncausal'): (168, 0, 0),
    ('sm90', 'sm_90a', 'fp16', 128, 'causal'): (168, 0, 0),
    ('sm90', 'sm_90a', 'fp16', 192, 'noncausal'): (168, 0, 0),
    ('sm90', 'sm_90a', 'fp16', 192, 'causal'): (168, 0, 0),
    ('sm90', 'sm_90a', 'fp16', 256, 'noncausal'): (168, 0, 0),
    ('sm90', 'sm_90a', 'fp16', 256, 'causal'): (168, 0, 0),
    ('sm90', 'sm_90a', 'bf16', 64, 'noncausal'): (128, 0, 0),
    ('sm90', 'sm_90a', 'bf16', 64, 'causal'): (128, 0, 0),
    ('sm90', 'sm_90a', 'bf16', 96, 'noncausal'): (168, 0, 0),
    ('sm90', 'sm_90a', 'bf16', 96, 'causal'): (168, 0, 0),
    ('sm90', 'sm_90a', 'bf16', 128, 'noncausal'): (168, 0, 0),
    ('sm90', 'sm_90a', 'bf16', 128, 'causal'): (168, 0, 0),
    ('sm90', 'sm_90a', 'bf16', 192, 'noncausal'): (168, 0, 0),
    ('sm90', 'sm_90a', 'bf16', 192, 'causal'): (168, 0, 0),
    ('sm90', 'sm_90a', 'bf16', 256, 'noncausal'): (168, 0, 0),
    ('sm90', 'sm_90a', 'bf16', 256, 'causal'): (168, 0, 0),
    ('sm90', 'sm_90a', 'fp16', 128, 'noncausal-longk'): (168, 0, 0),
    ('sm90', 'sm_90a', 'bf16', 128, 'noncausal-longk'): (168, 0, 0),
}

# ------------------------------------------------------------------------------------------------ devices
# Per-SM limits (CUDA programming guide, compute capabilities 8.0 and 9.0).
@dataclass(frozen=True)
class Device:
    name: str
    target: str                  # which REGISTERS column the kernel runs as
    smem_per_sm: int             # bytes
    smem_per_cta_max: int
    smem_reserved_per_cta: int   # the runtime keeps 1 KB per CTA
    regs_per_sm: int = 65536
    reg_unit_per_warp: int = 256
    max_threads_per_sm: int = 2048
    max_ctas_per_sm: int = 32


A100 = Device("A100 (sm_80)", "sm_80", 164 * 1024, 163 * 1024, 1024)
H100 = Device("H100/H200 (sm_90a)", "sm_90a", 228 * 1024, 227 * 1024, 1024)
DEVICES = {"sm80": (A100, H100), "sm90": (H100,)}


def occupancy(device, threads, smem_bytes, registers):
    """(CTAs per SM, the limiting resource(s), {resource: CTAs it allows})."""
    warps = math.ceil(threads / 32)
    regs_per_warp = math.ceil(registers * 32 / device.reg_unit_per_warp) * device.reg_unit_per_warp
    limits = {
        "threads": device.max_threads_per_sm // threads,
        "CTA slots": device.max_ctas_per_sm,
        "shared memory": (device.smem_per_sm // (smem_bytes + device.smem_reserved_per_cta)
                          if smem_bytes <= device.smem_per_cta_max else 0),
        "registers": (device.regs_per_sm // regs_per_warp) // warps,
    }
    ctas = min(limits.values())
    return ctas, " and ".join(k for k, v in limits.items() if v == ctas), limits


# ------------------------------------------------------------------------------------------------ addresses
def copy_tv(cfg, copy, side):
    """(TV layout, (m, n) tiler, copy operation, values per thread per atom) of one TiledCopy of ``cfg``
    on its source ("S") or destination ("D") side."""
    tiled_copy = getattr(cfg, copy)
    if not all(is_int(t) for t in tiled_copy.tiler_mn):
        raise ValueError(f"{copy}: tilers with permutations are not modelled, got {to_str(tiled_copy.tiler_mn)}")
    atom = tiled_copy.atom
    if side == "S":
        return tiled_copy.get_layoutS_TV(), tiled_copy.tiler_mn, atom.name, atom.num_val_src
    return tiled_copy.get_layoutD_TV(), tiled_copy.tiler_mn, atom.name, atom.num_val_dst


def mma_tv(cfg, operand, mma="tiled_mma"):
    """(TV layout, (M, N, K) tile) of operand "A", "B" or "C" of one TiledMMA of ``cfg``."""
    mma = getattr(cfg, mma)
    tv = {"A": mma.get_layoutA_TV, "B": mma.get_layoutB_TV, "C": mma.get_layoutC_TV}[operand]()
    return tv, mma.tile_shape


def tv_coords(tv, tiler, shape):
    """(row, col) arrays, each (threads, values, tiles), of a thread-value layout tiled over a tensor.

    CuTe's partitioning (TiledCopy::tidfrg_S/D, TiledMMA::thrfrg_A/B/C): ``zipped_divide(tensor, tiler)``
    and the tile mode composed with ``tv``, whose results index the (tm, tn) tile column-major.
    """
    tm, tn = (int(t) for t in tiler)
    rows, cols = (int(s) for s in shape)
    if rows % tm or cols % tn:
        raise ValueError(f"a ({rows}, {cols}) tensor is not a whole number of ({tm}, {tn}) tiles")
    threads, values = int(size(tv, 0)), int(size(tv, 1))
    idx = tv.offsets().reshape(values, threads).T
    tiles = np.arange((rows // tm) * (cols // tn))
    row = (idx % tm)[:, :, None] + (tiles % (rows // tm)) * tm
    col = (idx // tm)[:, :, None] + (tiles // (rows // tm)) * tn
    return row, col


def smem_addresses(layout, row, col, element_bytes):
    """Byte address in shared memory of each (row, col) of a (rows, cols) shared-memory layout."""
    rows, cols = (int(size(layout, m)) for m in (0, 1))
    offsets = layout.offsets().reshape(cols, rows).T
    return offsets[row, col] * element_bytes


def vector_width(addresses, element_bytes, max_bytes=16):
    """Largest number of consecutive values per thread that sit at consecutive, aligned addresses
    (what an auto-vectorising copy turns into one instruction)."""
    threads, values, tiles = addresses.shape
    width = max_bytes // element_bytes
    while width > 1:
        if values % width == 0:
            runs = addresses.reshape(threads, values // width, width, tiles)
            if ((np.diff(runs, axis=2) == element_bytes).all()
                    and (runs[:, :, 0, :] % (width * element_bytes) == 0).all()):
                return width
        width //= 2
    return 1


def warp_instructions(addresses, width):
    """(warps * instructions, 32) first-byte address of each thread's part of each warp instruction."""
    threads, values, tiles = addresses.shape
    first = addresses.reshape(threads, values // width, width, tiles)[:, :, 0, :]
    per_thread = first.transpose(0, 2, 1).reshape(threads, -1)
    return per_thread.reshape(threads // 32, 32, -1).transpose(0, 2, 1).reshape(-1, 32)


# ------------------------------------------------------------------------------------------------ bank conflicts
@dataclass(frozen=True)
class SmemAccess:
    """One shared-memory copy of the kernel (csrc/sm80/kernel.h, epilogue.h)."""

    name: str
    when: str     # "prologue", "per K/V block" or "epilogue"
    copy: str     # the TiledCopy (a kernel_configs attribute)
    side: str     # "S": shared memory is the source; "D": the destination
    smem: str     # the shared-memory layout (a kernel_configs attribute)


SM80_ACCESSES = (
    SmemAccess("Q gmem->smem", "prologue", "gmem_tiled_copy_qkv", "D", "smem_layout_q"),
    SmemAccess("K gmem->smem", "per K/V block", "gmem_tiled_copy_qkv", "D", "smem_layout_kv"),
    SmemAccess("V gmem->smem", "per K/V block", "gmem_tiled_copy_qkv", "D", "smem_layout_kv"),
    SmemAccess("Q smem->regs", "per K/V block", "smem_tiled_copy_q", "S", "smem_layout_q"),
    SmemAccess("K smem->regs", "per K/V block", "smem_tiled_copy_k", "S", "smem_layout_kv"),
    SmemAccess("V^T smem->regs", "per K/V block", "smem_tiled_copy_v", "S", "smem_layout_vt"),
    SmemAccess("O regs->smem", "epilogue", "smem_tiled_copy_o", "D", "smem_layout_o"),
    SmemAccess("O smem->regs", "epilogue", "gmem_tiled_copy_o", "S", "smem_layout_o"),
)
# csrc/sm90: TMA writes Q/K/V and reads O, wgmma reads Q, K, V^T through descriptors; the only shared-memory
# instruction the threads issue themselves is the stmatrix of O.
SM90_ACCESSES = (
    SmemAccess("O regs->smem", "epilogue", "smem_tiled_copy_o", "D", "smem_layout_o"),
)
ACCESSES = {"sm80": SM80_ACCESSES, "sm90": SM90_ACCESSES}
NOT_MODELLED = {
    "sm80": (),
    "sm90": ("TMA loads of Q, K, V and the TMA store of O (the copy engine writes and reads whole swizzled lines)",
             "wgmma operand reads of Q, K and V^T from shared memory (through matrix descriptors)"),
}


def _instruction_name(op, side, bits):
    if "STSM" in op:
        return "stmatrix.x4" + (".trans" if "STSM_T" in op else "")
    if "LDSM_T" in op:
        return "ldmatrix.x4.trans"
    if "LDSM_N" in op:
        return "ldmatrix.x4"
    if "CP_ASYNC" in op:
        return f"cp.async {bits}-bit"
    return f"{'ld' if side == 'S' else 'st'}.shared {bits}-bit"


@dataclass(frozen=True)
class AccessReport:
    access: SmemAccess
    instruction: str            # e.g. "ldmatrix.x4", "st.shared 32-bit"
    per_thread: int             # instructions each thread issues
    swizzled: banks.BankReport  # the shipped layout; one row per warp instruction of the CTA
    unswizzled: banks.BankReport

    def row(self):
        sw, un = self.swizzled.total(), self.unswizzled.total()
        return {
            "access": self.access.name, "when": self.access.when, "instruction": self.instruction,
            "instructions_per_thread": self.per_thread, "instructions_per_cta": self.swizzled.instructions,
            "wavefronts": sw[0], "ideal_wavefronts": sw[1], "conflicts": sw[2],
            "worst_degree": int(self.swizzled.degree.max()),
            "unswizzled_wavefronts": un[0], "unswizzled_conflicts": un[2],
            "unswizzled_worst_degree": int(self.unswizzled.degree.max()),
        }


def _bank_report(op, addresses, width, element_bytes):
    rows = warp_instructions(addresses, width)
    if "LDSM" in op or "STSM" in op:
        return banks.matrix_report(rows, op="ldmatrix" if "LDSM" in op else "stmatrix")
    return banks.access_report(rows, width * element_bytes * 8)


def access_report(cfg, access):
    """Predicted wavefronts of every warp instruction of one shared-memory copy, swizzled and not."""
    tv, tiler, op, atom_values = copy_tv(cfg, access.copy, access.side)
    layout = smem_stage(getattr(cfg, access.smem))
    shape = (size(layout, 0), size(layout, 1))
    row, col = tv_coords(tv, tiler, shape)
    addr = smem_addresses(layout, row, col, cfg.element_bytes)
    plain = smem_addresses(get_nonswizzle_portion(layout), row, col, cfg.element_bytes)
    width = atom_values if atom_values > 1 else vector_width(addr, cfg.element_bytes)
    if vector_width(addr, cfg.element_bytes, width * cfg.element_bytes) != width:
        raise ValueError(f"{access.name}: {op} moves {width} values per thread, not contiguous in {access.smem}")
    bits = width * cfg.element_bits
    return AccessReport(access, _instruction_name(op, access.side, bits),
                        addr.shape[1] // width * addr.shape[2],
                        _bank_report(op, addr, width, cfg.element_bytes),
                        _bank_report(op, plain, width, cfg.element_bytes))


def smem_stage(layout):
    """A shared-memory layout in element offsets from a 1024-byte aligned buffer (SM90's GMMA layouts
    swizzle the address: made position independent), stage 0 of a staged (rows, cols, stages) layout."""
    layout = as_position_independent_swizzle_layout(layout)
    return layout(_, _, 0) if int(rank(layout)) == 3 else layout


def kernel_access_reports(cfg):
    return [access_report(cfg, a) for a in ACCESSES[cfg.arch]]


# ------------------------------------------------------------------------------------------------ numbers
def ceil_div(a, b):
    return -(-a // b)


def tile_numbers(cfg):
    """Work of one K/V block of one CTA: S = Q.K^T and O += P.V, against the K and V tiles it loads."""
    flops = 2 * (2 * cfg.block_m * cfg.block_n * cfg.head_dim)
    kv_bytes = 2 * cfg.block_n * cfg.head_dim * cfg.element_bytes
    return {"flops": flops, "gmem_bytes": kv_bytes, "arithmetic_intensity": flops / kv_bytes}


def problem_numbers(cfg, batch, heads, seqlen_q, seqlen_k):
    """Grid, FLOPs and global-memory bytes of a non-causal forward (every CTA re-reads all of K and V)."""
    m_blocks, n_blocks = ceil_div(seqlen_q, cfg.block_m), ceil_div(seqlen_k, cfg.block_n)
    ctas = m_blocks * heads * batch
    d, eb = cfg.head_dim, cfg.element_bytes
    useful = 4 * batch * heads * seqlen_q * seqlen_k * d
    executed = 4 * ctas * n_blocks * cfg.block_m * cfg.block_n * d
    # ragged rows are zero-filled by cp.async, so only valid rows cross the memory bus
    gmem = batch * heads * (2 * seqlen_q * d * eb + m_blocks * 2 * seqlen_k * d * eb + 4 * seqlen_q)
    return {
        "batch": batch, "heads": heads, "seqlen_q": seqlen_q, "seqlen_k": seqlen_k,
        "q_tiles": m_blocks, "kv_tiles": n_blocks, "ctas": ctas,
        "q_last_tile_rows": seqlen_q - (m_blocks - 1) * cfg.block_m,
        "kv_last_tile_rows": seqlen_k - (n_blocks - 1) * cfg.block_n,
        "flops_useful": useful, "flops_executed": executed, "gmem_bytes": gmem,
        "arithmetic_intensity": useful / gmem,
    }


# ncu counts each instruction class under its own metrics
_INSTRUCTION_CLASS = {"ldmatrix": "LDSM", "stmatrix": "STSM", "ld.shared": "LDS", "st.shared": "STS",
                      "cp.async": "LDGSTS"}


def predicted_counts(reports, problem):
    """Whole-kernel shared-memory instructions, wavefronts and bank conflicts by SASS class, as Nsight
    Compute counts them, for a non-causal launch (every CTA walks all K/V blocks)."""
    totals = {}
    for r in reports:
        cls = _INSTRUCTION_CLASS[r.instruction.split()[0].split(".x")[0]]
        times = problem["kv_tiles"] if r.access.when == "per K/V block" else 1
        wave, ideal, extra = r.swizzled.total()
        t = totals.setdefault(cls, {"instructions": 0, "wavefronts": 0, "ideal_wavefronts": 0, "conflicts": 0})
        for key, value in (("instructions", r.swizzled.instructions), ("wavefronts", wave),
                           ("ideal_wavefronts", ideal), ("conflicts", extra)):
            t[key] += value * times * problem["ctas"]
    return totals


def occupancy_numbers(cfg):
    """Registers (ptxas) and CTAs per SM on each device the kernel runs on. The SM80 kernel's layouts do not
    depend on the causal flag, so its causal variant's registers come along; an SM90 config is one variant."""
    variant = cfg.variant if cfg.arch == "sm90" else "noncausal"
    rows = []
    for device in DEVICES[cfg.arch]:
        regs = REGISTERS.get((cfg.arch, device.target, cfg.dtype, cfg.head_dim, variant))
        if regs is None:
            rows.append({"device": device.name, "registers": None})
            continue
        ctas, limiter, limits = occupancy(device, cfg.n_threads, cfg.smem_bytes, regs[0])
        row = {"device": device.name, "registers": regs[0], "spill_store_bytes": regs[1],
               "spill_load_bytes": regs[2], "registers_per_cta": regs[0] * cfg.n_threads, "ctas_per_sm": ctas,
               "limited_by": limiter, "limits": limits, "warps_per_sm": ctas * cfg.n_threads // 32,
               "occupancy": ctas * cfg.n_threads / device.max_threads_per_sm}
        if cfg.arch == "sm80":
            row["registers_causal"] = REGISTERS.get((cfg.arch, device.target, cfg.dtype, cfg.head_dim, "causal"),
                                                    (None,))[0]
        else:
            row["setmaxnreg"] = {"producer": cfg.producer_regs, "consumers": cfg.consumer_regs}
        rows.append(row)
    return rows


# ------------------------------------------------------------------------------------------------ pictures
def _save(fig, out_dir, stem):
    paths = []
    for ext in ("png", "svg"):
        path = out_dir / f"{stem}.{ext}"
        fig.savefig(path, dpi=110 if ext == "png" else None, bbox_inches="tight")
        paths.append(path)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return paths


def _tiles(extent, block, head_dim):
    """[(first row, valid rows)] of the tiles ``local_tile(m, (block, head_dim), (_, 0))`` cuts an
    (extent, head_dim) tensor into; the last may be ragged (its coordinates fail ``elem_less``)."""
    from .layout import Int, _
    from .layout.tensor import elem_less_mask, local_tile, make_identity_tensor

    tiled = local_tile(make_identity_tensor((extent, head_dim)), (Int(block), Int(head_dim)), (_, 0))
    out = []
    for i in range(int(size(tiled, 2))):
        tile = tiled(_, _, i)
        valid = elem_less_mask(tile, (extent, head_dim)).reshape(head_dim, block)[0]
        out.append((int(tile.offset[0]), int(valid.sum())))
    return out


def draw_tiling(cfg, problem, out_dir):
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    sq, sk, d = problem["seqlen_q"], problem["seqlen_k"], cfg.head_dim
    panels = (("Q", sq, cfg.block_m, "local_tile(mQ, (kBlockM, kHeadDim), (m, 0)): one per CTA, kept in smem"),
              ("K", sk, cfg.block_n, "local_tile(mK, (kBlockN, kHeadDim), (_, 0)): every CTA walks all of them"),
              ("V", sk, cfg.block_n, "same tiles as K, loaded one step behind"),
              ("O", sq, cfg.block_m, "written once per CTA through smem (Q's buffer)"))
    width = max(ceil_div(s, b) * b for _, s, b, _ in panels)
    fig, axes = plt.subplots(4, 1, figsize=(13, 6.4), sharex=True)
    for ax, (name, extent, block, note) in zip(axes, panels):
        tiles = _tiles(extent, block, d)
        for i, (start, valid) in enumerate(tiles):
            color = "#9ecae1" if i % 2 == 0 else "#c6dbef"
            ax.add_patch(Rectangle((start, 0), valid, d, facecolor=color, edgecolor="#3182bd", lw=0.6))
            if valid < block:
                ax.add_patch(Rectangle((start + valid, 0), block - valid, d, facecolor="white",
                                       edgecolor="#de2d26", hatch="///", lw=0.8))
                ax.text(start + block / 2, d / 2, f"{valid}/{block}\nrows valid", ha="center", va="center",
                        fontsize=7, color="#a50f15", fontweight="bold")
            elif len(tiles) <= 40 or i % 4 == 0:
                ax.text(start + valid / 2, d / 2, str(i), ha="center", va="center", fontsize=6)
        last_start, last_valid = tiles[-1]
        ragged = (f"; last tile rows {last_start}..{last_start + last_valid - 1} ({last_valid} of {block})"
                  if last_valid < block else "")
        ax.set_title(f"{name}: {extent} x {d} -> {len(tiles)} tiles of {block} rows{ragged}.  {note}",
                     fontsize=8, loc="left")
        ax.set_xlim(0, width)
        ax.set_ylim(0, d)
        ax.set_yticks([0, d])
        ax.set_ylabel("head dim", fontsize=7)
    axes[-1].set_xlabel("sequence position (rows); hatched: outside the tensor (cp.async zero-fills, "
                        "stores are predicated off)", fontsize=8)
    fig.suptitle(f"{cfg.arch} {cfg.dtype} hdim{d}: tiling of the problem (one batch, one head)", fontsize=10)
    fig.tight_layout()
    return _save(fig, out_dir, "tiling")


def _save_drawing(drawing, out_dir, stem):
    """Write a flashcute.layout.draw picture as PNG and SVG."""
    paths = [out_dir / f"{stem}.png", out_dir / f"{stem}.svg"]
    for path in paths:
        drawing.figure.savefig(path, dpi=110, bbox_inches="tight")
    return paths


SMEM_PICTURE_ROWS = 16  # the SM80 swizzles repeat every 8 rows: 16 rows show the pattern twice


def smem_pictures(cfg):
    """(name, layout, note) of each distinct shared-memory layout of the kernel."""
    if cfg.arch == "sm80":
        return (("SmemLayoutQ", cfg.smem_layout_q, " (= SmemLayoutO: O is staged in Q's buffer)"),
                ("SmemLayoutKV", cfg.smem_layout_kv, " (K and V)"),
                ("SmemLayoutVt", cfg.smem_layout_vt, " (V read as V^T)"))
    return (("SmemLayoutQ", cfg.smem_layout_q, " (SmemLayoutO's 64-row slabs repeat these atoms)"),
            ("SmemLayoutK", cfg.smem_layout_k, f" (= SmemLayoutV; stage 0 of {cfg.stages})"),
            ("SmemLayoutVt", cfg.smem_layout_vt, f" (V read as V^T; stage 0 of {cfg.stages})"))


def draw_smem_layouts(cfg, out_dir):
    """Each shared-memory layout in 16-byte chunks (the unit the swizzle permutes): the first bank of
    every chunk, from the mirror's layout itself."""
    from .layout import Int, Layout, composition, upcast
    from .layout.draw import draw_bank_map

    per_chunk = 16 // cfg.element_bytes
    files = []
    for name, layout, also in smem_pictures(cfg):
        chunks = upcast(smem_stage(layout), per_chunk)
        rows = min(int(size(chunks, 0)), SMEM_PICTURE_ROWS) if name != "SmemLayoutVt" else int(size(chunks, 0))
        shown = composition(chunks, (Layout(Int(rows)), Layout(size(chunks, 1))))
        what = ("rows: head dim in 16-byte chunks, columns: key positions" if name == "SmemLayoutVt" else
                "rows: sequence positions, columns: 16-byte chunks of the head dim")
        title = (f"{name}{also} = {layout}\nfirst bank of each 16-byte chunk; {what}"
                 + (f"; rows 0-{rows - 1} of {int(size(chunks, 0))}" if rows < int(size(chunks, 0)) else ""))
        drawing = draw_bank_map(shown, 16, title=title)
        files += _save_drawing(drawing, out_dir, f"smem_{name}")
    return files


def draw_mma_tv(cfg, out_dir):
    """The TiledMMA thread-value layouts as CuTe's print_latex draws them. SM90: all of TiledMmaS (its C
    pattern is also O's, 16 columns at a time) and the A operand of TiledMmaO (P, from registers)."""
    from .layout.draw import draw_mma, draw_tv

    head = f"{cfg.arch} {cfg.dtype} hdim{cfg.head_dim}"
    if cfg.arch == "sm80":
        title = (f"TiledMma of {head}: {cfg.mma_op}, {cfg.n_warps} warps along M, tile "
                 f"{to_str(cfg.tiled_mma.tile_shape)}\nA = Q (M x K) left, B = K (N x K, drawn K x N) top, "
                 f"C = S (M x N); cell: thread T and value V (the same layouts serve O = P.V)")
        return _save_drawing(draw_mma(cfg.tiled_mma, title=title), out_dir, "mma_tv")
    s, o = cfg.tiled_mma_s, cfg.tiled_mma_o
    title_s = (f"TiledMmaS of {head}: {s.atom.name}, {cfg.n_mma_warpgroups} consumer warpgroups along M, tile "
               f"{to_str(s.tile_shape)}\nA = Q and B = K are read from shared memory through descriptors (each "
               f"warpgroup thread is listed for its whole slab); C = S in registers")
    m, k = int(o.tile_shape[0]), int(o.tile_shape[2])
    title_o = (f"TiledMmaO of {head}: {o.atom.name}; its A operand, P ({m} x {k} per k-step), comes from "
               f"registers:\nthe S accumulator regrouped and converted to 16 bits; cell: consumer thread T, value V")
    return (_save_drawing(draw_mma(s, title=title_s), out_dir, "mma_tv_S")
            + _save_drawing(draw_tv(o.get_layoutA_TV(), (m, k), title=title_o), out_dir, "mma_tv_O_A"))


def draw_bank_conflicts(cfg, reports, out_dir):
    import matplotlib.pyplot as plt

    names = [f"{r.access.name}\n{r.instruction} ({r.access.when})" for r in reports]
    sw = np.array([r.swizzled.wavefronts.mean() for r in reports])
    un = np.array([r.unswizzled.wavefronts.mean() for r in reports])
    ideal = np.array([r.swizzled.ideal.mean() for r in reports])
    y = np.arange(len(reports))
    fig, ax = plt.subplots(figsize=(10, 0.62 * len(reports) + 1.4))
    ax.barh(y - 0.2, sw, 0.38, color="#31a354", label="shipped swizzle")
    ax.barh(y + 0.2, un, 0.38, color="#de2d26", label="same layout without the swizzle")
    for i, r in enumerate(reports):
        for value, offset, rep in ((sw[i], -0.2, r.swizzled), (un[i], 0.2, r.unswizzled)):
            degree = int(rep.degree.max())
            tag = "conflict-free" if degree == 1 else f"{degree}-way conflict"
            ax.text(value + 0.3, i + offset, f"{value:g} ({tag})", va="center", fontsize=7)
        ax.plot([ideal[i]] * 2, [i - 0.42, i + 0.42], color="black", lw=1)
    ax.set_yticks(y, names, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, max(un.max(), sw.max()) * 1.35)
    ax.set_xlabel("shared-memory wavefronts per warp instruction (black tick: conflict-free ideal)", fontsize=8)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(f"{cfg.arch} {cfg.dtype} hdim{cfg.head_dim}: predicted bank conflicts of every shared-memory "
                 f"instruction", fontsize=9)
    fig.tight_layout()
    return _save(fig, out_dir, "bank_conflicts")


def draw_bank_phase(cfg, report, out_dir):
    """The 8 rows of the first 8x8 matrix of one ldmatrix/stmatrix: which banks each row's 16 bytes hit."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 3.2))
    for ax, (title, rep) in zip(axes, (("shipped swizzle", report.swizzled), ("no swizzle", report.unswizzled))):
        rows = rep.addresses[0, :8]
        grid = np.full((8, banks.NUM_BANKS), np.nan)
        for r, addr in enumerate(rows):
            for w in range(4):
                grid[r, banks.bank_of(addr + 4 * w)] = r
        ax.imshow(grid, cmap="tab10", vmin=0, vmax=9, aspect="auto")
        for r, addr in enumerate(rows):
            ax.text(-0.7, r, f"T{r}: byte {addr}", ha="right", va="center", fontsize=7)
        waves = int(rep.phase_wavefronts[0, 0])
        ax.set_title(f"{title}: {waves} wavefront{'s' if waves > 1 else ''} for this 8x8 matrix"
                     + ("" if waves == 1 else f" ({waves}-way conflict)"), fontsize=9)
        ax.set_xticks(range(0, 32, 4), [f"{b}" for b in range(0, 32, 4)], fontsize=7)
        ax.set_xticks(np.arange(-0.5, 32, 1), minor=True)
        ax.grid(which="minor", axis="x", color="#dddddd", lw=0.5)
        ax.set_yticks([])
        ax.set_xlabel("bank", fontsize=8)
    fig.suptitle(f"{report.access.name} ({report.instruction}), warp 0, first instruction, matrix 0: "
                 f"each thread names one 16-byte row", fontsize=9)
    fig.tight_layout()
    return _save(fig, out_dir, "bank_phase")


def path_threads(cfg):
    """(threads that run the MMAs, threads per group drawn as context): SM80 all its threads in warps,
    SM90 the consumer warpgroups (MMA thread index = threadIdx.x - 128)."""
    return (cfg.n_threads, 32) if cfg.arch == "sm80" else (cfg.n_mma_threads, 128)


def thread_path(cfg, thread):
    """What ``thread`` touches in one K/V block: [(panel title, (rows, cols), named, held, group, note)].

    ``named``: shared memory the thread addresses or reads (cp.async destinations, ldmatrix/stmatrix rows,
    wgmma descriptor operands); ``held``: elements in its registers (MMA fragments); ``group``: what its
    warp (SM80) or warpgroup (SM90) as a whole names or holds there.
    """
    n_threads, group_size = path_threads(cfg)
    if not 0 <= thread < n_threads:
        raise ValueError(f"thread must be in [0, {n_threads}), got {thread}")
    bm, bn, d = cfg.block_m, cfg.block_n, cfg.head_dim
    group = slice(thread - thread % group_size, thread - thread % group_size + group_size)

    def masks(shape, coords):
        mine, ours = np.zeros(shape, dtype=bool), np.zeros(shape, dtype=bool)
        row, col = coords
        mine[row[thread].ravel(), col[thread].ravel()] = True
        ours[row[group].ravel(), col[group].ravel()] = True
        return mine, ours

    def copied(copy, side, shape):
        tv, tiler, _, _ = copy_tv(cfg, copy, side)
        return masks(shape, tv_coords(tv, tiler, shape))

    def fragment(operand, shape, tiler_modes, mma="tiled_mma"):
        tv, tile_mnk = mma_tv(cfg, operand, mma)
        return masks(shape, tv_coords(tv, tuple(tile_mnk[i] for i in tiler_modes), shape))

    def panel(title, shape, named, held, note):
        nothing = (np.zeros(shape, dtype=bool),) * 2
        named, held = named or nothing, held or nothing
        return title, shape, named[0], held[0], named[1] | held[1], note

    if cfg.arch == "sm90":
        return [
            panel("1. Q in smem: A of S = Q.K^T (wgmma descriptor)", (bm, d),
                  fragment("A", (bm, d), (0, 2), "tiled_mma_s"), None, "its warpgroup's 64-row slab"),
            panel("2. K in smem: B of S = Q.K^T (wgmma descriptor)", (bn, d),
                  fragment("B", (bn, d), (1, 2), "tiled_mma_s"), None, "every warpgroup reads all of K"),
            panel("3. S = Q.K^T accumulator", (bm, bn), None, fragment("C", (bm, bn), (0, 1), "tiled_mma_s"),
                  "masked, softmaxed, regrouped into P: the register A operand of P.V"),
            panel("4. V^T in smem: B of O += P.V (wgmma descriptor)", (d, bn),
                  fragment("B", (d, bn), (1, 2), "tiled_mma_o"), None, "every warpgroup reads all of V"),
            panel("5. O accumulator", (bm, d), None, fragment("C", (bm, d), (0, 1), "tiled_mma_o"),
                  "rescaled every block"),
            panel("6. O -> smem: stmatrix (epilogue)", (bm, d), copied("smem_tiled_copy_o", "D", (bm, d)),
                  None, "rows whose 16-byte addresses it supplies; then one TMA store"),
        ]
    return [
        panel("1. K (and V) tile: cp.async gmem->smem", (bn, d),
              copied("gmem_tiled_copy_qkv", "D", (bn, d)), None, "16-byte chunks this thread copies"),
        panel("2. Q in smem: ldmatrix -> tSrQ", (bm, d),
              copied("smem_tiled_copy_q", "S", (bm, d)), fragment("A", (bm, d), (0, 2)),
              "A operand of S = Q.K^T"),
        panel("3. K in smem: ldmatrix -> tSrK", (bn, d),
              copied("smem_tiled_copy_k", "S", (bn, d)), fragment("B", (bn, d), (1, 2)),
              "B operand of S = Q.K^T"),
        panel("4. S = Q.K^T accumulator (then P, in place)", (bm, bn),
              None, fragment("C", (bm, bn), (0, 1)), "masked, softmaxed, reused as the A operand of P.V"),
        panel("5. V^T in smem: ldmatrix.trans -> tOrVt", (d, bn),
              copied("smem_tiled_copy_v", "S", (d, bn)), fragment("B", (d, bn), (1, 2)),
              "B operand of O += P.V"),
        panel("6. O accumulator", (bm, d), None, fragment("C", (bm, d), (0, 1)), "rescaled every block"),
    ]


def draw_thread_path(cfg, thread, out_dir):
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    panels = thread_path(cfg, thread)
    colors = ["#ffffff", "#e5e5e5", "#fd8d3c", "#3182bd", "#756bb1"]
    fig, axes = plt.subplots(2, 3, figsize=(14, 8.6))
    for ax, (title, shape, named, held, group, note) in zip(axes.ravel(), panels):
        grid = np.where(named | held, named.astype(int) + 2 * held.astype(int) + 1, group.astype(int))
        ax.imshow(grid, cmap=ListedColormap(colors), vmin=0, vmax=4, interpolation="nearest")
        counts = []
        if named.any():
            counts.append(f"addresses/reads {int(named.sum())} elements")
        if held.any():
            counts.append(f"holds {int(held.sum())} values")
        ax.set_title(f"{title}\n{shape[0]} x {shape[1]}: {', '.join(counts)}\n{note}", fontsize=8)
        ax.tick_params(labelsize=6)
    group_size = path_threads(cfg)[1]
    unit = "warp" if group_size == 32 else "warpgroup"
    named_label = ("its addresses (cp.async / ldmatrix rows)" if cfg.arch == "sm80" else
                   "shared memory it reads (wgmma) or addresses (stmatrix rows)")
    fig.legend(handles=[Patch(color=colors[2], label=named_label),
                        Patch(color=colors[3], label="its registers (MMA fragment)"),
                        Patch(color=colors[4], label="both"),
                        Patch(facecolor=colors[1], edgecolor="#999999", label=f"the rest of its {unit}'s share")],
               loc="lower center", ncol=4, fontsize=8)
    who = (f"thread {thread} (warp {thread // 32})" if cfg.arch == "sm80" else
           f"consumer thread {thread} (warpgroup {thread // 128} of the consumers, threadIdx.x {thread + 128})")
    fig.suptitle(f"{cfg.arch} {cfg.dtype} hdim{cfg.head_dim}: {who} through one K/V block "
                 f"(rows down, columns across)", fontsize=10)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return _save(fig, out_dir, "thread_path")


# ------------------------------------------------------------------------------------------------ summary
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
    lines += ["", f"Shared memory per CTA: {s['smem_bytes']} bytes", "", "Registers (ptxas -v) and occupancy:"]
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


# ------------------------------------------------------------------------------------------------ entry points
def explain(arch, dtype, head_dim, out_dir, seqlen_q=2000, seqlen_k=None, batch=1, heads=16, thread=0,
            causal=False):
    """Write every picture and the summary for one shipped configuration into ``out_dir``; returns the
    summary dict (also written as summary.json) with the written files under "files".
    ``causal`` and ``seqlen_k`` pick the SM90 tile configuration as the launcher does (the SM80 one depends on
    neither)."""
    seqlen_k = seqlen_q if seqlen_k is None else seqlen_k
    cfg = kernel_configs.get_config(arch, dtype, head_dim, causal, seqlen_k)
    for name, value in (("seqlen_q", seqlen_q), ("seqlen_k", seqlen_k), ("batch", batch), ("heads", heads)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    summary, reports = summarize(cfg, batch, heads, seqlen_q, seqlen_k, thread)
    files = []
    files += draw_tiling(cfg, summary["problem"], out_dir)
    files += draw_smem_layouts(cfg, out_dir)
    files += draw_bank_conflicts(cfg, reports, out_dir)
    files += draw_bank_phase(cfg, next(r for r in reports if "matrix" in r.instruction), out_dir)
    files += draw_mma_tv(cfg, out_dir)
    files += draw_thread_path(cfg, thread, out_dir)
    (out_dir / "summary.txt").write_text(summary_text(summary))
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1))
    summary["files"] = [str(p) for p in files] + [str(out_dir / "summary.txt"), str(out_dir / "summary.json")]
    return summary


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m flashcute.explain",
        description="Draw and explain a shipped flashcute kernel configuration (no GPU needed).")
    parser.add_argument("--arch", default="sm80", choices=sorted(DEVICES))
    parser.add_argument("--dtype", default="bf16", choices=kernel_configs.DTYPES)
    parser.add_argument("--hdim", type=int, default=128, help="head dim: one of the shipped ones")
    parser.add_argument("--seqlen", type=int, default=2000, help="query length (and key length unless --seqlen-k)")
    parser.add_argument("--seqlen-k", type=int, default=None)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--causal", action="store_true", help="the causal variant (SM90 tiles depend on it)")
    parser.add_argument("--thread", type=int, default=0,
                        help="the thread whose path is drawn (SM90: consumer thread, threadIdx.x - 128)")
    parser.add_argument("-o", "--out", required=True, help="output folder")
    args = parser.parse_args(argv)
    try:
        summary = explain(args.arch, args.dtype, args.hdim, args.out, args.seqlen, args.seqlen_k, args.batch,
                          args.heads, args.thread, args.causal)
    except ValueError as e:
        parser.error(str(e))
    print(Path(args.out, "summary.txt").read_text(), end="")
    print(f"\nwrote {len(summary['files'])} files to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
