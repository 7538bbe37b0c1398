"""attn_implementation="flashcute" in a transformers Llama-style model, against the same weights on "sdpa".

CPU: registration; which masks the mask function hands the kernels (padding, packed position_ids, the filled
part of a static cache) and which go to SDPA (sliding windows); the fallbacks (CPU tensors) giving exactly
SDPA's tokens, padded and packed batches included; and the plumbing of padded, packed and static-cache calls
(rows gathered, lengths, scatter back, bottom-right alignment) with float32 reference kernels standing in for
flashcute's, against SDPA and against each sequence run alone. GPU (bf16): prefill logits within bf16
tolerance of torch SDPA, every greedy and cached decoding step on flashcute's kernels with no fallback (no
mask, a left-padded batch, a static cache), and training: a few AdamW steps on flashcute (forward and
backward) agree with the same steps on torch SDPA, on a padded batch and padding-free (packed) too.
"""

import contextlib
import copy
import importlib
import itertools
import re
import warnings

import pytest
import torch

transformers = pytest.importorskip("transformers")

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
from flashcute.integrations import transformers as integration  # noqa: E402
from flashcute.integrations.transformers import (  # noqa: E402
    NAME, VarlenMask, flashcute_attention_forward, flashcute_mask, register,
)
from reference import attention_ref, varlen_attention_ref  # noqa: E402

sdpa_module = importlib.import_module("flashcute.sdpa")
FALLBACK_MESSAGES = r"flashcute\.sdpa falls back|attn_implementation='flashcute' runs"

PROMPT_LEN, NEW_TOKENS, VOCAB = 16, 32, 1024
# Logits of this model are O(1); bf16 resolves them to 2^-8. Two attention kernels that round differently
# may move a logit by a few of those steps, no more.
LOGITS_ATOL = 0.03


def tiny_llama_config():
    return transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=64, max_position_embeddings=512,
    )


def model_pair(device, dtype):
    """(torch SDPA model, flashcute model) with the same random weights."""
    register()
    config = tiny_llama_config()
    torch.manual_seed(0)
    reference = transformers.AutoModelForCausalLM.from_config(copy.deepcopy(config), attn_implementation="sdpa")
    flash = transformers.AutoModelForCausalLM.from_config(copy.deepcopy(config), attn_implementation=NAME)
    flash.load_state_dict(reference.state_dict())
    return reference.to(device, dtype).eval(), flash.to(device, dtype).eval()


def prompt(device, batch=2):
    return torch.randint(0, VOCAB, (batch, PROMPT_LEN), generator=torch.Generator().manual_seed(1)).to(device)


def greedy(model, input_ids, **kwargs):
    out = model.generate(
        input_ids, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False, pad_token_id=0,
        return_dict_in_generate=True, output_logits=True, **kwargs,
    )
    return out.sequences[:, input_ids.shape[1]:], torch.stack(out.logits, dim=1).float()


@pytest.fixture(autouse=True)
def fresh_warnings():
    sdpa_module._warned.clear()
    yield
    sdpa_module._warned.clear()


@contextlib.contextmanager
def served_by_flashcute(monkeypatch):
    """Fail on any fallback: no fallback warning, and torch's SDPA is never called."""

    def torch_sdpa_called(*_, **__):
        raise AssertionError("attention fell back to torch SDPA")

    with monkeypatch.context() as patch, warnings.catch_warnings():
        warnings.filterwarnings("error", message=FALLBACK_MESSAGES)
        patch.setattr(torch.nn.functional, "scaled_dot_product_attention", torch_sdpa_called)
        yield


def fallback_warnings(caught):
    return [str(w.message) for w in caught if str(w.message).startswith(("flashcute.sdpa", "attn_implementation"))]


# ---------------------------------------------------------------- CPU: registration and fallbacks


