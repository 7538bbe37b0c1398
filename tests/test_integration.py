"""torch.ops.flashcute.fwd inside real programs (GPU): opcheck, torch.compile with fullgraph and dynamic
sequence lengths, torch.export, CUDA graph capture and replay, the current stream, a non-default device."""

import pytest
import torch
import torch.nn.functional as F
from torch._dynamo.testing import CompileCounterWithBackend

import flashcute
requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
from flashcute.sdpa import sdpa
from reference import attention_ref

pytestmark = requires_cuda


def make_qkv(batch, sq, sk, heads_q, heads_kv, head_dim, dtype=torch.bfloat16, layout="bshd", device="cuda", seed=0):
    """(b, s, h, d) q, k, v: contiguous, transposed views of (b, h, s, d) tensors, or slices of one packed qkv."""
    generator = torch.Generator(device=device).manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, dtype=dtype, device=device, generator=generator)

    shapes = ((heads_q, sq), (heads_kv, sk), (heads_kv, sk))
    if layout == "bshd":
        return tuple(randn(batch, seqlen, heads, head_dim) for heads, seqlen in shapes)
    if layout == "bhsd":
        return tuple(randn(batch, heads, seqlen, head_dim).transpose(1, 2) for heads, seqlen in shapes)
    assert layout == "packed" and sq == sk and heads_q == heads_kv
    return randn(batch, sq, 3, heads_q, head_dim).unbind(2)


def fwd(q, k, v, causal=False):
    return torch.ops.flashcute.fwd(q, k, v, causal=causal)


def assert_close_to_reference(out, q, k, v, causal):
    """Within 2x the error of PyTorch's own low-precision attention, against float64."""
    reference, _ = attention_ref(q, k, v, causal=causal)
    low_precision, _ = attention_ref(q, k, v, causal=causal, upcast=False)
    torch_error = (low_precision.double() - reference).abs().max().item()
    assert (out.double() - reference).abs().max().item() <= 2 * torch_error + 1e-4


# ---------------------------------------------------------------- opcheck


OPCHECK_CASES = [
    # (batch, sq, sk, heads_q, heads_kv, head_dim, layout)
    (2, 128, 128, 4, 4, 64, "bshd"),
    (1, 1, 1, 2, 2, 64, "bshd"),
    (2, 17, 203, 8, 2, 128, "bhsd"),
    (2, 203, 17, 8, 1, 96, "bshd"),
    (3, 113, 113, 4, 4, 128, "packed"),
    (1, 1, 239, 8, 2, 256, "bhsd"),
    (2, 65, 65, 6, 3, 32, "bshd"),
]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal,top_left", [(False, False), (True, False), (True, True)])
@pytest.mark.parametrize("case", OPCHECK_CASES, ids=lambda case: "-".join(map(str, case)))
def test_opcheck(library, dtype, causal, top_left, case):
    batch, sq, sk, heads_q, heads_kv, head_dim, layout = case
    # opcheck runs the forward and its backward; up to 16 query rows, the forward is the decode kernel.
    from test_bwd import skip_unless_built
    from test_kvcache import skip_unless_decode_built

    skip_unless_decode_built(dtype, head_dim) if sq <= 16 else skip_unless_built(dtype, head_dim)
    q, k, v = make_qkv(batch, sq, sk, heads_q, heads_kv, head_dim, dtype, layout)
    kwargs = {"softmax_scale": 0.2 if head_dim == 96 else None, "causal": causal, "causal_top_left": top_left}
    torch.library.opcheck(torch.ops.flashcute.fwd.default, (q, k, v), kwargs)


@pytest.mark.parametrize("backend", ["auto", "sm80"])
def test_opcheck_backends(library, backend):
    q, k, v = make_qkv(2, 77, 129, 8, 2, 128)
    torch.library.opcheck(torch.ops.flashcute.fwd.default, (q, k, v), {"causal": True, "backend": backend})


