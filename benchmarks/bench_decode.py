"""Decoding with a KV cache: flashcute.flash_attn_with_kvcache over a contiguous and a paged cache, the
fixed-length flash_attn_func on the same cache, and torch SDPA's cuDNN and flash (FlashAttention-2) backends,
all in one run on the same random tensors, in GB/s against the device's copy bandwidth measured in the same run.

    python benchmarks/bench_decode.py                      # the full grid: bf16/fp16 x d 64/128 x GQA/MHA x 6 shapes
    python benchmarks/bench_decode.py --quick              # bf16, d128, GQA, (b, sk) = (1, 512k) and (8, 128k), sq 1
    python benchmarks/bench_decode.py --shapes 1:1:512k,16:4:32k --heads gqa   # b:sq:sk filter, "k" = 1024
    python benchmarks/bench_decode.py --left-padded --dtypes bf16 --head-dims 128 --heads gqa   # padded batches

Heads: hq 32 with hkv 8 ("gqa") or 32 ("mha"). Shapes (b, sq, sk): sq 1 with (b, sk) = (1, 512k), (8, 128k),
(64, 8k), (128, 2k); sq 4 and 16 with (16, 32k). Non-causal; every sequence uses the whole cache
(cache_seqlens = sk). The paged cache holds the same keys in pages of --page-size rows, placed by a random
permutation (fixed seed; --page-order sequential: in order) through an int32 block table. Peers read (b, h, s, d)
views of the (b, s, h, d) tensors (--peer-layout bhsd gives them contiguous copies), GQA through enable_gqa; a
peer that refuses enable_gqa runs again on K/V expanded to hq heads once, outside the timing ("expanded kv" in
the notes), and still counts the hkv-head cache bytes. GB/s = (K + V of the cache, b * sk * hkv * d * 2 * element size,
plus Q read and O written, b * sq * hq * d * element size each) / time; times are triton.testing.do_bench
medians (_common.measure). "copy" is dst.copy_(src) of a --copy-gib GiB bf16 buffer, (read + write) / time.
A shape whose tensors would not fit in free GPU memory with room to spare is skipped, the reason in its notes.
Prints a table and the issue's bar checks, writes JSON and markdown to benchmarks/results/ (or --out).

--left-padded: a padded batch, as generate() decodes one: sequence i's first pad_i keys are padding (pad_i
uniform in [0, sk / 2), fixed seed; the first sequence none). flash_attn_with_kvcache with cache_leftpad
("flashcute") against flash_attn_varlen_func over the unpadded keys ("flashcute_varlen", the packed batch the
transformers integration ran such steps on before cache_leftpad); GB/s counts the unpadded keys only. No paged
cache and no peers in this mode (torch SDPA would need an attn_mask).
"""

import argparse
import sys
import warnings

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from _common import (DTYPES, RESULTS, csv, first_line, fmt, git_commit, length, measure, run_meta, versions,
                     write_results)
import flashcute  # noqa: E402  (after _common, which puts this checkout first on sys.path)

HEADS = {"gqa": (32, 8), "mha": (32, 32)}  # name -> (hq, hkv)
SHAPES = [(1, 1, 524288), (8, 1, 131072), (64, 1, 8192), (128, 1, 2048), (16, 4, 32768), (16, 16, 32768)]  # b, sq, sk
QUICK_SHAPES = [(1, 1, 524288), (8, 1, 131072)]
PEERS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}
IMPLS = ["flashcute", "flashcute_paged", "flashcute_fwd", "cudnn", "flash"]
RATIOS = [("flashcute", "cudnn"), ("flashcute", "flash"), ("flashcute_paged", "flashcute"), ("flashcute", "copy")]
LEFT_PADDED_IMPLS = ["flashcute", "flashcute_varlen"]
LEFT_PADDED_RATIOS = [("flashcute", "flashcute_varlen"), ("flashcute", "copy")]
RATIO_NAMES = {("flashcute_paged", "flashcute"): "paged/contiguous"}
GIB = 2**30
HEADROOM = 0.9, 2 * GIB  # a shape runs where its tensors fit in 90% of free memory less 2 GiB


