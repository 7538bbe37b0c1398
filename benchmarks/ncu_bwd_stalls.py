"""Where the SM90 backward's cycles go: Nsight Compute's cycles, pipe use, instruction mix and per-instruction warp-stall
samples of one backward kernel launch, flashcute's beside FlashAttention-4's, on one shape.

    python benchmarks/ncu_bwd_stalls.py                          # flashcute and FA4, bf16 hdim 128 non-causal 2 x 8k
    python benchmarks/ncu_bwd_stalls.py --impls flashcute --seqlen 16384 --batch 1 --causal

Needs a Hopper GPU whose machine lets ncu read the counters (not under gVisor), ncu on PATH (or NCU=...), and for
"fa4" the flash-attn-4 wheel (`from flash_attn.cute import flash_attn_func`). Each implementation runs in its own
process under ncu (`--clock-control none`): the forward once, the backward twice; the second launch of the main
backward kernel is profiled (flashcute's `bwd_kernel`, FA4's `FlashAttentionBackwardSm90`), with the SourceCounters
section for the stall samples. The consumers' step is then cut into phases at its gemms (`loop_phases`: the wait
before each gemm, and its issue), each phase in one warp's cycles per step, the implementations side by side: where
one's step is longer. Prints a markdown summary and writes it with the figures as JSON to --out (default
benchmarks/results/, named by date and device, with the commit); the reports (.ncu-rep), details pages and SASS
source pages (.csv, a few MB each) go to --reports (default a new folder in the temporary directory).
"""

import argparse
import csv
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import torch

from _common import (RESULTS, add_one_shape_args, backward_call, git_commit, one_shape_inputs, run_meta, versions,
                     write_results)

KERNELS = {"flashcute": "bwd_kernel", "fa4": "BackwardSm90"}  # ncu --kernel-name regexes of the main kernels
SECTIONS = ("SpeedOfLight", "LaunchStats", "Occupancy", "SchedulerStats", "WarpStateStats", "InstructionStats",
            "ComputeWorkloadAnalysis", "MemoryWorkloadAnalysis", "SourceCounters")
# (label, the line of ncu's details page that starts with it)
DETAILS = (("SM clock (GHz)", "SM Frequency"), ("elapsed cycles", "Elapsed Cycles"), ("duration (ms)", "Duration"),
           ("issue slots busy (%)", "Issue Slots Busy"), ("executed instructions", "Executed Instructions"),
           ("L2 throughput (%)", "L2 Cache Throughput"), ("L1/TEX throughput (%)", "L1/TEX Cache Throughput"),
           ("no eligible warp (%)", "No Eligible"), ("local-memory spill requests", "Local Memory Spilling Requests"),
           ("dynamic shared memory (KB)", "Dynamic Shared Memory Per Block"),
           ("achieved active warps per SM", "Achieved Active Warps Per SM"), ("SMs", "# SMs"))


def run_backward(impl, args):
    """The profiled process: the forward once, the backward twice."""
    backward = backward_call(impl, *one_shape_inputs(args), args.causal)
    for _ in range(2):
        backward()
    torch.cuda.synchronize()


def profile(impl, args, folder):
    """ncu report, details page and SASS source page of impl's second main backward launch."""
    ncu = os.environ.get("NCU", "ncu")
    report = folder / f"ncu_{impl}"
    shape = ["--dtype", args.dtype, "--batch", str(args.batch), "--seqlen", str(args.seqlen), "--heads",
             str(args.heads), "--head-dim", str(args.head_dim)] + (["--causal"] if args.causal else [])
    command = [ncu, "--clock-control", "none", "--kernel-name", f"regex:{KERNELS[impl]}", "--launch-skip", "1",
               "--launch-count", "1", *[a for s in SECTIONS for a in ("--section", s)], "-o", str(report), "-f",
               sys.executable, __file__, "--run", impl, *shape]
    subprocess.run(command, check=True)
    details = subprocess.run([ncu, "--import", f"{report}.ncu-rep", "--page", "details"], check=True,
                             capture_output=True, text=True).stdout
    source = subprocess.run([ncu, "--import", f"{report}.ncu-rep", "--page", "source", "--csv", "--print-source",
                             "sass"], check=True, capture_output=True, text=True).stdout
    (folder / f"ncu_{impl}_details.txt").write_text(details)
    (folder / f"ncu_{impl}_sass.csv").write_text(source)
    return details, source


def _number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def _source_table(source):
    """ncu's SASS source page: (column index by name, instruction rows, all warp-stall samples)."""
    rows = list(csv.reader(source.splitlines()))
    header, data = rows[1], rows[2:]
    column = {name: i for i, name in enumerate(header)}
    total = sum(_number(r[column["Warp Stall Sampling (All Samples)"]]) for r in data) or 1.0
    return column, data, total


