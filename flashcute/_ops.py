"""torch.ops.flashcute.*: schemas, fake kernels and autograd, defined when this module is imported (with flashcute
and torch); the CUDA kernels come from the C++ extension, loaded (JIT-built if needed) on the first call.

Each op has a Python kernel under CompositeExplicitAutograd, which serves every backend without a kernel of its
own: on CUDA tensors it loads the library, whose TORCH_LIBRARY_IMPL registers the C++ kernel for CUDA (a direct
registration, which from then on takes precedence), and hands the call to it; on any other device it raises
the error a CUDA-only op should.

fwd's autograd formula calls bwd. fwd takes `deterministic` only to hand it to bwd: the forward kernels are
deterministic anyway. The Python entry points (flash_attn_func, flash_attn_varlen_func, flashcute.sdpa) run the
same formula in eager mode through a plain autograd.Function with the ops below the Autograd key (call_forward).
"""

import torch

from flashcute import _build

FWD_SCHEMA = (
    "fwd(Tensor q, Tensor k, Tensor v, float? softmax_scale=None, bool causal=False, bool causal_top_left=False, "
    'str backend="auto", bool deterministic=False) -> (Tensor out, Tensor lse)'
)
BWD_SCHEMA = (
    "bwd(Tensor dout, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, float? softmax_scale=None, "
    'bool causal=False, bool causal_top_left=False, bool deterministic=False, str backend="auto") '
    "-> (Tensor dq, Tensor dk, Tensor dv)"
)

# Packed (variable-length) batches: q (total_q, heads_q, d), k/v (total_k, heads_kv, d), sequence b at rows
# cu_seqlens[b]:cu_seqlens[b + 1]; lse (heads_q, total_q).
FWD_VARLEN_SCHEMA = (
    "fwd_varlen(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k, SymInt max_seqlen_q, "
    'SymInt max_seqlen_k, float? softmax_scale=None, bool causal=False, Tensor? seqused_k=None, str backend="auto", '
    "bool deterministic=False) -> (Tensor out, Tensor lse)"
)
BWD_VARLEN_SCHEMA = (
    "bwd_varlen(Tensor dout, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, Tensor cu_seqlens_q, "
    "Tensor cu_seqlens_k, SymInt max_seqlen_q, SymInt max_seqlen_k, float? softmax_scale=None, bool causal=False, "
    'Tensor? seqused_k=None, bool deterministic=False, str backend="auto") -> (Tensor dq, Tensor dk, Tensor dv)'
)

# Decoding against a KV cache (inference: no autograd): k_cache / v_cache (batch, capacity, hkv, d), or paged
# (num_pages, page_size, hkv, d) through block_table (batch, max_blocks); k / v (batch, seqlen_new, hkv, d) are written
# into the caches at cache_seqlens, in place (the schema says so), and attended to; cache_leftpad (batch,): where
# each sequence's keys start in a contiguous cache.
FWD_KVCACHE_SCHEMA = (
    "fwd_kvcache(Tensor q, Tensor(a!) k_cache, Tensor(b!) v_cache, Tensor? k=None, Tensor? v=None, "
    "Tensor? cache_seqlens=None, Tensor? block_table=None, float? softmax_scale=None, bool causal=False, "
    'int num_splits=0, str backend="auto", Tensor? cache_leftpad=None) -> (Tensor out, Tensor lse)'
)

_lib = torch.library.Library("flashcute", "DEF")
for _schema in (FWD_SCHEMA, BWD_SCHEMA, FWD_VARLEN_SCHEMA, BWD_VARLEN_SCHEMA, FWD_KVCACHE_SCHEMA):
    _lib.define(_schema)

_CUDA = torch._C.DispatchKeySet(torch._C.DispatchKey.CUDA)

# register_autograd's kernel wraps every call of an op in Python (its arguments flattened and checked), forward and
# backward alike: tens of microseconds of host time per attention call, which decoding (one small call per layer and
# token) and training steps of short sequences feel (benchmarks/notes.md#d-host-eager-autograd).
_BELOW_AUTOGRAD = getattr(torch._C, "_AutoDispatchBelowAutograd", None)


