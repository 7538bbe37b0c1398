"""CPU checks of the test references: the tiled FlashAttention walk agrees with plain softmax attention, and
plain attention agrees with torch's own SDPA and with cases whose answer is known by hand; its gradients agree
with torch SDPA's and, through the LSE, with the closed form."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from reference import attention_grads_ref, attention_ref, attention_tiled, visible_keys


def random_qkv(batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, seed=0, dtype=torch.float64):
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, seqlen_q, heads_q, head_dim, generator=generator, dtype=dtype)
    k = torch.randn(batch, seqlen_k, heads_kv, head_dim, generator=generator, dtype=dtype)
    v = torch.randn(batch, seqlen_k, heads_kv, head_dim, generator=generator, dtype=dtype)
    return q, k, v


def assert_same_attention(actual, expected, tol=1e-10):
    out, lse = actual
    out_ref, lse_ref = expected
    torch.testing.assert_close(out, out_ref, rtol=0, atol=tol)
    assert torch.equal(torch.isinf(lse), torch.isinf(lse_ref))
    finite = torch.isfinite(lse_ref)
    torch.testing.assert_close(lse[finite], lse_ref[finite], rtol=0, atol=tol)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("top_left", [False, True])
@pytest.mark.parametrize(
    "seqlen_q, seqlen_k",
    [(1, 1), (1, 239), (17, 17), (113, 203), (128, 128), (100, 37), (239, 1), (65, 64), (64, 65)],
)
def test_tiled_matches_plain(seqlen_q, seqlen_k, causal, top_left):
    q, k, v = random_qkv(2, seqlen_q, seqlen_k, 4, 4, 32, seed=seqlen_q * 1000 + seqlen_k)
    expected = attention_ref(q, k, v, causal=causal, top_left=top_left)
    actual = attention_tiled(q, k, v, causal=causal, top_left=top_left, block_m=32, block_n=16)
    assert_same_attention(actual, expected)


@pytest.mark.parametrize("heads_q, heads_kv", [(6, 2), (8, 1), (3, 3)])
def test_tiled_matches_plain_gqa(heads_q, heads_kv):
    q, k, v = random_qkv(2, 50, 70, heads_q, heads_kv, 16, seed=heads_q)
    for causal in (False, True):
        expected = attention_ref(q, k, v, softmax_scale=0.3, causal=causal)
        actual = attention_tiled(q, k, v, softmax_scale=0.3, causal=causal, block_m=16, block_n=32)
        assert_same_attention(actual, expected)


@settings(max_examples=40, deadline=None)
@given(
    seqlen_q=st.integers(1, 90),
    seqlen_k=st.integers(1, 90),
    block_m=st.sampled_from([1, 7, 16, 64]),
    block_n=st.sampled_from([1, 5, 16, 64]),
    causal=st.booleans(),
    top_left=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_tiled_matches_plain_any_tiling(seqlen_q, seqlen_k, block_m, block_n, causal, top_left, seed):
    q, k, v = random_qkv(1, seqlen_q, seqlen_k, 2, 1, 8, seed=seed)
    expected = attention_ref(q, k, v, causal=causal, top_left=top_left)
    actual = attention_tiled(q, k, v, causal=causal, top_left=top_left, block_m=block_m, block_n=block_n)
    assert_same_attention(actual, expected)


def test_fully_masked_rows_give_zero_and_minus_inf():
    # Bottom-right causal with sq > sk: query i sees keys j <= i - (sq - sk), so the first sq - sk rows see none.
    q, k, v = random_qkv(1, 10, 4, 2, 2, 8)
    for out, lse in (attention_ref(q, k, v, causal=True), attention_tiled(q, k, v, causal=True, block_m=4, block_n=2)):
        assert torch.all(out[:, :6] == 0)
        assert torch.all(lse[:, :, :6] == -math.inf)
        assert torch.all(torch.isfinite(lse[:, :, 6:]))
        assert not torch.isnan(out).any()


def test_empty_keys():
    q, k, v = random_qkv(1, 5, 0, 2, 2, 8)
    for out, lse in (attention_ref(q, k, v), attention_tiled(q, k, v)):
        assert out.shape == q.shape and torch.all(out == 0)
        assert torch.all(lse == -math.inf)


def test_causal_masks():
    bottom_right = visible_keys(2, 4, causal=True)
    top_left = visible_keys(2, 4, causal=True, top_left=True)
    assert bottom_right.tolist() == [[True, True, True, False], [True, True, True, True]]
    assert top_left.tolist() == [[True, False, False, False], [True, True, False, False]]


def test_single_key_returns_its_value():
    q, k, v = random_qkv(2, 7, 1, 3, 3, 16)
    out, lse = attention_ref(q, k, v)
    torch.testing.assert_close(out, v.expand_as(out), rtol=0, atol=1e-12)
    scores = torch.einsum("bqhd,bkhd->bhq", q, k) / 4.0
    torch.testing.assert_close(lse, scores, rtol=0, atol=1e-12)


@pytest.mark.filterwarnings("ignore:Lower right causal bias will produce NaNs")  # rows we leave out below
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("top_left", [False, True])
@pytest.mark.parametrize("seqlen_q, seqlen_k", [(17, 17), (13, 29), (29, 13)])
def test_plain_matches_torch_sdpa(seqlen_q, seqlen_k, causal, top_left):
    from torch.nn.attention.bias import causal_lower_right

    q, k, v = random_qkv(2, seqlen_q, seqlen_k, 6, 2, 16, seed=7)
    out, _ = attention_ref(q, k, v, causal=causal, top_left=top_left)
    query, key, value = (t.transpose(1, 2) for t in (q, k, v))
    key, value = key.repeat_interleave(3, dim=1), value.repeat_interleave(3, dim=1)
    if causal and not top_left:
        mask = causal_lower_right(seqlen_q, seqlen_k)
        expected = torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=mask)
    else:
        expected = torch.nn.functional.scaled_dot_product_attention(query, key, value, is_causal=causal)
    visible_rows = visible_keys(seqlen_q, seqlen_k, causal, top_left).any(dim=1)
    torch.testing.assert_close(out[:, visible_rows], expected.transpose(1, 2)[:, visible_rows], rtol=0, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_reference_is_close_but_not_exact(dtype):
    q, k, v = random_qkv(1, 64, 64, 2, 2, 32, seed=3, dtype=torch.float32)
    q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
    exact, exact_lse = attention_ref(q, k, v)
    low, low_lse = attention_ref(q, k, v, upcast=False)
    assert low.dtype == dtype and low_lse.dtype == torch.float32
    error = (low.double() - exact).abs().max().item()
    assert 0 < error < 0.05
    assert (low_lse.double() - exact_lse).abs().max().item() < 0.05


@pytest.mark.parametrize("causal, top_left", [(False, False), (True, False), (True, True)])
@pytest.mark.parametrize("seqlen_q, seqlen_k", [(1, 1), (16, 16), (13, 29), (29, 13)])
def test_gradients_match_torch_sdpa(seqlen_q, seqlen_k, causal, top_left):
    """attention_grads_ref against torch SDPA's backward (GQA; the causal mask as attn_mask). Rows that see no key
    get dq = 0 and are left out of torch's call, whose softmax over no key is NaN; they give dk and dv nothing."""
    q, k, v = random_qkv(2, seqlen_q, seqlen_k, 6, 2, 16, seed=seqlen_q * 100 + seqlen_k)
    dout = torch.randn_like(q)
    dq, dk, dv = attention_grads_ref(q, k, v, dout, 0.3, causal, top_left)
    mask = visible_keys(seqlen_q, seqlen_k, causal, top_left)
    rows = mask.any(dim=1)
    assert torch.all(dq[:, ~rows] == 0)
    leaves = [t.transpose(1, 2).clone().requires_grad_() for t in (q[:, rows], k, v)]
    out = torch.nn.functional.scaled_dot_product_attention(*leaves, attn_mask=mask[rows], scale=0.3, enable_gqa=True)
    expected = [g.transpose(1, 2) for g in torch.autograd.grad(out, leaves, dout[:, rows].transpose(1, 2))]
    torch.testing.assert_close((dq[:, rows], dk, dv), tuple(expected), rtol=0, atol=1e-12)