def summarize(details, source):
    """(details figures, stall-reason shares, executed instructions by opcode) of one kernel."""
    figures = {}
    for line in details.splitlines():
        for label, start in DETAILS:
            if line.strip().startswith(start) and label not in figures:
                figures[label] = line.split()[-1]
    column, data, total = _source_table(source)
    reasons = [h for h in column if h.startswith("stall_") and "Not Issued" not in h]
    stalls = {h[len("stall_"):]: sum(_number(r[column[h]]) for r in data) / total for h in reasons}
    stalls["(no named reason)"] = 1.0 - sum(stalls.values())
    mix = Counter()
    executed = column["Instructions Executed"]
    for r in data:
        words = r[1].split()
        if words:
            mix[(words[1] if words[0].startswith("@") else words[0]).split(".")[0]] += _number(r[executed])
    return figures, stalls, mix


def top_stalled(source, reason, count):
    """The `count` instructions with the most `reason` samples: (address, SASS, share of all samples). The stalled
    instruction is the one waiting; what it waits on (a scoreboard's producer) is read in the saved SASS page."""
    column, data, total = _source_table(source)
    key = column.get(f"stall_{reason}")
    if key is None:
        return None  # no such reason on this page
    ranked = sorted(data, key=lambda r: -_number(r[key]))[:count]
    return [(r[0], r[1], _number(r[key]) / total) for r in ranked if _number(r[key]) > 0]


def _branch_target(sass):
    """The target address of a branch (`@!P0  BRA 0x7f..`), or None."""
    words = sass.replace(",", " ").split()
    if words and words[0].startswith("@"):
        words = words[1:]
    if len(words) >= 2 and words[0].startswith("BRA") and words[-1].startswith("0x"):
        return int(words[-1], 16)
    return None


def loop_phases(source):
    """The consumers' step, phase by phase: the loop is the backward branch executed most often whose body holds
    HGMMAs; its body is cut at each gemm (a run of HGMMAs up to the one that commits the batch, `gsb0`) into the
    stretch before the gemm and the gemm's issue. -> ([(phase, samples per iteration, instructions per iteration)],
    iterations summed over the warps), or None if no such loop."""
    column, data, _ = _source_table(source)
    rows = [(int(r[0], 16), r[1].strip(), _number(r[column["Warp Stall Sampling (All Samples)"]]),
             _number(r[column["Instructions Executed"]])) for r in data if r[0].startswith("0x")]
    best = None
    for address, sass, _, executed in rows:
        target = _branch_target(sass)
        if target is None or target > address or executed == 0:
            continue
        body = [r for r in rows if target <= r[0] <= address]
        if any("HGMMA" in r[1] for r in body) and (best is None or executed > best[0]):
            best = (executed, body)
    if best is None:
        return None
    iterations, body = best
    phases, start, gemm = [], 0, 0
    for i, (_, sass, _, _) in enumerate(body):
        if "HGMMA" not in sass:
            continue
        if not any("HGMMA" in r[1] for r in body[start:i]):  # a gemm's first HGMMA
            phases.append((f"before gemm {gemm + 1}", body[start:i]))
            start = i
        if "gsb0" in sass:  # its last
            gemm += 1
            shape = sass.split()[0].split(".")[1]  # HGMMA.64x64x16.F32.BF16
            count = sum("HGMMA" in r[1] for r in body[start:i + 1])
            phases.append((f"gemm {gemm} ({shape} x {count})", body[start:i + 1]))
            start = i + 1
    phases.append((f"after gemm {gemm}", body[start:]))
    return [(name, sum(r[2] for r in part) / iterations, sum(r[3] for r in part) / iterations)
            for name, part in phases], iterations


def warp_cycles_per_sample(figures, source):
    """Warp cycles one stall sample stands for: elapsed cycles x achieved active warps per SM x SMs / samples."""
    samples = _source_table(source)[2]
    return (_number(figures.get("elapsed cycles", "0")) * _number(figures.get("achieved active warps per SM", "0"))
            * _number(figures.get("SMs", "0")) / samples)


def markdown_phases(impls, phases, cycles_per_sample):
    """The phase table of loop_phases, the implementations side by side (phases matched by position), in warp
    cycles per step (samples per iteration x warp_cycles_per_sample)."""
    found = [(impl, p, c) for impl, p, c in zip(impls, phases, cycles_per_sample) if p is not None]
    if not found:
        return "\nNo consumer loop (a backward branch around HGMMAs) found on the source pages.\n"
    lines = ["", "The consumers' step by phase (the hottest loop around the HGMMAs, cut at each gemm): one warp's "
             "cycles per step, from its stall samples, and its executed instructions:", ""]
    lines.append("| phase | " + " | ".join(f"{impl} cycles | {impl} instructions" for impl, _, _ in found) + " |")
    lines.append("|---|" + "---|---|" * len(found))
    for k in range(max(len(p[0]) for _, p, _ in found)):
        name = next((p[0][k][0] for _, p, _ in found if k < len(p[0])), "")
        cells = [f"{p[0][k][1] * c:.0f} | {p[0][k][2]:.0f}" if k < len(p[0]) else " | " for _, p, c in found]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("| whole step | " + " | ".join(f"{sum(x[1] for x in p[0]) * c:.0f} | {sum(x[2] for x in p[0]):.0f}"
                                            for _, p, c in found) + " |")
    return "\n".join(lines) + "\n"


