"""flashcute.explain on the CPU: the numbers it reports (values, not just presence), the bank predictions, the
ptxas data and its checker, and the command line's files.

Drawing is what costs here (the MMA and shared-memory pictures take a minute each at full size on a slow
CPU): the default run draws the cheap pictures once per arch; FLASHCUTE_EXPLAIN_ALL=1 also draws every picture
of every shipped configuration.
"""

import json
import os

import numpy as np
import pytest

from flashcute import explain, kernel_configs, kernel_table
from flashcute.explain import ptxas
from flashcute.explain.backward import bwd_summary_text
from flashcute.kernel_configs import get_config, shipped_configs
from flashcute.layout import Int, make_identity_tensor

SM80_STEMS = ("tiling", "smem_SmemLayoutQ", "smem_SmemLayoutKV", "smem_SmemLayoutVt", "bank_conflicts", "bank_phase",
              "mma_tv", "thread_path")
SM90_STEMS = ("tiling", "smem_SmemLayoutQ", "smem_SmemLayoutK", "smem_SmemLayoutVt", "bank_conflicts", "bank_phase",
              "mma_tv_S", "mma_tv_O_A", "thread_path")
CHEAP = ("tiling", "bank_conflicts", "bank_phase", "thread_path", "varlen_tiling")


def _check_pictures(out, stems):
    for stem in stems:
        png, svg = out / f"{stem}.png", out / f"{stem}.svg"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{png} is not a PNG"
        assert b"<svg" in svg.read_bytes()[:2000], f"{svg} is not an SVG"


@pytest.fixture(scope="module")
def sm80_cli(tmp_path_factory):
    """python -m flashcute.explain for SM80 bf16 hdim128, the cheap pictures: (folder, summary.json)."""
    out = tmp_path_factory.mktemp("explain80")
    assert explain.main(["--arch", "sm80", "--dtype", "bf16", "--hdim", "128", "--seqlen", "2000", "--thread", "37",
                         "--pictures", ",".join(CHEAP), "-o", str(out)]) == 0
    return out, json.loads((out / "summary.json").read_text())


@pytest.fixture(scope="module")
def sm90_bf16_128(tmp_path_factory):
    out = tmp_path_factory.mktemp("explain90")
    return out, explain.explain("sm90", "bf16", 128, out, seqlen_q=1000, seqlen_k=3000, thread=200, pictures=CHEAP)


# ------------------------------------------------------------------------------------------------ SM80 numbers
def test_cli_writes_the_summary_and_the_pictures_asked_for(sm80_cli):
    out, s = sm80_cli
    _check_pictures(out, CHEAP)
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [f"{stem}.{ext}" for stem in CHEAP for ext in ("png", "svg")] + ["summary.json", "summary.txt"])
    assert s["smem_bytes"] == 65536 == get_config("sm80", "bf16", 128).smem_bytes
    text = (out / "summary.txt").read_text()
    assert "Sw<3,3,3> o _0 o ((_8,_16),(_64,_2)):((_64,_512),(_1,_8192))" in text
    assert "last has 80 of 128 rows" in text and "last has 16 of 64 rows" in text


def test_key_numbers(sm80_cli):
    _, s = sm80_cli
    assert s["config"] == {"arch": "sm80", "dtype": "bf16", "head_dim": 128, "block_m": 128, "block_n": 64,
                           "n_warps": 4, "threads": 128, "kv_stages": 1}
    p = s["problem"]
    assert (p["q_tiles"], p["kv_tiles"], p["ctas"]) == (16, 32, 16 * 16)
    assert (p["q_last_tile_rows"], p["kv_last_tile_rows"]) == (2000 - 15 * 128, 2000 - 31 * 64)
    assert p["flops_useful"] == 4 * 16 * 2000 * 2000 * 128
    assert s["tile"]["flops"] == 4 * 128 * 64 * 128
    assert s["tile"]["arithmetic_intensity"] == pytest.approx(128.0)  # 4*M*N*d / (2*N*d*2 bytes) = M
    held = {panel["panel"][:2]: panel["registers"] for panel in s["thread_path"]["panels"]}
    assert s["thread_path"]["thread"] == 37
    assert held["4."] == 128 * 64 // 128 and held["6."] == 128 * 128 // 128


