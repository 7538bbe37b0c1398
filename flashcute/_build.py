"""Finding, building and loading flashcute's CUDA extension.

One place decides what gets compiled (sources, include dirs, flags, target architectures) so that the JIT
build here and the AOT build in setup.py produce the same library. Loading prefers an installed AOT module
`flashcute._C` when it was built for this torch and this GPU; otherwise the sources are compiled with
torch.utils.cpp_extension and ninja into a cache directory keyed by everything that changes the binary.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import importlib.util
import json
import os
import re
import sys
import threading
import time
from pathlib import Path

from flashcute import __version__, kernel_table

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent
CSRC_DIR = REPO_ROOT / "csrc"

JIT_MODULE_NAME = "flashcute_C"
AOT_MODULE_NAME = "flashcute._C"
AOT_INFO_SUFFIX = ".build.json"  # written by setup.py beside the AOT library: what it was built for

ALL_DTYPES = kernel_table.DTYPES
ALL_HEAD_DIMS = kernel_table.head_dims()
SM90_ARCH = "9.0a"

# The kernels are torch-free CUDA C++ (nvcc flags below); only flash_api.cpp sees torch's headers and keeps
# torch's own C++ standard. torch defines __CUDA_NO_HALF_OPERATORS__ & co. for every .cu file; CUTLASS's
# numeric types want the operators back.
NVCC_FLAGS = [
    "-O3",
    "-DNDEBUG",
    "--use_fast_math",
    "-std=c++17",
    "--expt-relaxed-constexpr",
    # GMMA atoms of every N that is a multiple of 8 (CuTe's selectors offer only powers of two and 96/192
    # without it): the SM90 K/V tiles of 112 and 80 columns then take one wgmma per k-step.
    "-DCUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED",
    "-U__CUDA_NO_HALF_OPERATORS__",
    "-U__CUDA_NO_HALF_CONVERSIONS__",
    "-U__CUDA_NO_HALF2_OPERATORS__",
    "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-U__CUDA_NO_BFLOAT16_OPERATORS__",
]
CXX_FLAGS = ["-O3", "-DNDEBUG"]
# libstdc++ linked as the shared library even where the compiler links it statically by default (the GPU
# machines' /opt/gcc g++ does): a static copy inside the extension keeps its own locale facet ids beside the
# process's shared libstdc++, and the first integer streamed through an ostringstream there (c10::str, so any
# TORCH_CHECK message with a number) segfaults.
LINK_FLAGS = ["-l:libstdc++.so.6"]


class FlashcuteUnavailable(RuntimeError):
    """flashcute's CUDA extension cannot be built or loaded here; the message says why and what to do."""


# ----------------------------------------------------------------------------------------------- CUTLASS

def find_cutlass_include() -> Path:
    """The CUTLASS include directory (holding cute/ and cutlass/): CUTLASS_PATH, third_party/cutlass, or the
    nvidia-cutlass wheel's headers, in that order."""
    tried = []
    env = os.environ.get("CUTLASS_PATH")
    if env:
        for candidate in (Path(env) / "include", Path(env)):
            if _holds_cute(candidate):
                return candidate
        tried.append(f"CUTLASS_PATH={env} (no include/cute/tensor.hpp there)")
    else:
        tried.append("CUTLASS_PATH (not set)")

    checkout = REPO_ROOT / "third_party" / "cutlass" / "include"
    if _holds_cute(checkout):
        return checkout
    tried.append(f"a CUTLASS checkout at {checkout.parent} (not found)")

    spec = importlib.util.find_spec("cutlass_library")
    if spec is not None and spec.origin is not None:
        wheel_include = Path(spec.origin).parent / "source" / "include"
        if _holds_cute(wheel_include):
            return wheel_include
        tried.append(f"the nvidia-cutlass wheel (installed, but {wheel_include} has no cute/tensor.hpp)")
    else:
        tried.append("the nvidia-cutlass wheel (not installed: pip install nvidia-cutlass==4.2.0.0)")

    raise FlashcuteUnavailable(
        "flashcute needs the CUTLASS/CuTe headers and found none. Looked for:\n  - "
        + "\n  - ".join(tried)
        + "\nSee third_party/README.md."
    )


