"""A drop-in for torch.nn.functional.scaled_dot_product_attention served by flashcute's kernel.

`sdpa` takes torch's arguments on (b, h, s, d) tensors (or (h, s, d)) and means exactly what torch means.
When flashcute can serve the call it runs `torch.ops.flashcute.fwd` on (b, s, h, d) transpose views of the
inputs — no copies — with torch's top-left causal alignment, and returns the (b, h, s, d) view of the op's
contiguous (b, s, h, d) output, as FlashAttention does. The call is differentiable (its backward runs
`torch.ops.flashcute.bwd`, in its deterministic mode while torch.use_deterministic_algorithms(True) is on).
Nested-jagged inputs (`torch.nested`, layout=torch.jagged, (b, h, j, d)) run the variable-length kernel on their
packed values and come back nested with the query's offsets (torch's SDPA serves them without is_causal; here
causal self-attention, where query and key share their offsets, is served too).
Any other call goes to torch's own SDPA, with a warning, once per reason, that says why.
"""

import math
import warnings

import torch
import torch.nn.functional as F

from flashcute import _ops
from flashcute._build import FlashcuteUnavailable, load_library

SERVED_DTYPES = (torch.float16, torch.bfloat16)
MAX_HEAD_DIM = 256

FALLBACK = "flashcute.sdpa falls back to torch SDPA"

_warned = set()


def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """torch.nn.functional.scaled_dot_product_attention, on flashcute's kernel where it can serve the call."""
    if not (isinstance(query, torch.Tensor) and isinstance(key, torch.Tensor) and isinstance(value, torch.Tensor)):
        # torch's own error, naming the argument
        return F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p,
                                              is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)
    nested = query.is_nested or key.is_nested or value.is_nested
    reason = unserved_reason(query, key, value, attn_mask, dropout_p, enable_gqa, scale)
    if reason is None and nested:
        reason = _nested_unserved_reason(query, key, value, is_causal)
    elif reason is None and not torch.compiler.is_compiling():
        reason = _unaligned_reason(query, key, value)
    kernel = None
    if reason is None:
        kernel, reason = _kernel()
    if kernel is None:
        warn_fallback_once(FALLBACK, reason)
        return F.scaled_dot_product_attention(
            query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale,
            enable_gqa=enable_gqa,
        )
    if nested:
        return _nested_sdpa(query, key, value, is_causal, scale)
    # (h, s, d) is one batch of heads; unsqueeze is a view.
    batched = query.dim() == 4
    if not batched:
        query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
    out = fwd_top_left(kernel, query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2), is_causal,
                       scale).transpose(1, 2)
    return out if batched else out.squeeze(0)


def fwd_top_left(kernel, q, k, v, is_causal, scale):
    """The op (`kernel`, from `_kernel()`) on (b, s, h, d) tensors with torch's SDPA semantics: top-left causal
    alignment, deterministic while torch.use_deterministic_algorithms(True) is on. Returns out (b, s, h, d)."""
    return _ops.call_forward(kernel, q, k, v, scale, is_causal, True, "auto",
                             torch.are_deterministic_algorithms_enabled())[0]


def unserved_reason(query, key, value, attn_mask=None, dropout_p=0.0, enable_gqa=False, scale=None):
    """Why flashcute's kernel cannot serve this SDPA call, or None when it can. The device is checked last,
    so every other reason reads the same on CPU tensors."""
    if attn_mask is not None:
        return "attn_mask is given (flashcute has no arbitrary masks; is_causal is served)"
    if dropout_p > 0.0:
        return "dropout_p > 0 (flashcute has no dropout)"
    if scale is not None and not (0.0 < scale < math.inf):
        return f"scale {scale} (flashcute serves positive finite scales)"
    if query.dim() not in (3, 4) or key.dim() != query.dim() or value.dim() != query.dim():
        return "the inputs are not all 4-D (b, h, s, d) or all 3-D (h, s, d)"
    if query.dtype not in SERVED_DTYPES:
        return f"dtype {query.dtype} (flashcute serves float16 and bfloat16)"
    if key.dtype != query.dtype or value.dtype != query.dtype:
        return "query, key and value dtypes differ"
    head_dim = query.size(-1)
    if key.size(-1) != head_dim or value.size(-1) != head_dim:
        return "query, key and value head dims differ"
    if head_dim % 8 != 0 or head_dim > MAX_HEAD_DIM:
        return f"head dim {head_dim} (flashcute serves multiples of 8 up to {MAX_HEAD_DIM})"
    if key.shape != value.shape:
        return "key and value shapes differ"
    if query.shape[:-3] != key.shape[:-3]:
        return "query and key batch sizes differ (torch broadcasts them)"
    heads_q, heads_kv = query.size(-3), key.size(-3)
    if heads_q != heads_kv:
        if not enable_gqa:
            return "query and key head counts differ and enable_gqa=False (torch broadcasts or rejects them)"
        if heads_q % heads_kv != 0:
            return f"{heads_q} query heads are not a multiple of {heads_kv} key/value heads"
    # Spelled out rather than looped over the three: decoding asks this once per layer and token.
    if query.stride(-1) != 1 or key.stride(-1) != 1 or value.stride(-1) != 1:
        return "an input's last dimension is not contiguous"
    if not (query.is_cuda and key.is_cuda and value.is_cuda):
        return "the inputs are not all CUDA tensors"
    device = query.device
    if key.device != device or value.device != device:
        return "the inputs are on different devices"
    return None


