"""What bench_fwd.py and bench_bwd.py share: the FlashAttention-paper grid and its flags, the extension's build and
load times, the timing (triton.testing.do_bench medians) and the matmul reference rate, the ratio table and
geometric means, the commit stamp and the results files. Importing it puts this checkout first on sys.path, so
the scripts import its flashcute.
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
from torch.nn.attention import SDPBackend

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
import flashcute  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
DTYPE_NAMES = {str(dtype).removeprefix("torch."): name for name, dtype in DTYPES.items()}
PEERS = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION}
CAUSAL = {"both": [False, True], "yes": [True], "no": [False]}
TOKENS, HIDDEN = 16384, 2048


def add_grid_args(parser: argparse.ArgumentParser):
    """The paper grid's flags and --backends."""
    parser.add_argument("--dtypes", default="bf16,fp16", help="comma-separated: bf16, fp16")
    parser.add_argument("--head-dims", default="64,128,256")
    parser.add_argument("--seqlens", default="512,1024,2048,4096,8192,16384")
    parser.add_argument("--causal", choices=["both", "yes", "no"], default="both")
    parser.add_argument("--backends", default=None,
                        help="flashcute backends (default: those the build has for this GPU)")


def add_one_shape_args(parser: argparse.ArgumentParser):
    """One backward shape's flags (ncu_bwd_stalls.py, bwd_energy.py): bf16 hdim 128 non-causal 2 x 8k, 16 heads."""
    parser.add_argument("--dtype", default="bf16", choices=tuple(DTYPES))
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seqlen", type=int, default=8192)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--causal", action="store_true")


def one_shape_inputs(args):
    """q, k, v, dout of add_one_shape_args' shape, (b, s, h, d)."""
    shape = (args.batch, args.seqlen, args.heads, args.head_dim)
    return tuple(torch.randn(shape, device="cuda", dtype=DTYPES[args.dtype]) for _ in range(4))


def backward_call(impl, q, k, v, dout, causal):
    """A function running one implementation's backward once, on a forward computed here once: flashcute's op
    (torch.ops.flashcute.bwd, backend sm90), FlashAttention-4 ("fa4") or torch SDPA's cuDNN backend ("cudnn")
    through torch.autograd.grad."""
    if impl == "flashcute":
        out, lse = torch.ops.flashcute.fwd(q, k, v, None, causal, False, "sm90")
        return lambda: torch.ops.flashcute.bwd(dout, q, k, v, out, lse, None, causal, False, False, "sm90")
    if impl == "fa4":
        from flash_attn.cute import flash_attn_func

        leaves = [t.detach().requires_grad_() for t in (q, k, v)]
        out, _ = flash_attn_func(*leaves, causal=causal)
        return lambda: torch.autograd.grad(out, leaves, dout, retain_graph=True)
    if impl == "cudnn":
        from torch.nn.attention import sdpa_kernel

        leaves = [t.transpose(1, 2).contiguous().requires_grad_() for t in (q, k, v)]
        dout_t = dout.transpose(1, 2).contiguous()
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            out = torch.nn.functional.scaled_dot_product_attention(*leaves, is_causal=causal)

        def call():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return torch.autograd.grad(out, leaves, dout_t, retain_graph=True)
        return call
    raise ValueError(f"unknown implementation {impl!r}; expected flashcute, fa4 or cudnn")


def length(text):
    """"512k" -> 524288, "2048" -> 2048."""
    text = text.strip().lower()
    return int(text[:-1]) * 1024 if text.endswith("k") else int(text)


def csv(text, convert=str):
    return [convert(x) for x in text.split(",") if x]


