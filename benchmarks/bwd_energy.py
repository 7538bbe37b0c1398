"""Energy per backward call under the power cap: flashcute's SM90 backward beside FlashAttention-4's (and cuDNN's).

    python benchmarks/bwd_energy.py                                   # bf16 hdim 128 non-causal 2 x 8k
    python benchmarks/bwd_energy.py --causal --impls flashcute,fa4,cudnn --seconds 5 --rounds 2

Each implementation's backward runs back to back for --seconds while nvidia-smi samples the board's power and SM
clock every 50 ms; the implementations take turns, --rounds times. Per call: milliseconds, mean watts, joules
(watts x seconds), mean SM clock and cycles (clock x seconds). A kernel held at the power cap runs at the clock the
cap allows, so its time per call is its energy per call over the cap: a change that saves energy (fewer L2
reductions, fewer instructions) shortens the call even where ncu's cycles, counted on one launch below the cap, do
not move. Prints a table (headed by the board's power limit and highest SM clock) and writes it with the samples'
summary as JSON to --out (default benchmarks/results/).

flashcute is this checkout's (torch.ops.flashcute.bwd on a forward computed once, backend sm90); FlashAttention-4
(flash-attn-4 wheel) and cuDNN (torch SDPA) through torch.autograd.grad on a forward graph built once. Needs a GPU
and nvidia-smi.
"""

import argparse
import datetime
import shutil
import signal
import statistics
import subprocess
import time

import torch

from _common import (RESULTS, add_one_shape_args, backward_call, git_commit, one_shape_inputs, run_meta, versions,
                     write_results)

SAMPLE_MS = 50
SETTLE_S = 0.5  # samples this long after the start of a turn are left out: power and clock are still moving


def parse_samples(text: str) -> list[tuple[float, float, float]]:
    """nvidia-smi's CSV lines "timestamp, power.draw [W], clocks.sm [MHz]" as (epoch seconds, watts, MHz); lines
    it could not measure ("[N/A]") are skipped."""
    samples = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 3:
            continue
        try:
            stamp = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            samples.append((stamp, float(parts[1]), float(parts[2])))
        except ValueError:
            continue
    return samples


def summarize(samples, start: float, end: float, calls: int) -> dict:
    """One turn: `calls` calls between epoch seconds start and end, with the samples taken meanwhile."""
    inside = [(w, mhz) for t, w, mhz in samples if start + SETTLE_S <= t <= end]
    if not inside:
        raise RuntimeError(f"no power sample inside the {end - start:.2f} s turn (after {SETTLE_S} s to settle)")
    seconds = (end - start) / calls
    watts = statistics.fmean(w for w, _ in inside)
    mhz = statistics.fmean(m for _, m in inside)
    return {"ms": seconds * 1e3, "watts": watts, "joules": watts * seconds, "mhz": mhz,
            "mcycles": mhz * seconds, "calls": calls, "samples": len(inside)}


def parse_limits(text: str) -> dict:
    """nvidia-smi's CSV line "power.limit [W], enforced.power.limit [W], clocks.max.sm [MHz]" as a dict; a field
    the board does not report ([N/A]) is left out."""
    fields = [f.strip() for f in text.strip().splitlines()[0].split(",")] if text.strip() else []
    limits = {}
    for key, value in zip(("power_limit_w", "enforced_power_limit_w", "max_sm_mhz"), fields):
        try:
            limits[key] = float(value)
        except ValueError:
            pass
    return limits


