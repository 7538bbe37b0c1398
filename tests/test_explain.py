"""flashcute.explain on the CPU: files written, numbers right, bank predictions as the hardware model says."""

import json

import numpy as np
import pytest

from flashcute import explain
from flashcute.kernel_configs import get_config, shipped_configs
from flashcute.layout import Int, make_identity_tensor

STEMS = ("tiling", "smem_SmemLayoutQ", "smem_SmemLayoutKV", "smem_SmemLayoutVt", "bank_conflicts", "bank_phase",
         "mma_tv", "thread_path")


SM90_STEMS = ("tiling", "smem_SmemLayoutQ", "smem_SmemLayoutK", "smem_SmemLayoutVt", "bank_conflicts", "bank_phase",
              "mma_tv_S", "mma_tv_O_A", "thread_path")


@pytest.fixture(scope="module")
def bf16_128(tmp_path_factory):
    out = tmp_path_factory.mktemp("explain")
    return out, explain.explain("sm80", "bf16", 128, out, seqlen_q=2000, thread=37)


@pytest.fixture(scope="module")
def sm90_bf16_128(tmp_path_factory):
    out = tmp_path_factory.mktemp("explain90")
    return out, explain.explain("sm90", "bf16", 128, out, seqlen_q=1000, seqlen_k=3000, thread=200)


def _check_pictures(out, stems):
    for stem in stems:
        png, svg = out / f"{stem}.png", out / f"{stem}.svg"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{png} is not a PNG"
        assert b"<svg" in svg.read_bytes()[:2000], f"{svg} is not an SVG"


def test_writes_every_picture_and_the_summary(bf16_128):
    out, summary = bf16_128
    _check_pictures(out, STEMS)
    assert json.loads((out / "summary.json").read_text())["smem_bytes"] == 65536
    text = (out / "summary.txt").read_text()
    assert "Sw<3,3,3> o _0 o ((_8,_16),(_64,_2)):((_64,_512),(_1,_8192))" in text
    assert "last has 80 of 128 rows" in text and "last has 16 of 64 rows" in text


def test_key_numbers(bf16_128):
    _, s = bf16_128
    assert s["config"] == {"arch": "sm80", "dtype": "bf16", "head_dim": 128, "block_m": 128, "block_n": 64,
                           "n_warps": 4, "threads": 128, "kv_stages": 1}
    p = s["problem"]
    assert (p["q_tiles"], p["kv_tiles"], p["ctas"]) == (16, 32, 16 * 16)
    assert (p["q_last_tile_rows"], p["kv_last_tile_rows"]) == (2000 - 15 * 128, 2000 - 31 * 64)
    assert p["flops_useful"] == 4 * 16 * 2000 * 2000 * 128
    assert s["tile"]["flops"] == 4 * 128 * 64 * 128
    assert s["tile"]["arithmetic_intensity"] == pytest.approx(128.0)  # 4*M*N*d / (2*N*d*2 bytes) = M
    held = {panel["panel"][:2]: panel["registers"] for panel in s["thread_path"]["panels"]}
    assert held["4."] == 128 * 64 // 128 and held["6."] == 128 * 128 // 128


def test_shipped_swizzle_is_conflict_free_and_the_unswizzled_layout_is_not(bf16_128):
    _, s = bf16_128
    rows = {r["access"]: r for r in s["bank_conflicts"]}
    assert all(r["conflicts"] == 0 and r["worst_degree"] == 1 for r in rows.values())
    for name in ("Q smem->regs", "K smem->regs", "V^T smem->regs", "O regs->smem"):
        assert rows[name]["unswizzled_conflicts"] > 0 and rows[name]["unswizzled_worst_degree"] == 8, name
    # 8 threads write one 128-byte row with 16-byte cp.async: conflict free even without the swizzle
    assert rows["K gmem->smem"]["unswizzled_conflicts"] == 0
    assert rows["O regs->smem"]["instruction"] == "st.shared 32-bit"  # the accumulator's 2-element runs
    assert rows["V^T smem->regs"]["instruction"] == "ldmatrix.x4.trans"
    # ldmatrix.x4: 4 matrices, one wavefront each; 8-way conflicts make it 32
    assert rows["K smem->regs"]["wavefronts"] == 4 * rows["K smem->regs"]["instructions_per_cta"]
    assert rows["K smem->regs"]["unswizzled_wavefronts"] == 32 * rows["K smem->regs"]["instructions_per_cta"]


@pytest.mark.parametrize("cfg", shipped_configs(), ids=lambda c: c.header.replace(" ", "-"))
def test_every_shipped_config_is_predicted_conflict_free(cfg):
    reports = explain.kernel_access_reports(cfg)
    assert [r.swizzled.total()[2] for r in reports] == [0] * len(reports)
    assert sum(r.unswizzled.total()[2] for r in reports) > 0