def markdown_top(impls, tops):
    lines = []
    for impl, by_reason in zip(impls, tops):
        for reason, top in by_reason.items():
            if top is None:
                lines += ["", f"{impl}: ncu's source page has no stall_{reason} column."]
                continue
            lines += ["", f"{impl}: the instructions with the most {reason} samples (share of all samples):", "",
                      "| address | SASS | share |", "|---|---|---|"]
            lines += [f"| {address} | `{sass.strip()}` | {share:.2%} |" for address, sass, share in top]
    return "\n".join(lines) + "\n"


def markdown(impls, summaries):
    lines = ["| | " + " | ".join(impls) + " |", "|---|" + "---|" * len(impls)]
    for label, _ in DETAILS:
        lines.append(f"| {label} | " + " | ".join(s[0].get(label, "") for s in summaries) + " |")
    lines += ["", "Warp-stall samples (every warp of the CTA), share of all samples:", "",
              "| reason | " + " | ".join(impls) + " |", "|---|" + "---|" * len(impls)]
    first = summaries[0][1]
    for reason in sorted(first, key=lambda r: -first[r])[:11]:
        lines.append(f"| {reason} | " + " | ".join(f"{s[1].get(reason, 0):.1%}" for s in summaries) + " |")
    lines += ["", "Executed warp instructions by opcode (millions):", "",
              "| opcode | " + " | ".join(impls) + " |", "|---|" + "---|" * len(impls)]
    for opcode, _ in sum((s[2] for s in summaries), Counter()).most_common(18):
        lines.append(f"| {opcode} | " + " | ".join(f"{s[2][opcode] / 1e6:.0f}" for s in summaries) + " |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--impls", default="flashcute,fa4", help="comma-separated: flashcute, fa4")
    add_one_shape_args(parser)
    parser.add_argument("--top-stalls", default="short_sb",
                        help="comma-separated stall reasons (as in the summary, e.g. short_sb,long_sb) whose most "
                             "stalled instructions are listed per implementation")
    parser.add_argument("--top-count", type=int, default=12)
    parser.add_argument("--out", default=str(RESULTS), help="folder for the markdown and JSON results")
    parser.add_argument("--reports", default=None, help="folder for the ncu reports (default: a new temporary one)")
    parser.add_argument("--run", choices=tuple(KERNELS), help=argparse.SUPPRESS)  # the profiled process
    args = parser.parse_args()
    if args.run:
        run_backward(args.run, args)
        return
    impls = [i for i in args.impls.split(",") if i]
    unknown = [i for i in impls if i not in KERNELS]
    if unknown:
        parser.error(f"--impls: unknown {unknown}; expected some of {list(KERNELS)}")
    if shutil.which(os.environ.get("NCU", "ncu")) is None:
        sys.exit("ncu not found: put Nsight Compute on PATH or set NCU=/path/to/ncu")
    if not torch.cuda.is_available():
        sys.exit("needs a CUDA GPU")
    folder = Path(args.reports) if args.reports else Path(tempfile.mkdtemp(prefix="flashcute-ncu-"))
    folder.mkdir(parents=True, exist_ok=True)
    pages = [profile(impl, args, folder) for impl in impls]
    summaries = [summarize(*page) for page in pages]
    reasons = [r for r in args.top_stalls.split(",") if r]
    tops = [{r: top_stalled(source, r, args.top_count) for r in reasons} for _, source in pages]
    phases = [loop_phases(source) for _, source in pages]
    cycles_per_sample = [warp_cycles_per_sample(f, source) for (_, source), (f, _, _) in zip(pages, summaries)]
    commit = git_commit()
    shape = (f"{args.dtype}, hdim {args.head_dim}, {'causal' if args.causal else 'non-causal'}, batch {args.batch} x "
             f"{args.seqlen}, {args.heads} heads")
    text = (f"{versions(commit)}. {shape}; `{' '.join(sys.argv)}`; reports in {folder}\n\n"
            + markdown(impls, summaries) + markdown_phases(impls, phases, cycles_per_sample)
            + markdown_top(impls, tops))
    rows = [{"impl": impl, "figures": figures, "stalls": stalls, "instructions": dict(mix.most_common(40)),
             "top_stalled": top,
             "step_phases": phase and {"iterations": phase[1], "warp_cycles_per_sample": per_sample,
                                       "phases": phase[0]}}
            for impl, (figures, stalls, mix), top, phase, per_sample
            in zip(impls, summaries, tops, phases, cycles_per_sample)]
    write_results(args.out, f"bwd_ncu-{'-'.join(impls)}", "SM90 backward under ncu",
                  run_meta(torch.cuda.get_device_name(), commit), rows, text)
    print(text)


if __name__ == "__main__":
    main()
