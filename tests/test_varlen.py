"""Variable-length (packed) batches: torch.ops.flashcute.fwd_varlen / bwd_varlen and flash_attn_varlen_func.

Each sequence is held to the float64 reference of tests/reference.py computed on its own rows (causal aligned
bottom-right per sequence), with the rule of test_fwd.py and test_bwd.py over the whole packed tensor: the error
is at most 2x PyTorch's own attention in the inputs' precision (plus the reference's rounding). Outputs and
gradients land in NaN-poisoned memory; batches mix lengths 0, 1, 17 and up to 4097, with sq != sk per sequence.
Both backends: sm90 on Hopper (its forward with sm80's backward at head dims its backward does not cover).
The CPU tests at the end need no GPU (fake kernels, argument errors raised before any kernel).
"""

import math

import pytest
import torch

import flashcute
from flashcute import kernel_configs
from reference import attention_grads_ref, attention_ref

HAS_CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")

if HAS_CUDA:
    from test_bwd import BACKENDS, assert_grads_close, capture_graph, skip_unless_built
    from test_fwd import skip_unless_built as skip_unless_fwd_built
    from test_fwd import (DTYPE_NAMES, DTYPES, HEAD_DIMS, HEADS, built_kernels, has_kernel, max_error,
                          poison_next_allocations, seed_for)
else:
    DTYPES, DTYPE_NAMES, HEAD_DIMS, HEADS, BACKENDS = [], {}, [], {}, []

# (lengths of q, lengths of k): empty sequences on either side, single rows, ragged blocks, sq != sk.
RAGGED = ([1, 0, 17, 113, 203, 64], [239, 7, 0, 203, 113, 64])
LARGE = ([1000, 4097, 17, 1], [1000, 4097, 33, 1])


# --------------------------------------------------------------------------------------------- helpers

def cu_seqlens(lengths):
    return torch.tensor([0] + list(lengths), device="cuda", dtype=torch.int32).cumsum(0, dtype=torch.int32)


def make_packed(lens_q, lens_k, heads_q, heads_kv, head_dim, dtype, layout, seed):
    """q (total_q, hq, d), k and v (total_k, hkv, d): contiguous, or slices of one wider packed tensor."""
    generator = torch.Generator(device="cuda").manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=generator, device="cuda", dtype=dtype)

    total_q, total_k = sum(lens_q), sum(lens_k)
    if layout == "contiguous":
        return randn(total_q, heads_q, head_dim), randn(total_k, heads_kv, head_dim), randn(total_k, heads_kv, head_dim)
    assert layout == "packed"
    kv = randn(total_k, 2 * heads_kv + 2, head_dim)
    return randn(total_q, heads_q + 1, head_dim)[:, 1:], kv[:, 1:heads_kv + 1], kv[:, heads_kv + 2:]


def sequences(lens_q, lens_k, seqused_k=None):
    """(q rows, k rows used) of each sequence."""
    starts_q, starts_k = [0], [0]
    for lq, lk in zip(lens_q, lens_k):
        starts_q.append(starts_q[-1] + lq)
        starts_k.append(starts_k[-1] + lk)
    for b, (lq, lk) in enumerate(zip(lens_q, lens_k)):
        used = lk if seqused_k is None else min(lk, seqused_k[b])
        yield slice(starts_q[b], starts_q[b] + lq), slice(starts_k[b], starts_k[b] + used)


def reference(q, k, v, dout, lens_q, lens_k, causal, seqused_k=None, softmax_scale=None):
    """Per sequence, then packed: {"out", "lse", "grads"} in float64 and as PyTorch computes them in q's dtype.
    Keys a sequence does not use get zero gradients."""
    result = {}
    for upcast in (True, False):
        outs, lses = [], []
        grads = [torch.zeros(t.shape, dtype=torch.float64 if upcast else q.dtype, device="cuda") for t in (q, k, v)]
        for rows, keys in sequences(lens_q, lens_k, seqused_k):
            args = [t[rows].unsqueeze(0) for t in (q,)] + [t[keys].unsqueeze(0) for t in (k, v)]
            out, lse = attention_ref(*args, softmax_scale, causal, upcast=upcast)
            outs.append(out[0])
            lses.append(lse[0])
            if dout is not None:
                dq, dk, dv = attention_grads_ref(*args, dout[rows].unsqueeze(0), softmax_scale, causal, upcast=upcast)
                grads[0][rows], grads[1][keys], grads[2][keys] = dq[0], dk[0], dv[0]
        result[upcast] = (torch.cat(outs), torch.cat(lses, dim=1), grads)
    return result


