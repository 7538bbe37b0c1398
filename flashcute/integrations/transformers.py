"""flashcute as a transformers attention implementation.

    from flashcute.integrations.transformers import register
    register()
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="flashcute")

transformers stays optional: it is imported by `register()`, not by this module.

"flashcute" keeps FlashAttention's contract in transformers (which counts every name containing "flash" as a
FlashAttention flavour). The mask function hands every layer of one forward the same description of the batch:
- None where torch SDPA's `is_causal` (top-left) or no masking at all is exact (prefill without padding,
  one-token decoding that sees every cached key): the fixed-length kernel;
- a `VarlenMask` for causal (or bidirectional) attention over sequences that a 2D padding mask, packed
  `position_ids` or the filled part of a static cache delimit: the variable-length kernel on the valid rows
  (gathered, and scattered back into zeros as with FlashAttention), or the fixed-length kernel on the filled
  keys, both aligned bottom-right; a left-padded batch's decoding steps (up to 16 queries, no gradients) run the
  split-KV decode kernel with `cache_leftpad`;
- transformers' own 4D SDPA mask for everything else (sliding windows that bite, chunked or blockwise masks,
  custom mask functions), which the attention function hands to transformers' SDPA attention with a one-time
  warning, as it does for attention dropout, a position bias and inputs the kernels do not serve.
The attention function also runs packed sequences that `cu_seq_lens_q/k` and `max_length_q/k` delimit (what
`DataCollatorWithFlattening(return_flash_attn_kwargs=True)` adds) or that restarting `position_ids` reveal where
transformers' mask does not (a cache is in use), as FlashAttention's integration does. Continuous batching
(`generate_batch`) runs each step's packed requests on the variable-length kernel.
"""

import functools
import inspect
import weakref

import torch

from flashcute import interface, kernel_table
from flashcute.sdpa import _kernel, fwd_top_left, unserved_reason, warn_fallback_once

NAME = "flashcute"
# transformers' continuous batching (generate_batch) before 5.23 renames the model's implementation "paged|<name>"
# and hands that function its paged cache; later versions keep "flashcute" and read the cache back themselves.
PAGED_NAME = "paged|" + NAME
FALLBACK = "attn_implementation='flashcute' runs transformers' SDPA attention"


