"""GPU tests of the backward pass: torch.ops.flashcute.bwd against float64 reference gradients, and training
through the autograd formula of torch.ops.flashcute.fwd (flash_attn_func) in real programs: opcheck,
torch.compile, CUDA graphs, two streams.

dq, dk and dv each pass when max|g - g_ref| <= 2 * max|g_torch - g_ref| + atol, where g_torch is PyTorch's own
backward of attention in the inputs' precision (tests/reference.py) and atol covers rounding the reference to
that precision (and float32 noise where a gradient vanishes by cancellation: assert_grads_close). Every backward
call gets the allocator's next blocks filled with NaN first (unwritten gradients and uninitialised accumulators
show up); the default mode and the deterministic mode are both held to the reference, and two deterministic
runs must be bitwise identical.

The grid is test_fwd.py's: the full cross product (dtype x head dim x causal x shape x MHA/GQA/MQA x layout,
dout strided like the inputs) on the small and ragged shapes, the head grouping and layout rotating on the
large ones. Both backends (sm90 on Hopper, for the head dims its backward covers; "auto" picks it there).
"""

import pytest
import torch

if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

import flashcute
from reference import attention_grads_ref
from test_fwd import (DTYPE_NAMES, DTYPES, HEAD_DIMS, HEADS, LAYOUTS, built_kernels, has_kernel, large_cases, make_qkv,
                      max_error, poison_next_allocations, seed_for)
from test_integration import OpAttention

SMALL_SHAPES = [(1, 1), (1, 239), (113, 203), (203, 113), (128, 128), (2048, 1), (239, 1)]
LARGE_SHAPES = [(1000, 1000), (1023, 1024), (4097, 4097)]
BACKENDS = ["sm80", "sm90"]


# --------------------------------------------------------------------------------------------- helpers

def skip_unless_built(dtype, head_dim, backend="sm80"):
    """Skip what the loaded build cannot run: the forward and backward kernels for this dtype at or above head_dim
    (FLASHCUTE_DTYPES/HDIMS builds, and the head dims the sm90 backward covers), or the sm90 backend off Hopper."""
    if backend == "sm90" and torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the sm90 backend needs a compute capability 9.x GPU")
    for op in ("fwd", "bwd"):
        if not has_kernel(op, backend, dtype, head_dim):
            pytest.skip(f"no {op} {backend} {DTYPE_NAMES[dtype]} kernel for head dim {head_dim} in this build")


def make_dout(q, layout, seed):
    """A dout like out, (b, sq, hq, d), strided as the layout's q is: contiguous, a transposed (b, h, s, d)
    tensor, or a slice of a wider one (the packed case)."""
    batch, seqlen_q, heads_q, head_dim = q.shape
    generator = torch.Generator(device="cuda").manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=generator, device="cuda", dtype=q.dtype)

    if layout == "contiguous":
        return randn(batch, seqlen_q, heads_q, head_dim)
    if layout == "bhsd":
        return randn(batch, heads_q, seqlen_q, head_dim).transpose(1, 2)
    assert layout == "packed"
    return randn(batch, seqlen_q, heads_q + 2, head_dim)[:, :, 1:heads_q + 1]


def bwd(dout, q, k, v, out, lse, causal, backend, softmax_scale=None, top_left=False, deterministic=False):
    """torch.ops.flashcute.bwd, with the allocator's next blocks poisoned with NaN: those of the gradients, then
    about those of the float32 workspaces (dq's accumulator, rowsum(dO * O)), which the kernels must initialise."""
    batch, seqlen_q, heads_q, head_dim = q.shape
    poison_next_allocations((q.shape, q.dtype), (k.shape, q.dtype), (v.shape, q.dtype),
                            (q.shape, torch.float32), ((batch, heads_q, seqlen_q), torch.float32))
    return torch.ops.flashcute.bwd(dout, q, k, v, out, lse, softmax_scale, causal, top_left, deterministic, backend)


