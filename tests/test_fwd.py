"""GPU tests of torch.ops.flashcute.fwd against a float64 reference.

A result passes when max|out - ref| <= 2 * max|out_torch - ref| + atol, where out_torch is PyTorch attention
computed in the inputs' own precision (tests/reference.py) and atol covers rounding the reference to that
precision; the same for the LSE. Every call gets fresh random inputs, the allocator's next blocks are filled
with NaN first (unwritten output shows up), and a second run must be bitwise identical.

The full grid (dtype x head dim x causal x shape x MHA/GQA/MQA x memory layout x backend) runs on the small
and ragged shapes; the large shapes run every dtype x head dim x causal x backend with the head grouping and
layout rotating, to keep the suite within a few minutes on one GPU.
"""

import functools
import itertools
import math
import zlib

import pytest
import torch

from reference import attention_ref

if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

DTYPES = [torch.float16, torch.bfloat16]
DTYPE_NAMES = {torch.float16: "fp16", torch.bfloat16: "bf16"}
HEAD_DIMS = [32, 64, 80, 96, 128, 192, 256]
SMALL_SHAPES = [(1, 1), (1, 239), (113, 203), (128, 128), (2048, 1), (239, 1)]
LARGE_SHAPES = [(1000, 1000), (1023, 1024), (4097, 4097), (129, 4500)]  # seqlen_k >= 4096: SM90 long-k tiles
HEADS = {"mha": (4, 4), "gqa": (6, 2), "mqa": (4, 1)}
LAYOUTS = ["contiguous", "bhsd", "packed"]
BACKENDS = ["sm80", "sm90"]


# --------------------------------------------------------------------------------------------- helpers

def skip_unless_built(library, dtype, head_dim, backend):
    """Skip what the loaded build cannot run: a head dim with no built kernel at or above it for this dtype
    (FLASHCUTE_DTYPES/HDIMS builds), or the sm90 backend off Hopper or outside the build."""
    if backend == "sm90" and torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the sm90 backend needs a compute capability 9.x GPU")
    if not has_kernel("fwd", backend, dtype, head_dim):
        pytest.skip(f"no {backend} {DTYPE_NAMES[dtype]} kernel for head dim {head_dim} in this build")


def has_kernel(op, backend, dtype, head_dim):
    """Whether the loaded build has an `op` kernel of this backend and dtype for head_dim (one at or above it)."""
    prefix = f"{op}_{backend}_{DTYPE_NAMES[dtype]}_hdim"
    return any(name.startswith(prefix) and int(name[len(prefix):]) >= head_dim for name in built_kernels())


@functools.cache
def built_kernels():
    return tuple(torch.ops.flashcute.built_kernels())  # e.g. "fwd_sm80_bf16_hdim128"


def seed_for(*params):
    return zlib.crc32(repr(params).encode())


def make_qkv(batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, dtype, layout, seed):
    """q (b, sq, hq, d), k and v (b, sk, hkv, d) in one of the memory layouts callers hand the op:
    contiguous; transposed views of (b, h, s, d) tensors; slices of a packed qkv (or kv when sq != sk)."""
    generator = torch.Generator(device="cuda").manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=generator, device="cuda", dtype=dtype)

    if layout == "contiguous":
        return randn(batch, seqlen_q, heads_q, head_dim), *(randn(batch, seqlen_k, heads_kv, head_dim) for _ in "kv")
    if layout == "bhsd":
        q = randn(batch, heads_q, seqlen_q, head_dim).transpose(1, 2)
        k, v = (randn(batch, heads_kv, seqlen_k, head_dim).transpose(1, 2) for _ in "kv")
        return q, k, v
    assert layout == "packed"
    if seqlen_q == seqlen_k:
        qkv = randn(batch, seqlen_q, heads_q + 2 * heads_kv, head_dim)
        return qkv.split([heads_q, heads_kv, heads_kv], dim=2)
    kv = randn(batch, seqlen_k, 2 * heads_kv, head_dim)
    return (randn(batch, seqlen_q, heads_q, head_dim), *kv.split([heads_kv, heads_kv], dim=2))