def register():
    """Register flashcute with transformers' attention and mask interfaces under the name "flashcute" (and its
    attention function for continuous batching under "paged|flashcute", the name transformers before 5.23 gives it
    there)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(NAME, flashcute_attention_forward)
    AttentionInterface.register(PAGED_NAME, flashcute_paged_attention_forward)
    AttentionMaskInterface.register(NAME, flashcute_mask)
    _skip_flash_attention_preload()
    return NAME


# ------------------------------------------------------------------------------------------------ the mask

def flashcute_mask(batch_size, q_length, kv_length, q_offset=0, kv_offset=0, mask_function=None,
                   attention_mask=None, **kwargs):
    """transformers' mask-interface contract (the arguments of `sdpa_mask`): a `VarlenMask` where flashcute's
    kernels express the mask exactly, else what `sdpa_mask` returns (None or a 4D boolean mask). While
    torch.compile traces, always the latter: a VarlenMask reads lengths back to the host."""
    from transformers.masking_utils import bidirectional_mask_function, causal_mask_function, sdpa_mask

    if isinstance(attention_mask, VarlenMask):  # made ahead (generate() with a static cache) and passed back
        return attention_mask.sdpa_mask() if torch.compiler.is_compiling() else attention_mask
    if mask_function is None:
        mask_function = causal_mask_function
    sdpa_arguments = dict(batch_size=batch_size, q_length=q_length, kv_length=kv_length, q_offset=q_offset,
                          kv_offset=kv_offset, mask_function=mask_function, attention_mask=attention_mask, **kwargs)
    if torch.compiler.is_compiling() or kv_offset != 0 or kwargs.get("local_size") is not None:
        return sdpa_mask(**sdpa_arguments)
    sequence_ids = _packed_sequence_ids(mask_function)
    if sequence_ids is not None:
        if attention_mask is None and q_length == kv_length == sequence_ids.shape[1]:
            return VarlenMask(q_length, kv_length, True, sdpa_arguments, sequence_ids=sequence_ids)
        return sdpa_mask(**sdpa_arguments)
    if mask_function is not causal_mask_function and mask_function is not bidirectional_mask_function:
        return sdpa_mask(**sdpa_arguments)
    causal = mask_function is causal_mask_function
    if attention_mask is not None:
        # The keys in use are the mask's first columns (a static cache holds unfilled slots past them); causal
        # queries are the last q_length of them.
        keys = min(attention_mask.shape[-1], kv_length)
        if attention_mask.dim() != 2 or (causal and (keys < q_length or
                                                     isinstance(q_offset, int) and q_offset + q_length != keys)):
            return sdpa_mask(**sdpa_arguments)
        return VarlenMask(q_length, keys, causal, sdpa_arguments, padding=attention_mask[:, :keys].bool())
    if causal and isinstance(q_offset, int) and 1 < q_length < kv_length and q_offset + q_length <= kv_length:
        # Queries after q_offset cached keys (chunked prefill, speculative steps, an empty static cache): the
        # keys past them are invisible, the rest is causal aligned bottom-right.
        return VarlenMask(q_length, q_offset + q_length, causal, sdpa_arguments)
    return sdpa_mask(**sdpa_arguments)


class VarlenMask:
    """Which queries see which keys in a batch of sequences, in the terms of flashcute's kernels.

    Sequence b owns the query and key rows that `padding` (a (batch, keys) boolean mask; causal queries are its
    last q_length columns) or `sequence_ids` (an id per token of packed sequences, (batch, seqlen)) give it, or,
    with neither, all of row b's first `keys` keys. `causal` aligns each sequence's diagonal bottom-right.
    """

    # generate() hands a mask it made ahead back to the mask functions, which take `ndim == 2` for a padding mask.
    ndim = 4

    def __init__(self, q_length, keys, causal, sdpa_arguments=None, padding=None, sequence_ids=None):
        self.q_length, self.keys, self.causal = q_length, keys, causal
        self.padding, self.sequence_ids = padding, sequence_ids
        self._sdpa_arguments = sdpa_arguments
        self._sdpa_mask = self._varlen = self._left_padding = None

    def sdpa_mask(self):
        """The mask transformers' SDPA attention takes for the same call (built once)."""
        from transformers.masking_utils import sdpa_mask

        if self._sdpa_mask is None:
            if self._sdpa_arguments is not None:
                self._sdpa_mask = (sdpa_mask(**self._sdpa_arguments),)
            else:  # packed sequences found in position_ids: causal within each
                cu_seqlens = self.varlen()[2]
                self._sdpa_mask = (_packed_sdpa_mask((cu_seqlens, cu_seqlens), self.sequence_ids.shape[0],
                                                     self.q_length, self.keys, True, cu_seqlens.device),)
        return self._sdpa_mask[0]

    def varlen(self):
        """(query rows, key rows, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k), or None where each
        sequence is a whole batch row (no padding). Rows are (batch indices, positions), or None for every row
        in order. Computed at the first layer, which reads lengths back to the host once; kept for the others."""
        if self._varlen is None:
            if self.padding is not None:
                self._varlen = (self._from_padding(),)
            elif self.sequence_ids is not None:
                self._varlen = (self._from_sequence_ids(),)
            else:
                self._varlen = (None,)
        return self._varlen[0]

    def left_padding(self):
        """Where the padding mask pads some rows, on the left only (generate()'s batches): int32 (batch,), the
        padding keys before each row's valid ones; else None. Computed at the first layer (one read back to the
        host), kept for the others."""
        if self._left_padding is None:
            padding = self.padding
            left = (padding is not None and padding.shape[1] > 0 and not bool(padding.all())
                    and bool((padding[:, 1:] >= padding[:, :-1]).all()))
            pads = (padding.shape[1] - padding.sum(dim=1, dtype=torch.int32)).to(torch.int32) if left else None
            self._left_padding = (pads,)
        return self._left_padding[0]

    def _from_padding(self):
        padding = self.padding
        if bool(padding.all()):
            return None
        key_rows, cu_k, max_k = _rows_of(padding)
        if not self.causal:  # every query sees its row's valid keys
            cu_q = torch.arange(padding.shape[0] + 1, device=padding.device, dtype=torch.int32) * self.q_length
            return None, key_rows, cu_q, cu_k, self.q_length, max_k
        if self.q_length == self.keys:
            return key_rows, key_rows, cu_k, cu_k, max_k, max_k
        query_rows, cu_q, max_q = _rows_of(padding[:, -self.q_length:])
        return query_rows, key_rows, cu_q, cu_k, max_q, max_k

    def _from_sequence_ids(self):
        ids = self.sequence_ids
        batch, seqlen = ids.shape
        starts = torch.ones_like(ids, dtype=torch.bool)
        starts[:, 1:] = ids[:, 1:] != ids[:, :-1]
        start_rows = starts.flatten().nonzero().flatten()
        cu = torch.cat([start_rows, start_rows.new_tensor([batch * seqlen])]).to(torch.int32)
        max_len = int((cu[1:] - cu[:-1]).max().item())
        return None, None, cu, cu, max_len, max_len