def test_addresses_follow_the_mirrors_partitions():
    """tv_coords (vectorised) lists, per thread, what ThrCopy.partition_S/D (in the same order) and
    ThrMMA.partition_A/C give."""
    cfg = get_config("sm80", "fp16", 96)
    shape_of = {"smem_layout_q": (cfg.block_m, cfg.head_dim), "smem_layout_kv": (cfg.block_n, cfg.head_dim),
                "smem_layout_vt": (cfg.head_dim, cfg.block_n), "smem_layout_o": (cfg.block_m, cfg.head_dim)}
    for access in explain.SM80_ACCESSES:
        shape = shape_of[access.smem]
        tv, tiler, _, _ = explain.copy_tv(cfg, access.copy, access.side)
        rows, cols = explain.tv_coords(tv, tiler, shape)
        for thread in (0, 37, cfg.n_threads - 1):
            thr = getattr(cfg, access.copy).get_slice(thread)
            part = (thr.partition_S if access.side == "S" else thr.partition_D)(
                make_identity_tensor((Int(shape[0]), Int(shape[1]))))
            mine = np.stack([rows[thread].T.ravel(), cols[thread].T.ravel()], axis=1)
            assert np.array_equal(mine, part.values()), f"{access.name}, thread {thread}"
    for operand, shape, modes in (("A", (cfg.block_m, cfg.head_dim), (0, 2)), ("C", (cfg.block_m, cfg.block_n), (0, 1))):
        tv, tile = explain.mma_tv(cfg, operand)
        rows, cols = explain.tv_coords(tv, tuple(tile[i] for i in modes), shape)
        thr = cfg.tiled_mma.get_slice(37)
        part = getattr(thr, f"partition_{operand}")(make_identity_tensor((Int(shape[0]), Int(shape[1]))))
        # same elements; partition_C folds the permutation tile's repeat into MMA_N, so compare as sets
        mine = {(int(r), int(c)) for r, c in zip(rows[37].ravel(), cols[37].ravel())}
        assert mine == {tuple(int(x) for x in v) for v in part.values()}, operand


def test_each_accumulator_element_is_held_by_exactly_one_thread():
    cfg = get_config("sm80", "bf16", 64)
    tv, tile = explain.mma_tv(cfg, "C")
    rows, cols = explain.tv_coords(tv, tile[:2], (cfg.block_m, cfg.block_n))
    counts = np.zeros((cfg.block_m, cfg.block_n), dtype=int)
    np.add.at(counts, (rows.ravel(), cols.ravel()), 1)
    assert (counts == 1).all()


def test_occupancy_arithmetic():
    a100 = explain.DEVICES["sm80"][0]
    # 255 registers -> 8192 per warp -> 8 warps of 4 = 2 CTAs; 64 KiB + 1 KiB reserved -> 2 CTAs in 164 KiB
    assert explain.occupancy(a100, 128, 65536, 255)[:2] == (2, "shared memory and registers")
    assert explain.occupancy(a100, 128, 16384, 255)[:2] == (2, "registers")
    assert explain.occupancy(a100, 256, 131072, 128)[0] == 1
    assert explain.occupancy(a100, 128, 200 * 1024, 64)[0] == 0  # more than a CTA may have


def test_registers_are_recorded_for_every_shipped_config():
    for cfg in shipped_configs():
        for device in explain.DEVICES[cfg.arch]:
            for variant in (("noncausal", "causal") if cfg.arch == "sm80" else (cfg.variant,)):
                regs = explain.REGISTERS.get((cfg.arch, device.target, cfg.dtype, cfg.head_dim, variant))
                assert regs is not None and 0 < regs[0] <= 255, (device.target, cfg.header, variant)


def test_cli_rejects_unshipped_head_dim(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        explain.main(["--hdim", "100", "-o", str(tmp_path)])
    assert e.value.code == 2
    assert "head_dim must be one of (64, 96, 128, 192, 256)" in capsys.readouterr().err


def test_sm90_pictures_and_numbers(sm90_bf16_128):
    out, s = sm90_bf16_128
    _check_pictures(out, SM90_STEMS)
    cfg = get_config("sm90", "bf16", 128)
    assert s["smem_bytes"] == cfg.smem_bytes and s["config"]["threads"] == 384
    p = s["problem"]
    assert (p["q_tiles"], p["kv_tiles"]) == (-(-1000 // cfg.block_m), -(-3000 // cfg.block_n))
    assert p["kv_last_tile_rows"] == 3000 - (p["kv_tiles"] - 1) * cfg.block_n
    (stsm,) = s["bank_conflicts"]  # the one shared-memory instruction SM90's threads issue themselves
    assert stsm["instruction"] == "stmatrix.x4" and stsm["conflicts"] == 0
    assert stsm["unswizzled_worst_degree"] == 8
    assert len(s["not_modelled"]) == 2
    held = {panel["panel"][:2]: panel["registers"] for panel in s["thread_path"]["panels"]}
    assert held["3."] == cfg.block_m * cfg.block_n // cfg.n_mma_threads
    assert held["5."] == cfg.block_m * cfg.head_dim // cfg.n_mma_threads
    (h100,) = s["occupancy"]
    assert h100["ctas_per_sm"] == 1 and h100["setmaxnreg"] == {"producer": 24, "consumers": 240}
    assert "the consumers 240" in (out / "summary.txt").read_text()


def test_sm90_config_follows_the_launchers_choice():
    # csrc/sm90/launch.h: causal -> the causal tiles; else seqlen_k >= kLongSeqlenKMin -> the long-k tiles
    assert get_config("sm90", "bf16", 128, seqlen_k=4095).variant == "noncausal"
    long_k = get_config("sm90", "fp16", 128, seqlen_k=4096)
    assert (long_k.variant, long_k.block_n) == ("noncausal-longk", 160)
    assert long_k.header == "sm90 fp16 hdim128 noncausal-longk"
    assert not long_k.o_aliases_v  # 128 x 160 still leaves O its own buffer
    assert get_config("sm90", "bf16", 128, causal=True, seqlen_k=8192).block_n == 128
    assert get_config("sm90", "bf16", 64, seqlen_k=8192).variant == "noncausal"  # no long-k tile for hdim 64
    s = explain.summarize(long_k, 1, 16, 4096, 8192, 0)[0]
    assert s["config"]["variant"] == "noncausal-longk" and s["problem"]["kv_tiles"] == -(-8192 // 160)


def test_sm90_thread_index_is_the_consumer_index():
    cfg = get_config("sm90", "bf16", 64)
    with pytest.raises(ValueError, match=r"thread must be in \[0, 384\)"):
        explain.thread_path(cfg, 384)