def _holds_cute(include_dir: Path) -> bool:
    return (include_dir / "cute" / "tensor.hpp").is_file()


# ------------------------------------------------------------------------------------ target architectures

def parse_arch_list(text: str) -> list[str]:
    """'8.0;9.0a', '80,90a' or 'sm_80 sm_90a' -> ['8.0', '9.0a'] (sorted, deduplicated)."""
    archs = set()
    for token in re.split(r"[;,\s]+", text.strip()):
        if not token:
            continue
        match = re.fullmatch(r"(?:sm_?|compute_)?(\d+)\.?(\d)(a?)", token)
        if match is None:
            raise ValueError(
                f"FLASHCUTE_CUDA_ARCHS: cannot read {token!r}; expected entries like '8.0', '9.0a', '80' or 'sm_90a'"
            )
        major, minor, suffix = int(match[1]), int(match[2]), match[3]
        if major < 8:
            raise ValueError(f"FLASHCUTE_CUDA_ARCHS: {token!r} is older than sm_80; flashcute's kernels need sm_80+")
        archs.add(f"{major}.{minor}{suffix}")
    if not archs:
        raise ValueError("FLASHCUTE_CUDA_ARCHS is set but names no architecture")
    return sorted(archs, key=_arch_sort_key)


def _arch_sort_key(arch: str) -> tuple[int, int, str]:
    major, rest = arch.split(".")
    return int(major), int(rest[0]), rest[1:]


def arch_for_capability(major: int, minor: int) -> str:
    """The architecture to compile for a device of compute capability major.minor."""
    if major < 8:
        raise FlashcuteUnavailable(
            f"this GPU has compute capability {major}.{minor}; flashcute's kernels need 8.0 (Ampere) or newer"
        )
    if major == 8:
        return "8.0"  # sm_80 machine code runs on every 8.x device
    if major == 9:
        return SM90_ARCH  # wgmma/TMA need the arch-specific target; the sm80 kernels compile for it too
    return f"{major}.{minor}"


def arch_runs_on(arch: str, major: int, minor: int) -> bool:
    """Whether machine code compiled for `arch` runs on a device of compute capability major.minor."""
    arch_major, rest = arch.split(".")
    arch_minor, specific = int(rest[0]), rest.endswith("a")
    if specific:
        return (int(arch_major), arch_minor) == (major, minor)
    return int(arch_major) == major and arch_minor <= minor


def target_archs() -> list[str]:
    """FLASHCUTE_CUDA_ARCHS if set, else the architectures of the visible GPUs."""
    env = os.environ.get("FLASHCUTE_CUDA_ARCHS")
    if env:
        return parse_arch_list(env)
    import torch

    if not torch.cuda.is_available():
        raise FlashcuteUnavailable(
            "no CUDA GPU is visible, so flashcute cannot pick the architectures to compile for. "
            "Set FLASHCUTE_CUDA_ARCHS (e.g. '8.0;9.0a') to build without a GPU."
        )
    archs = {arch_for_capability(*torch.cuda.get_device_capability(i)) for i in range(torch.cuda.device_count())}
    return sorted(archs, key=_arch_sort_key)


def gencode_flags(archs: list[str]) -> list[str]:
    flags = []
    for arch in archs:
        number = arch.replace(".", "")
        flags.append(f"-gencode=arch=compute_{number},code=sm_{number}")
    return flags


# ----------------------------------------------------------------------------------------------- sources

def _env_choice(name: str, allowed: tuple, convert) -> tuple:
    text = os.environ.get(name)
    if not text:
        return allowed
    chosen = []
    for token in re.split(r"[;,\s]+", text.strip()):
        if not token:
            continue
        try:
            value = convert(token)
        except ValueError:
            value = None
        if value not in allowed:
            raise ValueError(f"{name}: {token!r} is not one of {', '.join(map(str, allowed))}")
        if value not in chosen:
            chosen.append(value)
    if not chosen:
        raise ValueError(f"{name} is set but names nothing; expected some of {', '.join(map(str, allowed))}")
    return tuple(v for v in allowed if v in chosen)