def sm90_tma_box_cols(op, kernel_head_dim):
    """The narrowest TMA box of an SM90 kernel (kTmaBoxCols), from the traits' mirror (test_kernel_layouts holds
    it equal to C++)."""
    configs = kernel_configs.shipped_configs("sm90") if op == "fwd" else kernel_configs.sm90_bwd_configs()
    return min(c.tma_box_cols for c in configs if c.head_dim == kernel_head_dim)


def sm90_kernel_dim(op, dtype, head_dim):
    """The head dim of the SM90 `op` kernel this build runs head_dim on (the smallest at or above it), or None."""
    prefix = f"{op}_sm90_{DTYPE_NAMES[dtype]}_hdim"
    dims = [int(name[len(prefix):]) for name in built_kernels() if name.startswith(prefix)]
    return min((d for d in dims if d >= head_dim), default=None)


def sm90_refuses(op, dtype, head_dim):
    """Whether that kernel refuses packed batches of head_dim: one of its TMA boxes would lie wholly past it
    (csrc/sm90/requirements.h)."""
    kernel_dim = sm90_kernel_dim(op, dtype, head_dim)
    if kernel_dim is None:
        return False
    box = sm90_tma_box_cols(op, kernel_dim)
    return (head_dim + box - 1) // box * box < kernel_dim


def varlen_backends(library, dtype, head_dim, backend):
    """(forward, backward) backends of a test of `backend`, skipping what this build cannot run: sm90's forward
    with sm80's backward at the head dims no sm90 backward kernel covers."""
    if backend == "sm90":
        skip_unless_fwd_built(library, dtype, head_dim, "sm90")
        if sm90_refuses("fwd", dtype, head_dim):
            pytest.skip("this build's sm90 forward refuses packed batches of this head dim "
                        "(test_head_dims_padded_to_a_kernel)")
        if not has_kernel("bwd", "sm90", dtype, head_dim) or sm90_refuses("bwd", dtype, head_dim):
            skip_unless_built(dtype, head_dim, "sm80")
            return "sm90", "sm80"
    skip_unless_built(dtype, head_dim, backend)
    return backend, backend


def run_varlen(q, k, v, dout, lens_q, lens_k, causal, backend="sm80", seqused_k=None, deterministic=False,
               max_seqlen=None):
    """fwd_varlen, then (with dout) bwd_varlen, each into NaN-poisoned memory. backend: one for both, or a
    (forward, backward) pair."""
    fwd_backend, bwd_backend = (backend, backend) if isinstance(backend, str) else backend
    cu_q, cu_k = cu_seqlens(lens_q), cu_seqlens(lens_k)
    max_q, max_k = max_seqlen or (max(lens_q), max(lens_k))
    used = None if seqused_k is None else torch.tensor(seqused_k, device="cuda", dtype=torch.int32)
    poison_next_allocations((q.shape, q.dtype), ((q.shape[1], q.shape[0]), torch.float32))
    out, lse = torch.ops.flashcute.fwd_varlen(q, k, v, cu_q, cu_k, max_q, max_k, None, causal, used, fwd_backend)
    if dout is None:
        return out, lse, None
    poison_next_allocations((q.shape, q.dtype), (k.shape, q.dtype), (v.shape, q.dtype))
    grads = torch.ops.flashcute.bwd_varlen(dout, q, k, v, out, lse, cu_q, cu_k, max_q, max_k, None, causal, used,
                                           deterministic, bwd_backend)
    return out, lse, grads


def assert_out_lse_close(out, lse, refs):
    """out and lse against reference()'s: finite, -inf LSE on exactly its rows, each error at most 2x PyTorch's own
    in the inputs' precision (plus the reference's rounding)."""
    (out_ref, lse_ref, _), (out_torch, lse_torch, _) = refs[True], refs[False]
    assert out.isfinite().all(), "out has NaN/inf (unwritten rows)"
    assert torch.equal(lse == -math.inf, lse_ref == -math.inf), "lse = -inf on other rows than the reference"
    out_atol = 2 * max_error(out_ref.to(out.dtype), out_ref) + 1e-6
    assert max_error(out, out_ref) <= 2 * max_error(out_torch, out_ref) + out_atol
    finite = torch.isfinite(lse_ref)
    assert max_error(lse[finite], lse_ref[finite]) <= 2 * max_error(lse_torch[finite], lse_ref[finite]) + 1e-4


