"""Every input check of torch.ops.flashcute.fwd and .bwd (csrc/flash_api.cpp) and of the Python API, with its
message. Bad input must give an error naming the argument and what was expected, never a crash or a wrong
answer, and the GPU must stay usable after it."""

import math
import os
import re
import subprocess
import sys
import textwrap

import pytest
import torch

import flashcute

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.fixture
def library(library):
    """conftest's library, skipped where the build lacks the fp16 head dim 64 forward and backward (a
    FLASHCUTE_DTYPES=bf16 build): these tests build their inputs, and the backward's out and lse, with them."""
    from test_bwd import skip_unless_built

    skip_unless_built(torch.float16, 64)
    return library


def fwd(q, k, v, softmax_scale=None, causal=False, causal_top_left=False, backend="auto"):
    return torch.ops.flashcute.fwd(q, k, v, softmax_scale, causal, causal_top_left, backend)


def qkv(batch=2, seqlen_q=16, seqlen_k=16, heads_q=4, heads_kv=4, head_dim=64, dtype=torch.float16, device="cuda"):
    q = torch.randn(batch, seqlen_q, heads_q, head_dim, dtype=dtype, device=device)
    k = torch.randn(batch, seqlen_k, heads_kv, head_dim, dtype=dtype, device=device)
    return q, k, torch.randn_like(k)


def raises(message):
    return pytest.raises(RuntimeError, match=re.escape(f"flashcute.fwd: {message}"))


def test_cpu_tensors_are_refused_with_a_clear_message():
    # Served by the op's Python kernel: no extension, no GPU needed.
    q, k, v = qkv(device="cpu")
    with raises("q must be a CUDA tensor, got a tensor on cpu"):
        fwd(q, k, v)


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("value", [None, [1.0], 2.0])
def test_an_input_that_is_not_a_tensor_is_named(grad, value):
    # With and without grad mode (the Python entry points call the op below autograd where no input needs a
    # gradient): the error names q, never an AttributeError from inside.
    _, k, v = qkv(device="cpu")
    expected = (TypeError, "flashcute.fwd: q must be a tensor, got NoneType") if value is None else (
        RuntimeError, "flashcute::fwd() Expected a value of type 'Tensor' for argument 'q'")
    with torch.set_grad_enabled(grad), pytest.raises(expected[0], match=re.escape(expected[1])):
        flashcute.flash_attn_func(value, k, v)


@cuda
def test_none_among_cuda_tensors_is_named(library):
    # The loaded library's C++ kernel gets None as an undefined tensor: the same message as before it loads.
    _, k, v = qkv()
    for grad in (False, True):
        expected = re.escape("flashcute.fwd: q must be a tensor, got NoneType")
        with torch.set_grad_enabled(grad), pytest.raises(TypeError, match=expected):
            flashcute.flash_attn_func(None, k, v)


@cuda
def test_cpu_tensor_among_cuda_tensors(library):
    q, k, v = qkv()
    with raises("k must be a CUDA tensor, got a tensor on cpu"):
        fwd(q, k.cpu(), v)
    with raises("q must be a CUDA tensor, got a tensor on cpu"):
        fwd(q.cpu(), k, v)


@cuda
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_tensors_on_two_devices(library):
    q, k, v = qkv()
    with raises("q, k and v must be on one device, got cuda:0, cuda:1 and cuda:0"):
        fwd(q, k.to("cuda:1"), v)


@cuda
def test_rank(library):
    q, k, v = qkv()
    with raises("q must have 4 dimensions (batch, seqlen_q, heads_q, head_dim), got 3 (shape [16, 4, 64])"):
        fwd(q[0], k, v)
    with raises("k must have 4 dimensions (batch, seqlen_k, heads_kv, head_dim), got 5"):
        fwd(q, k[None], v)
    with raises("v must have 4 dimensions (batch, seqlen_k, heads_kv, head_dim), got 3"):
        fwd(q, k, v[0])


@cuda
def test_last_dim_stride(library):
    q, k, v = qkv(head_dim=128)
    with raises("q must be contiguous in its last dimension (stride 1), got stride 2; call .contiguous() on it"):
        fwd(q[..., ::2], k[..., :64], v[..., :64])
    with raises("v must be contiguous in its last dimension (stride 1), got stride 2"):
        fwd(q[..., :64], k[..., :64], v[..., ::2])