def selected_dtypes() -> tuple[str, ...]:
    """FLASHCUTE_DTYPES (e.g. 'bf16') restricts the instantiated input types; default all."""
    return _env_choice("FLASHCUTE_DTYPES", ALL_DTYPES, lambda t: {"float16": "fp16", "bfloat16": "bf16"}.get(t, t))


def selected_head_dims() -> tuple[int, ...]:
    """FLASHCUTE_HDIMS (e.g. '64,128') restricts the instantiated head dims; default all."""
    return _env_choice("FLASHCUTE_HDIMS", ALL_HEAD_DIMS, int)


def selected_kernel_families() -> tuple[str, ...]:
    """FLASHCUTE_KERNELS (e.g. 'fwd_sm90,bwd_sm90') restricts the built kernel families (op_arch); default all."""
    return _env_choice("FLASHCUTE_KERNELS", kernel_table.families(), str)


@dataclasses.dataclass(frozen=True)
class BuildConfig:
    """Everything that decides what the extension contains."""

    archs: tuple[str, ...]
    dtypes: tuple[str, ...]
    head_dims: tuple[int, ...]
    families: tuple[str, ...] = kernel_table.families()

    @property
    def kernel_archs(self) -> tuple[str, ...]:
        """Which kernel families get built: sm80 always, sm90 when its architecture is a target."""
        return ("sm80", "sm90") if SM90_ARCH in self.archs else ("sm80",)

    def sources(self, csrc: Path | None = None) -> list[Path]:
        csrc = csrc or CSRC_DIR
        units = kernel_table.translation_units(self.dtypes, self.head_dims, self.kernel_archs, self.families)
        return [csrc / "flash_api.cpp"] + [csrc / "instantiations" / kernel_table.unit_filename(*u) for u in units]

    def as_dict(self) -> dict:
        return {"archs": list(self.archs), "dtypes": list(self.dtypes), "head_dims": list(self.head_dims),
                "kernels": list(self.families)}


def current_config() -> BuildConfig:
    return BuildConfig(tuple(target_archs()), selected_dtypes(), selected_head_dims(), selected_kernel_families())


def require_sources(config: BuildConfig) -> list[Path]:
    sources = config.sources()
    if len(sources) == 1:  # flash_api.cpp alone
        raise FlashcuteUnavailable(
            f"FLASHCUTE_KERNELS={','.join(config.families)} selects no kernel for the target architectures "
            f"{';'.join(config.archs)} (the sm90 families need 9.0a)")
    missing = [str(p) for p in sources if not p.is_file()]
    if missing:
        raise FlashcuteUnavailable(
            "the kernel sources for a build are missing:\n  " + "\n  ".join(missing)
            + f"\nflashcute JIT-builds from a source checkout ({CSRC_DIR} not complete); an installed wheel "
            "must carry the AOT module flashcute._C instead."
        )
    return sources


