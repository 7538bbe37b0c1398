"""Decoding with a KV cache: torch.ops.flashcute.fwd_kvcache and flashcute.flash_attn_with_kvcache, and the split-KV
decode kernel that torch.ops.flashcute.fwd (flash_attn_func) takes for decode-shaped inputs.

Each call is held to the float64 reference of tests/reference.py with test_varlen.py's rule: sequence b attends to
the keys [0, cache_seqlens[b]) of its cache (gathered through the block table when paged) followed by the appended
k/v rows, at most the capacity of the cache, causal aligned bottom-right per sequence; out and lse are within 2x the
error of PyTorch's own attention in the inputs' precision (plus the reference's rounding), rows that see no key give
out = 0 and lse exactly -inf. The appended rows must land in exactly their slots and every other element of the
caches (and of the storage they are views of: guard heads, pages no sequence holds) stays bit-identical. Outputs land
in NaN-poisoned memory, and a second call (which writes the same rows again) is bitwise identical.

Batches mix cache lengths 0, 1, the capacity and two below it (an append running past the capacity); page sizes 16,
64 and 256 with shuffled block tables over more pages than needed; sq 1, 4 and 16, causal or not, with and without
appended rows; MHA, GQA and MQA; strided q, k/v and caches; forced num_splits; CUDA graph replay with new lengths and
block tables; torch.compile; opcheck; stale NaN slots past the lengths that must never be read. The full dtype x head
dim sweep runs on the basic cases only. The CPU tests at the end need no GPU (fake kernel, schema, argument errors
raised before any kernel).
"""

import dataclasses
import itertools
import math
import re

import pytest
import torch

import flashcute
from flashcute.explain import DEVICES, decode
from flashcute.explain.occupancy import H200
from reference import attention_ref

HAS_CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")

if HAS_CUDA:
    from test_bwd import assert_grads_close, capture_graph, make_dout, skip_unless_built
    from test_fwd import (DTYPE_NAMES, DTYPES, HEAD_DIMS, assert_close_to_reference, check_fwd,
                          has_kernel, make_qkv, poison_next_allocations, seed_for)
else:
    DTYPES, DTYPE_NAMES, HEAD_DIMS = [], {}, []

NAMES = {torch.float16: "fp16", torch.bfloat16: "bf16", None: "-"}
KV_HEADS = {"mha": (4, 4), "gqa": (8, 2), "mqa": (8, 1)}
# None: a contiguous (batch, capacity, heads_kv, head_dim) cache. On Hopper pages of a multiple of 64 rows arrive by
# TMA (csrc/sm80/paged_tma.h) and 16-row pages by cp.async, as every page size does on Ampere.
PAGE_SIZES = [None, 16, 64, 256]

# (seqlen_q, seqlen_new, causal): decoding over the cache as it is, the usual step (append one token, attend),
# speculative / chunked steps appending sq rows that are causal among themselves, sq > the rows a sequence has.
CASES = [(1, 0, False), (1, 1, True), (4, 4, False), (4, 4, True), (16, 16, True), (16, 0, True)]


def kind(page_size):
    return "contiguous" if page_size is None else f"paged{page_size}"


# --------------------------------------------------------------------------------------------- helpers

def skip_unless_decode_built(dtype, head_dim):
    """test_bwd.py's skip (the sm80 forward and backward for this dtype at or above head_dim), and the same for the
    decode kernels (decode_sm80_<dtype>_hdim<d>) that fwd_kvcache runs."""
    skip_unless_built(dtype, head_dim)
    if not has_kernel("decode", "sm80", dtype, head_dim):
        pytest.skip(f"no sm80 {DTYPE_NAMES[dtype]} decode kernel for head dim {head_dim} in this build")


def capacity_for(keys, page_size):
    """The capacity of a cache of at least `keys` rows per sequence: whole pages when paged."""
    return keys if page_size is None else -(-keys // page_size) * page_size


def mixed_lengths(capacity):
    """Cache lengths before the call: empty, one key, full, two below full (an append of more runs past the
    capacity) and 250 (an append of 7 rows or more crosses the page boundary at 256 for page sizes 16, 64, 256)."""
    return [0, 1, capacity, capacity - 2, 250]


@dataclasses.dataclass
class KVCacheInputs:
    """One call's arguments. `storage` is the one tensor both caches are views of (contiguous, offset 0), so the
    whole of it can be compared bitwise; `lengths` are cache_seqlens as Python ints (None: no cache_seqlens)."""
    q: torch.Tensor
    k_cache: torch.Tensor
    v_cache: torch.Tensor
    k: torch.Tensor | None
    v: torch.Tensor | None
    cache_seqlens: torch.Tensor | None
    block_table: torch.Tensor | None
    lengths: list | None
    storage: torch.Tensor
    cache_leftpad: torch.Tensor | None = None  # contiguous caches: each sequence's first key
    leftpads: list | None = None  # cache_leftpad as Python ints

    @property
    def page_size(self):
        return None if self.block_table is None else self.k_cache.shape[1]

    @property
    def capacity(self):
        return self.k_cache.shape[1] * (1 if self.block_table is None else self.block_table.shape[1])

    def optional(self):
        return dict(k=self.k, v=self.v, cache_seqlens=self.cache_seqlens, block_table=self.block_table,
                    cache_leftpad=self.cache_leftpad)


def make_kvcache(lengths, seqlen_q, seqlen_new, heads_q, heads_kv, head_dim, dtype, capacity, page_size=None,
                 layout="contiguous", seed=0, batch=None):
    """Random q, caches (every slot, valid or not, holds random values), new rows (none when seqlen_new is 0).

    Paged: batch * capacity / page_size pages of the num_pages = that + 7 are handed out in a random order.
    layout "contiguous": q, k, v contiguous, the caches the two halves of one tensor. layout "strided": q a slice of
    a wider tensor, k and v slices of one packed kv tensor, the caches slices of one tensor whose heads are
    [k_cache heads, a guard head, v_cache heads], the block table the first columns of a wider table."""
    batch = len(lengths) if lengths is not None else batch
    generator = torch.Generator(device="cuda").manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=generator, device="cuda", dtype=dtype)

    block_table = None
    rows = (batch, capacity)
    if page_size is not None:
        assert capacity % page_size == 0
        blocks = capacity // page_size
        num_pages = batch * blocks + 7
        rows = (num_pages, page_size)
        pages = torch.randperm(num_pages, generator=generator, device="cuda")[:batch * blocks].view(batch, blocks)
        if layout == "strided":  # the other columns name pages in use: reading them would show
            wide = torch.randint(0, num_pages, (batch, blocks + 5), generator=generator, device="cuda",
                                 dtype=torch.int32)
            wide[:, :blocks] = pages
            block_table = wide[:, :blocks]
        else:
            block_table = pages.to(torch.int32)

    if layout == "contiguous":
        storage = randn(2, *rows, heads_kv, head_dim)
        k_cache, v_cache = storage.unbind(0)
        q = randn(batch, seqlen_q, heads_q, head_dim)
        k, v = randn(batch, seqlen_new, heads_kv, head_dim), randn(batch, seqlen_new, heads_kv, head_dim)
    else:
        assert layout == "strided"
        storage = randn(*rows, 2 * heads_kv + 1, head_dim)
        k_cache, v_cache = storage[:, :, :heads_kv], storage[:, :, heads_kv + 1:]
        q = randn(batch, seqlen_q, heads_q + 2, head_dim)[:, :, 1:heads_q + 1]
        kv = randn(batch, seqlen_new, 2 * heads_kv, head_dim)
        k, v = kv[:, :, :heads_kv], kv[:, :, heads_kv:]
    if seqlen_new == 0:
        k = v = None
    cache_seqlens = None if lengths is None else torch.tensor(lengths, device="cuda", dtype=torch.int32)
    return KVCacheInputs(q, k_cache, v_cache, k, v, cache_seqlens, block_table,
                         None if lengths is None else list(lengths), storage)