def call_forward(op, q, k, v, *options):
    """op(q, k, v, *options) for fwd and fwd_varlen from the Python entry points. Where no input needs a gradient,
    below the Autograd key straight away, as register_autograd's kernel would go; where one does, through
    _EagerAttention, the op's own autograd formula without that kernel's wrapping. While torch.compile traces or a
    torch.func transform runs, or where an input is not a tensor (whose error the op gives), the op as it is; so
    too an op with no formula here (tests' stand-ins), where a gradient is needed."""
    tensors = isinstance(q, torch.Tensor) and isinstance(k, torch.Tensor) and isinstance(v, torch.Tensor)
    if (_BELOW_AUTOGRAD is None or not tensors or torch.compiler.is_compiling()
            or torch._C._are_functorch_transforms_active()):
        return op(q, k, v, *options)
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
        return _EagerAttention.apply(q, k, v, op, *options) if op in _AUTOGRAD_OF else op(q, k, v, *options)
    with _BELOW_AUTOGRAD():
        return op(q, k, v, *options)


def _require_cuda(op, **tensors):
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):  # the schema lets None through for a Tensor argument
            raise TypeError(f"flashcute.{op}: {name} must be a tensor, got {type(t).__name__}")
        if not t.is_cuda:
            raise RuntimeError(f"flashcute.{op}: {name} must be a CUDA tensor, got a tensor on {t.device}")


@torch.library.impl(_lib, "fwd", "CompositeExplicitAutograd")
def _fwd_load_and_call(q, k, v, softmax_scale=None, causal=False, causal_top_left=False, backend="auto",
                       deterministic=False):
    _require_cuda("fwd", q=q, k=k, v=v)
    _build.load_library()
    return torch.ops.flashcute.fwd.default.redispatch(
        _CUDA, q, k, v, softmax_scale, causal, causal_top_left, backend, deterministic
    )


@torch.library.register_fake("flashcute::fwd")
def _fwd_fake(q, k, v, softmax_scale=None, causal=False, causal_top_left=False, backend="auto", deterministic=False):
    batch, seqlen_q, heads_q, head_dim = q.shape
    out = q.new_empty((batch, seqlen_q, heads_q, head_dim))
    lse = q.new_empty((batch, heads_q, seqlen_q), dtype=torch.float32)
    return out, lse


@torch.library.impl(_lib, "bwd", "CompositeExplicitAutograd")
def _bwd_load_and_call(dout, q, k, v, out, lse, softmax_scale=None, causal=False, causal_top_left=False,
                       deterministic=False, backend="auto"):
    _require_cuda("bwd", dout=dout, q=q, k=k, v=v, out=out, lse=lse)
    _build.load_library()
    return torch.ops.flashcute.bwd.default.redispatch(
        _CUDA, dout, q, k, v, out, lse, softmax_scale, causal, causal_top_left, deterministic, backend
    )


@torch.library.register_fake("flashcute::bwd")
def _bwd_fake(dout, q, k, v, out, lse, softmax_scale=None, causal=False, causal_top_left=False, deterministic=False,
              backend="auto"):
    return q.new_empty(q.shape), q.new_empty(k.shape), q.new_empty(v.shape)


@torch.library.impl(_lib, "fwd_varlen", "CompositeExplicitAutograd")
def _fwd_varlen_load_and_call(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale=None,
                              causal=False, seqused_k=None, backend="auto", deterministic=False):
    _require_cuda("fwd_varlen", q=q, k=k, v=v, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k)
    _build.load_library()
    return torch.ops.flashcute.fwd_varlen.default.redispatch(
        _CUDA, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal, seqused_k,
        backend, deterministic
    )


@torch.library.register_fake("flashcute::fwd_varlen")
def _fwd_varlen_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale=None,
                     causal=False, seqused_k=None, backend="auto", deterministic=False):
    total_q, heads_q, _ = q.shape
    return q.new_empty(q.shape), q.new_empty((heads_q, total_q), dtype=torch.float32)


@torch.library.impl(_lib, "bwd_varlen", "CompositeExplicitAutograd")
def _bwd_varlen_load_and_call(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                              softmax_scale=None, causal=False, seqused_k=None, deterministic=False, backend="auto"):
    _require_cuda("bwd_varlen", dout=dout, q=q, k=k, v=v, out=out, lse=lse, cu_seqlens_q=cu_seqlens_q,
                  cu_seqlens_k=cu_seqlens_k)
    _build.load_library()
    return torch.ops.flashcute.bwd_varlen.default.redispatch(
        _CUDA, dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal,
        seqused_k, deterministic, backend
    )


