"""TiledMMA / TiledCopy: properties that must hold for any configuration, and clear errors.

(String-for-string agreement with C++ CuTe is in test_tiled_oracle.py.)
"""

import numpy as np
import pytest

from flashcute.layout import (
    Int, Layout, LayoutRight, copy_atom, make_identity_tensor, make_tensor, make_tiled_copy, make_tiled_copy_A,
    make_tiled_copy_B, make_tiled_copy_C, make_tiled_mma, mma_atom, partition_fragment_C, partition_shape_C, size,
    to_str,
)
from flashcute.layout.tiled import make_layout_tv, make_tiled_copy_C_atom, make_tiled_copy_D, make_tiled_copy_S

BF16 = "SM80_16x8x16_F32BF16BF16F32_TN"
CONFIGS = [
    (BF16, (1, 1, 1), None),
    (BF16, (4, 1, 1), (64, 16, 16)),                     # FlashAttention-2
    (BF16, (2, 2, 1), (32, 32, 32)),
    ("SM80_16x8x8_F32F16F16F32_TN", (2, 1, 2), None),     # K split over warps
    ("SM90_64x64x16_F32BF16BF16_SS", (2, 1, 1), None),
    ("SM90_64x32x16_F32F16F16_RS", (1, 2, 1), None),
]


def _mma(name, thr, perm):
    return make_tiled_mma(mma_atom(name), Layout(tuple(Int(t) for t in thr)),
                          None if perm is None else tuple(Int(p) for p in perm))


@pytest.mark.parametrize("name, thr, perm", CONFIGS)
def test_layout_tv_cover_the_tile(name, thr, perm):
    mma = _mma(name, thr, perm)
    m, n, k = (int(s) for s in mma.tile_shape)
    counts = np.bincount(mma.get_layoutC_TV().offsets(), minlength=m * n)
    # each accumulator belongs to one thread per K-slice of warps (partial sums when K is split)
    assert (counts == int(size(mma.thr_layout_vmnk, 3))).all()
    for tv, extent in ((mma.get_layoutA_TV(), m * k), (mma.get_layoutB_TV(), n * k)):
        assert set(tv.offsets().tolist()) == set(range(extent))


@pytest.mark.parametrize("name, thr, perm", CONFIGS)
def test_partition_C_splits_a_tensor_among_threads(name, thr, perm):
    mma = _mma(name, thr, perm)
    m, n = 2 * int(mma.tile_size(0)), 3 * int(mma.tile_size(1))
    data = np.arange(m * n) * 10
    gC = make_tensor(data, Layout((m, n), LayoutRight))
    seen = np.concatenate([mma.get_slice(t).partition_C(gC).values() for t in range(int(mma.size))])
    k_split = int(size(mma.thr_layout_vmnk, 3))
    assert np.array_equal(np.sort(seen), np.repeat(data, k_split))
    # the fragment has the shape of the partition, compact
    frag = mma.get_slice(0).partition_fragment_C(gC)
    assert frag.layout.shape == mma.get_slice(0).partition_C(gC).layout.shape
    assert partition_shape_C(mma, (m, n)) == frag.layout.shape
    assert partition_fragment_C(mma, (m, n)).layout == frag.layout


def test_partition_A_matches_the_tv_layout_on_one_tile():
    mma = _mma(BF16, (4, 1, 1), (64, 16, 16))
    tv = mma.get_layoutA_TV()
    gA = make_tensor(np.arange(64 * 16), Layout((Int(64), Int(16))))     # column-major: value = tile index
    for t in (0, 5, 37, 127):
        assert sorted(mma.get_slice(t).partition_A(gA).values().tolist()) == sorted(tv(t, v) for v in range(int(size(tv, 1))))