def check_varlen(q, k, v, lens_q, lens_k, causal, seed, backend="sm80", seqused_k=None):
    dout = torch.randn(q.shape, generator=torch.Generator(device="cuda").manual_seed(seed), device="cuda",
                       dtype=q.dtype)
    refs = reference(q, k, v, dout, lens_q, lens_k, causal, seqused_k)
    grads_ref, grads_torch = refs[True][2], refs[False][2]
    out, lse, grads = run_varlen(q, k, v, dout, lens_q, lens_k, causal, backend, seqused_k)

    assert out.shape == q.shape and lse.shape == (q.shape[1], q.shape[0]) and lse.dtype == torch.float32
    assert_out_lse_close(out, lse, refs)
    for deterministic in (False, True):
        if deterministic:
            _, _, grads = run_varlen(q, k, v, dout, lens_q, lens_k, causal, backend, seqused_k, deterministic=True)
        assert_grads_close(grads, q, k, v, dout, causal, refs=(grads_ref, grads_torch))
    return dout, grads


# ---------------------------------------------------------------------------------------- correctness

@needs_cuda
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("layout", ["contiguous", "packed"])
@pytest.mark.parametrize("heads", list(HEADS))
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("head_dim", HEAD_DIMS)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_NAMES.get)
def test_varlen_ragged(library, dtype, head_dim, causal, heads, layout, backend):
    backends = varlen_backends(library, dtype, head_dim, backend)
    heads_q, heads_kv = HEADS[heads]
    seed = seed_for(dtype, head_dim, causal, heads, layout)
    q, k, v = make_packed(*RAGGED, heads_q, heads_kv, head_dim, dtype, layout, seed)
    check_varlen(q, k, v, *RAGGED, causal, seed + 1, backends)


@needs_cuda
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("head_dim", [64, 128, 256])
def test_varlen_large(library, head_dim, causal, backend):
    backends = varlen_backends(library, torch.bfloat16, head_dim, backend)
    seed = seed_for("large", head_dim, causal)
    q, k, v = make_packed(*LARGE, 4, 2, head_dim, torch.bfloat16, "contiguous", seed)
    check_varlen(q, k, v, *LARGE, causal, seed + 1, backends)


@needs_cuda
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("causal", [False, True])
def test_seqused_k(library, causal, backend):
    """Only the first seqused_k[b] keys of sequence b count; the others get zero gradients."""
    backends = varlen_backends(library, torch.bfloat16, 128, backend)
    lens_q, lens_k, used = [100, 17, 0, 64], [150, 40, 9, 64], [150, 3, 9, 0]
    q, k, v = make_packed(lens_q, lens_k, 4, 2, 128, torch.bfloat16, "contiguous", 11)
    _, (dq, dk, dv) = check_varlen(q, k, v, lens_q, lens_k, causal, 12, backends, seqused_k=used)
    assert not dk[150 + 3:150 + 40].any() and not dv[150 + 3:150 + 40].any()


@needs_cuda
@pytest.mark.parametrize("op", ["fwd", "bwd"])
def test_head_dims_padded_to_a_kernel(library, op):
    """Every head dim (a multiple of 8) that runs on a larger SM90 kernel of this build: a packed batch runs and
    matches the reference where each of the kernel's TMA boxes reaches a column below head_dim, and otherwise the
    sm90 backend refuses it with a clear error (csrc/sm90/requirements.h; such boxes faulted) while auto runs it on
    sm80. Builds with every head dim have no refused case; restricted ones (FLASHCUTE_HDIMS) do."""
    lens_q, lens_k = RAGGED
    ran = 0
    for head_dim in range(8, 257, 8):
        kernel_dim = sm90_kernel_dim(op, torch.bfloat16, head_dim)
        if kernel_dim in (None, head_dim) or not has_kernel("fwd", "sm80", torch.bfloat16, head_dim):
            continue
        q, k, v = make_packed(lens_q, lens_k, 2, 1, head_dim, torch.bfloat16, "contiguous", head_dim)
        backends = "sm90" if op == "fwd" else ("sm80", "sm90")
        if sm90_refuses(op, torch.bfloat16, head_dim):
            with pytest.raises(RuntimeError, match=f"head_dim {head_dim} need an SM90 kernel for head dim"):
                run_varlen(q, k, v, torch.randn_like(q), lens_q, lens_k, False, backends)
            if op == "bwd" and not has_kernel("bwd", "sm80", torch.bfloat16, head_dim):
                continue
            backends = "auto" if op == "fwd" else ("sm80", "auto")
        if op == "fwd":
            out, lse, _ = run_varlen(q, k, v, None, lens_q, lens_k, False, backends)
            assert_out_lse_close(out, lse, reference(q, k, v, None, lens_q, lens_k, False))
        else:
            check_varlen(q, k, v, lens_q, lens_k, False, head_dim, backends)
        ran += 1
    if ran == 0:
        pytest.skip(f"no head dim of this build runs on a larger {op} sm90 kernel with an sm80 forward beside it")