def _unaligned_reason(query, key, value):
    """Why the kernels cannot read these inputs in 16-byte pieces, or None: a data pointer, or a stride of a dim
    but the last, that is not a multiple of 8 elements. The op raises for such inputs (csrc/flash_api.cpp checks
    the strides of dims longer than 1); sdpa falls back instead. Not asked in unserved_reason, which the transformers
    integration asks at every call with its projections' views, nor while torch.compile traces (fake tensors have
    no data pointer): the op's error there."""
    strides = query.stride()[:-1] + key.stride()[:-1] + value.stride()[:-1]
    if (query.data_ptr() | key.data_ptr() | value.data_ptr()) % 16 or math.gcd(*strides) % 8:
        return "an input is not 16-byte aligned (its data pointer or a stride is not a multiple of 8 elements)"
    return None


def _nested_unserved_reason(query, key, value, is_causal):
    """Why the variable-length kernel cannot serve these nested inputs, or None."""
    if not (query.is_nested and key.is_nested and value.is_nested):
        return "some inputs are nested tensors and some are not"
    if any(t.layout != torch.jagged or t.dim() != 4 or getattr(t, "_ragged_idx", None) != 2
           for t in (query, key, value)):
        return "nested inputs that are not (b, h, j, d) with layout=torch.jagged"
    if is_causal and query.size(2) != key.size(2):
        return ("is_causal with nested queries and keys of different lengths (torch's top-left alignment; "
                "flashcute's variable-length kernel aligns bottom-right)")
    return None


def _nested_sdpa(query, key, value, is_causal, scale):
    """The variable-length kernel on the (total, h, d) values of (b, h, j, d) nested-jagged inputs; the output
    is nested with the query's offsets (so its ragged dimension is the query's)."""
    from flashcute.interface import flash_attn_varlen_func

    q, k, v = (t.transpose(1, 2) for t in (query, key, value))  # (b, j, h, d), values (total, h, d)
    offsets_q, offsets_k = q.offsets(), k.offsets()
    lengths_q, lengths_k = offsets_q.diff(), offsets_k.diff()
    max_q = int(lengths_q.max()) if len(lengths_q) else 0  # read back: the kernel's grid needs it
    max_k = max_q if offsets_k is offsets_q else int(lengths_k.max()) if len(lengths_k) else 0
    out = flash_attn_varlen_func(q.values(), k.values(), v.values(), offsets_q.to(torch.int32),
                                 offsets_k.to(torch.int32), max_q, max_k, softmax_scale=scale, causal=is_causal,
                                 deterministic=torch.are_deterministic_algorithms_enabled())
    return torch.nested.nested_tensor_from_jagged(out, offsets_q, max_seqlen=max_q).transpose(1, 2)


def warn_fallback_once(what, reason):
    """Warn `what: reason` the first time this pair happens, so a model's every layer doesn't repeat it."""
    if (what, reason) in _warned:
        return
    _warned.add((what, reason))
    warnings.warn(f"{what}: {reason}", stacklevel=3)


def _kernel():
    """(torch.ops.flashcute.fwd, None) once the extension is loaded (built on first use), else (None, why).
    Keeps no state of its own: state first set while torch.compile traces a call would fail the guards of the
    next call and recompile (flashcute._build caches the loaded extension)."""
    try:
        load_library()
    except FlashcuteUnavailable as error:
        return None, f"flashcute's kernels are unavailable here: {error}"
    return torch.ops.flashcute.fwd, None