def test_sm80_occupancy_and_registers_are_the_ptxas_data(sm80_cli):
    _, s = sm80_cli
    a100, h100 = s["occupancy"]
    row = "fwd_sm80_hdim128_all"
    for o, target in ((a100, "sm_80"), (h100, "sm_90a")):
        regs, stores, loads = ptxas.MEASURED[(row, "bf16", target, False)]
        assert (o["registers"], o["spill_store_bytes"], o["spill_load_bytes"]) == (regs, stores, loads)
        assert o["registers_causal"] == ptxas.MEASURED[(row, "bf16", target, True)][0]
        assert o["registers_per_cta"] == regs * 128
    # 255 registers: 8192 per warp, 8 warps = 2 CTAs of 4; 64 KiB + 1 KiB reserved: 2 in 164 KiB, 3 in 228 KiB
    assert a100["registers"] == 255 and h100["registers"] == 255
    assert (a100["ctas_per_sm"], a100["limited_by"], a100["warps_per_sm"]) == (2, "shared memory and registers", 8)
    assert a100["limits"] == {"threads": 16, "CTA slots": 32, "shared memory": 2, "registers": 2}
    assert a100["occupancy"] == pytest.approx(8 / 64)
    assert (h100["ctas_per_sm"], h100["limited_by"], h100["limits"]["shared memory"]) == (2, "registers", 3)


def test_shipped_swizzle_is_conflict_free_and_the_unswizzled_layout_is_not(sm80_cli):
    _, s = sm80_cli
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
    for operand, shape, modes in (("A", (cfg.block_m, cfg.head_dim), (0, 2)),
                                  ("C", (cfg.block_m, cfg.block_n), (0, 1))):
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


def test_varlen_walk_orders_sequences_longest_first():
    """One head, 128-row blocks: sequence 2 (700 keys) first, then 0 (300), 3 (129), 4 (40); causal units pair the
    last block with the first. (tests/test_sm90_scheduler.py holds the walk equal to the kernel's scheduler.)"""
    walk = explain.draw.varlen_walk((300, 0, 700, 129, 40), 128, 128, causal=False)
    assert [(b, m) for b, m, _ in walk] == [(2, m) for m in range(6)] + [(0, 0), (0, 1), (0, 2), (3, 0), (3, 1), (4, 0)]
    assert [i for _, _, i in walk] == list(range(12))
    causal = explain.draw.varlen_walk((300, 0, 700), 128, 128, causal=True)
    assert [(b, m) for b, m, _ in causal] == [(2, 5), (2, 0), (2, 4), (2, 1), (2, 3), (2, 2), (0, 2), (0, 0), (0, 1)]


def test_varlen_tiling_rejects_bad_lengths(tmp_path):
    for lengths in ((), (0, 0), (5, -1)):
        with pytest.raises(ValueError, match="lengths must be non-negative integers"):
            explain.explain("sm90", "bf16", 128, tmp_path, pictures=("varlen_tiling",), lengths=lengths)


def test_cli_rejects_unshipped_head_dim_and_unknown_pictures(tmp_path, capsys):
    for argv, message in ((["--hdim", "100"], "head_dim must be one of (64, 96, 128, 192, 256)"),
                          (["--pictures", "tiling,mma"], "pictures must be among tiling, smem,")):
        with pytest.raises(SystemExit) as e:
            explain.main([*argv, "-o", str(tmp_path)])
        assert e.value.code == 2
        assert message in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------ SM90 numbers
