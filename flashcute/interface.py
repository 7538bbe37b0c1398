"""The Python API over torch.ops.flashcute.fwd / bwd, fwd_varlen / bwd_varlen and fwd_kvcache."""

import torch

from flashcute import _build, _ops  # _ops defines torch.ops.flashcute.*

BACKENDS = ("auto", "sm80", "sm90")


def load_extension():
    """Load flashcute's CUDA extension now (JIT-building it if needed) instead of at the first op call; returns
    what was loaded (path, AOT or JIT, build and load times). Raises FlashcuteUnavailable with the reason where
    the kernels cannot run (no CUDA build of torch, no GPU, no nvcc, no CUTLASS)."""
    return _build.load_library()


def flash_attn_func(q, k, v, softmax_scale=None, causal=False, return_lse=False, backend="auto", deterministic=False):
    """Attention softmax(q k^T * scale) v over (batch, seqlen, heads, head_dim) tensors, differentiable: a loss
    computed from it trains through `loss.backward()` (torch.ops.flashcute.bwd computes dq, dk and dv).

    q: (b, sq, hq, d); k, v: (b, sk, hkv, d) with hq % hkv == 0 (MQA/GQA); fp16 or bf16 CUDA tensors with
    the last dim contiguous (the other strides and the data pointer 16-byte aligned: multiples of 8 elements).
    softmax_scale defaults to 1/sqrt(d). causal masks key j for query i unless j <= i + sk - sq (aligned
    bottom-right). backend: "auto", "sm80" or "sm90", for the forward and the backward ("auto" takes the SM90
    kernels on Hopper where they are built and can run the inputs, but for a forward of at most 16 query rows,
    which runs on the split-KV decode kernel as "sm80" does; "sm90" raises an error naming the reason where its
    kernels cannot). deterministic=True makes the backward bitwise reproducible (the default
    may accumulate dq with atomics, in any order).
    Returns out (b, sq, hq, d), and with return_lse also lse (b, hq, sq) in float32 (differentiable too).
    """
    if backend not in BACKENDS:
        raise ValueError(f"flash_attn_func: backend must be one of {', '.join(map(repr, BACKENDS))}, got {backend!r}")
    out, lse = _ops.call_forward(torch.ops.flashcute.fwd, q, k, v, softmax_scale, causal, False, backend, deterministic)
    return (out, lse) if return_lse else out


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale=None,
                           causal=False, return_lse=False, backend="auto", seqused_k=None, deterministic=False):
    """flash_attn_func over a batch of sequences of different lengths, packed without padding: differentiable
    (torch.ops.flashcute.fwd_varlen and bwd_varlen).

    q: (total_q, hq, d); k, v: (total_k, hkv, d), hq % hkv == 0; fp16 or bf16 CUDA tensors with the last dim
    contiguous (any row and head strides that are multiples of 8 elements). cu_seqlens_q, cu_seqlens_k: int32 CUDA
    tensors (batch + 1,), starting at 0 and non-decreasing: sequence b is rows cu_seqlens_q[b]:cu_seqlens_q[b + 1] of
    q (and of k, v for cu_seqlens_k). max_seqlen_q, max_seqlen_k: Python ints, at least every sequence's length
    (they size the grid; nothing is read back from the GPU). seqused_k: optional int32 (batch,): sequence b uses
    only its first seqused_k[b] keys (the others get zero gradients). causal aligns each sequence's diagonal
    bottom-right. backend: "auto", "sm80" or "sm90", as for flash_attn_func.
    Values of cu_seqlens that break the rules above (decreasing, past the packed rows, longer than max_seqlen)
    are not detected: rows come out wrong, but nothing outside the given tensors is read or written.
    Returns out (total_q, hq, d), and with return_lse also lse (hq, total_q) in float32 (differentiable too).
    """
    if backend not in BACKENDS:
        raise ValueError(
            f"flash_attn_varlen_func: backend must be one of {', '.join(map(repr, BACKENDS))}, got {backend!r}"
        )
    out, lse = _ops.call_forward(torch.ops.flashcute.fwd_varlen, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                 max_seqlen_k, softmax_scale, causal, seqused_k, backend, deterministic)
    return (out, lse) if return_lse else out


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, cache_seqlens=None, block_table=None,
                            softmax_scale=None, causal=False, num_splits=0, return_lse=False, backend="auto",
                            cache_leftpad=None):
    """Attention of a few new queries per sequence against a KV cache, for decoding (torch.ops.flashcute.fwd_kvcache;
    inference only, no gradients).

    q: (b, sq, hq, d). k_cache, v_cache: (b, capacity, hkv, d), or paged (num_pages, page_size, hkv, d) with
    block_table, an int32 (b, max_blocks) tensor whose entry [i, p // page_size] is the page of sequence i's key p
    (any page size; capacity = max_blocks * page_size). cache_seqlens: int32 (b,), the keys already in each cache
    (None: the caches are full). k, v: optional (b, s_new, hkv, d) new keys and values, written into the caches in
    place at positions cache_seqlens[i] .. cache_seqlens[i] + s_new - 1 (those below the capacity) and attended to
    by this call (they need cache_seqlens). Sequence i attends to its first cache_seqlens[i] + s_new keys;
    cache_leftpad, an int32 (b,) tensor for contiguous caches (not with block_table), drops the first
    cache_leftpad[i] of them (a left-padded batch: its keys are cache_leftpad[i] .. cache_seqlens[i] + s_new - 1).
    causal aligns the diagonal bottom-right (query j sees key p iff p <= j + keys - sq, counting the keys it
    attends to). fp16 or bf16 CUDA tensors with the last dim contiguous; cache_seqlens, cache_leftpad and
    block_table on the same device.
    num_splits: 0 splits each sequence's keys over as many CTAs as fill the GPU; a positive value forces that
    count. backend: "auto" or "sm80" (the decode kernel is SM80 code and runs on Hopper too).
    Nothing is read back to the host, and every workspace is sized from the shapes: the call can be captured in a
    CUDA graph and replayed with other cache_seqlens. Values of cache_seqlens, cache_leftpad and block_table are not
    checked (that would need a host synchronisation): entries outside the caches are clamped into them, so wrong
    values give wrong rows but no access outside the given tensors.
    Returns out (b, sq, hq, d), and with return_lse also lse (b, hq, sq) in float32.
    """
    if backend not in BACKENDS:
        raise ValueError(
            f"flash_attn_with_kvcache: backend must be one of {', '.join(map(repr, BACKENDS))}, got {backend!r}"
        )
    out, lse = torch.ops.flashcute.fwd_kvcache(q, k_cache, v_cache, k, v, cache_seqlens, block_table, softmax_scale,
                                               causal, num_splits, backend, cache_leftpad)
    return (out, lse) if return_lse else out
