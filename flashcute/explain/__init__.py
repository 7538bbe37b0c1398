"""See inside a shipped kernel: its tiles, shared-memory layouts, bank conflicts, MMA layouts and numbers.

    python -m flashcute.explain --arch sm80 --dtype bf16 --hdim 128 [--seqlen 2000] -o DIR
    python -m flashcute.explain --arch sm90 --dtype bf16 --hdim 128 [--causal] -o DIR
    python -m flashcute.explain ... --pictures tiling,thread_path -o DIR   (some pictures only: the MMA and
                                                                            smem pictures take a minute)
    python -m flashcute.explain --op bwd --arch sm90 --dtype bf16 --hdim 128 -o DIR   (the SM90 backward, or
                                    the SM80 one with --arch sm80: smem and mma_tv pictures and its numbers;
                                    flashcute/explain/backward.py)
    python -m flashcute.explain --op decode --hdim 128 --batch 8 --heads 32 --heads-kv 8 --seqlen-k 131072
                                    [--seqlen 4] [--page-size 64] -o DIR   (the split-KV decode kernel's plan for one
                                    step, decode.txt / decode.json; flashcute/explain/decode.py)

Everything is computed with flashcute.layout from flashcute.kernel_configs, which
tests/test_kernel_layouts.py holds equal to the kernels' own C++ traits.  DIR receives (PNG and SVG):

  tiling          Q, K, V, O of the problem cut into the kernel's tiles; the ragged last tile marked
  varlen_tiling   a packed batch (--lengths) cut into Q tiles per sequence; SM90: the tensor-map coordinates that
                  clip each sequence's last tile, and the longest-first walk
  smem_<Layout>   each shared-memory layout: the first bank of every 16-byte chunk
  bank_conflicts  every shared-memory instruction the threads issue: wavefronts with the shipped swizzle and
                  without it (the unswizzled counterfactual)
  bank_phase      one ldmatrix (SM80) / stmatrix (SM90) phase: the bank each of 8 rows hits, with and without
  mma_tv          the TiledMMA's A, B and C thread-value layouts (SM90: mma_tv_S, and mma_tv_O_A for P)
  thread_path     what one thread touches during one K/V block
  summary.txt / summary.json   the numbers (shared memory, registers, occupancy, FLOPs, bytes, intensity,
                  the whole-kernel counts Nsight Compute should measure); always written

The bank model is flashcute.layout.banks (phases per access width, ldmatrix/stmatrix per 8x8 matrix); every
address comes from the kernel's TiledCopy thread-value layouts applied to its shared-memory layouts.

One module per idea: ptxas (registers and spills: SM80 measured, SM90 derived), occupancy (the device model),
smem (shared-memory addresses and banks), problem (grid, FLOPs, bytes, Nsight Compute counts), draw (the
pictures), summary (the numbers as a dict and as text, ``explain`` and the command line), backward (the
backwards' numbers and pictures), decode (the decode kernel's plan: tile, split count, residency).
"""

from .backward import bwd_summary, explain_backward
from .decode import decode_plan, explain_decode
from .draw import thread_path
from .occupancy import DEVICES, occupancy, occupancy_numbers
from .smem import SM80_ACCESSES, access_report, copy_tv, kernel_access_reports, mma_tv, tv_coords
from .summary import explain, main, summarize, summary_text

__all__ = ["DEVICES", "SM80_ACCESSES", "access_report", "bwd_summary", "copy_tv", "decode_plan", "explain",
           "explain_backward", "explain_decode", "kernel_access_reports", "main", "mma_tv", "occupancy",
           "occupancy_numbers", "summarize", "summary_text", "thread_path", "tv_coords"]
