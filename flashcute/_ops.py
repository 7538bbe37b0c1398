"""Python-side registrations for torch.ops.flashcute.fwd, made as soon as the extension is loaded.

Importing this module loads the library (the op must exist before a fake kernel can be registered for it);
csrc/flash_api.cpp names this module as the op's Python stub, so torch imports it when it needs the fake.
"""

import torch

from flashcute._build import load_library

library = load_library()


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
