"""The SM90 kernel's persistent schedule (csrc/sm90/tile_scheduler.h), walked on the host: every Q tile of every
(batch, head) is visited exactly once across the CTAs, and causal work is balanced across them; for packed
(varlen) batches, every tile of every sequence exactly once, longest sequences first, and balanced.

tests/sm90_scheduler/enumerate.cpp includes the kernel's own header and prints each CTA's tiles in the order
the kernel's producer and consumers walk them; it is built with g++ (no GPU, no nvcc) like the layout oracle.
"""

import subprocess
import sys
from functools import lru_cache
from math import ceil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.layout import oracle  # noqa: E402

PROGRAM = ROOT / "tests" / "sm90_scheduler" / "enumerate.cpp"
HEADERS = [ROOT / "csrc" / "sm90" / "tile_scheduler.h", ROOT / "csrc" / "common" / "block_range.h",
           ROOT / "csrc" / "common" / "params.h", ROOT / "csrc" / "common" / "seqlen.h"]


@lru_cache(maxsize=None)
def enumerate_binary():
    return oracle.build_file_or_fail(PROGRAM, [ROOT / "csrc"], HEADERS)


def walk(causal, block_m, batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim=128, num_sms=132, lengths=None):
    """{cta: [(m_block, head, batch), ...]} in visiting order, and {cta: K/V blocks visited}. lengths: (lengths_q,
    lengths_k) of a packed batch, whose maxima seqlen_q and seqlen_k are."""
    args = [int(causal), block_m, batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim, num_sms]
    if lengths is not None:
        args += [*lengths[0], *lengths[1]]
    r = subprocess.run([str(enumerate_binary()), *map(str, args)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    tiles, work = {}, {}
    for line in r.stdout.splitlines():
        kind, cta, *rest = line.split()
        if kind == "tile":
            tiles.setdefault(int(cta), []).append(tuple(map(int, rest)))
        else:
            work[int(cta)] = int(rest[0])
    return tiles, work


PROBLEMS = [  # (batch, heads_q, heads_kv, seqlen_q, seqlen_k)
    (1, 1, 1, 1, 1),
    (2, 4, 2, 113, 203),
    (1, 2, 1, 1000, 1000),
    (2, 3, 3, 1023, 1024),
    (1, 2, 2, 4097, 4097),
    (1, 2, 2, 300, 200),    # causal: the first Q blocks see no key
    (1, 2, 2, 17, 4097),
    (1, 1, 1, 2048, 1),
    (1, 2, 2, 5, 0),
    (3, 8, 1, 700, 900),    # MQA, many tiles per CTA
    (1, 64, 8, 16384, 16384),
    (32, 32, 32, 512, 512),
]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("block_m", [128, 192])
@pytest.mark.parametrize("num_sms", [132, 7])
@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: "b{}_h{}-{}_s{}-{}".format(*p))
def test_every_tile_exactly_once(causal, block_m, num_sms, problem):
    batch, heads_q, heads_kv, seqlen_q, seqlen_k = problem
    tiles, _ = walk(causal, block_m, batch, heads_q, heads_kv, seqlen_q, seqlen_k, num_sms=num_sms)
    assert 0 < len(tiles) <= num_sms
    visited = [t for cta in tiles.values() for t in cta]
    expected = {(m, h, b) for m in range(ceil(seqlen_q / block_m)) for h in range(heads_q) for b in range(batch)}
    assert len(visited) == len(set(visited)), "a tile is visited twice"
    assert set(visited) == expected


@pytest.mark.parametrize("head_dim, batch, seqlen", [(64, 32, 512), (128, 8, 2048), (128, 1, 16384),
                                                     (256, 1, 16384), (256, 4, 4096)])
def test_causal_work_is_balanced(head_dim, batch, seqlen):
    """Causal units pair Q block last - p with block p: the busiest CTA does at most ~1/waves more than the mean
    (a static round-robin over single causal blocks reached 1.2-1.8x here)."""
    heads = 2048 // head_dim
    tiles, work = walk(True, 128, batch, heads, heads, seqlen, seqlen, head_dim=head_dim)
    units = heads * batch * ceil(seqlen / 128) / 2
    waves = units / len(tiles)
    mean = sum(work.values()) / len(work)
    assert max(work.values()) / mean <= 1 + 1 / waves + 0.01


def test_causal_unit_runs_long_block_first():
    tiles, _ = walk(True, 128, 1, 1, 1, 1024, 1024, num_sms=4)  # 8 Q blocks: units (7, 0) (6, 1) (5, 2) (4, 3)
    assert [[m for m, _, _ in seq] for _, seq in sorted(tiles.items())] == [[7, 0], [6, 1], [5, 2], [4, 3]]


def walk_varlen(causal, block_m, lengths_q, lengths_k, heads_q=4, heads_kv=2, num_sms=132):
    return walk(causal, block_m, len(lengths_q), heads_q, heads_kv, max(lengths_q), max(lengths_k), num_sms=num_sms,
                lengths=(lengths_q, lengths_k))


VARLEN_PROBLEMS = [  # (lengths_q, lengths_k)
    ([1, 0, 17, 113, 203, 64], [239, 7, 0, 203, 113, 64]),
    ([1000, 4097, 17, 1], [1000, 4097, 33, 1]),
    ([0, 0], [5, 0]),
    ([16384] + [256] * 64, [16384] + [256] * 64),
    ([129, 300, 5000, 77, 640], [129, 300, 5000, 77, 640]),
]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("block_m", [128, 192])
@pytest.mark.parametrize("num_sms", [132, 7])
@pytest.mark.parametrize("problem", range(len(VARLEN_PROBLEMS)))
def test_varlen_every_tile_exactly_once(causal, block_m, num_sms, problem):
    lengths_q, lengths_k = VARLEN_PROBLEMS[problem]
    tiles, _ = walk_varlen(causal, block_m, lengths_q, lengths_k, num_sms=num_sms)
    visited = [t for cta in tiles.values() for t in cta]
    expected = {(m, h, b) for b, length in enumerate(lengths_q) for m in range(ceil(length / block_m))
                for h in range(4)}
    assert len(visited) == len(set(visited)), "a tile is visited twice"
    assert set(visited) == expected


def test_varlen_longest_sequences_first():
    """Every CTA's first tile is of the longest sequence, and its last of a shorter one than its first."""
    lengths = [300, 9000, 128, 4000, 2000]
    tiles, _ = walk_varlen(False, 128, lengths, lengths, heads_q=16, heads_kv=16, num_sms=16)
    assert all(seq[0][2] == 1 for seq in tiles.values())
    assert all(lengths[seq[-1][2]] < lengths[seq[0][2]] for seq in tiles.values())


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_varlen_work_is_balanced(causal):
    """64 sequences of 128-4096 tokens (bench_varlen.py's uniform mix), 16 heads on 132 SMs: dealt longest first,
    the busiest CTA does little more than the mean."""
    import random
    rng = random.Random(0)
    lengths = [rng.randint(128, 4096) for _ in range(64)]
    _, work = walk_varlen(causal, 128, lengths, lengths, heads_q=16, heads_kv=16)
    mean = sum(work.values()) / len(work)
    assert max(work.values()) / mean <= 1.05


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_varlen_walk_mirror_is_the_kernels(causal):
    """flashcute.explain's varlen_walk (the varlen_tiling picture's numbers) is the scheduler's walk: one head, one
    CTA, so the CTA visits every tile in the walk's order."""
    from flashcute.explain.draw import varlen_walk
    lengths = [300, 0, 700, 129, 40, 1000, 129]
    tiles, _ = walk_varlen(causal, 128, lengths, lengths, heads_q=1, heads_kv=1, num_sms=1)
    assert [(b, m) for m, _, b in tiles[0]] == [(b, m) for b, m, _ in varlen_walk(lengths, 128, 128, causal)]


VARLEN_BWD_LENGTHS = [[1, 0, 17, 113, 203, 64], [1000, 4097, 33, 1], [0, 0, 5], [128, 256, 129],
                      [16384] + [256] * 64, [256] * 64 + [16384]]


@pytest.mark.parametrize("block_rows", [64, 128])
@pytest.mark.parametrize("lengths", VARLEN_BWD_LENGTHS)
def test_backward_varlen_tables_cover_every_block_once(lengths, block_rows):
    """The SM90 backward's tables over a packed batch (at most total / block_rows + batch entries; K/V blocks, and
    Q blocks of 64 rows for the pre- and postprocess): every block of every sequence exactly once, in sequence
    order, each one's blocks in increasing order, the rest of the entries idle."""
    r = subprocess.run([str(enumerate_binary()), "blocks", str(block_rows), *map(str, lengths)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    ctas = [line.split()[2:] for line in r.stdout.splitlines()]
    assert len(ctas) == sum(lengths) // block_rows + len(lengths)
    visited = [(int(b), int(n)) for b, n in (c for c in ctas if c != ["none"])]
    assert visited == [(b, n) for b in range(len(lengths)) for n in range(ceil(lengths[b] / block_rows))]
    assert all(c == ["none"] for c in ctas[len(visited):])


@pytest.mark.parametrize("highest_first", [False, True], ids=["increasing", "highest-first"])
@pytest.mark.parametrize("lengths", VARLEN_BWD_LENGTHS)
def test_backward_varlen_kernel_grid_runs_in_the_fixed_length_order(lengths, highest_first):
    """The SM90 backward kernel's 1-D grid over a packed batch ((total / 128 + batch) x heads CTAs): every
    (sequence, head, K/V block) exactly once, in the fixed-length grid's order with sequences for batch (sequence
    slowest, then head, then block; blocks decreasing for the deterministic causal kernel), the rest idle."""
    heads = 3
    r = subprocess.run([str(enumerate_binary()), "kernel", "128", str(heads), str(int(highest_first)),
                        *map(str, lengths)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    ctas = [line.split()[2:] for line in r.stdout.splitlines()]
    assert len(ctas) == (sum(lengths) // 128 + len(lengths)) * heads
    visited = [tuple(map(int, c)) for c in ctas if c != ["none"]]
    blocks = lambda b: range(ceil(lengths[b] / 128))
    assert visited == [(b, h, n) for b in range(len(lengths)) for h in range(heads)
                       for n in (reversed(blocks(b)) if highest_first else blocks(b))]
    assert all(c == ["none"] for c in ctas[len(visited):])
