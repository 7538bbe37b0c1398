"""flashcute.sdpa against torch.nn.functional.scaled_dot_product_attention.

CPU: the routing itself — every fallback reason, its one-time warning and torch's own result (or torch's own
error); and the glue to the op (transpose views, top-left causal, GQA, scale, (h, s, d) inputs, gradients,
torch's deterministic flag) through a float64 stand-in for torch.ops.flashcute.fwd. GPU: the real kernel over
an argument grid, within 2x torch's own low-precision error of a float64 reference, with no copies and no call
to torch's SDPA; training calls served, gradients held to the same bound; and every fallback again on CUDA
tensors.
"""

import functools
import importlib
import warnings

import pytest
import torch
import torch.nn.functional as F

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
from reference import attention_grads_ref, attention_ref, varlen_attention_ref

sdpa_module = importlib.import_module("flashcute.sdpa")
sdpa = sdpa_module.sdpa
TORCH_SDPA = F.scaled_dot_product_attention


@pytest.fixture(autouse=True)
def fresh_warnings():
    """Each test sees the first occurrence of every fallback reason."""
    sdpa_module._warned.clear()
    yield
    sdpa_module._warned.clear()


def random_bhsd(batch, heads, seqlen, head_dim, dtype, device, generator):
    return torch.randn(batch, heads, seqlen, head_dim, dtype=dtype, device=device, generator=generator)


def call_both(args, kwargs, seed=0):
    """(torch's result or exception, flashcute.sdpa's result or exception, fallback warnings raised)."""

    def outcome(function):
        torch.manual_seed(seed)  # dropout draws the same mask in both
        try:
            return function(*args, **kwargs)
        except Exception as error:  # torch's own errors are part of the semantics mirrored
            return error

    expected = outcome(TORCH_SDPA)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = outcome(sdpa)
    fallbacks = [str(w.message) for w in caught if str(w.message).startswith(sdpa_module.FALLBACK)]
    return expected, got, fallbacks


def assert_same_outcome(expected, got):
    if isinstance(expected, Exception):
        assert type(got) is type(expected) and str(got) == str(expected)
    else:
        assert isinstance(got, torch.Tensor), got
        torch.testing.assert_close(got, expected, rtol=0, atol=0, equal_nan=True)  # torch gives NaN for some


def fallback_cases(device):
    """(name, args, kwargs, expected reason) for every argument flashcute does not serve."""
    generator = torch.Generator(device=device).manual_seed(1)

    def qkv(heads_q=4, heads_kv=4, head_dim=64, dtype=torch.float16, sq=33, sk=47, batch=2):
        return (
            random_bhsd(batch, heads_q, sq, head_dim, dtype, device, generator),
            random_bhsd(batch, heads_kv, sk, head_dim, dtype, device, generator),
            random_bhsd(batch, heads_kv, sk, head_dim, dtype, device, generator),
        )

    q, k, v = qkv()
    bool_mask = torch.rand(33, 47, device=device, generator=generator) > 0.3
    strided_q = random_bhsd(2, 4, 33, 128, torch.float16, device, generator)[..., ::2]
    value_wide = random_bhsd(2, 4, 47, 128, torch.float16, device, generator)
    q5 = torch.randn(2, 3, 4, 33, 64, dtype=torch.float16, device=device, generator=generator)
    return [
        ("mask", (q, k, v), {"attn_mask": bool_mask}, "attn_mask is given"),
        ("mask_and_causal", (q, k, v), {"attn_mask": bool_mask, "is_causal": True}, "attn_mask is given"),
        ("dropout", (q, k, v), {"dropout_p": 0.25}, "dropout_p > 0"),
        ("negative_scale", (q, k, v), {"scale": -0.5}, "scale -0.5"),
        ("float32", qkv(dtype=torch.float32), {"is_causal": True}, "dtype torch.float32"),
        ("float64", qkv(dtype=torch.float64), {}, "dtype torch.float64"),
        ("mixed_dtypes", (q, k.bfloat16(), v), {}, "dtypes differ"),
        ("head_dim_20", qkv(head_dim=20), {}, "head dim 20"),
        ("head_dim_264", qkv(head_dim=264), {}, "head dim 264"),
        ("value_head_dim", (q, k, value_wide), {}, "head dims differ"),
        ("rank_5", (q5, q5, q5), {}, "not all 4-D"),
        ("rank_mixed", (q, k[0], v[0]), {}, "not all 4-D"),
        ("batch_broadcast", (q, k[:1], v[:1]), {}, "batch sizes differ"),
        ("heads_broadcast", qkv(heads_kv=1), {}, "enable_gqa=False"),
        ("heads_mismatch", qkv(heads_kv=2), {}, "enable_gqa=False"),
        ("gqa_indivisible", qkv(heads_q=6, heads_kv=4), {"enable_gqa": True}, "not a multiple of 4"),
        ("last_dim_strided", (strided_q, k, v), {}, "last dimension is not contiguous"),
    ]