def _rows_of(mask):
    """(batch indices, positions) of the True entries of a (batch, n) mask, row by row; cumulative row counts
    (int32, batch + 1); the largest row count as a Python int."""
    counts = mask.sum(dim=1, dtype=torch.int32)
    cu = torch.nn.functional.pad(torch.cumsum(counts, dim=0, dtype=torch.int32), (1, 0))
    return mask.nonzero(as_tuple=True), cu, int(counts.max().item()) if mask.shape[0] else 0


def _packed_sequence_ids(mask_function):
    """The (batch, seqlen) sequence ids of packed sequences when `mask_function` is transformers' causal mask
    over packed sequences (`create_causal_mask` builds it from `position_ids` that restart), else None.

    It is recognised by its structure: and_masks(causal, packed_sequence_mask_function(ids)), where causal is
    causal_mask_function (transformers 5.17) or remap_positions_for_packed_sequence(causal_mask_function, ...)
    (5.2x); anything else gives None (and the SDPA mask)."""
    from transformers.masking_utils import causal_mask_function

    parts = _closure(mask_function, "and_masks", "mask_functions")
    if not isinstance(parts, tuple) or len(parts) != 2:
        return None
    causal, packed = parts
    if causal is not causal_mask_function and (
            _closure(causal, "remap_positions_for_packed_sequence", "mask_function") is not causal_mask_function):
        return None
    ids = _closure(packed, "packed_sequence_mask_function", "packed_sequence_mask")
    return ids if isinstance(ids, torch.Tensor) and ids.dim() == 2 else None


def _closure(function, factory, name):
    """The variable `name` that `function`, an inner function of transformers' `factory`, closes over."""
    if not getattr(function, "__qualname__", "").startswith(f"{factory}.<locals>."):
        return None
    return inspect.getclosurevars(function).nonlocals.get(name)


# ------------------------------------------------------------------------------------------- the attention

def flashcute_attention_forward(
    module, query, key, value, attention_mask, dropout=0.0, scaling=None, is_causal=None, **kwargs
):
    """transformers' attention-function contract: (b, h, s, d) inputs, returns ((b, s, h, d) output, None)."""
    for unsupported in ("softcap", "s_aux"):
        if kwargs.get(unsupported) is not None:
            raise NotImplementedError(
                f"attn_implementation='flashcute' does not support `{unsupported}`; use 'eager' for this model"
            )
    if is_causal is None:
        is_causal = getattr(module, "is_causal", True)
    packed = _packed_kwargs(kwargs)
    if attention_mask is None and packed is None:
        attention_mask = _packed_positions(kwargs.get("position_ids"), query.shape[0], query.shape[2], key.shape[2])
    if isinstance(attention_mask, VarlenMask) or (attention_mask is None and packed is not None):
        return _varlen_attention(module, query, key, value, attention_mask, packed, dropout, scaling, is_causal,
                                 kwargs)
    reason = _fallback_reason(attention_mask, dropout, kwargs)
    if reason is not None:
        return _transformers_sdpa(module, query, key, value, attention_mask, dropout, scaling, is_causal, reason,
                                  kwargs)

    q_len, kv_len = query.shape[2], key.shape[2]
    # One query against a cache sees every key (bottom-right); torch's top-left is_causal would show it one.
    # The shape test comes first and is made a bool so torch.compile never passes a SymBool to the op.
    is_causal = bool(q_len > 1) and bool(is_causal)
    if is_causal and kv_len > q_len:
        # Prefill into an empty static cache: keys past the prompt are invisible under top-left causal
        # masking, so slicing them off (a view) only saves their work.
        key, value = key[:, :, :q_len], value[:, :, :q_len]
    kernel, reason = _serving_kernel(query, key, value, scaling)
    if kernel is None:
        return _transformers_sdpa(module, query, key, value, None, dropout, scaling, is_causal, reason, kwargs)
    # The op's (b, s, h, d) output is what transformers wants: no transposes back and forth (decoding calls this
    # once per layer and token).
    return fwd_top_left(kernel, query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2), is_causal,
                        scaling), None


