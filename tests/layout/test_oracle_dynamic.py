"""The mirror against C++ CuTe on dynamic integers: thousands of seeded random requests answered by one
compiled program (tests/layout/oracle/dynamic_layouts.cpp), compared string for string."""

import os
import random

import pytest

from flashcute.layout import (
    Int, Layout, LayoutRight, Swizzle, _, coalesce, complement, composition, elem_less_mask, idx2crd,
    layout_table, local_partition, local_tile, logical_divide, logical_product, make_identity_tensor,
    make_tensor, to_str, zipped_divide, size,
)

SEP = "\x1e\n"
PROFILES = {1: lambda s: s[0], 2: lambda s: (s[0], s[1]), 3: lambda s: (s[0], s[1], s[2]),
            4: lambda s: (s[0], (s[1], s[2])), 5: lambda s: ((s[0], s[1]), s[2])}
NVALS = {1: 1, 2: 2, 3: 3, 4: 3, 5: 3}
TILERS = [(Int(64), Int(64)), (Int(128), Int(64)), (Int(16), Int(8)), (Int(32), Int(128))]
THREADS = [Layout((Int(2), Int(16))), Layout((Int(16), Int(8)), LayoutRight),
           Layout((Int(4), Int(8)), (Int(8), Int(1))), Layout((Int(32), Int(4)))]
SWIZZLES = [Swizzle(*w) for w in [(0, 3, 3), (1, 3, 3), (2, 3, 3), (3, 3, 3), (1, 4, 3), (2, 4, 3), (3, 4, 3), (2, 0, 3),
                                  (3, 2, 3), (2, 1, 5), (1, 2, 1), (3, 0, -3), (2, 4, -4), (0, 4, 3), (3, 3, 4), (1, 0, 2)]]
COUNT = 1500 * max(1, int(os.environ.get("FLASHCUTE_ORACLE_SCALE", "1")))


def rand_values(rng, profile, max_extent=9, neg=0.05):
    n = NVALS[profile]
    shape = [rng.randint(1, max_extent) for _i in range(n)]
    stride = [rng.choice([0, 1, 1, 2, 3, 4, 8, 16, shape[0], shape[0] * shape[-1]]) for _i in range(n)]
    stride = [-d if rng.random() < neg else d for d in stride]
    return shape, stride


def layout_of(profile, shape, stride):
    return Layout(PROFILES[profile](shape), PROFILES[profile](stride))


def req_layout(profile, shape, stride):
    return f"{profile} {' '.join(map(str, shape))} {' '.join(map(str, stride))}"


