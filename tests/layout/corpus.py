"""The oracle corpus: CuTe documentation examples plus seeded random cases for every function family.

Each case is a C++ statement that prints one result with ``cute::print`` and a Python thunk that
returns the mirror's text for the same inputs (or raises ValueError/TypeError when the mirror
rejects them).  Cases are deterministic (seeded per family), so the generated C++ — and its
compiled, cached binary — is the same on every run.

``python tests/layout/corpus.py`` prints the corpus size per family.
"""

import os
import random
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from flashcute.layout import (  # noqa: E402
    Int, Layout, LayoutLeft, LayoutRight, Swizzle, _, ceil_div, coalesce, complement, composition,
    crd2idx, downcast, filter, flat_divide, flat_product, idx2crd, blocked_product,
    layout_table, left_inverse, logical_divide, logical_product, max_common_layout,
    max_common_vector, raked_product, right_inverse, shape_div, tile_to_shape, tiled_divide,
    tiled_product, to_str, upcast, zipped_divide, zipped_product, product, size, cosize, flatten,
    unflatten, make_ordered_layout, slice_and_offset,
)
from tests.layout.oracle import cpp  # noqa: E402


class Case:
    """One oracle case.

    Either ``expr`` (a C++ expression whose value C++ prints with ``cute::print``; ``py`` returns
    the mirror's object for it) or ``stmt`` (a C++ statement printing something; ``py`` returns the
    mirror's text).  :meth:`expected` is the mirror's text, :meth:`cpp` the C++ statement: when the
    mirror's result is entirely static the statement prints ``decltype(expr){}`` — the type C++
    computed — which skips code generation for the algebra and keeps the oracle fast.
    """

    __slots__ = ("expr", "stmt", "py", "label", "all_static", "_result")

    def __init__(self, py, label, expr=None, stmt=None, all_static=False):
        self.expr, self.stmt, self.py, self.label, self.all_static = expr, stmt, py, label, all_static
        self._result = None

    def result(self):
        if self._result is None:
            self._result = self.py()
        return self._result

    def expected(self):
        r = self.result()
        return r if self.stmt is not None else to_str(r)

    def cpp(self):
        if self.stmt is not None:
            return self.stmt
        if _fully_static(self.result()):
            return f"print(decltype({self.expr}){{}});"
        return f"print({self.expr});"


def _fully_static(x):
    from flashcute.layout import ComposedLayout, MixedBits, Swizzle, is_static

    if isinstance(x, Layout):
        return is_static(x.shape) and is_static(x.stride)
    if isinstance(x, ComposedLayout):
        return (not isinstance(x.offset, MixedBits) and is_static(x.offset) and _fully_static(x.layout_a)
                and _fully_static(x.layout_b))
    if isinstance(x, Swizzle):
        return True
    return is_static(x)


# ---------------------------------------------------------------------------------------------
# Random building blocks
# ---------------------------------------------------------------------------------------------

LEAVES = [1, 2, 2, 2, 3, 4, 4, 4, 6, 8, 8, 16]


def rand_shape(rng, max_rank=3, max_depth=2, max_size=2048):
    def node(d):
        if d == 0 or rng.random() < 0.65:
            return rng.choice(LEAVES)
        return tuple(node(d - 1) for _i in range(rng.randint(1, 3)))

    while True:
        if rng.random() < 0.15:
            s = rng.choice(LEAVES[1:])
        else:
            s = tuple(node(max_depth - 1) for _i in range(rng.randint(1, max_rank)))
        if int(product(s)) <= max_size:
            return s


def statify(rng, t, p_static):
    if isinstance(t, tuple):
        return tuple(statify(rng, a, p_static) for a in t)
    if isinstance(t, Int):
        return t
    return Int(t) if rng.random() < p_static else int(t)


def rand_injective_stride(rng, shape, gaps=True):
    """Compact strides in a random mode order, with occasional gaps (still injective)."""
    flat = flatten(shape) if isinstance(shape, tuple) else (shape,)
    order = list(range(len(flat)))
    rng.shuffle(order)
    strides = [0] * len(flat)
    cur = rng.choice([1, 1, 1, 2]) if gaps else 1
    for i in order:
        strides[i] = cur
        cur *= int(flat[i])
        if gaps and rng.random() < 0.2:
            cur *= rng.choice([2, 3])
    return unflatten(tuple(strides), shape) if isinstance(shape, tuple) else strides[0]


