"""Tensor, local_tile, local_partition and identity-tensor predicates (C++ agreement: oracle family "tensor")."""

import importlib.util

import numpy as np
import pytest

from flashcute.layout import (
    Int, Layout, LayoutRight, _, elem_less, elem_less_mask, local_partition, local_tile, make_identity_tensor,
    make_tensor, size, to_str, zipped_divide, sm80_swizzle_atom, tile_to_shape, inner_partition, outer_partition,
)


def row_major(m, n):
    data = np.arange(m * n, dtype=np.int64)
    return data, make_tensor(data, Layout((m, n), (n, Int(1))))


def test_elements_and_slices_read_the_engine():
    data, t = row_major(6, 5)
    assert t(2, 3) == 13 and t[(4, 1)] == 21
    row = t(3, _)
    assert row.values().tolist() == list(range(15, 20))
    col = t[_, 4]
    assert col.values().tolist() == [4, 9, 14, 19, 24, 29]
    assert np.array_equal(t.values(), data.reshape(6, 5).T.ravel())  # colexicographic order


def test_local_tile_of_q_with_a_ragged_last_tile():
    seqlen, d, bm = 2000, 64, 128
    data, mQ = row_major(seqlen, d)
    gQ = local_tile(mQ, (Int(bm), Int(d)), (15, 0))
    assert to_str(gQ.layout) == "(_128,_64):(64,_1)" and gQ.offset == 15 * bm * d
    cQ = local_tile(make_identity_tensor((seqlen, d)), (Int(bm), Int(d)), (15, 0))
    mask = elem_less_mask(cQ, (seqlen, d))
    assert mask.sum() == (seqlen - 15 * bm) * d  # 80 valid rows in the last tile
    assert elem_less(cQ(79, 63), (seqlen, d)) and not elem_less(cQ(80, 0), (seqlen, d))
    valid = gQ.offsets()[mask]
    assert valid.max() == seqlen * d - 1


def test_local_tile_with_underscore_keeps_the_tile_count_mode():
    _data, mK = row_major(1000, 64)
    gK = local_tile(mK, (Int(128), Int(64)), (_, 0))
    assert to_str(gK.layout) == "(_128,_64,8):(64,_1,8192)"
    for n in range(8):
        assert gK(0, 0, n) == n * 128 * 64


def test_local_tile_with_projection_like_cpp_mainloops():
    mA = make_tensor(None, Layout((256, 96), (Int(1), 256)))  # (M,K) column-major
    gA = local_tile(mA, (Int(64), Int(32), Int(16)), (2, _, _), (Int(1), _, Int(1)))
    assert to_str(gA.layout) == "(_64,_16,6):(_1,256,4096)" and gA.offset == 128


def test_local_partition_distributes_elements_over_threads():
    data, t = row_major(16, 64)
    thr = Layout((Int(2), Int(16)), LayoutRight)
    seen = np.zeros(16 * 64, dtype=int)
    for tid in range(int(size(thr))):
        part = local_partition(t, thr, tid)
        assert to_str(part.shape) == "(8,4)"  # dynamic 16x64 over static 2x16 threads
        seen[part.values()] += 1
    assert (seen == 1).all()


def test_inner_and_outer_partition_are_complementary():
    _data, t = row_major(32, 32)
    tile = (Int(8), Int(4))
    a = inner_partition(t, tile, (1, 2))
    b = outer_partition(t, tile, (3, 1))
    assert a.shape == (8, 4) and b.shape == (4, 8)
    assert a(3, 1) in b.values().tolist()


