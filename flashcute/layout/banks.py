"""Shared-memory bank-conflict model: wavefronts per warp instruction.

Hardware model (NVIDIA SM70 and later):
  * shared memory is 32 banks, each 4 bytes wide; byte address a lives in bank (a // 4) % 32;
  * a warp instruction is served in phases: 32-bit accesses in one phase of 32 threads,
    64-bit accesses in two half-warp phases, 128-bit accesses in four quarter-warp phases,
    ldmatrix/stmatrix in one phase per 8x8 matrix (8 threads, each naming one 16-byte row);
  * a phase costs as many wavefronts as the largest number of *distinct* 4-byte words
    any single bank must deliver; threads reading the same word share it (broadcast).

`wavefronts - ideal` is what Nsight Compute reports as shared-memory bank conflicts; the
conflict degree is the worst per-phase cost (1 = conflict free, 8 = 8-way conflict).
"""

from dataclasses import dataclass

import numpy as np

from .layout import filter as filter_layout, get, rank, size

NUM_BANKS = 32
BANK_BYTES = 4
WARP_SIZE = 32

# threads served together, by access width in bits (8- and 16-bit accesses behave like 32-bit ones)
_PHASE_THREADS = {8: 32, 16: 32, 32: 32, 64: 16, 128: 8}
_MATRIX_ROWS = 8          # ldmatrix/stmatrix: 8 rows of 16 bytes form one 8x8 b16 matrix
_ROW_BYTES = 16


@dataclass(frozen=True)
class BankReport:
    """Bank behaviour of a batch of warp instructions.

    Arrays have one row per instruction; `phase_wavefronts` has one column per phase.
    `bank_words[i, p, b]` is how many distinct words phase p of instruction i asks of bank b.
    """

    access: str
    addresses: np.ndarray          # (instructions, threads) byte address each thread names, -1 inactive
    bank_words: np.ndarray         # (instructions, phases, 32)
    phase_wavefronts: np.ndarray   # (instructions, phases)
    phase_ideal: np.ndarray        # (instructions, phases)

    @property
    def instructions(self):
        return self.phase_wavefronts.shape[0]

    @property
    def wavefronts(self):
        """Wavefronts each instruction takes."""
        return self.phase_wavefronts.sum(axis=1)

    @property
    def ideal(self):
        """Wavefronts each instruction would take without conflicts."""
        return self.phase_ideal.sum(axis=1)

    @property
    def conflicts(self):
        """Extra wavefronts caused by conflicts (Nsight Compute's bank-conflict count)."""
        return self.wavefronts - self.ideal

    @property
    def degree(self):
        """Worst n-way conflict of each instruction (1 when conflict free)."""
        ratio = np.where(self.phase_ideal > 0,
                         self.phase_wavefronts / np.maximum(self.phase_ideal, 1), 0)
        return np.maximum(ratio.max(axis=1), 1).astype(np.int64)

    def total(self):
        """(wavefronts, ideal, conflicts) summed over all instructions."""
        return int(self.wavefronts.sum()), int(self.ideal.sum()), int(self.conflicts.sum())

    def __str__(self):
        wave, ideal, extra = self.total()
        worst = int(self.degree.max()) if self.instructions else 1
        phases = self.phase_wavefronts.shape[1]
        lines = [f"{self.access}: {self.instructions} instruction(s), {phases} phase(s) each",
                 f"  wavefronts {wave}  ideal {ideal}  bank conflicts {extra}  "
                 f"worst {worst}-way"]
        if self.instructions <= 16:
            for i in range(self.instructions):
                per_phase = " ".join(str(int(w)) for w in self.phase_wavefronts[i])
                lines.append(f"  instr {i:3d}: wavefronts {int(self.wavefronts[i]):3d}"
                             f"  degree {int(self.degree[i])}  phases [{per_phase}]")
        return "\n".join(lines)


def _as_addresses(addresses, threads_multiple):
    addrs = np.asarray(addresses)
    if addrs.dtype.kind not in "iu":
        raise ValueError(f"addresses must be integers, got dtype {addrs.dtype}")
    addrs = addrs.astype(np.int64)
    if addrs.ndim == 1:
        addrs = addrs[None, :]
    if addrs.ndim != 2:
        raise ValueError(f"addresses must have shape (threads,) or (instructions, threads), "
                         f"got {addrs.shape}")
    if addrs.shape[1] == 0 or addrs.shape[1] > WARP_SIZE:
        raise ValueError(f"a warp instruction has 1..{WARP_SIZE} threads, got {addrs.shape[1]}")
    if (addrs < -1).any():
        raise ValueError("addresses must be >= 0 (or -1 for an inactive thread)")
    pad = -addrs.shape[1] % threads_multiple
    if pad:
        addrs = np.concatenate([addrs, np.full((addrs.shape[0], pad), -1, np.int64)], axis=1)
    return addrs