@pytest.mark.parametrize("causal", [False, True])
def test_lse_gradients_match_the_closed_form(causal):
    """d lse_i / d q_i = scale * sum_j P_ij k_j and d lse_i / d k_j = scale * sum_i P_ij q_i (summed over the
    query heads of a key head); v gets nothing. Bottom-right causal, sq > sk: the first rows see no key."""
    q, k, v = random_qkv(2, 11, 7, 4, 2, 8, seed=5)
    dlse = torch.randn(2, 4, 11, dtype=torch.float64)
    dq, dk, dv = attention_grads_ref(q, k, v, torch.zeros_like(q), 0.3, causal, dlse=dlse)
    k_heads = k.repeat_interleave(2, dim=2)
    scores = (torch.einsum("bqhd,bkhd->bhqk", q, k_heads) * 0.3).masked_fill(~visible_keys(11, 7, causal), -math.inf)
    probs = torch.nan_to_num(torch.softmax(scores, dim=-1)) * dlse[..., None]  # rows without keys: 0
    torch.testing.assert_close(dq, 0.3 * torch.einsum("bhqk,bkhd->bqhd", probs, k_heads), rtol=0, atol=1e-12)
    dk_heads = 0.3 * torch.einsum("bhqk,bqhd->bkhd", probs, q)
    torch.testing.assert_close(dk, dk_heads.view(2, 7, 2, 2, 8).sum(dim=3), rtol=0, atol=1e-12)
    assert torch.all(dv == 0)