def assert_grads_close(grads, q, k, v, dout, causal, softmax_scale=None, top_left=False, dlse=None, refs=None):
    """Hold (dq, dk, dv) to the float64 reference gradients; refs: (ground truth, torch's low precision), as
    reference_grads gives them, when already computed.

    atol: the reference's own rounding to the inputs' dtype, plus float32 noise at the scale of dv (2^-16
    max|dv|). That floor is for rows that see one key: their P is 1 and their dq (and dk, where every row sees
    one key) vanishes by cancellation, exactly in torch's backward (g - g) but only to float32 rounding in
    FlashAttention's dS = P * (dP - D), D = rowsum(dO * O)."""
    grads_ref, grads_torch = refs or reference_grads(q, k, v, dout, causal, softmax_scale, top_left, dlse)
    float32_noise = 2**-16 * grads_ref[2].abs().max().item() if grads_ref[2].numel() else 0.0
    for name, grad, t, grad_ref, grad_torch in zip(("dq", "dk", "dv"), grads, (q, k, v), grads_ref, grads_torch):
        assert grad.shape == t.shape and grad.dtype == q.dtype, f"{name}: {grad.shape} {grad.dtype}"
        assert grad.isfinite().all(), f"{name} has NaN/inf (unwritten or overflowed elements)"
        atol = 2 * max_error(grad_ref.to(q.dtype), grad_ref) + float32_noise + 1e-6
        error, torch_error = max_error(grad, grad_ref), max_error(grad_torch, grad_ref)
        assert error <= 2 * torch_error + atol, (
            f"{name}: max error {error:.3e} > 2 * torch's {torch_error:.3e} + {atol:.1e}"
        )


def reference_grads(q, k, v, dout, causal, softmax_scale=None, top_left=False, dlse=None):
    args = (q, k, v, dout, softmax_scale, causal, top_left)
    return attention_grads_ref(*args, dlse=dlse), attention_grads_ref(*args, upcast=False, dlse=dlse)


def check_bwd(q, k, v, dout, causal, backend, softmax_scale=None, top_left=False):
    """The forward, then the backward in the default mode and twice in the deterministic mode, each held to the
    reference; returns the deterministic (dq, dk, dv)."""
    refs = reference_grads(q, k, v, dout, causal, softmax_scale, top_left)
    out, lse = torch.ops.flashcute.fwd(q, k, v, softmax_scale, causal, top_left, backend)
    options = dict(causal=causal, backend=backend, softmax_scale=softmax_scale, top_left=top_left)
    grads = bwd(dout, q, k, v, out, lse, **options)
    assert all(g.is_contiguous() for g in grads)
    assert_grads_close(grads, q, k, v, dout, causal, softmax_scale, top_left, refs=refs)
    deterministic = bwd(dout, q, k, v, out, lse, **options, deterministic=True)
    assert_grads_close(deterministic, q, k, v, dout, causal, softmax_scale, top_left, refs=refs)
    again = bwd(dout, q, k, v, out, lse, **options, deterministic=True)
    assert all(torch.equal(a, b) for a, b in zip(deterministic, again)), "two deterministic runs differ"
    return deterministic


def attention_grads(q, k, v, dout, **kwargs):
    """(dq, dk, dv) through autograd: flash_attn_func on leaf copies of q, k, v."""
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    out = flashcute.flash_attn_func(*leaves, **kwargs)
    return torch.autograd.grad(out, leaves, dout)