def twin(t, inputs, copy):
    """The view of `copy` (a clone of inputs.storage) that t is of inputs.storage."""
    return copy.as_strided(t.shape, t.stride(), t.storage_offset() - inputs.storage.storage_offset())


def cache_rows(cache, block_table, b):
    """Sequence b's key (or value) rows in logical order, (capacity, heads_kv, head_dim)."""
    if block_table is None:
        return cache[b]
    return cache[block_table[b].long()].flatten(0, 1)


def reference(inputs, before, causal, softmax_scale=None):
    """{upcast: (out, lse)}: per sequence, attention_ref over the first cache_seqlens[b] rows of the caches as they
    were before the call (`before`, a clone of inputs.storage) followed by the new rows, cut at the capacity, less
    the first cache_leftpad[b] of them."""
    k_before, v_before = twin(inputs.k_cache, inputs, before), twin(inputs.v_cache, inputs, before)
    result = {}
    for upcast in (True, False):
        outs, lses = [], []
        for b in range(inputs.q.shape[0]):
            cached = inputs.capacity if inputs.lengths is None else inputs.lengths[b]
            keys, values = (cache_rows(t, inputs.block_table, b)[:cached] for t in (k_before, v_before))
            if inputs.k is not None:
                keys = torch.cat([keys, inputs.k[b]])[:inputs.capacity]
                values = torch.cat([values, inputs.v[b]])[:inputs.capacity]
            if inputs.leftpads is not None:
                keys, values = keys[inputs.leftpads[b]:], values[inputs.leftpads[b]:]
            out, lse = attention_ref(inputs.q[b:b + 1], keys[None], values[None], softmax_scale, causal,
                                     upcast=upcast)
            outs.append(out)
            lses.append(lse)
        result[upcast] = (torch.cat(outs), torch.cat(lses))
    return result


