"""Forward attention throughput: flashcute's backends beside torch SDPA's flash, cuDNN and efficient backends,
all measured in the same run on the same GPU.

Shapes follow the FlashAttention papers: batch * seqlen = 16k tokens, hidden 2048 (heads = 2048 / head_dim),
seqlen 512 ... 16k, causal and not. FLOPs = 4 * batch * heads * seqlen_q * seqlen_k * head_dim, halved for
causal. Times are triton.testing.do_bench medians. Also reported: the extension's JIT build time (cold) and
its cached load time, each implementation's extra peak memory per call, and the matmul rate of each dtype
timed the same way (torch.mm, 8192^3): long runs settle at the clock the board's power cap allows, well
below a short burst's, and that is the rate the attention kernels compete with: each flashcute figure is also
given as a fraction of it. The run ends with each flashcute backend's geometric-mean ratio to each peer over
the paper shapes.

    python benchmarks/bench_fwd.py                         # the full paper grid, bf16 and fp16
    python benchmarks/bench_fwd.py --dtypes bf16 --head-dims 128 --seqlens 1024,4096   # a quick look
    python benchmarks/bench_fwd.py --extras                # + head dims 96/192 at seqlen 8448, and GQA 64/8
    python benchmarks/bench_fwd.py --cold-build            # + a fresh JIT build into a temporary cache, timed

Results (JSON and markdown, named by date and device) go to benchmarks/results/ or --out.
"""

import argparse
import datetime
import json
import math
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
import flashcute  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
DTYPE_NAMES = {str(dtype).removeprefix("torch."): name for name, dtype in DTYPES.items()}
PEERS = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION}
TOKENS, HIDDEN = 16384, 2048


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtypes", default="bf16,fp16", help="comma-separated: bf16, fp16")
    parser.add_argument("--head-dims", default="64,128,256")
    parser.add_argument("--seqlens", default="512,1024,2048,4096,8192,16384")
    parser.add_argument("--causal", choices=["both", "yes", "no"], default="both")
    parser.add_argument("--backends", default=None, help="flashcute backends (default: sm80, and sm90 where built)")
    parser.add_argument("--peers", default="flash,cudnn,efficient", help="torch SDPA backends to run beside")
    parser.add_argument("--extras", action="store_true", help="head dims 96/192 at seqlen 8448, and GQA 64q/8kv d128 16k")
    parser.add_argument("--cold-build", action="store_true", help="also time a fresh JIT build into a temporary cache")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results"), help="folder for the JSON and markdown")
    return parser.parse_args()


def csv(text, convert=str):
    return [convert(x) for x in text.split(",") if x]


# ------------------------------------------------------------------------------------------- build times

def build_times(cold_build):
    library = flashcute.load_extension()
    times = {
        "kind": library.kind,
        "built_in_this_process": library.built_now,
        "build_seconds": library.build_seconds,  # recorded when this library was compiled (cold, all files)
        "load_seconds_this_process": library.load_seconds,
        "cached_load_seconds": cached_load_seconds(),
    }
    if cold_build:
        times["cold_build_seconds"] = cold_build_seconds()
    return library, times


