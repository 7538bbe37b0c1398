"""A/B table of bench_decode.py runs: checkouts run alternately in one call (A, B, A, B, ...), each run writing its
JSON with --out DIR; this reads them back and says, per shape, how much each B reads faster than A, beside A's own
run-to-run spread and the peers timed in the same runs (bench_decode.py itself only compares within one run).

    python benchmarks/decode_ab.py --a r/A1,r/A2 --b r/B1,r/B2
    python benchmarks/decode_ab.py --a r/A1,r/A2 --b r/B1,r/B2 --b r/C1,r/C2 --out results/x.md

Each path is a bench_decode.py JSON file or a directory holding one. A shape's figure per side is the mean of its
runs; B / A > 1: B reads faster. The contiguous cache (flashcute), the paged one (flashcute_paged) and each peer
(cudnn, flash: the mean over every run of every side) per shape.
"""

import argparse
import json
import statistics
from pathlib import Path

DTYPES = {"bfloat16": "bf16", "float16": "fp16"}


def load(path):
    """The rows of one bench_decode.py run, keyed by shape."""
    path = Path(path)
    if path.is_dir():
        found = sorted(path.glob("decode_*.json"))
        if len(found) != 1:
            raise SystemExit(f"{path}: expected one decode_*.json, found {len(found)}")
        path = found[0]
    data = json.loads(path.read_text())
    return data, {shape_key(row): row for row in data["rows"]}


def shape_key(row):
    return row["dtype"], row["d"], row["heads"], row["b"], row["sq"], row["sk"]


def shape_label(key):
    dtype, d, heads, b, sq, sk = key
    keys = f"{sk // 1024}k" if sk % 1024 == 0 else str(sk)
    return f"{DTYPES.get(dtype, dtype)} d{d} {heads} b{b} sq{sq} {keys}"


def mean_gbps(runs, key, impl):
    values = [rows[key]["gbps"][impl] for rows in runs if impl in rows.get(key, {}).get("gbps", {})]
    return statistics.fmean(values) if values else None


def ratio_text(x, y):
    return f"{x / y:.3f}" if x and y else "-"


def report(sides):
    """sides: [(label, [rows of each run])], A first. Markdown lines."""
    (a_label, a_runs), others = sides[0], sides[1:]
    every_run = [rows for _, runs in sides for rows in runs]
    peers = [p for p in ("cudnn", "flash") if any(mean_gbps(every_run, k, p) for k in a_runs[0])]
    header = ["shape", f"{a_label} GB/s (runs)", f"{a_label} max / min"]
    for label, _ in others:
        header += [f"{label} GB/s (runs)", f"{label} / {a_label}", f"paged {label} / {a_label}"]
    header += [f"{p} GB/s" for p in peers]
    header += [f"{label} / {p}" for label, _ in sides for p in peers]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    summary = {label: [] for label, _ in others}
    for key in a_runs[0]:
        a_each = [rows[key]["gbps"].get("flashcute") for rows in a_runs if key in rows]
        if not all(a_each):
            continue
        a = statistics.fmean(a_each)
        cells = [shape_label(key), " / ".join(f"{x:.0f}" for x in a_each), f"{max(a_each) / min(a_each):.3f}"]
        for label, runs in others:
            b_each = [rows[key]["gbps"].get("flashcute") for rows in runs if key in rows]
            b = statistics.fmean(b_each) if b_each and all(b_each) else None
            cells += [" / ".join(f"{x:.0f}" for x in b_each) if b else "-", ratio_text(b, a),
                      ratio_text(mean_gbps(runs, key, "flashcute_paged"), mean_gbps(a_runs, key, "flashcute_paged"))]
            if b:
                summary[label].append((b / a, shape_label(key)))
        peer_gbps = [mean_gbps(every_run, key, p) for p in peers]
        cells += [f"{g:.0f}" if g else "-" for g in peer_gbps]
        for _, runs in sides:
            mine = mean_gbps(runs, key, "flashcute")
            cells += [ratio_text(mine, g) for g in peer_gbps]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for label, ratios in summary.items():
        if ratios:
            low, high = min(ratios), max(ratios)
            lines.append(f"{label} / {a_label} (contiguous): {low[0]:.3f} ({low[1]}) to {high[0]:.3f} ({high[1]}) "
                         f"over {len(ratios)} shapes")
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--a", required=True, help="A's runs, comma-separated JSON files or directories")
    parser.add_argument("--b", action="append", required=True, help="a B's runs (repeat for B, C, ...)")
    parser.add_argument("--out", help="also write the table to this markdown file")
    args = parser.parse_args(argv)
    if len(args.b) > 5:
        parser.error("at most five B sides")
    labels = "ABCDEF"[:1 + len(args.b)]
    sides, heads, devices = [], [], set()
    for label, paths in zip(labels, [args.a] + args.b):
        loaded = [load(p) for p in paths.split(",") if p]
        sides.append((label, [rows for _, rows in loaded]))
        heads.append(f"{label}: " + "; ".join(f"{data['commit']}, {data['date']}" for data, _ in loaded))
        devices |= {data["device"] for data, _ in loaded}
    lines = [f"decode A/B on {', '.join(sorted(devices))}", *heads, "", *report(sides)]
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
