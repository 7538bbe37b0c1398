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

NUM_BANKS = 32
BANK_BYTES = 4
WARP_SIZE = 32

# threads served together, by access width in bits
_PHASE_THREADS = {32: 32, 64: 16, 128: 8}
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
    per_thread = nbytes // BANK_BYTES
    words = addrs[:, :, None] // BANK_BYTES + np.arange(per_thread)
    return np.where(addrs[:, :, None] >= 0, words, -1)


def access_report(addresses, bits):
    """Bank report for plain ld.shared/st.shared of `bits` (32, 64 or 128) per thread.

    addresses: byte addresses, shape (threads,) for one instruction or (instructions, threads);
    -1 marks an inactive thread. Each address must be aligned to the access size.
    """
    if bits not in _PHASE_THREADS:
        raise ValueError(f"bits must be one of 32, 64, 128 (got {bits!r}); "
                         f"narrower accesses behave like 32-bit ones")
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
