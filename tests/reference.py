"""Reference attention for the tests: a plain softmax attention (float64, or the input's low precision as
PyTorch computes it), its gradients by autograd, and a pure-PyTorch tiled FlashAttention-2 forward that walks
the same blocks the kernels walk.

Tensors are (batch, seqlen, heads, head_dim) like the op; lse is (batch, heads_q, seqlen_q).
Causal: key j is visible to query i iff j <= i + offset, offset = sk - sq (bottom-right, FlashAttention) or
0 (top-left, torch SDPA). Rows that see no key give out = 0 and lse = -inf.
"""

import math

import torch


def causal_offset(seqlen_q, seqlen_k, top_left=False):
    return 0 if top_left else seqlen_k - seqlen_q


def visible_keys(seqlen_q, seqlen_k, causal, top_left=False, device=None):
    """Boolean (sq, sk) mask of the keys each query may attend to."""
    rows = torch.arange(seqlen_q, device=device)[:, None]
    cols = torch.arange(seqlen_k, device=device)[None, :]
    if not causal:
        return torch.ones(seqlen_q, seqlen_k, dtype=torch.bool, device=device)
    return cols <= rows + causal_offset(seqlen_q, seqlen_k, top_left)


def _expand_kv_heads(k, v, heads_q):
    group = heads_q // k.shape[2]
    return k.repeat_interleave(group, dim=2), v.repeat_interleave(group, dim=2)


def attention_ref(q, k, v, softmax_scale=None, causal=False, top_left=False, upcast=True):
    """Softmax attention computed in one piece.

    upcast=True: everything in float64 (the ground truth). upcast=False: PyTorch attention in the inputs'
    precision (scores and P.V products rounded to q.dtype, softmax in float32), the yardstick for what
    error a low-precision attention may have. Returns (out, lse): out in float64 or q.dtype, lse in
    float64 or float32.
    """
    heads_q, head_dim = q.shape[2], q.shape[3]
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(head_dim)
    if upcast:
        q, k, v = q.double(), k.double(), v.double()
    k, v = _expand_kv_heads(k, v, heads_q)
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) * scale
    scores = scores.to(torch.float64 if upcast else torch.float32)
    mask = visible_keys(q.shape[1], k.shape[1], causal, top_left, device=q.device)
    scores = scores.masked_fill(~mask, -math.inf)
    lse = torch.logsumexp(scores, dim=-1)
    finite_lse = torch.where(torch.isinf(lse), torch.zeros_like(lse), lse)
    probs = torch.exp(scores - finite_lse[..., None]).masked_fill(~mask, 0.0)
    out = torch.einsum("bhqk,bkhd->bqhd", probs.to(v.dtype), v)
    return out, lse


def varlen_attention_ref(q, k, v, cu_seqlens_q, cu_seqlens_k, softmax_scale=None, causal=False, upcast=True):
    """attention_ref on each sequence of packed (total, h, d) q, k, v alone (sequence b is rows cu_seqlens[b] to
    cu_seqlens[b + 1]), bottom-right causal per sequence; the outputs packed again, (total_q, h, d)."""
    rows = zip(cu_seqlens_q.tolist(), cu_seqlens_q[1:].tolist(), cu_seqlens_k.tolist(), cu_seqlens_k[1:].tolist())
    return torch.cat([attention_ref(q[None, a:b], k[None, c:e], v[None, c:e], softmax_scale, causal,
                                    upcast=upcast)[0][0] for a, b, c, e in rows])


def attention_grads_ref(q, k, v, dout, softmax_scale=None, causal=False, top_left=False, upcast=True, dlse=None):
    """(dq, dk, dv): autograd through attention_ref of sum(out * dout), plus sum(lse * dlse) over the rows that
    see a key when dlse is given. upcast=True: in float64 from float64 copies of the inputs (the ground truth);
    upcast=False: PyTorch's own backward of the low-precision attention_ref, gradients in the inputs' dtype.
    """
    leaves = [t.detach().double() if upcast else t.detach() for t in (q, k, v)]
    leaves = [t.requires_grad_() for t in leaves]
    with torch.enable_grad():
        out, lse = attention_ref(*leaves, softmax_scale, causal, top_left, upcast)
        loss = (out * dout.to(out.dtype)).sum()
        if dlse is not None:
            loss = loss + (lse.masked_fill(torch.isinf(lse), 0.0) * dlse.to(lse.dtype)).sum()
        return torch.autograd.grad(loss, leaves)


def attention_tiled(q, k, v, softmax_scale=None, causal=False, top_left=False, block_m=64, block_n=64):
    """FlashAttention-2's forward in float64: for each block of block_m queries, walk the key/value blocks
    it can see (block_n keys at a time), keeping the running row max and row sum (online softmax) and
    rescaling the output accumulator; normalise at the end. Ragged last blocks are partial slices."""
    batch, seqlen_q, heads_q, head_dim = q.shape
    seqlen_k = k.shape[1]
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(head_dim)
    offset = causal_offset(seqlen_q, seqlen_k, top_left)
    q, k, v = q.double(), k.double(), v.double()
    k, v = _expand_kv_heads(k, v, heads_q)
    out = torch.zeros(batch, seqlen_q, heads_q, head_dim, dtype=torch.float64, device=q.device)
    lse = torch.full((batch, heads_q, seqlen_q), -math.inf, dtype=torch.float64, device=q.device)

    for m_start in range(0, seqlen_q, block_m):
        m_end = min(m_start + block_m, seqlen_q)
        q_block = q[:, m_start:m_end].transpose(1, 2)  # (b, h, m, d)
        row_max = torch.full((batch, heads_q, m_end - m_start), -math.inf, dtype=torch.float64, device=q.device)
        row_sum = torch.zeros_like(row_max)
        acc = torch.zeros(batch, heads_q, m_end - m_start, head_dim, dtype=torch.float64, device=q.device)
        # Causal: the block's last query sees keys up to (m_end - 1) + offset; later key blocks are skipped.
        n_end = seqlen_k if not causal else max(0, min(seqlen_k, m_end + offset))
        for n_start in range(0, n_end, block_n):
            n_stop = min(n_start + block_n, seqlen_k)
            k_block = k[:, n_start:n_stop].permute(0, 2, 3, 1)  # (b, h, d, n)
            scores = (q_block @ k_block) * scale  # (b, h, m, n)
            if causal:
                rows = torch.arange(m_start, m_end, device=q.device)[:, None]
                cols = torch.arange(n_start, n_stop, device=q.device)[None, :]
                scores = scores.masked_fill(cols > rows + offset, -math.inf)
            new_max = torch.maximum(row_max, scores.amax(dim=-1))
            # A row that has seen no key yet keeps max -inf; exponentiate against 0 so it stays all-zero.
            safe_max = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
            probs = torch.exp(scores - safe_max[..., None])
            rescale = torch.exp(row_max - safe_max)
            row_sum = row_sum * rescale + probs.sum(dim=-1)
            acc = acc * rescale[..., None] + probs @ v[:, n_start:n_stop].transpose(1, 2)
            row_max = new_max
        seen = row_sum > 0  # rows that saw no key keep acc = 0 and get lse = -inf
        safe_sum = torch.where(seen, row_sum, 1.0)
        out[:, m_start:m_end] = (acc / safe_sum[..., None]).transpose(1, 2)
        lse[:, :, m_start:m_end] = torch.where(seen, row_max + torch.log(safe_sum), -math.inf)
    return out, lse
