"""Bad input: clear ValueError/TypeError naming the problem, and C++ rejects what the mirror rejects."""

import pytest

from flashcute.layout import (
    Int, Layout, Swizzle, _, blocked_product, complement, composition, downcast, left_inverse, logical_divide,
    parse_layout, shape_div, tile_to_shape, upcast, make_identity_tensor, local_tile, make_tensor,
)

S = Int

# (label, mirror thunk, message fragment, C++ statement that must fail to compile)
REJECTED_BY_BOTH = [
    ("composition stride divisibility",
     lambda: composition(Layout((S(3), S(4)), (S(1), S(5))), Layout(S(2), S(4))), "stride divisibility",
     "composition(Layout<Shape<_3,_4>,Stride<_1,_5>>{}, Layout<_2,_4>{});"),
    ("composition shape divisibility",
     lambda: composition(Layout((S(6), S(4)), (S(1), S(10))), Layout(S(8), S(1))), "shape divisibility",
     "composition(Layout<Shape<_6,_4>,Stride<_1,_10>>{}, Layout<_8,_1>{});"),
    ("complement of a non-injective layout",
     lambda: complement(Layout((S(2), S(2)), (S(1), S(1)))), "non-injective",
     "complement(Layout<Shape<_2,_2>,Stride<_1,_1>>{});"),
    ("complement with dynamic strides of rank 2",
     lambda: complement(Layout((2, 2), (1, 4))), "rank-1",
     "complement(make_layout(make_shape(2,2), make_stride(1,4)));"),
    ("left_inverse divisibility",
     lambda: left_inverse(Layout((S(2), S(3)), (S(3), S(2)))), "divisibility",
     "left_inverse(Layout<Shape<_2,_3>,Stride<_3,_2>>{});"),
    ("left_inverse divisibility with a negative stride",
     lambda: left_inverse(Layout((S(4), S(2)), (S(1), S(-4)))), "divisibility",
     "left_inverse(Layout<Shape<_4,_2>,Stride<_1,_m4>>{});"),
    ("left_inverse of dynamic strides",
     lambda: left_inverse(Layout(4, 2)), "static strides",
     "left_inverse(make_layout(4, 2));"),
    ("upcast divisibility", lambda: upcast(Layout(S(8), S(3)), 4), "divisibility",
     "upcast<4>(Layout<_8,_3>{});"),
    ("downcast without a unit stride", lambda: downcast(Layout(S(8), S(2)), 2), "adjacent",
     "downcast<2>(Layout<_8,_2>{});"),
    ("tile_to_shape non-dividing target",
     lambda: tile_to_shape(Layout((S(8), S(8))), (S(12), S(8))), "does not divide",
     "tile_to_shape(Layout<Shape<_8,_8>>{}, Shape<_12,_8>{});"),
    ("tile_to_shape rank", lambda: tile_to_shape(Layout((S(2), S(2), S(2))), (S(4), S(4))), "rank",
     "tile_to_shape(Layout<Shape<_2,_2,_2>>{}, Shape<_4,_4>{});"),
    ("shape_div divisibility", lambda: shape_div(S(6), S(4)), "divisibility", "shape_div(Int<6>{}, Int<4>{});"),
    ("swizzle shift smaller than bits", lambda: Swizzle(3, 3, 2), "SShift", "print(Swizzle<3,3,2>{});"),
    ("merging swizzles of different shifts",
     lambda: composition(Swizzle(2, 3, 3), Swizzle(1, 3, 4)), "same shift",
     "composition(Swizzle<2,3,3>{}, Swizzle<1,3,4>{});"),
    ("tiler with more modes than the layout",
     lambda: logical_divide(Layout(S(8)), (S(2), S(2))), "more modes",
     "logical_divide(Layout<_8>{}, make_tile(Int<2>{}, Int<2>{}));"),
    ("blocked_product of a rank-1 tuple block with an integral tiler",
     lambda: blocked_product(Layout((S(2),), (S(1),)), Layout(S(6), S(1))), "zip",
     "blocked_product(make_layout(make_shape(Int<2>{}), make_stride(Int<1>{})), Layout<_6,_1>{});"),
]