def cached_load_seconds():
    """flashcute.load_extension() in a fresh process (torch already imported) with the cache warm."""
    code = (
        "import time, torch; start = time.perf_counter(); import flashcute; flashcute.load_extension(); "
        "print(time.perf_counter() - start)"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True,
                            env={**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"})
    return float(result.stdout.strip().splitlines()[-1])


def cold_build_seconds():
    with tempfile.TemporaryDirectory() as cache:
        code = "import flashcute; print(flashcute.build())"
        env = {**os.environ, "FLASHCUTE_CACHE_DIR": cache, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, check=True)
        return time.perf_counter() - start


# ------------------------------------------------------------------------------------------- measuring

def measure(fn):
    """(median milliseconds, extra peak MiB of one call)."""
    from triton.testing import do_bench

    fn()  # compile/plan outside the timing; raise here if the implementation refuses the shape
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    result = fn()
    torch.cuda.synchronize()
    peak_mib = (torch.cuda.max_memory_allocated() - base) / 2**20
    del result
    return do_bench(fn, warmup=25, rep=100, return_mode="median"), peak_mib


def matmul_tflops(dtype, n=8192):
    """torch.mm of two random n x n matrices, timed like the attention shapes."""
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn_like(a)
    ms, _ = measure(lambda: torch.mm(a, b))
    return 2 * n**3 / (ms * 1e-3) / 1e12


def bench_shape(dtype, head_dim, causal, batch, seqlen, heads_q, heads_kv, paper, backends, peers):
    flops = 4 * batch * heads_q * seqlen * seqlen * head_dim / (2 if causal else 1)
    q = torch.randn(batch, seqlen, heads_q, head_dim, device="cuda", dtype=dtype)
    k = torch.randn(batch, seqlen, heads_kv, head_dim, device="cuda", dtype=dtype)
    v = torch.randn_like(k)
    row = {"dtype": str(dtype).removeprefix("torch."), "d": head_dim, "causal": causal, "b": batch, "s": seqlen,
           "hq": heads_q, "hkv": heads_kv, "paper": paper, "tflops": {}, "peak_mib": {}, "notes": {}}

    def record(name, fn):
        try:
            ms, peak = measure(fn)
        except RuntimeError as error:  # a peer that does not serve this shape
            row["notes"][name] = str(error).splitlines()[0][:160]
            return
        row["tflops"][name] = flops / (ms * 1e-3) / 1e12
        row["peak_mib"][name] = peak

    outputs = {}
    for backend in backends:
        record(f"flashcute_{backend}", lambda: flashcute.flash_attn_func(q, k, v, causal=causal, backend=backend))
        outputs[backend] = flashcute.flash_attn_func(q, k, v, causal=causal, backend=backend)

    # Peers get contiguous (b, h, s, d) tensors, their preferred layout; GQA through enable_gqa.
    qt, kt, vt = (t.transpose(1, 2).contiguous() for t in (q, k, v))
    del q, k, v
    gqa = heads_q != heads_kv
    for name in peers:
        with sdpa_kernel(PEERS[name]):
            record(name, lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, enable_gqa=gqa))
            if name == "flash" and "flash" in row["tflops"]:  # a sanity check of flashcute against torch's flash
                reference = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, enable_gqa=gqa).transpose(1, 2)
                row["max_abs_diff_vs_flash"] = {b: (o.float() - reference.float()).abs().max().item() for b, o in outputs.items()}
    return row


# ------------------------------------------------------------------------------------------- reporting

def ratio(row, a, b):
    x, y = row["tflops"].get(a), row["tflops"].get(b)
    return x / y if x and y else None


def of_matmul(row, name, matmul):
    """A row's rate as a fraction of the matmul rate of its dtype, measured in the same run."""
    x, rate = row["tflops"].get(name), matmul.get(DTYPE_NAMES[row["dtype"]])
    return x / rate if x and rate else None


def geomean_lines(rows, backends, peers):
    """Per flashcute backend and peer: the geometric-mean ratio over the paper shapes, its range, and the
    shapes below 0.9 and at or above 1.0."""
    lines = []
    for backend in backends:
        for peer in peers:
            values = [r for r in (ratio(row, f"flashcute_{backend}", peer) for row in rows if row["paper"]) if r]
            if values:
                geomean = math.exp(sum(map(math.log, values)) / len(values))
                lines.append(f"{backend}/{peer} over {len(values)} paper shapes: geomean {geomean:.3f} "
                             f"(min {min(values):.3f}, max {max(values):.3f}), below 0.9: "
                             f"{sum(v < 0.9 for v in values)}, at or above 1.0: {sum(v >= 1.0 for v in values)}")
    return lines


def fmt(x, digits=1):
    return "-" if x is None else f"{x:.{digits}f}"


def table(rows, backends, peers, matmul):
    impls = [f"flashcute_{b}" for b in backends] + peers
    ratios = [(f"flashcute_{b}", p) for b in backends for p in ("flash", "cudnn") if p in peers]
    header = ["dtype", "d", "causal", "b", "s", "hq/hkv"] + [i.removeprefix("flashcute_") for i in impls]
    header += [f"{a.removeprefix('flashcute_')}/{p}" for a, p in ratios] + [f"{b}/matmul" for b in backends]
    header += [f"peak MiB {i.removeprefix('flashcute_')}" for i in impls]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        cells = [row["dtype"], str(row["d"]), "yes" if row["causal"] else "no", str(row["b"]), str(row["s"]), f"{row['hq']}/{row['hkv']}"]
        cells += [fmt(row["tflops"].get(i)) for i in impls]
        cells += [fmt(ratio(row, a, p), 2) for a, p in ratios]
        cells += [fmt(of_matmul(row, f"flashcute_{b}", matmul), 2) for b in backends]
        cells += [fmt(row["peak_mib"].get(i), 0) for i in impls]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def git_commit():
    """HEAD, marked "+modified" when csrc/ differs from it (a copied tree can carry older git metadata), and
    a hash of csrc/'s sources and headers, which names the kernels' code whatever git says."""
    def git(*cmd):
        try:
            return subprocess.run(["git", *cmd], cwd=REPO, capture_output=True, text=True).stdout.strip()
        except OSError:
            return ""

    head = git("rev-parse", "--short", "HEAD")
    if head and git("status", "--porcelain", "--", "csrc"):
        head += "+modified"
    from flashcute import _build

    sources = _build.sources_hash(sorted(_build.CSRC_DIR.rglob("*.cu")) + sorted(_build.CSRC_DIR.rglob("*.cpp")))
    return f"{head}, csrc {sources[:12]}" if head else f"csrc {sources[:12]}"