def _gen(kind, rng):
    """One (request line, mirror thunk) pair, or None when the mirror rejects the inputs."""
    p = rng.choice(list(PROFILES))
    sh, st = rand_values(rng, p)
    L = layout_of(p, sh, st)
    req = req_layout(p, sh, st)
    if kind == "eval":
        return f"eval {req}", lambda: "".join(f"{int(v)}," for v in L.offsets())
    if kind == "print":
        return f"print {req}", lambda: to_str(L)
    if kind == "idx2crd":
        return f"idx2crd {req}", lambda: "".join(to_str(idx2crd(i, L.shape)) + ";" for i in range(int(size(L))))
    if kind == "coalesce":
        return f"coalesce {req}", lambda: to_str(coalesce(L))
    if kind == "compose":
        q = rng.choice(list(PROFILES))
        bs, bd = rand_values(rng, q, max_extent=4, neg=0.0)
        B = layout_of(q, bs, bd)
        return f"compose {p} {q} {req[2:]} {req_layout(q, bs, bd)[2:]}", lambda: to_str(composition(L, B))
    if kind == "divide":
        t = rng.choice([d for d in range(1, int(size(L)) + 1) if int(size(L)) % d == 0])
        B = Layout(t, rng.choice([1, 1, 2]))
        return (f"divide {req} {t} {int(B.stride)}",
                lambda: f"{to_str(logical_divide(L, B))} {to_str(zipped_divide(L, B))}")
    if kind == "complement":
        a = Layout(rng.randint(1, 8), rng.randint(1, 6))
        c = int(a.shape) * int(a.stride) * rng.choice([1, 2, 3])
        return f"complement {a.shape} {a.stride} {c}", lambda: to_str(complement(a, c))
    if kind == "product":
        a = Layout(rng.randint(1, 6), rng.choice([1, 2]))
        q = rng.choice(list(PROFILES))
        bs, bd = rand_values(rng, q, max_extent=4, neg=0.0)
        B = layout_of(q, [abs(x) for x in bs], [abs(x) for x in bd])
        return (f"product {q} {a.shape} {a.stride} {req_layout(q, bs, bd)[2:]}",
                lambda: to_str(logical_product(a, B)))
    if kind == "print_layout":
        p = rng.choice([2, 4, 5])
        sh, st = rand_values(rng, p, max_extent=6, neg=0.0)
        L2 = layout_of(p, sh, st)
        return f"print_layout {req_layout(p, sh, st)}", lambda: layout_table(L2)
    if kind == "tile":
        t, k = rng.randrange(len(TILERS)), rng.randrange(3)
        m, n = rng.randint(1, 400), rng.randint(1, 300)
        dm, dn = (n, 1) if rng.random() < 0.5 else (1, m)
        tiler = TILERS[t]
        i, j = rng.randrange(-(-m // int(tiler[0]))), rng.randrange(-(-n // int(tiler[1])))
        coord = [(i, j), (_, j), (i, _)][k]
        tensor = make_tensor(None, Layout((m, n), (dm, dn)))
        return (f"tile {t} {k} {m} {n} {dm} {dn} {i} {j}",
                lambda: (lambda s: f"{to_str(s.layout)} {int(s.offset)}")(local_tile(tensor, tiler, coord)))
    if kind == "ident":
        t = rng.randrange(len(TILERS))
        m, n = rng.randint(1, 300), rng.randint(1, 200)
        tiler = TILERS[t]
        i, j = rng.randrange(-(-m // int(tiler[0]))), rng.randrange(-(-n // int(tiler[1])))

        def thunk():
            s = local_tile(make_identity_tensor((m, n)), tiler, (i, j))
            return to_str(s) + " " + "".join(str(int(b)) for b in elem_less_mask(s, (m, n)))

        return f"ident {t} {m} {n} {i} {j}", thunk
    if kind == "partition":
        r = rng.randrange(len(THREADS))
        thr = THREADS[r]
        m, n = rng.randint(1, 200) * int(size(thr, 0)), rng.randint(1, 40) * int(size(thr, 1))
        dm, dn = (n, 1) if rng.random() < 0.5 else (1, m)
        idx = rng.randrange(int(size(thr)))
        tensor = make_tensor(None, Layout((m, n), (dm, dn)))
        return (f"partition {r} {m} {n} {dm} {dn} {idx}",
                lambda: (lambda s: f"{to_str(s.layout)} {int(s.offset)}")(local_partition(tensor, thr, idx)))
    if kind == "swizzle":
        w = rng.randrange(len(SWIZZLES))
        xs = [rng.randrange(1 << 16) for _i in range(32)]
        return f"swizzle {w} {' '.join(map(str, xs))}", lambda: "".join(f"{int(SWIZZLES[w](x))}," for x in xs)
    raise ValueError(kind)


KINDS = ["eval", "print", "idx2crd", "coalesce", "compose", "divide", "complement", "product", "print_layout",
         "tile", "ident", "partition", "swizzle"]


def requests(kind, count=COUNT):
    rng = random.Random(f"dynamic:{kind}")
    out = []
    tries = 0
    while len(out) < count and tries < 50 * count:
        tries += 1
        req, thunk = _gen(kind, rng)
        try:
            expected = thunk()
        except (ValueError, TypeError):
            continue  # the mirror rejects (e.g. non-divisible dynamic composition): C++ would compute garbage
        out.append((req, expected))
    return out


@pytest.fixture(scope="module")
def dynamic_runs(oracle):
    batches = {kind: requests(kind) for kind in KINDS}
    stdin = "".join(req + "\n" for kind in KINDS for req, _e in batches[kind])
    answers = oracle.run_oracle("dynamic_layouts", stdin).split(SEP)[:-1]
    total = sum(len(b) for b in batches.values())
    assert len(answers) == total, f"{len(answers)} answers for {total} requests"
    out, k = {}, 0
    for kind in KINDS:
        n = len(batches[kind])
        out[kind] = (batches[kind], answers[k:k + n])
        k += n
    return out


@pytest.mark.parametrize("kind", KINDS)
def test_dynamic_requests_match_cpp(kind, dynamic_runs):
    batch, answers = dynamic_runs[kind]
    assert len(batch) >= COUNT // 2, f"too few {kind} requests generated ({len(batch)})"
    bad = [f"{req}\n    mirror: {want!r}\n    C++:    {got!r}" for (req, want), got in zip(batch, answers) if want != got]
    print(f"{kind}: {len(batch)} dynamic requests compared with C++")
    assert not bad, f"{len(bad)} of {len(batch)} {kind} requests differ from C++:\n" + "\n".join(bad[:10])