@cuda
def test_alignment(library):
    q, k, v = qkv()
    padded = torch.randn(2, 16, 4, 68, dtype=torch.float16, device="cuda")[..., :64]  # row stride of 68 elements
    with raises("q must be 16-byte aligned (data pointer and the strides of all but its last dimension multiples "
                "of 8 elements), got strides [4352, 272, 68, 1]"):
        fwd(padded, k, v)
    shifted = torch.randn(k.numel() + 1, dtype=torch.float16, device="cuda")[1:].view(k.shape)
    with raises("k must be 16-byte aligned"):
        fwd(q, shifted, v)


@cuda
def test_dtypes(library):
    q, k, v = qkv()
    with raises("q must have dtype float16 or bfloat16, got float32"):
        fwd(q.float(), k.float(), v.float())
    with raises("k must have the same dtype as q (float16), got bfloat16"):
        fwd(q, k.bfloat16(), v)
    with raises("v must have the same dtype as q (bfloat16), got float16"):
        fwd(q.bfloat16(), k.bfloat16(), v)


@cuda
def test_shapes_must_agree(library):
    q, k, v = qkv()
    with raises("k and v must have the same shape, got k [2, 16, 4, 64] and v [2, 17, 4, 64]"):
        fwd(q, k, torch.cat([v, v[:, :1]], dim=1))
    q3, k3, v3 = qkv(batch=3)
    with raises("k must have the batch size of q (2), got 3"):
        fwd(q, k3, v3)
    _, k128, v128 = qkv(head_dim=128)
    with raises("k must have the head_dim of q (64), got 128"):
        fwd(q, k128, v128)


@cuda
@pytest.mark.parametrize("head_dim", [12, 264])
def test_head_dim(library, head_dim):
    # Allocate rows of 16 (or 264) elements so the tensors pass the 16-byte alignment check first.
    storage_dim = max(16, head_dim)
    q, k, v = (t[..., :head_dim] for t in qkv(head_dim=storage_dim))
    with raises(f"head_dim must be a multiple of 8 between 8 and 256, got {head_dim}"):
        fwd(q, k, v)


@cuda
def test_heads_must_divide(library):
    q, k, v = qkv(heads_q=6, heads_kv=4)
    with raises("heads_q (6) must be a multiple of heads_kv (4) for multi/grouped-query attention"):
        fwd(q, k, v)
    q, k, v = qkv(heads_kv=0)
    with raises("heads_q (4) must be a multiple of heads_kv (0)"):
        fwd(q, k, v)


@cuda
def test_grid_limits(library):
    # Expanded (stride-0) views: the checks come before any memory is touched or allocated.
    q, k, v = qkv(batch=1, seqlen_q=1, seqlen_k=1, heads_q=1, heads_kv=1, head_dim=8)
    with raises("batch and heads_q must be at most 65535, got 65536 and 1"):
        fwd(*(t.expand(65536, 1, 1, 8) for t in (q, k, v)))
    with raises("sequence lengths must be below 2^31"):
        fwd(q.expand(1, 2**31, 1, 8), k, v)


@cuda
@pytest.mark.parametrize("scale", [math.inf, math.nan, 0.0, -0.125])
def test_softmax_scale_must_be_positive_and_finite(library, scale):
    with raises(f"softmax_scale must be positive and finite, got {scale:g}"):
        fwd(*qkv(), softmax_scale=scale)


@cuda
def test_backend_name(library):
    with raises("backend must be one of 'auto', 'sm80', 'sm90', got 'sm70'"):
        fwd(*qkv(), backend="sm70")


@cuda
@pytest.mark.skipif(torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9, reason="off Hopper only")
def test_sm90_backend_off_hopper(library):
    major, minor = torch.cuda.get_device_capability()
    with raises(f"backend 'sm90' needs a Hopper GPU (compute capability 9.x), got {major}.{minor}; use backend='sm80' or 'auto'"):
        fwd(*qkv(), backend="sm90")