# ---------------------------------------------------------------- torch.compile


class OpAttention(torch.nn.Module):
    """A model-shaped block around the op: projections, the op on (b, s, h, d) views, an output projection.
    deterministic: flash_attn_func's (tests/test_bwd.py trains through it)."""

    def __init__(self, hidden=256, heads=4, kv_heads=2, use="op", deterministic=False):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim, self.use = heads, kv_heads, hidden // heads, use
        self.deterministic = deterministic
        self.qkv = torch.nn.Linear(hidden, (heads + 2 * kv_heads) * self.head_dim, bias=False)
        self.out = torch.nn.Linear(hidden, hidden, bias=False)

    def forward(self, x):
        batch, seqlen, _ = x.shape
        qkv = self.qkv(x).view(batch, seqlen, self.heads + 2 * self.kv_heads, self.head_dim)
        q, k, v = qkv.split([self.heads, self.kv_heads, self.kv_heads], dim=2)
        if self.use == "op":
            out, _ = torch.ops.flashcute.fwd(q, k, v, causal=True)
        elif self.use == "flash_attn_func":
            out = flashcute.flash_attn_func(q, k, v, causal=True, deterministic=self.deterministic)
        else:  # flashcute.sdpa on (b, h, s, d) views, as a model written for torch SDPA calls it
            out = sdpa(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True,
                                 enable_gqa=True).transpose(1, 2)
        return self.out(out.reshape(batch, seqlen, -1))


def model_and_inputs(use, seqlens, device="cuda"):
    torch.manual_seed(0)
    model = OpAttention(use=use).to(device=device, dtype=torch.bfloat16).eval()
    inputs = [torch.randn(2, s, 256, device=device, dtype=torch.bfloat16) for s in seqlens]
    return model, inputs


@pytest.mark.parametrize("use", ["op", "flash_attn_func", "sdpa"])
def test_compile_fullgraph_dynamic_seqlen(library, use):
    torch._dynamo.reset()
    seqlens = [17, 64, 203, 1000, 4097]
    model, inputs = model_and_inputs(use, seqlens)
    counter = CompileCounterWithBackend("inductor")
    compiled = torch.compile(model, backend=counter, fullgraph=True)  # fullgraph: a graph break is an error
    with torch.no_grad():
        for x in inputs:
            torch._dynamo.mark_dynamic(x, 1)
            torch.testing.assert_close(compiled(x), model(x), rtol=2e-2, atol=2e-2)
    assert counter.frame_count == 1  # one dynamic graph serves every length
    targets = [node.target for node in counter.graphs[0].graph.nodes]  # dynamo records the op's packet
    assert targets.count(torch.ops.flashcute.fwd) + targets.count(torch.ops.flashcute.fwd.default) == 1


def test_compile_op_output_is_the_kernels(library):
    """The compiled op call returns exactly the eager kernel's output, and that output is right."""
    torch._dynamo.reset()
    q, k, v = make_qkv(2, 333, 333, 8, 2, 128, layout="bhsd")
    compiled = torch.compile(fwd, fullgraph=True, dynamic=True)
    out = compiled(q, k, v, causal=True)
    eager, _ = fwd(q, k, v, causal=True)
    assert torch.equal(out[0], eager)
    assert_close_to_reference(out[0], q, k, v, causal=True)


def test_compile_reduce_overhead(library):
    """mode="reduce-overhead" (CUDA graphs through inductor), as transformers' static-cache decoding uses."""
    torch._dynamo.reset()
    model, (x,) = model_and_inputs("op", [129])
    compiled = torch.compile(model, mode="reduce-overhead", fullgraph=True)
    with torch.no_grad():
        expected = model(x)
        for _ in range(3):  # warm-up, record, replay
            out = compiled(x).clone()
            torch.testing.assert_close(out, expected, rtol=2e-2, atol=2e-2)


# ---------------------------------------------------------------- torch.export