def _varlen_attention(module, query, key, value, mask, packed, dropout, scaling, is_causal, kwargs):
    """A VarlenMask's call, or packed sequences that cu_seq_lens kwargs delimit, on flashcute's kernels."""
    reason = _packed_unserved_reason(query, key, value, dropout, scaling, kwargs)
    if reason is not None:
        if mask is not None and (packed is None or mask.padding is not None or mask.sequence_ids is not None):
            sdpa_mask = mask.sdpa_mask()
        else:
            sdpa_mask = _packed_sdpa_mask(packed, query.shape[0], query.shape[2], key.shape[2], is_causal,
                                          query.device)
        return _transformers_sdpa(module, query, key, value, sdpa_mask, dropout, scaling, is_causal, reason, kwargs)

    deterministic = torch.are_deterministic_algorithms_enabled()
    q, k, v = query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2)  # (b, s, h, d) views
    batch, q_len = q.shape[:2]
    if mask is not None:
        is_causal = mask.causal
        k, v = k[:, :mask.keys], v[:, :mask.keys]
    query_rows = key_rows = None
    if packed is not None and (mask is None or mask.padding is None):
        cu_q, cu_k, max_q, max_k = packed
    elif _decodes_left_padded(mask, q, k, v):
        # A few queries per row after a left-padded cache: the split-KV decode kernel, each row's keys from its
        # first valid one on (cache_leftpad), rather than the packed-batch kernel's one CTA per row and head.
        out = interface.flash_attn_with_kvcache(q, k, v, softmax_scale=scaling, causal=is_causal,
                                                cache_leftpad=mask.left_padding())
        return out, None
    else:
        rows = mask.varlen()
        if rows is None:  # whole batch rows: the fixed-length kernel
            out = interface.flash_attn_func(q, k, v, softmax_scale=scaling, causal=is_causal,
                                            deterministic=deterministic)
            return out, None
        query_rows, key_rows, cu_q, cu_k, max_q, max_k = rows
    q_packed = q[query_rows] if query_rows is not None else q.reshape(-1, *q.shape[2:])
    k_packed = k[key_rows] if key_rows is not None else k.reshape(-1, *k.shape[2:])
    v_packed = v[key_rows] if key_rows is not None else v.reshape(-1, *v.shape[2:])
    out = interface.flash_attn_varlen_func(q_packed, k_packed, v_packed, cu_q, cu_k, max_q, max_k,
                                           softmax_scale=scaling, causal=is_causal, deterministic=deterministic)
    if query_rows is None:
        return out.view(batch, q_len, *out.shape[1:]), None
    # Queries the mask leaves out (padding) get zeros, as with FlashAttention.
    return out.new_zeros(batch, q_len, *out.shape[1:]).index_put(query_rows, out), None