@cuda
def test_kernels_missing_from_the_build(library):
    built = set(torch.ops.flashcute.built_kernels())
    if torch.cuda.get_device_capability()[0] == 9 and not any(name.startswith("fwd_sm90") for name in built):
        with raises("no sm90 kernel for float16 with head_dim 64 is in this build (built kernels: "):
            fwd(*qkv(), backend="sm90")
    missing = [(dtype, name) for dtype, name in ((torch.float16, "fp16"), (torch.bfloat16, "bf16"))
               if not any(k.startswith(f"fwd_sm80_{name}_hdim256") for k in built)]
    if not missing:
        pytest.skip("this build has every sm80 kernel (restrict it with FLASHCUTE_DTYPES/FLASHCUTE_HDIMS to test)")
    dtype, _ = missing[0]
    dtype_name = str(dtype).removeprefix("torch.")
    with raises(f"no sm80 kernel for {dtype_name} with head_dim 256 is in this build (built kernels: "):
        fwd(*qkv(head_dim=256, dtype=dtype), backend="sm80")


def test_restricted_build_refuses_the_kernels_it_lacks(tmp_path):
    """A FLASHCUTE_DTYPES / FLASHCUTE_HDIMS build asked for a kernel it lacks raises the "not in this build" error,
    whose message streams integers (TORCH_CHECK): that once crashed the process (a static libstdc++ copy in the
    extension; flashcute._build.LINK_FLAGS). JIT-builds one head dim of one dtype in a fresh process."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    script = textwrap.dedent("""
        import re, torch, flashcute
        q = torch.randn(1, 64, 2, 64, device="cuda", dtype=torch.float16)
        backends = ["sm80"] + (["sm90"] if torch.cuda.get_device_capability()[0] == 9 else [])
        for backend in backends:
            try:
                flashcute.flash_attn_func(q, q, q, backend=backend)
            except RuntimeError as error:
                print("raised:", str(error).splitlines()[0])
        big = torch.randn(1, 64, 2, 128, device="cuda", dtype=torch.bfloat16)
        try:
            flashcute.flash_attn_func(big, big, big, backend="sm80")
        except RuntimeError as error:
            print("raised:", str(error).splitlines()[0])
        small = torch.randn(1, 64, 2, 64, device="cuda", dtype=torch.bfloat16)
        print("ran:", flashcute.flash_attn_func(small, small, small).shape)
    """)
    env = {**os.environ, "FLASHCUTE_DTYPES": "bf16", "FLASHCUTE_HDIMS": "64", "FLASHCUTE_CACHE_DIR": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr[-3000:]}"
    lines = result.stdout.splitlines()
    assert lines[0].startswith("raised: flashcute.fwd: no sm80 kernel for float16 with head_dim 64 is in this build "
                               "(built kernels: fwd_sm80_bf16_hdim64"), lines
    if torch.cuda.get_device_capability()[0] == 9:
        assert lines[1].startswith("raised: flashcute.fwd: no sm90 kernel for float16 with head_dim 64"), lines
    assert any(line.startswith("raised: flashcute.fwd: no sm80 kernel for bfloat16 with head_dim 128") for line in lines)
    assert lines[-1] == "ran: torch.Size([1, 64, 2, 64])"


# ------------------------------------------------------------------------------------------- Python API

def test_flash_attn_func_backend_name():
    with pytest.raises(ValueError, match="flash_attn_func: backend must be one of 'auto', 'sm80', 'sm90', got 'cuda'"):
        flashcute.flash_attn_func(None, None, None, backend="cuda")


@cuda
def test_sm90_refuses_what_tma_cannot_address(library):
    if torch.cuda.get_device_capability()[0] != 9 or not any(n.startswith("fwd_sm90") for n in torch.ops.flashcute.built_kernels()):
        pytest.skip("needs a Hopper GPU and the sm90 kernels")
    q, k, v = qkv()
    shared_k = k[:1].expand(2, -1, -1, -1)  # one k for the whole batch: batch stride 0, which TMA cannot encode
    with raises("backend 'sm90' cannot take these inputs: k needs batch, sequence and head strides that are positive "
                "multiples of 16 bytes for TMA, got 0, 256, 64 elements; use backend='sm80' or 'auto', or pass "
                "contiguous tensors"):
        fwd(q, shared_k, v, backend="sm90")


# ------------------------------------------------------------------------------------------- the backward

def bwd_inputs(**shape):
    """A correct bwd call's arguments: dout and the inputs and outputs of a forward call."""
    q, k, v = qkv(**shape)
    out, lse = fwd(q, k, v)
    return dict(dout=torch.randn_like(out), q=q, k=k, v=v, out=out, lse=lse)


