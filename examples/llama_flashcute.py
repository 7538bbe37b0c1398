"""A Llama-style model from a config (random weights, nothing downloaded) on attn_implementation="flashcute"
and on torch's "sdpa": prefill logits agreement, greedy-decoding agreement and tokens/s for both.

    python examples/llama_flashcute.py                 # GPU, bf16
    python examples/llama_flashcute.py --layers 2      # smaller and quicker
    python examples/llama_flashcute.py --batch 1,8 --prompt-len 32768 --new-tokens 256   # long-context decoding

Decoding runs with transformers' DynamicCache: each one-token step reaches flashcute's decode kernel through
the fixed-length op. Greedy tokens are compared row by row: identical, or the first difference falls on a
near-tie, a step where sdpa's own logits rate the two tokens within LOGITS_ATOL (tests/test_transformers.py's
rule for its O(1) logits), or within two rounding steps of the dtype where the logits are larger (bf16 kernels
that round differently may break such a tie either way).

Needs transformers (pip install transformers). Without a GPU it runs on the CPU, where flashcute falls back
to torch (and says so), so the two columns measure the same thing.
"""

import argparse
import copy
import math
import time

import torch
import transformers

from flashcute.integrations.transformers import register


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--kv-heads", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--batch", default="4", help="batch sizes, comma-separated: each runs on its own")
    parser.add_argument("--prompt-len", type=int, default=1024)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--dtype", choices=["bfloat16", "float16"], default="bfloat16")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    return parser.parse_args()


def build_models(args):
    config = transformers.LlamaConfig(
        vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=int(args.hidden * 8 / 3) // 64 * 64,
        num_hidden_layers=args.layers, num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
        head_dim=args.hidden // args.heads, max_position_embeddings=args.prompt_len + args.new_tokens,
    )
    register()  # makes attn_implementation="flashcute" valid
    torch.manual_seed(0)
    models = {
        name: transformers.AutoModelForCausalLM.from_config(copy.deepcopy(config), attn_implementation=name)
        for name in ("sdpa", "flashcute")
    }
    models["flashcute"].load_state_dict(models["sdpa"].state_dict())  # the same random weights
    dtype = getattr(torch, args.dtype)
    return {name: model.to(args.device, dtype).eval() for name, model in models.items()}


def synchronize(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def timed(function, device, repeats=3):
    """(result, best seconds) over a warm-up and `repeats` runs."""
    result = function()
    best = float("inf")
    for _ in range(repeats):
        synchronize(device)
        start = time.perf_counter()
        result = function()
        synchronize(device)
        best = min(best, time.perf_counter() - start)
    return result, best


LOGITS_ATOL = 0.03  # bf16 logits of the two attentions agree to this (tests/test_transformers.py)


def near_tie_limit(logit, dtype):
    """The margin under which two kernels that round differently may pick either token: LOGITS_ATOL (several
    rounding steps at the O(1) logits of the tests), or two rounding steps of `dtype` at this logit's magnitude
    where the logits are larger (at 4-8 one bf16 step is 2^-5, above LOGITS_ATOL)."""
    step = torch.finfo(dtype).eps * 2.0 ** math.floor(math.log2(max(abs(logit), 1e-30)))
    return max(LOGITS_ATOL, 2 * step)


def compare_tokens(tokens, ref_tokens, ref_scores, dtype):
    """Per row: 'identical', or where it first differs and whether that step is a near-tie for sdpa."""
    verdicts = []
    for row in range(tokens.shape[0]):
        differs = (tokens[row] != ref_tokens[row]).nonzero()
        if not len(differs):
            verdicts.append("identical")
            continue
        step = differs[0].item()
        logits = ref_scores[step][row].float()
        top = logits[ref_tokens[row, step]].item()
        margin = top - logits[tokens[row, step]].item()
        kind = "a near-tie" if margin <= near_tie_limit(top, dtype) else "NOT a near-tie"
        verdicts.append(f"differs from step {step}, {kind} (sdpa's margin {margin:.4f})")
    return verdicts


def run_batch(models, args, batch):
    # Token 0 is the pad token: the prompt avoids it, so generate() sees no padding and passes no mask.
    prompt = torch.randint(1, args.vocab, (batch, args.prompt_len), device=args.device)
    generate = dict(max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens, do_sample=False, pad_token_id=0,
                    output_scores=True, return_dict_in_generate=True)
    print(f"\nbatch {batch}, prompt {args.prompt_len}, {args.new_tokens} new tokens")
    results = {}
    with torch.no_grad():
        for name, model in models.items():
            logits, prefill_s = timed(lambda: model(prompt, logits_to_keep=1).logits[:, -1], args.device)
            out, generate_s = timed(lambda: model.generate(prompt, **generate), args.device)
            results[name] = (logits, out.sequences[:, args.prompt_len:], out.scores, prefill_s, generate_s)

    print(f"{'attention':<10} {'prefill ms':>11} {'prefill tok/s':>14} {'prefill+decode ms':>18} {'decode tok/s':>13}")
    for name, (_, _, _, prefill_s, generate_s) in results.items():
        decode_s = max(generate_s - prefill_s, 1e-9)
        print(f"{name:<10} {prefill_s * 1e3:>11.2f} {batch * args.prompt_len / prefill_s:>14.0f} "
              f"{generate_s * 1e3:>18.2f} {batch * args.new_tokens / decode_s:>13.0f}")

    (ref_logits, ref_tokens, ref_scores, *_), (logits, tokens, *_) = results["sdpa"], results["flashcute"]
    ref_logits, logits = ref_logits.float(), logits.float()
    difference = (logits - ref_logits).abs().max().item()
    top1 = (logits.argmax(-1) == ref_logits.argmax(-1)).float().mean().item()
    print(f"prefill logits (last position): max |flashcute - sdpa| = {difference:.4f} "
          f"(logits up to {ref_logits.abs().max().item():.2f}); top-1 agreement {top1:.2%}")
    for row, verdict in enumerate(compare_tokens(tokens, ref_tokens, ref_scores, getattr(torch, args.dtype))):
        print(f"greedy decoding, row {row}: {verdict}")


def main():
    args = parse_args()
    models = build_models(args)
    print(f"Llama-style: {args.layers} layers, hidden {args.hidden}, {args.heads} heads / {args.kv_heads} kv heads, "
          f"{args.dtype} on {args.device}")
    for batch in (int(b) for b in args.batch.split(",")):
        run_batch(models, args, batch)


if __name__ == "__main__":
    main()
