"""Shared-memory bank model: the classic cases come out as hardware counts them, and the vectorised
model agrees with a plain per-phase count on random accesses."""

import random

import numpy as np
import pytest

from flashcute.layout import (
    Int, Layout, LayoutRight, Swizzle, access_report, composition, copy_atom, copy_report, make_tiled_copy,
    make_tiled_copy_A, make_tiled_mma, matrix_report, mma_atom, sm80_swizzle_atom, tile_to_shape,
    traversal_report,
)
from flashcute.layout.banks import bank_of, layout_addresses


def _reference_wavefronts(addrs, nbytes, phase_threads):
    """Plain count: per phase, the largest number of distinct 4-byte words any bank serves."""
    total = 0
    for p in range(0, len(addrs), phase_threads):
        banks = {}
        for a in addrs[p:p + phase_threads]:
            if a < 0:
                continue
            for w in range(a // 4, a // 4 + max(1, nbytes // 4)):
                banks.setdefault(w % 32, set()).add(w)
        total += max((len(ws) for ws in banks.values()), default=0)
    return total


@pytest.mark.parametrize("bits, phase", [(32, 32), (64, 16), (128, 8), (16, 32)])
def test_random_accesses_match_a_plain_count(bits, phase):
    rng = random.Random(bits)
    nbytes = bits // 8
    instr = [[rng.randrange(0, 4096 // nbytes) * nbytes if rng.random() > 0.1 else -1 for _t in range(32)]
             for _i in range(300)]
    report = access_report(np.array(instr), bits)
    expected = [_reference_wavefronts(a, nbytes, phase) for a in instr]
    assert report.wavefronts.tolist() == expected


def test_random_ldmatrix_matches_a_plain_count():
    rng = random.Random(7)
    instr = [[rng.randrange(0, 256) * 16 for _t in range(32)] for _i in range(200)]
    report = matrix_report(np.array(instr))
    assert report.wavefronts.tolist() == [_reference_wavefronts(a, 16, 8) for a in instr]
    assert (report.ideal == 4).all()


def test_stride_8_vs_9_vs_swizzle_column_reads():
    """A warp reading a column of a 32x8 float tile: 8-way conflict, none with padding or a swizzle."""
    shape = (Int(32), Int(8))
    cases = {
        8: Layout(shape, (Int(8), Int(1))),
        1: Layout(shape, (Int(9), Int(1))),
        -1: composition(Swizzle(3, 0, 5), Layout(shape, (Int(8), Int(1)))),
    }
    for degree, layout in cases.items():
        report = traversal_report(layout, 4, bits=32, order="col")
        assert report.instructions == 8
        assert (report.degree == abs(degree)).all()
        assert (report.wavefronts == abs(degree)).all()
        assert report.conflicts.sum() == 8 * (abs(degree) - 1)


def test_row_reads_are_conflict_free_at_every_width():
    layout = Layout((Int(32), Int(64)), LayoutRight)
    for elem_bytes, bits in ((4, 32), (2, 64), (2, 128), (4, 128)):
        assert traversal_report(layout, elem_bytes, bits=bits, order="row").conflicts.sum() == 0


def test_ldmatrix_row_major_padded_swizzled():
    """ldmatrix.x4 of SM80 A fragments from a 64x64 fp16 tile: 8-way / none / none."""
    mma = make_tiled_mma(mma_atom("SM80_16x8x16_F32BF16BF16F32_TN"), Layout((Int(4), Int(1), Int(1))),
                         (Int(64), Int(16), Int(16)))
    s2r = make_tiled_copy_A(copy_atom("SM75_U32x4_LDSM_N", "half_t"), mma)
    shape = (Int(64), Int(64))
    expected = {
        "row-major": (Layout(shape, LayoutRight), 8),
        "padded": (Layout(shape, (Int(72), Int(1))), 1),
        "swizzled": (tile_to_shape(sm80_swizzle_atom(64, 16, 8), shape), 1),
    }
    for name, (layout, degree) in expected.items():
        report = copy_report(s2r, layout)
        assert report.access == "ldmatrix.x4"
        assert report.instructions == 16, name          # 4 warps x 4 k-blocks of 16
        assert (report.degree == degree).all(), name
        assert report.total()[0] == 16 * 4 * degree, name


def test_cp_async_stores_and_broadcast():
    g2s = make_tiled_copy(copy_atom("SM80_CP_ASYNC_CACHEGLOBAL<uint128_t>", "half_t"),
                          Layout((Int(16), Int(8)), (Int(8), Int(1))), Layout((Int(1), Int(8))))
    for layout in (Layout((Int(64), Int(64)), LayoutRight), tile_to_shape(sm80_swizzle_atom(64, 16, 8), (Int(64), Int(64)))):
        report = copy_report(g2s, layout)
        assert report.access == "128-bit" and report.conflicts.sum() == 0 and report.instructions == 16
    same_word = access_report(np.full(32, 64), 32)
    assert same_word.total() == (1, 1, 0)
    same_bank = access_report(np.arange(32) * 128, 32)
    assert same_bank.total() == (32, 1, 31) and int(same_bank.degree[0]) == 32


def test_64_and_128_bit_phases():
    t = np.arange(32)
    assert access_report(t * 8, 64).total() == (2, 2, 0)          # two half-warp phases
    assert access_report(t * 16, 64).total() == (4, 2, 2)         # 16-byte stride: 2-way per half warp
    assert access_report(t * 16, 128).total() == (4, 4, 0)        # four quarter-warp phases
    assert access_report(t * 32, 128).total() == (8, 4, 4)


def test_helpers():
    assert bank_of([0, 4, 128, 132]).tolist() == [0, 1, 0, 1]
    sw = composition(Swizzle(3, 3, 3), Layout((Int(8), Int(64)), LayoutRight))
    # elements (0,0), (0,8), (1,0): row 1 has its 16-byte chunks XOR-ed with 1
    assert layout_addresses(sw, [0, 64, 1], 2).tolist() == [0, 16, 128 + 16]


@pytest.mark.parametrize("call", [
    lambda: access_report(np.arange(32) * 2, 32),             # misaligned
    lambda: access_report(np.arange(32) * 4, 24),             # no such width
    lambda: access_report(np.arange(33) * 4, 32),             # more than a warp
    lambda: access_report(np.array([1.5] * 32), 32),          # not integers
    lambda: access_report(np.full(32, -5), 32),               # negative
    lambda: matrix_report(np.arange(12) * 16),                # not 8/16/32 rows
    lambda: matrix_report(np.arange(32) * 8),                 # rows not 16-byte aligned
    lambda: traversal_report(Layout((Int(32), Int(8))), 4, 128, "row"),   # column-major: rows not contiguous
    lambda: traversal_report(Layout((Int(32), Int(8))), 4, 32, "diagonal"),
    lambda: layout_addresses(Layout(Int(8)), [8], 2),
])
def test_bad_input_raises_value_error(call):
    with pytest.raises(ValueError):
        call()


def test_copy_report_needs_a_side_for_plain_copies():
    copy = make_tiled_copy(copy_atom("UniversalCopy<uint128_t>", "half_t"), Layout((Int(16), Int(8)), (Int(8), Int(1))),
                           Layout((Int(1), Int(8))))
    smem = Layout((Int(64), Int(64)), LayoutRight)
    with pytest.raises(ValueError, match="side"):
        copy_report(copy, smem)
    assert copy_report(copy, smem, "S").conflicts.sum() == 0
    with pytest.raises(ValueError, match="contiguous"):
        copy_report(copy, Layout((Int(64), Int(64))), "S")       # column-major smem: no 16-byte vectors
