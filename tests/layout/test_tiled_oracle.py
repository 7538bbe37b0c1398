"""Atoms, TiledMMA and TiledCopy against real C++ CuTe (tests/layout/oracle/tiled.cpp), string for string.

The C++ program holds a fixed set of configurations (they are C++ types); this test asks it, for
each one, the TV layouts and then seeded random partitions (tensor shape, strides, thread), partitions
of identity tensors and retiles, and compares every printed line with what flashcute.layout prints.
The default run builds parts 0-2 of the program (every atom and every way of building a TiledMMA or
TiledCopy); ``FLASHCUTE_ORACLE_FULL=1`` adds parts 3-5 (the other combinations).
"""

import random

import pytest

from flashcute.layout import (
    Int, Layout, LayoutRight, _, make_fragment_like, make_identity_tensor, parse_layout, size, to_str,
)
from flashcute.layout.atoms import copy_atom, mma_atom
from flashcute.layout.tensor import Tensor
from flashcute.layout.tiled import make_tiled_copy, make_tiled_copy_A, make_tiled_copy_B, \
    make_tiled_copy_C, make_tiled_copy_C_atom, make_tiled_mma

from tests.layout import oracle as _oracle

PARTS = list(range(6)) if _oracle.full() else [0, 1, 2]
RANDOM_PARTITIONS = 40   # per operand and configuration
RANDOM_IDENTITY = 8      # partitions of identity tensors per configuration
RANDOM_THREADS = 4


def oracle_prefetch():
    """Queue the parts' builds (tests/conftest.py calls this when collection ends)."""
    for part in PARTS:
        _oracle.prefetch_program("tiled", part, priority=20)


@pytest.fixture(scope="module")
def binaries(oracle):
    for part in PARTS:  # queued in the background already, unless this module runs alone
        oracle.prefetch_program("tiled", part, priority=20)
    return [oracle.build_program("tiled", part, priority=20) for part in PARTS]


def _ask(oracle, binary, queries):
    out = oracle.run_binary(binary, "".join(q + "\n" for q in queries)).split("\n")
    assert len(out) >= len(queries), f"oracle answered {len(out)} lines for {len(queries)} queries"
    return out[:len(queries)]


def _listing(oracle, binary):
    out = oracle.run_binary(binary, "list\n").splitlines()
    assert out[-1] == "end", out[-3:]
    return [line.split(" ") for line in out[:-1]]


def _split_top(text):
    """'(a,(b,c):(d,e),_)' -> ['a', '(b,c):(d,e)', '_']"""
    assert text[0] == "(" and text[-1] == ")", text
    parts, depth, cur = [], 0, ""
    for ch in text[1:-1]:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur += ch
    return parts + [cur]


def _permutation(text):
    return tuple(_ if p == "_" else parse_layout(p) if ":" in p else Int(int(p.lstrip("_")))
                 for p in _split_top(text))


def _part(t):
    return f"{t.layout}\t{t.offset}"


class Mismatches:
    def __init__(self):
        self.rows, self.count = [], 0

    def check(self, label, want, got):
        self.count += 1
        if want != got:
            self.rows.append(f"{label}\n    mirror: {want}\n    C++:    {got}")

    def report(self):
        head = "\n".join(self.rows[:12])
        more = f"\n... and {len(self.rows) - 12} more" if len(self.rows) > 12 else ""
        return f"{len(self.rows)} of {self.count} cases differ from C++:\n{head}{more}"


def _mirror(fn):
    try:
        return fn()
    except (ValueError, TypeError) as e:
        return f"REJECTED: {e}"


def _random_tensor(rng, tile_m, tile_n):
    m, n = tile_m * rng.randint(1, 3), tile_n * rng.randint(1, 3)
    stride = rng.choice([(n, 1), (1, m), (n + 8, 1), (1, m + 4), (rng.randint(1, 9), rng.randint(64, 999))])
    return m, n, stride


