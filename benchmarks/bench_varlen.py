"""Variable-length (packed) batches against the fixed-length kernel and FlashAttention-4's varlen, in one run.

    python benchmarks/bench_varlen.py [--dtypes bf16] [--head-dims 128] [--backend auto] [--peers fa4] [--rounds N]
                                      [--out DIR]

The two mixes of varlen_mixes.py ("uniform", 64 sequences of 128-4096 tokens; "skewed", one of 16k and 64 of
256), hidden 2048. FLOPs are counted per sequence (4 * s_q * s_k * d * heads, halved for causal; x2.5
for the backward). The fixed-length reference runs the same kernel on a batch of equal sequences with the same
FLOPs: seqlen the root mean square of the mix's lengths, batch total tokens / seqlen. Forward and backward (the
backward timed as the op alone); flashcute's varlen and fixed-length ops run on the same --backend (auto: sm90 on
Hopper). With --rounds N every implementation of a row is timed in turn N times and the row holds the median
round (all rounds in the JSON): this mix's figures move by several percent between runs, more than its bar's
margins. Prints a table, writes JSON and markdown to benchmarks/results/ (or --out).
"""

import argparse
import statistics

import torch

from _common import (DTYPES, HIDDEN, RESULTS, csv, first_line, fmt, git_commit, measure, run_meta, versions,
                     write_results)
import flashcute  # noqa: E402  (after _common, which puts this checkout first on sys.path)
from varlen_mixes import mixes  # noqa: E402


def flops(lengths, head_dim, heads, causal):
    return sum(4 * s * s * head_dim * heads / (2 if causal else 1) for s in lengths)


def load_fa4_varlen():
    try:
        from flash_attn.cute import flash_attn_varlen_func
        return flash_attn_varlen_func, None
    except Exception as error:  # not installed, or its CuTe DSL cannot load here
        return None, f"{type(error).__name__}: {first_line(error)}"


def bench(name, lengths, dtype, head_dim, causal, backend, fa4, rounds=1):
    heads = HIDDEN // head_dim
    total = sum(lengths)
    cu = torch.tensor([0] + lengths, device="cuda", dtype=torch.int32).cumsum(0, dtype=torch.int32)
    q, k, v, dout = (torch.randn(total, heads, head_dim, device="cuda", dtype=dtype) for _ in range(4))
    max_len = max(lengths)
    work = flops(lengths, head_dim, heads, causal)
    row = {"mix": name, "dtype": str(dtype).removeprefix("torch."), "d": head_dim, "causal": causal,
           "sequences": len(lengths), "total": total, "tflops": {}, "notes": {}}

    timings = []  # (label, fn, FLOPs), each timed once per round, in this order

    def record(label, fn, flop):
        timings.append((label, fn, flop))

    lengths_args = (cu, cu, max_len, max_len, None, causal)
    out, lse = torch.ops.flashcute.fwd_varlen(q, k, v, *lengths_args, None, backend)
    record("varlen fwd", lambda: torch.ops.flashcute.fwd_varlen(q, k, v, *lengths_args, None, backend), work)
    record("varlen bwd", lambda: torch.ops.flashcute.bwd_varlen(dout, q, k, v, out, lse, *lengths_args, None, False,
                                                                 backend), 2.5 * work)

    # The fixed-length kernel at the same FLOPs: equal sequences of the mix's root-mean-square length.
    seqlen = round((sum(s * s for s in lengths) / len(lengths)) ** 0.5)
    batch = max(1, round(total / seqlen))
    fq, fk, fv, fdout = (torch.randn(batch, seqlen, heads, head_dim, device="cuda", dtype=dtype) for _ in range(4))
    fixed_work = flops([seqlen] * batch, head_dim, heads, causal)
    fout, flse = torch.ops.flashcute.fwd(fq, fk, fv, None, causal, False, backend)
    record("fixed fwd", lambda: torch.ops.flashcute.fwd(fq, fk, fv, None, causal, False, backend), fixed_work)
    record("fixed bwd", lambda: torch.ops.flashcute.bwd(fdout, fq, fk, fv, fout, flse, None, causal, False, False,
                                                        backend), 2.5 * fixed_work)

    if fa4 is not None:
        kwargs = dict(cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=max_len, max_seqlen_k=max_len, causal=causal)
        record("fa4 fwd", lambda: fa4(q, k, v, **kwargs), work)
        qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
        try:
            fa4_out = fa4(qg, kg, vg, **kwargs)
            fa4_out = fa4_out[0] if isinstance(fa4_out, tuple) else fa4_out
            record("fa4 bwd", lambda: torch.autograd.grad(fa4_out, (qg, kg, vg), dout, retain_graph=True), 2.5 * work)
        except Exception as error:
            row["notes"]["fa4 bwd"] = first_line(error)

    rates = {}
    for _ in range(rounds):
        for label, fn, flop in timings:
            if label in row["notes"]:  # failed in an earlier round
                continue
            try:
                ms, _ = measure(fn)
                rates.setdefault(label, []).append(flop / ms / 1e9)
            except Exception as error:
                row["notes"][label] = first_line(error)
    for label, values in rates.items():
        if label not in row["notes"]:
            row["tflops"][label] = statistics.median(values)
            if rounds > 1:
                row.setdefault("tflops_rounds", {})[label] = values
    return row