def test_sm90_pictures_and_numbers(sm90_bf16_128):
    out, s = sm90_bf16_128
    _check_pictures(out, CHEAP)
    cfg = get_config("sm90", "bf16", 128)
    assert s["smem_bytes"] == cfg.smem_bytes == 197632 and s["config"]["threads"] == 384
    p = s["problem"]
    assert (p["q_tiles"], p["kv_tiles"]) == (8, 24) == (-(-1000 // cfg.block_m), -(-3000 // cfg.block_n))
    assert p["kv_last_tile_rows"] == 3000 - 23 * 128
    (stsm,) = s["bank_conflicts"]  # the one shared-memory instruction SM90's threads issue themselves
    assert stsm["instruction"] == "stmatrix.x4" and stsm["conflicts"] == 0
    assert stsm["unswizzled_worst_degree"] == 8
    assert len(s["not_modelled"]) == 2
    held = {panel["panel"][:2]: panel["registers"] for panel in s["thread_path"]["panels"]}
    assert held["3."] == 128 * 128 // 256 and held["5."] == 128 * 128 // 256
    # 168 registers x 384 threads: 12 warps of 5376 fill the 65536; 193 KiB + 1 KiB of smem fit once in 228 KiB
    (h100,) = s["occupancy"]
    assert (h100["registers"], h100["registers_per_cta"]) == (168, 168 * 384)
    assert (h100["ctas_per_sm"], h100["limited_by"], h100["warps_per_sm"]) == (1, "shared memory and registers", 12)
    assert h100["setmaxnreg"] == {"producer": 24, "consumers": 240}
    assert (h100["spill_store_bytes"], h100["spill_load_bytes"]) == ptxas.MEASURED[
        ("fwd_sm90_hdim128_noncausal", "bf16", "sm_90a", False)][1:]
    assert ("168 registers/thread at launch; setmaxnreg then gives the producer 24 and the consumers 240"
            in (out / "summary.txt").read_text())


@pytest.mark.parametrize("head_dim, causal, threads, launch, producer, consumers", [
    (64, True, 384, 168, 24, 240),    # 128-row Q blocks: two consumer warpgroups
    (64, False, 512, 128, 32, 160),   # 192-row Q blocks: three
    (128, False, 384, 168, 24, 240),
    (256, True, 384, 168, 24, 240),
])
def test_sm90_launch_registers_and_setmaxnreg_split(head_dim, causal, threads, launch, producer, consumers):
    cfg = get_config("sm90", "fp16", head_dim, causal)
    (h100,) = explain.occupancy_numbers(cfg)
    assert (cfg.n_threads, h100["registers"], h100["setmaxnreg"]) == (
        threads, launch, {"producer": producer, "consumers": consumers})
    # kernel_traits.h's static_assert: setmaxnreg may only hand round what the CTA launched with
    assert 128 * producer + (threads - 128) * consumers <= threads * launch


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
    assert s["smem_bytes"] == long_k.smem_bytes == 230400


def test_sm90_thread_index_is_the_consumer_index():
    cfg = get_config("sm90", "bf16", 64)
    with pytest.raises(ValueError, match=r"thread must be in \[0, 384\)"):
        explain.thread_path(cfg, 384)


# ------------------------------------------------------------------------------------------------ ptxas data
def test_ptxas_data_covers_exactly_the_shipped_kernels():
    expected = {(k.name, dtype, device.target, causal)
                for k in ptxas.recorded_kernels() for dtype in kernel_table.DTYPES
                for device in explain.DEVICES[k.arch] for causal in ptxas.causal_flags(k)}
    assert set(ptxas.MEASURED) == expected
    assert {name for name, *_ in ptxas.MEASURED} >= {k.name for k in kernel_table.kernels("bwd", "sm90")}
    for (name, *_), (regs, stores, loads) in ptxas.MEASURED.items():
        # SM90 registers are derived (the launch count), never typed; SM80's are ptxas's
        assert (regs is None) == ("_sm90_" in name), name
        assert regs is None or 0 < regs <= 255
        assert stores >= 0 and loads >= 0


@pytest.mark.parametrize("cfg", shipped_configs(), ids=lambda c: c.header.replace(" ", "-"))
def test_reported_registers_are_the_ptxas_data(cfg):
    kernel = ptxas.kernel_of(cfg)
    for o, device in zip(explain.occupancy_numbers(cfg), explain.DEVICES[cfg.arch]):
        measured = ptxas.MEASURED[(kernel.name, cfg.dtype, device.target, cfg.arch == "sm90" and cfg.causal)]
        regs = measured[0] if cfg.arch == "sm80" else cfg.launch_regs
        assert (o["registers"], o["spill_store_bytes"], o["spill_load_bytes"]) == (regs, *measured[1:])


# Mangled names as nvcc 13.0 writes them (csrc/sm80/kernel.h fwd_kernel<Traits, kCausal, kVarlen>,
# csrc/sm90/kernel.h fwd_kernel<KernelTraits<Element, kHeadDim, kCausal, kLongSeqlenK>>).
SM80_BF16_128 = ("_ZN9flashcute4sm8010fwd_kernelINS0_12KernelTraitsIN7cutlass10bfloat16_t"
                 "ELi128ELi128ELi64ELi4ELi4ELi4EEELb{causal}ELb{varlen}EEEvNS_9FwdParamsE")
SM90_BF16_128 = ("_ZN9flashcute4sm9010fwd_kernelINS0_12KernelTraitsIN7cutlass10bfloat16_t"
                 "ELi128ELb{causal}ELb{longk}EEEEEvNS0_12KernelParamsIT_EE")


def _ptxas_log(entries, target):
    """nvcc -Xptxas -v output for (mangled name, registers, spill stores, spill loads) entries."""
    lines = ["ptxas info    : 11 bytes gmem, 88 bytes cmem[4]"]
    for name, regs, stores, loads in entries:
        lines += [f"ptxas info    : Compiling entry function '{name}' for '{target}'",
                  f"ptxas info    : Function properties for {name}",
                  f"    {stores} bytes stack frame, {stores} bytes spill stores, {loads} bytes spill loads",
                  f"ptxas info    : Used {regs} registers, used 1 barriers, {stores} bytes cumulative stack size",
                  "ptxas info    : Compile time = 4131.888 ms"]
    return "\n".join(lines) + "\n"


def test_check_accepts_the_stored_numbers_and_names_each_difference():
    row = "fwd_sm80_hdim128_all"
    stored = [ptxas.MEASURED[(row, "bf16", "sm_80", causal)] for causal in (False, True)]
    entries = [(SM80_BF16_128.format(causal=int(c), varlen=0), *stored[c]) for c in (0, 1)]
    found = ptxas.parse_log(_ptxas_log(entries, "sm_80"))
    assert found == {(row, "bf16", "sm_80", False): stored[0], (row, "bf16", "sm_80", True): stored[1]}
    assert ptxas.check(found) == []
    regs, stores, loads = stored[1]
    (problem,) = ptxas.check(ptxas.parse_log(_ptxas_log([entries[0], (entries[1][0], regs, stores + 8, loads)],
                                                        "sm_80")))
    assert problem.startswith(f"{row} bf16 sm_80 causal: ptxas ({regs}, {stores + 8}, {loads})")
    (missing,) = ptxas.check(ptxas.parse_log(_ptxas_log(entries[:1], "sm_80")))
    assert "causal: ptxas None" in missing
    assert ptxas.check({}) == ["no flashcute kernel in the log (was it compiled with -Xptxas -v?)"]


def test_check_holds_sm90_to_the_launch_registers():
    spills = {v: ptxas.MEASURED[(f"fwd_sm90_hdim128_{v}", "bf16", "sm_90a", v == "causal")][1:]
              for v in ("noncausal", "causal", "noncausal-longk")}
    names = {"noncausal": SM90_BF16_128.format(causal=0, longk=0), "causal": SM90_BF16_128.format(causal=1, longk=0),
             "noncausal-longk": SM90_BF16_128.format(causal=0, longk=1)}
    log = _ptxas_log([(names[v], 168, *spills[v]) for v in names], "sm_90a")
    assert set(ptxas.parse_log(log)) == {(f"fwd_sm90_hdim128_{v}", "bf16", "sm_90a", v == "causal") for v in names}
    assert ptxas.check(ptxas.parse_log(log)) == []
    (problem,) = ptxas.check(ptxas.parse_log(log.replace("Used 168 registers", "Used 128 registers", 1)))
    assert problem.startswith("fwd_sm90_hdim128_noncausal bf16 sm_90a non-causal: ptxas (128,")


# csrc/sm90/bwd_kernel.h bwd_kernel<BwdKernelTraits<Element, kHeadDim>, kCausal>, and the SM80 postprocess run
# with its traits (no figures).
SM90_BWD_BF16_128 = ("_ZN9flashcute4sm9010bwd_kernelINS0_15BwdKernelTraitsIN7cutlass10bfloat16_tELi128EEELb{causal}EEEv"
                     "NS0_15BwdKernelParamsIT_XT0_EEE")
SM90_BWD_POSTPROCESS = ("_ZN9flashcute4sm8022bwd_postprocess_kernelINS_4sm9015BwdKernelTraitsIN7cutlass10bfloat16_t"
                        "ELi128EE7PrePostELNS0_4GradE0EEEvNS_9BwdParamsE")


def test_check_holds_the_sm90_backward_to_its_launch_registers_and_spills():
    row = "bwd_sm90_hdim128_all"
    spills = [ptxas.MEASURED[(row, "bf16", "sm_90a", causal)][1:] for causal in (False, True)]
    log = _ptxas_log([(SM90_BWD_BF16_128.format(causal=c), 168, *spills[c]) for c in (0, 1)]
                     + [(SM90_BWD_POSTPROCESS, 48, 0, 0)], "sm_90a")
    assert set(ptxas.parse_log(log)) == {(row, "bf16", "sm_90a", False), (row, "bf16", "sm_90a", True)}
    assert ptxas.check(ptxas.parse_log(log)) == []
    spilled = log.replace(f"{spills[1][0]} bytes spill stores", f"{spills[1][0] + 16} bytes spill stores")
    assert any(p.startswith(f"{row} bf16 sm_90a") for p in ptxas.check(ptxas.parse_log(spilled)))


# The queries-along-M plan (head dims 192 and 256): bwd_kernel<BwdKernelTraitsQueriesAlongM<Element, kHeadDim>,
# kCausal, kVarlen>.
SM90_BWD_QAM_BF16_256 = ("_ZN9flashcute4sm9010bwd_kernelINS0_28BwdKernelTraitsQueriesAlongMIN7cutlass10bfloat16_t"
                         "ELi256EEELb{causal}ELb{varlen}EEEvNS0_15BwdKernelParamsIT_XT0_EEE")


def test_identify_reads_the_queries_along_m_backward():
    row = kernel_table.find("bwd", "sm90", 256, "all")
    assert not row.tile.keys_along_m
    for causal in (False, True):
        assert ptxas.identify(SM90_BWD_QAM_BF16_256.format(causal=int(causal), varlen=0)) == (row, "bf16", causal)
        assert ptxas.identify(SM90_BWD_QAM_BF16_256.format(causal=int(causal), varlen=1)) is None
    spills = [ptxas.MEASURED[(row.name, "bf16", "sm_90a", causal)][1:] for causal in (False, True)]
    log = _ptxas_log([(SM90_BWD_QAM_BF16_256.format(causal=c, varlen=0), 168, *spills[c]) for c in (0, 1)], "sm_90a")
    assert ptxas.check(ptxas.parse_log(log)) == []


def test_identify_ignores_other_functions():
    assert ptxas.identify("_Z17some_other_kernelPf") is None
    assert ptxas.identify(SM80_BF16_128.format(causal=1, varlen=0))[1:] == ("bf16", True)
    assert ptxas.identify(SM80_BF16_128.format(causal=1, varlen=1)) is None  # packed batches: no figures
    decode = ("_ZN9flashcute4sm8015split_kv_kernelINS0_12KernelTraitsIN7cutlass10bfloat16_tELi128ELi64ELi128ELi4ELi4"
              "ELi4EEELb0ELb0EEEvNS_12DecodeParamsE")
    assert ptxas.identify(decode) is None  # the decode kernel's traits look like the forward's


# ------------------------------------------------------------------------------------------------ SM90 backward
BWD_SMEM_STEMS = ("smem_SmemLayoutQ", "smem_SmemLayoutK", "smem_SmemLayoutdS")
BWD_MMA_STEMS = ("mma_tv_SdP", "mma_tv_dKV_A", "mma_tv_dQ")


def bwd_stems(cfg):
    """The pictures of one backward plan: with queries along M, P and dS share SmemLayoutPdS, and the dK^T / dV^T
    gemm (both operands in shared memory) is drawn whole."""
    if cfg.keys_along_m:
        return BWD_SMEM_STEMS + BWD_MMA_STEMS
    return ("smem_SmemLayoutQ", "smem_SmemLayoutK", "smem_SmemLayoutPdS", "mma_tv_SdP", "mma_tv_dKV", "mma_tv_dQ")


def test_bwd_cli_writes_the_backward_numbers_and_smem_pictures(tmp_path):
    assert explain.main(["--op", "bwd", "--arch", "sm90", "--dtype", "bf16", "--hdim", "128", "--pictures", "smem",
                         "-o", str(tmp_path)]) == 0
    _check_pictures(tmp_path, BWD_SMEM_STEMS)
    s = json.loads((tmp_path / "summary.json").read_text())
    cfg = kernel_configs.config_for(kernel_table.find("bwd", "sm90", 128, "all"), "bf16")
    assert s["smem_bytes"] == cfg.smem_bytes <= 227 * 1024
    assert s["layouts"] == cfg.printed()
    # 128 consumer threads per 64 keys: dK and dV of 64 x 128 each, S^T and dP^T of 64 x 64, dQ's 64 x 64 slice
    assert s["accumulators_per_thread"] == {"dK + dV": 128, "S^T + dP^T": 64, "dQ": 32}
    assert s["registers"] == {"launch": 168, "producer": 24, "consumer": 240}
    for causal, variant in ((False, "non-causal"), (True, "causal")):
        regs, stores, loads = ptxas.numbers(kernel_table.find("bwd", "sm90", 128, "all"), "bf16", "sm_90a", causal)
        assert s["ptxas"][variant] == {"registers": regs, "spill_store_bytes": stores, "spill_load_bytes": loads}
    assert "ptxas (causal): 168 registers" in (tmp_path / "summary.txt").read_text()


def test_bwd_summary_of_the_queries_along_m_plan():
    cfg = kernel_configs.config_for(kernel_table.find("bwd", "sm90", 256, "all"), "bf16")
    s = explain.bwd_summary(cfg)
    assert (s["config"]["keys_along_m"], s["config"]["atom_dkv_m"]) == (False, 2)
    assert s["layouts"] == cfg.printed() and "SmemLayoutPdS" in s["layouts"] and "SmemLayoutdQ" not in s["layouts"]
    # 128 consumer threads per 128 x 64 slice of dK^T and dV^T (two warpgroups along the 256-wide head dim), per
    # 64 x 32 of S and dP (the warpgroups split the 64 keys), per 64 x 128 of dQ
    assert s["accumulators_per_thread"] == {"dK^T + dV^T": 128, "S + dP": 32, "dQ": 64}
    assert s["ptxas"]["causal"] == {"registers": 168, "spill_store_bytes": 0, "spill_load_bytes": 0}
    text = bwd_summary_text(s)
    assert "64 keys per CTA (queries along M" in text and "dK^T + dV^T 128 (across the Q blocks)" in text


def test_bwd_cli_rejects_other_head_dims_and_pictures(tmp_path, capsys):
    for argv, message in ((["--arch", "sm90", "--hdim", "160"], "head_dim must be one of (64, 96, 128, 192, 256) for"),
                          (["--arch", "sm80", "--hdim", "80"], "for the SM80 backward, got 80"),
                          (["--arch", "sm90", "--pictures", "tiling"], "pictures must be among smem, mma_tv")):
        with pytest.raises(SystemExit) as e:
            explain.main(["--op", "bwd", *argv, "-o", str(tmp_path)])
        assert e.value.code == 2
        assert message in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------ SM80 backward
SM80_BWD_STEMS = ("smem_SmemLayoutQdO", "smem_SmemLayoutKV", "smem_SmemLayoutPdS", "mma_tv_SdP", "mma_tv_dKV",
                  "mma_tv_dQ")


def test_sm80_bwd_cli_writes_its_numbers_and_smem_pictures(tmp_path):
    assert explain.main(["--op", "bwd", "--arch", "sm80", "--dtype", "fp16", "--hdim", "128", "--pictures", "smem",
                         "-o", str(tmp_path)]) == 0
    _check_pictures(tmp_path, SM80_BWD_STEMS[:3])
    s = json.loads((tmp_path / "summary.json").read_text())
    cfg = kernel_configs.config_for(kernel_table.find("bwd", "sm80", 128, "all"), "fp16")
    assert s["layouts"] == cfg.printed()
    # kernel_table's FlashAttention-2 tile: 64 query rows, 128 keys, 8 warps; two Q and dO stages, K, V, P and dS
    assert (s["config"]["block_m"], s["config"]["block_n"], s["config"]["threads"]) == (64, 128, 256)
    assert s["smem_bytes"] == (2 * 2 * 64 * 128 + 2 * 128 * 128 + 2 * 64 * 128) * 2
    # 256 threads: dK and dV of 128 x 128 each, S and dP of 64 x 128, dQ of 64 x 128
    assert s["accumulators_per_thread"] == {"dK + dV": 128, "S + dP": 64, "dQ": 32}
    text = (tmp_path / "summary.txt").read_text()
    assert "flashcute sm80 backward fp16 hdim128: 128 keys per CTA" in text and "S/dP 2 x 4, dK/dV 4 x 2" in text
    assert [r["access"] for r in s["bank_conflicts"]] == [a.name for a in explain.smem.SM80_BWD_ACCESSES]
    assert "P^T, dS^T smem->regs   ldmatrix.x4.trans" in text


@pytest.mark.parametrize("cfg", kernel_configs.sm80_bwd_configs(), ids=lambda c: c.header.replace(" ", "-"))
def test_sm80_bwd_shared_memory_is_conflict_free_with_its_swizzles(cfg):
    reports = explain.kernel_access_reports(cfg, explain.smem.SM80_BWD_ACCESSES)
    assert all(r.swizzled.total()[2] == 0 for r in reports), [r.row() for r in reports if r.swizzled.total()[2]]
    # what the swizzles buy: without them the ldmatrix reads and the accumulators' stores conflict (8-way with 128-byte
    # rows, 4-way with hdim 96's 64-byte ones)
    unswizzled = {r.access.name: int(r.unswizzled.degree.max()) for r in reports}
    expected = 4 if cfg.head_dim == 96 else 8
    assert unswizzled["K^T smem->regs"] == unswizzled["Q, dO smem->regs"] == expected



# ------------------------------------------------------------------------------------------------ every picture
@pytest.mark.skipif(not os.environ.get("FLASHCUTE_EXPLAIN_ALL"), reason="FLASHCUTE_EXPLAIN_ALL=1 draws every picture "
                    "of every shipped configuration (about a minute each)")
@pytest.mark.parametrize("cfg", shipped_configs(), ids=lambda c: c.header.replace(" ", "-"))
def test_every_picture_of_every_shipped_config(cfg, tmp_path):
    causal = cfg.arch == "sm90" and cfg.causal
    seqlen_k = 8192 if cfg.arch == "sm90" and cfg.long_seqlen_k else 2000
    s = explain.explain(cfg.arch, cfg.dtype, cfg.head_dim, tmp_path, seqlen_k=seqlen_k, causal=causal)
    assert s["config"]["block_n"] == cfg.block_n
    _check_pictures(tmp_path, SM80_STEMS if cfg.arch == "sm80" else SM90_STEMS)
    assert len(s["files"]) == 2 * len(SM80_STEMS if cfg.arch == "sm80" else SM90_STEMS) + 2


@pytest.mark.skipif(not os.environ.get("FLASHCUTE_EXPLAIN_ALL"), reason="FLASHCUTE_EXPLAIN_ALL=1 draws every picture "
                    "of every shipped configuration (about a minute each)")
@pytest.mark.parametrize("cfg", kernel_configs.sm90_bwd_configs(), ids=lambda c: c.header.replace(" ", "-"))
def test_every_picture_of_every_sm90_backward_config(cfg, tmp_path):
    s = explain.explain_backward(cfg.dtype, cfg.head_dim, tmp_path)
    _check_pictures(tmp_path, bwd_stems(cfg))
    assert len(s["files"]) == 2 * len(bwd_stems(cfg)) + 2


@pytest.mark.skipif(not os.environ.get("FLASHCUTE_EXPLAIN_ALL"), reason="FLASHCUTE_EXPLAIN_ALL=1 draws every picture "
                    "of every shipped configuration (about a minute each)")
@pytest.mark.parametrize("cfg", kernel_configs.sm80_bwd_configs(), ids=lambda c: c.header.replace(" ", "-"))
def test_every_picture_of_every_sm80_backward_config(cfg, tmp_path):
    s = explain.explain_backward(cfg.dtype, cfg.head_dim, tmp_path, arch="sm80")
    _check_pictures(tmp_path, SM80_BWD_STEMS)
    assert len(s["files"]) == 2 * len(SM80_BWD_STEMS) + 2