def expected_storage(inputs, before):
    """`before` with row i of k[b] / v[b] written to key cache_seqlens[b] + i of the caches, where that is below
    the capacity (through the block table when paged): the only elements a call may change."""
    expected = before.clone()
    if inputs.k is None:
        return expected
    for new, cache in ((inputs.k, inputs.k_cache), (inputs.v, inputs.v_cache)):
        view = twin(cache, inputs, expected)
        for b, length in enumerate(inputs.lengths):
            keys = torch.arange(length, min(length + new.shape[1], inputs.capacity), device="cuda")
            if inputs.block_table is None:
                view[b, keys] = new[b, :len(keys)]
            else:
                pages = inputs.block_table[b, keys // inputs.page_size].long()
                view[pages, keys % inputs.page_size] = new[b, :len(keys)]
    return expected


def assert_bitwise_equal(actual, expected, what):
    """Bit patterns, so NaN compares equal to itself."""
    bits = {2: torch.int16, 4: torch.int32, 8: torch.int64}[actual.element_size()]
    same = actual.view(bits) == expected.view(bits)
    if not bool(same.all()):
        where = (~same).nonzero()[:4].tolist()
        raise AssertionError(f"{what}: {int((~same).sum())} elements differ, the first at {where}")


@dataclasses.dataclass
class Expected:
    refs: dict
    storage: torch.Tensor
    read_only: list  # (name, tensor, its copy before the call)


def expect(inputs, causal, softmax_scale=None):
    """What a call must give; taken before the call (which writes into the caches)."""
    before = inputs.storage.clone()
    read_only = [(name, t, t.clone()) for name, t in dict(q=inputs.q, **inputs.optional()).items() if t is not None]
    return Expected(reference(inputs, before, causal, softmax_scale), expected_storage(inputs, before), read_only)


def assert_matches(inputs, expected, out, lse):
    """test_varlen.py's rule on out and lse, the caches bit for bit, the read-only arguments untouched."""
    q = inputs.q
    batch, seqlen_q, heads_q, _ = q.shape
    (out_ref, lse_ref), (out_torch, lse_torch) = expected.refs[True], expected.refs[False]
    assert out.shape == q.shape and out.dtype == q.dtype and out.is_contiguous(), (out.shape, out.dtype, out.stride())
    assert lse.shape == (batch, heads_q, seqlen_q) and lse.dtype == torch.float32, (lse.shape, lse.dtype)
    assert_close_to_reference(out, lse, out_ref, lse_ref, out_torch, lse_torch)
    assert torch.all(out[(lse_ref == -math.inf).transpose(1, 2)] == 0), "a row that sees no key must give out = 0"

    assert_bitwise_equal(inputs.storage, expected.storage, "the caches (new rows in their slots, all else as before)")
    for name, t, copy in expected.read_only:
        assert torch.equal(t, copy), f"{name} was modified"


def run_kvcache(inputs, causal, softmax_scale=None, num_splits=0, backend="auto"):
    """flash_attn_with_kvcache with return_lse, out and lse (and, for a forced num_splits, float32 blocks the size
    of the split accumulators) allocated in NaN-poisoned memory."""
    batch, seqlen_q, heads_q, head_dim = inputs.q.shape
    specs = [(inputs.q.shape, inputs.q.dtype), ((batch, heads_q, seqlen_q), torch.float32)]
    if num_splits > 0:
        specs += [((num_splits, batch, heads_q, seqlen_q, head_dim), torch.float32),
                  ((num_splits, batch, heads_q, seqlen_q), torch.float32)]
    poison_next_allocations(*specs)
    return flashcute.flash_attn_with_kvcache(inputs.q, inputs.k_cache, inputs.v_cache, **inputs.optional(),
                                             softmax_scale=softmax_scale, causal=causal, num_splits=num_splits,
                                             return_lse=True, backend=backend)


def check_kvcache(inputs, causal, softmax_scale=None, num_splits=0, backend="auto"):
    """Run a call (twice: the second writes the same rows again) and hold it to the reference; returns (out, lse)."""
    expected = expect(inputs, causal, softmax_scale)
    out, lse = run_kvcache(inputs, causal, softmax_scale, num_splits, backend)
    assert_matches(inputs, expected, out, lse)
    out_again, lse_again = run_kvcache(inputs, causal, softmax_scale, num_splits, backend)
    assert torch.equal(out, out_again) and torch.equal(lse, lse_again), "two runs differ"
    assert_bitwise_equal(inputs.storage, expected.storage, "the caches after a second call")
    return out, lse


# ---------------------------------------------------------------------------------------- correctness

BASIC_CASES = [(None, 1, 1, False), (64, 4, 4, True)]  # (page_size, seqlen_q, seqlen_new, causal)


@needs_cuda
@pytest.mark.parametrize("page_size, seqlen_q, seqlen_new, causal", BASIC_CASES,
                         ids=[f"{kind(c[0])}-sq{c[1]}-new{c[2]}-{'causal' if c[3] else 'full'}" for c in BASIC_CASES])
@pytest.mark.parametrize("head_dim", HEAD_DIMS)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_NAMES.get)
def test_kvcache_head_dims(library, dtype, head_dim, page_size, seqlen_q, seqlen_new, causal):
    """Every dtype and head dim: GQA (8 query heads on 2 KV heads), cache lengths 0, 1, full, full - 2 and 250."""
    skip_unless_decode_built(dtype, head_dim)
    capacity = capacity_for(300, page_size)
    seed = seed_for("kvcache", dtype, head_dim, page_size, seqlen_q, seqlen_new, causal)
    inputs = make_kvcache(mixed_lengths(capacity), seqlen_q, seqlen_new, 8, 2, head_dim, dtype, capacity, page_size,
                          seed=seed)
    check_kvcache(inputs, causal)


