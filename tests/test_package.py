"""CPU tests of the package around the kernels: imports without a GPU (or torch), clear errors where the
kernels cannot run, the build's architecture/source selection, the cache key, CUTLASS discovery, the AOT
record check and the build lock."""

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import flashcute
from flashcute import _build

REPO = Path(__file__).resolve().parents[1]


def run_python(code, **env):
    return subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO), **env},
    )


def test_import_needs_no_torch():
    # Make `import torch` fail inside the child: flashcute and flashcute.layout must still import.
    result = run_python(
        "import sys; sys.modules['torch'] = None\n"
        "import flashcute, flashcute.layout\n"
        "print(flashcute.__version__)\n"
        "try:\n    flashcute.flash_attn_func\nexcept ImportError as e:\n    print('ImportError:', e)\n"
    )
    assert result.returncode == 0, result.stderr
    assert flashcute.__version__ in result.stdout
    assert "flash_attn_func needs PyTorch" in result.stdout


def test_import_without_gpu_does_not_build():
    result = run_python("import flashcute, torch; print(sorted(flashcute.__all__))", CUDA_VISIBLE_DEVICES="")
    assert result.returncode == 0, result.stderr
    assert "flashcute: compiling" not in result.stderr
    assert "flash_attn_func" in result.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without a GPU")
def test_calling_the_kernel_without_cuda_is_a_clear_error():
    q = torch.randn(1, 4, 2, 64, dtype=torch.float16)
    with pytest.raises(RuntimeError, match="flashcute.fwd: q must be a CUDA tensor, got a tensor on cpu"):
        flashcute.flash_attn_func(q, q, q)
    with pytest.raises(flashcute.FlashcuteUnavailable) as error:
        flashcute.load_extension()
    message = str(error.value)
    if torch.version.cuda is None:
        assert "need a CUDA build of PyTorch" in message and torch.__version__ in message
    else:
        assert "no CUDA GPU is visible" in message and "FLASHCUTE_CUDA_ARCHS" in message