FALLBACK_NAMES = [case[0] for case in fallback_cases("cpu")]


def check_fallback(name, device):
    (case,) = [case for case in fallback_cases(device) if case[0] == name]
    _, args, kwargs, reason = case
    expected, got, fallbacks = call_both(args, kwargs)
    assert_same_outcome(expected, got)
    assert len(fallbacks) == 1 and reason in fallbacks[0], fallbacks
    _, again, fallbacks_again = call_both(args, kwargs)
    assert_same_outcome(expected, again)
    assert fallbacks_again == []  # once per reason


# ---------------------------------------------------------------- CPU: the routing


@pytest.mark.parametrize("name", FALLBACK_NAMES)
def test_fallback_reason_cpu(name):
    check_fallback(name, "cpu")


def test_unaligned_reason():
    """The 16-byte rule sdpa asks on CUDA inputs before the op (which would raise): data pointers and the strides
    of every dim but the last in multiples of 8 elements."""
    aligned = torch.randn(2, 4, 33, 64, dtype=torch.float16)
    assert sdpa_module._unaligned_reason(aligned, aligned.transpose(1, 2), aligned[:, :, 1:]) is None
    row_stride_68 = torch.randn(2, 4, 33, 68, dtype=torch.float16)[..., :64]
    shifted = torch.randn(aligned.numel() + 1, dtype=torch.float16)[1:].view(aligned.shape)
    for unaligned in (row_stride_68, shifted):
        assert "not 16-byte aligned" in sdpa_module._unaligned_reason(aligned, unaligned, aligned)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_cpu_tensors_fall_back_with_one_warning(dtype):
    generator = torch.Generator().manual_seed(2)
    q, k, v = (random_bhsd(2, 4, s, 64, dtype, "cpu", generator) for s in (9, 13, 13))
    expected, got, fallbacks = call_both((q, k, v), {"is_causal": True})
    assert_same_outcome(expected, got)
    assert fallbacks == [f"{sdpa_module.FALLBACK}: the inputs are not all CUDA tensors"]
    _, _, fallbacks_again = call_both((q, k, v), {"is_causal": True})
    assert fallbacks_again == []


@pytest.mark.parametrize("position", range(3))
def test_an_input_that_is_not_a_tensor_gets_torchs_error(position):
    generator = torch.Generator().manual_seed(7)
    args = [random_bhsd(1, 2, 8, 64, torch.float16, "cpu", generator) for _ in range(3)]
    args[position] = None
    name = ("query", "key", "value")[position]
    with pytest.raises(TypeError, match=rf"argument '{name}' \(position {position + 1}\) must be Tensor"):
        sdpa(*args)


def test_requires_grad_is_no_reason_to_fall_back():
    generator = torch.Generator().manual_seed(3)
    q, k, v = (random_bhsd(1, 2, 8, 64, torch.float16, "cpu", generator).requires_grad_() for _ in range(3))
    assert sdpa_module.unserved_reason(q, k, v) == "the inputs are not all CUDA tensors"
    out = sdpa(q.float(), k.float(), v.float())  # a fallback keeps autograd working too
    out.sum().backward()
    assert q.grad is not None and torch.isfinite(q.grad).all()