@needs_cuda
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("causal", [False, True])
def test_many_sequences(library, causal, backend):
    """1200 sequences of 0-300 tokens and one of 3000: more than the SM90 forward's prepass has threads, so its
    sort and sums run over several chunks; every sequence's rows are the reference's."""
    fwd_backend, _ = varlen_backends(library, torch.bfloat16, 64, backend)
    generator = torch.Generator().manual_seed(41)
    lens_q = torch.randint(0, 301, (1200,), generator=generator).tolist() + [3000]
    lens_k = torch.randint(0, 301, (1200,), generator=generator).tolist() + [3000]
    q, k, v = make_packed(lens_q, lens_k, 2, 1, 64, torch.bfloat16, "contiguous", 42)
    out, lse, _ = run_varlen(q, k, v, None, lens_q, lens_k, causal, (fwd_backend, "sm80"))
    assert_out_lse_close(out, lse, reference(q, k, v, None, lens_q, lens_k, causal))


@needs_cuda
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("heads", ["mha", "gqa"])
def test_rows_outside_every_sequence_are_not_written(library, heads, backend):
    """Packed rows past cu_seqlens[-1] belong to no sequence: out, lse and the gradients keep whatever their memory
    held there (poison), and the sequences' own rows are the reference's. Unused keys hold NaN: no P.V may read
    them into a sequence (0 * NaN)."""
    backends = varlen_backends(library, torch.bfloat16, 64, backend)
    heads_q, heads_kv = HEADS[heads]
    lens_q, lens_k = [10, 20, 1], [15, 10, 70]
    q, k, v = make_packed([*lens_q, 19], [*lens_k, 5], heads_q, heads_kv, 64, torch.bfloat16, "contiguous", 31)
    k[sum(lens_k):], v[sum(lens_k):] = math.nan, math.nan
    seqs_q, seqs_k = slice(0, sum(lens_q)), slice(0, sum(lens_k))
    dout = torch.randn_like(q)
    for causal in (False, True):
        out, lse, (dq, dk, dv) = run_varlen(q, k, v, dout, lens_q, lens_k, causal, backends)
        assert out[seqs_q.stop:].isnan().all() and lse[:, seqs_q.stop:].isnan().all()
        assert dq[seqs_q.stop:].isnan().all() and dk[seqs_k.stop:].isnan().all() and dv[seqs_k.stop:].isnan().all()
        refs = reference(q[seqs_q], k[seqs_k], v[seqs_k], dout[seqs_q], lens_q, lens_k, causal)
        (out_ref, _, grads_ref), (out_torch, _, grads_torch) = refs[True], refs[False]
        out_atol = 2 * max_error(out_ref.to(q.dtype), out_ref) + 1e-6
        assert max_error(out[seqs_q], out_ref) <= 2 * max_error(out_torch, out_ref) + out_atol
        assert_grads_close((dq[seqs_q], dk[seqs_k], dv[seqs_k]), q[seqs_q], k[seqs_k], v[seqs_k], dout[seqs_q],
                           causal, refs=(grads_ref, grads_torch))


@needs_cuda
def test_equal_lengths_match_the_fixed_length_op(library):
    """A packed batch of equal sequences is the fixed-length batch: the same kernels, bitwise the same results
    (the backward in deterministic mode, whose additions come in a fixed order)."""
    skip_unless_built(torch.float16, 64)
    batch, seqlen = 3, 200
    q, k, v, dout = (torch.randn(batch, seqlen, 4, 64, device="cuda", dtype=torch.float16) for _ in range(4))
    for causal in (False, True):
        out, lse = torch.ops.flashcute.fwd(q, k, v, None, causal, False, "sm80")
        grads = torch.ops.flashcute.bwd(dout, q, k, v, out, lse, None, causal, False, True, "sm80")
        packed = [t.flatten(0, 1) for t in (q, k, v, dout)]
        out_v, lse_v, grads_v = run_varlen(*packed, [seqlen] * batch, [seqlen] * batch, causal, deterministic=True)
        assert torch.equal(out_v, out.flatten(0, 1))
        assert torch.equal(lse_v, lse.transpose(0, 1).flatten(1, 2))
        assert all(torch.equal(a, b.flatten(0, 1)) for a, b in zip(grads_v, grads))


