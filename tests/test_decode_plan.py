"""flashcute.explain.decode's plan rules equal the decode kernel's own (csrc/sm80/decode_plan.h).

csrc/tools/print_decode_plans.cpp answers, from that header, the questions the Python mirror answers: the split
count and residency of a grid, the shared memory a split-KV kernel uses (which decode_launch.h static_asserts
against each kernel's own figure) and the shared memory it launches with. Needs g++ (no GPU, no CUDA); without it
the test fails saying what is missing."""

import itertools
import json
import sys
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from flashcute import kernel_configs  # noqa: E402
from flashcute.explain import DEVICES, decode  # noqa: E402
from flashcute.explain.occupancy import H200  # noqa: E402
from flashcute.explain.summary import main  # noqa: E402
from tests.layout import oracle  # noqa: E402

TOOL = ROOT / "csrc" / "tools" / "print_decode_plans.cpp"


@lru_cache(maxsize=None)
def tool():
    return oracle.build_file_or_fail(TOOL, [ROOT / "csrc"], [ROOT / "csrc" / "sm80" / "decode_plan.h"])


def ask(questions):
    """The C++ answers, one list of ints per question."""
    out = oracle.run_binary(tool(), "".join(q + "\n" for q in questions), timeout=120).splitlines()
    assert len(out) == len(questions), f"{len(questions)} questions, {len(out)} answers"
    return [list(map(int, line.split())) for line in out]


NUM_SMS = sorted({device.num_sms for device in DEVICES["sm80"]} | {1, 80})
BLOCK_N = (64, 128, 256)
N_BLOCKS = (0, 1, 2, 3, 7, 16, 31, 32, 33, 100, 255, 256, 257, 1000, 2048, 4096, 8192)
CTAS = (1, 2, 7, 8, 26, 64, 86, 87, 100, 105, 106, 128, 131, 132, 136, 200, 247, 248, 264, 320, 512, 544, 1024, 4096)


def test_split_count_and_residency_equal_cxx():
    cases = list(itertools.product(decode.LAYOUTS, NUM_SMS, BLOCK_N, N_BLOCKS, CTAS))
    cxx = ask([f"plan {layout} {sms} {bn} {nb} {ctas}" for layout, sms, bn, nb, ctas in cases])
    splits_seen = set()
    for (layout, sms, bn, nb, ctas), answer in zip(cases, cxx):
        splits = decode.plan_num_splits(ctas, nb, bn, layout, sms)
        mirror = [splits, decode.split_ctas_per_sm(layout, nb, bn, splits)]
        assert mirror == answer, f"plan {layout} num_sms {sms} block_n {bn} n_blocks {nb} ctas {ctas}: " \
                                 f"C++ {answer}, mirror {mirror}"
        splits_seen.add(splits)
    assert len(splits_seen) > 10  # the grid reaches many split counts, not only "no split"


def test_equal_shares_equal_cxx():
    cases = list(itertools.product(decode.LAYOUTS, NUM_SMS, BLOCK_N, (1, 16, 31, 100, 544, 2048, 5120, 65536),
                                   (1, 4, 8, 32, 33, 64, 256)))
    cxx = ask([f"shares {layout} {sms} {bn} {blocks} {lanes}" for layout, sms, bn, blocks, lanes in cases])
    seen = set()
    for (layout, sms, bn, blocks, lanes), answer in zip(cases, cxx):
        shares = decode.split_shares(blocks, lanes, bn, layout, sms)
        mirror = [shares, decode.shares_ctas_per_sm(layout, blocks, shares, bn) if shares else 0]
        assert mirror == answer, f"shares {layout} {sms} {bn} {blocks} {lanes}: C++ {answer}, mirror {mirror}"
        seen.add(shares > 0)
        assert shares == 0 or mirror[1] == 1  # equal shares are long: one CTA per SM
    assert seen == {False, True}