def test_served_arguments_have_no_reason_but_the_device():
    generator = torch.Generator().manual_seed(4)
    q = random_bhsd(2, 8, 5, 128, torch.bfloat16, "cpu", generator)
    k = random_bhsd(2, 2, 7, 128, torch.bfloat16, "cpu", generator)
    assert sdpa_module.unserved_reason(q, k, k, enable_gqa=True) == "the inputs are not all CUDA tensors"
    assert sdpa_module.unserved_reason(q[0], k[0], k[0], enable_gqa=True) == "the inputs are not all CUDA tensors"
    packed = torch.randn(2, 5, 3, 8, 64, dtype=torch.float16).unbind(2)  # slices of a packed qkv
    q, k, v = (t.transpose(1, 2) for t in packed)
    assert sdpa_module.unserved_reason(q, k, v) == "the inputs are not all CUDA tensors"


# ---------------------------------------------------------------- CPU: the glue, through a stand-in op


class RecordingReferenceOp:
    """torch.ops.flashcute.fwd's contract in float64 (tests/reference.py), recording what it was given."""

    def __init__(self):
        self.calls = []

    def __call__(self, q, k, v, softmax_scale=None, causal=False, causal_top_left=False, backend="auto",
                 deterministic=False):
        self.calls.append(dict(q=q, k=k, v=v, softmax_scale=softmax_scale, causal=causal, top_left=causal_top_left,
                               deterministic=deterministic))
        out, lse = attention_ref(q, k, v, softmax_scale, causal, top_left=causal_top_left)
        self.calls[-1]["out"] = out.to(q.dtype).contiguous()
        return self.calls[-1]["out"], lse.float()


@pytest.fixture
def stand_in_op(monkeypatch):
    op = RecordingReferenceOp()
    monkeypatch.setattr(sdpa_module, "_kernel", lambda: (op, None))
    monkeypatch.setattr(sdpa_module, "unserved_reason", lambda *args: None)  # CPU float64 counts as served
    return op


@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("sq,sk", [(1, 1), (1, 17), (17, 1), (13, 29), (29, 13), (64, 64)])
@pytest.mark.parametrize("heads_q,heads_kv", [(4, 4), (4, 2), (4, 1)])
@pytest.mark.parametrize("scale", [None, 0.37])
def test_glue_matches_torch_semantics(stand_in_op, is_causal, sq, sk, heads_q, heads_kv, scale):
    generator = torch.Generator().manual_seed(sq * 1000 + sk)
    q = random_bhsd(2, heads_q, sq, 32, torch.float64, "cpu", generator)
    k = random_bhsd(2, heads_kv, sk, 32, torch.float64, "cpu", generator)
    v = random_bhsd(2, heads_kv, sk, 32, torch.float64, "cpu", generator)
    gqa = heads_q != heads_kv
    expected = TORCH_SDPA(q, k, v, is_causal=is_causal, scale=scale, enable_gqa=gqa)
    out = sdpa(q, k, v, is_causal=is_causal, scale=scale, enable_gqa=gqa)
    torch.testing.assert_close(out, expected, rtol=1e-10, atol=1e-10)

    (call,) = stand_in_op.calls
    assert call["causal"] is is_causal and call["top_left"] is True and call["softmax_scale"] == scale
    for name, given in (("q", q), ("k", k), ("v", v)):  # (b, s, h, d) views of the inputs, not copies
        assert call[name].data_ptr() == given.data_ptr() and call[name].stride() == given.transpose(1, 2).stride()
    assert out.data_ptr() == call["out"].data_ptr() and out.stride() == call["out"].transpose(1, 2).stride()