def test_register_makes_the_name_valid():
    assert register() == NAME
    register()  # idempotent
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    assert ALL_ATTENTION_FUNCTIONS[NAME] is flashcute_attention_forward
    assert ALL_MASK_ATTENTION_FUNCTIONS[NAME] is flashcute_mask
    _, flash = model_pair("cpu", torch.float32)
    assert flash.config._attn_implementation == NAME


def test_cpu_model_falls_back_to_exactly_sdpa():
    reference, flash = model_pair("cpu", torch.float32)
    ids = prompt("cpu")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tokens, logits = greedy(flash, ids)
    expected_tokens, expected_logits = greedy(reference, ids)
    assert torch.equal(tokens, expected_tokens) and torch.equal(logits, expected_logits)
    # Through flashcute.sdpa, or (where generate() passes its all-ones mask, transformers before 5.2x) through the
    # integration's own fallback: the reason is the dtype either way.
    warned = fallback_warnings(caught)
    assert warned and all(w.endswith(": dtype torch.float32 (flashcute serves float16 and bfloat16)") for w in warned)


def left_padded(ids, pads=(0, 5)):
    mask = torch.ones_like(ids)
    for row, pad in enumerate(pads):
        mask[row, :pad] = 0
    return mask


def test_padding_mask_falls_back_to_exactly_sdpa():
    reference, flash = model_pair("cpu", torch.float32)
    ids = prompt("cpu")
    mask = left_padded(ids)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tokens, logits = greedy(flash, ids, attention_mask=mask)
    expected_tokens, expected_logits = greedy(reference, ids, attention_mask=mask)
    assert torch.equal(tokens, expected_tokens) and torch.equal(logits, expected_logits)
    assert fallback_warnings(caught) == ["attn_implementation='flashcute' runs transformers' SDPA attention: dtype "
                                         "torch.float32 (flashcute serves float16 and bfloat16)"]


# Three sequences packed into one row: position_ids restart at each.
PACKED_LENGTHS = (5, 7, 4)


def packed_batch(device):
    ids = torch.randint(0, VOCAB, (1, sum(PACKED_LENGTHS)), generator=torch.Generator().manual_seed(3)).to(device)
    positions = torch.cat([torch.arange(n) for n in PACKED_LENGTHS]).unsqueeze(0).to(device)
    cu = torch.tensor([0, *itertools.accumulate(PACKED_LENGTHS)], dtype=torch.int32, device=device)
    return ids, positions, cu


def test_packed_sequences_fall_back_to_exactly_sdpa():
    reference, flash = model_pair("cpu", torch.float32)
    ids, positions, _ = packed_batch("cpu")
    with torch.no_grad():
        logits = flash(ids, position_ids=positions, use_cache=False).logits
        assert torch.equal(logits, reference(ids, position_ids=positions, use_cache=False).logits)


@pytest.mark.parametrize("given", ["position_ids", "cu_seq_lens"])
def test_packed_sequences_fall_back_with_their_sequences(given):
    """Packed sequences that only the attention function sees (a cache is in use, so transformers' mask is plain
    causal): on the CPU they fall back to SDPA with a mask of their own, giving each sequence's logits alone."""
    reference, flash = model_pair("cpu", torch.float32)
    ids, positions, cu = packed_batch("cpu")
    kwargs = dict(position_ids=positions)
    if given == "cu_seq_lens":
        kwargs.update(cu_seq_lens_q=cu, cu_seq_lens_k=cu, max_length_q=max(PACKED_LENGTHS),
                      max_length_k=max(PACKED_LENGTHS))
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        logits = flash(ids, **kwargs).logits
        alone = torch.cat([reference(ids[:, start:end]).logits for start, end in zip(cu[:-1], cu[1:])], dim=1)
    assert (logits - alone).abs().max().item() <= PLUMBING_ATOL
    assert fallback_warnings(caught) == ["attn_implementation='flashcute' runs transformers' SDPA attention: dtype "
                                         "torch.float32 (flashcute serves float16 and bfloat16)"]