@needs_cuda
@pytest.mark.parametrize("backend", BACKENDS)
def test_larger_max_seqlen_changes_nothing(library, backend):
    backends = varlen_backends(library, torch.bfloat16, 96, backend)
    q, k, v = make_packed(*RAGGED, 6, 2, 96, torch.bfloat16, "contiguous", 21)
    dout = torch.randn_like(q)
    exact = run_varlen(q, k, v, dout, *RAGGED, True, backends, deterministic=True)
    larger = run_varlen(q, k, v, dout, *RAGGED, True, backends, deterministic=True, max_seqlen=(1000, 700))
    assert torch.equal(exact[0], larger[0]) and torch.equal(exact[1], larger[1])
    assert all(torch.equal(a, b) for a, b in zip(exact[2], larger[2]))


OVERLAPPING_SEQUENCES = """
import math, sys
import torch
import flashcute
causal, deterministic = sys.argv[1] == "causal", sys.argv[2] == "deterministic"
g = torch.Generator(device="cuda").manual_seed(41)
q, dout = (torch.randn(300, 4, 128, generator=g, device="cuda", dtype=torch.bfloat16) for _ in range(2))
k, v = (torch.randn(1000, 2, 128, generator=g, device="cuda", dtype=torch.bfloat16) for _ in range(2))
cu_q = torch.tensor([0, 100, 200, 300], device="cuda", dtype=torch.int32)
cu_k = torch.tensor([0, 1000, 0, 1000], device="cuda", dtype=torch.int32)  # sequences 0 and 2 both take every key
out, lse = torch.ops.flashcute.fwd_varlen(q, k, v, cu_q, cu_k, 100, 1000, None, causal, None, "sm90")
# NaN in the blocks the gradients and dQ's accumulator (common/seqlen.h accum_rows_varlen: 693 rows) get next.
poison = [torch.full(shape, math.nan, dtype=dtype, device="cuda") for shape, dtype in
          ((q.shape, q.dtype), (k.shape, k.dtype), (v.shape, v.dtype), ((1, 4, 693 * 128), torch.float32))]
poison.clear()
dq, dk, dv = torch.ops.flashcute.bwd_varlen(dout, q, k, v, out, lse, cu_q, cu_k, 100, 1000, None, causal, None,
                                            deterministic, "sm90")
torch.cuda.synchronize()
print(dq[:100].isfinite().all().item(), torch.equal(dq[100:], torch.zeros_like(dq[100:])))
"""


@needs_cuda
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("deterministic", [False, True])
def test_sequences_past_the_grid_finish(library, causal, deterministic):
    """cu_seqlens_k that no sync can check: sequences 0 and 2 overlap, and their 2 x 8 key blocks outnumber the
    SM90 backward's grid (1000 / 128 + 3 per head), which then runs none of the last sequence's. The call must still
    finish (the dQ postprocess waits for each block's K/V blocks: none for those) and leave the queries no key block
    reaches a zero dQ (in a subprocess, so that a wait that never ends fails the test rather than hanging the run)."""
    skip_unless_fwd_built(library, torch.bfloat16, 128, "sm90")
    if not has_kernel("bwd", "sm90", torch.bfloat16, 128):
        pytest.skip("the sm90 bf16 hdim 128 backward is not built")
    import subprocess
    import sys
    try:
        r = subprocess.run([sys.executable, "-c", OVERLAPPING_SEQUENCES, "causal" if causal else "full",
                            "deterministic" if deterministic else "default"], capture_output=True, text=True,
                           timeout=180)
    except subprocess.TimeoutExpired:
        pytest.fail("the backward of overlapping sequences did not finish in 180 s")
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split()[-2:] == ["True", "True"], r.stdout


DECREASING_CU_SEQLENS = """
import sys
import torch
import flashcute
backend, causal = sys.argv[1], sys.argv[2] == "causal"
g = torch.Generator(device="cuda").manual_seed(43)
q, k, v, dout = (torch.randn(400, heads, 128, generator=g, device="cuda", dtype=torch.bfloat16)
                 for heads in (4, 2, 2, 4))
cu = torch.tensor([0, 300, 100, 400], device="cuda", dtype=torch.int32)  # sequence 2 starts inside sequence 0
out, lse = torch.ops.flashcute.fwd_varlen(q, k, v, cu, cu, 300, 300, None, causal, None, backend)
torch.ops.flashcute.bwd_varlen(dout, q, k, v, out, lse, cu, cu, 300, 300, None, causal, None, True, backend)
torch.cuda.synchronize()
print("finished")
"""