def parse_shapes(text):
    shapes = []
    for item in csv(text):
        parts = item.split(":")
        if len(parts) != 3:
            raise argparse.ArgumentTypeError(f"--shapes: {item!r} is not b:sq:sk")
        shapes.append(tuple(length(p) for p in parts))
    return shapes


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtypes", default="bf16,fp16", help="comma-separated: bf16, fp16")
    parser.add_argument("--head-dims", default="64,128")
    parser.add_argument("--heads", default="gqa,mha", help="gqa (hq 32 / hkv 8), mha (hq 32 / hkv 32)")
    parser.add_argument("--shapes", default=None, type=parse_shapes,
                        help="only these b:sq:sk (comma-separated, 'k' = 1024), e.g. 1:1:512k,8:1:128k")
    parser.add_argument("--page-size", type=int, default=64, help="rows per page of the paged cache")
    parser.add_argument("--page-order", choices=["random", "sequential"], default="random",
                        help="pages of the paged cache in a random order (as a serving engine's pool holds them), or "
                             "each sequence's pages one after another (the contiguous cache's memory order)")
    parser.add_argument("--peers", default="cudnn,flash", help="torch SDPA backends to run beside: cudnn, flash")
    parser.add_argument("--peer-layout", choices=["views", "bhsd"], default="views",
                        help="peers read (b, h, s, d) views of the cache (default) or contiguous copies")
    parser.add_argument("--copy-gib", type=float, default=2.0, help="size of the copy-bandwidth buffer, GiB")
    parser.add_argument("--left-padded", action="store_true",
                        help="left-padded batches: cache_leftpad against the packed batch (no peers)")
    parser.add_argument("--quick", action="store_true",
                        help="bf16, d128, gqa, (b, sq, sk) = (1, 1, 512k) and (8, 1, 128k) only")
    parser.add_argument("--out", default=str(RESULTS), help="folder for the JSON and markdown")
    args = parser.parse_args()
    if args.quick:
        args.dtypes, args.head_dims, args.heads = "bf16", "128", "gqa"
        args.shapes = [s for s in QUICK_SHAPES if args.shapes is None or s in args.shapes]
    for name in csv(args.heads):
        if name not in HEADS:
            parser.error(f"--heads: {name!r} is not one of {', '.join(HEADS)}")
    for name in csv(args.peers):
        if name not in PEERS:
            parser.error(f"--peers: {name!r} is not one of {', '.join(PEERS)}")
    return args


# ------------------------------------------------------------------------------------------- flashcute entry points

def flashcute_api(name):
    """flashcute.<name>, or (None, why) where this checkout has none (an older one) or it cannot be imported."""
    try:
        return getattr(flashcute, name), None
    except Exception as error:
        return None, f"{type(error).__name__}: {first_line(error)}"


def kvcache_caller(fn):
    """fn(q, k_cache, v_cache, seqlens, block_table=None, leftpad=None): flash_attn_with_kvcache on a cache of that
    many keys (from leftpad on where given)."""

    def call(q, k_cache, v_cache, seqlens, block_table=None, leftpad=None):
        if leftpad is None:
            return fn(q, k_cache, v_cache, cache_seqlens=seqlens, block_table=block_table)
        return fn(q, k_cache, v_cache, cache_seqlens=seqlens, cache_leftpad=leftpad)

    return call


# ------------------------------------------------------------------------------------------- measuring

def copy_bandwidth(gib):
    """dst.copy_(src) of gib GiB of bf16, (read + write bytes) / time in GB/s, and the bytes moved per call."""
    n = int(gib * GIB) // 2
    src = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    ms, _ = measure(lambda: dst.copy_(src))
    src = dst = None  # noqa: F841 (freed before the shapes)
    torch.cuda.empty_cache()
    moved = 2 * n * 2
    return moved / (ms * 1e-3) / 1e9, moved


def fits(needed):
    """(whether needed bytes fit in free GPU memory with room to spare, the text of the room there is)."""
    torch.cuda.empty_cache()
    free, _ = torch.cuda.mem_get_info()
    room = HEADROOM[0] * free - HEADROOM[1]
    return needed <= room, f"room for {gb(max(room, 0))} ({HEADROOM[0]:.0%} of {gb(free)} free, less {gb(HEADROOM[1])})"