def _phase_costs(words):
    """words: (instructions, phases, slots) word indices, -1 unused.
    Returns bank_words (I, P, 32), wavefronts (I, P), ideal (I, P)."""
    n_instr, n_phase, _ = words.shape
    ordered = np.sort(words, axis=2)
    # a word counts once per phase however many threads name it (broadcast)
    first = np.ones_like(ordered, dtype=bool)
    first[:, :, 1:] = ordered[:, :, 1:] != ordered[:, :, :-1]
    distinct = first & (ordered >= 0)
    row = np.arange(n_instr * n_phase).reshape(n_instr, n_phase, 1)
    slot = row * NUM_BANKS + np.where(distinct, ordered % NUM_BANKS, 0)
    bank_words = np.bincount(slot[distinct], minlength=n_instr * n_phase * NUM_BANKS)
    bank_words = bank_words.reshape(n_instr, n_phase, NUM_BANKS)
    wavefronts = bank_words.max(axis=2)
    ideal = -(-distinct.sum(axis=2) // NUM_BANKS)
    return bank_words, wavefronts, ideal


def _words(addrs, nbytes):
    """Word indices each thread touches: (I, T, nbytes // 4), -1 for inactive threads."""
    per_thread = max(1, nbytes // BANK_BYTES)
    words = addrs[:, :, None] // BANK_BYTES + np.arange(per_thread)
    return np.where(addrs[:, :, None] >= 0, words, -1)


def access_report(addresses, bits):
    """Bank report for plain ld.shared/st.shared of `bits` (8, 16, 32, 64 or 128) per thread.

    addresses: byte addresses, shape (threads,) for one instruction or (instructions, threads);
    -1 marks an inactive thread. Each address must be aligned to the access size.
    """
    if bits not in _PHASE_THREADS:
        raise ValueError(f"bits must be one of 8, 16, 32, 64, 128 (got {bits!r})")
    nbytes = bits // 8
    addrs = _as_addresses(addresses, _PHASE_THREADS[bits])
    if ((addrs >= 0) & (addrs % nbytes != 0)).any():
        bad = int(addrs[(addrs >= 0) & (addrs % nbytes != 0)][0])
        raise ValueError(f"{bits}-bit accesses must be {nbytes}-byte aligned; "
                         f"address {bad} is not")
    phase_threads = _PHASE_THREADS[bits]
    words = _words(addrs, nbytes)
    n_instr, n_threads, per_thread = words.shape
    words = words.reshape(n_instr, n_threads // phase_threads, phase_threads * per_thread)
    bank_words, wave, ideal = _phase_costs(words)
    return BankReport(f"{bits}-bit", addrs, bank_words, wave, ideal)


def matrix_report(row_addresses, op="ldmatrix"):
    """Bank report for ldmatrix/stmatrix: thread 8*i+r names row r of matrix i.

    row_addresses: byte address of each 16-byte row, shape (8|16|32,) or (instructions, 8|16|32)
    for the .x1/.x2/.x4 forms. Rows must be 16-byte aligned.
    """
    addrs = np.asarray(row_addresses)
    n_threads = addrs.shape[-1] if addrs.ndim else 0
    if n_threads not in (8, 16, 32):
        raise ValueError(f"{op} takes 8, 16 or 32 row addresses (x1, x2, x4), got {n_threads}")
    addrs = _as_addresses(addrs, _MATRIX_ROWS)
    if ((addrs >= 0) & (addrs % _ROW_BYTES != 0)).any():
        raise ValueError(f"{op} row addresses must be 16-byte aligned")
    words = _words(addrs, _ROW_BYTES)
    n_instr = words.shape[0]
    words = words.reshape(n_instr, n_threads // _MATRIX_ROWS, _MATRIX_ROWS * _ROW_BYTES // BANK_BYTES)
    bank_words, wave, ideal = _phase_costs(words)
    return BankReport(f"{op}.x{n_threads // _MATRIX_ROWS}", addrs, bank_words, wave, ideal)


def bank_of(byte_offsets):
    """Bank of each byte offset (numpy array in, numpy array out)."""
    return (np.asarray(byte_offsets, dtype=np.int64) // BANK_BYTES) % NUM_BANKS


# ---------------------------------------------------------------------------------------------
# From layouts and copies
# ---------------------------------------------------------------------------------------------

def layout_addresses(layout, indices, elem_bytes):
    """Byte addresses of the elements at linear (colexicographic) ``indices`` of a shared-memory
    layout (a Layout, or a swizzled ComposedLayout); ``indices`` may be any int array shape."""
    idx = np.asarray(indices, dtype=np.int64)
    n = int(size(layout))
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise ValueError(f"indices must be in [0, {n}) for a layout of size {n}")
    if int(elem_bytes) <= 0:
        raise ValueError(f"elem_bytes must be positive, got {elem_bytes}")
    offsets = layout.offsets()
    if offsets.ndim != 1:
        raise ValueError("layout_addresses needs a layout to offsets, not to coordinates")
    return offsets[idx] * int(elem_bytes)


def _copy_kind(atom, side):
    """(side of shared memory, 'matrix' | access bits) for a copy atom."""
    name = atom.name
    if "LDSM" in name:
        inferred, kind = "S", "matrix"
    elif "STSM" in name:
        inferred, kind = "D", "matrix"
    else:
        inferred = "D" if name.startswith("SM80_CP_ASYNC") else None
        bits = int(atom.src_bits.shape[1]) if side != "D" else int(atom.dst_bits.shape[1])
        kind = atom.value_bits if bits == 1 else bits   # auto-vectorizing copies: one element
    if side is None:
        if inferred is None:
            raise ValueError(f"{name} can read or write shared memory: say side='S' or side='D'")
        side = inferred
    if side not in ("S", "D"):
        raise ValueError(f"side must be 'S' (source) or 'D' (destination), got {side!r}")
    if kind == "matrix" and side != inferred:
        raise ValueError(f"{name} touches shared memory on its {inferred} side, not {side}")
    return side, kind


def copy_report(tiled_copy, smem_layout, side=None):
    """Bank report of every warp instruction a TiledCopy issues on a shared-memory tile.

    ``smem_layout`` is the (possibly swizzled) layout of the shared-memory tensor in elements of
    the copy's value type; ``side`` says which side of the copy it is ('S' or 'D'; inferred for
    ldmatrix, stmatrix and cp.async). One instruction per warp and per atom call, in order
    (warp fastest).
    """
    atom = tiled_copy.atom
    side, kind = _copy_kind(atom, side)
    part = tiled_copy.tidfrg_S(smem_layout) if side == "S" else tiled_copy.tidfrg_D(smem_layout)
    n_thr = int(size(part, 0))
    n_val = int(atom.num_val_src if side == "S" else atom.num_val_dst)
    offsets = part.offsets()
    if offsets.ndim != 1:
        raise ValueError("copy_report needs a shared-memory layout to offsets")
    per_thread = offsets.reshape(-1, n_thr).T            # (thread, value-and-rest) colexicographic
    calls = per_thread.reshape(n_thr, -1, n_val)         # (thread, atom call, atom value)
    # an atom's values of one thread must be one contiguous vector in shared memory
    contiguous = calls - calls[:, :, :1] == np.arange(n_val)
    if kind != "matrix" and not contiguous.all():
        raise ValueError(f"{atom.name}<{atom.value_type}>: the shared-memory layout does not give each thread "
                         f"{n_val} contiguous elements per access (C++ would fail to vectorize)")
    starts = calls[:, :, 0] * (atom.value_bits // 8)     # (thread, call) byte address of each access
    n_warps = -(-n_thr // WARP_SIZE)
    pad = n_warps * WARP_SIZE - n_thr
    if pad:
        starts = np.concatenate([starts, np.full((pad, starts.shape[1]), -1)], axis=0)
    # instructions ordered (call, warp): (calls * warps, 32)
    instr = starts.reshape(n_warps, WARP_SIZE, -1).transpose(2, 0, 1).reshape(-1, WARP_SIZE)
    if kind == "matrix":
        thread_bits = atom.src_bits if side == "S" else atom.dst_bits
        rows = int(size(filter_layout(get(thread_bits, 0))))   # threads that name a row: 8, 16 or 32
        return matrix_report(instr[:, :rows], "ldmatrix" if side == "S" else "stmatrix")
    return access_report(instr, kind)


def traversal_report(layout, elem_bytes, bits=32, order="col"):
    """Bank report of warps sweeping a rank-2 shared-memory layout: thread t of instruction i takes
    vector 32*i + t, vectors being ``bits // (8*elem_bytes)`` consecutive elements in the sweep
    order: ``"col"`` (down each column, m fastest) or ``"row"`` (along each row, n fastest).

    E.g. a warp reading column c of a row-major float tile: ``traversal_report(L, 4, 32, "col")``.
    """
    if int(rank(layout)) != 2:
        raise ValueError(f"traversal_report needs a rank-2 layout, got rank {int(rank(layout))}")
    if order not in ("col", "row"):
        raise ValueError(f"order must be 'col' or 'row', got {order!r}")
    elem_bits = 8 * int(elem_bytes)
    if bits % elem_bits:
        raise ValueError(f"{bits}-bit accesses cannot be made of {elem_bits}-bit elements")
    per_vec = bits // elem_bits
    m, n = int(size(layout, 0)), int(size(layout, 1))
    grid = np.arange(m * n).reshape(n, m).T                     # linear index of (i, j)
    sweep = grid.T.reshape(-1) if order == "col" else grid.reshape(-1)
    if sweep.size % (per_vec * WARP_SIZE):
        raise ValueError(f"{m}x{n} elements do not split into warps of 32 x {per_vec}-element vectors")
    addrs = layout_addresses(layout, sweep, elem_bytes).reshape(-1, per_vec)
    if (np.diff(addrs, axis=1) != int(elem_bytes)).any():
        raise ValueError(f"the layout does not keep {per_vec} elements contiguous along the {order} sweep; "
                         f"{bits}-bit vectors are impossible")
    return access_report(addrs[:, 0].reshape(-1, WARP_SIZE), bits)