@torch.library.register_fake("flashcute::bwd_varlen")
def _bwd_varlen_fake(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                     softmax_scale=None, causal=False, seqused_k=None, deterministic=False, backend="auto"):
    return q.new_empty(q.shape), q.new_empty(k.shape), q.new_empty(v.shape)


@torch.library.impl(_lib, "fwd_kvcache", "CompositeExplicitAutograd")
def _fwd_kvcache_load_and_call(q, k_cache, v_cache, k=None, v=None, cache_seqlens=None, block_table=None,
                               softmax_scale=None, causal=False, num_splits=0, backend="auto", cache_leftpad=None):
    _require_cuda("fwd_kvcache", q=q, k_cache=k_cache, v_cache=v_cache)
    _build.load_library()
    return torch.ops.flashcute.fwd_kvcache.default.redispatch(
        _CUDA, q, k_cache, v_cache, k, v, cache_seqlens, block_table, softmax_scale, causal, num_splits, backend,
        cache_leftpad
    )


@torch.library.register_fake("flashcute::fwd_kvcache")
def _fwd_kvcache_fake(q, k_cache, v_cache, k=None, v=None, cache_seqlens=None, block_table=None, softmax_scale=None,
                      causal=False, num_splits=0, backend="auto", cache_leftpad=None):
    batch, seqlen_q, heads_q, _ = q.shape
    return q.new_empty(q.shape), q.new_empty((batch, heads_q, seqlen_q), dtype=torch.float32)


# ---------------------------------------------------------------------------------------------- autograd

def _fwd_setup_context(ctx, inputs, output):
    q, k, v, softmax_scale, causal, causal_top_left, backend, deterministic = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse)
    ctx.options = (softmax_scale, causal, causal_top_left, deterministic, backend)
    ctx.set_materialize_grads(False)  # an unused out or lse gets None, not a tensor of zeros to work through


def _fwd_backward(ctx, grad_out, grad_lse):
    q, k, v, out, lse = ctx.saved_tensors
    dq = dk = dv = None
    if grad_out is not None:
        dq, dk, dv = torch.ops.flashcute.bwd(_as_kernel_reads(grad_out), q, k, v, out, lse, *ctx.options)
    if grad_lse is not None:
        softmax_scale, causal, causal_top_left, deterministic, backend = ctx.options
        dq_lse, dk_lse = _lse_backward(
            grad_lse.transpose(1, 2).unsqueeze(-1), q, softmax_scale, *ctx.needs_input_grad[:2],
            attention=lambda: torch.ops.flashcute.fwd(q, k, k, softmax_scale, causal, causal_top_left, backend)[0],
            value_grad=lambda dout: torch.ops.flashcute.bwd(dout, q, k, v, out, lse, *ctx.options)[2],
        )
        dq, dk = _add(dq, dq_lse), _add(dk, dk_lse)
    return dq, dk, dv, None, None, None, None, None


def _lse_backward(grad_lse_rows, q, softmax_scale, need_dq, need_dk, attention, value_grad):
    """The gradient through lse, from the kernels themselves: lse_i = logsumexp_j(scale q_i.k_j), so
    d lse_i / d q_i = scale * sum_j P_ij k_j (attention with k as the values: `attention()`, a forward call) and
    d lse_i / d k_j = scale * sum_i P_ij q_i (the value gradient of a backward call whose dout is q weighted by
    the lse's gradient: `value_grad(dout)`). grad_lse_rows: the lse's gradient as (..., rows, heads, 1), like
    q's rows. Rows that see no key have P = 0 and contribute nothing."""
    scale = softmax_scale if softmax_scale is not None else q.shape[-1] ** -0.5
    weights = grad_lse_rows * scale  # float32
    dq = dk = None
    if need_dq:
        dq = (weights * attention()).to(q.dtype)
    if need_dk:
        dk = value_grad(_as_kernel_reads((weights * q).to(q.dtype)))
    return dq, dk


def _add(grad, extra):
    return extra if grad is None else grad if extra is None else grad + extra


