"""benchmarks/ncu_bwd_stalls.py's reading of Nsight Compute's SASS source page, on a synthetic page: the consumers'
loop is found and cut into phases at its gemms (no GPU or ncu needed)."""

import csv
import io
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import ncu_bwd_stalls  # noqa: E402

BASE = 0x7F0000001000


def source_page(instructions):
    """ncu's `--page source --csv --print-source sass` layout: a kernel-name row, a header, one row per
    instruction (address, SASS, all samples, executed instructions, and one stall reason's column)."""
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_ALL)
    writer.writerow(["Kernel Name", "bwd_kernel"])
    writer.writerow(["Address", "Source", "Warp Stall Sampling (All Samples)", "Instructions Executed",
                     "stall_short_sb"])
    for i, (sass, samples, executed) in enumerate(instructions):
        writer.writerow([hex(BASE + 16 * i), sass, str(samples), str(executed), str(samples // 2)])
    return out.getvalue()


def address(i):
    return hex(BASE + 16 * i)


# A prologue, a two-gemm loop of 10 iterations (per warp, summed) whose first gemm's wait hides a retry loop
# executed more often but with no HGMMA, and an epilogue.
LOOP = [
    ("S2R R0, SR_TID.X", 5, 1),                                   # 0 prologue
    ("SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R2", 10, 10),     # 1 loop top: wait
    ("@!P0  BRA " + address(12), 40, 10),                         # 2
    ("HGMMA.64x64x16.F32.BF16 R24, gdesc[UR8], RZ, !UPT", 3, 10),  # 3 gemm 1
    ("UIADD3 UR8, UR8, 0x2, URZ", 1, 10),                         # 4
    ("HGMMA.64x64x16.F32.BF16 R24, gdesc[UR8], R24, gsb0", 2, 10),  # 5
    ("WARPGROUP.DEPBAR.LE gsb0, 0x0", 20, 10),                    # 6 before gemm 2
    ("FMUL R0, R24, R25", 4, 10),                                 # 7
    ("HGMMA.64x128x16.F32.BF16 R88, R0, gdesc[UR8], R88, gsb0", 6, 10),  # 8 gemm 2
    ("WARPGROUP.DEPBAR.LE gsb0, 0x0", 30, 10),                    # 9 after
    ("@P0   BRA " + address(1), 1, 10),                           # 10 the back edge
    ("EXIT", 1, 1),                                               # 11
    ("SYNCS.PHASECHK.TRANS64 P0, [UR4], R2", 2, 50),              # 12 retry loop: hotter, no HGMMA
    ("@!P0  BRA " + address(12), 2, 50),                          # 13
]


def test_branch_target():
    assert ncu_bwd_stalls._branch_target("@!P0  BRA 0x7f0000001100") == 0x7F0000001100
    assert ncu_bwd_stalls._branch_target("BRA 0x10") == 0x10
    assert ncu_bwd_stalls._branch_target("BRA.U.ANY 0x10") == 0x10
    assert ncu_bwd_stalls._branch_target("HGMMA.64x64x16.F32.BF16 R24, gdesc[UR8], R24") is None


def test_loop_phases_cuts_the_hottest_gemm_loop_at_its_gemms():
    phases, iterations = ncu_bwd_stalls.loop_phases(source_page(LOOP))
    assert iterations == 10
    names = [p[0] for p in phases]
    assert names == ["before gemm 1", "gemm 1 (64x64x16 x 2)", "before gemm 2", "gemm 2 (64x128x16 x 1)",
                     "after gemm 2"]
    samples = [p[1] * iterations for p in phases]
    instructions = [p[2] * iterations for p in phases]
    assert samples == [50, 6, 24, 6, 31]  # rows 1-2, 3-5, 6-7, 8, 9-10
    assert instructions == [20, 30, 20, 10, 20]


def test_no_loop_around_hgmma():
    page = source_page([row for row in LOOP if "HGMMA" not in row[0]])
    assert ncu_bwd_stalls.loop_phases(page) is None
    assert "No consumer loop" in ncu_bwd_stalls.markdown_phases(["x"], [None], [1.0])


def test_phase_table_in_cycles():
    page = source_page(LOOP)
    phases = ncu_bwd_stalls.loop_phases(page)
    figures = {"elapsed cycles": "1,000", "achieved active warps per SM": "2", "SMs": "3"}
    per_sample = ncu_bwd_stalls.warp_cycles_per_sample(figures, page)
    total = sum(row[1] for row in LOOP)
    assert per_sample == pytest.approx(1000 * 2 * 3 / total)
    table = ncu_bwd_stalls.markdown_phases(["a", "b"], [phases, phases], [per_sample, per_sample])
    assert f"| whole step | {117 / 10 * per_sample:.0f} | 10 | {117 / 10 * per_sample:.0f} | 10 |" in table