@needs_cuda
@pytest.mark.parametrize("backend", ["sm80", "sm90"])
@pytest.mark.parametrize("causal", [False, True])
def test_deterministic_overlapping_sequences_finish(library, backend, causal):
    """Decreasing cu_seqlens, which no sync can check: sequence 2's rows start inside sequence 0's, so in
    deterministic mode blocks of both share turnstile counters (dQ's, and GQA's dK / dV's), each sequence with its
    own turns 0, 1, ... The call must finish (in a subprocess, so that a wait that never ends fails the test rather
    than hanging the run); its rows are not checked."""
    skip_unless_built(torch.bfloat16, 128, backend)
    import subprocess
    import sys
    try:
        r = subprocess.run([sys.executable, "-c", DECREASING_CU_SEQLENS, backend, "causal" if causal else "full"],
                           capture_output=True, text=True, timeout=180)
    except subprocess.TimeoutExpired:
        pytest.fail("the deterministic backward of overlapping sequences did not finish in 180 s")
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split()[-1:] == ["finished"], r.stdout


@needs_cuda
def test_inputs_are_not_modified(library):
    skip_unless_built(torch.bfloat16, 64)
    q, k, v = make_packed(*RAGGED, 4, 4, 64, torch.bfloat16, "packed", 22)
    dout = torch.randn_like(q)
    before = [t.clone() for t in (q, k, v, dout)]
    run_varlen(q, k, v, dout, *RAGGED, False)
    assert all(torch.equal(a, b) for a, b in zip(before, (q, k, v, dout)))


@needs_cuda
@pytest.mark.parametrize("backend", ["auto", "sm80"])
def test_flash_attn_varlen_func_trains(library, backend):
    """Through autograd: the user API's gradients are bwd_varlen's."""
    skip_unless_built(torch.bfloat16, 128)
    lens = [33, 200, 1]
    q, k, v = (t.requires_grad_() for t in make_packed(lens, lens, 4, 2, 128, torch.bfloat16, "contiguous", 23))
    cu = cu_seqlens(lens)
    out = flashcute.flash_attn_varlen_func(q, k, v, cu, cu, 200, 200, causal=True, backend=backend,
                                           deterministic=True)
    dout = torch.randn_like(out)
    out.backward(dout)
    hopper = torch.cuda.get_device_capability()[0] == 9

    def auto_picks_sm90(op):
        return hopper and has_kernel(op, "sm90", torch.bfloat16, 128) and not sm90_refuses(op, torch.bfloat16, 128)

    chosen = tuple("sm90" if auto_picks_sm90(op) else "sm80" for op in ("fwd", "bwd")) if backend == "auto" else "sm80"
    _, _, grads = run_varlen(q.detach(), k.detach(), v.detach(), dout, lens, lens, True, chosen, deterministic=True)
    assert all(torch.equal(a, b) for a, b in zip((q.grad, k.grad, v.grad), grads))


@needs_cuda
@pytest.mark.parametrize("causal", [False, True])
def test_gradient_through_lse(library, causal):
    """A loss of out and lse: the gradients are the float64 reference's (per sequence, through both)."""
    skip_unless_built(torch.bfloat16, 64)
    lens_q, lens_k = [40, 0, 17, 130], [70, 5, 0, 100]
    q, k, v = make_packed(lens_q, lens_k, 4, 2, 64, torch.bfloat16, "contiguous", 24)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    cu_q, cu_k = cu_seqlens(lens_q), cu_seqlens(lens_k)
    out, lse = flashcute.flash_attn_varlen_func(*leaves, cu_q, cu_k, 130, 100, causal=causal, return_lse=True)
    dout, dlse = torch.randn_like(out), torch.randn_like(lse)
    grads = torch.autograd.grad((out * dout).sum() + (lse.nan_to_num(neginf=0.0) * dlse).sum(), leaves)
    refs = {}
    for upcast in (True, False):
        packed = [torch.zeros(t.shape, dtype=torch.float64 if upcast else q.dtype, device="cuda") for t in (q, k, v)]
        for rows, keys in sequences(lens_q, lens_k):
            args = [q[rows][None], k[keys][None], v[keys][None], dout[rows][None], None, causal]
            dq, dk, dv = attention_grads_ref(*args, upcast=upcast, dlse=dlse[:, rows][None])
            packed[0][rows], packed[1][keys], packed[2][keys] = dq[0], dk[0], dv[0]
        refs[upcast] = packed
    assert_grads_close(grads, q, k, v, dout, causal, refs=(refs[True], refs[False]))


# ------------------------------------------------------------------------------------------- bad input