def poison_next_allocations(*specs):
    """Fill the blocks PyTorch's caching allocator hands out next, for tensors of these (shape, dtype) asked
    for in this order, with NaN: the allocator is deterministic, so freeing them and asking again for the same
    sizes returns the same memory."""
    blocks = [torch.full(shape, math.nan, dtype=dtype, device="cuda") for shape, dtype in specs]
    blocks.clear()


def max_error(actual, expected):
    return (actual.double() - expected).abs().max().item() if expected.numel() else 0.0


def assert_close_to_reference(out, lse, out_ref, lse_ref, out_torch, lse_torch):
    """The rule for out and lse: finite where they should be, -inf lse on exactly the reference's rows, and each
    error against the float64 reference (out_ref, lse_ref) at most twice PyTorch's own low-precision attention's
    (out_torch, lse_torch), plus the reference's rounding to out's dtype."""
    assert out.isfinite().all(), "out has NaN/inf (unwritten or overflowed elements)"
    assert not lse.isnan().any() and not (lse == math.inf).any(), "lse has NaN/+inf"
    assert torch.equal(lse == -math.inf, lse_ref == -math.inf), "lse = -inf on other rows than the reference"

    out_atol = 2 * max_error(out_ref.to(out.dtype), out_ref) + 1e-6
    out_error, out_torch_error = max_error(out, out_ref), max_error(out_torch, out_ref)
    assert out_error <= 2 * out_torch_error + out_atol, (
        f"out: max error {out_error:.3e} > 2 * torch's {out_torch_error:.3e} + {out_atol:.1e}"
    )
    finite = torch.isfinite(lse_ref)
    lse_error, lse_torch_error = max_error(lse[finite], lse_ref[finite]), max_error(lse_torch[finite], lse_ref[finite])
    assert lse_error <= 2 * lse_torch_error + 1e-4, (
        f"lse: max error {lse_error:.3e} > 2 * torch's {lse_torch_error:.3e} + 1e-4"
    )


def check_fwd(q, k, v, causal, backend, softmax_scale=None, top_left=False):
    """Run the op (twice) and hold it to the float64 reference; returns (out, lse)."""
    batch, seqlen_q, heads_q, head_dim = q.shape
    out_ref, lse_ref = attention_ref(q, k, v, softmax_scale, causal, top_left)
    out_torch, lse_torch = attention_ref(q, k, v, softmax_scale, causal, top_left, upcast=False)

    poison_next_allocations((q.shape, q.dtype), ((batch, heads_q, seqlen_q), torch.float32))
    out, lse = torch.ops.flashcute.fwd(q, k, v, softmax_scale, causal, top_left, backend)

    assert out.shape == q.shape and out.dtype == q.dtype and out.is_contiguous()
    assert lse.shape == (batch, heads_q, seqlen_q) and lse.dtype == torch.float32 and lse.is_contiguous()
    assert_close_to_reference(out, lse, out_ref, lse_ref, out_torch, lse_torch)

    out_again, lse_again = torch.ops.flashcute.fwd(q, k, v, softmax_scale, causal, top_left, backend)
    assert torch.equal(out, out_again) and torch.equal(lse, lse_again), "two runs differ"
    return out, lse


# ---------------------------------------------------------------------------------------- correctness

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("heads", list(HEADS))
@pytest.mark.parametrize("seqlen_q, seqlen_k", SMALL_SHAPES)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("head_dim", HEAD_DIMS)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_NAMES.get)
def test_fwd_grid(library, dtype, head_dim, causal, seqlen_q, seqlen_k, heads, layout, backend):
    skip_unless_built(library, dtype, head_dim, backend)
    heads_q, heads_kv = HEADS[heads]
    seed = seed_for(dtype, head_dim, causal, seqlen_q, seqlen_k, heads, layout)
    q, k, v = make_qkv(2, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, dtype, layout, seed)
    check_fwd(q, k, v, causal, backend)