def test_flash_attention_tiling_loop():
    """The Q block is fixed, K/V blocks are walked: each (m, n) pair sees distinct, in-range rows."""
    sq, sk, d, bm, bn = 300, 500, 64, 128, 64
    _q, mQ = row_major(sq, d)
    _k, mK = row_major(sk, d)
    cK = make_identity_tensor((sk, d))
    gK = local_tile(mK, (Int(bn), Int(d)), (_, 0))
    cgK = local_tile(cK, (Int(bn), Int(d)), (_, 0))
    n_blocks = int(size(gK, 2))
    assert n_blocks == -(-sk // bn)
    rows = set()
    for n in range(n_blocks):
        block = gK(_, _, n)
        keep = elem_less_mask(cgK(_, _, n), (sk, d))
        rows.update((block.offsets()[keep] // d).tolist())
    assert rows == set(range(sk))
    gQ = local_tile(mQ, (Int(bm), Int(d)), (2, 0))
    assert gQ.offset == 2 * bm * d


def test_swizzled_smem_tensor():
    smem = np.arange(128 * 64)
    sQ = make_tensor(smem, tile_to_shape(sm80_swizzle_atom(64, 16), (Int(128), Int(64))))
    assert sorted(sQ.values().tolist()) == list(range(128 * 64))
    row = sQ(5, _)
    assert row.values().tolist() == [int(sQ(5, j)) for j in range(64)]


def test_zipped_divide_on_a_tensor_returns_a_tensor():
    _data, t = row_major(16, 16)
    z = zipped_divide(t, (Int(4), Int(8)))
    assert to_str(z.shape) == "((_4,_8),(4,2))" and z(0, 0) == 0


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed (numpy engines are tested above)")
def test_torch_engine():
    import torch

    base = torch.arange(64 * 8)
    t = make_tensor(base, Layout((64, 8), (8, 1)))
    tile = local_tile(t, (Int(16), Int(8)), (2, 0))
    assert int(tile(0, 0)) == 2 * 16 * 8
    assert tile.values().tolist() == base.reshape(64, 8)[32:48].T.reshape(-1).tolist()


def test_coordinate_tensors_with_extent_1_tile_or_thread_modes():
    # The ragged-tile predication pattern: a sliced extent-1 mode contributes _0@k to the ArithTuple offset.
    # C++ (g++ against CuTe 4.2):
    #   auto T = make_identity_tensor(make_shape(_64{}, _64{}));
    #   print(local_tile(T, make_shape(_16{}, _1{}), make_coord(1, 3)));   // ArithTuple(16,3) o (_16,_1):(_1@0,_0)
    #   print(local_tile(T, make_shape(_1{}, _16{}), make_coord(1, 3)));   // ArithTuple(1,48) o (_1,_16):(_0,_1@1)
    #   print(local_tile(T, make_shape(_1{}, _1{}), make_coord(1, 3)));    // ArithTuple(1,3) o (_1,_1):(_0,_0)
    #   print(local_partition(T, Layout<Shape<_8,_1>>{}, 3));              // ArithTuple(3,_0) o (_8,_64):(_8@0,_1@1)
    #   print(local_partition(T, Layout<Shape<_1,_8>>{}, 3));              // ArithTuple(_0,3) o (_64,_8):(_1@0,_8@1)
    #   auto D = make_identity_tensor(make_shape(100, 64));
    #   print(local_tile(D, make_shape(_16{}, _1{}), make_coord(6, 3)));   // ArithTuple(96,3) o (_16,_1):(_1@0,_0)
    #   print(local_partition(D, Layout<Shape<_8,_1>>{}, 3));              // ArithTuple(3,_0) o (13,64):(_8@0,_1@1)
    T = make_identity_tensor((Int(64), Int(64)))
    D = make_identity_tensor((100, 64))
    cases = [
        (local_tile(T, (Int(16), Int(1)), (1, 3)), "ArithTuple(16,3) o (_16,_1):(_1@0,_0)"),
        (local_tile(T, (Int(1), Int(16)), (1, 3)), "ArithTuple(1,48) o (_1,_16):(_0,_1@1)"),
        (local_tile(T, (Int(1), Int(1)), (1, 3)), "ArithTuple(1,3) o (_1,_1):(_0,_0)"),
        (local_partition(T, Layout((Int(8), Int(1))), 3), "ArithTuple(3,_0) o (_8,_64):(_8@0,_1@1)"),
        (local_partition(T, Layout((Int(1), Int(8))), 3), "ArithTuple(_0,3) o (_64,_8):(_1@0,_8@1)"),
        (local_tile(D, (Int(16), Int(1)), (6, 3)), "ArithTuple(96,3) o (_16,_1):(_1@0,_0)"),
        (local_partition(D, Layout((Int(8), Int(1))), 3), "ArithTuple(3,_0) o (13,64):(_8@0,_1@1)"),
    ]
    for tensor, text in cases:
        assert to_str(tensor) == text
    column = cases[0][0]
    assert to_str(column(5, 0)) == "(21,3)"
    assert column.values().tolist() == [[16 + i, 3] for i in range(16)]
    assert elem_less_mask(cases[5][0], (100, 64)).sum() == 4  # rows 96..99 of a ragged 100-row tensor


def test_coordinates_outside_the_shape_extend_as_in_cpp():
    # C++:
    #   auto I = make_identity_tensor(make_shape(_4{}, _4{}));
    #   print(I(5, 5)); print(I(17));                                           // (5,5) (1,4)
    #   auto C = make_identity_tensor(make_shape(100, 64));
    #   print(local_tile(C, make_shape(_32{}, _64{}), make_coord(4, 0)));      // ArithTuple(128,0) o (_32,_64):(_1@0,_1@1)
    #   print(local_tile(C, make_shape(_32{}, _64{}), make_coord(4, 0))(0, 0));   // (128,0)
    I = make_identity_tensor((Int(4), Int(4)))
    assert to_str(I(5, 5)) == "(5,5)" and to_str(I(17)) == "(1,4)"
    with pytest.raises(ValueError, match="out of range"):
        I(5, 5, strict=True)
    tile = local_tile(make_identity_tensor((100, 64)), (Int(32), Int(64)), (4, 0))   # only 4 row tiles exist
    assert to_str(tile) == "ArithTuple(128,0) o (_32,_64):(_1@0,_1@1)" and to_str(tile(0, 0)) == "(128,0)"
    assert not elem_less_mask(tile, (100, 64)).any()