def bad_input_cases():
    q, k = torch.zeros(10, 2, 64, device="cuda", dtype=torch.bfloat16), torch.zeros(12, 1, 64, device="cuda",
                                                                                        dtype=torch.bfloat16)
    cu_q = torch.tensor([0, 4, 10], device="cuda", dtype=torch.int32)
    cu_k = torch.tensor([0, 5, 12], device="cuda", dtype=torch.int32)
    good = dict(q=q, k=k, v=k, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=6, max_seqlen_k=7)
    return good, [
        ("cu_seqlens_q", dict(cu_seqlens_q=cu_q.long())),
        ("cu_seqlens_q", dict(cu_seqlens_q=cu_q.float())),
        ("cu_seqlens_q", dict(cu_seqlens_q=cu_q.cpu())),
        ("cu_seqlens_q", dict(cu_seqlens_q=cu_q[None])),
        ("cu_seqlens_k", dict(cu_seqlens_k=cu_k[:2])),
        ("q", dict(q=q[None])),
        ("k", dict(k=torch.zeros(12, 1, 32, device="cuda", dtype=torch.bfloat16))),
        ("k", dict(k=torch.zeros(12, 1, 64, device="cuda", dtype=torch.float16))),
        ("seqused_k", dict(seqused_k=torch.zeros(3, device="cuda", dtype=torch.int32))),
        ("seqused_k", dict(seqused_k=torch.zeros(2, device="cuda", dtype=torch.int64))),
        ("max_seqlen_q", dict(max_seqlen_q=-1)),
    ]


@needs_cuda
def test_bad_inputs_name_the_argument(library):
    skip_unless_built(torch.bfloat16, 64)  # the good calls run
    good, cases = bad_input_cases()
    for name, change in cases:
        args = {**good, **change}
        with pytest.raises(RuntimeError, match=name):
            flashcute.flash_attn_varlen_func(**args)
    q, k = good["q"].clone().requires_grad_(), good["k"]
    out, lse = torch.ops.flashcute.fwd_varlen(q, k, k, good["cu_seqlens_q"], good["cu_seqlens_k"], 6, 7)
    with pytest.raises(RuntimeError, match="lse"):
        torch.ops.flashcute.bwd_varlen(out, q, k, k, out, lse[:, :5], good["cu_seqlens_q"], good["cu_seqlens_k"], 6, 7)
    with pytest.raises(RuntimeError, match="dout"):
        torch.ops.flashcute.bwd_varlen(out[:5], q, k, k, out, lse, good["cu_seqlens_q"], good["cu_seqlens_k"], 6, 7)
    # The context still works.
    assert flashcute.flash_attn_varlen_func(**good).isfinite().all()


# --------------------------------------------------------------------------------- opcheck and compile

@needs_cuda
@pytest.mark.parametrize("causal", [False, True])
def test_opcheck(library, causal):
    skip_unless_built(torch.float16, 64)
    lens_q, lens_k = [3, 70, 0, 33], [40, 70, 5, 1]
    q, k, v = (t.requires_grad_() for t in make_packed(lens_q, lens_k, 4, 2, 64, torch.float16, "contiguous", 26))
    cu_q, cu_k = cu_seqlens(lens_q), cu_seqlens(lens_k)
    options = {"causal": causal, "deterministic": True}
    torch.library.opcheck(torch.ops.flashcute.fwd_varlen.default, (q, k, v, cu_q, cu_k, 70, 70), options)
    out, lse = torch.ops.flashcute.fwd_varlen(q, k, v, cu_q, cu_k, 70, 70, None, causal)
    dout = torch.randn_like(out)
    torch.library.opcheck(torch.ops.flashcute.bwd_varlen.default,
                          (dout, *(t.detach() for t in (q, k, v, out, lse)), cu_q, cu_k, 70, 70), options)