def test_waves_as_shares_equals_cxx():
    cases = list(itertools.product(CTAS, (1, 4, 8, 32, 33, 200), (1, 2), NUM_SMS))
    cxx = ask([f"waves {ctas} {lanes} {resident} {sms}" for ctas, lanes, resident, sms in cases])
    seen = set()
    for (ctas, lanes, resident, sms), answer in zip(cases, cxx):
        mirror = int(decode.waves_as_shares(ctas, lanes, resident, sms))
        assert [mirror] == answer, f"waves {ctas} {lanes} {resident} {sms}: C++ {answer}, mirror {mirror}"
        seen.add(mirror)
    assert seen == {0, 1}


def test_kernel_shared_memory_equals_cxx():
    # Every shipped decode tile (64-row and key-split), each K/V layout, and a grid around the two-stage limit.
    shipped = {(cfg.smem_bytes, cfg.smem_kv_elems * cfg.element_bytes, cfg.block_n)
               for cfg in kernel_configs.decode_configs()}
    grid = set(itertools.product((8192, 40960, 49152, 73728), (8192, 16384, 16385, 32768), BLOCK_N))
    cases = [(layout, *c, two) for layout in decode.LAYOUTS for c in sorted(shipped | grid) for two in (0, 1)]
    cxx = ask([f"smem {layout} {traits} {kv} {bn} {two}" for layout, traits, kv, bn, two in cases])
    for (layout, traits, kv, bn, two), answer in zip(cases, cxx):
        mirror = [decode.kernel_smem_bytes(traits, kv, bn, layout, bool(two)), decode.kv_stages(traits, kv)]
        assert mirror == answer, f"smem {layout} {traits} {kv} {bn} {two}: C++ {answer}, mirror {mirror}"
        assert mirror[0] <= 227 * 1024 or not two or (traits, kv, bn) not in shipped


def test_fast_memory_rules_equal_cxx():
    # The devices' own figures, and bandwidths either side of the bar; every layout, both tiles, one and two per SM.
    bandwidths = sorted({(d.dram_gbps, d.num_sms) for d in (*DEVICES["sm80"], H200)} | {(3959.0, 132), (3961.0, 132)})
    cases = list(itertools.product(bandwidths, decode.LAYOUTS, (0, 1), (1, 2)))
    cxx = ask([f"memory {gbps} {sms} {layout} {key_split} {resident}"
               for (gbps, sms), layout, key_split, resident in cases])
    seen = set()
    for ((gbps, sms), layout, key_split, resident), answer in zip(cases, cxx):
        fast = decode.fast_memory(gbps, sms)
        residency = decode.residency_layout(layout, bool(key_split), fast)
        two_stages = decode.two_stage_launch(layout, bool(key_split), resident, fast)
        mirror = [int(fast), decode.LAYOUTS.index(residency), int(two_stages)]
        assert mirror == answer, f"memory {gbps} {sms} {layout} {key_split} {resident}: C++ {answer}, mirror {mirror}"
        seen.add(tuple(mirror))
    assert {m[0] for m in seen} == {0, 1} and {m[2] for m in seen} == {0, 1} and {m[1] for m in seen} == {0, 1, 2}
    assert [decode.fast_memory(d.dram_gbps, d.num_sms) for d in (*DEVICES["sm80"], H200)] == [False, False, True]


def test_launch_shared_memory_equals_cxx():
    cases = list(itertools.product([d.smem_per_sm for d in DEVICES["sm80"]], (16384, 73728, 116864, 150000), (1, 2)))
    cxx = ask([f"launch {sm} {used} {resident}" for sm, used, resident in cases])
    for (sm, used, resident), answer in zip(cases, cxx):
        assert [decode.launch_smem_bytes(sm, used, resident)] == answer


def test_append_in_split_kv_equals_cxx():
    cases = list(itertools.product((0, 1), (1, 2), (0, 1, 3, 4, 16), (1, 4, 16), (1, 132, 263, 264, 265, 528, 4096),
                                   (1, 2), (108, 132)))
    cxx = ask([" ".join(map(str, ["append", *c])) for c in cases])
    seen = set()
    for case, answer in zip(cases, cxx):
        mirror = int(decode.appends_in_split_kv(*case))
        assert [mirror] == answer, f"append {case}: C++ {answer}, mirror {mirror}"
        seen.add(mirror)
    assert seen == {0, 1}