# what C++'s compiler says for each (its static_assert message)
CPP_REASON = {
    'composition stride divisibility': 'Stride Divisibility Condition',
    'composition shape divisibility': 'Shape Divisibility Condition',
    'complement of a non-injective layout': 'Non-injective Layout',
    'complement with dynamic strides of rank 2': 'Dynamic-stride complement only for rank-1',
    'left_inverse divisibility': 'Left inverse divisibility condition',
    'left_inverse divisibility with a negative stride': 'Left inverse divisibility condition',
    'left_inverse of dynamic strides': 'Left inverse requires static strides',
    'upcast divisibility': 'Divisibility condition',
    'downcast without a unit stride': 'Downcast requires adjacent elements',
    'tile_to_shape non-dividing target': 'block shape does not divide',
    'tile_to_shape rank': 'Rank of layout must be <= rank of target shape',
    'shape_div divisibility': 'Divisibility Condition',
    'swizzle shift smaller than bits': 'abs(SShift) must be more than BBits',
    'merging swizzles of different shifts': 'Can only merge swizzles of the same shift',
    'tiler with more modes than the layout': 'Too many modes in tiler',
    'blocked_product of a rank-1 tuple block with an integral tiler': 'tuple_size',
}


@pytest.mark.parametrize("label,thunk,fragment,cpp_body", REJECTED_BY_BOTH, ids=[r[0] for r in REJECTED_BY_BOTH])
def test_mirror_and_cpp_both_reject(label, thunk, fragment, cpp_body, oracle):
    with pytest.raises((ValueError, TypeError), match=fragment):
        thunk()
    ok, diag = oracle.compiles(cpp_body)
    assert not ok, f"C++ accepts {cpp_body} but the mirror rejects it"
    assert CPP_REASON[label] in diag, f"C++ rejects {cpp_body} for another reason:\n{diag[-2000:]}"


def test_the_rejection_check_is_not_vacuous(oracle):
    ok, diag = oracle.compiles("print(composition(Layout<Shape<_3,_4>,Stride<_1,_5>>{}, Layout<_2,_3>{}));")
    assert ok, diag


def test_dynamic_non_divisible_composition_is_rejected_too():
    # C++ only checks static operands (its dynamic assert is commented out) and returns a wrong layout
    with pytest.raises(ValueError, match="shape divisibility"):
        composition(Layout((6, 4), (1, 10)), Layout(8, 1))


@pytest.mark.parametrize("shape,stride,fragment", [
    ((2, 3), (1,), "not congruent"),
    ((2, (3, 4)), (1, 2, 6), "not congruent"),
])
def test_bad_layouts(shape, stride, fragment):
    with pytest.raises(ValueError, match=fragment):
        Layout(shape, stride)


@pytest.mark.parametrize("bad", ["(4,2)", 2.5, None, (1, "a"), True])
def test_bad_types(bad):
    with pytest.raises(TypeError):
        Layout(bad)


def test_negative_extents_are_accepted_as_in_cpp():
    # C++: print(make_layout(make_shape(2,-3)));   // (2,-3):(_1,2)
    assert str(Layout((2, -3))) == "(2,-3):(_1,2)"


def test_coordinates_are_range_checked_only_when_strict():
    L = Layout((4, (2, 4)), (2, (1, 8)))
    for coord in [(32,), (4, 0), (0, (2, 0)), (-1,)]:
        L(*coord)  # C++ has no range check: the last mode extends (test_layout_algebra checks the values)
        with pytest.raises(ValueError, match="out of range"):
            L(*coord, strict=True)
    with pytest.raises(ValueError, match="rank"):
        L(1, 2, 3)
    with pytest.raises(ValueError, match="out of range"):
        L(_, (2, _), strict=True)  # slicing checks its fixed coordinates too


def test_deep_nesting_is_a_value_error_not_a_recursion_error():
    t = 1
    for _i in range(5000):
        t = (t,)
    with pytest.raises(ValueError, match="deeper"):
        Layout(t)


@pytest.mark.parametrize("text", ["(4,2", "(4,2):(1", "4:1:2", "Sw<3,3> o _0 o 4:1", "(a,b):(1,2)", ""])
def test_parser_errors(text):
    with pytest.raises(ValueError, match="parse_layout"):
        parse_layout(text)


def test_tensor_errors():
    import numpy as np

    t = make_tensor(np.arange(10), Layout(10))
    with pytest.raises(IndexError, match="outside its engine"):
        t(10)   # an unchecked coordinate still cannot read outside the memory
    with pytest.raises(ValueError, match="out of range"):
        t(10, strict=True)
    c = make_identity_tensor((100, 64))
    with pytest.raises(ValueError, match="more modes"):
        local_tile(c, (S(16), S(16), S(16)), (0, 0, 0))
    with pytest.raises(IndexError, match="outside its engine"):
        make_tensor(np.arange(10), Layout(20)).values()
    assert local_tile(c, (S(32), S(64)), (_, 0)).shape == (S(32), S(64), 4)