def test_glue_three_dim_inputs(stand_in_op):
    generator = torch.Generator().manual_seed(5)
    q = random_bhsd(1, 4, 11, 32, torch.float64, "cpu", generator)[0]
    k = random_bhsd(1, 2, 19, 32, torch.float64, "cpu", generator)[0]
    expected = TORCH_SDPA(q, k, k, is_causal=True, enable_gqa=True)
    out = sdpa(q, k, k, is_causal=True, enable_gqa=True)
    assert out.shape == expected.shape == (4, 11, 32)
    torch.testing.assert_close(out, expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("is_causal, sq, sk, heads_q, heads_kv, scale",
                         [(True, 13, 29, 4, 2, None), (True, 29, 13, 4, 1, 0.37), (False, 17, 17, 4, 4, None)])
def test_glue_gradients_match_torch(stand_in_op, is_causal, sq, sk, heads_q, heads_kv, scale):
    generator = torch.Generator().manual_seed(sq * 1000 + sk)
    q, k, v = (random_bhsd(2, heads, s, 32, torch.float64, "cpu", generator).requires_grad_()
               for heads, s in ((heads_q, sq), (heads_kv, sk), (heads_kv, sk)))
    dout = random_bhsd(2, heads_q, sq, 32, torch.float64, "cpu", generator)
    kwargs = dict(is_causal=is_causal, scale=scale, enable_gqa=heads_q != heads_kv)
    expected = torch.autograd.grad(TORCH_SDPA(q, k, v, **kwargs), (q, k, v), dout)
    grads = torch.autograd.grad(sdpa(q, k, v, **kwargs), (q, k, v), dout)
    torch.testing.assert_close(grads, expected, rtol=1e-10, atol=1e-10)


def test_glue_passes_torchs_deterministic_flag(stand_in_op):
    generator = torch.Generator().manual_seed(6)
    q = random_bhsd(1, 2, 5, 32, torch.float64, "cpu", generator)
    deterministic = torch.are_deterministic_algorithms_enabled()
    try:
        sdpa(q, q, q)
        torch.use_deterministic_algorithms(True)
        sdpa(q, q, q)
    finally:
        torch.use_deterministic_algorithms(deterministic)
    assert [call["deterministic"] for call in stand_in_op.calls] == [deterministic, True]


# ---------------------------------------------------------------- nested-jagged inputs

NESTED_LENGTHS = (3, 17, 1, 40)


def nested_bhsd(lengths, heads, head_dim, dtype, device, generator, offsets_of=None):
    """A (b, h, j, d) nested-jagged tensor of sequences of `lengths` (with the ragged structure of `offsets_of`,
    a nested tensor, when given), as models make it: a (total, h * d) projection unflattened and transposed."""
    values = torch.randn(sum(lengths), heads * head_dim, dtype=dtype, device=device, generator=generator)
    if offsets_of is not None:
        nested = torch.nested.nested_tensor_from_jagged(values, offsets_of.transpose(1, 2).offsets())
    else:
        nested = torch.nested.as_nested_tensor(list(values.split(list(lengths))), layout=torch.jagged)
    return nested.unflatten(-1, (heads, head_dim)).transpose(1, 2)


def per_sequence(query, key, value, **kwargs):
    """torch SDPA on each sequence of nested inputs alone, as a list of (h, s, d) outputs."""
    return [TORCH_SDPA(q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0), **kwargs)[0]
            for q, k, v in zip(query.unbind(), key.unbind(), value.unbind())]


def reference_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale=None,
                     causal=False, deterministic=False):
    """flash_attn_varlen_func's contract in float64, sequence by sequence (tests/reference.py)."""
    assert max_seqlen_q == cu_seqlens_q.diff().max() and max_seqlen_k == cu_seqlens_k.diff().max()
    return varlen_attention_ref(q, k, v, cu_seqlens_q, cu_seqlens_k, softmax_scale, causal)


@pytest.fixture
def stand_in_varlen(monkeypatch):
    interface = importlib.import_module("flashcute.interface")
    monkeypatch.setattr(interface, "flash_attn_varlen_func", reference_varlen)
    monkeypatch.setattr(sdpa_module, "_kernel", lambda: (reference_varlen, None))  # any kernel: "available"
    monkeypatch.setattr(sdpa_module, "unserved_reason", lambda *args: None)


