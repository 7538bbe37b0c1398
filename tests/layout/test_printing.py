"""Printing equals C++ (checked against the oracle in test_oracle_corpus) and the parser reads it back."""

import random

import pytest

from flashcute.layout import (
    Int, Layout, ComposedLayout, Swizzle, parse_layout, parse_int_tuple, print_layout, to_str, gmma_smem_atom,
    sm80_swizzle_atom, composition,
)
from tests.layout import corpus


def test_parse_roundtrips_random_layouts():
    rng = random.Random("parse")
    for _i in range(500):
        L = corpus.rand_layout(rng, p_static=rng.random(), max_rank=4, max_depth=3, p_neg=0.1)
        text = to_str(L)
        back = parse_layout(text)
        assert back == L and to_str(back) == text


@pytest.mark.parametrize("text", [
    "Sw<3,3,3> o _0 o (_64,_64):(_64,_1)",
    "Sw<3,4,3> o smem_ptr[16b](unset) o (_8,_64):(_64,_1)",
    "(4,8):(_1@0,_1@1)",
    "_1:_0",
    "((_2),1):((-3),_0)",
    "():()",
])
def test_parse_cpp_forms(text):
    x = parse_layout(text)
    assert to_str(x) == text


def test_parse_gives_static_and_dynamic_integers():
    L = parse_layout("(_4,(2,_4)):(_2,(_1,8))")
    assert isinstance(L.shape[0], Int) and not isinstance(L.shape[1][0], Int)
    assert parse_int_tuple("(_4,(2,_8))") == (4, (2, 8))
    sw = parse_layout("Sw<2,3,3> o _0 o (_8,_32):(_32,_1)")
    assert isinstance(sw, ComposedLayout) and sw.layout_a == Swizzle(2, 3, 3)


def test_every_cpp_printed_layout_parses_back(corpus_runs):
    """The parser reads C++'s own output: every layout C++ printed for the corpus round-trips."""
    parsed = 0
    for family in ("docs", "print", "coalesce", "composition", "complement", "divide", "product", "atoms", "swizzle"):
        cases, _expected, outputs = corpus_runs[family]
        for c, text in zip(cases, outputs):
            if c.stmt is not None or not isinstance(text, str) or "\n" in text or ":" not in text:
                continue
            assert to_str(parse_layout(text)) == text
            parsed += 1
    assert parsed > 1000


def test_print_layout_matches_the_documented_table(capsys):
    print_layout(Layout((2, (2, 2)), (4, (2, 1))))
    lines = [ln.rstrip() for ln in capsys.readouterr().out.splitlines()]
    assert lines == ["(2,(2,2)):(4,(2,1))", "      0   1   2   3", "    +---+---+---+---+", " 0  | 0 | 2 | 1 | 3 |",
                     "    +---+---+---+---+", " 1  | 4 | 6 | 5 | 7 |", "    +---+---+---+---+"]


def test_print_of_atoms():
    assert to_str(gmma_smem_atom("K", "SW128", 16)) == "Sw<3,4,3> o smem_ptr[16b](unset) o (_8,_64):(_64,_1)"
    assert to_str(sm80_swizzle_atom(64, 16)) == "Sw<3,3,3> o _0 o (_8,_64):(_64,_1)"
    assert to_str(composition(Swizzle(0, 3, 3), Layout((Int(8), Int(8))))) == "(_8,_8):(_1,_8)"
    with pytest.raises(ValueError, match="rank-2"):
        print_layout(Layout((2, 2, 2)))