def test_bwd_cpu_tensors_are_refused_with_a_clear_message():
    # Served by the op's Python kernel: no extension, no GPU needed.
    q, k, v = qkv(device="cpu")
    lse = torch.zeros(2, 4, 16)
    with pytest.raises(RuntimeError, match=re.escape("flashcute.bwd: dout must be a CUDA tensor, got a tensor on cpu")):
        torch.ops.flashcute.bwd(q, q, k, v, q, lse)


BWD_BAD_INPUTS = {
    # name: (change to a correct call's arguments, the argument the message names)
    "dout_dtype": (lambda a: {"dout": a["dout"].bfloat16()}, "dout"),
    "dout_float32": (lambda a: {"dout": a["dout"].float()}, "dout"),
    "dout_shape": (lambda a: {"dout": a["dout"][:, :-1]}, "dout"),
    "dout_rank": (lambda a: {"dout": a["dout"][0]}, "dout"),
    "dout_last_dim_stride": (lambda a: {"dout": torch.cat([a["dout"], a["dout"]], dim=-1)[..., ::2]}, "dout"),
    "dout_on_cpu": (lambda a: {"dout": a["dout"].cpu()}, "dout"),
    "out_shape": (lambda a: {"out": a["out"][:, :-1]}, "out"),
    "out_dtype": (lambda a: {"out": a["out"].bfloat16()}, "out"),
    "lse_shape": (lambda a: {"lse": a["lse"][:, :, :-1]}, "lse"),
    "lse_heads": (lambda a: {"lse": a["lse"][:, :-1]}, "lse"),
    "lse_dtype": (lambda a: {"lse": a["lse"].half()}, "lse"),
    "lse_on_cpu": (lambda a: {"lse": a["lse"].cpu()}, "lse"),
    "q_rank": (lambda a: {"q": a["q"][0]}, "q"),
    "k_dtype": (lambda a: {"k": a["k"].bfloat16(), "v": a["v"].bfloat16()}, "k"),
    "k_head_dim": (lambda a: {"k": torch.cat([a["k"], a["k"]], dim=-1), "v": torch.cat([a["v"], a["v"]], dim=-1)}, "k"),
    "k_batch": (lambda a: {"k": torch.cat([a["k"], a["k"][:1]]), "v": torch.cat([a["v"], a["v"][:1]])}, "k"),
    "kv_shapes": (lambda a: {"v": torch.cat([a["v"], a["v"][:, :1]], dim=1)}, "k and v"),
    "heads_indivisible": (lambda a: {"k": a["k"][:, :, :3], "v": a["v"][:, :, :3]}, "heads_q"),
    "softmax_scale": (lambda a: {"softmax_scale": math.inf}, "softmax_scale"),
    "backend_name": (lambda a: {"backend": "sm70"}, "backend"),
    # Off Hopper: sm90 needs one; on Hopper: TMA cannot read a k shared by the batch (stride 0).
    "backend_sm90": (lambda a: {"backend": "sm90", "k": a["k"][:1].expand_as(a["k"]), "v": a["v"][:1].expand_as(a["v"])},
                     "backend"),
}


@cuda
@pytest.mark.parametrize("name", list(BWD_BAD_INPUTS))
def test_bwd_bad_input_names_the_argument(library, name):
    change, argument = BWD_BAD_INPUTS[name]
    inputs = bwd_inputs()
    with pytest.raises(RuntimeError, match=rf"flashcute\.bwd: {re.escape(argument)}\b"):
        torch.ops.flashcute.bwd(**{**inputs, **change(inputs)})
    assert_bwd_still_runs(inputs)


@cuda
@pytest.mark.parametrize("head_dim", [12, 264])
def test_bwd_head_dim(library, head_dim):
    # Rows of 16 (or 264) elements so the tensors pass the 16-byte alignment check first; out and lse made to fit.
    q, k, v = (t[..., :head_dim] for t in qkv(head_dim=max(16, head_dim)))
    lse = torch.zeros(2, 4, 16, device="cuda")
    with pytest.raises(RuntimeError, match=r"flashcute\.bwd: head_dim\b"):
        torch.ops.flashcute.bwd(q, q, k, v, q, lse)
    assert_bwd_still_runs(bwd_inputs())


def assert_bwd_still_runs(inputs):
    """After an error the CUDA context is intact: a correct call runs and gives finite gradients."""
    grads = torch.ops.flashcute.bwd(**inputs)
    torch.cuda.synchronize()
    assert all(g.isfinite().all() for g in grads)