@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("heads_q,heads_kv", [(4, 4), (4, 2)])
def test_glue_nested_self_attention(stand_in_varlen, is_causal, heads_q, heads_kv):
    """Nested-jagged self-attention: each sequence's output as torch SDPA gives it alone (causal included, which
    torch's SDPA does not take for nested inputs), nested with the query's ragged dimension; gradients too."""
    generator = torch.Generator().manual_seed(9)
    q = nested_bhsd(NESTED_LENGTHS, heads_q, 32, torch.float64, "cpu", generator).requires_grad_()
    k, v = (nested_bhsd(NESTED_LENGTHS, heads_kv, 32, torch.float64, "cpu", generator, offsets_of=q)
            .requires_grad_() for _ in range(2))
    kwargs = dict(is_causal=is_causal, enable_gqa=heads_q != heads_kv)
    out = sdpa(q, k, v, **kwargs)
    assert out.is_nested and out.shape == q.shape
    for got, expected in zip(out.unbind(), per_sequence(q, k, v, **kwargs)):
        torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-10)
    packed = out.transpose(1, 2).values()  # (total, h, d)
    dout = torch.randn_like(packed)
    grads = torch.autograd.grad(packed, (q, k, v), dout)
    expected_out = torch.cat([o.transpose(0, 1) for o in per_sequence(q, k, v, **kwargs)])
    expected_grads = torch.autograd.grad(expected_out, (q, k, v), dout)
    for grad, expected in zip(grads, expected_grads):
        torch.testing.assert_close(grad.transpose(1, 2).values(), expected.transpose(1, 2).values(), rtol=1e-10,
                                   atol=1e-10)


def test_glue_nested_cross_attention(stand_in_varlen):
    generator = torch.Generator().manual_seed(10)
    q = nested_bhsd(NESTED_LENGTHS, 4, 32, torch.float64, "cpu", generator)
    k = nested_bhsd((9, 2, 30, 5), 4, 32, torch.float64, "cpu", generator)
    v = nested_bhsd((9, 2, 30, 5), 4, 32, torch.float64, "cpu", generator, offsets_of=k)
    out = sdpa(q, k, v, scale=0.3)
    assert out.shape == q.shape
    expected = TORCH_SDPA(q, k, v, scale=0.3)
    torch.testing.assert_close(out.transpose(1, 2).values(), expected.transpose(1, 2).values(), rtol=1e-10,
                               atol=1e-10)


def test_nested_fallbacks():
    """float32 nested inputs: torch's result with the dtype reason; nested and dense inputs mixed, and causal
    cross-attention (torch's top-left): torch's own outcome with the reason."""
    generator = torch.Generator().manual_seed(11)
    q = nested_bhsd(NESTED_LENGTHS, 4, 32, torch.float32, "cpu", generator)
    expected, got, fallbacks = call_both((q, q, q), {})
    torch.testing.assert_close(got.transpose(1, 2).values(), expected.transpose(1, 2).values())
    assert fallbacks == [f"{sdpa_module.FALLBACK}: dtype torch.float32 (flashcute serves float16 and bfloat16)"]

    sdpa_module._warned.clear()
    half = nested_bhsd(NESTED_LENGTHS, 4, 32, torch.float16, "cpu", generator)
    assert sdpa_module._nested_unserved_reason(half, half, half, True) is None
    dense = random_bhsd(4, 4, 8, 32, torch.float16, "cpu", generator)
    assert "some inputs are nested" in sdpa_module._nested_unserved_reason(half, dense, dense, False)
    other = nested_bhsd((9, 2, 30, 5), 4, 32, torch.float16, "cpu", generator)
    assert "different lengths" in sdpa_module._nested_unserved_reason(half, other, other, True)


# ---------------------------------------------------------------- GPU: the kernel