def _mma_queries(rng, mma, ident):
    tm, tn, tk = (int(s) for s in mma.tile_shape)
    nthr = int(mma.size)
    queries = ["tv"]
    for op, (a, b) in (("A", (tm, tk)), ("B", (tn, tk)), ("C", (tm, tn))):
        for _i in range(RANDOM_PARTITIONS):
            m, n, (sm, sn) = _random_tensor(rng, a, b)
            queries.append(f"part{op} {m} {n} {sm} {sn} {rng.randrange(nthr)}")
        for _i in range(RANDOM_THREADS):
            queries.append(f"frag{op} {rng.randrange(nthr)}")
    for _i in range(RANDOM_IDENTITY if ident else 0):
        m, n, _stride = _random_tensor(rng, tm, tn)
        queries.append(f"identC {m} {n} {rng.randrange(nthr)}")
    return queries


def _mma_answer(mma, query):
    op, *args = query.split()
    if op == "tv":
        return "\t".join([str(mma.thr_layout_vmnk), to_str(mma.tile_shape), str(mma.get_layoutA_TV()),
                          str(mma.get_layoutB_TV()), str(mma.get_layoutC_TV())])
    if op == "identC":
        m, n, thr = map(int, args)
        return to_str(mma.get_slice(thr).partition_C(make_identity_tensor((m, n))))
    which = op[-1]
    if op.startswith("part"):
        m, n, sm, sn, thr = map(int, args)
        tensor = Tensor(None, Layout((m, n), (sm, sn)))
        return _part(getattr(mma.get_slice(thr), f"partition_{which}")(tensor))
    thr = int(args[0])
    tile = mma.tile_shape
    dims = {"A": (0, 2), "B": (1, 2), "C": (0, 1)}[which]
    smem = Tensor(None, Layout(tuple(tile[d] * Int(2) for d in dims), LayoutRight))
    frag = _mirror(lambda: getattr(mma.get_slice(thr), f"partition_fragment_{which}")(smem))
    return "DESCRIPTOR" if isinstance(frag, str) and "descriptor" in frag else str(frag.layout)


def _copy_queries(rng, copy, ident):
    tm, tn = (int(size(t)) for t in copy.tiler_mn + (Int(1),) * (2 - len(copy.tiler_mn)))
    nthr = int(copy.size)
    queries = ["tv"]
    for op in ("S", "D"):
        for _i in range(RANDOM_PARTITIONS):
            m, n, (sm, sn) = _random_tensor(rng, tm, tn)
            queries.append(f"part{op} {m} {n} {sm} {sn} {rng.randrange(nthr)}")
    queries += [f"retile {rng.randrange(nthr)}" for _i in range(RANDOM_THREADS)]
    for _i in range(RANDOM_IDENTITY if ident else 0):
        m, n, _stride = _random_tensor(rng, tm, tn)
        queries.append(f"identS {m} {n} {rng.randrange(nthr)}")
    return queries


def _copy_answer(copy, query, fragment_of):
    op, *args = query.split()
    if op == "tv":
        return "\t".join([to_str(copy.tiler_mn), str(copy.layout_tv), str(copy.get_layoutS_TV()),
                          str(copy.get_layoutD_TV())])
    if op == "identS":
        m, n, thr = map(int, args)
        return to_str(copy.get_slice(thr).partition_S(make_identity_tensor((m, n))))
    if op.startswith("part"):
        m, n, sm, sn, thr = map(int, args)
        tensor = Tensor(None, Layout((m, n), (sm, sn)))
        thr_copy = copy.get_slice(thr)
        return _part(thr_copy.partition_S(tensor) if op == "partS" else thr_copy.partition_D(tensor))
    thr = int(args[0])
    return str(copy.get_slice(thr).retile_D(fragment_of(thr)).layout)


