"""The mirror against C++ CuTe on run-time integers: thousands of seeded random requests answered by two
compiled programs (tests/layout/oracle/dynamic_layouts.cpp: the layout algebra; dynamic_tensors.cpp:
tiles, partitions, identity tensors, swizzles), compared string for string.

Each request kind draws its inputs at random (seeded, so the requests are the same on every run); the
layout structures ("profiles", below) are compiled in, including two that mix in compile-time integers.
``FLASHCUTE_ORACLE_FULL=1`` sends four times as many requests (times ``FLASHCUTE_ORACLE_SCALE``).
"""

import random

import pytest

from flashcute.layout import (
    Int, Layout, LayoutRight, Swizzle, _, append, blocked_product, ceil_div, coalesce, complement, composition,
    crd2idx, elem_less_mask, filter, flat_divide, flat_product, flatten_layout, group, idx2crd, layout_table,
    local_partition, local_tile, logical_divide, logical_product, make_fragment_like, make_identity_tensor,
    make_layout_like, make_tensor, max_alignment, max_common_layout, max_common_vector, prepend, raked_product,
    rank, right_inverse, select, shape_div, size, slice_and_offset, take, tile_to_shape, tiled_divide,
    tiled_product, to_str, upcast, downcast, zipped_divide, zipped_product,
)
from tests.layout import corpus, oracle

SEP = "\x1e\n"
S = Int

# profile: (number of modes, shape builder, stride builder); values at static positions are fixed
PROFILES = {
    1: (1, lambda s: s[0], lambda d: d[0]),
    2: (2, lambda s: (s[0], s[1]), lambda d: (d[0], d[1])),
    3: (3, lambda s: (s[0], s[1], s[2]), lambda d: (d[0], d[1], d[2])),
    4: (3, lambda s: (s[0], (s[1], s[2])), lambda d: (d[0], (d[1], d[2]))),
    5: (3, lambda s: ((s[0], s[1]), s[2]), lambda d: ((d[0], d[1]), d[2])),
    6: (2, lambda s: (s[0], s[1]), lambda d: (S(1), d[1])),
    7: (3, lambda s: ((S(2), s[1]), s[2]), lambda d: ((S(1), d[1]), d[2])),
}
STATIC_VALUES = {6: ({}, {0: 1}), 7: ({0: 2}, {0: 1})}  # profile: ({shape index: value}, {stride index: value})
RANK2 = [2, 4, 5, 6, 7]
TILERS = [(S(64), S(64)), (S(128), S(64)), (S(16), S(8)), (S(32), S(128)), (S(1), S(64)), (S(64), S(1)), (S(1), S(1))]
THREADS = [Layout((S(2), S(16))), Layout((S(16), S(8)), LayoutRight), Layout((S(4), S(8)), (S(8), S(1))),
           Layout((S(32), S(4))), Layout((S(1), S(32))), Layout((S(32), S(1))), Layout((S(1), S(8)), LayoutRight)]
SWIZZLES = [Swizzle(*w) for w in [(0, 3, 3), (1, 3, 3), (2, 3, 3), (3, 3, 3), (1, 4, 3), (2, 4, 3), (3, 4, 3), (2, 0, 3),
                                  (3, 2, 3), (2, 1, 5), (1, 2, 1), (3, 0, -3), (2, 4, -4), (0, 4, 3), (3, 3, 4), (1, 0, 2)]]
CAST_SWIZZLES = [Swizzle(*w) for w in [(1, 2, 3), (2, 1, 3), (3, 0, 3), (2, 3, 3), (3, 4, 3), (1, 1, 2)]]
BLOCKS = [Layout((S(8), S(4))), Layout((S(2), S(8)), (S(8), S(1))), Layout(((S(2), S(2)), S(4)), ((S(1), S(8)), S(2))),
          Layout((S(1), S(16)))]
COUNT = 500 * (4 * corpus.scale() if oracle.full() else 1)