def sources_hash(sources: list[Path], csrc: Path | None = None) -> str:
    """Hash of the chosen sources and every header under csrc/ (an edited header must rebuild)."""
    csrc = csrc or CSRC_DIR
    headers = sorted(p for p in csrc.rglob("*") if p.suffix in (".h", ".hpp", ".cuh") and p.is_file())
    digest = hashlib.sha256()
    for path in sorted(set(sources)) + headers:
        digest.update(str(path.relative_to(csrc)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def nvcc_flags(config: BuildConfig) -> list[str]:
    return NVCC_FLAGS + gencode_flags(list(config.archs))


def include_dirs() -> list[Path]:
    return [CSRC_DIR, find_cutlass_include()]


# --------------------------------------------------------------------------------------------- checks

def require_cuda_torch() -> None:
    """A clear error instead of a build traceback where the kernels cannot exist."""
    import torch

    if torch.version.cuda is None:
        raise FlashcuteUnavailable(
            f"flashcute's kernels need a CUDA build of PyTorch and an NVIDIA GPU (sm_80 or newer); this PyTorch "
            f"({torch.__version__}) has no CUDA support. flashcute.layout works without them."
        )


def require_nvcc() -> Path:
    from torch.utils.cpp_extension import CUDA_HOME

    nvcc = Path(CUDA_HOME or "/nonexistent") / "bin" / "nvcc"
    if not nvcc.is_file():
        raise FlashcuteUnavailable(
            "building flashcute's kernels needs nvcc (the CUDA toolkit), which was not found. "
            "Set CUDA_HOME to the toolkit, or install the AOT module: pip install --no-build-isolation ."
        )
    return nvcc


# --------------------------------------------------------------------------------------------- loading

@dataclasses.dataclass
class LoadedLibrary:
    """What was loaded: the file, how it was obtained and what it contains."""

    path: Path
    kind: str  # "aot" or "jit"
    config: BuildConfig
    built_now: bool
    build_seconds: float | None  # compile time of this library, when known (recorded at build time)
    load_seconds: float  # time spent in load_library(), building included


_loaded: LoadedLibrary | None = None
_load_lock = threading.Lock()


def load_library() -> LoadedLibrary:
    """Load the extension (defining torch.ops.flashcute.*), building it first if needed. Idempotent."""
    global _loaded
    if _loaded is not None:  # without the lock: torch.compile traces this check (it cannot trace a lock)
        return _loaded
    with _load_lock:
        if _loaded is not None:
            return _loaded
        start = time.perf_counter()
        import torch

        require_cuda_torch()
        aot = _matching_aot_library()
        if aot is not None:
            path, config, build_seconds = aot
            torch.ops.load_library(str(path))
            _loaded = LoadedLibrary(path, "aot", config, False, build_seconds, time.perf_counter() - start)
        else:
            path, built_now, build_seconds, config = _jit_library()
            torch.ops.load_library(str(path))
            _loaded = LoadedLibrary(path, "jit", config, built_now, build_seconds, time.perf_counter() - start)
        return _loaded


def _matching_aot_library() -> tuple[Path, BuildConfig, float | None] | None:
    """The installed flashcute._C when it was built for this torch, this CUDA and the visible GPUs, holds the
    kernels asked for (FLASHCUTE_DTYPES/HDIMS/KERNELS, default all) and, in a checkout, matches the sources."""
    spec = importlib.util.find_spec(AOT_MODULE_NAME)
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin)
    info_file = path.with_name(path.name.split(".")[0] + AOT_INFO_SUFFIX)
    import torch

    try:
        info = json.loads(info_file.read_text())
        config = BuildConfig(tuple(info["archs"]), tuple(info["dtypes"]), tuple(info["head_dims"]),
                             tuple(info.get("kernels", kernel_table.families())))
    except (OSError, ValueError, KeyError):
        _note(f"ignoring {path}: its build record {info_file} is missing or unreadable")
        return None
    reasons = []
    if info.get("torch") != torch.__version__:
        reasons.append(f"built for torch {info.get('torch')}, running {torch.__version__}")
    if info.get("cuda") != torch.version.cuda:
        reasons.append(f"built for CUDA {info.get('cuda')}, torch has {torch.version.cuda}")
    for i in range(torch.cuda.device_count()):
        cc = torch.cuda.get_device_capability(i)
        if not any(arch_runs_on(arch, *cc) for arch in config.archs):
            reasons.append(f"built for {';'.join(config.archs)}, GPU {i} is sm_{cc[0]}{cc[1]}")
    if (not set(selected_dtypes()) <= set(config.dtypes) or not set(selected_head_dims()) <= set(config.head_dims)
            or not set(selected_kernel_families()) <= set(config.families)):
        reasons.append(f"it holds dtypes {','.join(config.dtypes)}, head dims {','.join(map(str, config.head_dims))} "
                       f"and kernels {','.join(config.families)}")
    if CSRC_DIR.is_dir() and info.get("sources_hash"):
        present = [p for p in config.sources() if p.is_file()]
        if sources_hash(present) != info["sources_hash"]:
            reasons.append("the sources in csrc/ changed since it was built")
    if reasons:
        _note(f"not using {path} ({'; '.join(reasons)}); using the JIT build instead")
        return None
    return path, config, info.get("build_seconds")


def cache_root() -> Path:
    env = os.environ.get("FLASHCUTE_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "flashcute"


def cache_key(config: BuildConfig, source_digest: str, cutlass_include: Path) -> str:
    """Directory name for a build: readable prefix + hash of every input that changes the binary."""
    import torch

    material = json.dumps(
        {
            "flashcute": __version__,
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "config": config.as_dict(),
            "sources": source_digest,
            "cutlass": str(cutlass_include),
            "nvcc_flags": nvcc_flags(config),
            "cxx_flags": CXX_FLAGS,
            "link_flags": LINK_FLAGS,
        },
        sort_keys=True,
    )
    digest = hashlib.sha256(material.encode()).hexdigest()[:16]
    archs = "_".join(a.replace(".", "") for a in config.archs)
    return f"v{__version__}-torch{torch.__version__}-cu{torch.version.cuda}-sm{archs}-{digest}"


def _jit_library() -> tuple[Path, bool, float | None, BuildConfig]:
    config = current_config()
    sources = require_sources(config)
    cutlass_include = find_cutlass_include()
    build_dir = cache_root() / cache_key(config, sources_hash(sources), cutlass_include)
    library = build_dir / f"{JIT_MODULE_NAME}.so"
    record = build_dir / "build.json"
    if library.is_file() and record.is_file():  # fast path: no lock, no ninja
        return library, False, json.loads(record.read_text()).get("build_seconds"), config

    require_nvcc()
    build_dir.mkdir(parents=True, exist_ok=True)
    with _file_lock(build_dir.parent / f"{build_dir.name}.lock", build_dir):
        if library.is_file() and record.is_file():  # another process built it while we waited
            return library, False, json.loads(record.read_text()).get("build_seconds"), config
        seconds = _compile(config, sources, cutlass_include, build_dir)
        record.write_text(json.dumps({**config.as_dict(), "build_seconds": seconds}, indent=1))
    return library, True, seconds, config


@contextlib.contextmanager
def _file_lock(lock_path: Path, build_dir: Path):
    with open(lock_path, "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _note(f"another process is building into {build_dir}; waiting for it")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _compile(config: BuildConfig, sources: list[Path], cutlass_include: Path, build_dir: Path) -> float:
    """Compile and link with torch.utils.cpp_extension + ninja, showing progress; returns the seconds taken."""
    from torch.utils.cpp_extension import load

    jobs = os.environ.get("MAX_JOBS") or str(os.cpu_count())
    kernels = len(sources) - 1
    _note(
        f"compiling the CUDA extension: {kernels} kernel files + flash_api.cpp for {';'.join(config.archs)} "
        f"(dtypes {','.join(config.dtypes)}, head dims {','.join(map(str, config.head_dims))}"
        f"{'' if config.families == kernel_table.families() else ', kernels ' + ','.join(config.families)}), "
        f"{jobs} parallel jobs (MAX_JOBS), into {build_dir}. The first build takes minutes; later loads are cached."
    )
    verbose = os.environ.get("FLASHCUTE_VERBOSE_BUILD", "") not in ("", "0")
    start = time.perf_counter()
    stop = threading.Event()
    ticker = threading.Thread(target=_tick, args=(build_dir, len(sources), start, stop), daemon=True)
    if not verbose:
        ticker.start()
    try:
        load(
            name=JIT_MODULE_NAME,
            sources=[str(p) for p in sources],
            extra_cflags=CXX_FLAGS,
            extra_cuda_cflags=nvcc_flags(config),
            extra_ldflags=LINK_FLAGS,
            extra_include_paths=[str(p) for p in (CSRC_DIR, cutlass_include)],
            build_directory=str(build_dir),
            with_cuda=True,
            is_python_module=False,
            is_standalone=False,
            verbose=verbose,
        )
    finally:
        stop.set()
    seconds = time.perf_counter() - start
    _note(f"built in {seconds:.0f} s: {build_dir / (JIT_MODULE_NAME + '.so')}")
    return seconds


def _tick(build_dir: Path, total: int, start: float, stop: threading.Event) -> None:
    while not stop.wait(15.0):
        done = len(list(build_dir.glob("*.o")))
        _note(f"still compiling: {done}/{total} objects after {time.perf_counter() - start:.0f} s")


def _note(message: str) -> None:
    print(f"flashcute: {message}", file=sys.stderr, flush=True)


def build() -> Path:
    """JIT-build the extension for the visible GPUs (or FLASHCUTE_CUDA_ARCHS) into the cache, e.g. ahead of
    the first call; returns the library's path. Does nothing when the cached build is current."""
    require_cuda_torch()
    return _jit_library()[0]