@pytest.mark.parametrize("imports", ["import torch, flashcute", "import flashcute, torch"])
def test_ops_exist_after_import_in_either_order(imports):
    """The schemas and fake kernels are defined at import, the extension is not loaded (nor built)."""
    result = run_python(
        f"{imports}\n"
        "from torch._subclasses.fake_tensor import FakeTensorMode\n"
        "print(torch.ops.flashcute.fwd.default._schema)\n"
        "print(torch.ops.flashcute.bwd.default._schema)\n"
        "with FakeTensorMode():\n"
        "    q = torch.empty(2, 17, 8, 64, dtype=torch.bfloat16)\n"
        "    k = torch.empty(2, 33, 2, 64, dtype=torch.bfloat16)\n"
        "    out, lse = torch.ops.flashcute.fwd(q, k, k, None, True)\n"
        "    dq, dk, dv = torch.ops.flashcute.bwd(out, q, k, k, out, lse, None, True)\n"
        "print(tuple(out.shape), out.dtype, tuple(lse.shape), lse.dtype)\n"
        "print(tuple(dq.shape), tuple(dk.shape), tuple(dv.shape), dq.dtype, dk.dtype, dv.dtype)\n"
        "print(flashcute._build._loaded)\n",
        CUDA_VISIBLE_DEVICES="",
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("flashcute::fwd(Tensor q, Tensor k, Tensor v, float? softmax_scale=None")
    assert lines[0].endswith('str backend="auto", bool deterministic=False) -> (Tensor out, Tensor lse)')
    assert lines[1].startswith("flashcute::bwd(Tensor dout, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, ")
    assert lines[1].endswith('bool deterministic=False, str backend="auto") -> (Tensor dq, Tensor dk, Tensor dv)')
    assert lines[2:] == ["(2, 17, 8, 64) torch.bfloat16 (2, 8, 17) torch.float32",
                         "(2, 17, 8, 64) (2, 33, 2, 64) (2, 33, 2, 64) torch.bfloat16 torch.bfloat16 torch.bfloat16",
                         "None"]


@pytest.mark.parametrize("entry", ["op", "flash_attn_func", "flash_attn_varlen_func"])
@pytest.mark.parametrize("loss", ["out", "lse", "out and lse"])
def test_autograd_formula_on_fake_tensors(loss, entry):
    """fwd's and fwd_varlen's autograd formula runs without a GPU on fake tensors (bwd's fake kernel; for lse,
    fwd's and bwd's): gradients of the inputs' shapes and dtype, none for v when only lse is used; the op through
    register_autograd, the Python entry points through _ops._EagerAttention."""
    import flashcute
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        q = torch.empty(2, 8, 17, 64, dtype=torch.float16, requires_grad=True)
        k = torch.empty(2, 33, 2, 64, dtype=torch.float16, requires_grad=True)
        v = torch.empty(2, 33, 2, 64, dtype=torch.float16, requires_grad=True)
        if entry == "op":
            out, lse = torch.ops.flashcute.fwd(q.transpose(1, 2), k, v, None, True)
        elif entry == "flash_attn_func":
            out, lse = flashcute.flash_attn_func(q.transpose(1, 2), k, v, causal=True, return_lse=True)
        else:
            cu_seqlens_q = torch.tensor([0, 17, 34], dtype=torch.int32)
            cu_seqlens_k = torch.tensor([0, 33, 66], dtype=torch.int32)
            out, lse = flashcute.flash_attn_varlen_func(q.transpose(1, 2).flatten(0, 1), k.flatten(0, 1),
                                                        v.flatten(0, 1), cu_seqlens_q, cu_seqlens_k, 17, 33,
                                                        causal=True, return_lse=True)
        eager = type(out.grad_fn).__name__ == "_EagerAttentionBackward"
        total = {"out": out.sum(), "lse": lse.sum(), "out and lse": out.sum() + lse.sum()}[loss]
        dq, dk, dv = torch.autograd.grad(total, (q, k, v), allow_unused=True)
    assert eager == (entry != "op")
    assert dq.shape == q.shape and dk.shape == k.shape and dq.dtype == dk.dtype == torch.float16
    assert (dv is None) == (loss == "lse")


@pytest.mark.parametrize("entry", ["op", "flash_attn_func"])
def test_double_backward_is_a_clear_error_on_fake_tensors(entry):
    """create_graph=True gives first-order gradients through either autograd path; a second backward through them
    raises bwd's error rather than returning wrong second derivatives."""
    import flashcute
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        q, k, v = (torch.empty(1, 16, 2, 64, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        out = torch.ops.flashcute.fwd(q, k, v)[0] if entry == "op" else flashcute.flash_attn_func(q, k, v)
        (dq,) = torch.autograd.grad(out.sum(), q, create_graph=True)
        with pytest.raises(NotImplementedError, match="flashcute.bwd has no backward pass"):
            dq.sum().backward()


def test_layout_import_does_not_import_torch():
    result = run_python("import sys, flashcute.layout, flashcute.kernel_configs\nprint('torch' in sys.modules)")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_main_help_prints_usage_only():
    result = subprocess.run([sys.executable, "-m", "flashcute", "--help"], cwd=REPO, capture_output=True, text=True,
                            timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: python -m flashcute") and "flashcute 0." not in result.stdout


def test_no_gpu_without_arch_override_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("FLASHCUTE_CUDA_ARCHS", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(flashcute.FlashcuteUnavailable, match="no CUDA GPU is visible.*FLASHCUTE_CUDA_ARCHS"):
        _build.target_archs()


def test_bad_backend_is_rejected_before_loading():
    with pytest.raises(ValueError, match="backend must be one of 'auto', 'sm80', 'sm90', got 'sm70'"):
        flashcute.flash_attn_func(None, None, None, backend="sm70")


def test_main_job_without_gpu_says_so():
    result = subprocess.run(
        [sys.executable, "-m", "flashcute"], cwd=REPO, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO), "CUDA_VISIBLE_DEVICES": ""},
    )
    assert result.returncode == 0, result.stderr
    assert "No GPU here" in result.stdout


# ------------------------------------------------------------------------------------- architectures

@pytest.mark.parametrize(
    "text, expected",
    [
        ("8.0", ["8.0"]),
        ("9.0a;8.0", ["8.0", "9.0a"]),
        ("80,90a", ["8.0", "9.0a"]),
        ("sm_80 sm_90a sm_80", ["8.0", "9.0a"]),
        ("8.6", ["8.6"]),
        ("10.0", ["10.0"]),
    ],
)
def test_parse_arch_list(text, expected):
    assert _build.parse_arch_list(text) == expected


@pytest.mark.parametrize("text, message", [("7.5", "older than sm_80"), ("hopper", "cannot read 'hopper'"), (";", "names no")])
def test_parse_arch_list_errors(text, message):
    with pytest.raises(ValueError, match=message):
        _build.parse_arch_list(text)


@pytest.mark.parametrize("capability, arch", [((8, 0), "8.0"), ((8, 6), "8.0"), ((8, 9), "8.0"), ((9, 0), "9.0a"), ((10, 0), "10.0")])
def test_arch_for_capability(capability, arch):
    assert _build.arch_for_capability(*capability) == arch


def test_arch_for_old_gpu_is_a_clear_error():
    with pytest.raises(flashcute.FlashcuteUnavailable, match="compute capability 7.5.*8.0"):
        _build.arch_for_capability(7, 5)


@pytest.mark.parametrize(
    "arch, capability, runs",
    [("8.0", (8, 0), True), ("8.0", (8, 9), True), ("8.6", (8, 0), False), ("8.0", (9, 0), False),
     ("9.0a", (9, 0), True), ("9.0a", (10, 0), False), ("9.0", (9, 0), True)],
)
def test_arch_runs_on(arch, capability, runs):
    assert _build.arch_runs_on(arch, *capability) is runs


def test_target_archs_from_env_and_from_gpus(monkeypatch):
    monkeypatch.setenv("FLASHCUTE_CUDA_ARCHS", "90a")
    assert _build.target_archs() == ["9.0a"]
    monkeypatch.delenv("FLASHCUTE_CUDA_ARCHS")
    capabilities = [(9, 0), (8, 6), (8, 0)]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: len(capabilities))
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i: capabilities[i])
    assert _build.target_archs() == ["8.0", "9.0a"]


def test_gencode_flags():
    assert _build.gencode_flags(["8.0", "9.0a"]) == [
        "-gencode=arch=compute_80,code=sm_80",
        "-gencode=arch=compute_90a,code=sm_90a",
    ]


# ------------------------------------------------------------------------------------------- sources

def test_sources_follow_archs_dtypes_and_head_dims(monkeypatch):
    monkeypatch.setenv("FLASHCUTE_DTYPES", "bf16")
    monkeypatch.setenv("FLASHCUTE_HDIMS", "128, 64")
    config = _build.BuildConfig(("8.0",), _build.selected_dtypes(), _build.selected_head_dims())
    assert [p.name for p in config.sources()] == [
        "flash_api.cpp", "fwd_sm80_bf16_hdim64.cu", "fwd_sm80_bf16_hdim128.cu", "bwd_sm80_bf16_hdim64.cu",
        "bwd_sm80_bf16_hdim128.cu", "decode_sm80_bf16_hdim64.cu", "decode_sm80_bf16_hdim128.cu"]
    hopper = _build.BuildConfig(("9.0a",), ("fp16",), (256,))
    assert [p.name for p in hopper.sources()] == [
        "flash_api.cpp", "fwd_sm80_fp16_hdim256.cu", "fwd_sm90_fp16_hdim256.cu", "bwd_sm80_fp16_hdim256.cu",
        "bwd_sm90_fp16_hdim256.cu", "decode_sm80_fp16_hdim256.cu"]


def test_sources_follow_kernel_families(monkeypatch):
    monkeypatch.setenv("FLASHCUTE_KERNELS", "bwd_sm90, fwd_sm90")
    config = _build.BuildConfig(("9.0a",), ("bf16",), (128,), _build.selected_kernel_families())
    assert config.families == ("fwd_sm90", "bwd_sm90")
    assert [p.name for p in config.sources()] == [
        "flash_api.cpp", "fwd_sm90_bf16_hdim128.cu", "bwd_sm90_bf16_hdim128.cu"]
    assert config.as_dict()["kernels"] == ["fwd_sm90", "bwd_sm90"]
    # sm90 families name no source where sm_90a is not a target
    ampere = _build.BuildConfig(("8.0",), ("bf16",), (128,), config.families)
    assert [p.name for p in ampere.sources()] == ["flash_api.cpp"]
    with pytest.raises(_build.FlashcuteUnavailable, match="FLASHCUTE_KERNELS=fwd_sm90,bwd_sm90 selects no kernel"):
        _build.require_sources(ampere)


def test_default_selection_is_everything(monkeypatch):
    monkeypatch.delenv("FLASHCUTE_DTYPES", raising=False)
    monkeypatch.delenv("FLASHCUTE_HDIMS", raising=False)
    monkeypatch.delenv("FLASHCUTE_KERNELS", raising=False)
    assert _build.selected_dtypes() == ("fp16", "bf16")
    assert _build.selected_head_dims() == (64, 96, 128, 192, 256)
    assert _build.selected_kernel_families() == ("fwd_sm80", "fwd_sm90", "bwd_sm80", "bwd_sm90", "decode_sm80")
    monkeypatch.setenv("FLASHCUTE_DTYPES", "bfloat16,float16")
    assert _build.selected_dtypes() == ("fp16", "bf16")


@pytest.mark.parametrize("name, value, message", [("FLASHCUTE_HDIMS", "80", "'80' is not one of 64, 96"), ("FLASHCUTE_DTYPES", "fp32", "'fp32' is not one of fp16, bf16"), ("FLASHCUTE_HDIMS", "x", "'x' is not one of"), ("FLASHCUTE_KERNELS", "decode_sm90", "'decode_sm90' is not one of fwd_sm80, fwd_sm90"), ("FLASHCUTE_KERNELS", " , ", "is set but names nothing")])
def test_selection_errors(monkeypatch, name, value, message):
    monkeypatch.setenv(name, value)
    select = {"FLASHCUTE_DTYPES": _build.selected_dtypes, "FLASHCUTE_HDIMS": _build.selected_head_dims,
              "FLASHCUTE_KERNELS": _build.selected_kernel_families}[name]
    with pytest.raises(ValueError, match=f"{name}:? {message}"):
        select()


def test_missing_sources_are_named(monkeypatch, tmp_path):
    monkeypatch.setattr(_build, "CSRC_DIR", tmp_path)
    with pytest.raises(flashcute.FlashcuteUnavailable, match="fwd_sm80_bf16_hdim64.cu"):
        _build.require_sources(_build.BuildConfig(("8.0",), ("bf16",), (64,)))


def make_csrc(root):
    (root / "common").mkdir(parents=True)
    (root / "instantiations").mkdir()
    (root / "flash_api.cpp").write_text("// api\n")
    (root / "common" / "params.h").write_text("// params\n")
    (root / "instantiations" / "fwd_sm80_bf16_hdim64.cu").write_text("// kernel\n")
    return [root / "flash_api.cpp", root / "instantiations" / "fwd_sm80_bf16_hdim64.cu"]


def test_sources_hash_sees_sources_and_headers(tmp_path):
    sources = make_csrc(tmp_path)
    before = _build.sources_hash(sources, tmp_path)
    assert _build.sources_hash(sources, tmp_path) == before
    (tmp_path / "common" / "params.h").write_text("// params, edited\n")
    after_header = _build.sources_hash(sources, tmp_path)
    assert after_header != before
    sources[1].write_text("// kernel, edited\n")
    assert _build.sources_hash(sources, tmp_path) != after_header


def test_cache_key_changes_with_every_input():
    config = _build.BuildConfig(("9.0a",), ("bf16",), (128,))
    include = Path("/cutlass/include")
    key = _build.cache_key(config, "abc", include)
    assert key == _build.cache_key(config, "abc", include)
    assert key.startswith(f"v{flashcute.__version__}-torch{torch.__version__}-cu{torch.version.cuda}-sm90a-")
    others = [
        _build.cache_key(_build.BuildConfig(("8.0", "9.0a"), ("bf16",), (128,)), "abc", include),
        _build.cache_key(_build.BuildConfig(("9.0a",), ("fp16", "bf16"), (128,)), "abc", include),
        _build.cache_key(_build.BuildConfig(("9.0a",), ("bf16",), (64, 128)), "abc", include),
        _build.cache_key(config, "abd", include),
        _build.cache_key(config, "abc", Path("/other/include")),
    ]
    assert len({key, *others}) == 6


def test_cache_root(monkeypatch, tmp_path):
    monkeypatch.setenv("FLASHCUTE_CACHE_DIR", str(tmp_path / "c"))
    assert _build.cache_root() == tmp_path / "c"
    monkeypatch.delenv("FLASHCUTE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert _build.cache_root() == tmp_path / "flashcute"


def test_build_lock_is_exclusive_across_processes(tmp_path):
    lock = tmp_path / "build.lock"
    probe = (
        "import fcntl, sys\n"
        f"handle = open({str(lock)!r}, 'w')\n"
        "try:\n    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)\nexcept BlockingIOError:\n    sys.exit(3)\n"
    )
    with _build._file_lock(lock, tmp_path):
        assert subprocess.run([sys.executable, "-c", probe]).returncode == 3
    assert subprocess.run([sys.executable, "-c", probe]).returncode == 0


# ------------------------------------------------------------------------------------------- CUTLASS

def test_cutlass_from_env(monkeypatch, tmp_path):
    (tmp_path / "include" / "cute").mkdir(parents=True)
    (tmp_path / "include" / "cute" / "tensor.hpp").write_text("")
    monkeypatch.setenv("CUTLASS_PATH", str(tmp_path))
    assert _build.find_cutlass_include() == tmp_path / "include"
    monkeypatch.setenv("CUTLASS_PATH", str(tmp_path / "include"))
    assert _build.find_cutlass_include() == tmp_path / "include"


def test_cutlass_wheel_is_found(monkeypatch):
    pytest.importorskip("cutlass_library")
    monkeypatch.delenv("CUTLASS_PATH", raising=False)
    include = _build.find_cutlass_include()
    assert (include / "cute" / "tensor.hpp").is_file() and (include / "cutlass" / "cutlass.h").is_file()


def test_cutlass_missing_names_all_three_places(monkeypatch, tmp_path):
    monkeypatch.setenv("CUTLASS_PATH", str(tmp_path / "nowhere"))
    monkeypatch.setattr(_build, "REPO_ROOT", tmp_path)
    monkeypatch.setattr(_build.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(flashcute.FlashcuteUnavailable) as error:
        _build.find_cutlass_include()
    message = str(error.value)
    assert "CUTLASS_PATH=" in message
    assert str(tmp_path / "third_party" / "cutlass") in message
    assert "pip install nvidia-cutlass==4.2.0.0" in message
    assert "third_party/README.md" in message


# ------------------------------------------------------------------------------------------- AOT module

def fake_aot(monkeypatch, tmp_path, **record):
    monkeypatch.delenv("FLASHCUTE_KERNELS", raising=False)
    library = tmp_path / "_C.cpython-311-x86_64-linux-gnu.so"
    library.write_bytes(b"")
    (tmp_path / "_C.build.json").write_text(json.dumps(record))
    monkeypatch.setattr(_build.importlib.util, "find_spec", lambda name: SimpleNamespace(origin=str(library)))
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i: (9, 0))
    monkeypatch.setattr(_build, "CSRC_DIR", tmp_path / "no-checkout")
    return library


def test_aot_library_used_when_it_matches(monkeypatch, tmp_path):
    monkeypatch.setenv("FLASHCUTE_DTYPES", "bf16")
    monkeypatch.setenv("FLASHCUTE_HDIMS", "128")
    record = dict(torch=torch.__version__, cuda=torch.version.cuda, archs=["8.0", "9.0a"], dtypes=["bf16"], head_dims=[128], build_seconds=12.5)
    library = fake_aot(monkeypatch, tmp_path, **record)
    path, config, seconds = _build._matching_aot_library()
    assert path == library and config.head_dims == (128,) and seconds == 12.5


@pytest.mark.parametrize(
    "change, reason",
    [({"torch": "0.0.1"}, "built for torch 0.0.1"), ({"cuda": "0.1"}, "built for CUDA 0.1"), ({"archs": ["8.0"]}, "GPU 0 is sm_90"),
     ({"head_dims": [128]}, "holds dtypes bf16, head dims 128 and kernels fwd_sm80,"),
     ({"kernels": ["fwd_sm90", "bwd_sm90"]}, "and kernels fwd_sm90,bwd_sm90")],
)
def test_aot_library_skipped_when_it_does_not_match(monkeypatch, tmp_path, capsys, change, reason):
    monkeypatch.setenv("FLASHCUTE_DTYPES", "bf16")
    monkeypatch.setenv("FLASHCUTE_HDIMS", "64,128")
    record = dict(torch=torch.__version__, cuda=torch.version.cuda, archs=["9.0a"], dtypes=["bf16"], head_dims=[64, 128])
    fake_aot(monkeypatch, tmp_path, **{**record, **change})
    assert _build._matching_aot_library() is None
    assert reason in capsys.readouterr().err


def test_stale_aot_library_in_a_checkout_is_skipped(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("FLASHCUTE_DTYPES", "bf16")
    monkeypatch.setenv("FLASHCUTE_HDIMS", "64")
    record = dict(torch=torch.__version__, cuda=torch.version.cuda, archs=["9.0a"], dtypes=["bf16"], head_dims=[64], sources_hash="old")
    fake_aot(monkeypatch, tmp_path, **record)
    csrc = tmp_path / "csrc"
    make_csrc(csrc)
    monkeypatch.setattr(_build, "CSRC_DIR", csrc)
    assert _build._matching_aot_library() is None
    assert "sources in csrc/ changed" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------- setup.py

@pytest.mark.skipif(torch.version.cuda is not None, reason="checks a machine without a CUDA toolchain for torch")
def test_setup_skips_the_extension_without_cuda(tmp_path):
    result = subprocess.run(
        [sys.executable, "setup.py", "build_ext", "--build-lib", str(tmp_path), "--build-temp", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "skipping the CUDA extension: this PyTorch" in result.stderr
    assert not list(tmp_path.rglob("*.so"))