def rand_values(rng, profile, max_extent=9, neg=0.05):
    n = PROFILES[profile][0]
    shape = [rng.randint(1, max_extent) for _i in range(n)]
    stride = [rng.choice([0, 1, 1, 2, 3, 4, 8, 16, shape[0], shape[0] * shape[-1]]) for _i in range(n)]
    stride = [-d if rng.random() < neg else d for d in stride]
    fixed_shape, fixed_stride = STATIC_VALUES.get(profile, ({}, {}))
    for i, v in fixed_shape.items():
        shape[i] = v
    for i, v in fixed_stride.items():
        stride[i] = v
    return shape, stride


def layout_of(profile, shape, stride):
    _n, make_shape, make_stride = PROFILES[profile]
    return Layout(make_shape(shape), make_stride(stride))


def req_layout(profile, shape, stride):
    return f"{profile} {' '.join(map(str, shape))} {' '.join(map(str, stride))}"


def rand_layout(rng, profiles=tuple(PROFILES), **kw):
    p = rng.choice(list(profiles))
    sh, st = rand_values(rng, p, **kw)
    return layout_of(p, sh, st), req_layout(p, sh, st)


def _divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


def _offsets(L, begin, end):
    return "".join(f"{int(L(i))}," for i in range(begin, end))


def _show_tensor(s):
    return f"{to_str(s.layout)} {int(s.offset)}"


def _like(L):
    parts = [make_fragment_like(L), make_layout_like(L), max_alignment(L), flatten_layout(L)]
    if int(rank(L)) >= 2:
        parts += [take(L, 0, 2), select(L, 1, 0), group(L, 0, 2), append(L, L), prepend(L, n=4)]
    return " | ".join(to_str(x) for x in parts)


def _rand_coord(rng, shape):
    if isinstance(shape, tuple):
        return tuple(_rand_coord(rng, s) for s in shape)
    return rng.randrange(int(shape))


def _flat(t):
    return [x for a in t for x in _flat(a)] if isinstance(t, tuple) else [t]


# ---------------------------------------------------------------------------------------------
# Request kinds: kind -> (program, generator); a generator returns (request line, mirror thunk)
# ---------------------------------------------------------------------------------------------

def g_eval(rng):
    L, r = rand_layout(rng)
    return f"eval {r}", lambda: "".join(f"{int(v)}," for v in L.offsets())


def g_evalx(rng):
    L, r = rand_layout(rng)
    k = rng.randint(1, 6)
    return f"evalx {r} {k}", lambda: _offsets(L, int(size(L)), int(size(L)) + k)


def g_print(rng):
    L, r = rand_layout(rng)
    return f"print {r}", lambda: to_str(L)


def g_idx2crd(rng):
    L, r = rand_layout(rng)
    return f"idx2crd {r}", lambda: "".join(to_str(idx2crd(i, L.shape)) + ";" for i in range(int(size(L))))


def g_coalesce(rng):
    L, r = rand_layout(rng)
    return f"coalesce {r}", lambda: to_str(coalesce(L))


def g_coalesce_each(rng):
    L, r = rand_layout(rng)
    prof = S(1) if int(rank(L)) == 1 else tuple(S(1) for _m in L.shape)
    return f"coalesce_each {r}", lambda: to_str(coalesce(L, prof))


def g_filter(rng):
    L, r = rand_layout(rng)
    return f"filter {r}", lambda: to_str(filter(L))


def g_right_inverse(rng):
    L, r = rand_layout(rng, neg=0.0)
    return f"right_inverse {r}", lambda: to_str(right_inverse(L))


def g_compose(rng):
    A, ra = rand_layout(rng)
    B, rb = rand_layout(rng, max_extent=4, neg=0.0)
    return f"compose {ra} {rb}", lambda: to_str(composition(A, B))


def _rand_tile2(rng, A):
    b0 = rng.choice(_divisors(int(size(A, 0))))
    b1 = rng.choice(_divisors(int(size(A, 1))))
    d0, d1 = rng.choice([1, 1, 2]), rng.choice([1, 1, 2, 3])
    return (Layout(b0, d0), Layout(b1, d1)), f"{b0} {d0} {b1} {d1}"


def g_compose2(rng):
    A, ra = rand_layout(rng, RANK2)
    T, rt = _rand_tile2(rng, A)
    return f"compose2 {ra} {rt}", lambda: to_str(composition(A, T))