def _as_kernel_reads(dout):
    """dout as the backward kernel takes it (the last dim contiguous, rows 16-byte aligned): autograd often
    hands over expanded (stride-0) or other views, which are copied; strided views that qualify are not."""
    elements_per_16_bytes = 16 // dout.element_size()
    if (dout.stride(-1) == 1 and dout.storage_offset() % elements_per_16_bytes == 0
            and all(stride % elements_per_16_bytes == 0 for stride in dout.stride()[:-1])):
        return dout
    return dout.clone(memory_format=torch.contiguous_format)


def _fwd_varlen_setup_context(ctx, inputs, output):
    (q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal, seqused_k, backend,
     deterministic) = inputs
    out, lse = output
    ctx.has_seqused_k = seqused_k is not None
    ctx.save_for_backward(q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, *((seqused_k,) if ctx.has_seqused_k else ()))
    ctx.options = (max_seqlen_q, max_seqlen_k, softmax_scale, causal, deterministic, backend)
    ctx.set_materialize_grads(False)


def _fwd_varlen_backward(ctx, grad_out, grad_lse):
    q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, *rest = ctx.saved_tensors
    seqused_k = rest[0] if ctx.has_seqused_k else None
    max_seqlen_q, max_seqlen_k, softmax_scale, causal, deterministic, backend = ctx.options
    lengths = (cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)

    def bwd(dout):
        return torch.ops.flashcute.bwd_varlen(dout, q, k, v, out, lse, *lengths, softmax_scale, causal, seqused_k,
                                              deterministic, backend)

    dq = dk = dv = None
    if grad_out is not None:
        dq, dk, dv = bwd(_as_kernel_reads(grad_out))
    if grad_lse is not None:
        dq_lse, dk_lse = _lse_backward(
            grad_lse.transpose(0, 1).unsqueeze(-1), q, softmax_scale, *ctx.needs_input_grad[:2],
            attention=lambda: torch.ops.flashcute.fwd_varlen(q, k, k, *lengths, softmax_scale, causal, seqused_k,
                                                             backend)[0],
            value_grad=lambda dout: bwd(dout)[2],
        )
        dq, dk = _add(dq, dq_lse), _add(dk, dk_lse)
    return dq, dk, dv, None, None, None, None, None, None, None, None, None


def _no_double_backward(op):
    def backward(ctx, *grads):
        raise NotImplementedError(
            f"flashcute.{op} has no backward pass: flashcute gives first-order gradients only (no double backward, "
            "e.g. create_graph=True followed by a second backward through the attention)."
        )
    return backward


class _EagerAttention(torch.autograd.Function):
    """fwd's or fwd_varlen's autograd formula (the setup_context and backward that register_autograd takes) with
    the ops called below the Autograd key. Under create_graph the backward calls the ops as they are, so that a
    second backward meets bwd's error (_no_double_backward)."""

    @staticmethod
    def forward(ctx, q, k, v, op, *options):
        with _BELOW_AUTOGRAD():
            output = op(q, k, v, *options)
        ctx.op = op
        _AUTOGRAD_OF[op][0](ctx, (q, k, v, *options), output)
        return output

    @staticmethod
    def backward(ctx, grad_out, grad_lse):
        backward = _AUTOGRAD_OF[ctx.op][1]
        if torch.is_grad_enabled():
            grads = backward(ctx, grad_out, grad_lse)
        else:
            with _BELOW_AUTOGRAD():
                grads = backward(ctx, grad_out, grad_lse)
        return (*grads[:3], None, *grads[3:])  # None for op


# The (setup_context, backward) of each forward op.
_AUTOGRAD_OF = {
    torch.ops.flashcute.fwd: (_fwd_setup_context, _fwd_backward),
    torch.ops.flashcute.fwd_varlen: (_fwd_varlen_setup_context, _fwd_varlen_backward),
}

torch.library.register_autograd("flashcute::fwd", _fwd_backward, setup_context=_fwd_setup_context)
torch.library.register_autograd("flashcute::bwd", _no_double_backward("bwd"))
torch.library.register_autograd("flashcute::fwd_varlen", _fwd_varlen_backward, setup_context=_fwd_varlen_setup_context)
torch.library.register_autograd("flashcute::bwd_varlen", _no_double_backward("bwd_varlen"))
