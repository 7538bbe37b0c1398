"""torch.ops.flashcute.*: schemas, fake kernels and autograd, defined when this module is imported (with flashcute
and torch); the CUDA kernels come from the C++ extension, loaded (JIT-built if needed) on the first call.

Each op has a Python kernel under CompositeExplicitAutograd, which serves every backend without a kernel of its
own: on CUDA tensors it loads the library, whose TORCH_LIBRARY_IMPL registers the C++ kernel for CUDA (a direct
registration, which from then on takes precedence), and hands the call to it; on any other device it raises
the error a CUDA-only op should.
"""

import torch

from flashcute import _build

FWD_SCHEMA = (
    "fwd(Tensor q, Tensor k, Tensor v, float? softmax_scale=None, bool causal=False, bool causal_top_left=False, "
    'str backend="auto") -> (Tensor out, Tensor lse)'
)

_lib = torch.library.Library("flashcute", "DEF")
_lib.define(FWD_SCHEMA)

_CUDA = torch._C.DispatchKeySet(torch._C.DispatchKey.CUDA)


def _require_cuda(op, **tensors):
    for name, t in tensors.items():
        if not t.is_cuda:
            raise RuntimeError(f"flashcute.{op}: {name} must be a CUDA tensor, got a tensor on {t.device}")


@torch.library.impl(_lib, "fwd", "CompositeExplicitAutograd")
def _fwd_load_and_call(q, k, v, softmax_scale=None, causal=False, causal_top_left=False, backend="auto"):
    _require_cuda("fwd", q=q, k=k, v=v)
    _build.load_library()
    return torch.ops.flashcute.fwd.default.redispatch(_CUDA, q, k, v, softmax_scale, causal, causal_top_left, backend)


@torch.library.register_fake("flashcute::fwd")
def _fwd_fake(q, k, v, softmax_scale=None, causal=False, causal_top_left=False, backend="auto"):
    batch, seqlen_q, heads_q, head_dim = q.shape
    out = q.new_empty((batch, seqlen_q, heads_q, head_dim))
    lse = q.new_empty((batch, heads_q, seqlen_q), dtype=torch.float32)
    return out, lse


def _setup_context(ctx, inputs, output):
    pass


def _backward(ctx, grad_out, grad_lse):
    raise NotImplementedError(
        "flashcute.fwd has no backward pass yet: flashcute is forward-only (inference). "
        "Use torch.nn.functional.scaled_dot_product_attention where gradients are needed."
    )


torch.library.register_autograd("flashcute::fwd", _backward, setup_context=_setup_context)