def mask_of(config, batch=2, q_length=6, attention_mask=None, position_ids=None, cache=None):
    from transformers.masking_utils import create_causal_mask, create_sliding_window_causal_mask

    register()
    config._attn_implementation = NAME
    create = create_sliding_window_causal_mask if getattr(config, "sliding_window", None) else create_causal_mask
    # Positional: the cache argument is `past_key_values` in transformers 5.17, `cache` in 5.2x.
    return create(config, torch.zeros(batch, q_length, config.hidden_size), attention_mask, cache, position_ids)


def test_masks_the_kernels_express():
    """Padding and packed position_ids become VarlenMasks with the right rows and lengths (this also checks that
    the installed transformers builds its packed-sequence mask as flashcute recognises it); plain causal stays
    None; a sliding window that bites stays transformers' 4D SDPA mask."""
    config = tiny_llama_config()
    assert mask_of(config) is None

    mask = mask_of(config, attention_mask=torch.tensor([[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 0]]))
    assert isinstance(mask, VarlenMask) and mask.causal and mask.keys == 6
    query_rows, key_rows, cu_q, cu_k, max_q, max_k = mask.varlen()
    assert [r.tolist() for r in key_rows] == [[0, 0, 0, 0, 1, 1, 1, 1, 1], [2, 3, 4, 5, 0, 1, 2, 3, 4]]
    assert cu_k.tolist() == [0, 4, 9] and max_k == 5 and cu_k.dtype == torch.int32
    assert query_rows is key_rows and cu_q is cu_k and max_q == max_k

    mask = mask_of(config, batch=1, position_ids=torch.tensor([[0, 1, 2, 0, 1, 0]]))
    assert isinstance(mask, VarlenMask) and mask.sequence_ids is not None
    assert mask.varlen()[:2] == (None, None)
    assert [t.tolist() for t in mask.varlen()[2:4]] == [[0, 3, 5, 6]] * 2 and mask.varlen()[4:] == (3, 3)

    assert mask_of(config, attention_mask=torch.ones(2, 6, dtype=torch.long)).varlen() is None  # no padding

    config.sliding_window = 3
    sliding = mask_of(config)
    assert isinstance(sliding, torch.Tensor) and sliding.shape == (2, 1, 6, 6)


def test_a_decoding_mask_takes_the_query_rows_last():
    """One query per row after a left-padded cache: the query rows are the mask's last column."""
    mask = flashcute_mask(batch_size=2, q_length=1, kv_length=5, q_offset=4,
                          attention_mask=torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]], dtype=torch.bool))
    query_rows, key_rows, cu_q, cu_k, max_q, max_k = mask.varlen()
    assert [r.tolist() for r in query_rows] == [[0, 1], [0, 0]] and cu_q.tolist() == [0, 1, 2] and max_q == 1
    assert cu_k.tolist() == [0, 3, 8] and max_k == 5


# ---------------------------------------------------------------- CPU: the plumbing, with reference kernels


def reference_flash_attn_func(q, k, v, softmax_scale=None, causal=False, deterministic=False):
    return attention_ref(q, k, v, softmax_scale, causal, upcast=False)[0]


def reference_flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                     softmax_scale=None, causal=False, deterministic=False):
    """Each sequence alone through the reference; checks the lengths against max_seqlen as the kernel needs."""
    assert cu_seqlens_q.diff().max() <= max_seqlen_q and cu_seqlens_k.diff().max() <= max_seqlen_k
    assert cu_seqlens_q[-1] == q.shape[0] and cu_seqlens_k[-1] == k.shape[0]
    return varlen_attention_ref(q, k, v, cu_seqlens_q, cu_seqlens_k, softmax_scale, causal, upcast=False)


def reference_flash_attn_with_kvcache(q, k_cache, v_cache, softmax_scale=None, causal=False, cache_leftpad=None):
    """Each row alone through the reference over its keys from cache_leftpad on (the integration passes full
    caches, nothing to append)."""
    return torch.cat([attention_ref(q[b:b + 1], k_cache[b:b + 1, pad:], v_cache[b:b + 1, pad:], softmax_scale,
                                    causal, upcast=False)[0] for b, pad in enumerate(cache_leftpad.tolist())])