@needs_cuda
@pytest.mark.parametrize("backend", BACKENDS)
def test_cuda_graph_replay_with_new_lengths(library, backend):
    """fwd_varlen and bwd_varlen captured once in a CUDA graph (the SM90 forward's schedule prepass and workspace
    included); replayed after new lengths (same batch and totals) and new q, k, v, dout are copied into the
    captured buffers, they give the eager results for them, bit for bit (deterministic backward)."""
    fwd_backend, bwd_backend = varlen_backends(library, torch.bfloat16, 64, backend)
    total_q, total_k = 600, 700
    q, k, v = make_packed([total_q], [total_k], 4, 2, 64, torch.bfloat16, "contiguous", 51)
    dout = torch.randn_like(q)
    cu_q, cu_k = cu_seqlens([100, 0, 500]), cu_seqlens([300, 50, 350])

    def step():
        out, lse = torch.ops.flashcute.fwd_varlen(q, k, v, cu_q, cu_k, 600, 700, None, True, None, fwd_backend)
        grads = torch.ops.flashcute.bwd_varlen(dout, q, k, v, out, lse, cu_q, cu_k, 600, 700, None, True, None,
                                               True, bwd_backend)
        return out, lse, grads

    graph, (static_out, static_lse, static_grads) = capture_graph(step)
    generator = torch.Generator(device="cuda").manual_seed(52)
    for lens_q, lens_k in (([600, 0, 0], [1, 1, 698]), ([17, 583, 0], [350, 0, 350]), ([200, 200, 200], [0, 0, 700])):
        cu_q.copy_(cu_seqlens(lens_q))
        cu_k.copy_(cu_seqlens(lens_k))
        for t in (q, k, v, dout):
            t.copy_(torch.randn(t.shape, generator=generator, device="cuda", dtype=t.dtype))
        for t in (static_out, static_lse, *static_grads):
            t.fill_(math.nan)
        graph.replay()
        torch.cuda.synchronize()
        out, lse, grads = step()
        assert torch.equal(out, static_out) and torch.equal(lse, static_lse)
        assert all(torch.equal(a, b) for a, b in zip(grads, static_grads))
        refs = reference(q, k, v, dout, lens_q, lens_k, True)
        (out_ref, _, grads_ref), (out_torch, _, grads_torch) = refs[True], refs[False]
        out_atol = 2 * max_error(out_ref.to(q.dtype), out_ref) + 1e-6
        assert max_error(out, out_ref) <= 2 * max_error(out_torch, out_ref) + out_atol
        assert_grads_close(grads, q, k, v, dout, True, refs=(grads_ref, grads_torch))


@needs_cuda
def test_compile_training_step_is_one_graph(library):
    """fullgraph (a graph break is an error); the backward graph calls bwd_varlen once; eager's result."""
    from torch._dynamo.testing import AotEagerAndRecordGraphs

    skip_unless_built(torch.bfloat16, 64)
    torch._dynamo.reset()
    lens = [17, 64, 1]
    cu = cu_seqlens(lens)
    torch.manual_seed(0)
    projection = torch.nn.Linear(64, 3 * 64, bias=False).to(device="cuda", dtype=torch.bfloat16)
    x = torch.randn(sum(lens), 2, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)

    def loss_of(x):
        q, k, v = projection(x).chunk(3, dim=-1)
        out = flashcute.flash_attn_varlen_func(q, k, v, cu, cu, 64, 64, causal=True, deterministic=True)
        return out.float().square().mean()

    def training_step(fn):
        loss = fn(x)
        return loss, torch.autograd.grad(loss, [projection.weight, x])

    backend = AotEagerAndRecordGraphs()
    loss, grads = training_step(torch.compile(loss_of, backend=backend, fullgraph=True))
    expected_loss, expected_grads = training_step(loss_of)
    torch.testing.assert_close(loss, expected_loss, rtol=1e-2, atol=1e-4)
    torch.testing.assert_close(grads, expected_grads, rtol=2e-2, atol=1e-3)
    assert len(backend.graphs) == 1
    (backward,) = backend.bw_graphs
    assert [node.target for node in backward.graph.nodes].count(torch.ops.flashcute.bwd_varlen.default) == 1


# ---------------------------------------------------------------------------------------- no GPU needed

def test_fake_kernels_give_the_shapes():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        q = torch.empty(100, 8, 64, dtype=torch.bfloat16, device="cuda")
        k = torch.empty(50, 2, 64, dtype=torch.bfloat16, device="cuda")
        cu = torch.empty(4, dtype=torch.int32, device="cuda")
        out, lse = torch.ops.flashcute.fwd_varlen(q, k, k, cu, cu, 60, 30)
        assert out.shape == q.shape and out.dtype == q.dtype
        assert lse.shape == (8, 100) and lse.dtype == torch.float32
        dq, dk, dv = torch.ops.flashcute.bwd_varlen(out, q, k, k, out, lse, cu, cu, 60, 30)
        assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == k.shape


def test_bad_backend_is_a_value_error():
    q = torch.zeros(4, 1, 8)
    cu = torch.tensor([0, 4], dtype=torch.int32)
    with pytest.raises(ValueError, match="backend must be one of"):
        flashcute.flash_attn_varlen_func(q, q, q, cu, cu, 4, 4, backend="sm100")


def test_cpu_tensors_are_refused():
    q = torch.zeros(4, 1, 8, dtype=torch.bfloat16)
    cu = torch.tensor([0, 4], dtype=torch.int32)
    with pytest.raises(RuntimeError, match="must be a CUDA tensor"):
        flashcute.flash_attn_varlen_func(q, q, q, cu, cu, 4, 4)
