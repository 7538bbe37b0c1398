"""IntTuple: static/dynamic arithmetic as in C++, and the tuple and coordinate utilities."""

import pytest

from flashcute.layout import (
    Int, _, ceil_div, compact_col_major, compact_order, compact_row_major, compatible, congruent, crd2crd,
    crd2idx, elem_less, flatten, idx2crd, inner_product, is_static, prefix_product, product, shape_div,
    unflatten, weakly_congruent, zip2_by, to_str, E, ScaledBasis,
)
from flashcute.layout.int_tuple import div, mod, cmin, gcd


def static(x):
    return isinstance(x, Int)


@pytest.mark.parametrize("a,b", [(Int(4), Int(2)), (Int(4), 2), (4, Int(2)), (4, 2)])
def test_arithmetic_is_static_only_when_both_are(a, b):
    both = static(a) and static(b)
    for r in (a + b, a - b, a * b, div(a, b), a | b, a ^ b, cmin(a, b), gcd(a, b)):
        assert static(r) == both, (a, b, r)


def test_cpp_zero_and_one_special_cases_stay_static():
    assert static(Int(0) * 7) and static(7 * Int(0))
    assert static(div(Int(0), 7)) and static(mod(7, Int(1))) and static(mod(Int(0), 5))
    assert static(Int(0) & 7)
    assert not static(Int(1) * 7) and not static(7 + Int(0))


def test_truncating_division_matches_cpp():
    assert div(-7, 2) == -3 and mod(-7, 2) == -1
    assert div(7, -2) == -3 and mod(7, -2) == 1
    assert ceil_div(7, 2) == 4 and ceil_div(Int(8), Int(2)) == Int(4) and static(ceil_div(Int(7), Int(2)))


def test_printing_of_integers():
    assert to_str((Int(4), 4, (Int(1), -2))) == "(_4,4,(_1,-2))"
    assert to_str(E(1)) == "_1@1" and to_str(ScaledBasis(Int(1), (1, 0))) == "_1@0@1"
    assert to_str(()) == "()" and to_str((4,)) == "(4)"


def test_product_and_rank():
    assert product(()) == Int(1) and static(product(()))
    assert product((Int(2), (Int(3), Int(4)))) == Int(24) and static(product((Int(2), (Int(3), Int(4)))))
    assert not static(product((Int(2), 3)))


def test_profiles():
    assert congruent((1, (2, 3)), (4, (5, 6))) and not congruent((1, 2), (1, (2, 3)))
    assert weakly_congruent((1, 2), (1, (2, 3))) and not weakly_congruent((1, (2, 3)), (1, 2))
    assert compatible(24, (4, 6)) and compatible((4, 6), ((2, 2), 6)) and not compatible(24, 32)
    assert not compatible(((2, 3), 4), (4, 6))


def test_shape_div_checks_static_divisibility():
    assert shape_div((Int(4), Int(5), Int(6)), Int(40)) == (1, 1, 3)
    with pytest.raises(ValueError, match="divisibility"):
        shape_div(Int(6), Int(4))
    assert shape_div(6, 4) == 2  # dynamic: C++ does not check


def test_crd2idx_idx2crd_roundtrip_colexicographic():
    shape = (2, (3, 4), 5)
    for i in range(int(product(shape))):
        c = idx2crd(i, shape)
        assert crd2idx(c, shape) == i
    assert idx2crd(5, (2, 3)) == (1, 2)
    assert crd2idx((1, 2), (2, 3), (3, 1)) == 5


def test_crd2crd_and_flat_coordinates():
    assert crd2crd((1, 2), (2, 3), 6) == 5
    assert crd2crd(5, 6, (2, 3)) == (1, 2)


def test_compact_strides():
    assert compact_col_major((2, (3, 4))) == (1, (2, 6))
    assert compact_row_major((2, (3, 4))) == (12, (4, 1))
    assert to_str(compact_col_major((Int(2), Int(1), 3))) == "(_1,_0,_2)"
    assert to_str(compact_order((Int(2), Int(2), Int(2), Int(2)), (Int(0), Int(2), Int(3), Int(1)))) == "(_1,_4,_8,_2)"
    assert to_str(compact_order((2, 3, 4, 5), (Int(2), 67, 42, Int(50)))) == "(_1,10,30,2)"


def test_flatten_unflatten_and_prefix_product():
    t = (1, (2, (3, 4)), 5)
    assert flatten(t) == (1, 2, 3, 4, 5)
    assert unflatten(flatten(t), t) == t
    assert prefix_product((2, (3, 4))) == (1, (2, 6))
    with pytest.raises(ValueError):
        unflatten((1, 2), (1, 2, 3))


def test_zip2_by_and_inner_product():
    assert zip2_by(((1, 2), ((3, 4), (5, 6)), 7), (0, (0, 0))) == ((1, (3, 5)), (2, (4, 6), 7))
    assert inner_product((1, (2, 3)), (4, (5, 6))) == 32


def test_elem_less_is_elementwise_all():
    assert elem_less((1, 2), (2, 3)) and not elem_less((1, 3), (2, 3))
    assert elem_less((1,), (2, 0))  # shorter first tuple: only its modes are compared


def test_static_detection():
    assert is_static((Int(1), (Int(2),))) and not is_static((Int(1), 2)) and is_static(_)
