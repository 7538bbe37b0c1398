"""Swizzle<B,M,S>, composed layouts and smem atoms (C++ agreement is in the oracle corpus: swizzle, atoms)."""

import numpy as np
import pytest

from flashcute.layout import (
    Int, Layout, Swizzle, _, composition, make_swizzle, right_inverse, left_inverse, size, tile_to_shape,
    to_str, upcast, downcast, sm80_swizzle_atom, gmma_smem_atom, logical_divide, slice_and_offset,
    make_composed_layout, make_layout, coalesce, logical_product, recast,
)


def reference_swizzle(b, m, s, x):
    """Bit definition: XOR the B bits at m+max(0,s) into the B bits at m-min(0,s)."""
    mask = (1 << b) - 1
    y = (x >> (m + max(0, s))) & mask
    return x ^ (y << (m - min(0, s)))


@pytest.mark.parametrize("b,m,s", [(3, 3, 3), (2, 3, 3), (1, 4, 3), (3, 4, 3), (2, 0, -3), (0, 4, 3), (2, 1, 5)])
def test_swizzle_matches_its_bit_definition(b, m, s):
    sw = Swizzle(b, m, s)
    xs = np.arange(1 << 14, dtype=np.int64)
    want = np.array([reference_swizzle(b, m, s, int(x)) for x in xs])
    assert np.array_equal(sw(xs), want)
    assert all(int(sw(int(x))) == int(w) for x, w in zip(xs[:512], want[:512]))
    assert np.array_equal(sw(sw(xs)), xs)  # an involution


def test_swizzle_static_in_static_out():
    sw = Swizzle(3, 3, 3)
    assert isinstance(sw(Int(100)), Int) and not isinstance(sw(100), Int)


def test_make_swizzle_from_masks():
    assert make_swizzle(0b1000, 0b0100) == Swizzle(1, 2, 1)
    assert make_swizzle(0b11000000, 0b00000110) == Swizzle(2, 1, 5)