def test_plans_of_the_issue_shapes():
    """Checks on the plan's own logic, on an H100 (132 SMs, 228 KiB per SM), and where an H200's differs."""
    h100 = DEVICES["sm80"][-1]
    # GQA 32 / 8, one query, a 512k-key cache paged in 64-row pages: 8 CTAs, so the keys split until the grid
    # fills a wave; each split streams more than 4096 keys, so one CTA per SM, launched with over half the SM.
    p = decode.decode_plan("bf16", 128, 1, 32, 8, 1, 512 * 1024, page_size=64, device=h100)
    assert (p["tile"]["name"], p["layout"], p["ctas_unsplit"]) == ("key-split", "paged-tma", 8)
    assert p["ctas_per_sm"] == 1 and p["smem_launch_bytes"] > h100.smem_per_sm // 2
    assert 0.9 <= p["waves"] <= 1.0 and p["combine"]
    assert p["keys_per_split"] * p["num_splits"] >= 512 * 1024 > p["keys_per_split"] * (p["num_splits"] - 1)
    # 16 queries x group 4 = 64 rows: the 64-row tile; 128 CTAs already fill a wave, one split writes O itself.
    p = decode.decode_plan("bf16", 64, 16, 32, 8, 16, 32 * 1024, device=h100)
    assert (p["tile"]["name"], p["rows_per_kv_head"], p["num_splits"], p["combine"]) == ("64-row", 64, 1, False)
    assert p["row_packing"][5] == {"row": 5, "query": 1, "head": 1}
    # Short caches (2k keys) share an SM two by two; pages of 16 rows go by cp.async, two per SM, on any device.
    p = decode.decode_plan("fp16", 128, 128, 32, 8, 1, 2048, device=h100)
    assert (p["ctas_per_sm"], p["num_splits"]) == (2, 1)
    p = decode.decode_plan("fp16", 128, 1, 32, 8, 1, 512 * 1024, page_size=16, device=h100)
    assert (p["layout"], p["ctas_per_sm"]) == ("paged", 2)
    # Batch 17 (GQA 32 / 8, 32k keys): 136 long shares, one per SM, would leave a last wave of 4 CTAs; split into
    # shares of at least 2048 keys, two per SM, the grid's last wave is full to at least 0.9 of the best split's.
    # That split runs as equal shares of the batch's 17 x 256 blocks: 16 per K/V head (34816 keys), 128 CTAs, one per
    # SM, one wave; the shares cross sequences.
    p = decode.decode_plan("bf16", 128, 17, 32, 8, 1, 32 * 1024, device=h100)
    assert (p["ctas_unsplit"], p["num_splits"], p["keys_per_split"] >= 2048) == (136, 9, True)
    assert (p["equal_shares"], p["shares_per_lane"], p["grid"], p["ctas_per_sm"]) == (True, 16, [128], 1)
    assert p["blocks_per_share"] == 17 * 256 // 16 and 0.9 <= p["waves"] <= 1.0
    # Batch 17 at 4k keys: just past one wave, so each 4096-key share may split four ways (2048-key halves, 272 CTAs
    # on 264 slots, would leave the same thin tail): thirds; as equal shares, 16 of 34 blocks per K/V head. Batch 24
    # (1.45 waves) the split count leaves whole; its waves run as one wave of equal shares (1.5 sequences per CTA), as
    # do batch 30 at 32k (240 CTAs, 1.82 waves: 24 of 264 slots idle) and batch 46 at 16k (368, 2.79: 28 of 396).
    # Grids whose last wave is nearly full keep their waves: MHA batch 8 at 128k (256, 1.94), GQA batch 64 at 8k
    # (512, 3.88); so do grids of more than three waves, batch 61 at 8k (488, 3.70), and batch 66 at 8k (528, four
    # whole waves) and MHA batch 64 at 8k (2048, 15.5 waves).
    p = decode.decode_plan("bf16", 128, 17, 32, 8, 1, 4096, device=h100)
    assert (p["num_splits"], p["equal_shares"], p["grid_ctas"], p["ctas_per_sm"]) == (3, True, 128, 1)
    for batch, heads_kv, keys, waves_as_shares in ((24, 8, 4096, True), (30, 8, 32 * 1024, True),
                                                   (46, 8, 16 * 1024, True), (61, 8, 8192, False),
                                                   (8, 32, 128 * 1024, False),
                                                   (64, 8, 8192, False), (66, 8, 8192, False),
                                                   (64, 32, 8192, False)):
        p = decode.decode_plan("bf16", 128, batch, 32, heads_kv, 1, keys, device=h100)
        assert (p["waves_as_shares"], p["equal_shares"], p["num_splits"] > 1) == (waves_as_shares,) * 3, p
        assert p["grid_ctas"] == (128 if waves_as_shares else batch * heads_kv)
        assert ("one wave of equal shares instead" in decode.decode_text(p)) == waves_as_shares
    # MHA batch 10 at 64k: 320 long shares fill 2.42 waves (last wave 0.42 full, 0.81 overall): two splits, as equal
    # shares of 2.5 sequences each over the 32 heads (4 x 32 CTAs).
    p = decode.decode_plan("bf16", 128, 10, 32, 32, 1, 64 * 1024, device=h100)
    assert (p["ctas_unsplit"], p["num_splits"], p["shares_per_lane"], p["ctas_per_sm"]) == (320, 2, 4, 1)
    # GQA batch 5 at 4k: 80 shares of 2048 keys would be short (two per SM): uniform splits, the 3-D grid.
    p = decode.decode_plan("bf16", 64, 5, 32, 8, 1, 4096, device=h100)
    assert (p["num_splits"], p["equal_shares"], p["grid"], p["ctas_per_sm"]) == (2, False, [2, 8, 5], 2)
    # The 64-row tile splits uniformly (equal shares are the key-split tile's).
    p = decode.decode_plan("bf16", 64, 1, 32, 8, 16, 512 * 1024, device=h100)
    assert (p["tile"]["name"], p["equal_shares"]) == ("64-row", False) and p["num_splits"] > 1
    # A decoding step that appends a key per sequence: in a one-wave grid the split-KV kernel writes it (GQA batch 1 at
    # 32k); a grid of more than two waves (MHA batch 64 at 8k), the 64-row tile (16 queries) or more new rows than
    # queries keep the append kernel.
    assert decode.decode_plan("bf16", 128, 1, 32, 8, 1, 32 * 1024, device=h100, seqlen_new=1)["append"] == "split-kv"
    assert decode.decode_plan("bf16", 128, 64, 32, 32, 1, 8192, device=h100, seqlen_new=1)["append"] == "append kernel"
    assert decode.decode_plan("bf16", 64, 16, 32, 8, 16, 32 * 1024, device=h100, seqlen_new=16)["append"] \
        == "append kernel"
    assert decode.decode_plan("bf16", 128, 1, 32, 8, 1, 32 * 1024, device=h100, seqlen_new=3)["append"] \
        == "append kernel"
    assert decode.decode_plan("bf16", 128, 1, 32, 8, 1, 32 * 1024, device=h100)["append"] is None
    # No key at all: one split, nothing read.
    p = decode.decode_plan("bf16", 64, 2, 8, 8, 1, 0, device=h100)
    assert (p["kv_blocks"], p["num_splits"], p["kv_bytes"]) == (0, 1, 0)
    # The H200 (fast memory): long shares on the key-split tile take two K/V stages, contiguous or by TMA pages; short
    # ones (two per SM) and cp.async pages keep one K and one V buffer; the 64-row tile's TMA pages plan two CTAs per
    # SM (GQA 16 queries at 32k: two splits, one wave), as cp.async's do.
    for page_size in (None, 64):
        p, q = (decode.decode_plan("bf16", 128, 8, 32, 32, 1, 128 * 1024, page_size=page_size, device=d)
                for d in (h100, H200))
        assert (p["tile"]["kv_stages"], q["tile"]["kv_stages"], q["ctas_per_sm"], q["num_splits"]) == \
            (1, 2, 1, p["num_splits"])
        assert q["smem_used_bytes"] > p["smem_used_bytes"] and q["two_stage_launch"] and not p["two_stage_launch"]
    assert decode.decode_plan("bf16", 64, 128, 32, 8, 1, 2048, device=H200)["tile"]["kv_stages"] == 1
    assert decode.decode_plan("bf16", 128, 1, 32, 8, 1, 512 * 1024, page_size=16, device=H200)["tile"]["kv_stages"] == 1
    p, q = (decode.decode_plan("bf16", 64, 16, 32, 8, 16, 32 * 1024, page_size=64, device=d) for d in (h100, H200))
    assert (p["ctas_per_sm"], p["num_splits"], q["ctas_per_sm"], q["num_splits"]) == (1, 1, 2, 2)
    assert "Fast memory" in decode.decode_text(q) and "Fast memory" not in decode.decode_text(p)


