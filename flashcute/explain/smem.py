"""The shared-memory access and bank model: the address every thread gives each shared-memory instruction the
kernel issues (from its TiledCopy thread-value layouts applied to its shared-memory layouts), and the
wavefronts those instructions take, with the shipped swizzle and without it (flashcute.layout.banks)."""

from dataclasses import dataclass

import numpy as np

from ..layout import (
    _, as_position_independent_swizzle_layout, banks, get_nonswizzle_portion, is_int, rank, size, to_str,
)


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
# csrc/sm80/bwd_mainloop.h and bwd_epilogue.h: every shared-memory copy of the SM80 backward (Q and dO share their
# layout and copies, as do K and V, and P and dS).
SM80_BWD_ACCESSES = (
    SmemAccess("Q, dO gmem->smem", "per Q block", "gmem_tiled_copy_qkv", "D", "smem_layout_qdo"),
    SmemAccess("K, V gmem->smem", "prologue", "gmem_tiled_copy_qkv", "D", "smem_layout_kv"),
    SmemAccess("Q, dO smem->regs", "per Q block", "smem_tiled_copy_qdo", "S", "smem_layout_qdo"),
    SmemAccess("K, V smem->regs", "per Q block", "smem_tiled_copy_kv", "S", "smem_layout_kv"),
    SmemAccess("P, dS regs->smem", "per Q block", "smem_tiled_copy_pds", "D", "smem_layout_pds"),
    SmemAccess("P^T, dS^T smem->regs", "per Q block", "smem_tiled_copy_pdst", "S", "smem_layout_pdst"),
    SmemAccess("dO^T, Q^T smem->regs", "per Q block", "smem_tiled_copy_qdot", "S", "smem_layout_qdot"),
    SmemAccess("dS smem->regs", "per Q block", "smem_tiled_copy_ds", "S", "smem_layout_pds"),
    SmemAccess("K^T smem->regs", "per Q block", "smem_tiled_copy_kt", "S", "smem_layout_kt"),
    SmemAccess("dK, dV regs->smem", "epilogue", "smem_tiled_copy_dkv", "D", "smem_layout_kv"),
    SmemAccess("dK, dV smem->gmem", "epilogue", "gmem_tiled_copy", "S", "smem_layout_kv"),
)
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


def kernel_access_reports(cfg, accesses=None):
    """One report per shared-memory copy of the kernel (default: the forward's of cfg.arch, ACCESSES)."""
    return [access_report(cfg, a) for a in (ACCESSES[cfg.arch] if accesses is None else accesses)]

