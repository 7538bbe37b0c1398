"""flashcute as a transformers attention implementation.

    from flashcute.integrations.transformers import register
    register()
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="flashcute")

transformers stays optional: it is imported by `register()`, not by this module.

Masks follow transformers' SDPA conventions (the "flashcute" mask function is SDPA's): the model hands the
attention function no mask exactly when torch SDPA's `is_causal` (top-left) or no masking at all is exact —
prefill without padding, and one-token decoding, where the query sees every cached key. Those calls run on
flashcute's kernel, and so do training calls (the backward runs flashcute's too) unless the model has attention
dropout on; a call with a mask (padding, a sliding window that bites, a static cache's unfilled slots),
dropout or a position bias runs transformers' own SDPA attention, with a one-time warning.
"""

import functools

from flashcute.sdpa import sdpa, warn_fallback_once

NAME = "flashcute"


def register():
    """Register flashcute with transformers' attention and mask interfaces under the name "flashcute"."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(NAME, flashcute_attention_forward)
    AttentionMaskInterface.register(NAME, sdpa_mask)
    _skip_flash_attention_preload()
    return NAME


def flashcute_attention_forward(
    module, query, key, value, attention_mask, dropout=0.0, scaling=None, is_causal=None, **kwargs
):
    """transformers' attention-function contract: (b, h, s, d) inputs, returns ((b, s, h, d) output, None)."""
    for unsupported in ("softcap", "s_aux"):
        if kwargs.get(unsupported) is not None:
            raise NotImplementedError(
                f"attn_implementation='flashcute' does not support `{unsupported}`; use 'eager' for this model"
            )
    reason = _fallback_reason(attention_mask, dropout, kwargs)
    if reason is not None:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        warn_fallback_once("attn_implementation='flashcute' runs transformers' SDPA attention", reason)
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, is_causal=is_causal,
            **kwargs,
        )

    q_len, kv_len = query.shape[2], key.shape[2]
    if is_causal is None:
        is_causal = getattr(module, "is_causal", True)
    # One query against a cache sees every key (bottom-right); torch's top-left is_causal would show it one.
    # The shape test comes first and is made a bool so torch.compile never passes a SymBool to the op.
    is_causal = bool(q_len > 1) and bool(is_causal)
    if is_causal and kv_len > q_len:
        # Prefill into an empty static cache: keys past the prompt are invisible under top-left causal
        # masking, so slicing them off (a view) only saves their work.
        key, value = key[:, :, :q_len], value[:, :, :q_len]
    out = sdpa(query, key, value, is_causal=is_causal, scale=scaling, enable_gqa=query.shape[1] != key.shape[1])
    return out.transpose(1, 2), None


def _fallback_reason(attention_mask, dropout, kwargs):
    if attention_mask is not None:
        return "the model passed an attention mask (padding, a sliding window or a static cache)"
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