def qkv_layout(layout, batch, heads_q, heads_kv, sq, sk, head_dim, dtype, generator):
    """(b, h, s, d) query/key/value in one of the layouts models hand to SDPA."""

    def make(heads, seqlen):
        if layout == "bhsd":
            return torch.randn(batch, heads, seqlen, head_dim, dtype=dtype, device="cuda", generator=generator)
        # "bshd": a (b, s, h, d) projection viewed as (b, h, s, d), the usual model case
        bshd = torch.randn(batch, seqlen, heads, head_dim, dtype=dtype, device="cuda", generator=generator)
        return bshd.transpose(1, 2)

    if layout == "packed":  # one (b, s, 3, h, d) qkv projection, sliced
        assert heads_q == heads_kv and sq == sk
        qkv = torch.randn(batch, sq, 3, heads_q, head_dim, dtype=dtype, device="cuda", generator=generator)
        return tuple(t.transpose(1, 2) for t in qkv.unbind(2))
    return make(heads_q, sq), make(heads_kv, sk), make(heads_kv, sk)


def skip_unless_built(dtype, head_dim, ops=("fwd",)):
    """A restricted build (FLASHCUTE_DTYPES / FLASHCUTE_HDIMS) may lack the kernel these inputs need: flashcute.sdpa
    then raises the build's error (tests/test_validation.py checks it), not what these tests are about."""
    from test_fwd import DTYPE_NAMES, has_kernel

    backends = ("sm80", "sm90") if torch.cuda.get_device_capability()[0] == 9 else ("sm80",)
    for op in ops:
        if not any(has_kernel(op, backend, dtype, head_dim) for backend in backends):
            pytest.skip(f"no {op} kernel for {DTYPE_NAMES[dtype]} head dim {head_dim} in this build")


def served(monkeypatch, *args, **kwargs):
    """flashcute.sdpa's output, asserting it neither warned nor called torch's SDPA."""

    def torch_sdpa_called(*_, **__):
        raise AssertionError("flashcute.sdpa fell back to torch SDPA")

    with monkeypatch.context() as patch, warnings.catch_warnings():
        warnings.simplefilter("error")
        patch.setattr(F, "scaled_dot_product_attention", torch_sdpa_called)
        return sdpa(*args, **kwargs)


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("head_dim", [64, 128, 80])
@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("sq,sk", [(1, 1), (1, 239), (239, 1), (113, 203), (203, 113), (128, 128), (1000, 1000)])
@pytest.mark.parametrize("heads_q,heads_kv", [(8, 8), (8, 2), (8, 1)])
@pytest.mark.parametrize("scale", [None, 0.3])
def test_sdpa_matches_torch_on_gpu(library, monkeypatch, dtype, head_dim, is_causal, sq, sk, heads_q, heads_kv, scale):
    skip_unless_built(dtype, head_dim)
    generator = torch.Generator(device="cuda").manual_seed(sq * 7 + sk)
    layout = "bshd" if (sq + heads_kv) % 2 else "bhsd"
    q, k, v = qkv_layout(layout, 2, heads_q, heads_kv, sq, sk, head_dim, dtype, generator)
    gqa = heads_q != heads_kv
    expected = TORCH_SDPA(q, k, v, is_causal=is_causal, scale=scale, enable_gqa=gqa)
    out = served(monkeypatch, q, k, v, is_causal=is_causal, scale=scale, enable_gqa=gqa)

    q_bshd, k_bshd, v_bshd = (t.transpose(1, 2) for t in (q, k, v))
    reference = attention_ref(q_bshd, k_bshd, v_bshd, scale, is_causal, top_left=True)[0].transpose(1, 2)
    assert out.shape == expected.shape and out.dtype == dtype
    assert out.transpose(1, 2).is_contiguous()  # the (b, h, s, d) view of the op's (b, s, h, d) output
    torch_error = (expected.double() - reference).abs().max().item()
    error = (out.double() - reference).abs().max().item()
    assert error <= 2 * torch_error + 1e-4, (error, torch_error)