def board_limits(gpu: int) -> dict:
    """The power cap the board holds the calls to, and its highest SM clock; {} where nvidia-smi cannot say."""
    try:
        query = "--query-gpu=power.limit,enforced.power.limit,clocks.max.sm"
        text = subprocess.run(["nvidia-smi", "-i", str(gpu), query, "--format=csv,noheader,nounits"],
                              capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    return parse_limits(text)


def run_turn(fn, seconds: float, gpu: int) -> dict:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    command = ["nvidia-smi", "-i", str(gpu), "--query-gpu=timestamp,power.draw,clocks.sm",
               "--format=csv,noheader,nounits", "-lms", str(SAMPLE_MS)]
    if shutil.which("stdbuf"):
        command = ["stdbuf", "-oL"] + command  # line-buffered: no sample left in the pipe's buffer at the end
    sampler = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    time.sleep(0.2)  # nvidia-smi's start
    start, calls = time.time(), 0
    while time.time() - start < seconds:
        fn()
        calls += 1
        if calls % 8 == 0:
            torch.cuda.synchronize()  # a bounded queue: the wall time is the GPU's
    torch.cuda.synchronize()
    end = time.time()
    sampler.send_signal(signal.SIGINT)  # nvidia-smi's loop ends as on Ctrl-C
    text, _ = sampler.communicate(timeout=10)
    return summarize(parse_samples(text), start, end, calls)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--impls", default="flashcute,fa4", help="comma-separated: flashcute, fa4, cudnn")
    add_one_shape_args(parser)
    parser.add_argument("--seconds", type=float, default=4.0, help="each implementation's turn")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--gpu", type=int, default=0, help="nvidia-smi's index of the GPU torch uses")
    parser.add_argument("--out", default=str(RESULTS), help="folder for the markdown and JSON results")
    args = parser.parse_args()
    if args.seconds <= 2 * SETTLE_S:
        parser.error(f"--seconds must exceed {2 * SETTLE_S} (the first {SETTLE_S} s of a turn are not sampled)")

    q, k, v, dout = one_shape_inputs(args)
    impls = [i for i in args.impls.split(",") if i]
    calls = {impl: backward_call(impl, q, k, v, dout, args.causal) for impl in impls}
    turns = {impl: [] for impl in impls}
    for _ in range(args.rounds):
        for impl in impls:
            turns[impl].append(run_turn(calls[impl], args.seconds, args.gpu))

    device = torch.cuda.get_device_name()
    what = (f"{args.dtype}, hdim {args.head_dim}, {'causal' if args.causal else 'non-causal'}, batch {args.batch} x "
            f"{args.seqlen}, {args.heads} heads; {args.rounds} rounds of {args.seconds:g} s turns")
    commit = git_commit()
    limits = board_limits(args.gpu)
    if limits:
        what += "; board: " + ", ".join(f"{name} {limits[key]:.0f} {unit}" for key, name, unit in (
            ("power_limit_w", "power limit", "W"), ("enforced_power_limit_w", "enforced", "W"),
            ("max_sm_mhz", "max SM clock", "MHz")) if key in limits)
    lines = [versions(commit) + ".", what + ".", "",
             "| implementation | round | ms | W | J | SM MHz | M cycles |", "|---|---|---|---|---|---|---|"]
    for impl in impls:
        for r, t in enumerate(turns[impl], 1):
            lines.append(f"| {impl} | {r} | {t['ms']:.3f} | {t['watts']:.0f} | {t['joules']:.3f} | {t['mhz']:.0f} | "
                         f"{t['mcycles']:.2f} |")
    if "flashcute" in impls:
        for peer in (i for i in impls if i != "flashcute"):
            ratio = {key: statistics.median(t[key] for t in turns["flashcute"]) /
                     statistics.median(t[key] for t in turns[peer]) for key in ("ms", "joules", "mcycles")}
            lines.append(f"\nflashcute / {peer} (medians): time {ratio['ms']:.3f}, energy {ratio['joules']:.3f}, "
                         f"cycles {ratio['mcycles']:.3f}")
    text = "\n".join(lines)
    print(f"# Backward energy per call, {device}\n\n{text}")
    meta = {**run_meta(device, commit), "args": vars(args), "board": limits}
    write_results(args.out, "bwd_energy", "Backward energy per call", meta, turns, text)


if __name__ == "__main__":
    main()