def _divides(A, T):
    return " ".join(to_str(f(A, T)) for f in (logical_divide, zipped_divide, tiled_divide, flat_divide))


def g_divide(rng):
    A, ra = rand_layout(rng)
    t = rng.choice(_divisors(int(size(A))))
    B = Layout(t, rng.choice([1, 1, 2]))
    return f"divide {ra} {t} {int(B.stride)}", lambda: _divides(A, B)


def g_divide2(rng):
    A, ra = rand_layout(rng, RANK2)
    T, rt = _rand_tile2(rng, A)
    return f"divide2 {ra} {rt}", lambda: _divides(A, T)


def g_complement(rng):
    a = Layout(rng.randint(1, 8), rng.randint(1, 6))
    c = int(a.shape) * int(a.stride) * rng.choice([1, 2, 3])
    return f"complement {a.shape} {a.stride} {c}", lambda: to_str(complement(a, c))


def g_complement1(rng):
    a = Layout(rng.randint(1, 8), rng.randint(0, 6))
    return f"complement1 {a.shape} {a.stride}", lambda: to_str(complement(a))


def g_product(rng):
    a = Layout(rng.randint(1, 6), rng.choice([1, 2]))
    B, rb = rand_layout(rng, max_extent=4, neg=0.0)
    fs = [logical_product, zipped_product, tiled_product, flat_product]
    if int(rank(B)) >= 2:
        fs += [blocked_product, raked_product]
    return f"product {a.shape} {a.stride} {rb}", lambda: " ".join(to_str(f(a, B)) for f in fs)


def g_upcast(rng):
    n = rng.choice([2, 4, 8])
    L, r = rand_layout(rng)
    return f"upcast {n} {r}", lambda: to_str(upcast(L, n))


def g_downcast(rng):
    n = rng.choice([2, 4, 8])
    L, r = rand_layout(rng, [6, 7])
    return f"downcast {n} {r}", lambda: to_str(downcast(L, n))


def g_common(rng):
    A, ra = rand_layout(rng, RANK2, neg=0.0)
    B, rb = rand_layout(rng, RANK2, neg=0.0)
    return f"common {ra} {rb}", lambda: f"{to_str(max_common_vector(A, B))} {to_str(max_common_layout(A, B))}"


def g_shape_ops(rng):
    L, r = rand_layout(rng)
    d = rng.choice([1, 2, 3, 4, 8, 16])
    return f"shape_ops {r} {d}", lambda: f"{to_str(ceil_div(L.shape, d))} {to_str(shape_div(L.shape, d))}"


def g_crd2idx(rng):
    L, r = rand_layout(rng)
    c = _rand_coord(rng, L.shape)
    flat = " ".join(str(int(x)) for x in _flat(c))
    return f"crd2idx {r} {flat}", lambda: f"{to_str(crd2idx(c, L.shape))} {to_str(L(c))}"


def g_like(rng):
    L, r = rand_layout(rng)
    return f"like {r}", lambda: _like(L)


def g_coords(rng):
    L, r = rand_layout(rng)
    i = rng.randrange(int(size(L)))
    return f"coords {r} {i}", lambda: " ".join(to_str(f(i)) for f in (L.get_hier_coord, L.get_flat_coord,
                                                                         L.get_1d_coord))


def g_slice(rng):
    L, r = rand_layout(rng, RANK2)
    k = rng.randrange(2)
    i = rng.randrange(int(size(L, 1 - k)))
    crd = (_, i) if k == 0 else (i, _)
    return f"slice {r} {k} {i}", lambda: " ".join(to_str(x) for x in slice_and_offset(crd, L))


def g_tile_to_shape(rng):
    t = rng.randrange(len(BLOCKS))
    blk = BLOCKS[t]
    m, n = int(size(blk, 0)) * rng.randint(1, 4), int(size(blk, 1)) * rng.randint(1, 4)
    o = rng.randrange(2)
    order = (S(2), S(1)) if o else None
    return (f"tile_to_shape {t} {m} {n} {o}",
            lambda: to_str(tile_to_shape(blk, (m, n)) if order is None else tile_to_shape(blk, (m, n), order)))