@pytest.mark.parametrize("use", ["op", "flash_attn_func"])
def test_export_dynamic_seqlen(library, use):
    model, (x, y) = model_and_inputs(use, [100, 555])
    seqlen = torch.export.Dim("seqlen", min=2, max=8192)
    exported = torch.export.export(model, (x,), dynamic_shapes=({1: seqlen},))
    targets = [n.target for n in exported.graph.nodes if n.op == "call_function"]
    assert torch.ops.flashcute.fwd.default in targets
    with torch.no_grad():
        for inp in (x, y):
            torch.testing.assert_close(exported.module()(inp), model(inp), rtol=2e-2, atol=2e-2)


# ---------------------------------------------------------------- CUDA graphs


@pytest.mark.parametrize("causal", [False, True])
def test_cuda_graph_replay_matches_eager(library, causal):
    static_q, static_k, static_v = (t.clone() for t in make_qkv(2, 300, 517, 8, 2, 128, seed=1))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up off the capture, as torch.cuda.graphs recommends
        for _ in range(2):
            fwd(static_q, static_k, static_v, causal)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out, static_lse = fwd(static_q, static_k, static_v, causal)

    for seed in (2, 3):  # new data in the captured buffers, then replay
        q, k, v = make_qkv(2, 300, 517, 8, 2, 128, seed=seed)
        for static, new in zip((static_q, static_k, static_v), (q, k, v)):
            static.copy_(new)
        graph.replay()
        out, lse = fwd(q, k, v, causal)
        torch.cuda.synchronize()
        assert torch.equal(static_out, out) and torch.equal(static_lse, lse)


def test_cuda_graph_sdpa(library):
    q, k, v = (t.transpose(1, 2).clone() for t in make_qkv(1, 64, 64, 4, 4, 64, seed=4))
    torch.cuda.synchronize()
    sdpa(q, k, v, is_causal=True)  # warm up (loads the op)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = sdpa(q, k, v, is_causal=True)
    fresh = [t.transpose(1, 2) for t in make_qkv(1, 64, 64, 4, 4, 64, seed=5)]
    for static, new in zip((q, k, v), fresh):
        static.copy_(new)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(static_out, sdpa(*fresh, is_causal=True))


# ---------------------------------------------------------------- calls without autograd


@pytest.mark.parametrize("entry", ["flash_attn_func", "flash_attn_varlen_func", "sdpa"])
def test_calls_without_grad_skip_autograd_and_match(library, entry):
    """Where no input needs a gradient the entry points call the op below the Autograd key (_ops.call_forward):
    the output must be the grad path's, bitwise, and carry no graph; with a gradient it must carry one."""
    q, k, v = make_qkv(2, 130, 130, 4, 2, 128, seed=8)
    cu_seqlens = torch.tensor([0, 130, 260], device="cuda", dtype=torch.int32)

    def call(q, k, v):
        if entry == "flash_attn_func":
            return flashcute.flash_attn_func(q, k, v, causal=True)
        if entry == "sdpa":
            return sdpa(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True, enable_gqa=True)
        return flashcute.flash_attn_varlen_func(q.flatten(0, 1), k.flatten(0, 1), v.flatten(0, 1), cu_seqlens,
                                                cu_seqlens, 130, 130, causal=True)

    with torch.no_grad():
        out_no_grad = call(q, k, v)
    out_plain = call(q, k, v)  # grad mode on, no input requiring a gradient: also below autograd
    q_grad = q.detach().clone().requires_grad_()
    out_grad = call(q_grad, k, v)
    assert out_no_grad.grad_fn is None and out_plain.grad_fn is None and out_grad.grad_fn is not None
    assert torch.equal(out_no_grad, out_grad.detach()) and torch.equal(out_plain, out_grad.detach())
    out_grad.float().sum().backward()
    assert q_grad.grad is not None and torch.isfinite(q_grad.grad).all()