@pytest.mark.parametrize("bad, message", [
    (dict(heads_q=6, heads_kv=4), "heads_q must be a multiple of heads_kv"),
    (dict(seqlen_q=0), "seqlen_q must be an integer >= 1"),
    (dict(seqlen_k=-1), "seqlen_k must be an integer >= 0"),
    (dict(seqlen_new=-1), "seqlen_new must be an integer >= 0"),
    (dict(page_size=0), "page_size must be a positive integer or None"),
    (dict(head_dim=80), "head_dim must be one of"),
    (dict(dtype="fp8"), "dtype must be one of"),
])
def test_bad_problems_are_named(bad, message):
    args = dict(dtype="bf16", head_dim=128, batch=1, heads_q=8, heads_kv=8, seqlen_q=1, seqlen_k=100)
    with pytest.raises(ValueError, match=message):
        decode.decode_plan(**{**args, **bad})


def test_command_line(tmp_path, capsys):
    assert main(["--op", "decode", "--hdim", "64", "--batch", "8", "--heads", "32", "--heads-kv", "8",
                 "--seqlen-k", "131072", "--page-size", "64", "-o", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "A100 (sm_80)" in text and "H100 (sm_90a)" in text and "H200 (sm_90a)" in text and "paged-tma" in text
    assert "Unsplit, 64 CTAs at 1 per SM would fill 0.48 waves (48% of their slots): less than 0.8 of a wave" in text
    plans = json.loads((tmp_path / "decode.json").read_text())
    assert [p["layout"] for p in plans] == ["paged", "paged-tma", "paged-tma"]
    assert (tmp_path / "decode.txt").read_text() in text
    assert all((tmp_path / f"decode_plan_{arch}.{ext}").stat().st_size > 0 for arch in ("sm80", "sm90a", "sm90a_h200")
               for ext in ("png", "svg"))
    assert main(["--op", "decode", "--batch", "1", "--heads", "32", "--heads-kv", "8", "--seqlen-k", "32768",
                 "--seqlen-new", "1", "-o", str(tmp_path)]) == 0
    assert "Append: each CTA writes the new rows (1 per sequence)" in capsys.readouterr().out
    for argv, message in ((["--op", "decode", "-o", str(tmp_path)], "needs --seqlen-k"),
                          (["--page-size", "64", "-o", str(tmp_path)], "are for --op decode"),
                          (["--seqlen-new", "1", "-o", str(tmp_path)], "are for --op decode"),
                          (["--op", "decode", "--seqlen-k", "10", "--heads", "6", "--heads-kv", "4", "-o",
                            str(tmp_path)], "heads_q must be a multiple of heads_kv")):
        with pytest.raises(SystemExit):
            main(argv)
        assert message in capsys.readouterr().err