@requires_cuda
@pytest.mark.parametrize("layout", ["bhsd", "bshd", "packed"])
def test_sdpa_makes_no_copies(library, monkeypatch, layout):
    skip_unless_built(torch.bfloat16, 128)
    generator = torch.Generator(device="cuda").manual_seed(6)
    q, k, v = qkv_layout(layout, 2, 8, 8, 1024, 1024, 128, torch.bfloat16, generator)
    served(monkeypatch, q, k, v, is_causal=True)  # warm up: the op's first call may load the library
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    out = served(monkeypatch, q, k, v, is_causal=True)
    torch.cuda.synchronize()
    extra = torch.cuda.max_memory_allocated() - before
    out_bytes = out.numel() * out.element_size()
    lse_bytes = 2 * 8 * 1024 * 4
    assert extra < out_bytes + lse_bytes + (1 << 20), (extra, out_bytes)  # a copy of q would add out_bytes


@requires_cuda
def test_sdpa_three_dim_inputs(library, monkeypatch):
    skip_unless_built(torch.float16, 64)
    generator = torch.Generator(device="cuda").manual_seed(7)
    q = torch.randn(8, 77, 64, dtype=torch.float16, device="cuda", generator=generator, requires_grad=True)
    k = torch.randn(2, 91, 64, dtype=torch.float16, device="cuda", generator=generator, requires_grad=True)
    with torch.no_grad():
        expected = TORCH_SDPA(q, k, k, is_causal=True, enable_gqa=True)
        out = served(monkeypatch, q, k, k, is_causal=True, enable_gqa=True)
    assert out.shape == (8, 77, 64)
    reference, _ = attention_ref(q[None].transpose(1, 2), k[None].transpose(1, 2), k[None].transpose(1, 2),
                                 None, True, top_left=True)
    reference = reference.transpose(1, 2)[0]
    torch_error = (expected.double() - reference).abs().max().item()
    assert (out.double() - reference).abs().max().item() <= 2 * torch_error + 1e-4


@requires_cuda
@pytest.mark.parametrize("name", FALLBACK_NAMES)
def test_fallback_reason_gpu(library, name):
    check_fallback(name, "cuda")


@requires_cuda
@pytest.mark.parametrize("misalignment", ["row_stride", "data_pointer"])
def test_unaligned_inputs_fall_back_gpu(misalignment):
    """Inputs the kernels cannot read in 16-byte pieces (the op raises for them) go to torch's SDPA, with the
    warning, rather than to the op's error (decided before the extension is loaded: no build needed)."""
    generator = torch.Generator(device="cuda").manual_seed(9)
    q, k, v = (random_bhsd(2, 4, 33, 64, torch.float16, "cuda", generator) for _ in range(3))
    if misalignment == "row_stride":  # rows of 68 elements
        k = random_bhsd(2, 4, 33, 68, torch.float16, "cuda", generator)[..., :64]
    else:  # one element past a 16-byte boundary
        k = torch.randn(k.numel() + 1, dtype=torch.float16, device="cuda", generator=generator)[1:].view(k.shape)
    expected, got, fallbacks = call_both((q, k, v), {"is_causal": True})
    assert_same_outcome(expected, got)
    assert len(fallbacks) == 1 and "not 16-byte aligned" in fallbacks[0], fallbacks


@requires_cuda
@pytest.mark.parametrize("is_causal, sq, sk, heads_q, heads_kv, scale",
                         [(True, 37, 37, 4, 4, None), (True, 113, 203, 8, 2, 0.3), (True, 203, 113, 8, 1, None),
                          (False, 128, 300, 8, 8, None)])