COLUMNS = ["varlen fwd", "fixed fwd", "fa4 fwd", "varlen bwd", "fixed bwd", "fa4 bwd"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtypes", default="bf16")
    parser.add_argument("--head-dims", default="128")
    parser.add_argument("--backend", default="auto", help="flashcute's backend for both ops: auto, sm80 or sm90")
    parser.add_argument("--peers", default="fa4", help="fa4, or empty for none")
    parser.add_argument("--rounds", type=int, default=1, help="time each row's implementations in turn N times; "
                        "report the median")
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")

    flashcute.load_extension()
    fa4, why = load_fa4_varlen() if "fa4" in csv(args.peers) else (None, "not asked for")
    device = torch.cuda.get_device_name()
    commit = git_commit()
    rows = [bench(name, lengths, DTYPES[dtype], head_dim, causal, args.backend, fa4, args.rounds)
            for dtype in csv(args.dtypes) for head_dim in csv(args.head_dims, int) for causal in (False, True)
            for name, lengths in mixes().items()]

    lines = [versions(commit), "", f"flashcute backend: {args.backend}; FlashAttention-4 varlen: {'ran' if fa4 else why}",
             "",
             f"TFLOP/s (per-sequence FLOPs; median of {args.rounds} round{'s' if args.rounds > 1 else ''}); "
             "varlen / fixed and varlen / fa4 ratios", "",
             "| mix | dtype | d | causal | " + " | ".join(COLUMNS) + " | fwd varlen/fixed | bwd varlen/fixed |"
             " fwd varlen/fa4 | bwd varlen/fa4 |",
             "|" + "---|" * (4 + len(COLUMNS) + 4)]
    for row in rows:
        t = row["tflops"]
        ratio = lambda a, b: fmt(t[a] / t[b], 2) if a in t and b in t else "-"
        cells = [row["mix"], row["dtype"], str(row["d"]), "yes" if row["causal"] else "no"]
        cells += [fmt(t[c]) if c in t else "-" for c in COLUMNS]
        cells += [ratio("varlen fwd", "fixed fwd"), ratio("varlen bwd", "fixed bwd"), ratio("varlen fwd", "fa4 fwd"),
                  ratio("varlen bwd", "fa4 bwd")]
        lines.append("| " + " | ".join(cells) + " |")
    notes = [f"- {row['mix']} d{row['d']} causal={row['causal']}: {label}: {note}"
             for row in rows for label, note in row["notes"].items()]
    text = "\n".join(lines + ([""] + notes if notes else [])) + "\n"
    print(text)
    write_results(args.out, "varlen", "flashcute variable-length batches", run_meta(device, commit), rows, text)


if __name__ == "__main__":
    main()
