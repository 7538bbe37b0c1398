"""attn_implementation="flashcute" in a transformers Llama-style model, against the same weights on "sdpa".

CPU: registration, and the fallbacks (CPU tensors, padding masks) giving exactly SDPA's tokens. GPU (bf16):
prefill logits within bf16 tolerance of torch SDPA, every greedy and cached decoding step on flashcute's
kernel with no fallback, the same 32 greedy tokens, a static cache's prefill, and training: a few AdamW
steps on flashcute (forward and backward) agree with the same steps on torch SDPA.
"""

import contextlib
import copy
import importlib
import warnings

import pytest
import torch

transformers = pytest.importorskip("transformers")

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
from flashcute.integrations.transformers import NAME, flashcute_attention_forward, register  # noqa: E402

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
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    assert ALL_ATTENTION_FUNCTIONS[NAME] is flashcute_attention_forward
    assert ALL_MASK_ATTENTION_FUNCTIONS[NAME] is sdpa_mask
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
    assert fallback_warnings(caught) == ["flashcute.sdpa falls back to torch SDPA: dtype torch.float32 "
                                         "(flashcute serves float16 and bfloat16)"]


def test_padding_mask_falls_back_to_exactly_sdpa():
    reference, flash = model_pair("cpu", torch.float32)
    ids = prompt("cpu")
    mask = torch.ones_like(ids)
    mask[0, :5] = 0  # left padding in the first row
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tokens, _ = greedy(flash, ids, attention_mask=mask)
    assert torch.equal(tokens, greedy(reference, ids, attention_mask=mask)[0])
    assert any("attention mask" in message for message in fallback_warnings(caught))


def test_unsupported_features_are_clear_errors():
    q = torch.randn(1, 4, 8, 64)
    with pytest.raises(NotImplementedError, match="softcap"):
        flashcute_attention_forward(torch.nn.Module(), q, q, q, None, softcap=30.0)


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

    for row in range(ids.shape[0]):
        differs = (tokens[row] != expected_tokens[row]).nonzero()
        if len(differs):
            step = differs[0].item()
            step_logits = expected_logits[row, step]
            margin = step_logits[expected_tokens[row, step]] - step_logits[tokens[row, step]]
            assert margin.item() <= LOGITS_ATOL, f"row {row} diverges at step {step} where the reference is sure"
    print(f"greedy tokens identical in {(tokens == expected_tokens).all(dim=1).sum().item()} of {ids.shape[0]} rows")


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
def test_padded_batch_falls_back_on_gpu(device):
    reference, flash = model_pair(device, torch.bfloat16)
    ids = prompt(device)
    mask = torch.ones_like(ids)
    mask[1, :7] = 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tokens, logits = greedy(flash, ids, attention_mask=mask)
    expected_tokens, expected_logits = greedy(reference, ids, attention_mask=mask)
    assert torch.equal(tokens, expected_tokens) and torch.equal(logits, expected_logits)
    assert len(fallback_warnings(caught)) == 1 and "attention mask" in fallback_warnings(caught)[0]


TRAIN_STEPS, TRAIN_SEQLEN = 5, 128


def train(model, input_ids):
    """TRAIN_STEPS AdamW steps on one batch (labels = inputs): each step's loss and the first step's gradients."""
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses, first_grads = [], None
    for _ in range(TRAIN_STEPS):
        optimizer.zero_grad(set_to_none=True)
        loss = model(input_ids, labels=input_ids).loss
        loss.backward()
        if first_grads is None:
            first_grads = {name: p.grad.double() for name, p in model.named_parameters()}
        optimizer.step()
        losses.append(loss.item())
    return torch.tensor(losses, dtype=torch.float64), first_grads


@requires_cuda
def test_training_matches_sdpa(device, monkeypatch):
    """The same weights and batch trained in bf16 on flashcute and on torch SDPA, and in float32 on SDPA (the
    yardstick, from the same bf16-rounded weights): flashcute's loss curve and every parameter's first
    gradient are within 1.5x SDPA-bf16's own error against float32 (per parameter, in the L2 norm, which
    random rounding moves less than the max)."""
    reference, flash = model_pair(device, torch.bfloat16)
    exact = copy.deepcopy(reference).float()
    input_ids = torch.randint(0, VOCAB, (4, TRAIN_SEQLEN), generator=torch.Generator().manual_seed(2)).to(device)
    exact_losses, exact_grads = train(exact, input_ids)
    sdpa_losses, sdpa_grads = train(reference, input_ids)
    with served_by_flashcute(monkeypatch):
        losses, grads = train(flash, input_ids)

    assert exact_losses[-1] < exact_losses[0] - 0.1  # the steps do train
    sdpa_error = (sdpa_losses - exact_losses).abs().max().item()
    assert (losses - exact_losses).abs().max().item() <= 1.5 * sdpa_error + 1e-3, (losses, sdpa_losses, exact_losses)
    for name, exact_grad in exact_grads.items():
        sdpa_error = (sdpa_grads[name] - exact_grad).norm().item()
        error = (grads[name] - exact_grad).norm().item()
        assert error <= 1.5 * sdpa_error + 1e-6 * exact_grad.norm().item(), (name, error, sdpa_error)
