"""Worked examples from CuTe's documentation (media/docs/cpp/cute/01_layout.md, 02_layout_algebra.md),
with the result text the documentation states.  ``test_doc_examples.py`` checks the mirror against
the stated text and the oracle corpus ("docs" family) checks both against C++.
"""

from flashcute.layout import (
    Int, Layout, LayoutLeft, LayoutRight, blocked_product, coalesce, complement, composition,
    logical_divide, logical_product, raked_product, zipped_divide, layout_table, get,
)

S = Int


def L(shape, stride=None):
    return Layout(shape, stride)


# (label, thunk, documented text, C++ expression)
EXAMPLES = [
    ("s8", lambda: make_s8(), "_8:_1", "make_layout(Int<8>{})"),
    ("d8", lambda: L(8), "8:_1", "make_layout(8)"),
    ("s2xs4", lambda: L((S(2), S(4))), "(_2,_4):(_1,_2)", "make_layout(make_shape(Int<2>{},Int<4>{}))"),
    ("s2xd4", lambda: L((S(2), 4)), "(_2,4):(_1,_2)", "make_layout(make_shape(Int<2>{},4))"),
    ("s2xd4_a", lambda: L((S(2), 4), (S(12), S(1))), "(_2,4):(_12,_1)",
     "make_layout(make_shape(Int<2>{},4), make_stride(Int<12>{},Int<1>{}))"),
    ("s2xd4_col", lambda: L((S(2), 4), LayoutLeft), "(_2,4):(_1,_2)", "make_layout(make_shape(Int<2>{},4), LayoutLeft{})"),
    ("s2xd4_row", lambda: L((S(2), 4), LayoutRight), "(_2,4):(4,_1)", "make_layout(make_shape(Int<2>{},4), LayoutRight{})"),
    ("s2xh4", lambda: L((2, (2, 2)), (4, (2, 1))), "(2,(2,2)):(4,(2,1))",
     "make_layout(make_shape(2,make_shape(2,2)), make_stride(4,make_stride(2,1)))"),
    ("s2xh4_col", lambda: L((2, (2, 2)), LayoutLeft), "(2,(2,2)):(_1,(2,4))",
     "make_layout(make_shape(2,make_shape(2,2)), LayoutLeft{})"),
    ("coalesce", lambda: coalesce(L((S(2), (S(1), S(6))), (S(1), (S(6), S(2))))), "_12:_1",
     "coalesce(Layout<Shape<_2,Shape<_1,_6>>, Stride<_1,Stride<_6,_2>>>{})"),
    ("coalesce by-mode", lambda: coalesce(L((S(2), (S(1), S(6))), (S(1), (S(6), S(2)))), (S(1), S(1))),
     "(_2,_6):(_1,_2)", "coalesce(Layout<Shape<_2,Shape<_1,_6>>, Stride<_1,Stride<_6,_2>>>{}, Step<_1,_1>{})"),
    ("composition", lambda: composition(L((S(6), S(2)), (S(8), S(2))), L((S(4), S(3)), (S(3), S(1)))),
     "((_2,_2),_3):((_24,_2),_8)",
     "composition(Layout<Shape<_6,_2>,Stride<_8,_2>>{}, Layout<Shape<_4,_3>,Stride<_3,_1>>{})"),
    ("reshape 20:2 o (5,4):(4,1)", lambda: composition(L(S(20), S(2)), L((S(5), S(4)), (S(4), S(1)))),
     "(_5,_4):(_8,_2)", "composition(Layout<Int<20>,_2>{}, Layout<Shape<_5,_4>,Stride<_4,_1>>{})"),
    ("static (10,2):(16,4) o (5,4):(1,5)",
     lambda: composition(L((S(10), S(2)), (S(16), S(4))), L((S(5), S(4)), (S(1), S(5)))),
     "(_5,(_2,_2)):(_16,(_80,_4))",
     "composition(Layout<Shape<_10,_2>,Stride<_16,_4>>{}, Layout<Shape<_5,_4>,Stride<_1,_5>>{})"),
    ("dynamic (10,2):(16,4) o (5,4):(1,5)", lambda: composition(L((10, 2), (16, 4)), L((5, 4), (1, 5))),
     "((5,1),(2,2)):((16,4),(80,4))",
     "composition(make_layout(make_shape(10,2), make_stride(16,4)), make_layout(make_shape(5,4), make_stride(1,5)))"),
    ("by-mode composition", lambda: composition(L((12, (4, 8)), (59, (13, 1))), (L(S(3), S(4)), L(S(8), S(2)))),
     "(_3,(2,4)):(236,(26,1))",
     "composition(make_layout(make_shape(12,make_shape(4,8)), make_stride(59,make_stride(13,1))), "
     "make_tile(Layout<_3,_4>{}, Layout<_8,_2>{}))"),
    ("shape tiler", lambda: composition(L((12, (4, 8)), (59, (13, 1))), (S(3), S(8))), "(_3,(4,2)):(59,(13,1))",
     "composition(make_layout(make_shape(12,make_shape(4,8)), make_stride(59,make_stride(13,1))), "
     "make_shape(Int<3>{}, Int<8>{}))"),
    ("complement(4:1, 24)", lambda: complement(L(S(4), S(1)), S(24)), "_6:_4", "complement(Layout<_4,_1>{}, Int<24>{})"),
    ("complement(6:4, 24)", lambda: complement(L(S(6), S(4)), S(24)), "_4:_1", "complement(Layout<_6,_4>{}, Int<24>{})"),
    ("complement((4,6):(1,4), 24)", lambda: complement(L((S(4), S(6)), (S(1), S(4))), S(24)), "_1:_0",
     "complement(Layout<Shape<_4,_6>,Stride<_1,_4>>{}, Int<24>{})"),
    ("complement(4:2, 24)", lambda: complement(L(S(4), S(2)), S(24)), "(_2,_3):(_1,_8)",
     "complement(Layout<_4,_2>{}, Int<24>{})"),
    ("complement((2,4):(1,6), 24)", lambda: complement(L((S(2), S(4)), (S(1), S(6))), S(24)), "_3:_2",
     "complement(Layout<Shape<_2,_4>,Stride<_1,_6>>{}, Int<24>{})"),
    ("complement((2,2):(1,6), 24)", lambda: complement(L((S(2), S(2)), (S(1), S(6))), S(24)), "(_3,_2):(_2,_12)",
     "complement(Layout<Shape<_2,_2>,Stride<_1,_6>>{}, Int<24>{})"),
    ("logical_divide 1-D", lambda: logical_divide(L((S(4), S(2), S(3)), (S(2), S(1), S(8))), L(S(4), S(2))),
     "((_2,_2),(_2,_3)):((_4,_1),(_2,_8))",
     "logical_divide(Layout<Shape<_4,_2,_3>,Stride<_2,_1,_8>>{}, Layout<_4,_2>{})"),
    ("logical_divide 2-D tile", lambda: get(logical_divide(L((S(9), (S(4), S(8))), (S(59), (S(13), S(1)))),
                                                         (L(S(3), S(3)), L((S(2), S(4)), (S(1), S(8))))), 0, 0),
     "_3:_177", None),
    ("zipped_divide 2-D", lambda: zipped_divide(L((S(9), (S(4), S(8))), (S(59), (S(13), S(1)))),
                                               (L(S(3), S(3)), L((S(2), S(4)), (S(1), S(8))))),
     "((_3,(_2,_4)),(_3,(_2,_2))):((_177,(_13,_2)),(_59,(_26,_1)))",
     "zipped_divide(Layout<Shape<_9,Shape<_4,_8>>,Stride<Int<59>,Stride<Int<13>,_1>>>{}, "
     "make_tile(Layout<_3,_3>{}, Layout<Shape<_2,_4>,Stride<_1,_8>>{}))"),
    ("logical_product 1-D", lambda: logical_product(L((S(2), S(2)), (S(4), S(1))), L(S(6), S(1))),
     "((_2,_2),(_2,_3)):((_4,_1),(_2,_8))",
     "logical_product(Layout<Shape<_2,_2>,Stride<_4,_1>>{}, Layout<_6,_1>{})"),
    ("logical_product (4,2):(2,1)", lambda: logical_product(L((S(2), S(2)), (S(4), S(1))), L((S(4), S(2)), (S(2), S(1)))),
     None, "logical_product(Layout<Shape<_2,_2>,Stride<_4,_1>>{}, Layout<Shape<_4,_2>,Stride<_2,_1>>{})"),
    ("blocked_product 2x5 over 3x4", lambda: blocked_product(L((S(2), S(5)), (S(5), S(1))), L((S(3), S(4)), (S(1), S(3)))),
     None, "blocked_product(Layout<Shape<_2,_5>,Stride<_5,_1>>{}, Layout<Shape<_3,_4>,Stride<_1,_3>>{})"),
    ("raked_product 2x5 over 3x4", lambda: raked_product(L((S(2), S(5)), (S(5), S(1))), L((S(3), S(4)), (S(1), S(3)))),
     None, "raked_product(Layout<Shape<_2,_5>,Stride<_5,_1>>{}, Layout<Shape<_3,_4>,Stride<_1,_3>>{})"),
]

PRINT_LAYOUT_S2XH4 = """(2,(2,2)):(4,(2,1))
      0   1   2   3
    +---+---+---+---+
 0  | 0 | 2 | 1 | 3 |
    +---+---+---+---+
 1  | 4 | 6 | 5 | 7 |
    +---+---+---+---+
"""

# print1D of the documented layouts (offsets in colexicographic order)
PRINT1D = {
    "s2xs4": [0, 1, 2, 3, 4, 5, 6, 7],
    "s2xd4_a": [0, 12, 1, 13, 2, 14, 3, 15],
    "s2xh4_col": [0, 1, 2, 3, 4, 5, 6, 7],
    "s2xh4": [0, 4, 2, 6, 1, 5, 3, 7],
}


def make_s8():
    return L(S(8))


def by_label(label):
    for lab, thunk, _text, _cpp in EXAMPLES:
        if lab == label:
            return thunk()
    raise KeyError(label)


def print_layout_s2xh4():
    return layout_table(by_label("s2xh4"))