def large_cases(shapes):
    """Every dtype x head dim x causal x shape, the head grouping and the layout rotating; with their test ids."""
    cases = [(dtype, head_dim, causal, shape, list(HEADS)[i % 3], LAYOUTS[(i // 3) % 3])
             for i, (dtype, head_dim, causal, shape) in enumerate(itertools.product(DTYPES, HEAD_DIMS, [False, True],
                                                                                    shapes))]
    ids = [f"{DTYPE_NAMES[c[0]]}-d{c[1]}-{'causal' if c[2] else 'full'}-{c[3][0]}x{c[3][1]}-{c[4]}-{c[5]}" for c in cases]
    return {"argnames": "dtype, head_dim, causal, shape, heads, layout", "argvalues": cases, "ids": ids}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(**large_cases(LARGE_SHAPES))
def test_fwd_large(library, dtype, head_dim, causal, shape, heads, layout, backend):
    skip_unless_built(library, dtype, head_dim, backend)
    heads_q, heads_kv = HEADS[heads]
    q, k, v = make_qkv(1, *shape, heads_q, heads_kv, head_dim, dtype, layout, seed_for(dtype, head_dim, causal, shape))
    check_fwd(q, k, v, causal, backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("softmax_scale", [0.05, 0.5, 2.0])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_NAMES.get)
def test_softmax_scale(library, dtype, softmax_scale, backend):
    skip_unless_built(library, dtype, 128, backend)
    q, k, v = make_qkv(2, 300, 517, 4, 2, 128, dtype, "contiguous", seed_for(dtype, softmax_scale))
    for causal in (False, True):
        check_fwd(q, k, v, causal, backend, softmax_scale=softmax_scale)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("seqlen_q, seqlen_k", [(113, 203), (203, 113), (64, 65), (1, 239)])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_causal_top_left(library, head_dim, seqlen_q, seqlen_k, backend):
    skip_unless_built(library, torch.bfloat16, head_dim, backend)
    q, k, v = make_qkv(2, seqlen_q, seqlen_k, 4, 4, head_dim, torch.bfloat16, "bhsd", seed_for(head_dim, seqlen_q, seqlen_k))
    check_fwd(q, k, v, causal=True, backend=backend, top_left=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_rows_without_keys_are_zero_with_minus_inf_lse(library, backend):
    # Bottom-right causal, sq > sk: query i sees keys j <= i - (sq - sk); the first sq - sk rows see none.
    skip_unless_built(library, torch.float16, 64, backend)
    q, k, v = make_qkv(2, 300, 100, 4, 4, 64, torch.float16, "contiguous", 11)
    out, lse = check_fwd(q, k, v, causal=True, backend=backend)
    assert torch.all(out[:, :200] == 0) and torch.all(lse[:, :, :200] == -math.inf)
    assert torch.isfinite(lse[:, :, 200:]).all()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("batch, seqlen_q, seqlen_k", [(0, 16, 16), (2, 16, 0), (2, 0, 16), (0, 0, 0)])
def test_empty_sizes(library, backend, batch, seqlen_q, seqlen_k):
    skip_unless_built(library, torch.bfloat16, 64, backend)
    q, k, v = make_qkv(batch, seqlen_q, seqlen_k, 4, 2, 64, torch.bfloat16, "contiguous", 3)
    for causal in (False, True):
        out, lse = torch.ops.flashcute.fwd(q, k, v, None, causal, False, backend)
        torch.cuda.synchronize()
        assert out.shape == q.shape and lse.shape == (batch, 4, seqlen_q)
        assert torch.all(out == 0) and torch.all(lse == -math.inf)  # no key: out 0, lse -inf


@pytest.mark.parametrize("backend", BACKENDS)
def test_offsets_past_int32(library, backend):
    # Batch 1 of q starts 2^31 elements into its storage: element offsets must be computed in 64 bits.
    skip_unless_built(library, torch.bfloat16, 64, backend)
    if torch.cuda.mem_get_info()[0] < 12 * 2**30:
        pytest.skip("needs 12 GiB of free GPU memory")
    batch_stride = 2**31 + 64
    storage = torch.empty(batch_stride + 128 * 4 * 64, device="cuda", dtype=torch.bfloat16).normal_()
    q = storage.as_strided((2, 128, 4, 64), (batch_stride, 4 * 64, 64, 1))
    k, v = (torch.randn(2, 200, 2, 64, device="cuda", dtype=torch.bfloat16) for _ in "kv")
    check_fwd(q, k, v, causal=False, backend=backend)


@pytest.mark.parametrize("backend", ["auto", "sm80"])
def test_kv_broadcast_over_the_batch(library, backend):
    # Stride-0 batch dims are valid input; "auto" must run them (on Hopper: on sm80, as TMA cannot encode them).
    skip_unless_built(library, torch.bfloat16, 128, "sm80")
    q, k, v = make_qkv(3, 200, 300, 4, 2, 128, torch.bfloat16, "contiguous", 17)
    check_fwd(q, k[:1].expand_as(k), v[:1].expand_as(v), causal=True, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_inputs_are_not_modified(library, backend):
    skip_unless_built(library, torch.float16, 128, backend)
    qkv = make_qkv(1, 257, 257, 4, 4, 128, torch.float16, "packed", 9)
    before = [t.clone() for t in qkv]
    torch.ops.flashcute.fwd(*qkv, None, True, False, backend)
    assert all(torch.equal(a, b) for a, b in zip(qkv, before))


# ---------------------------------------------------------------------------------- Python-side API

def test_flash_attn_func_matches_the_op(library):
    import flashcute

    skip_unless_built(library, torch.bfloat16, 128, "sm80")
    q, k, v = make_qkv(2, 200, 300, 8, 2, 128, torch.bfloat16, "bhsd", 21)
    out, lse = torch.ops.flashcute.fwd(q, k, v, 0.1, True)
    assert torch.equal(flashcute.flash_attn_func(q, k, v, softmax_scale=0.1, causal=True), out)
    out_api, lse_api = flashcute.flash_attn_func(q, k, v, softmax_scale=0.1, causal=True, return_lse=True)
    assert torch.equal(out_api, out) and torch.equal(lse_api, lse)


def test_auto_backend_matches_an_explicit_one(library):
    skip_unless_built(library, torch.float16, 64, "sm80")
    q, k, v = make_qkv(1, 333, 333, 4, 4, 64, torch.float16, "contiguous", 13)
    out_auto, _ = torch.ops.flashcute.fwd(q, k, v, None, True, False, "auto")
    sm90_built = torch.cuda.get_device_capability()[0] == 9 and any(n.startswith("fwd_sm90_fp16") for n in built_kernels())
    out_chosen, _ = torch.ops.flashcute.fwd(q, k, v, None, True, False, "sm90" if sm90_built else "sm80")
    assert torch.equal(out_auto, out_chosen)


def test_fake_kernel_gives_the_op_shapes(library):
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        q = torch.empty(2, 8, 100, 128, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
        k = torch.empty(2, 50, 2, 128, device="cuda", dtype=torch.bfloat16)
        out, lse = torch.ops.flashcute.fwd(q, k, k, None, True)
    assert out.shape == (2, 100, 8, 128) and out.dtype == torch.bfloat16 and out.is_contiguous()
    assert lse.shape == (2, 8, 100) and lse.dtype == torch.float32


def test_poisoning_reaches_the_next_allocation():
    # The premise of check_fwd's NaN poisoning: the next allocations of those sizes get the poisoned memory.
    shapes = [((2, 113, 6, 64), torch.bfloat16), ((2, 6, 113), torch.float32)]
    poison_next_allocations(*shapes)
    out, lse = (torch.empty(shape, dtype=dtype, device="cuda") for shape, dtype in shapes)
    assert out.isnan().all() and lse.isnan().all()