def g_print_layout(rng):
    L, r = rand_layout(rng, RANK2, max_extent=6, neg=0.0)
    return f"print_layout {r}", lambda: layout_table(L)


def g_tile(rng):
    t, k = rng.randrange(len(TILERS)), rng.randrange(3)
    m, n = rng.randint(1, 400), rng.randint(1, 300)
    dm, dn = (n, 1) if rng.random() < 0.5 else (1, m)
    tiler = TILERS[t]
    i, j = rng.randrange(-(-m // int(tiler[0]))), rng.randrange(-(-n // int(tiler[1])))
    coord = [(i, j), (_, j), (i, _)][k]
    tensor = make_tensor(None, Layout((m, n), (dm, dn)))
    return f"tile {t} {k} {m} {n} {dm} {dn} {i} {j}", lambda: _show_tensor(local_tile(tensor, tiler, coord))


def _with_predicates(s, shape):
    return to_str(s) + " " + "".join(str(int(b)) for b in elem_less_mask(s, shape))


def g_ident(rng):
    t = rng.randrange(len(TILERS))
    tiler = TILERS[t]
    m, n = rng.randint(1, 300), rng.randint(1, 200)
    if int(tiler[0]) * int(tiler[1]) == 1:
        m, n = rng.randint(1, 12), rng.randint(1, 12)
    i, j = rng.randrange(-(-m // int(tiler[0]))), rng.randrange(-(-n // int(tiler[1])))
    return (f"ident {t} {m} {n} {i} {j}",
            lambda: _with_predicates(local_tile(make_identity_tensor((m, n)), tiler, (i, j)), (m, n)))


def g_partition(rng):
    r = rng.randrange(len(THREADS))
    thr = THREADS[r]
    m, n = rng.randint(1, 200) * int(size(thr, 0)), rng.randint(1, 40) * int(size(thr, 1))
    dm, dn = (n, 1) if rng.random() < 0.5 else (1, m)
    idx = rng.randrange(int(size(thr)))
    tensor = make_tensor(None, Layout((m, n), (dm, dn)))
    return f"partition {r} {m} {n} {dm} {dn} {idx}", lambda: _show_tensor(local_partition(tensor, thr, idx))


def g_identpart(rng):
    r = rng.randrange(len(THREADS))
    thr = THREADS[r]
    m, n = rng.randint(1, 12) * int(size(thr, 0)), rng.randint(1, 6) * int(size(thr, 1))
    idx = rng.randrange(int(size(thr)))
    return (f"identpart {r} {m} {n} {idx}",
            lambda: _with_predicates(local_partition(make_identity_tensor((m, n)), thr, idx), (m, n)))


def g_swizzle(rng):
    w = rng.randrange(len(SWIZZLES))
    xs = [rng.randrange(1 << 16) for _i in range(32)]
    return f"swizzle {w} {' '.join(map(str, xs))}", lambda: "".join(f"{int(SWIZZLES[w](x))}," for x in xs)


def g_swz(rng):
    w = rng.randrange(len(SWIZZLES))
    L, r = rand_layout(rng, [1, 2, 6], max_extent=16, neg=0.0)

    def thunk():
        c = composition(SWIZZLES[w], L)
        return to_str(c) + " " + "".join(f"{int(v)}," for v in c.offsets())
    return f"swz {w} {r}", thunk


def g_swzcast(rng):
    w = rng.randrange(len(CAST_SWIZZLES))
    n = rng.choice([2, 4, 8])
    p = rng.choice([2, 6])
    sh, st = rand_values(rng, p, max_extent=16, neg=0.0)
    sh[0] = n * rng.randint(1, 4)  # the unit-stride mode divides by N
    if p == 2:
        st[0] = n * rng.randint(1, 4)
    L = layout_of(p, sh, st)

    def thunk():
        c = composition(CAST_SWIZZLES[w], L)
        return to_str(upcast(c, n)) + ("" if p == 2 else " " + to_str(downcast(c, n)))
    return f"swzcast {w} {n} {req_layout(p, sh, st)}", thunk


KINDS = {
    "eval": ("dynamic_layouts", g_eval), "evalx": ("dynamic_layouts", g_evalx),
    "print": ("dynamic_layouts", g_print), "idx2crd": ("dynamic_layouts", g_idx2crd),
    "coalesce": ("dynamic_layouts", g_coalesce), "coalesce_each": ("dynamic_layouts", g_coalesce_each),
    "filter": ("dynamic_layouts", g_filter), "right_inverse": ("dynamic_layouts", g_right_inverse),
    "compose": ("dynamic_layouts", g_compose), "compose2": ("dynamic_layouts", g_compose2),
    "divide": ("dynamic_layouts", g_divide), "divide2": ("dynamic_layouts", g_divide2),
    "complement": ("dynamic_layouts", g_complement), "complement1": ("dynamic_layouts", g_complement1),
    "product": ("dynamic_layouts", g_product), "upcast": ("dynamic_layouts", g_upcast),
    "downcast": ("dynamic_layouts", g_downcast), "common": ("dynamic_layouts", g_common),
    "shape_ops": ("dynamic_layouts", g_shape_ops), "crd2idx": ("dynamic_layouts", g_crd2idx),
    "like": ("dynamic_layouts", g_like), "coords": ("dynamic_layouts", g_coords),
    "slice": ("dynamic_layouts", g_slice), "tile_to_shape": ("dynamic_layouts", g_tile_to_shape),
    "print_layout": ("dynamic_layouts", g_print_layout),
    "tile": ("dynamic_tensors", g_tile), "ident": ("dynamic_tensors", g_ident),
    "partition": ("dynamic_tensors", g_partition), "identpart": ("dynamic_tensors", g_identpart),
    "swizzle": ("dynamic_tensors", g_swizzle), "swz": ("dynamic_tensors", g_swz),
    "swzcast": ("dynamic_tensors", g_swzcast),
}
PROGRAMS = sorted({program for program, _g in KINDS.values()})


def requests(kind, count=COUNT):
    """(request line, the mirror's answer) pairs; inputs the mirror rejects are drawn again (C++ does not
    check dynamic operands and would compute garbage)."""
    rng = random.Random(f"dynamic:{kind}")
    gen = KINDS[kind][1]
    out = []
    tries = 0
    while len(out) < count and tries < 50 * count:
        tries += 1
        req, thunk = gen(rng)
        try:
            expected = thunk()
        except (ValueError, TypeError, ZeroDivisionError):
            continue
        out.append((req, expected))
    return out


def oracle_prefetch():
    """Queue the two programs' builds (tests/conftest.py calls this when collection ends)."""
    for program in PROGRAMS:
        oracle.prefetch_program(program, priority=25)


@pytest.fixture(scope="module")
def dynamic_runs(oracle):
    batches = {kind: requests(kind) for kind in KINDS}
    out = {}
    for program in PROGRAMS:
        kinds = [k for k in KINDS if KINDS[k][0] == program]
        stdin = "".join(req + "\n" for kind in kinds for req, _e in batches[kind])
        answers = oracle.run_oracle(program, stdin).split(SEP)[:-1]
        total = sum(len(batches[k]) for k in kinds)
        assert len(answers) == total, f"{program}: {len(answers)} answers for {total} requests"
        k0 = 0
        for kind in kinds:
            n = len(batches[kind])
            out[kind] = (batches[kind], answers[k0:k0 + n])
            k0 += n
    return out


@pytest.mark.parametrize("kind", list(KINDS))
def test_dynamic_requests_match_cpp(kind, dynamic_runs):
    batch, answers = dynamic_runs[kind]
    assert len(batch) >= COUNT // 2, f"too few {kind} requests generated ({len(batch)})"
    bad = [f"{req}\n    mirror: {want!r}\n    C++:    {got!r}" for (req, want), got in zip(batch, answers) if want != got]
    print(f"{kind}: {len(batch)} dynamic requests compared with C++")
    assert not bad, f"{len(bad)} of {len(batch)} {kind} requests differ from C++:\n" + "\n".join(bad[:10])