@pytest.fixture
def reference_kernels(monkeypatch):
    """flashcute's kernels replaced by float32 references on the CPU: counts the calls of each; fails on any
    fallback to SDPA."""
    calls = {"fixed": 0, "varlen": 0, "kvcache": 0}

    def counted(name, function):
        def call(*args, **kwargs):
            calls[name] += 1
            return function(*args, **kwargs)
        return call

    monkeypatch.setattr(integration, "unserved_reason", lambda *args, **kwargs: None)
    monkeypatch.setattr(integration, "_kernel", lambda: (None, None))
    monkeypatch.setattr(integration.interface, "flash_attn_func", counted("fixed", reference_flash_attn_func))
    monkeypatch.setattr(integration.interface, "flash_attn_varlen_func",
                        counted("varlen", reference_flash_attn_varlen_func))
    monkeypatch.setattr(integration.interface, "flash_attn_with_kvcache",
                        counted("kvcache", reference_flash_attn_with_kvcache))
    monkeypatch.setattr(integration, "_decode_kernel_built", lambda dtype, head_dim: True)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=FALLBACK_MESSAGES)
        yield calls


PLUMBING_ATOL = 1e-4  # float32 logits of two attention orders


@pytest.mark.parametrize("pads", [(0, 5), (3, 0), "right"])
def test_padded_prefill_plumbing(reference_kernels, pads):
    """Left and right padding: logits at the valid positions as SDPA's; the padding rows never reach a kernel."""
    reference, flash = model_pair("cpu", torch.float32)
    ids = prompt("cpu")
    mask = torch.tensor([[1] * 12 + [0] * 4, [1] * 16]) if pads == "right" else left_padded(ids, pads)
    with torch.no_grad():
        logits = flash(ids, attention_mask=mask).logits
        expected = reference(ids, attention_mask=mask).logits
    valid = mask.bool()
    assert (logits[valid] - expected[valid]).abs().max().item() <= PLUMBING_ATOL
    assert reference_kernels["varlen"] == flash.config.num_hidden_layers


def test_padded_greedy_decoding_plumbing(reference_kernels):
    """generate() on a left-padded batch: prefill runs varlen and every cached step the decode kernel, each row's
    keys from its first valid one on (cache_leftpad); tokens as SDPA's."""
    reference, flash = model_pair("cpu", torch.float32)
    ids = prompt("cpu")
    mask = left_padded(ids)
    tokens, logits = greedy(flash, ids, attention_mask=mask)
    expected_tokens, expected_logits = greedy(reference, ids, attention_mask=mask)
    assert torch.equal(tokens, expected_tokens)
    assert (logits - expected_logits).abs().max().item() <= PLUMBING_ATOL
    assert reference_kernels["varlen"] == flash.config.num_hidden_layers
    assert reference_kernels["kvcache"] == (NEW_TOKENS - 1) * flash.config.num_hidden_layers


def test_static_cache_decoding_plumbing(reference_kernels):
    """generate() with a static cache keeps the all-ones mask: every step runs the fixed-length kernel on the
    filled keys (bottom-right), tokens as SDPA's."""
    reference, flash = model_pair("cpu", torch.float32)
    ids = prompt("cpu")
    kwargs = dict(attention_mask=torch.ones_like(ids), cache_implementation="static", disable_compile=True)
    tokens, logits = greedy(flash, ids, **kwargs)
    expected_tokens, expected_logits = greedy(reference, ids, **kwargs)
    assert torch.equal(tokens, expected_tokens)
    assert (logits - expected_logits).abs().max().item() <= PLUMBING_ATOL
    assert reference_kernels["fixed"] == NEW_TOKENS * flash.config.num_hidden_layers