def paper_shapes(args, dtype_name):
    """(dtype, head_dim, causal, batch, seqlen, heads_q, heads_kv, on the paper grid) of one dtype, from the flags."""
    return [(DTYPES[dtype_name], head_dim, causal, TOKENS // seqlen, seqlen, HIDDEN // head_dim, HIDDEN // head_dim, True)
            for head_dim in csv(args.head_dims, int) for causal in CAUSAL[args.causal] for seqlen in csv(args.seqlens, int)]


def flashcute_backends(args, op):
    """--backends, else each backend whose kernels of op ("fwd", "bwd") the extension has (FLASHCUTE_KERNELS may
    leave one out), sm90 on Hopper only."""
    if args.backends:
        return csv(args.backends)
    hopper = torch.cuda.get_device_capability()[0] == 9
    built = torch.ops.flashcute.built_kernels()  # names as "fwd_sm90_bf16_hdim128"
    return [arch for arch in ("sm80", "sm90")
            if (arch == "sm80" or hopper) and any(n.startswith(f"{op}_{arch}_") for n in built)]


def first_line(error):
    """An exception's first line, for a note that an implementation did not run."""
    return (str(error).splitlines() or [type(error).__name__])[0][:160]


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


def matmul_rates(dtype_names):
    """Each dtype's matmul rate (TFLOP/s), and the text reporting them, to follow "matmul" or "Matmul"."""
    rates = {name: matmul_tflops(DTYPES[name]) for name in dtype_names}
    text = ", ".join(f"{name} {rate:.0f}" for name, rate in rates.items())
    return rates, f" (torch.mm 8192^3, timed like the shapes), TFLOP/s: {text}"


# ------------------------------------------------------------------------------------------- reporting

def ratio(row, a, b):
    x, y = row["tflops"].get(a), row["tflops"].get(b)
    return x / y if x and y else None


def paper_ratios(rows, a, b):
    """(a / b, row) over the paper shapes where both ran."""
    return [(r, row) for row in rows if row["paper"] and (r := ratio(row, a, b))]


def geomean(values):
    return math.exp(sum(map(math.log, values)) / len(values))


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
            values = [r for r, _ in paper_ratios(rows, f"flashcute_{backend}", peer)]
            if values:
                lines.append(f"{backend}/{peer} over {len(values)} paper shapes: geomean {geomean(values):.3f} "
                             f"(min {min(values):.3f}, max {max(values):.3f}), below 0.9: "
                             f"{sum(v < 0.9 for v in values)}, at or above 1.0: {sum(v >= 1.0 for v in values)}")
    return lines


def fmt(x, digits=1):
    return "-" if x is None else f"{x:.{digits}f}"


def shape_text(row):
    return f"{row['dtype']} d={row['d']} causal={row['causal']} b={row['b']} s={row['s']} h={row['hq']}/{row['hkv']}"


def table(rows, backends, peers, matmul, ratio_peers):
    """Markdown: each shape's TFLOP/s per implementation, flashcute/peer for the ratio_peers that ran, each
    flashcute backend as a fraction of its dtype's matmul rate, extra peak MiB per implementation."""
    impls = [f"flashcute_{b}" for b in backends] + peers
    ratios = [(f"flashcute_{b}", p) for b in backends for p in ratio_peers if p in peers]
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


def versions(commit):
    """The line naming what ran: torch, CUDA, cuDNN, flashcute and its commit."""
    return (f"torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}, "
            f"flashcute {flashcute.__version__} ({commit})")


def run_meta(device, commit):
    """The results file's record of what ran where."""
    return {"device": device, "torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
            "flashcute": flashcute.__version__, "commit": commit, "host": platform.node()}


def write_results(out, prefix, title, meta, rows, text):
    """<out>/<prefix>_<date>_<device>.json (meta and rows) and .md ("# <title>, <device>, <date>", then text); a
    second run within the same minute gets _2, _3, ... rather than overwriting the first's."""
    stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H%M")
    device = meta["device"]
    base = f"{prefix}_{stamp}_{re.sub(r'[^A-Za-z0-9]+', '-', device).strip('-')}"
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    name, n = base, 1
    while (out / f"{name}.json").exists() or (out / f"{name}.md").exists():
        n += 1
        name = f"{base}_{n}"
    (out / f"{name}.json").write_text(json.dumps({"date": stamp, **meta, "rows": rows}, indent=1))
    (out / f"{name}.md").write_text(f"# {title}, {device}, {stamp}\n\n{text}")
    print(f"\nwrote {out / name}.json and .md")