def test_training_is_served_on_gpu(library, monkeypatch, is_causal, sq, sk, heads_q, heads_kv, scale):
    """Inputs that require grad: served (no fallback), gradients within 2x of the error of torch SDPA's own
    against a float64 reference."""
    skip_unless_built(torch.bfloat16, 64, ops=("fwd", "bwd"))
    generator = torch.Generator(device="cuda").manual_seed(8)
    q, k, v = qkv_layout("bshd", 2, heads_q, heads_kv, sq, sk, 64, torch.bfloat16, generator)
    dout = random_bhsd(2, heads_q, sq, 64, torch.bfloat16, "cuda", generator)
    kwargs = dict(is_causal=is_causal, scale=scale, enable_gqa=heads_q != heads_kv)

    def gradients(attention):
        leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
        return torch.autograd.grad(attention(*leaves, **kwargs), leaves, dout)

    grads = gradients(functools.partial(served, monkeypatch))
    torch_grads = gradients(TORCH_SDPA)
    reference = attention_grads_ref(*(t.transpose(1, 2) for t in (q, k, v, dout)), scale, is_causal, top_left=True)
    for grad, torch_grad, grad_ref in zip(grads, torch_grads, reference):
        grad_ref = grad_ref.transpose(1, 2)
        assert grad.shape == grad_ref.shape and grad.dtype == torch.bfloat16
        torch_error = (torch_grad.double() - grad_ref).abs().max().item()
        assert (grad.double() - grad_ref).abs().max().item() <= 2 * torch_error + 1e-4


@requires_cuda
def test_cpu_and_cuda_mixed_falls_back_to_torchs_error(library):
    generator = torch.Generator().manual_seed(9)
    q = random_bhsd(1, 2, 8, 64, torch.float16, "cpu", generator).cuda()
    k = random_bhsd(1, 2, 8, 64, torch.float16, "cpu", generator)
    expected, got, fallbacks = call_both((q, k, k), {})
    assert_same_outcome(expected, got)
    assert len(fallbacks) == 1 and "not all CUDA" in fallbacks[0]


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("heads_q,heads_kv", [(8, 8), (8, 2)])
def test_nested_self_attention_on_gpu(library, monkeypatch, dtype, is_causal, heads_q, heads_kv):
    """Nested-jagged inputs of lengths 1, 17, 1000, 4097 and 300 on the variable-length kernel (no fallback):
    each sequence and its gradients within 2x the error of torch's own attention in the same precision against
    a float64 reference."""
    skip_unless_built(dtype, 128, ops=("fwd", "bwd"))
    generator = torch.Generator(device="cuda").manual_seed(12)
    lengths = (1, 17, 1000, 4097, 300)
    q = nested_bhsd(lengths, heads_q, 128, dtype, "cuda", generator).requires_grad_()
    k, v = (nested_bhsd(lengths, heads_kv, 128, dtype, "cuda", generator, offsets_of=q).requires_grad_()
            for _ in range(2))
    kwargs = dict(is_causal=is_causal, enable_gqa=heads_q != heads_kv)
    out = served(monkeypatch, q, k, v, **kwargs)
    assert out.is_nested and out.shape == q.shape and out.dtype == dtype
    packed = out.transpose(1, 2).values()  # (total, h, d)
    dout = torch.randn_like(packed)
    grads = [g.transpose(1, 2).values() for g in torch.autograd.grad(packed, (q, k, v), dout)]
    start = 0
    for index, length in enumerate(lengths):
        rows = slice(start, start + length)
        start += length
        one = [t.transpose(1, 2)[index].unsqueeze(0).detach() for t in (q, k, v)]  # (1, s, h, d)
        d_one = dout[rows].unsqueeze(0)
        ref = attention_ref(*one, None, is_causal)[0]
        low = attention_ref(*one, None, is_causal, upcast=False)[0]
        assert (packed[rows].double() - ref[0]).abs().max() <= 2 * (low.double() - ref).abs().max() + 1e-4
        ref_grads = attention_grads_ref(*one, d_one, None, is_causal)
        low_grads = attention_grads_ref(*one, d_one, None, is_causal, upcast=False)
        for grad, ref_grad, low_grad in zip(grads, ref_grads, low_grads):
            torch_error = (low_grad.double() - ref_grad).abs().max().item()
            assert (grad[rows].double() - ref_grad[0]).abs().max().item() <= 2 * torch_error + 1e-4