# ---------------------------------------------------------------------------------------- correctness

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("heads", list(HEADS))
@pytest.mark.parametrize("seqlen_q, seqlen_k", SMALL_SHAPES)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("head_dim", HEAD_DIMS)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_NAMES.get)
def test_bwd_grid(library, dtype, head_dim, causal, seqlen_q, seqlen_k, heads, layout, backend):
    skip_unless_built(dtype, head_dim, backend)
    heads_q, heads_kv = HEADS[heads]
    seed = seed_for("bwd", dtype, head_dim, causal, seqlen_q, seqlen_k, heads, layout)
    q, k, v = make_qkv(2, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, dtype, layout, seed)
    check_bwd(q, k, v, make_dout(q, layout, seed + 1), causal, backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(**large_cases(LARGE_SHAPES))
def test_bwd_large(library, dtype, head_dim, causal, shape, heads, layout, backend):
    skip_unless_built(dtype, head_dim, backend)
    heads_q, heads_kv = HEADS[heads]
    seed = seed_for("bwd", dtype, head_dim, causal, shape)
    q, k, v = make_qkv(1, *shape, heads_q, heads_kv, head_dim, dtype, layout, seed)
    check_bwd(q, k, v, make_dout(q, layout, seed + 1), causal, backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("softmax_scale", [0.05, 0.5, 2.0])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_NAMES.get)
def test_softmax_scale(library, dtype, softmax_scale, backend):
    skip_unless_built(dtype, 128, backend)
    q, k, v = make_qkv(2, 300, 517, 4, 2, 128, dtype, "contiguous", seed_for("bwd", dtype, softmax_scale))
    dout = make_dout(q, "contiguous", 1)
    for causal in (False, True):
        check_bwd(q, k, v, dout, causal, backend, softmax_scale=softmax_scale)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("seqlen_q, seqlen_k", [(113, 203), (203, 113), (64, 65), (1, 239), (100, 700)])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_causal_top_left(library, head_dim, seqlen_q, seqlen_k, backend):
    skip_unless_built(torch.bfloat16, head_dim, backend)
    seed = seed_for("bwd", head_dim, seqlen_q, seqlen_k)
    q, k, v = make_qkv(2, seqlen_q, seqlen_k, 4, 4, head_dim, torch.bfloat16, "bhsd", seed)
    check_bwd(q, k, v, make_dout(q, "bhsd", seed + 1), causal=True, backend=backend, top_left=True)


DETERMINISTIC_LONG = """
import sys, torch, flashcute
seqlen, varlen, causal = int(sys.argv[1]), sys.argv[2] == "varlen", sys.argv[3] == "causal"
torch.manual_seed(0)
lengths = [17, seqlen, 300] if varlen else [seqlen]  # packed: the long sequence neither first nor last
q = torch.randn(sum(lengths), 1, 64, device="cuda", dtype=torch.bfloat16)
k, v, dout = torch.randn_like(q), torch.randn_like(q), torch.randn_like(q)
if varlen:
    cu = torch.tensor([0] + lengths, device="cuda").cumsum(0).int()
    args = (cu, cu, max(lengths), max(lengths), None, causal)
    out, lse = torch.ops.flashcute.fwd_varlen(q, k, v, *args, None, "sm90")
    run = lambda det: torch.ops.flashcute.bwd_varlen(dout, q, k, v, out, lse, *args, None, det, "sm90")
else:
    q, k, v, dout = (t.unsqueeze(0) for t in (q, k, v, dout))
    out, lse = torch.ops.flashcute.fwd(q, k, v, None, causal, False, "sm90")
    run = lambda det: torch.ops.flashcute.bwd(dout, q, k, v, out, lse, None, causal, False, det, "sm90")
first, again, default = run(True), run(True), run(False)
same = all(torch.equal(a, b) for a, b in zip(first, again))
diff = max(((a.float() - c.float()).abs().max() / c.float().abs().max()).item() for a, c in zip(first, default))
print(same, diff)
"""


@pytest.mark.parametrize("layout, causal", [("fixed", False), ("fixed", True), ("varlen", False), ("varlen", True)])
def test_deterministic_with_more_key_blocks_than_sms(library, layout, causal):
    # Deterministic, the K/V blocks of a head take their dQ turns in a fixed order (non-causal: rotated walks;
    # causal: the highest block first), each waiting only for blocks resident with it: with more K/V blocks per
    # head than SMs that must still finish, fixed length and in a packed batch (in a subprocess, so that a
    # deadlock fails the test rather than hanging the run).
    skip_unless_built(torch.bfloat16, 64, "sm90")
    if layout == "varlen" and not all(f"{op}_sm90_bf16_hdim64" in built_kernels() for op in ("fwd", "bwd")):
        pytest.skip("packed batches need the sm90 kernels of their own head dim (64), not built")
    import subprocess
    import sys
    key_blocks = torch.cuda.get_device_properties(0).multi_processor_count + 3
    seqlen = 128 * key_blocks + 17  # hdim 64's SM90 backward: 128-key blocks; a ragged last one
    try:
        r = subprocess.run([sys.executable, "-c", DETERMINISTIC_LONG, str(seqlen), layout,
                            "causal" if causal else "full"], capture_output=True, text=True, timeout=180)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the deterministic backward ({layout}) at seqlen {seqlen} did not finish in 180 s (deadlock)")
    assert r.returncode == 0, r.stderr[-2000:]
    same, diff = r.stdout.split()[-2:]
    assert same == "True", "two deterministic runs differ"
    assert float(diff) < 2e-2, f"deterministic and default gradients differ by {diff} of their largest value"


@pytest.mark.parametrize("backend", BACKENDS)
def test_rows_without_keys_get_zero_dq_and_give_nothing(library, backend):
    # Bottom-right causal, sq > sk: the first sq - sk = 200 query rows see no key.
    skip_unless_built(torch.float16, 64, backend)
    q, k, v = make_qkv(2, 300, 100, 4, 2, 64, torch.float16, "contiguous", 11)
    dout = make_dout(q, "contiguous", 12)
    dq, dk, dv = check_bwd(q, k, v, dout, causal=True, backend=backend)
    assert torch.all(dq[:, :200] == 0)
    out, lse = torch.ops.flashcute.fwd(q, k, v, None, True, False, backend)
    other_dout = dout.clone()
    other_dout[:, :200] = make_dout(q, "contiguous", 13)[:, :200] * 100  # what those rows are given changes nothing
    assert all(torch.equal(a, b) for a, b in zip(
        bwd(other_dout, q, k, v, out, lse, True, backend, deterministic=True), (dq, dk, dv)))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("batch, seqlen_q, seqlen_k", [(0, 16, 16), (2, 16, 0), (2, 0, 16), (0, 0, 0)])
def test_empty_sizes(library, batch, seqlen_q, seqlen_k, backend):
    skip_unless_built(torch.bfloat16, 64, backend)
    q, k, v = make_qkv(batch, seqlen_q, seqlen_k, 4, 2, 64, torch.bfloat16, "contiguous", 3)
    dout = torch.randn_like(q)
    for causal in (False, True):
        out, lse = torch.ops.flashcute.fwd(q, k, v, None, causal, False, backend)
        for deterministic in (False, True):
            grads = bwd(dout, q, k, v, out, lse, causal, backend, deterministic=deterministic)
            torch.cuda.synchronize()
            assert [g.shape for g in grads] == [q.shape, k.shape, v.shape]
            assert all(torch.all(g == 0) for g in grads)
    assert all(torch.all(g == 0) for g in attention_grads(q, k, v, dout, causal=True))


@pytest.mark.parametrize("backend", ["auto", "sm80"])
def test_kv_broadcast_over_the_batch(library, backend):
    # One k and v for the whole batch (stride-0 batch dims), as the forward takes them: dk and dv per batch element.
    skip_unless_built(torch.bfloat16, 128)
    q, k, v = make_qkv(3, 200, 300, 4, 2, 128, torch.bfloat16, "contiguous", 17)
    k, v = k[:1].expand_as(k), v[:1].expand_as(v)
    dout = make_dout(q, "contiguous", 18)
    out, lse = torch.ops.flashcute.fwd(q, k, v, None, True, False, backend)
    assert_grads_close(bwd(dout, q, k, v, out, lse, True, backend), q, k, v, dout, causal=True)


def test_inputs_are_not_modified(library):
    skip_unless_built(torch.float16, 128)
    q, k, v = make_qkv(1, 257, 257, 4, 4, 128, torch.float16, "packed", 9)
    dout = make_dout(q, "packed", 10)
    out, lse = torch.ops.flashcute.fwd(q, k, v, None, True, False, "sm80")
    inputs = (dout, q, k, v, out, lse)
    before = [t.clone() for t in inputs]
    torch.ops.flashcute.bwd(*inputs, None, True, False, False, "sm80")
    assert all(torch.equal(a, b) for a, b in zip(inputs, before))


# ---------------------------------------------------------------------------------------------- autograd

def test_autograd_is_the_op(library):
    """loss.backward() through flash_attn_func gives exactly the ops' gradients."""
    skip_unless_built(torch.bfloat16, 128)
    q, k, v = make_qkv(2, 200, 300, 8, 2, 128, torch.bfloat16, "bhsd", 21)
    dout = make_dout(q, "bhsd", 22)
    grads = attention_grads(q, k, v, dout, softmax_scale=0.1, causal=True, backend="sm80", deterministic=True)
    out, lse = torch.ops.flashcute.fwd(q, k, v, 0.1, True, False, "sm80")
    expected = torch.ops.flashcute.bwd(dout, q, k, v, out, lse, 0.1, True, False, True, "sm80")
    assert all(torch.equal(a, b) for a, b in zip(grads, expected))


@pytest.mark.parametrize("loss", ["sum", "concatenated"])
def test_autograd_makes_any_dout_readable(library, loss):
    """Autograd may hand the formula a gradient the kernel cannot read: out.sum()'s is a stride-0 expansion,
    and the slice of torch.cat([out, three more columns], -1)'s has rows of d + 3 elements (not 16-byte
    aligned). Both are copied for the kernel."""
    skip_unless_built(torch.float16, 64)
    q, k, v = make_qkv(2, 129, 129, 4, 4, 64, torch.float16, "contiguous", 23)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = flashcute.flash_attn_func(*leaves, causal=True)
    if loss == "sum":
        dout = torch.ones_like(q)
        out.sum().backward()
    else:
        dout = make_dout(q, "contiguous", 24)
        extra = torch.zeros(*q.shape[:3], 3, device="cuda", dtype=q.dtype)
        torch.cat([out, extra], dim=-1).backward(torch.cat([dout, extra], dim=-1))
    assert_grads_close([t.grad for t in leaves], q, k, v, dout, causal=True)


def test_auto_backend_trains(library):
    """backend="auto" trains, and its backward is the sm90 one on Hopper where built, else the sm80 one."""
    skip_unless_built(torch.bfloat16, 128)
    q, k, v = make_qkv(2, 333, 333, 8, 2, 128, torch.bfloat16, "bhsd", 25)
    dout = make_dout(q, "bhsd", 26)
    assert_grads_close(attention_grads(q, k, v, dout, causal=True), q, k, v, dout, causal=True)
    hopper = torch.cuda.get_device_capability()[0] == 9 and has_kernel("bwd", "sm90", torch.bfloat16, 128)
    out, lse = torch.ops.flashcute.fwd(q, k, v, None, True, False, "auto")
    auto = torch.ops.flashcute.bwd(dout, q, k, v, out, lse, None, True, False, True, "auto")
    chosen = torch.ops.flashcute.bwd(dout, q, k, v, out, lse, None, True, False, True, "sm90" if hopper else "sm80")
    assert all(torch.equal(a, b) for a, b in zip(auto, chosen))


@pytest.mark.parametrize("causal, seqlen_q, seqlen_k", [(False, 200, 300), (True, 300, 200)])
@pytest.mark.parametrize("uses_out", [True, False])
def test_gradient_through_lse(library, causal, seqlen_q, seqlen_k, uses_out):
    """A loss of out and lse (or lse alone): the lse part comes from a forward and a backward call."""
    skip_unless_built(torch.bfloat16, 64)
    q, k, v = make_qkv(2, seqlen_q, seqlen_k, 6, 2, 64, torch.bfloat16, "bhsd", 27)
    dout = make_dout(q, "bhsd", 28) if uses_out else torch.zeros_like(q)
    dlse = torch.randn(2, 6, seqlen_q, device="cuda", generator=torch.Generator("cuda").manual_seed(29))
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    out, lse = flashcute.flash_attn_func(*leaves, causal=causal, return_lse=True)
    loss = (lse.masked_fill(torch.isinf(lse), 0) * dlse).sum()
    if uses_out:
        loss = loss + (out * dout).sum()
    grads = torch.autograd.grad(loss, leaves, allow_unused=True)
    if not uses_out:
        assert grads[2] is None  # v does not reach lse
        grads = (*grads[:2], torch.zeros_like(v))
    assert_grads_close(grads, q, k, v, dout, causal, dlse=dlse)


def test_double_backward_is_a_clear_error(library):
    skip_unless_built(torch.bfloat16, 64)
    q, k, v = (t.requires_grad_() for t in make_qkv(1, 64, 64, 2, 2, 64, torch.bfloat16, "contiguous", 30))
    (dq,) = torch.autograd.grad(flashcute.flash_attn_func(q, k, v).sum(), q, create_graph=True)
    with pytest.raises(NotImplementedError, match="flashcute.bwd has no backward pass"):
        dq.sum().backward()


# ------------------------------------------------------------------------------------------------- opcheck

OPCHECK_CASES = [
    # (batch, sq, sk, heads_q, heads_kv, head_dim, layout, dtype, causal, top_left)
    (2, 128, 128, 4, 4, 64, "contiguous", torch.float16, False, False),
    (1, 1, 239, 8, 2, 256, "bhsd", torch.bfloat16, True, False),
    (2, 203, 17, 8, 1, 96, "contiguous", torch.bfloat16, True, False),  # rows without keys (lse = -inf)
    (3, 113, 113, 4, 4, 128, "packed", torch.float16, True, True),
    (2, 17, 203, 6, 3, 80, "bhsd", torch.float16, True, True),
    (2, 65, 65, 6, 2, 32, "contiguous", torch.bfloat16, False, False),
]


def opcheck_inputs(case):
    batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, layout, dtype, causal, top_left = case
    skip_unless_built(dtype, head_dim)
    q, k, v = make_qkv(batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, dtype, layout, seed_for(case))
    options = {"softmax_scale": 0.2 if head_dim == 96 else None, "causal": causal, "causal_top_left": top_left,
               "deterministic": True}  # eager and compiled gradients compared exactly enough
    return (q, k, v), make_dout(q, layout, seed_for(case) + 1), options


@pytest.mark.parametrize("case", OPCHECK_CASES, ids=lambda case: "-".join(map(str, case)).replace("torch.", ""))
def test_opcheck_fwd_with_gradients(library, case):
    """fwd's autograd under opcheck: test_autograd_registration, and test_aot_dispatch_dynamic comparing
    gradients (of out and lse together) eager and through AOTAutograd."""
    qkv, _, options = opcheck_inputs(case)
    qkv = tuple(t.requires_grad_() for t in qkv)
    torch.library.opcheck(torch.ops.flashcute.fwd.default, qkv, options)


@pytest.mark.parametrize("case", OPCHECK_CASES, ids=lambda case: "-".join(map(str, case)).replace("torch.", ""))
def test_opcheck_bwd(library, case):
    qkv, dout, options = opcheck_inputs(case)
    out, lse = torch.ops.flashcute.fwd(*qkv, options["softmax_scale"], options["causal"], options["causal_top_left"])
    torch.library.opcheck(torch.ops.flashcute.bwd.default, (dout, *qkv, out, lse), options)
    # With inputs that require grad (double backward, which raises): the op has its autograd kernel.
    qkv = tuple(t.detach().requires_grad_() for t in qkv)
    torch.library.opcheck(torch.ops.flashcute.bwd.default, (dout, *qkv, out, lse), options,
                          test_utils=("test_schema", "test_autograd_registration", "test_faketensor"))


def test_opcheck_auto_backend(library):
    skip_unless_built(torch.bfloat16, 128)
    q, k, v = (t.requires_grad_() for t in make_qkv(2, 77, 129, 8, 2, 128, torch.bfloat16, "contiguous", 31))
    torch.library.opcheck(torch.ops.flashcute.fwd.default, (q, k, v), {"causal": True, "deterministic": True})


# ------------------------------------------------------------------------------------------- torch.compile

def training_step(model, x):
    """The loss of one step and the gradients of the weights and of x."""
    loss = model(x).float().square().mean()
    return loss, torch.autograd.grad(loss, [*model.parameters(), x])


def block_and_inputs(seqlens):
    torch.manual_seed(0)
    model = OpAttention(use="flash_attn_func", deterministic=True).to(device="cuda", dtype=torch.bfloat16)
    inputs = [torch.randn(2, s, 256, device="cuda", dtype=torch.bfloat16, requires_grad=True) for s in seqlens]
    return model, inputs


def test_compile_training_step_is_one_graph(library):
    """fullgraph (a graph break is an error), one dynamic graph for two lengths, the backward graph calls bwd
    once and nothing for the unused lse; the result is eager's."""
    from torch._dynamo.testing import AotEagerAndRecordGraphs

    skip_unless_built(torch.bfloat16, 64)
    torch._dynamo.reset()
    model, inputs = block_and_inputs([203, 1000])
    backend = AotEagerAndRecordGraphs()
    compiled = torch.compile(model, backend=backend, fullgraph=True)
    for x in inputs:
        torch._dynamo.mark_dynamic(x, 1)
        loss, grads = training_step(compiled, x)
        expected_loss, expected_grads = training_step(model, x)
        torch.testing.assert_close(loss, expected_loss, rtol=1e-2, atol=1e-4)
        torch.testing.assert_close(grads, expected_grads, rtol=2e-2, atol=1e-3)
    assert len(backend.graphs) == 1
    (forward,), (backward,) = backend.fw_graphs, backend.bw_graphs
    forward_ops = [node.target for node in forward.graph.nodes]
    backward_ops = [node.target for node in backward.graph.nodes]
    assert forward_ops.count(torch.ops.flashcute.fwd.default) == 1
    assert backward_ops.count(torch.ops.flashcute.bwd.default) == 1
    assert torch.ops.flashcute.fwd.default not in backward_ops


def test_compile_training_step_inductor(library):
    skip_unless_built(torch.bfloat16, 64)
    torch._dynamo.reset()
    model, (x,) = block_and_inputs([333])
    compiled = torch.compile(model, fullgraph=True)
    loss, grads = training_step(compiled, x)
    expected_loss, expected_grads = training_step(model, x)
    torch.testing.assert_close(loss, expected_loss, rtol=1e-2, atol=1e-4)
    torch.testing.assert_close(grads, expected_grads, rtol=2e-2, atol=2e-3)


# ----------------------------------------------------------------------------------- CUDA graphs, streams

def capture_graph(step):
    """(graph, what step() returned while captured): step runs twice on a side stream first, as
    torch.cuda.graphs recommends, then once under capture."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outputs = step()
    return graph, outputs


@pytest.mark.parametrize("deterministic", [False, True])
def test_cuda_graph_replay_of_a_training_step(library, deterministic):
    """Forward and backward captured in one CUDA graph; replayed on new data, it gives eager's gradients."""
    skip_unless_built(torch.bfloat16, 128)
    static = [t.clone() for t in make_qkv(2, 300, 517, 8, 2, 128, torch.bfloat16, "contiguous", 31)]
    static_dout = make_dout(static[0], "contiguous", 32)
    leaves = [t.requires_grad_() for t in static]

    def step():
        out = flashcute.flash_attn_func(*leaves, causal=True, deterministic=deterministic)
        return torch.autograd.grad(out, leaves, static_dout)

    graph, static_grads = capture_graph(step)

    for seed in (33, 34):  # new data in the captured buffers, then replay
        q, k, v = make_qkv(2, 300, 517, 8, 2, 128, torch.bfloat16, "contiguous", seed)
        dout = make_dout(q, "contiguous", seed + 100)
        with torch.no_grad():
            for buffer, new in zip((*leaves, static_dout), (q, k, v, dout)):
                buffer.copy_(new)
        graph.replay()
        torch.cuda.synchronize()
        if deterministic:
            expected = attention_grads(q, k, v, dout, causal=True, deterministic=True)
            assert all(torch.equal(a, b) for a, b in zip(static_grads, expected))
        else:
            assert_grads_close(static_grads, q, k, v, dout, causal=True)


def test_two_streams(library):
    """Two streams, each training on its own inputs at once, the first held back by a long sleep: each gets
    the gradients it gets alone (so each backward ran on its own stream, the one of its forward)."""
    skip_unless_built(torch.bfloat16, 128)
    problems = [make_qkv(2, 333, 333, 8, 2, 128, torch.bfloat16, "bhsd", 35),
                make_qkv(1, 1024, 517, 4, 4, 64, torch.bfloat16, "contiguous", 36)]
    douts = [make_dout(qkv[0], "contiguous", 37) for qkv in problems]
    expected = [attention_grads(*qkv, dout, causal=True, deterministic=True) for qkv, dout in zip(problems, douts)]
    late_dout = torch.zeros_like(douts[0])
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    torch.cuda.synchronize()
    results = []
    for stream, qkv, dout in zip(streams, problems, douts):
        with torch.cuda.stream(stream):
            if stream is streams[0]:
                torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU time before late_dout gets its values
                late_dout.copy_(dout)
                dout = late_dout
            results.append(attention_grads(*qkv, dout, causal=True, deterministic=True))
    for stream in streams:
        torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    for got, want in zip(results, expected):
        assert all(torch.equal(a, b) for a, b in zip(got, want))