@pytest.mark.parametrize("given", ["position_ids", "position_ids, no cache", "cu_seq_lens"])
def test_packed_sequences_plumbing(reference_kernels, given):
    """Packed sequences (position_ids that restart, found by transformers' mask where no cache is in use and by
    flashcute otherwise, or the cu_seq_lens kwargs of DataCollatorWithFlattening) give each sequence's logits as if
    it ran alone, and gradients as SDPA's on the packed batch without a cache (where transformers finds them)."""
    reference, flash = model_pair("cpu", torch.float32)
    ids, positions, cu = packed_batch("cpu")
    kwargs = dict(position_ids=positions)
    if given == "position_ids, no cache":
        kwargs.update(use_cache=False)
    if given == "cu_seq_lens":
        kwargs.update(cu_seq_lens_q=cu, cu_seq_lens_k=cu, max_length_q=max(PACKED_LENGTHS),
                      max_length_k=max(PACKED_LENGTHS))
    flash.train()
    reference.train()
    logits = flash(ids, **kwargs).logits
    with torch.no_grad():
        alone = torch.cat([reference(ids[:, start:end]).logits for start, end in zip(cu[:-1], cu[1:])], dim=1)
    assert (logits - alone).abs().max().item() <= PLUMBING_ATOL
    assert reference_kernels["varlen"] == flash.config.num_hidden_layers

    logits.logsumexp(-1).sum().backward()
    reference(ids, position_ids=positions, use_cache=False).logits.logsumexp(-1).sum().backward()
    flash_params = dict(flash.named_parameters())
    for name, param in reference.named_parameters():
        assert torch.allclose(flash_params[name].grad, param.grad, rtol=1e-3, atol=1e-5), name


def small_paged_cache():
    """Pages of 16 tokens (a request spans several) in a cache sized here, not from the host's free memory."""
    fields = transformers.ContinuousBatchingConfig.__dataclass_fields__
    page = "page_size" if "page_size" in fields else "block_size"  # renamed in transformers 5.2x
    return transformers.ContinuousBatchingConfig(num_blocks=64, max_batch_tokens=256, **{page: 16})


CONTINUOUS_BATCHING_PROMPTS = (5, 17, 9, 30)


def continuous_batching(flash, device):
    """Each request's tokens from flash.generate_batch, (1, NEW_TOKENS) each."""
    generator = torch.Generator().manual_seed(2)
    prompts = [torch.randint(0, VOCAB, (n,), generator=generator).tolist() for n in CONTINUOUS_BATCHING_PROMPTS]
    config = transformers.GenerationConfig(max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False,
                                           eos_token_id=-1, pad_token_id=0)
    with torch.no_grad():
        results = flash.generate_batch(inputs=prompts, generation_config=config,
                                       continuous_batching_config=small_paged_cache())
    return [torch.tensor([results[f"req_{i}"].generated_tokens], device=device) for i in range(len(prompts))], prompts


