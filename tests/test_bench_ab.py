"""benchmarks/bench_ab.py's report, with the timing processes replaced by fixed times (no GPU needed): one B, or
several B checkouts each compared with A; and decode_ab.py's table over bench_decode.py runs written by hand."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_ab  # noqa: E402


def run(monkeypatch, tmp_path, bs, times):
    """bench_ab.main() on bf16 hdim 128 bwd, where checkout path p takes times[p] ms at every shape."""
    monkeypatch.setattr(bench_ab, "time_checkout",
                        lambda path, shapes, backends, op: {f"{bk} {dt} {d} {s} {c}": times[path]
                                                            for dt, d, s, c in shapes for bk in backends})
    import torch
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "Fake GPU")
    monkeypatch.setattr(sys, "argv", ["bench_ab.py", "--a", "A0", "--b", bs, "--op", "bwd", "--backends", "sm90",
                                      "--dtypes", "bf16", "--head-dims", "128", "--rounds", "2",
                                      "--out", str(tmp_path)])
    bench_ab.main()
    (md,) = tmp_path.glob("*.md")
    (js,) = tmp_path.glob("*.json")
    return md.read_text(), json.loads(js.read_text())


def test_one_b(monkeypatch, tmp_path):
    text, data = run(monkeypatch, tmp_path, "B0", {"A0": 2.0, "B0": 1.0})
    assert "| A ms | B ms | A/B (>1: B faster) | A spread (max/min) |" in text
    assert "| sm90 bf16 128 8192 False | 2.0000 | 1.0000 | 2.000 | 1.000 |" in text
    assert "**sm90**: A/B geomean 2.0000" in text
    assert data["a"] == "A0" and data["b"] == "B0" and len(data["runs"]["b"]) == 2


def test_several_bs_each_against_a(monkeypatch, tmp_path):
    text, data = run(monkeypatch, tmp_path, "P1,P2,P3", {"A0": 2.0, "P1": 1.0, "P2": 2.0, "P3": 4.0})
    assert "B1 = P1, B2 = P2, B3 = P3" in text
    assert "| sm90 bf16 128 512 True | 2.0000 | 1.0000 | 2.000 | 2.0000 | 1.000 | 4.0000 | 0.500 | 1.000 |" in text
    for label, ratio in (("B1", "2.0000"), ("B2", "1.0000"), ("B3", "0.5000")):
        assert f"**sm90**: A/{label} geomean {ratio} (min" in text
    assert [data[k] for k in ("a", "b1", "b2", "b3")] == ["A0", "P1", "P2", "P3"]
    assert all(len(data["runs"][k]) == 2 for k in ("a", "b1", "b2", "b3"))


def test_results_of_one_minute_do_not_overwrite_each_other(tmp_path):
    import _common
    for text in ("first", "second", "third"):
        _common.write_results(tmp_path, "bwd", "title", {"device": "Fake GPU"}, [], text)
    written = sorted(p.read_text().split("\n\n", 1)[1] for p in tmp_path.glob("*.md"))
    assert written == ["first", "second", "third"]
    assert len(list(tmp_path.glob("*.json"))) == 3


def decode_run(directory, gbps, paged, cudnn, short=0.5):
    """A bench_decode.py JSON of two shapes: flashcute gbps, paged, cuDNN at (1, 512k), times `short` at (24, 4k)."""
    directory.mkdir()
    rows = [{"dtype": "bfloat16", "d": 64, "heads": "gqa", "b": b, "sq": 1, "sk": sk,
             "gbps": {"flashcute": gbps * f, "flashcute_paged": paged * f, "cudnn": cudnn * f}}
            for b, sk, f in ((1, 524288, 1.0), (24, 4096, short))]
    (directory / "decode_2026-11-29_0000_Fake.json").write_text(json.dumps(
        {"device": "Fake GPU", "commit": f"commit-{directory.name}", "date": "2026-11-29_0000", "rows": rows}))
    return str(directory)


def test_decode_ab_table(tmp_path, capsys):
    import decode_ab

    a = [decode_run(tmp_path / "A1", 4000, 3800, 4100), decode_run(tmp_path / "A2", 4400, 4200, 4100)]
    b = [decode_run(tmp_path / "B1", 4620, 4400, 4100, 0.45), decode_run(tmp_path / "B2", 4620, 4400, 4100, 0.45)]
    out = tmp_path / "ab.md"
    decode_ab.main(["--a", ",".join(a), "--b", ",".join(b), "--out", str(out)])
    text = out.read_text()
    assert text == capsys.readouterr().out
    assert "A: commit-A1, 2026-11-29_0000; commit-A2, 2026-11-29_0000" in text
    # (1, 512k): A's mean 4200 (spread 1.1), B's 4620: 1.1; paged 4400 / 4000; cuDNN 4100 in every run.
    assert "| bf16 d64 gqa b1 sq1 512k | 4000 / 4400 | 1.100 | 4620 / 4620 | 1.100 | 1.100 | 4100 | 1.024 | 1.127 |" \
        in text
    # (24, 4k): A 2100, B 2079 (0.99); paged 1980 / 2000; cuDNN 0.5 x 4100 in A's runs, 0.45 x in B's: 1947.5.
    assert "| bf16 d64 gqa b24 sq1 4k | 2000 / 2200 | 1.100 | 2079 / 2079 | 0.990 | 0.990 | 1948 | 1.078 | 1.068 |" \
        in text
    assert "B / A (contiguous): 0.990 (bf16 d64 gqa b24 sq1 4k) to 1.100 (bf16 d64 gqa b1 sq1 512k) over 2 shapes" \
        in text