GRID = [  # dtype and head dim alternate from one (page size, heads) block of CASES to the next, so each case has both
    (page_size, heads, case, (torch.float16, torch.bfloat16)[(i + i // len(CASES)) % 2], (64, 128)[(i // 2) % 2])
    for i, (page_size, heads, case) in enumerate(itertools.product(PAGE_SIZES, KV_HEADS, CASES))
]


@needs_cuda
@pytest.mark.parametrize(
    "page_size, heads, case, dtype, head_dim", GRID,
    ids=[f"{kind(c[0])}-{c[1]}-sq{c[2][0]}-new{c[2][1]}-{'causal' if c[2][2] else 'full'}-{NAMES[c[3]]}-d{c[4]}"
         for c in GRID],
)
def test_kvcache_grid(library, page_size, heads, case, dtype, head_dim):
    """Contiguous and paged caches (page sizes 16, 64, 256, shuffled block tables) x MHA/GQA/MQA x CASES; the dtype
    and head dim (64, 128) rotate."""
    skip_unless_decode_built(dtype, head_dim)
    seqlen_q, seqlen_new, causal = case
    heads_q, heads_kv = KV_HEADS[heads]
    capacity = capacity_for(300, page_size)
    seed = seed_for("kvcache-grid", page_size, heads, case)
    inputs = make_kvcache(mixed_lengths(capacity), seqlen_q, seqlen_new, heads_q, heads_kv, head_dim, dtype, capacity,
                          page_size, seed=seed)
    check_kvcache(inputs, causal)


@needs_cuda
@pytest.mark.parametrize("seqlen_q, seqlen_new, causal", [(1, 1, False), (4, 4, True), (1, 3, True)])
@pytest.mark.parametrize("page_size", [None, 64], ids=kind)
@pytest.mark.parametrize("num_splits", [0, 1, 3, 64])
def test_num_splits(library, num_splits, page_size, seqlen_q, seqlen_new, causal):
    """Automatic (0) and forced split counts over long caches; 64 is more splits than most sequences have key blocks
    (empty splits), and sequences of 0 and 1 keys leave all but one split (or all) empty. The split-KV kernel
    copies new rows itself where they are no more than the queries (each into the split that reads it), else the
    append kernel runs first (three rows for one query)."""
    skip_unless_decode_built(torch.bfloat16, 128)
    capacity = capacity_for(2000, page_size)
    seed = seed_for("kvcache-splits", num_splits, page_size, seqlen_q)
    inputs = make_kvcache([capacity, 0, 1, 1500, 700], seqlen_q, seqlen_new, 8, 2, 128, torch.bfloat16, capacity,
                          page_size, seed=seed)
    check_kvcache(inputs, causal, num_splits=num_splits)


@needs_cuda
@pytest.mark.parametrize("seqlen_q, head_dim", [(1, 64), (1, 96), (1, 128), (1, 192), (1, 256), (16, 64)])
@pytest.mark.parametrize("page_size", [None, 16, 64], ids=kind)
@pytest.mark.parametrize("num_splits", [0, 1])
def test_long_caches(library, num_splits, page_size, seqlen_q, head_dim):
    """Caches of more than 16 K/V blocks (4097 keys and up): a paged cache read by cp.async also prefetches
    block-table lines 16 blocks ahead of their lookups. One split walks every block of a sequence, so a CTA streams
    4096 keys or more and (Hopper, contiguous or TMA) launches alone on its SM, with more shared memory than the
    same kernel took just before for a short cache, at two CTAs per SM (on an H200, the key-split tile with two K/V
    stages, and the 64-row tile's TMA pages still two per SM: benchmarks/notes.md#d-decode-fast-memory). GQA sq 1
    takes the key-split tile at every head dim (its blocks: 256 keys at hdim 64, 128 at 96 and 128, 64 above), sq 16
    (hdim 64) the 64-row tile on 128-key blocks."""
    skip_unless_decode_built(torch.bfloat16, head_dim)
    for keys, lengths in ((320, [300, 17]), (4600, [4600, 4097, 0, 17, 1000])):  # the same kernel, short then long
        capacity = capacity_for(keys, page_size)
        seed = seed_for("kvcache-long", keys, num_splits, page_size, seqlen_q, head_dim)
        inputs = make_kvcache(lengths, seqlen_q, 1, 8, 2, head_dim, torch.bfloat16, capacity, page_size, seed=seed)
        check_kvcache(inputs, causal=True, num_splits=num_splits)


@needs_cuda
@pytest.mark.parametrize("heads_q, heads_kv", [(32, 8), (16, 16)])
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("page_size", [None, 64], ids=kind)
@pytest.mark.parametrize("seqlen_new", [0, 1])
def test_equal_shares_across_sequences(library, seqlen_new, page_size, head_dim, heads_q, heads_kv):
    """Long caches over few lanes (a lane: a Q block of a K/V head): the plan cuts all sequences' blocks into equal
    shares, one CTA per SM, which cross sequences (benchmarks/notes.md#d-decode-equal-shares): 8 lanes x 16 shares or
    16 x 8 on 132 SMs. Ragged lengths and a sequence without keys; with seqlen_new, the split-KV kernel appends the
    new key itself (a one-wave grid); 64-row pages go by TMA on Hopper."""
    skip_unless_decode_built(torch.bfloat16, head_dim)
    lengths, capacity = [70001, 0, 17, 9000], 70016
    for device in (DEVICES["sm80"][-1], H200):  # the H100's and the H200's plans
        plan = decode.decode_plan("bf16", head_dim, len(lengths), heads_q, heads_kv, 1, capacity, page_size, device,
                                  seqlen_new)
        assert (plan["equal_shares"], plan["grid_ctas"], plan["ctas_per_sm"]) == (True, 128, 1), plan
        assert plan["blocks_per_share"] % plan["kv_blocks"] != 0 and plan["append"] in (None, "split-kv"), plan
    seed = seed_for("kvcache-equal-shares", seqlen_new, page_size, head_dim, heads_q)
    inputs = make_kvcache(lengths, 1, seqlen_new, heads_q, heads_kv, head_dim, torch.bfloat16, capacity, page_size,
                          seed=seed)
    check_kvcache(inputs, causal=True)


@needs_cuda
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("page_size", [None, 64], ids=kind)
def test_waves_run_as_equal_shares(library, page_size, head_dim):
    """A grid of long unsplit CTAs in more than one wave (24 sequences x 8 K/V heads of a 4352-key cache: 192 CTAs
    on 132 SMs) runs as one wave of equal shares, each CTA walking about 1.5 sequences (benchmarks/notes.md
    #d-decode-waves-as-shares); ragged lengths, full, empty and one-key caches among them."""
    skip_unless_decode_built(torch.bfloat16, head_dim)
    capacity = 4352
    lengths = [capacity, 0, 1, 17, 4097, 300] + [capacity - 37 * i for i in range(18)]
    for device in (DEVICES["sm80"][-1], H200):
        plan = decode.decode_plan("bf16", head_dim, len(lengths), 32, 8, 1, capacity, page_size, device)
        assert (plan["waves_as_shares"], plan["equal_shares"], plan["grid_ctas"]) == (True, True, 128), plan
    seed = seed_for("kvcache-waves", page_size, head_dim)
    inputs = make_kvcache(lengths, 1, 0, 32, 8, head_dim, torch.bfloat16, capacity, page_size, seed=seed)
    check_kvcache(inputs, causal=True)


@needs_cuda
@pytest.mark.parametrize("page_size", [None, 16], ids=kind)
def test_rows_without_keys_are_zero_with_minus_inf_lse(library, page_size):
    # Causal, sq = 4, cache lengths 0, 2 and 5: query i of sequence b sees keys j <= i + L_b - 4.
    skip_unless_decode_built(torch.float16, 64)
    capacity = capacity_for(64, page_size)
    inputs = make_kvcache([0, 2, 5], 4, 0, 4, 4, 64, torch.float16, capacity, page_size, seed=41)
    out, lse = check_kvcache(inputs, causal=True)
    assert torch.all(out[0] == 0) and torch.all(lse[0] == -math.inf)
    assert torch.all(out[1, :2] == 0) and torch.all(lse[1, :, :2] == -math.inf) and lse[1, :, 2:].isfinite().all()
    assert lse[2].isfinite().all()
    out, lse = check_kvcache(inputs, causal=False)
    assert torch.all(out[0] == 0) and torch.all(lse[0] == -math.inf) and lse[1:].isfinite().all()


@needs_cuda
@pytest.mark.parametrize("page_size", [None, 16], ids=kind)
def test_append_without_queries(library, page_size):
    """seqlen_q = 0 with new keys: the caches take them, out and lse are empty."""
    skip_unless_decode_built(torch.bfloat16, 64)
    capacity = capacity_for(64, page_size)
    inputs = make_kvcache([0, 5, capacity - 1], 0, 3, 4, 2, 64, torch.bfloat16, capacity, page_size, seed=42)
    out, lse = check_kvcache(inputs, causal=True)
    assert out.shape == (3, 0, 4, 64) and lse.shape == (3, 4, 0)


@needs_cuda
@pytest.mark.parametrize("page_size", [None, 64], ids=kind)
@pytest.mark.parametrize("causal", [False, True])
def test_full_cache_without_cache_seqlens(library, page_size, causal):
    """cache_seqlens=None: every sequence has its whole capacity of keys."""
    skip_unless_decode_built(torch.bfloat16, 128)
    capacity = capacity_for(333, page_size)
    inputs = make_kvcache(None, 4, 0, 8, 2, 128, torch.bfloat16, capacity, page_size, seed=42, batch=3)
    check_kvcache(inputs, causal)


@needs_cuda
@pytest.mark.parametrize("page_size", [None, 16], ids=kind)
def test_stale_slots_are_never_read(library, page_size):
    """NaN in every slot at or past a sequence's cache length and in every page no sequence holds (as memory from
    torch.empty may hold): the appended rows replace some, and the results are those of the valid keys."""
    skip_unless_decode_built(torch.bfloat16, 128)
    capacity = capacity_for(300, page_size)
    inputs = make_kvcache(mixed_lengths(capacity), 4, 4, 8, 2, 128, torch.bfloat16, capacity, page_size, seed=43)
    valid = torch.zeros(inputs.k_cache.shape[:2], dtype=torch.bool, device="cuda")
    for b, length in enumerate(inputs.lengths):
        keys = torch.arange(length, device="cuda")
        if page_size is None:
            valid[b, keys] = True
        else:
            valid[inputs.block_table[b, keys // page_size].long(), keys % page_size] = True
    for cache in (inputs.k_cache, inputs.v_cache):
        cache[~valid] = math.nan
    check_kvcache(inputs, causal=True)


@needs_cuda
@pytest.mark.parametrize("seqlen_q", [1, 4])
@pytest.mark.parametrize("page_size", [None, 64], ids=kind)
def test_strided_inputs(library, page_size, seqlen_q):
    """q a slice of a wider tensor, k and v of a packed kv, the caches slices around a guard head (which must stay
    untouched), a block table with extra columns; with an explicit softmax_scale."""
    skip_unless_decode_built(torch.bfloat16, 128)
    capacity = capacity_for(300, page_size)
    inputs = make_kvcache(mixed_lengths(capacity), seqlen_q, seqlen_q, 8, 2, 128, torch.bfloat16, capacity,
                          page_size, layout="strided", seed=seed_for("kvcache-strided", page_size, seqlen_q))
    assert not inputs.q.is_contiguous() and not inputs.k_cache.is_contiguous() and not inputs.k.is_contiguous()
    check_kvcache(inputs, causal=seqlen_q > 1, softmax_scale=0.3)


LEFTPAD_CASES = [(1, 0, False), (1, 1, True), (4, 3, True), (4, 0, False), (1, 3, True)]  # (sq, seqlen_new, causal)


@needs_cuda
@pytest.mark.parametrize("seqlen_q, seqlen_new, causal", LEFTPAD_CASES,
                         ids=[f"sq{c[0]}-new{c[1]}-{'causal' if c[2] else 'full'}" for c in LEFTPAD_CASES])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_NAMES.get)
def test_cache_leftpad(library, dtype, seqlen_q, seqlen_new, causal):
    """A left-padded batch: sequence b's keys start at cache_leftpad[b] (none, a few, all but its last ones, all of
    them and past them: no keys), the new rows still appended at cache_seqlens[b]; GQA, head dims 64 and 128."""
    for head_dim in (64, 128):
        skip_unless_decode_built(dtype, head_dim)
        capacity = 300
        lengths = [0, 5, 290, 250, 40, 120]
        leftpads = [0, 2, 289, 250 + seqlen_new, 77, 0]
        inputs = make_kvcache(lengths, seqlen_q, seqlen_new, 8, 2, head_dim, dtype, capacity,
                              seed=seed_for("leftpad", dtype, head_dim, seqlen_q, seqlen_new, causal))
        inputs.cache_leftpad = torch.tensor(leftpads, device="cuda", dtype=torch.int32)
        inputs.leftpads = leftpads
        check_kvcache(inputs, causal)


@needs_cuda
def test_function_is_the_op(library):
    """flash_attn_with_kvcache returns out alone (or with lse): torch.ops.flashcute.fwd_kvcache's, for backend
    "auto" and "sm80" alike."""
    skip_unless_decode_built(torch.float16, 128)
    inputs = make_kvcache([5, 0, 100], 1, 1, 8, 2, 128, torch.float16, 128, 16, seed=44)
    expected = expect(inputs, causal=False)
    out, lse = torch.ops.flashcute.fwd_kvcache(inputs.q, inputs.k_cache, inputs.v_cache, inputs.k, inputs.v,
                                               inputs.cache_seqlens, inputs.block_table, None, False, 0, "sm80")
    assert_matches(inputs, expected, out, lse)
    for backend in ("auto", "sm80"):
        args = (inputs.q, inputs.k_cache, inputs.v_cache)
        assert torch.equal(flashcute.flash_attn_with_kvcache(*args, **inputs.optional(), backend=backend), out)
        out_api, lse_api = flashcute.flash_attn_with_kvcache(*args, **inputs.optional(), return_lse=True,
                                                             backend=backend)
        assert torch.equal(out_api, out) and torch.equal(lse_api, lse)
    assert_bitwise_equal(inputs.storage, expected.storage, "the caches")


@needs_cuda
def test_sm90_backend_is_a_clear_error(library):
    """No SM90 decode kernel: backend="sm90" raises, pointing at sm80, before anything is written."""
    skip_unless_decode_built(torch.bfloat16, 128)
    inputs = make_kvcache([3, 9], 1, 1, 4, 4, 128, torch.bfloat16, 64, seed=45)
    before = inputs.storage.clone()
    with pytest.raises(RuntimeError, match="sm80"):
        flashcute.flash_attn_with_kvcache(inputs.q, inputs.k_cache, inputs.v_cache, **inputs.optional(),
                                          backend="sm90")
    assert_bitwise_equal(inputs.storage, before, "the caches after a refused call")


# ------------------------------------------------------------------------------- CUDA graphs, compile

@needs_cuda
@pytest.mark.parametrize("page_size", [None, 64], ids=kind)
def test_cuda_graph_replay_with_new_lengths(library, page_size):
    """A decode step captured once in a CUDA graph; replayed after new cache lengths, cache contents, q, new rows and
    (paged) a reshuffled block table are copied into the captured buffers, it gives the reference for them."""
    skip_unless_decode_built(torch.bfloat16, 128)
    capacity = capacity_for(1000, page_size)

    def inputs_for(lengths, seed):
        return make_kvcache(lengths, 1, 1, 8, 2, 128, torch.bfloat16, capacity, page_size, seed=seed)

    static = inputs_for([1, 0, 500, capacity], 46)

    def step():
        return flashcute.flash_attn_with_kvcache(static.q, static.k_cache, static.v_cache, **static.optional(),
                                                 causal=True, return_lse=True)

    graph, (static_out, static_lse) = capture_graph(step)

    for seed, lengths in ((47, [capacity - 1, 999, 0, 17]), (48, [3, capacity, 64, 1]), (49, [0, 0, 0, 0])):
        fresh = inputs_for(lengths, seed)
        for buffer, new in ((static.q, fresh.q), (static.storage, fresh.storage), (static.k, fresh.k),
                            (static.v, fresh.v), (static.cache_seqlens, fresh.cache_seqlens),
                            (static.block_table, fresh.block_table)):
            if buffer is not None:
                buffer.copy_(new)
        static.lengths = lengths
        expected = expect(static, causal=True)
        static_out.fill_(math.nan)
        static_lse.fill_(math.nan)
        graph.replay()
        torch.cuda.synchronize()
        assert_matches(static, expected, static_out, static_lse)
        out, lse = step()  # eagerly, the same inputs: the same result (writing the same rows again)
        assert torch.equal(out, static_out) and torch.equal(lse, static_lse)


@needs_cuda
def test_compiled_decode_steps(library):
    """torch.compile (fullgraph, AOTAutograd functionalising the in-place append): one graph for two steps with new
    cache lengths, and eager's outputs and caches, bit for bit."""
    from torch._dynamo.testing import CompileCounterWithBackend

    skip_unless_decode_built(torch.bfloat16, 64)
    torch._dynamo.reset()
    inputs = make_kvcache([10, 0, 63], 1, 1, 8, 2, 64, torch.bfloat16, 128, 16, seed=50)
    caches = [inputs.k_cache.clone(), inputs.v_cache.clone()]  # two tensors of their own (no shared storage)
    eager_caches = [t.clone() for t in caches]

    def decode_step(q, k_cache, v_cache, k, v, cache_seqlens, block_table):
        out, lse = flashcute.flash_attn_with_kvcache(q, k_cache, v_cache, k=k, v=v, cache_seqlens=cache_seqlens,
                                                     block_table=block_table, causal=True, return_lse=True)
        return out.float() * 2, lse

    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(decode_step, backend=counter, fullgraph=True)
    for _ in range(2):
        others = (inputs.k, inputs.v, inputs.cache_seqlens, inputs.block_table)
        got = compiled(inputs.q, *caches, *others)
        want = decode_step(inputs.q, *eager_caches, *others)
        assert all(torch.equal(a, b) for a, b in zip(got, want))
        assert all(torch.equal(a, b) for a, b in zip(caches, eager_caches))
        inputs.cache_seqlens += 1
    assert counter.frame_count == 1


# ------------------------------------------------------------------------------------------- opcheck

OPCHECK_CASES = [
    # (lengths, seqlen_q, seqlen_new, heads_q, heads_kv, head_dim, dtype, page_size, layout, causal, num_splits, scale)
    ([0, 7, 64], 1, 0, 8, 2, 128, torch.float16, None, "contiguous", False, 0, None),
    ([3, 60], 2, 2, 4, 4, 64, torch.bfloat16, 16, "contiguous", True, 3, None),
    ([64, 1], 1, 1, 8, 1, 96, torch.bfloat16, None, "strided", True, 0, 0.2),
]


@needs_cuda
@pytest.mark.parametrize("case", OPCHECK_CASES, ids=lambda c: f"{kind(c[7])}-{c[8]}-sq{c[1]}-new{c[2]}-d{c[5]}")
def test_opcheck(library, case):
    lengths, seqlen_q, seqlen_new, heads_q, heads_kv, head_dim, dtype, page_size, layout, causal, splits, scale = case
    skip_unless_decode_built(dtype, head_dim)
    inputs = make_kvcache(lengths, seqlen_q, seqlen_new, heads_q, heads_kv, head_dim, dtype,
                          capacity_for(64, page_size), page_size, layout, seed=seed_for("opcheck", case))
    # Two caches of their own (not views of one storage); a call writes the same rows again, so repeats agree.
    args = (inputs.q, inputs.k_cache.clone(), inputs.v_cache.clone(), inputs.k, inputs.v, inputs.cache_seqlens,
            inputs.block_table)
    torch.library.opcheck(torch.ops.flashcute.fwd_kvcache.default, args,
                          {"softmax_scale": scale, "causal": causal, "num_splits": splits})


# ------------------------------------------------------------------------------------------- bad input

def bad_input_cases():
    """(a correct call, [(regex the message must match, change to the call's arguments)])."""
    q = torch.randn(2, 1, 4, 64, device="cuda", dtype=torch.float16)
    k_cache, v_cache = torch.randn(2, 2, 32, 2, 64, device="cuda", dtype=torch.float16).unbind(0)
    k, v = torch.randn(2, 2, 1, 2, 64, device="cuda", dtype=torch.float16).unbind(0)
    seqlens = torch.tensor([3, 7], device="cuda", dtype=torch.int32)
    pages = torch.randn(6, 16, 2, 64, device="cuda", dtype=torch.float16)
    table = torch.tensor([[4, 1], [0, 5]], device="cuda", dtype=torch.int32)
    good = dict(q=q, k_cache=k_cache, v_cache=v_cache, k=k, v=v, cache_seqlens=seqlens)
    paged = dict(k_cache=pages, v_cache=pages.clone(), block_table=table)
    both_kv = r"(?s)(?=.*\bk\b)(?=.*\bv\b)"  # a message naming k and v
    return good, [
        ("cache_seqlens", dict(cache_seqlens=seqlens.long())),
        ("cache_seqlens", dict(cache_seqlens=seqlens.float())),
        ("cache_seqlens", dict(cache_seqlens=seqlens.cpu())),
        ("cache_seqlens", dict(cache_seqlens=torch.zeros(3, device="cuda", dtype=torch.int32))),
        ("cache_seqlens", dict(cache_seqlens=seqlens[:, None])),
        ("block_table", dict(paged, block_table=table.long())),
        ("block_table", dict(paged, block_table=table[0])),
        ("block_table", dict(paged, block_table=table[:1])),
        ("cache_leftpad", dict(cache_leftpad=seqlens.long())),
        ("cache_leftpad", dict(cache_leftpad=seqlens.cpu())),
        ("cache_leftpad", dict(cache_leftpad=seqlens[:1])),
        ("cache_leftpad", dict(paged, cache_leftpad=seqlens)),
        (both_kv, dict(v=None)),
        (both_kv, dict(k=None)),
        ("cache_seqlens", dict(cache_seqlens=None)),
        (r"\bk\b", dict(k=torch.randn(2, 1, 3, 64, device="cuda", dtype=torch.float16),
                        v=torch.randn(2, 1, 3, 64, device="cuda", dtype=torch.float16))),
        (r"\bk\b", dict(k=torch.randn(3, 1, 2, 64, device="cuda", dtype=torch.float16),
                        v=torch.randn(3, 1, 2, 64, device="cuda", dtype=torch.float16))),
        (r"\bk\b", dict(k=torch.randn(2, 1, 2, 128, device="cuda", dtype=torch.float16),
                        v=torch.randn(2, 1, 2, 128, device="cuda", dtype=torch.float16))),
        (r"\bv\b", dict(v=torch.randn(2, 1, 1, 64, device="cuda", dtype=torch.float16))),
        (r"\bk\b", dict(k=k.bfloat16(), v=v.bfloat16())),
        ("k_cache", dict(k_cache=k_cache.bfloat16(), v_cache=v_cache.bfloat16(), k=None, v=None)),
        ("v_cache", dict(v_cache=v_cache[:, :16])),
        ("k_cache|head_dim", dict(q=torch.randn(2, 1, 4, 128, device="cuda", dtype=torch.float16), k=None, v=None)),
        ("num_splits", dict(num_splits=-1)),
        ("backend", dict(backend="sm70")),
    ]


@needs_cuda
def test_bad_inputs_name_the_argument(library):
    """Each bad argument: a RuntimeError from the op naming it, nothing written, and the GPU still usable."""
    skip_unless_decode_built(torch.float16, 64)
    good, cases = bad_input_cases()
    for pattern, change in cases:
        args = {**good, **change}
        before = [t.clone() for t in (args["k_cache"], args["v_cache"])]
        with pytest.raises(RuntimeError, match=pattern):
            torch.ops.flashcute.fwd_kvcache(**args)
        assert all(torch.equal(a, b) for a, b in zip(before, (args["k_cache"], args["v_cache"]))), pattern
    # Through the Python API too, and the context still works.
    with pytest.raises(RuntimeError, match="cache_seqlens"):
        flashcute.flash_attn_with_kvcache(**{**good, "cache_seqlens": good["cache_seqlens"].long()})
    out = flashcute.flash_attn_with_kvcache(**good)
    torch.cuda.synchronize()
    assert out.isfinite().all()


# --------------------------------------------------- flash_attn_func on decode shapes (split-KV kernel)

DECODE_SHAPES = [
    # (batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, dtype, layout)
    (2, 1, 4097, 8, 2, 128, torch.bfloat16, "contiguous"),  # GQA, sq 1: the 4 query heads of a KV head packed
    (1, 3, 1000, 4, 4, 64, torch.float16, "bhsd"),
    (3, 1, 17, 8, 1, 256, torch.bfloat16, "packed"),  # MQA: 8 query heads on one KV head, one key block
    (1, 16, 20000, 8, 2, 128, torch.float16, "contiguous"),
]
DECODE_IDS = [f"b{s[0]}-sq{s[1]}-sk{s[2]}-h{s[3]}x{s[4]}-d{s[5]}-{NAMES[s[6]]}-{s[7]}" for s in DECODE_SHAPES]


@needs_cuda
@pytest.mark.parametrize("backend", ["auto", "sm80"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", DECODE_SHAPES, ids=DECODE_IDS)
def test_flash_attn_func_decode_shapes(library, shape, causal, backend):
    """torch.ops.flashcute.fwd on small sq and long sk (the split-KV decode kernel): test_fwd.py's check."""
    batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, dtype, layout = shape
    skip_unless_built(dtype, head_dim)
    q, k, v = make_qkv(batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, dtype, layout,
                       seed_for("decode", shape, causal))
    check_fwd(q, k, v, causal, backend)


@needs_cuda
@pytest.mark.parametrize("loss", ["out", "out_and_lse"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", DECODE_SHAPES, ids=DECODE_IDS)
def test_flash_attn_func_decode_shapes_train(library, shape, causal, loss):
    """loss.backward() through flash_attn_func on decode shapes: the backward takes the decode kernel's out and lse
    (and, through lse, calls the forward again); the gradients are the float64 reference's."""
    batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, dtype, layout = shape
    skip_unless_built(dtype, head_dim)
    seed = seed_for("decode-train", shape, causal)
    q, k, v = make_qkv(batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, dtype, layout, seed)
    dout = make_dout(q, layout, seed + 1)
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    out, lse = flashcute.flash_attn_func(*leaves, causal=causal, return_lse=True)
    objective = (out * dout).sum()
    dlse = None
    if loss == "out_and_lse":
        dlse = torch.randn(lse.shape, device="cuda", generator=torch.Generator("cuda").manual_seed(seed + 2))
        objective = objective + (lse.masked_fill(torch.isinf(lse), 0.0) * dlse).sum()
    objective.backward()
    assert_grads_close([t.grad for t in leaves], q, k, v, dout, causal, dlse=dlse)


@needs_cuda
@pytest.mark.parametrize("backend", ["auto", "sm80"])
@pytest.mark.parametrize("heads_q, heads_kv", [(8, 2), (8, 1)], ids=["gqa", "mqa"])
def test_causal_top_left_single_query(library, heads_q, heads_kv, backend):
    """causal_top_left with sq = 1: the query sees key 0 only, so out is v[:, 0] (per query head's KV head)."""
    skip_unless_built(torch.bfloat16, 128)
    q, k, v = make_qkv(2, 1, 4097, heads_q, heads_kv, 128, torch.bfloat16, "contiguous",
                       seed_for("top-left", heads_kv, backend))
    out, lse = check_fwd(q, k, v, causal=True, backend=backend, top_left=True)
    assert torch.equal(out, v[:, :1].repeat_interleave(heads_q // heads_kv, dim=2))


# ---------------------------------------------------------------------------------------- no GPU needed

def test_fake_kernel_gives_the_shapes():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        q = torch.empty(2, 8, 3, 128, dtype=torch.bfloat16, device="cuda").transpose(1, 2)  # (2, 3, 8, 128), strided
        k_cache, v_cache = (torch.empty(2, 512, 2, 128, dtype=torch.bfloat16, device="cuda") for _ in "kv")
        k, v = (torch.empty(2, 3, 2, 128, dtype=torch.bfloat16, device="cuda") for _ in "kv")
        seqlens = torch.empty(2, dtype=torch.int32, device="cuda")
        pages_k, pages_v = (torch.empty(40, 16, 2, 128, dtype=torch.bfloat16, device="cuda") for _ in "kv")
        table = torch.empty(2, 20, dtype=torch.int32, device="cuda")
        calls = [
            torch.ops.flashcute.fwd_kvcache(q, k_cache, v_cache),
            torch.ops.flashcute.fwd_kvcache(q, k_cache, v_cache, k, v, seqlens, None, 0.1, True, 3, "sm80"),
            torch.ops.flashcute.fwd_kvcache(q, pages_k, pages_v, k, v, seqlens, table, causal=True),
            flashcute.flash_attn_with_kvcache(q, pages_k, pages_v, cache_seqlens=seqlens, block_table=table,
                                              return_lse=True),
        ]
        for out, lse in calls:
            assert out.shape == (2, 3, 8, 128) and out.dtype == torch.bfloat16 and out.is_contiguous()
            assert out.device.type == "cuda"
            assert lse.shape == (2, 8, 3) and lse.dtype == torch.float32
        out = flashcute.flash_attn_with_kvcache(q, k_cache, v_cache, k=k, v=v, cache_seqlens=seqlens)
        assert isinstance(out, torch.Tensor) and out.shape == (2, 3, 8, 128)


def test_schema_declares_the_caches_mutated():
    schema = torch.ops.flashcute.fwd_kvcache.default._schema
    names = [argument.name for argument in schema.arguments]
    assert names == ["q", "k_cache", "v_cache", "k", "v", "cache_seqlens", "block_table", "softmax_scale", "causal",
                     "num_splits", "backend", "cache_leftpad"]
    written = {argument.name for argument in schema.arguments
               if argument.alias_info is not None and argument.alias_info.is_write}
    assert written == {"k_cache", "v_cache"}
    assert [r.name for r in schema.returns] == ["out", "lse"]
    assert all(r.alias_info is None for r in schema.returns), "out and lse are new tensors"
    defaults = {a.name: a.default_value for a in schema.arguments if a.has_default_value()}
    assert defaults == {"k": None, "v": None, "cache_seqlens": None, "block_table": None, "softmax_scale": None,
                        "causal": False, "num_splits": 0, "backend": "auto", "cache_leftpad": None}


def test_bad_backend_is_a_value_error():
    q = torch.zeros(1, 1, 1, 8)
    cache = torch.zeros(1, 4, 1, 8)
    with pytest.raises(ValueError, match="backend"):
        flashcute.flash_attn_with_kvcache(q, cache, cache, backend="sm100")


def test_cpu_tensors_are_refused():
    q = torch.zeros(1, 1, 2, 64, dtype=torch.bfloat16)
    k_cache, v_cache = torch.zeros(1, 16, 2, 64, dtype=torch.bfloat16), torch.zeros(1, 16, 2, 64, dtype=torch.bfloat16)
    seqlens = torch.zeros(1, dtype=torch.int32)
    with pytest.raises(RuntimeError, match=re.escape("q must be a CUDA tensor")):
        flashcute.flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=seqlens)
    with pytest.raises(RuntimeError, match=re.escape("q must be a CUDA tensor")):
        torch.ops.flashcute.fwd_kvcache(q, k_cache, v_cache)