def gb(x):
    return f"{x / 1e9:.1f} GB"


def bench_left_padded(row, q, k, v, seqlens, kvcache, varlen, record, keep, outputs):
    """--left-padded: the decode kernel with cache_leftpad, and the packed batch over the unpadded keys; row's
    bytes count those keys. Returns the row."""
    batch, seqlen_q, hq, head_dim = q.shape
    seqlen_k = k.shape[1]
    pads = torch.randint(0, max(seqlen_k // 2, 1), (batch,), generator=torch.Generator().manual_seed(1))
    pads[0] = 0
    lengths = seqlen_k - pads
    elem = q.element_size()
    row["bytes"] = int(lengths.sum()) * k.shape[2] * head_dim * 2 * elem + 2 * batch * seqlen_q * hq * head_dim * elem
    row["pads"] = pads.tolist()
    pads = pads.to(device="cuda", dtype=torch.int32)
    if kvcache is not None:
        keep("flashcute", lambda: kvcache(q, k, v, seqlens, leftpad=pads))
    else:
        row["notes"]["flashcute"] = "flash_attn_with_kvcache unavailable"
    if varlen is None:
        row["notes"]["flashcute_varlen"] = "flash_attn_varlen_func unavailable"
        return row
    valid = torch.arange(seqlen_k, device="cuda")[None] >= pads[:, None]  # (b, sk)
    k_packed, v_packed = k[valid], v[valid]
    cu_k = F.pad(lengths.to(device="cuda", dtype=torch.int32).cumsum(0, dtype=torch.int32), (1, 0))
    cu_q = torch.arange(batch + 1, device="cuda", dtype=torch.int32) * seqlen_q
    q_packed = q.reshape(batch * seqlen_q, hq, head_dim)
    if record("flashcute_varlen", lambda: varlen(q_packed, k_packed, v_packed, cu_q, cu_k, seqlen_q, seqlen_k)):
        outputs["flashcute_varlen"] = varlen(q_packed, k_packed, v_packed, cu_q, cu_k, seqlen_q,
                                             seqlen_k).view(q.shape).clone()
        if "flashcute" in outputs:
            row["max_abs_diff"]["flashcute"] = (outputs["flashcute"].float() -
                                                outputs["flashcute_varlen"].float()).abs().max().item()
    return row


def bench_shape(dtype, head_dim, heads, batch, seqlen_q, seqlen_k, args, kvcache, fwd, varlen=None):
    hq, hkv = HEADS[heads]
    group = hq // hkv
    page = args.page_size
    elem = torch.empty((), dtype=dtype).element_size()
    cache_bytes = batch * seqlen_k * hkv * head_dim * 2 * elem  # K + V
    qo_bytes = 2 * batch * seqlen_q * hq * head_dim * elem  # Q read, O written
    moved = cache_bytes + qo_bytes
    row = {"dtype": str(dtype).removeprefix("torch."), "d": head_dim, "heads": heads, "hq": hq, "hkv": hkv,
           "b": batch, "sq": seqlen_q, "sk": seqlen_k, "page_size": page, "bytes": moved, "gbps": {}, "ms": {},
           "peak_mib": {}, "notes": {}, "expanded_kv": [], "max_abs_diff": {}, "skipped": None}

    if seqlen_k % page:
        row["skipped"] = f"sk {seqlen_k} is not a multiple of the page size {page}"
        return row
    # Contiguous cache + its paged copy (the peers run after the paged copy is freed; bhsd adds one copy there).
    needed = 2 * cache_bytes + 3 * qo_bytes
    ok, room = fits(needed)
    if not ok:
        row["skipped"] = f"needs {gb(needed)} (cache and its paged copy), {room}"
        return row

    torch.manual_seed(0)
    q = torch.randn(batch, seqlen_q, hq, head_dim, device="cuda", dtype=dtype)
    k = torch.randn(batch, seqlen_k, hkv, head_dim, device="cuda", dtype=dtype)
    v = torch.randn_like(k)
    seqlens = torch.full((batch,), seqlen_k, device="cuda", dtype=torch.int32)

    def record(name, fn):
        with warnings.catch_warnings(record=True) as caught:  # SDPA says why a backend refused in warnings
            warnings.simplefilter("always")
            try:
                ms, peak = measure(fn)
            except Exception as error:
                why = list(dict.fromkeys(first_line(w.message) for w in caught))[:3]  # e.g. "... not used because:", why
                row["notes"][name] = " ".join([f"{type(error).__name__}: {first_line(error)}"] + why)
                return False
        row["ms"][name] = ms
        row["gbps"][name] = row["bytes"] / (ms * 1e-3) / 1e9
        row["peak_mib"][name] = peak
        return True

    outputs = {}

    def keep(name, fn):
        if record(name, fn):
            outputs[name] = fn().detach().clone()

    if args.left_padded:
        return bench_left_padded(row, q, k, v, seqlens, kvcache, varlen, record, keep, outputs)
    if kvcache is not None:
        keep("flashcute", lambda: kvcache(q, k, v, seqlens))
        pages = batch * seqlen_k // page
        if args.page_order == "random":
            perm = torch.randperm(pages, generator=torch.Generator().manual_seed(0))
        else:
            perm = torch.arange(pages)
        perm = perm.to(device="cuda", dtype=torch.int32)
        block_table = perm.view(batch, seqlen_k // page)
        # Page block_table[i, j] holds rows j * page ... of sequence i.
        k_paged = torch.empty(pages, page, hkv, head_dim, device="cuda", dtype=dtype)
        v_paged = torch.empty_like(k_paged)
        k_paged[perm.long()] = k.view(pages, page, hkv, head_dim)
        v_paged[perm.long()] = v.view(pages, page, hkv, head_dim)
        keep("flashcute_paged", lambda: kvcache(q, k_paged, v_paged, seqlens, block_table))
        del k_paged, v_paged, block_table, perm
    else:
        row["notes"]["flashcute"] = row["notes"]["flashcute_paged"] = args.kvcache_why
    if fwd is not None:
        keep("flashcute_fwd", lambda: fwd(q, k, v))
    else:
        row["notes"]["flashcute_fwd"] = args.fwd_why

    # Peers: (b, h, s, d).
    def bhsd(t):
        return t.transpose(1, 2).contiguous() if args.peer_layout == "bhsd" else t.transpose(1, 2)

    qt = bhsd(q)
    kt = vt = None
    gqa = hq != hkv
    for name in csv(args.peers):
        with sdpa_kernel(PEERS[name]):
            if kt is None:
                ok, room = fits(cache_bytes) if args.peer_layout == "bhsd" else (True, "")
                if not ok:
                    row["notes"][name] = f"the contiguous (b, h, s, d) copy of the cache needs {gb(cache_bytes)}, {room}"
                    continue
                kt, vt = bhsd(k), bhsd(v)
            if record(name, lambda: F.scaled_dot_product_attention(qt, kt, vt, enable_gqa=gqa)):
                outputs[name] = F.scaled_dot_product_attention(qt, kt, vt, enable_gqa=gqa).transpose(1, 2).clone()
                continue
            if not gqa:
                continue
            # The backend may refuse enable_gqa: K/V expanded to hq heads once, outside the timing.
            refused = row["notes"].pop(name)
            expanded_bytes = group * cache_bytes
            if args.peer_layout == "bhsd":
                kt = vt = None  # the expanded copies replace the contiguous ones
            ok, room = fits(expanded_bytes)
            if not ok:
                row["notes"][name] = f"{refused}; expanded kv: needs {gb(expanded_bytes)}, {room}"
                continue
            if args.peer_layout == "views":  # (b, hq, s, d) views of contiguous (b, s, hq, d)
                ke, ve = (t.repeat_interleave(group, dim=2).transpose(1, 2) for t in (k, v))
            else:  # contiguous (b, hq, s, d)
                ke, ve = (t.transpose(1, 2).repeat_interleave(group, dim=1) for t in (k, v))
            if record(name, lambda: F.scaled_dot_product_attention(qt, ke, ve)):
                row["notes"][name] = f"expanded kv (GB/s counts the {hkv}-head cache); with enable_gqa: {refused}"
                row["expanded_kv"].append(name)
                outputs[name] = F.scaled_dot_product_attention(qt, ke, ve).transpose(1, 2).clone()
            else:
                row["notes"][name] = f"{refused}; expanded kv: {row['notes'][name]}"
            ke = ve = None  # noqa: F841 (freed before the next peer)

    # A sanity check: each flashcute output against torch's flash (else cuDNN) on the same inputs.
    reference = next((outputs[p] for p in ("flash", "cudnn") if p in outputs), None)
    if reference is not None:
        for name in ("flashcute", "flashcute_paged", "flashcute_fwd"):
            if name in outputs:
                row["max_abs_diff"][name] = (outputs[name].float() - reference.float()).abs().max().item()
    return row


# ------------------------------------------------------------------------------------------- reporting

def ratio(row, a, b, copy_gbps):
    x = row["gbps"].get(a)
    y = copy_gbps if b == "copy" else row["gbps"].get(b)
    return x / y if x and y else None


def ratio_name(a, b):
    return RATIO_NAMES.get((a, b), f"{a}/{b}")


def table(rows, copy_gbps, impls=IMPLS, ratios=RATIOS):
    header = ["dtype", "d", "heads", "b", "sq", "sk"] + impls + [ratio_name(a, b) for a, b in ratios]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        cells = [row["dtype"], str(row["d"]), row["heads"], str(row["b"]), str(row["sq"]), str(row["sk"])]
        cells += [fmt(row["gbps"].get(name), 0) for name in impls]
        cells += [fmt(ratio(row, a, b, copy_gbps), 2) for a, b in ratios]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def shape_text(row):
    return f"{row['dtype']} d={row['d']} {row['heads']} b={row['b']} sq={row['sq']} sk={row['sk']}"


def bar_lines(rows, copy_gbps):
    """The issue's bars: the minimum of each ratio over the shapes (and where), flashcute/copy at the two long
    single-query shapes."""
    lines = []
    for a, b, label in (("flashcute", "cudnn", "min flashcute/cudnn over shapes"),
                        ("flashcute", "flash", "min flashcute/flash"),
                        ("flashcute_paged", "flashcute", "min paged/contiguous")):
        values = [(r, row) for row in rows if (r := ratio(row, a, b, copy_gbps)) is not None]
        if values:
            r, row = min(values, key=lambda x: x[0])
            lines.append(f"{label}: {r:.3f} at {shape_text(row)} ({len(values)} shapes, "
                         f"{sum(v < 1.0 for v, _ in values)} below 1.0)")
        else:
            lines.append(f"{label}: - (no shape where both ran)")
    long = [row for row in rows if row["sq"] == 1 and (row["b"], row["sk"]) in ((1, 524288), (8, 131072))]
    cells = [f"{shape_text(row)}: {fmt(ratio(row, 'flashcute', 'copy', copy_gbps), 3)}" for row in long]
    lines.append("flashcute/copy at (1,512k) and (8,128k): " + ("; ".join(cells) if cells else "- (not run)"))
    return lines


def note_lines(rows):
    lines = []
    for row in rows:
        if row["skipped"]:
            lines.append(f"{shape_text(row)}: skipped: {row['skipped']}")
        for name, note in row["notes"].items():
            lines.append(f"{shape_text(row)}: {name}: {note}")
    return lines


def main():
    args = parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench_decode.py needs a CUDA GPU (torch.cuda.is_available() is False)")
    try:
        flashcute.load_extension()
        load_error = None
    except Exception as error:  # the peers still run; every flashcute figure says why it is missing
        load_error = f"extension did not load: {type(error).__name__}: {first_line(error)}"
        print(f"WARNING: {load_error}")
    kvcache_fn, args.kvcache_why = flashcute_api("flash_attn_with_kvcache")
    fwd, args.fwd_why = flashcute_api("flash_attn_func")
    varlen, _ = flashcute_api("flash_attn_varlen_func")
    if args.left_padded:
        args.peers = ""
    kvcache = kvcache_caller(kvcache_fn) if kvcache_fn is not None else None
    if load_error:
        kvcache, fwd, args.kvcache_why, args.fwd_why = None, None, load_error, load_error

    device, commit = torch.cuda.get_device_name(), git_commit()
    _, total = torch.cuda.mem_get_info()
    print(f"{device} ({total / GIB:.0f} GiB), {versions(commit)}, peers {csv(args.peers)} ({args.peer_layout}), "
          f"page size {args.page_size}, {args.page_order} pages")
    for name, why in (("flash_attn_with_kvcache", args.kvcache_why), ("flash_attn_func", args.fwd_why)):
        if why:
            print(f"flashcute.{name} will not run: {why}")
    copy_gbps, copy_bytes = copy_bandwidth(args.copy_gib)
    copy_text = f"copy bandwidth: {copy_gbps:.0f} GB/s (dst.copy_(src), {args.copy_gib:g} GiB bf16, read + write)"
    print(copy_text, flush=True)

    shapes = SHAPES if args.shapes is None else [s for s in SHAPES if s in args.shapes] + \
        [s for s in args.shapes if s not in SHAPES]
    rows = []
    for dtype_name in csv(args.dtypes):
        for head_dim in csv(args.head_dims, int):
            for heads in csv(args.heads):
                for batch, seqlen_q, seqlen_k in shapes:
                    row = bench_shape(DTYPES[dtype_name], head_dim, heads, batch, seqlen_q, seqlen_k, args, kvcache,
                                      fwd, varlen)
                    rows.append(row)
                    torch.cuda.empty_cache()
                    summary = "  ".join(f"{k} {v:.0f}" for k, v in row["gbps"].items()) + " GB/s"
                    print(f"{shape_text(row)}: {'skipped: ' + row['skipped'] if row['skipped'] else summary}", flush=True)
                    for name, note in row["notes"].items():
                        print(f"  {name}: {note}")
                    for name, diff in row["max_abs_diff"].items():
                        if diff > 0.05:
                            print(f"  WARNING: {name} differs from the peer's output by {diff:.3f}")

    if args.left_padded:
        markdown = table(rows, copy_gbps, LEFT_PADDED_IMPLS, LEFT_PADDED_RATIOS)
        values = [r for row in rows if (r := ratio(row, "flashcute", "flashcute_varlen", copy_gbps)) is not None]
        bars = [f"left-padded: cache_leftpad / packed batch over {len(values)} shapes: "
                + (f"min {min(values):.2f}, max {max(values):.2f}" if values else "-")]
    else:
        markdown = table(rows, copy_gbps)
        bars = bar_lines(rows, copy_gbps)
    notes = note_lines(rows)
    print()
    print(markdown)
    print()
    print("\n".join(bars))
    meta = {**run_meta(device, commit), "copy_gbps": copy_gbps, "copy_bytes": copy_bytes, "copy_gib": args.copy_gib, "page_size": args.page_size,
            "page_order": args.page_order,
            "peers": csv(args.peers), "peer_layout": args.peer_layout, "quick": args.quick,
            "left_padded": args.left_padded,
            "heads": {name: HEADS[name] for name in csv(args.heads)}, "bars": bars,
            "flashcute_missing": {"flash_attn_with_kvcache": args.kvcache_why, "flash_attn_func": args.fwd_why}}
    mode = ("left-padded batches (pad_i uniform in [0, sk / 2), the first none; GB/s counts the unpadded keys), "
            "cache_leftpad against the packed batch; " if args.left_padded else "")
    layouts = ("" if args.left_padded else
               f"paged: page size {args.page_size}, pages in a {args.page_order} order; peers (torch SDPA) on "
               f"{'(b, h, s, d) views' if args.peer_layout == 'views' else 'contiguous (b, h, s, d) copies'}, "
               f"enable_gqa (else expanded kv, see notes); ")
    text = (f"{versions(commit)}. {mode}GB/s = (K + V cache bytes + Q + O bytes) / time (do_bench median); non-causal, "
            f"cache_seqlens = sk; {layouts}hq 32, hkv 8 (gqa) or 32 (mha).\n\n{copy_text}\n\n"
            f"{markdown}\n\n" + "".join(f"- {line}\n" for line in bars)
            + ("\nNotes:\n\n" + "".join(f"- {line}\n" for line in notes) if notes else ""))
    write_results(args.out, "decode_leftpad" if args.left_padded else "decode",
                  "flashcute decoding with a KV cache" + (", left-padded batches" if args.left_padded else ""),
                  meta, rows, text)


if __name__ == "__main__":
    main()
