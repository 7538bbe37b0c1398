"""The Python API over torch.ops.flashcute.fwd."""

import importlib

import torch

BACKENDS = ("auto", "sm80", "sm90")

_ops = None


def load_extension():
    """Load flashcute's CUDA extension (JIT-building it on first use), so that torch.ops.flashcute.fwd
    exists; returns what was loaded (path, AOT or JIT, build and load times). Raises FlashcuteUnavailable
    with the reason where the kernels cannot run (no CUDA build of torch, no GPU, no nvcc, no CUTLASS)."""
    global _ops
    if _ops is None:
        _ops = importlib.import_module("flashcute._ops")
    return _ops.library


def flash_attn_func(q, k, v, softmax_scale=None, causal=False, return_lse=False, backend="auto"):
    """Attention softmax(q k^T * scale) v over (batch, seqlen, heads, head_dim) tensors.

    q: (b, sq, hq, d); k, v: (b, sk, hkv, d) with hq % hkv == 0 (MQA/GQA); fp16 or bf16 CUDA tensors with
    the last dim contiguous. softmax_scale defaults to 1/sqrt(d). causal masks key j for query i unless
    j <= i + sk - sq (aligned bottom-right). backend: "auto", "sm80" or "sm90".
    Returns out (b, sq, hq, d), and with return_lse also lse (b, hq, sq) in float32.
    """
    if backend not in BACKENDS:
        raise ValueError(f"flash_attn_func: backend must be one of {', '.join(map(repr, BACKENDS))}, got {backend!r}")
    if _ops is None:
        load_extension()
    out, lse = torch.ops.flashcute.fwd(q, k, v, softmax_scale, causal, False, backend)
    return (out, lse) if return_lse else out