def test_continuous_batching_falls_back_to_sdpa():
    """A model flashcute does not serve (float32) still batches continuously: each step through transformers' SDPA
    attention with the packed requests' mask, with the one-time warning; each request's tokens are SDPA's
    generate() on it alone. On the GPU where there is one (transformers 5.17 makes CUDA streams even for a CPU
    model there)."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    reference, flash = model_pair(device, torch.float32)
    if not hasattr(flash, "generate_batch"):
        pytest.skip("this transformers has no continuous batching (generate_batch)")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tokens, prompts = continuous_batching(flash, device)
    for row, ids in zip(tokens, prompts):
        assert torch.equal(row, greedy(reference, torch.tensor([ids], device=device))[0])
    warned = fallback_warnings(caught)
    assert warned and all(w.endswith(": dtype torch.float32 (flashcute serves float16 and bfloat16)") for w in warned)


def test_paged_function_refuses_what_it_does_not_serve():
    """"paged|flashcute" (continuous batching before transformers 5.23) names what it lacks."""
    from flashcute.integrations.transformers import PAGED_NAME, flashcute_paged_attention_forward

    q = torch.zeros(1, 4, 3, 64)
    k = torch.zeros(1, 2, 3, 64)
    module = torch.nn.Module()
    with pytest.raises(ValueError, match=re.escape("is for transformers' continuous batching (generate_batch)")):
        flashcute_paged_attention_forward(module, q, k, k, None)
    module.sliding_window = 8
    with pytest.raises(NotImplementedError, match=re.escape("has no sliding-window layers; use 'paged|sdpa'")):
        flashcute_paged_attention_forward(module, q, k, k, None, cache=object())
    module.sliding_window = None
    with pytest.raises(NotImplementedError, match="does not take transformers' block table"):
        flashcute_paged_attention_forward(module, q, k, k, None, cache=object(), block_table=torch.zeros(1, 1, 1))
    assert PAGED_NAME == "paged|flashcute"


def test_continuous_batching_plumbing(reference_kernels):
    """transformers' continuous batching (generate_batch) over requests of different lengths: every layer of every
    step, prefill and decoding, runs the variable-length kernel on the step's packed requests, their keys read back
    from the paged cache by index (by transformers, or, before 5.23, by "paged|flashcute"); each request's greedy
    tokens are SDPA's generate() on it alone."""
    if torch.cuda.is_available():
        pytest.skip("a CPU test: transformers 5.17's continuous batching makes CUDA streams even for a CPU model where "
                    "a GPU is present (test_continuous_batching_matches_sdpa runs the kernels there)")
    reference, flash = model_pair("cpu", torch.float32)
    if not hasattr(flash, "generate_batch"):
        pytest.skip("this transformers has no continuous batching (generate_batch)")
    tokens, prompts = continuous_batching(flash, "cpu")
    for row, ids in zip(tokens, prompts):
        assert torch.equal(row, greedy(reference, torch.tensor([ids]))[0])
    assert reference_kernels["varlen"] == NEW_TOKENS * flash.config.num_hidden_layers
    assert reference_kernels["fixed"] == reference_kernels["kvcache"] == 0


# ---------------------------------------------------------------- GPU: the kernel in the model


@pytest.fixture
def device(library):
    return "cuda"


@requires_cuda
def test_prefill_logits_match_sdpa(device, monkeypatch):
    reference, flash = model_pair(device, torch.bfloat16)
    ids = prompt(device)
    with torch.no_grad():
        expected = reference(ids).logits.float()
        with served_by_flashcute(monkeypatch):
            logits = flash(ids).logits.float()
        exact = reference.float()(ids).logits  # float32 weights, float32 attention: the yardstick
    assert (logits - expected).abs().max().item() <= LOGITS_ATOL
    torch_error = (expected - exact).abs().max().item()
    assert (logits - exact).abs().max().item() <= 2 * torch_error + 1e-3


@requires_cuda
def test_greedy_decoding_matches_sdpa(device, monkeypatch):
    """32 greedy tokens with a dynamic cache: prefill with causal, then one-query steps that see every key.

    Random weights make near-ties between the top two logits likely somewhere in 64 decisions, and bf16
    kernels that round differently may break such a tie either way. So: every cached decoding step's logits,
    fed the reference's tokens, must be within bf16 tolerance of the reference's; and the greedy tokens must
    be identical up to the end, or up to a step where the reference itself rates the two tokens within that
    tolerance.
    """
    reference, flash = model_pair(device, torch.bfloat16)
    ids = prompt(device)
    expected_tokens, expected_logits = greedy(reference, ids)
    with torch.no_grad(), served_by_flashcute(monkeypatch):
        tokens, _ = greedy(flash, ids)
        forced_logits = decode_teacher_forced(flash, ids, expected_tokens)
    assert (forced_logits - expected_logits).abs().max().item() <= LOGITS_ATOL

    assert_same_tokens_up_to_near_ties(tokens, expected_tokens, expected_logits)