def _build_copy(kind, fields):
    """The mirror's TiledCopy for a listing line (after 'copy <id>'), and the retile fragment."""
    if kind == "tv":
        op, bits, thr, val = fields[:4]
        atom = copy_atom(op, int(bits))
        thr_layout, val_layout = parse_layout(thr), parse_layout(val)
        copy = make_tiled_copy(atom, thr_layout, val_layout)

        def fragment_of(t):
            tile = Tensor(None, Layout(copy.tiler_mn))
            return Tensor(None, make_fragment_like(copy.get_slice(t).partition_D(tile).layout))
        return copy, fragment_of
    which = "C" if kind == "mmaC_atom" else kind[-1]
    op, bits, mma_name, thr, perm = fields[:5]
    mma = make_tiled_mma(mma_atom(mma_name), parse_layout(thr), _permutation(perm))
    maker = make_tiled_copy_C_atom if kind == "mmaC_atom" else \
        {"A": make_tiled_copy_A, "B": make_tiled_copy_B, "C": make_tiled_copy_C}[which]
    copy = maker(copy_atom(op, int(bits)), mma)
    dims = {"A": (0, 2), "B": (1, 2), "C": (0, 1)}[which]

    def fragment_of(t):
        smem = Tensor(None, Layout(tuple(mma.tile_shape[d] * Int(2) for d in dims), LayoutRight))
        return getattr(mma.get_slice(t), f"partition_fragment_{which}")(smem)
    return copy, fragment_of


def test_tiled_corpus_matches_cpp(oracle, binaries):
    rng = random.Random(20250)
    bad = Mismatches()
    counts = {"mma-atom": 0, "copy-atom": 0, "mma": 0, "copy": 0, "invalid": 0, "identity": 0, "queries": 0}
    for binary in binaries:
        jobs = []   # (query line, label, mirror answer thunk)
        for fields in _listing(oracle, binary):
            identity = fields[-1] == "IDENT"   # answers identC / identS
            if identity:
                fields = fields[:-1]
                counts["identity"] += 1
            kind, ident = fields[0], fields[1]
            counts[kind] += 1
            label = " ".join(fields)
            if kind == "mma-atom":
                atom = mma_atom(fields[2])
                want = "\t".join(str(x) if not isinstance(x, tuple) else to_str(x) for x in
                                 (atom.thr_id, atom.shape_mnk, atom.layout_a_tv, atom.layout_b_tv, atom.layout_c_tv))
                jobs.append((f"mma-atom {ident}", label, lambda w=want: w))
            elif kind == "copy-atom":
                atom = copy_atom(fields[2], int(fields[3]))
                want = "\t".join(str(x) for x in (atom.thr_id, atom.val_layout_src, atom.val_layout_dst,
                                                  atom.val_layout_ref))
                jobs.append((f"copy-atom {ident}", label, lambda w=want: w))
            elif kind == "mma":
                mma = make_tiled_mma(mma_atom(fields[2]), parse_layout(fields[3]), _permutation(fields[4]))
                for q in _mma_queries(rng, mma, identity):
                    jobs.append((f"mma {ident} {q}", f"{label} :: {q}", lambda m=mma, q=q: _mma_answer(m, q)))
            elif fields[-1] == "INVALID":
                # C++ refuses to compile this TiledCopy; the mirror must refuse to build it
                counts["invalid"] += 1
                with pytest.raises(ValueError, match="too few"):
                    _build_copy(fields[2], fields[3:])
            else:
                copy, fragment_of = _build_copy(fields[2], fields[3:])
                for q in _copy_queries(rng, copy, identity):
                    jobs.append((f"copy {ident} {q}", f"{label} :: {q}",
                                 lambda c=copy, q=q, f=fragment_of: _copy_answer(c, q, f)))
        answers = _ask(oracle, binary, [q for q, _l, _f in jobs])
        for (q, label, mirror), got in zip(jobs, answers):
            bad.check(label, _mirror(mirror), got)
        counts["queries"] += len(jobs)
    print(f"tiled oracle: {counts}")
    least = {"mma": 13, "copy": 22} if len(PARTS) == 6 else {"mma": 6, "copy": 13}
    assert counts["mma"] >= least["mma"] and counts["copy"] >= least["copy"] and counts["mma-atom"] >= 40, counts
    assert counts["identity"] >= 8, counts
    assert not bad.rows, bad.report()