def test_tiled_copy_from_thr_and_val_layouts():
    # FlashAttention-2's gmem copy: 16x8 threads row-major, 8 contiguous values each
    thr, val = Layout((Int(16), Int(8)), (Int(8), Int(1))), Layout((Int(1), Int(8)))
    tiler, tv = make_layout_tv(thr, val)
    assert tiler == (Int(16), Int(64))
    copy = make_tiled_copy(copy_atom("SM80_CP_ASYNC_CACHEGLOBAL<uint128_t>", "half_t"), thr, val)
    for t in (0, 9, 127):
        coords = [(tv(t, v) % 16, tv(t, v) // 16) for v in range(8)]
        assert coords == [(t // 8, (t % 8) * 8 + v) for v in range(8)]
    gmem = make_tensor(np.arange(32 * 128), Layout((32, 128), LayoutRight))
    part = copy.get_slice(9).partition_S(gmem)
    assert part.layout.shape[0] == (Int(8), Int(1)) and part.values()[0] == 1 * 128 + 8


def test_ldmatrix_copies_of_an_mma_agree_with_its_operands():
    mma = _mma(BF16, (4, 1, 1), (64, 16, 16))
    for maker, tv in ((make_tiled_copy_A, mma.get_layoutA_TV()), (make_tiled_copy_B, mma.get_layoutB_TV())):
        copy = maker(copy_atom("SM75_U32x4_LDSM_N", "bfloat16_t"), mma)
        assert copy.layout_tv == tv
        # the destination (registers) side covers the same elements as the MMA operand
        assert sorted(copy.get_layoutD_TV().offsets().tolist()) == sorted(tv.offsets().tolist())
    frag = mma.get_slice(3).partition_fragment_A(make_tensor(None, Layout((Int(64), Int(32)), LayoutRight)))
    retiled = make_tiled_copy_A(copy_atom("SM75_U32x4_LDSM_N", "bfloat16_t"), mma).get_slice(3).retile_D(frag)
    assert int(size(retiled.layout)) == int(size(frag.layout))


def test_copy_S_D_and_C_atom_builders():
    mma = _mma(BF16, (4, 1, 1), (64, 16, 16))
    s2r = make_tiled_copy_A(copy_atom("SM75_U32x4_LDSM_N", "half_t"), mma)
    same = make_tiled_copy_S(copy_atom("SM75_U32x4_LDSM_N", "half_t"), s2r)
    assert same.layout_tv == s2r.get_layoutS_TV() and same.tiler_mn == s2r.tiler_mn
    assert make_tiled_copy_D(copy_atom("UniversalCopy<uint32_t>", "half_t"), s2r).layout_tv == s2r.get_layoutD_TV()
    epi = make_tiled_copy_C_atom(copy_atom("SM90_U32x4_STSM_N", "half_t"), mma)
    assert int(size(epi.layout_tv, 1)) == 8


def test_errors_are_clear():
    mma = _mma(BF16, (1, 1, 1), None)
    with pytest.raises(ValueError, match="too few values"):
        make_tiled_copy_B(copy_atom("SM75_U32x4_LDSM_N", "half_t"), mma)   # B holds 4 values, x4 needs 8
    with pytest.raises(ValueError, match="too few threads"):
        make_tiled_copy(copy_atom("SM75_U32x4_LDSM_N", "half_t"), Layout(Int(16)), Layout(Int(8)))
    with pytest.raises(ValueError, match="out of range"):
        mma.get_slice(32)
    with pytest.raises(ValueError, match="rank >= 2"):
        mma.get_slice(0).partition_C(make_tensor(None, Layout(64)))
    with pytest.raises(ValueError, match="rank"):
        make_tiled_mma(mma_atom(BF16), Layout((Int(1),) * 4))
    with pytest.raises(ValueError, match="static"):
        make_tiled_mma(mma_atom(BF16), None, (Layout(16),))
    with pytest.raises(ValueError, match="at most three"):
        make_tiled_mma(mma_atom(BF16), None, (16, 8, 16, 1))
    with pytest.raises(TypeError):
        make_tiled_mma(mma_atom(BF16), (4, 1, 1))
    with pytest.raises(TypeError):
        make_tiled_copy_C(copy_atom("UniversalCopy<uint32_t>", "half_t"), "not an mma")
    gmma = _mma("SM90_64x64x16_F32BF16BF16_SS", (1, 1, 1), None)
    with pytest.raises(ValueError, match="descriptor"):
        gmma.get_slice(0).partition_fragment_A(make_tensor(None, Layout((Int(64), Int(16)))))


def test_print_like_cpp():
    text = str(_mma(BF16, (4, 1, 1), (64, 16, 16)))
    assert text.startswith("TiledMMA\n  ThrLayoutVMNK:  (_32,_4,_1,_1):(_1,_32,_0,_0)\n  PermutationMNK: (_64,_16,_16)\n")
    copy = make_tiled_copy_A(copy_atom("SM75_U32x4_LDSM_N", "half_t"), _mma(BF16, (4, 1, 1), (64, 16, 16)))
    assert str(copy).startswith("TiledCopy\n  Tiler_MN:       (_64,_16)\n")


def test_partitions_of_identity_tensors_with_extent_1_modes():
    # A thread's coordinates for predication; extent-1 thread or rest modes slice to _0@k offsets.
    # C++ (g++ against CuTe 4.2):
    #   auto T2 = make_identity_tensor(make_shape(_128{}, _64{}));
    #   auto cp = make_tiled_copy(Copy_Atom<UniversalCopy<uint32_t>, float>{}, Layout<Shape<_32,_1>>{},
    #                             Layout<Shape<_1,_1>>{});
    #   print(cp.get_slice(3).partition_S(T2));      // ArithTuple(3,_0) o ((_1,_1),_4,_64):((_0,_0),_32@0,_1@1)
    #   auto mma = make_tiled_mma(SM90_64x8x16_F32BF16BF16_SS<GMMA::Major::K, GMMA::Major::K>{},
    #                             Layout<Shape<_2,_1,_1>>{});
    #   print(mma.get_slice(5).partition_A(T2));     // ArithTuple(0,_0) o ((_64,_16),_1,_4):((_1@0,_1@1),_0,_16@1)
    #   print(mma.get_slice(200).partition_A(T2));   // ArithTuple(64,_0) o ((_64,_16),_1,_4):((_1@0,_1@1),_0,_16@1)
    #   print(mma.get_slice(5).partition_C(T2));     // ArithTuple(1,2) o ((_2,_2,_1),_1,_8):((_1@1,_8@0,_8@1),_0,_8@1)
    #   auto mma80 = make_tiled_mma(SM80_16x8x16_F32BF16BF16F32_TN{}, Layout<Shape<_4,_1,_1>>{});
    #   print(mma80.get_slice(37).partition_C(make_identity_tensor(make_shape(_64{}, _8{}))));
    #                                                // ArithTuple(17,2) o ((_2,_2),_1,_1):((_1@1,_8@0),_0,_0)
    T2 = make_identity_tensor((Int(128), Int(64)))
    cp = make_tiled_copy(copy_atom("UniversalCopy<uint32_t>", "float"), Layout((Int(32), Int(1))),
                         Layout((Int(1), Int(1))))
    assert to_str(cp.get_slice(3).partition_S(T2)) == "ArithTuple(3,_0) o ((_1,_1),_4,_64):((_0,_0),_32@0,_1@1)"
    mma = _mma("SM90_64x8x16_F32BF16BF16_SS", (2, 1, 1), None)
    assert to_str(mma.get_slice(5).partition_A(T2)) == "ArithTuple(0,_0) o ((_64,_16),_1,_4):((_1@0,_1@1),_0,_16@1)"
    assert to_str(mma.get_slice(200).partition_A(T2)) == \
        "ArithTuple(64,_0) o ((_64,_16),_1,_4):((_1@0,_1@1),_0,_16@1)"
    assert to_str(mma.get_slice(5).partition_C(T2)) == \
        "ArithTuple(1,2) o ((_2,_2,_1),_1,_8):((_1@1,_8@0,_8@1),_0,_8@1)"
    mma80 = _mma(BF16, (4, 1, 1), None)
    assert to_str(mma80.get_slice(37).partition_C(make_identity_tensor((Int(64), Int(8))))) == \
        "ArithTuple(17,2) o ((_2,_2),_1,_1):((_1@1,_8@0),_0,_0)"