def assert_same_tokens_up_to_near_ties(tokens, expected_tokens, expected_logits):
    """Identical greedy tokens up to the end, or up to a step where the reference itself rates the two tokens
    within LOGITS_ATOL (a near-tie that bf16 kernels rounding differently may break either way)."""
    for row in range(tokens.shape[0]):
        differs = (tokens[row] != expected_tokens[row]).nonzero()
        if len(differs):
            step = differs[0].item()
            step_logits = expected_logits[row, step]
            margin = step_logits[expected_tokens[row, step]] - step_logits[tokens[row, step]]
            assert margin.item() <= LOGITS_ATOL, f"row {row} diverges at step {step} where the reference is sure"
    print(f"greedy tokens identical in {(tokens == expected_tokens).all(dim=1).sum().item()} of {tokens.shape[0]} rows")


def decode_teacher_forced(model, input_ids, new_tokens):
    """The logits of each of len(new_tokens) steps: a prefill, then one cached step per given token."""
    out = model(input_ids, use_cache=True)
    logits = [out.logits[:, -1]]
    for step in range(new_tokens.shape[1] - 1):
        out = model(new_tokens[:, step:step + 1], past_key_values=out.past_key_values, use_cache=True)
        logits.append(out.logits[:, -1])
    return torch.stack(logits, dim=1).float()


@requires_cuda
def test_static_cache_prefill_is_served(device, monkeypatch):
    """An empty static cache hands the prompt's attention keys past the prompt: served as top-left causal."""
    reference, flash = model_pair(device, torch.bfloat16)
    ids = prompt(device)

    def prefill(model):
        cache = transformers.StaticCache(config=model.config, max_cache_len=64)
        return model(ids, past_key_values=cache, use_cache=True).logits.float()

    with torch.no_grad():
        expected = prefill(reference)
        with served_by_flashcute(monkeypatch):
            logits = prefill(flash)
    assert (logits - expected).abs().max().item() <= LOGITS_ATOL


@requires_cuda
def test_padded_greedy_decoding_matches_sdpa(device, monkeypatch):
    """A left-padded batch: prefill on flashcute's variable-length kernel and every cached step on its decode
    kernel (cache_leftpad), no fallback; logits at the valid positions within bf16 tolerance, tokens as SDPA's up
    to near-ties."""
    reference, flash = model_pair(device, torch.bfloat16)
    ids = prompt(device)
    mask = left_padded(ids, (0, 7))
    with torch.no_grad():
        expected_prefill = reference(ids, attention_mask=mask).logits.float()
        with served_by_flashcute(monkeypatch):
            prefill = flash(ids, attention_mask=mask).logits.float()
    valid = mask.bool()
    assert (prefill[valid] - expected_prefill[valid]).abs().max().item() <= LOGITS_ATOL
    expected_tokens, expected_logits = greedy(reference, ids, attention_mask=mask)
    with torch.no_grad(), served_by_flashcute(monkeypatch):
        tokens, logits = greedy(flash, ids, attention_mask=mask)
    assert_same_tokens_up_to_near_ties(tokens, expected_tokens, expected_logits)


@requires_cuda
def test_continuous_batching_matches_sdpa(device, monkeypatch):
    """generate_batch on the GPU: requests of different lengths share each step's packed batch on flashcute's
    variable-length kernel (no fallback); each request's tokens are SDPA's generate() on it alone, up to
    near-ties."""
    reference, flash = model_pair(device, torch.bfloat16)
    if not hasattr(flash, "generate_batch"):
        pytest.skip("this transformers has no continuous batching (generate_batch)")
    with served_by_flashcute(monkeypatch):
        tokens, prompts = continuous_batching(flash, device)
    for row, ids in zip(tokens, prompts):
        expected_tokens, expected_logits = greedy(reference, torch.tensor([ids], device=device))
        assert row.shape == expected_tokens.shape
        assert_same_tokens_up_to_near_ties(row, expected_tokens, expected_logits)