@pytest.mark.parametrize("entry", ["flash_attn_func", "flash_attn_varlen_func"])
@pytest.mark.parametrize("uses_lse", [False, True])
def test_eager_autograd_matches_the_op(library, entry, uses_lse):
    """The entry points' eager autograd (_ops._EagerAttention, the ops below the Autograd key) and the op's own
    (register_autograd): the same outputs and, deterministic, bitwise the same gradients."""
    q, k, v = make_qkv(2, 130, 97, 4, 2, 128, seed=9)
    cu_seqlens_q = torch.tensor([0, 130, 260], device="cuda", dtype=torch.int32)
    cu_seqlens_k = torch.tensor([0, 97, 194], device="cuda", dtype=torch.int32)

    def run(eager):
        leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
        if entry == "flash_attn_func" and eager:
            out, lse = flashcute.flash_attn_func(*leaves, causal=True, return_lse=True, deterministic=True)
        elif entry == "flash_attn_func":
            out, lse = torch.ops.flashcute.fwd(*leaves, None, True, False, "auto", True)
        else:
            packed = [t.flatten(0, 1) for t in leaves]
            lengths = (cu_seqlens_q, cu_seqlens_k, 130, 97)
            out, lse = (flashcute.flash_attn_varlen_func(*packed, *lengths, causal=True, return_lse=True,
                                                         deterministic=True) if eager else
                        torch.ops.flashcute.fwd_varlen(*packed, *lengths, None, True, None, "auto", True))
        assert (type(out.grad_fn).__name__ == "_EagerAttentionBackward") == eager
        loss = out.float().square().sum() + (lse.masked_fill(torch.isinf(lse), 0).sum() if uses_lse else 0)
        return (out.detach(), lse.detach(), *torch.autograd.grad(loss, leaves))

    for eager_value, op_value in zip(run(eager=True), run(eager=False)):
        assert torch.equal(eager_value, op_value)


# ---------------------------------------------------------------- streams and devices


def test_runs_on_the_current_stream(library):
    """The op must run on the caller's current stream: here its input is written on a side stream after a
    long sleep, so a launch on any other stream reads the zeros that were there before."""
    q, k, v = make_qkv(2, 1024, 1024, 8, 8, 128, seed=6)
    expected, _ = fwd(q, k, v, causal=True)
    late_q = torch.zeros_like(q)
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU time before late_q gets its values
        late_q.copy_(q)
        out, _ = fwd(late_q, k, v, causal=True)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    assert torch.equal(out, expected)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_non_default_device(library):
    """Inputs on cuda:1 while cuda:0 is current: the op runs on cuda:1 and matches the cuda:0 result."""
    assert torch.cuda.current_device() == 0
    q, k, v = make_qkv(2, 257, 389, 8, 2, 128, seed=7)
    expected, expected_lse = fwd(q, k, v, causal=True)
    q1, k1, v1 = (t.to("cuda:1") for t in (q, k, v))
    out, lse = fwd(q1, k1, v1, causal=True)
    assert out.device == lse.device == torch.device("cuda:1")
    assert torch.equal(out.cpu(), expected.cpu()) and torch.equal(lse.cpu(), expected_lse.cpu())

    side = torch.cuda.Stream(device="cuda:1")  # and on cuda:1's current stream there
    with torch.cuda.device(1), torch.cuda.stream(side):
        on_side, _ = fwd(q1, k1, v1, causal=True)
    side.synchronize()
    assert torch.equal(on_side.cpu(), expected.cpu())

    sdpa_out = sdpa(*(t.transpose(1, 2) for t in (q1, k1, v1)), is_causal=True, enable_gqa=True)
    expected_sdpa = F.scaled_dot_product_attention(*(t.transpose(1, 2) for t in (q1, k1, v1)), is_causal=True,
                                                   enable_gqa=True)
    torch.testing.assert_close(sdpa_out, expected_sdpa, rtol=2e-2, atol=2e-2)