def test_sm80_atom_permutes_16_byte_chunks_within_each_row():
    atom = sm80_swizzle_atom(64, 16)  # (8,64) halves, Sw<3,3,3>
    grid = atom.offsets().reshape(64, 8).T  # grid[row, col]: offsets() is column-major
    assert sorted(grid.ravel().tolist()) == list(range(512))
    for r in range(8):
        chunks = grid[r].reshape(8, 8)
        assert all((np.diff(ch) == 1).all() and ch[0] % 8 == 0 for ch in chunks)  # 8 halves stay contiguous
        assert sorted(ch[0] for ch in chunks) == [64 * r + 8 * k for k in range(8)]  # chunks permuted in the row
    assert len({int(grid[r, 0]) // 8 % 8 for r in range(8)}) == 8  # column 0 hits 8 different bank groups


def test_composed_layout_operations_act_on_the_inner_layout():
    atom = sm80_swizzle_atom(64, 16)
    big = tile_to_shape(atom, (Int(128), Int(64)))
    assert to_str(big) == "Sw<3,3,3> o _0 o ((_8,_16),(_64,_1)):((_64,_512),(_1,_0))"
    assert size(big) == 128 * 64
    assert sorted(big.offsets().tolist()) == list(range(128 * 64))
    tiled = logical_divide(big, (Int(16), Int(64)))
    assert to_str(tiled).startswith("Sw<3,3,3> o _0 o ")
    assert to_str(upcast(gmma_smem_atom("K", "SW128", 8), 2)) == "Sw<3,4,3> o smem_ptr[16b](unset) o (_8,_64):(_64,_1)"
    assert to_str(downcast(atom, 2)) == "Sw<3,4,3> o _0 o (_8,_128):(_128,_1)"


def test_slicing_a_swizzled_layout_keeps_the_offsets():
    big = tile_to_shape(sm80_swizzle_atom(64, 16), (Int(64), Int(64)))
    for row in (0, 5, Int(9), 63):
        sub, off = slice_and_offset((row, _), big)
        assert [int(sub(j)) + int(off) for j in range(64)] == [int(big(int(row), j)) for j in range(64)]
    sub, off = slice_and_offset((_, 17), big)
    assert [int(sub(i)) + int(off) for i in range(64)] == [int(big(i, 17)) for i in range(64)]


def test_inverses_of_swizzled_layouts():
    atom = sm80_swizzle_atom(64, 16)
    inv = right_inverse(atom)
    assert all(int(atom(inv(i))) == i for i in range(int(size(inv))))
    linv = left_inverse(atom)
    assert all(int(linv(atom(i))) == i for i in range(int(size(atom))))


def test_make_layout_of_a_swizzle_and_composition_with_a_layout():
    assert to_str(make_layout(Swizzle(2, 3, 3))) == "Sw<2,3,3> o _0 o _256:_1"
    L = Layout((Int(8), Int(64)), (Int(64), Int(1)))
    C = composition(L, Swizzle(3, 3, 3))
    assert to_str(C) == "Sw<3,0,3> o _0 o (_8,_64):(_64,_1)"  # C++ prints the same
    assert to_str(make_composed_layout(Swizzle(0, 4, 3), Int(0), L)) == "Sw<0,4,3> o _0 o (_8,_64):(_64,_1)"


@pytest.mark.parametrize("major", ["K", "MN"])
@pytest.mark.parametrize("kind", ["INTER", "SW32", "SW64", "SW128"])
def test_gmma_atoms_cover_their_footprint(major, kind):
    atom = gmma_smem_atom(major, kind, 16)
    assert sorted(atom.offsets().tolist()) == list(range(int(size(atom))))


def test_upcast_to_a_degenerate_swizzle_stays_composed():
    # upcast<N> / downcast<N> give a static offset the type C<0u> (their N is a uint32_t), which is no Int<0>:
    # composition(Swizzle<0,M,S>, offset, layout) keeps the identity swizzle, C++'s print shows it.
    # C++ (g++ against CuTe 4.2):
    #   auto A = composition(Swizzle<1,0,1>{}, Layout<Shape<_4,_4>,Stride<_4,_1>>{});
    #   auto U = upcast<2>(A);
    #   print(U);                                         // Sw<0,0,1> o _0 o (_4,_2):(_2,_1)
    #   print(recast_layout<uint16_t,uint32_t>(A));       // Sw<0,0,1> o _0 o (_4,_2):(_2,_1)
    #   print(upcast<4>(A));                              // Sw<0,0,1> o _0 o (_4,_1):(_1,_1)
    #   print(downcast<2>(U));                            // Sw<0,1,1> o _0 o (_4,_4):(_4,_1)
    #   print(composition(U, Layout<_2,_1>{}));           // Sw<0,0,1> o _0 o _2:_2
    #   print(coalesce(U));                               // Sw<0,0,1> o _0 o (_4,_2):(_2,_1)
    #   print(U(_, 1)); print(U(1, _));                   // (_4):(_2) (_2):(_1)
    #   print(right_inverse(U)); print(left_inverse(U));  // (_2,_4):(_4,_1) (_2,_4):(_4,_1)
    #   print(composition(Layout<Shape<_8,_2>>{}, U));    // (_4,_2):(_2,_1)
    #   print(logical_product(Layout<_2>{}, U));          // (_2,(_4,_2)):(_1,(_4,_2))
    #   auto B = composition(Swizzle<2,0,2>{}, Layout<Shape<_4,_4>,Stride<_4,_1>>{});
    #   print(logical_product(Layout<_2>{}, upcast<2>(B)));  // Sw<1,2,-1> o _0 o (_2,(_4,_2)):(_1,(_4,_2))
    #   print(left_inverse(upcast<2>(B)));                // Sw<1,1,-1> o _0 o (_2,_4):(_4,_1)
    #   print(recast_layout<uint8_t,uint32_t>(B));        // Sw<0,0,2> o _0 o (_4,_1):(_1,_1)
    #   print(recast_layout<uint8_t,uint64_t>(composition(Swizzle<2,1,2>{}, Layout<Shape<_4,_8>,Stride<_8,_1>>{})));
    #                                                     // Sw<0,0,2> o _0 o (_4,_1):(_1,_1)
    #   print(downcast<2>(make_composed_layout(Swizzle<0,0,1>{}, _0{}, Layout<_4,_1>{})));   // Sw<0,1,1> o _0 o _8:_1
    #   print(composition(Swizzle<0,0,1>{}, _0{}, Layout<_4,_1>{}));   // _4:_1 (an Int<0> offset: the layout)
    S = Int
    A = composition(Swizzle(1, 0, 1), Layout((S(4), S(4)), (S(4), S(1))))
    U = upcast(A, 2)
    B = composition(Swizzle(2, 0, 2), Layout((S(4), S(4)), (S(4), S(1))))
    cases = [
        (U, "Sw<0,0,1> o _0 o (_4,_2):(_2,_1)"),
        (recast(A, 16, 32), "Sw<0,0,1> o _0 o (_4,_2):(_2,_1)"),
        (upcast(A, 4), "Sw<0,0,1> o _0 o (_4,_1):(_1,_1)"),
        (downcast(U, 2), "Sw<0,1,1> o _0 o (_4,_4):(_4,_1)"),
        (composition(U, Layout(S(2), S(1))), "Sw<0,0,1> o _0 o _2:_2"),
        (coalesce(U), "Sw<0,0,1> o _0 o (_4,_2):(_2,_1)"),
        (U(_, 1), "(_4):(_2)"),
        (U(1, _), "(_2):(_1)"),
        (right_inverse(U), "(_2,_4):(_4,_1)"),
        (left_inverse(U), "(_2,_4):(_4,_1)"),
        (composition(Layout((S(8), S(2))), U), "(_4,_2):(_2,_1)"),
        (logical_product(Layout(S(2)), U), "(_2,(_4,_2)):(_1,(_4,_2))"),
        (logical_product(Layout(S(2)), upcast(B, 2)), "Sw<1,2,-1> o _0 o (_2,(_4,_2)):(_1,(_4,_2))"),
        (left_inverse(upcast(B, 2)), "Sw<1,1,-1> o _0 o (_2,_4):(_4,_1)"),
        (recast(B, 8, 32), "Sw<0,0,2> o _0 o (_4,_1):(_1,_1)"),
        (recast(composition(Swizzle(2, 1, 2), Layout((S(4), S(8)), (S(8), S(1)))), 8, 64),
         "Sw<0,0,2> o _0 o (_4,_1):(_1,_1)"),
        (downcast(make_composed_layout(Swizzle(0, 0, 1), S(0), Layout(S(4), S(1))), 2), "Sw<0,1,1> o _0 o _8:_1"),
        (composition(Swizzle(0, 0, 1), S(0), Layout(S(4), S(1))), "_4:_1"),
    ]
    for got, text in cases:
        assert to_str(got) == text
    assert np.array_equal(U.offsets(), upcast(A.layout_b, 2).offsets())  # the offsets were always equal


def test_upcast_of_a_mixed_bits_offset_needs_divisible_static_bits():
    # C++: auto S = composition(Swizzle<2,0,2>{}, Layout<Shape<_2,_8>,Stride<_1,_2>>{});
    #      int i = 1; print(S(i, _));      // Sw<2,0,2> o M_0|(1&1)=1 o (_8):(_2)
    #      upcast<2>(S(i, _));             // static_assert: Static safe_div requires t % u == 0
    T = composition(Swizzle(2, 0, 2), Layout((Int(2), Int(8)), (Int(1), Int(2))))(1, _)
    assert to_str(T) == "Sw<2,0,2> o M_0|(1&1)=1 o (_8):(_2)"
    with pytest.raises(ValueError, match="not divisible"):
        upcast(T, 2)
