"""benchmarks/bwd_energy.py's reading of nvidia-smi's samples and its per-call figures, on synthetic samples (no GPU
or nvidia-smi needed)."""

import datetime
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bwd_energy  # noqa: E402


def stamp(seconds):
    return datetime.datetime.fromtimestamp(1_800_000_000 + seconds).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]


def test_parse_samples_skips_unmeasured_lines():
    text = f"{stamp(0.0)}, 650.25, 1530\n{stamp(0.05)}, [N/A], 1530\nnot a sample\n{stamp(0.1)}, 700.00, 1500\n"
    samples = bwd_energy.parse_samples(text)
    assert [(round(t - 1_800_000_000, 3), w, mhz) for t, w, mhz in samples] == [(0.0, 650.25, 1530.0),
                                                                                 (0.1, 700.0, 1500.0)]


def test_summarize_leaves_out_the_settling_samples():
    t0 = 1_800_000_000.0
    # 0.5 s of ramp at 300 W / 1900 MHz, then 600 W / 1500 MHz; 100 calls in 2 s
    samples = [(t0 + i * 0.05, 300.0 if i * 0.05 < 0.5 else 600.0, 1900.0 if i * 0.05 < 0.5 else 1500.0)
               for i in range(41)]
    turn = bwd_energy.summarize(samples, t0, t0 + 2.0, 100)
    assert turn["ms"] == pytest.approx(20.0)
    assert turn["watts"] == pytest.approx(600.0) and turn["mhz"] == pytest.approx(1500.0)
    assert turn["joules"] == pytest.approx(12.0)  # 600 W x 20 ms
    assert turn["mcycles"] == pytest.approx(30.0)  # 1500 MHz x 20 ms
    assert turn["samples"] == 31


def test_summarize_without_samples_says_so():
    with pytest.raises(RuntimeError, match="no power sample"):
        bwd_energy.summarize([(0.1, 500.0, 1500.0)], 0.0, 0.4, 10)


def test_parse_limits_reads_the_board_and_skips_what_it_does_not_report():
    assert bwd_energy.parse_limits("700.00, 700.00, 1980\n") == {
        "power_limit_w": 700.0, "enforced_power_limit_w": 700.0, "max_sm_mhz": 1980.0}
    assert bwd_energy.parse_limits("[N/A], 600.00, 1755\n") == {"enforced_power_limit_w": 600.0, "max_sm_mhz": 1755.0}
    assert bwd_energy.parse_limits("") == {}