def rand_stride(rng, shape, p_zero=0.1, p_neg=0.0):
    if rng.random() < 0.6:
        st = rand_injective_stride(rng, shape)
    else:
        def leaf(_s):
            return rng.choice([1, 2, 3, 4, 8, 16, 32, 5, 12])

        st = _map_leaves(shape, leaf)

    def tweak(d):
        if rng.random() < p_zero:
            return 0
        if rng.random() < p_neg:
            return -d
        return d

    return _map_leaves(st, tweak)


def _map_leaves(t, f):
    if isinstance(t, tuple):
        return tuple(_map_leaves(a, f) for a in t)
    return f(t)


def rand_layout(rng, p_static=0.8, injective=False, max_rank=3, max_depth=2, max_size=2048, p_zero=0.1, p_neg=0.0):
    s = rand_shape(rng, max_rank, max_depth, max_size)
    d = rand_injective_stride(rng, s) if injective else rand_stride(rng, s, p_zero, p_neg)
    return Layout(statify(rng, s, p_static), statify(rng, d, p_static))


def _is_all_static(*xs):
    from flashcute.layout import is_static

    for x in xs:
        if isinstance(x, Layout):
            if not (is_static(x.shape) and is_static(x.stride)):
                return False
        elif isinstance(x, tuple):
            if not _is_all_static(*x):
                return False
        elif isinstance(x, int) and not isinstance(x, Int):
            return False
    return True