@requires_cuda
def test_static_cache_decoding_is_served(device, monkeypatch):
    """generate() with a static cache (not compiled): every step on flashcute's kernel over the filled keys."""
    reference, flash = model_pair(device, torch.bfloat16)
    ids = prompt(device)
    kwargs = dict(attention_mask=torch.ones_like(ids), cache_implementation="static", disable_compile=True)
    expected_tokens, expected_logits = greedy(reference, ids, **kwargs)
    with torch.no_grad(), served_by_flashcute(monkeypatch):
        tokens, logits = greedy(flash, ids, **kwargs)
    assert_same_tokens_up_to_near_ties(tokens, expected_tokens, expected_logits)


TRAIN_STEPS, TRAIN_SEQLEN = 5, 128


def train(model, input_ids, labels, **kwargs):
    """TRAIN_STEPS AdamW steps on one batch: each step's loss and the first step's gradients."""
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses, first_grads = [], None
    for _ in range(TRAIN_STEPS):
        optimizer.zero_grad(set_to_none=True)
        loss = model(input_ids, labels=labels, **kwargs).loss
        loss.backward()
        if first_grads is None:
            first_grads = {name: p.grad.double() for name, p in model.named_parameters()}
        optimizer.step()
        losses.append(loss.item())
    return torch.tensor(losses, dtype=torch.float64), first_grads


def training_batch(kind, device):
    """(input_ids, labels, model kwargs): four rows of TRAIN_SEQLEN tokens; "padded" pads three of them on the
    left (labels -100 there), "packed" puts sequences of four lengths into one row (position_ids restart)."""
    input_ids = torch.randint(0, VOCAB, (4, TRAIN_SEQLEN), generator=torch.Generator().manual_seed(2)).to(device)
    labels, kwargs = input_ids, {}
    if kind == "padded":
        mask = left_padded(input_ids, (0, 17, 64, 1))
        labels, kwargs = input_ids.masked_fill(mask == 0, -100), dict(attention_mask=mask)
    elif kind == "packed":
        lengths = (100, 156, 17, 239)
        input_ids = labels = input_ids.view(1, -1)
        # use_cache=False: transformers' SDPA finds the packed sequences only without a cache.
        kwargs = dict(position_ids=torch.cat([torch.arange(n) for n in lengths]).unsqueeze(0).to(device),
                      use_cache=False)
    return input_ids, labels, kwargs


@requires_cuda
@pytest.mark.parametrize("kind", ["plain", "padded", "packed"])
def test_training_matches_sdpa(device, monkeypatch, kind):
    """The same weights and batch trained in bf16 on flashcute and on torch SDPA, and in float32 on SDPA (the
    yardstick, from the same bf16-rounded weights): flashcute's loss curve and every parameter's first
    gradient are within 1.5x SDPA-bf16's own error against float32 (per parameter, in the L2 norm, which
    random rounding moves less than the max). Padded and packed (padding-free) batches run on flashcute's
    variable-length kernels, forward and backward."""
    reference, flash = model_pair(device, torch.bfloat16)
    exact = copy.deepcopy(reference).float()
    batch = training_batch(kind, device)
    exact_losses, exact_grads = train(exact, *batch[:2], **batch[2])
    sdpa_losses, sdpa_grads = train(reference, *batch[:2], **batch[2])
    with served_by_flashcute(monkeypatch):
        losses, grads = train(flash, *batch[:2], **batch[2])

    assert exact_losses[-1] < exact_losses[0] - 0.1  # the steps do train
    sdpa_error = (sdpa_losses - exact_losses).abs().max().item()
    assert (losses - exact_losses).abs().max().item() <= 1.5 * sdpa_error + 1e-3, (losses, sdpa_losses, exact_losses)
    for name, exact_grad in exact_grads.items():
        sdpa_error = (sdpa_grads[name] - exact_grad).norm().item()
        error = (grads[name] - exact_grad).norm().item()
        assert error <= 1.5 * sdpa_error + 1e-6 * exact_grad.norm().item(), (name, error, sdpa_error)
