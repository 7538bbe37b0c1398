"""flashcute/kernel_table.py is the one list of shipped kernels: everything generated from it is current, and its
readers (the build, kernel_configs) see exactly its rows. Pure Python: runs everywhere."""

import importlib.util
import sys
from pathlib import Path

import pytest

from flashcute import _build, kernel_configs, kernel_table

ROOT = Path(__file__).resolve().parents[1]


def _generator():
    spec = importlib.util.spec_from_file_location("generate_instantiations", ROOT / "csrc" / "generate_instantiations.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_files_are_current():
    expected = _generator().generated_files()
    folder = ROOT / "csrc" / "instantiations"
    on_disk = {p.name: p.read_text() for p in folder.iterdir()}
    assert sorted(on_disk) == sorted(expected), "stale or missing files: run python csrc/generate_instantiations.py"
    stale = [name for name, text in expected.items() if on_disk[name] != text]
    assert not stale, f"{stale} differ from flashcute/kernel_table.py: run python csrc/generate_instantiations.py"


def test_generated_header_holds_every_row():
    header = (ROOT / "csrc" / "instantiations" / "kernel_table.h").read_text()
    sm90_fwd_rows = kernel_table.kernels("fwd", "sm90")
    assert header.count("struct FwdTile<") == len(kernel_table.kernels("fwd"))
    assert header.count("struct BwdTile<") == len(kernel_table.kernels("bwd"))
    assert "static constexpr int kAtomLayoutMSdP = 2, kAtomLayoutNdKV = 4, kAtomLayoutMdQ = 2;" in header
    assert "FwdTile<128, FwdVariant::kNonCausalLongK>" in header
    assert "static constexpr int kBlockM = 192, kBlockN = 128, kStages = 2, kSoftmaxReduceParts = 4;" in header
    assert f"X(256, kCausal)" in header and len(sm90_fwd_rows) == 11
    assert ("static constexpr int kBlockM = 128, kBlockN = 128, kStages = 2, kAtomLayoutMdQ = 2, kAtomLayoutMdKV = 1;\n"
            "  static constexpr bool kKeysAlongM = true;") in header
    assert ("static constexpr int kBlockM = 64, kBlockN = 64, kStages = 2, kAtomLayoutMdQ = 1, kAtomLayoutMdKV = 2;\n"
            "  static constexpr bool kKeysAlongM = false;") in header


def test_rows_are_unique_and_named():
    keys = [(k.op, k.arch, k.head_dim, k.variant) for k in kernel_table.KERNELS]
    assert len(keys) == len(set(keys))
    for k in kernel_table.KERNELS:
        assert k.arch in kernel_table.ARCHS and k.op in kernel_table.OPS
        assert k.variant == "all" if k.arch == "sm80" or k.op == "bwd" else k.variant in kernel_table.SM90_VARIANTS
        assert k.why and k.decision.startswith("d-")
    # Every SM90 head dim has both causal flags; every head dim has both archs and an SM80 backward.
    for d in kernel_table.head_dims():
        assert {k.variant for k in kernel_table.kernels("fwd", "sm90") if k.head_dim == d} >= {"noncausal", "causal"}
        assert kernel_table.find("fwd", "sm80", d, "all") and kernel_table.find("bwd", "sm80", d, "all")
    assert kernel_table.head_dims("bwd") == kernel_table.head_dims("fwd")


def test_decision_anchors_exist_in_the_notes():
    notes = (ROOT / "benchmarks" / "notes.md").read_text()
    for k in kernel_table.KERNELS:
        assert f'id="{k.decision}"' in notes or f"{{#{k.decision}}}" in notes, f"{k.name}: no anchor {k.decision}"


def test_build_compiles_one_file_per_op_arch_dtype_head_dim():
    config = _build.BuildConfig(("8.0", "9.0a"), ("fp16", "bf16"), kernel_table.head_dims())
    names = [p.name for p in config.sources()]
    assert names[0] == "flash_api.cpp"
    assert len(names) - 1 == len({(k.op, k.arch, k.head_dim) for k in kernel_table.KERNELS}) * 2
    assert "fwd_sm90_bf16_hdim192.cu" in names and "fwd_sm80_fp16_hdim64.cu" in names
    assert "bwd_sm80_bf16_hdim256.cu" in names
    assert _build.ALL_HEAD_DIMS == (64, 96, 128, 192, 256)


def test_kernel_configs_read_the_table():
    assert len(kernel_configs.shipped_configs()) == len(kernel_table.kernels("fwd")) * len(kernel_table.DTYPES)
    for k in kernel_table.kernels("fwd"):
        if k.arch == "sm80":
            cfg = kernel_configs.get_config("sm80", "bf16", k.head_dim)
            assert (cfg.block_m, cfg.block_n, cfg.n_warps) == (k.tile.block_m, k.tile.block_n, k.tile.warps)
        else:
            causal = k.variant == "causal"
            seqlen_k = kernel_table.LONG_SEQLEN_K_MIN if k.variant == "noncausal-longk" else 128
            cfg = kernel_configs.get_config("sm90", "fp16", k.head_dim, causal=causal, seqlen_k=seqlen_k)
            assert (cfg.block_m, cfg.block_n, cfg.stages) == (k.tile.block_m, k.tile.block_n, k.tile.stages)
    with pytest.raises(ValueError, match="head_dim must be one of"):
        kernel_configs.get_config("sm90", "bf16", 80)


def test_table_imports_without_torch():
    code = "import sys; import flashcute.kernel_table; assert 'torch' not in sys.modules and 'numpy' not in sys.modules"
    import subprocess

    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