def rand_tiler_layout(rng, target_size, p_static):
    """A small layout whose image is meant to sit inside ``target_size`` (not guaranteed)."""
    n = max(1, int(target_size))
    divs = [d for d in range(1, n + 1) if n % d == 0]
    if rng.random() < 0.5:
        t = rng.choice(divs)
        st = rng.choice([1, 1, 2, 3, 4]) if t > 1 else 1
        return Layout(statify(rng, t, p_static), statify(rng, st, p_static))
    a = rng.choice(divs)
    rest = [d for d in divs if (n // a) % d == 0] or [1]
    b = rng.choice(rest)
    if rng.random() < 0.5:
        strides = (1, a) if rng.random() < 0.5 else (b, 1)
    else:
        strides = (rng.choice([1, 2, 3]), rng.choice([1, 2, 4, 8, 16]))
    return Layout(statify(rng, (a, b), p_static), statify(rng, strides, p_static))


def rand_tiler(rng, layout, p_static):
    """A tiler for ``layout``: a Layout, an integer, or a by-mode tuple of those (and ``_``)."""
    r = rng.random()
    if r < 0.35:
        return rand_tiler_layout(rng, size(layout), p_static)
    if r < 0.5:
        n = int(size(layout))
        return statify(rng, rng.choice([d for d in range(1, n + 1) if n % d == 0]), p_static)
    modes = layout.shape if isinstance(layout.shape, tuple) else (layout.shape,)
    k = rng.randint(1, len(modes))
    out = []
    for m in modes[:k]:
        c = rng.random()
        if c < 0.15:
            out.append(_)
        elif c < 0.5:
            n = int(product(m))
            out.append(statify(rng, rng.choice([d for d in range(1, n + 1) if n % d == 0]), p_static))
        else:
            out.append(rand_tiler_layout(rng, product(m), p_static))
    return tuple(out)


def _safe(f):
    """Run f; mirror rejections become None (so generators can filter on them)."""
    try:
        return f()
    except (ValueError, TypeError, ZeroDivisionError):
        return None


def _collect(rng, n, make, max_tries_factor=30):
    """Draw cases from ``make(rng)`` (None = skip) until ``n`` are collected."""
    out = []
    tries = 0
    while len(out) < n and tries < n * max_tries_factor:
        tries += 1
        c = make(rng)
        if c is not None:
            out.append(c)
    return out


def _case(expr_cpp, thunk, label, *operands):
    return Case(thunk, label, expr=expr_cpp, all_static=_is_all_static(*operands))


# ---------------------------------------------------------------------------------------------
# Families
# ---------------------------------------------------------------------------------------------

def fam_print(rng, n):
    def make(rng):
        L = rand_layout(rng, p_static=rng.random(), max_depth=3, p_neg=0.05)
        return _case(cpp(L), lambda: L, f"print {L}", L)

    return _collect(rng, n, make)


def fam_coalesce(rng, n):
    def make(rng):
        L = rand_layout(rng, p_static=rng.choice([0.5, 0.9, 1.0]), max_rank=4, max_depth=3, p_zero=0.2)
        if rng.random() < 0.6:
            return _case(f"coalesce({cpp(L)})", lambda: coalesce(L), f"coalesce {L}", L)
        modes = L.shape if isinstance(L.shape, tuple) else (L.shape,)
        prof = tuple(Int(1) if rng.random() < 0.7 or not isinstance(m, tuple) else tuple(Int(1) for _m in m)
                     for m in modes[:rng.randint(1, len(modes))])
        return _case(f"coalesce({cpp(L)}, {cpp(prof)})", lambda: coalesce(L, prof), f"coalesce {L} {prof}", L)

    return _collect(rng, n, make)


def fam_filter(rng, n):
    def make(rng):
        L = rand_layout(rng, p_static=rng.choice([0.6, 1.0]), max_rank=4, p_zero=0.3)
        if rng.random() < 0.7:
            return _case(f"filter({cpp(L)})", lambda: filter(L), f"filter {L}", L)
        modes = L.shape if isinstance(L.shape, tuple) else (L.shape,)
        prof = tuple(Int(1) for _m in modes[:rng.randint(1, len(modes))])
        return _case(f"filter({cpp(L)}, {cpp(prof)})", lambda: filter(L, prof), f"filter {L} {prof}", L)

    return _collect(rng, n, make)


def fam_composition(rng, n):
    def make(rng):
        p = rng.choice([0.6, 0.9, 1.0, 1.0])
        A = rand_layout(rng, p_static=p, max_size=1024, p_neg=0.03)
        if rng.random() < 0.5:
            B = rand_tiler_layout(rng, size(A), rng.choice([p, 1.0]))
        else:
            B = rand_tiler(rng, A, rng.choice([p, 1.0]))
        if _safe(lambda: composition(A, B)) is None:
            return None
        return _case(f"composition({cpp(A)}, {cpp(B)})", lambda: composition(A, B), f"composition {A} o {to_str(B) if not isinstance(B, tuple) else B}", A, B)

    return _collect(rng, n, make)


def fam_complement(rng, n):
    def make(rng):
        p = rng.choice([0.7, 1.0, 1.0])
        L = rand_layout(rng, p_static=1.0, injective=True, max_rank=3, max_size=256)
        if rng.random() < 0.2:
            L = Layout(statify(rng, int(size(L)), p), statify(rng, rng.choice([1, 2, 3, 4]), p))
        cos = int(cosize(L))
        r = rng.random()
        if r < 0.2:
            return _case(f"complement({cpp(L)})", lambda: complement(L), f"complement {L}", L)
        if r < 0.7:
            t = statify(rng, cos * rng.choice([1, 1, 2, 3, 4]), p)
        else:
            t = statify(rng, (rng.choice([2, 4, 8]), cos), p)
        if _safe(lambda: complement(L, t)) is None:
            return None
        return _case(f"complement({cpp(L)}, {cpp(t)})", lambda: complement(L, t), f"complement {L} {t}", L, t)

    return _collect(rng, n, make)


def fam_inverse(rng, n):
    def make(rng):
        inj = rng.random() < 0.8
        L = rand_layout(rng, p_static=rng.choice([0.8, 1.0, 1.0]), injective=inj, max_rank=4, max_depth=2, max_size=512,
                        p_zero=0.1)
        if rng.random() < 0.5:
            return _case(f"right_inverse({cpp(L)})", lambda: right_inverse(L), f"right_inverse {L}", L)
        if _safe(lambda: left_inverse(L)) is None:
            return None
        return _case(f"left_inverse({cpp(L)})", lambda: left_inverse(L), f"left_inverse {L}", L)

    return _collect(rng, n, make)


_DIVIDES = {"logical_divide": logical_divide, "zipped_divide": zipped_divide,
            "tiled_divide": tiled_divide, "flat_divide": flat_divide}


def fam_divide(rng, n):
    def make(rng):
        p = rng.choice([0.7, 1.0, 1.0])
        A = rand_layout(rng, p_static=p, max_size=1024, p_zero=0.05)
        T = rand_tiler(rng, A, rng.choice([p, 1.0]))
        name = rng.choice(sorted(_DIVIDES))
        f = _DIVIDES[name]
        if _safe(lambda: f(A, T)) is None:
            return None
        return _case(f"{name}({cpp(A)}, {cpp(T)})", lambda: f(A, T), f"{name} {A} / {T}", A, T)

    return _collect(rng, n, make)


_PRODUCTS = {"logical_product": logical_product, "zipped_product": zipped_product,
             "tiled_product": tiled_product, "flat_product": flat_product,
             "blocked_product": blocked_product, "raked_product": raked_product}


def fam_product(rng, n):
    def make(rng):
        A = rand_layout(rng, p_static=1.0, injective=rng.random() < 0.8, max_rank=3, max_size=64, p_zero=0.05)
        name = rng.choice(sorted(_PRODUCTS))
        if name in ("blocked_product", "raked_product") or rng.random() < 0.6:
            B = rand_layout(rng, p_static=rng.choice([0.7, 1.0]), injective=True, max_rank=3, max_size=64)
        else:
            B = rand_tiler(rng, A, 1.0)
        f = _PRODUCTS[name]
        if _safe(lambda: f(A, B)) is None:
            return None
        return _case(f"{name}({cpp(A)}, {cpp(B)})", lambda: f(A, B), f"{name} {A} x {B}", A, B)

    return _collect(rng, n, make)


def fam_tile_to_shape(rng, n):
    def make(rng):
        blk = rand_layout(rng, p_static=1.0, injective=True, max_rank=3, max_depth=2, max_size=64)
        r = len(blk.shape) if isinstance(blk.shape, tuple) else 1
        R = rng.randint(r, 3)
        bs = [int(size(blk, i)) if i < r else 1 for i in range(R)]
        trg = tuple(statify(rng, b * rng.choice([1, 2, 3, 4]), rng.choice([0.5, 1.0])) for b in bs)
        order = rng.choice([LayoutLeft, LayoutRight, None])
        if order is None:
            perm = list(range(R))
            rng.shuffle(perm)
            order = tuple(Int(x) for x in perm)
        if _safe(lambda: tile_to_shape(blk, trg, order)) is None:
            return None
        return _case(f"tile_to_shape({cpp(blk)}, {cpp(trg)}, {cpp(order)})", lambda: tile_to_shape(blk, trg, order),
                     f"tile_to_shape {blk} {trg} {order}", blk, trg)

    return _collect(rng, n, make)


def fam_recast(rng, n):
    def make(rng):
        L = rand_layout(rng, p_static=rng.choice([0.7, 1.0]), max_size=512, p_zero=0.1)
        k = rng.choice([2, 4, 8])
        if rng.random() < 0.5:
            if _safe(lambda: upcast(L, k)) is None:
                return None
            return _case(f"upcast<{k}>({cpp(L)})", lambda: upcast(L, k), f"upcast<{k}> {L}", L)
        if _safe(lambda: downcast(L, k)) is None:
            return None
        return _case(f"downcast<{k}>({cpp(L)})", lambda: downcast(L, k), f"downcast<{k}> {L}", L)

    return _collect(rng, n, make)


def fam_max_common(rng, n):
    def make(rng):
        s = rand_shape(rng, max_rank=3, max_size=256)
        a = Layout(statify(rng, s, 1.0), statify(rng, rand_injective_stride(rng, s, gaps=False), rng.choice([0.8, 1.0])))
        b = Layout(statify(rng, s, 1.0), statify(rng, rand_injective_stride(rng, s, gaps=rng.random() < 0.3), 1.0))
        if rng.random() < 0.5:
            return _case(f"max_common_vector({cpp(a)}, {cpp(b)})", lambda: max_common_vector(a, b), f"mcv {a} {b}", a, b)
        if _safe(lambda: max_common_layout(a, b)) is None:
            return None
        return _case(f"max_common_layout({cpp(a)}, {cpp(b)})", lambda: max_common_layout(a, b), f"mcl {a} {b}", a, b)

    return _collect(rng, n, make)


def fam_like(rng, n):
    """make_fragment_like, make_layout_like, nullspace, max_alignment, flat/hierarchical coordinates."""
    from flashcute.layout import (
        make_fragment_like, make_layout_like, nullspace, max_alignment, flatten_layout, take, select, group,
        append, prepend, rank,
    )

    def make(rng):
        L = rand_layout(rng, p_static=rng.choice([0.6, 1.0, 1.0]), max_rank=3, max_size=256, p_zero=0.2)
        k = rng.random()
        if k < 0.3:
            return _case(f"make_fragment_like({cpp(L)})", lambda: make_fragment_like(L), f"make_fragment_like {L}", L)
        if k < 0.5:
            return _case(f"make_layout_like({cpp(L)})", lambda: make_layout_like(L), f"make_layout_like {L}", L)
        if k < 0.65:
            return _case(f"nullspace({cpp(L)})", lambda: nullspace(L), f"nullspace {L}", L)
        if k < 0.75:
            if _safe(lambda: max_alignment(L)) is None:
                return None
            return _case(f"max_alignment({cpp(L)})", lambda: max_alignment(L), f"max_alignment {L}", L)
        if k < 0.85:
            r = int(rank(L))
            ops = [("flatten", lambda: flatten_layout(L), f"flatten({cpp(L)})")]
            if r >= 2:
                ops += [("take<0,2>", lambda: take(L, 0, 2), f"take<0,2>({cpp(L)})"),
                        ("select<1,0>", lambda: select(L, 1, 0), f"select<1,0>({cpp(L)})"),
                        ("group<0,2>", lambda: group(L, 0, 2), f"group<0,2>({cpp(L)})"),
                        ("append", lambda: append(L, L), f"append({cpp(L)}, {cpp(L)})"),
                        ("prepend<4>", lambda: prepend(L, n=4), f"prepend<4>({cpp(L)})")]
            name, thunk, expr = rng.choice(ops)
            return _case(expr, thunk, f"{name} {L}", L)
        i = rng.randrange(int(size(L)))
        body = (f"auto L = {cpp(L)}; print(L.get_hier_coord({i})); print(' '); print(L.get_flat_coord({i}));"
                f" print(' '); print(L.get_1d_coord({i}));")
        if _safe(lambda: L.get_hier_coord(i)) is None:
            return None  # a dynamic stride 0 divides by zero (C++ faults)
        return Case(lambda: " ".join(to_str(f(i)) for f in (L.get_hier_coord, L.get_flat_coord, L.get_1d_coord)),
                    f"coords {L} {i}", stmt=body)

    return _collect(rng, n, make)


def fam_int_tuple(rng, n):
    def make(rng):
        s = statify(rng, rand_shape(rng, max_rank=3, max_depth=2, max_size=512), rng.choice([0.5, 1.0]))
        k = rng.random()
        if k < 0.25:
            i = statify(rng, rng.randrange(int(product(s))), 0.3)
            return _case(f"idx2crd({cpp(i)}, {cpp(s)})", lambda: idx2crd(i, s), f"idx2crd {i} {s}", s)
        if k < 0.45:
            c = _map_leaves(s, lambda x: statify(rng, rng.randrange(int(x)), 0.3))
            return _case(f"crd2idx({cpp(c)}, {cpp(s)})", lambda: crd2idx(c, s), f"crd2idx {c} {s}", s)
        if k < 0.6:
            d = statify(rng, rng.choice([1, 2, 3, 4, 8, 16]), 0.7)
            return _case(f"ceil_div({cpp(s)}, {cpp(d)})", lambda: ceil_div(s, d), f"ceil_div {s} {d}", s)
        if k < 0.75:
            d = statify(rng, rng.choice([1, 2, 4, 8, 16]), 0.7)
            if _safe(lambda: shape_div(s, d)) is None:
                return None
            return _case(f"shape_div({cpp(s)}, {cpp(d)})", lambda: shape_div(s, d), f"shape_div {s} {d}", s)
        order = _map_leaves(s, lambda x: Int(rng.randint(0, 5)) if rng.random() < 0.8 else rng.randint(0, 5))
        return _case(f"make_ordered_layout({cpp(s)}, {cpp(order)})", lambda: make_ordered_layout(s, order),
                     f"make_ordered_layout {s} {order}", s)

    return _collect(rng, n, make)


def fam_eval(rng, n):
    """Every offset of a layout, through C++'s layout(i) loop and the mirror's vectorised offsets()."""
    def make(rng):
        L = rand_layout(rng, p_static=rng.random(), max_rank=4, max_depth=3, max_size=512, p_neg=0.05)
        body = f"auto L = {cpp(L)}; for (int i = 0; i < int(size(L)); ++i) {{ print(int(L(i))); print(','); }}"
        return Case(lambda: "".join(f"{int(v)}," for v in L.offsets()), f"eval {L}", stmt=body)

    return _collect(rng, n, make)


def fam_print_layout(rng, n):
    def make(rng):
        s0 = rand_shape(rng, max_rank=2, max_depth=2, max_size=24)
        s1 = rand_shape(rng, max_rank=2, max_depth=2, max_size=24)
        shape = (s0, s1)
        st = rand_stride(rng, shape, p_zero=0.1)
        L = Layout(statify(rng, shape, rng.random()), statify(rng, st, rng.random()))
        if rng.random() < 0.3:
            L = _swizzled(rng)
        return Case(lambda: layout_table(L), f"print_layout {L}", stmt=f"print_layout({cpp(L)});")

    return _collect(rng, n, make)


def _swizzled(rng):
    b = rng.randint(0, 3)
    m = rng.randint(0, 3)
    s = rng.choice([b, b + 1, 3]) if b else rng.choice([1, 2, 3])
    s = max(s, b)
    rows, cols = rng.choice([4, 8, 16]), rng.choice([8, 16, 32, 64])
    inner = Layout((Int(rows), Int(cols)), (Int(cols), Int(1)) if rng.random() < 0.5 else (Int(1), Int(rows)))
    return composition(Swizzle(b, m, s), inner)


def fam_swizzle(rng, n):
    def make(rng):
        k = rng.random()
        b = rng.randint(0, 3)
        m = rng.randint(0, 4)
        s = rng.choice([b, b + 1, b + 2, -b, -(b + 1)]) if b else rng.choice([1, 2, 3, -2])
        if abs(s) < b:
            s = b
        sw = Swizzle(b, m, s)
        if k < 0.35:
            xs = [rng.randrange(1 << 12) for _i in range(16)]
            body = " ".join(f"print({cpp(sw)}(int({x}))); print(',');" for x in xs)
            return Case(lambda: "".join(f"{int(sw(x))}," for x in xs), f"swizzle {sw} {xs}", stmt=body)
        L = _swizzled(rng)
        if k < 0.55:
            body = f"auto L = {cpp(L)}; for (int i = 0; i < int(size(L)); ++i) {{ print(int(L(i))); print(','); }}"
            return Case(lambda: "".join(f"{int(v)}," for v in L.offsets()), f"swizzle eval {L}", stmt=body)
        if k < 0.7:
            inner = L.layout_b if hasattr(L, "layout_b") else L
            T = rand_tiler(rng, inner, 1.0)
            f = rng.choice([logical_divide, zipped_divide, tiled_divide])
            if _safe(lambda: f(L, T)) is None:
                return None
            return _case(f"{f.__name__}({cpp(L)}, {cpp(T)})", lambda: f(L, T), f"{f.__name__} {L} {T}")
        if k < 0.85:
            trg = (Int(int(size(L, 0)) * rng.choice([1, 2, 4])), Int(int(size(L, 1)) * rng.choice([1, 2])),
                   Int(rng.choice([1, 2, 3])))
            return _case(f"tile_to_shape({cpp(L)}, {cpp(trg)})", lambda: tile_to_shape(L, trg), f"tile_to_shape {L} {trg}")
        # slicing a swizzled layout: C++ decays it to a plain layout when it can
        crd = rng.choice([(_, rng.randrange(int(size(L, 1)))), (rng.randrange(int(size(L, 0))), _),
                          (_, Int(rng.randrange(int(size(L, 1))))), (Int(rng.randrange(int(size(L, 0)))), _)])
        body = f"auto so = slice_and_offset({cpp(crd)}, {cpp(L)}); print(get<0>(so)); print(' '); print(get<1>(so));"
        return Case(lambda: " ".join(to_str(x) for x in slice_and_offset(crd, L)), f"slice {crd} {L}", stmt=body)

    return _collect(rng, n, make)


def _rand_problem_tensor(rng, rank):
    """A tensor over counting memory with a dynamic (often ragged) shape and a random major order."""
    from flashcute.layout import make_tensor

    shape = tuple(rng.choice([rng.randint(1, 300), 64 * rng.randint(1, 4), rng.choice([16, 32, 128])])
                  for _i in range(rank))
    order = list(range(rank))
    rng.shuffle(order)
    stride = [0] * rank
    cur = 1
    for i in order:
        stride[i] = cur
        cur *= shape[i]
    L = Layout(shape, tuple(Int(1) if d == 1 and rng.random() < 0.5 else d for d in stride))
    return make_tensor(None, L), L


def fam_tensor(rng, n):
    """local_tile / local_partition / identity-tensor predicates: sliced layout and data offset."""
    from flashcute.layout import local_partition, local_tile, make_identity_tensor, elem_less_mask

    def make(rng):
        rank = rng.randint(1, 3)
        t, L = _rand_problem_tensor(rng, rank)
        k = rng.random()
        head = f"auto t = make_tensor(counting_iterator<int>{{0}}, {cpp(L)});"
        if k < 0.45:
            tiler = tuple(Int(rng.choice([8, 16, 32, 64, 128])) for _i in range(rank))
            coord = tuple(_ if rng.random() < 0.3 else rng.randrange(int(ceil_div(int(size(L, i)), int(tiler[i]))))
                          for i in range(rank))
            if rank == 1 and rng.random() < 0.5:
                tiler, coord = tiler[0], coord[0]
            proj = None
            if rank == 3 and rng.random() < 0.4:
                proj = rng.choice([(Int(1), _, Int(1)), (_, Int(1), Int(1)), (Int(1), Int(1), _)])
                tiler3 = tiler
                s = _safe(lambda: local_tile(t, tiler3, coord, proj))
                body = f"{head} auto s = local_tile(t, {cpp(tiler)}, {cpp(coord)}, {cpp(proj)});"
            else:
                s = _safe(lambda: local_tile(t, tiler, coord))
                body = f"{head} auto s = local_tile(t, {cpp(tiler)}, {cpp(coord)});"
            if s is None:
                return None
            return Case(lambda: f"{to_str(s.layout)} {int(s.offset)}", f"local_tile {L} {tiler} {coord} {proj}",
                        stmt=body + " print(s.layout()); print(' '); print(int(s.data().n_));")
        if k < 0.75:
            thr_shape = tuple(Int(rng.choice([1, 2, 4, 8, 16])) for _i in range(rank))
            thr = Layout(thr_shape, LayoutRight) if rng.random() < 0.5 else Layout(thr_shape)
            idx = rng.randrange(int(size(thr)))
            s = _safe(lambda: local_partition(t, thr, idx))
            if s is None:
                return None
            return Case(lambda: f"{to_str(s.layout)} {int(s.offset)}", f"local_partition {L} {thr} {idx}",
                        stmt=f"{head} auto s = local_partition(t, {cpp(thr)}, {idx});"
                             " print(s.layout()); print(' '); print(int(s.data().n_));")
        shape = L.shape
        tiler = tuple(Int(rng.choice([16, 32, 64])) for _i in range(rank))
        coord = tuple(rng.randrange(int(ceil_div(int(size(L, i)), int(tiler[i])))) for i in range(rank))
        c = make_identity_tensor(shape)
        s = _safe(lambda: local_tile(c, tiler, coord))
        if s is None:
            return None
        body = (f"auto c = make_identity_tensor({cpp(shape)}); auto s = local_tile(c, {cpp(tiler)}, {cpp(coord)});"
                f" print(s); print(' '); for (int i = 0; i < int(size(s)); ++i) {{ print(int(elem_less(s(i), {cpp(shape)}))); }}")
        return Case(lambda: to_str(s) + " " + "".join(str(int(v)) for v in elem_less_mask(s, shape)),
                    f"identity tile {shape} {tiler} {coord}", stmt=body)

    return _collect(rng, n, make)


GMMA_PRELUDE = "#include <cute/atom/mma_traits_sm90_gmma.hpp>"
_GMMA_TYPES = {8: "uint8_t", 16: "half_t", 32: "float"}


def fam_atoms(rng, n):
    """SM90 GMMA smem atoms (every major/swizzle/width, printed, tiled, print_layout) and SM80 swizzle atoms."""
    from flashcute.layout import gmma_smem_atom, sm80_swizzle_atom

    out = []
    for major in ("K", "MN"):
        for kind in ("INTER", "SW32", "SW64", "SW128"):
            for bits, ctype in _GMMA_TYPES.items():
                atom = f"GMMA::Layout_{major}_{kind}_Atom<{ctype}>{{}}"
                a = gmma_smem_atom(major, kind, bits)
                out.append(Case(lambda a=a: a, f"gmma {major} {kind} {bits}", expr=atom))
                out.append(Case(lambda a=a: layout_table(a), f"print_layout gmma {major} {kind} {bits}",
                                stmt=f"print_layout({atom});"))
                m, k = int(size(a, 0)), int(size(a, 1))
                for trg in ((Int(max(128, m)), Int(max(64, k))), (Int(2 * m), Int(k), Int(2))):
                    out.append(Case(lambda a=a, trg=trg: tile_to_shape(a, trg), f"tile gmma {major} {kind} {bits} {trg}",
                                    expr=f"tile_to_shape({atom}, {cpp(trg)})"))
                    order = (Int(1), Int(0)) + (Int(2),) * (len(trg) - 2)
                    out.append(Case(lambda a=a, trg=trg, order=order: tile_to_shape(a, trg, order),
                                    f"tile gmma {major} {kind} {bits} {trg} {order}",
                                    expr=f"tile_to_shape({atom}, {cpp(trg)}, {cpp(order)})"))
    for k in (16, 32, 64, 128):
        for bits in (8, 16, 32):
            if k * bits // 8 < 16:
                continue
            a = sm80_swizzle_atom(k, bits)
            out.append(Case(lambda a=a: a, f"sm80 atom {k} {bits}", expr=cpp(a)))
            trg = (Int(128), Int(max(k, 64)), Int(2))
            out.append(Case(lambda a=a, trg=trg: tile_to_shape(a, trg), f"sm80 tile {k} {bits}",
                            expr=f"tile_to_shape({cpp(a)}, {cpp(trg)})"))
            for name, f in (("right_inverse", right_inverse), ("left_inverse", left_inverse)):
                if _safe(lambda a=a, f=f: f(a)) is not None:  # else make_swizzle fails, as C++'s static_assert does
                    out.append(Case(lambda a=a, f=f: f(a), f"{name} sm80 atom {k} {bits}", expr=f"{name}({cpp(a)})"))
            plain = Layout((Int(8), Int(k)), (Int(k), Int(1)))
            for name, f in (("max_common_vector", max_common_vector), ("max_common_layout", max_common_layout)):
                out.append(Case(lambda a=a, f=f, plain=plain: f(a, plain), f"{name} sm80 atom {k} {bits}",
                                expr=f"{name}({cpp(a)}, {cpp(plain)})"))
    return out


def fam_docs(rng, n):
    """CuTe documentation's worked examples (fixed; ``n`` ignored)."""
    from tests.layout.doc_examples import EXAMPLES, by_label

    out = [Case(thunk, f"docs: {label}", expr=expr) for label, thunk, _text, expr in EXAMPLES if expr]
    out.append(Case(lambda: layout_table(by_label("s2xh4")), "docs: print_layout(s2xh4)",
                    stmt="print_layout(make_layout(make_shape(2,make_shape(2,2)), make_stride(4,make_stride(2,1))));"))
    return out


FAMILIES = {  # family: (generator, cases at scale 1 — sized for a cold-cache CI run on 2 cores)
    "docs": (fam_docs, 0),
    "print": (fam_print, 200),
    "coalesce": (fam_coalesce, 300),
    "filter": (fam_filter, 150),
    "composition": (fam_composition, 400),
    "complement": (fam_complement, 300),
    "inverse": (fam_inverse, 300),
    "divide": (fam_divide, 250),
    "product": (fam_product, 200),
    "tile_to_shape": (fam_tile_to_shape, 120),
    "recast": (fam_recast, 200),
    "max_common": (fam_max_common, 150),
    "int_tuple": (fam_int_tuple, 250),
    "like": (fam_like, 150),
    "eval": (fam_eval, 150),
    "print_layout": (fam_print_layout, 120),
    "swizzle": (fam_swizzle, 250),
    "tensor": (fam_tensor, 150),
    "atoms": (fam_atoms, 0),
}

PRELUDES = {"atoms": GMMA_PRELUDE}


def scale():
    """Corpus size multiplier: ``$FLASHCUTE_ORACLE_SCALE`` (default 1; the CI budget; 4 for a full run)."""
    return max(1, int(os.environ.get("FLASHCUTE_ORACLE_SCALE", "1")))


def cases(family, seed=0):
    make, n = FAMILIES[family]
    return make(random.Random(f"{family}:{seed}"), n * scale())


def sizes():
    return {name: len(cases(name)) for name in FAMILIES}


if __name__ == "__main__":
    from tests.layout import test_oracle_dynamic as dyn

    total = 0
    print("generated C++ programs (static and mixed integers), per family:")
    for name, count in sizes().items():
        total += count
        print(f"  {name:15s} {count:6d}")
    print("stdin-driven C++ program (dynamic integers), per request kind:")
    for kind in dyn.KINDS:
        count = len(dyn.requests(kind))
        total += count
        print(f"  {kind:15s} {count:6d}")
    print(f"  {'total':15s} {total:6d}")