def main():
    args = parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench_fwd.py needs a CUDA GPU")
    library, times = build_times(args.cold_build)
    built = set(torch.ops.flashcute.built_kernels())
    hopper = torch.cuda.get_device_capability()[0] == 9
    backends = csv(args.backends) if args.backends else ["sm80"] + (["sm90"] if hopper and any(n.startswith("sm90") for n in built) else [])
    peers = csv(args.peers)
    causals = {"both": [False, True], "yes": [True], "no": [False]}[args.causal]

    shapes = []  # (dtype, head_dim, causal, batch, seqlen, heads_q, heads_kv, on the paper grid)
    for dtype_name in csv(args.dtypes):
        for head_dim in csv(args.head_dims, int):
            for causal in causals:
                for seqlen in csv(args.seqlens, int):
                    shapes.append((DTYPES[dtype_name], head_dim, causal, TOKENS // seqlen, seqlen, HIDDEN // head_dim, HIDDEN // head_dim, True))
        if args.extras:
            for head_dim in (96, 192):
                for causal in causals:
                    heads = round(HIDDEN / head_dim)
                    shapes.append((DTYPES[dtype_name], head_dim, causal, round(TOKENS / 8448), 8448, heads, heads, False))
            for causal in causals:
                shapes.append((DTYPES[dtype_name], 128, causal, 1, 16384, 64, 8, False))

    device = torch.cuda.get_device_name()
    print(f"{device}, torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}, "
          f"flashcute {flashcute.__version__} ({git_commit()}), backends {backends}, peers {peers}")
    print(f"extension: {times}")
    matmul = {name: matmul_tflops(DTYPES[name]) for name in csv(args.dtypes)}
    matmul_text = ", ".join(f"{name} {rate:.0f}" for name, rate in matmul.items())
    print(f"matmul (torch.mm 8192^3, timed like the shapes), TFLOP/s: {matmul_text}")
    rows = []
    for shape in shapes:
        row = bench_shape(*shape, backends, peers)
        rows.append(row)
        summary = "  ".join(f"{k.removeprefix('flashcute_')} {v:.1f}" for k, v in row["tflops"].items())
        print(f"{row['dtype']} d={row['d']} causal={row['causal']} b={row['b']} s={row['s']} h={row['hq']}/{row['hkv']}: {summary}", flush=True)
        for name, note in row["notes"].items():
            print(f"  {name} did not run: {note}")
        for name, diff in row.get("max_abs_diff_vs_flash", {}).items():
            if diff > 0.05:
                print(f"  WARNING: flashcute {name} differs from torch's flash by {diff:.3f}")

    markdown = table(rows, backends, peers, matmul)
    ratio_lines = geomean_lines(rows, backends, peers)
    print()
    print(markdown)
    print()
    print("\n".join(ratio_lines))
    stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H%M")
    name = f"fwd_{stamp}_{re.sub(r'[^A-Za-z0-9]+', '-', device).strip('-')}"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {
        "date": stamp, "device": device, "torch": torch.__version__, "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(), "flashcute": flashcute.__version__, "commit": git_commit(),
        "host": platform.node(), "extension": {**times, "path": str(library.path)}, "backends": backends, "peers": peers,
        "matmul_tflops": matmul,
    }
    (out / f"{name}.json").write_text(json.dumps({**meta, "rows": rows}, indent=1))
    (out / f"{name}.md").write_text(
        f"# flashcute forward, {device}, {stamp}\n\n"
        f"torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}, "
        f"flashcute {flashcute.__version__} ({git_commit()}). TFLOP/s (do_bench median); ratios flashcute/peer; "
        f"<backend>/matmul: fraction of the same dtype's matmul rate; extra peak memory of one call in MiB.\n\n"
        f"Extension: {json.dumps(times)}\n\n"
        f"Matmul (torch.mm 8192^3, timed like the shapes), TFLOP/s: {matmul_text}\n\n{markdown}\n\n"
        + "".join(f"- {line}\n" for line in ratio_lines)
    )
    print(f"\nwrote {out / name}.json and .md")


if __name__ == "__main__":
    main()