def flashcute_paged_attention_forward(module, query, key, value, attention_mask, cache=None, cu_seq_lens_q=None,
                                      cu_seq_lens_k=None, max_seqlen_q=None, max_seqlen_k=None, block_table=None,
                                      dropout=0.0, scaling=None, **kwargs):
    """transformers' continuous batching before 5.23 ("paged|flashcute"): one step's requests packed into
    (1, h, tokens, d) inputs, with its PagedAttentionCache, which writes the new keys and values and reads each
    request's keys back by index (cache.update); then the variable-length kernel, causal per request. Returns
    ((tokens, hq, d), None). (transformers hands its block table, for decoding on the paged cache in place, only
    to FlashAttention 2 and 3.)"""
    if cache is None:
        raise ValueError(f"attn_implementation={PAGED_NAME!r} is for transformers' continuous batching "
                         f"(generate_batch), which passes its paged cache; use {NAME!r} for a standard forward")
    if getattr(module, "sliding_window", None):
        raise NotImplementedError(f"attn_implementation={PAGED_NAME!r} has no sliding-window layers; use "
                                  "'paged|sdpa' for this model's continuous batching")
    if isinstance(cu_seq_lens_k, dict):  # one entry per layer type: only full attention gets here
        cu_seq_lens_k, max_seqlen_k = cu_seq_lens_k["full_attention"], max_seqlen_k["full_attention"]
    if block_table is not None:
        raise NotImplementedError(f"attn_implementation={PAGED_NAME!r} does not take transformers' block table; "
                                  "set max_blocks_per_request=0 in the ContinuousBatchingConfig")
    reason = _packed_unserved_reason(query, key, value, dropout, scaling, kwargs)
    key, value = cache.update(key_states=key, value_states=value, layer_idx=module.layer_idx,
                              read_index=kwargs["read_index"], write_index=kwargs["write_index"])  # (keys, hkv, d)
    q = query.transpose(1, 2).squeeze(0)  # (tokens, hq, d)
    cu_q, cu_k = cu_seq_lens_q.to(torch.int32), cu_seq_lens_k.to(torch.int32)
    if reason is None:
        return interface.flash_attn_varlen_func(q, key, value, cu_q, cu_k, max_seqlen_q, max_seqlen_k,
                                                softmax_scale=scaling, causal=True), None
    mask = _packed_sdpa_mask((cu_q, cu_k), 1, q.shape[0], key.shape[0], True, q.device)
    out, _ = _transformers_sdpa(module, query, key.transpose(0, 1).unsqueeze(0), value.transpose(0, 1).unsqueeze(0),
                                mask, dropout, scaling, False, reason, kwargs)
    return out.squeeze(0), None


def _decodes_left_padded(mask, q, k, v):
    """Whether a padded batch's call goes to the decode kernel: a step after cached keys with few queries (a
    prefill runs the packed batch, which skips the padding rows), an inference call (that kernel has no backward),
    a mask padding on the left only, and a decode kernel for the dtype and head dim in this build."""
    if mask is None or mask.padding is None or q.shape[1] >= k.shape[1]:
        return False
    if not 0 < q.shape[1] <= kernel_table.DECODE_MAX_SEQLEN_Q:
        return False
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
        return False
    return _decode_kernel_built(q.dtype, q.shape[-1]) and mask.left_padding() is not None


@functools.lru_cache(maxsize=None)
def _decode_kernel_built(dtype, head_dim):
    prefix = "decode_sm80_" + {torch.float16: "fp16", torch.bfloat16: "bf16"}[dtype] + "_hdim"
    return any(int(name[len(prefix):]) >= head_dim for name in torch.ops.flashcute.built_kernels()
               if name.startswith(prefix))


_last_packed_positions = (None, None)  # (weak reference to position_ids, its VarlenMask or None)


def _packed_positions(position_ids, batch, q_length, kv_length):
    """A VarlenMask of the packed sequences in position_ids (a new sequence wherever a position is not the previous
    plus one), or None for one sequence per row. transformers finds packed sequences for SDPA's mask only where no
    cache is in use; FlashAttention, whose contract "flashcute" shares, finds them here, in the attention function,
    so training with DataCollatorWithFlattening needs no use_cache=False. The answer reads the positions back to
    the host, once per forward: the layers share one position_ids tensor. Skipped while torch.compile traces."""
    global _last_packed_positions
    if (position_ids is None or position_ids.dim() != 2 or position_ids.shape[0] not in (1, batch)
            or q_length != kv_length or q_length < 2 or position_ids.shape[1] != q_length
            or torch.compiler.is_compiling()):
        return None
    reference, mask = _last_packed_positions
    stale = mask is not None and mask.sequence_ids.shape[0] != batch
    if reference is None or reference() is not position_ids or stale:
        starts = position_ids[:, 1:] != position_ids[:, :-1] + 1
        mask = None
        if bool(starts.any()):
            sequence_ids = torch.nn.functional.pad(starts.cumsum(-1), (1, 0)).expand(batch, -1)
            mask = VarlenMask(q_length, kv_length, True, sequence_ids=sequence_ids)
        _last_packed_positions = (weakref.ref(position_ids), mask)
    return mask


def _packed_kwargs(kwargs):
    """(cu_seq_lens_q, cu_seq_lens_k, max_length_q, max_length_k) when the caller gave all four, else None."""
    names = ("cu_seq_lens_q", "cu_seq_lens_k", "max_length_q", "max_length_k")
    values = [kwargs.get(name) for name in names]
    if any(value is None for value in values):
        return None
    cu_q, cu_k, max_q, max_k = values
    max_q, max_k = (int(m.item()) if isinstance(m, torch.Tensor) else int(m) for m in (max_q, max_k))
    return cu_q.to(torch.int32), cu_k.to(torch.int32), max_q, max_k


def _packed_sdpa_mask(packed, batch, q_len, kv_len, causal, device):
    """The (batch, 1, q_len, kv_len) boolean SDPA mask of packed sequences that cu_seqlens delimit over the
    flattened (batch * len) rows: a query sees the keys of its own sequence (causal: aligned bottom-right); rows
    past the last sequence see none."""
    cu_q, cu_k = packed[0].long(), packed[1].long()
    rows_q = torch.arange(batch * q_len, device=device)
    rows_k = torch.arange(batch * kv_len, device=device)
    last = cu_q.numel() - 2
    seq_q = (torch.searchsorted(cu_q, rows_q, right=True) - 1).clamp(max=last)
    seq_k = (torch.searchsorted(cu_k, rows_k, right=True) - 1).clamp(max=last)
    mask = seq_q.view(batch, q_len, 1) == seq_k.view(batch, 1, kv_len)
    mask &= (rows_q < cu_q[-1]).view(batch, q_len, 1) & (rows_k < cu_k[-1]).view(batch, 1, kv_len)
    if causal:
        lengths_q, lengths_k = cu_q.diff(), cu_k.diff()
        last_visible = rows_q - cu_q[seq_q] + (lengths_k - lengths_q)[seq_q]
        mask &= (rows_k - cu_k[seq_k]).view(batch, 1, kv_len) <= last_visible.view(batch, q_len, 1)
    return mask.unsqueeze(1)


def _transformers_sdpa(module, query, key, value, attention_mask, dropout, scaling, is_causal, reason, kwargs):
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    warn_fallback_once(FALLBACK, reason)
    return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                  is_causal=is_causal, **kwargs)


def _serving_kernel(query, key, value, scaling):
    """(flashcute's op, None) where its kernels can serve these (b, h, s, d) inputs, else (None, why)."""
    reason = unserved_reason(query, key, value, enable_gqa=True, scale=scaling)
    return (None, reason) if reason is not None else _kernel()


def _packed_unserved_reason(query, key, value, dropout, scaling, kwargs):
    """Why flashcute's variable-length kernel cannot run a packed call (the mask is its own), or None."""
    return _fallback_reason(None, dropout, kwargs) or _serving_kernel(query, key, value, scaling)[1]


def _fallback_reason(attention_mask, dropout, kwargs):
    if attention_mask is not None:
        return "the model passed a mask flashcute does not express (a sliding window, chunked or custom mask)"
    if dropout > 0.0:
        return "attention dropout is on (training mode)"
    if kwargs.get("position_bias") is not None:
        return "the model passed a position bias"
    return None


def _skip_flash_attention_preload():
    """Stop transformers from trying to load "flashcute" as a FlashAttention package.

    transformers treats every implementation name containing "flash" as a FlashAttention flavour and, when a
    model is built, preloads it as one (`lazy_import_flash_attention`), which fails for a name that is not a
    flash-attn package or hub kernel. flashcute needs no preload, so the check skips exactly this name.
    """
    import transformers.modeling_utils as modeling_utils

    preload = getattr(modeling_utils, "lazy_import_flash_attention", None)
    if preload is None or getattr(preload, "skips_flashcute", False):
        return

    @functools.wraps(preload)
    def preload_unless_flashcute(implementation, *args, **kwargs):
        if isinstance(implementation, str) and implementation.split("|")[-1] == NAME:
            return None
        return preload(implementation, *args, **kwargs)

    preload_unless_flashcute.skips_flashcute = True
    modeling_utils.lazy_import_flash_attention = preload_unless_flashcute
