"""AOT build of flashcute's CUDA extension as flashcute._C (same sources and flags as the JIT build).

    python setup.py build_ext --inplace          # in a checkout
    pip install --no-build-isolation .           # into the environment, against the installed torch

Without a CUDA build of torch, nvcc or a GPU (and no FLASHCUTE_CUDA_ARCHS), the extension is skipped, so
`pip install -e .` on a CPU-only machine finishes in seconds; FLASHCUTE_FORCE_BUILD=1 builds regardless.
"""

import json
import os
import sys
import time
from pathlib import Path

from setuptools import setup

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))


def _skip_reason():
    """Why the extension cannot be built here, or None."""
    try:
        import torch
    except ImportError:
        return "PyTorch is not installed (pip install torch, then pip install --no-build-isolation .)"
    from torch.utils.cpp_extension import CUDA_HOME

    if torch.version.cuda is None:
        return f"this PyTorch ({torch.__version__}) has no CUDA support"
    if CUDA_HOME is None:
        return "nvcc (the CUDA toolkit) was not found; set CUDA_HOME"
    if not torch.cuda.is_available() and not os.environ.get("FLASHCUTE_CUDA_ARCHS"):
        return "no GPU is visible and FLASHCUTE_CUDA_ARCHS is not set"
    return None


def _extension_setup_args():
    reason = None if os.environ.get("FLASHCUTE_FORCE_BUILD") == "1" else _skip_reason()
    if reason is not None:
        print(f"flashcute: skipping the CUDA extension: {reason}. flashcute.layout is installed; "
              "the kernels can still be JIT-built later from a checkout.", file=sys.stderr)
        return {}

    import torch
    from torch.utils.cpp_extension import BuildExtension, CUDAExtension

    from flashcute import _build

    if not os.environ.get("FLASHCUTE_CUDA_ARCHS") and not torch.cuda.is_available():
        os.environ["FLASHCUTE_CUDA_ARCHS"] = "8.0;9.0a"  # forced build without a GPU: both kernel families
    config = _build.current_config()
    sources = _build.require_sources(config)
    extension = CUDAExtension(
        name=_build.AOT_MODULE_NAME,
        sources=[str(p.relative_to(ROOT)) for p in sources],
        include_dirs=[str(p) for p in _build.include_dirs()],
        extra_compile_args={"cxx": _build.CXX_FLAGS, "nvcc": _build.nvcc_flags(config)},
        extra_link_args=_build.LINK_FLAGS,
    )
    record = {
        **config.as_dict(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "sources_hash": _build.sources_hash(sources),
    }

    class BuildWithRecord(BuildExtension):
        """Builds the extension, then writes beside it what it was built for (read by _build at load time)."""

        def run(self):
            start = time.perf_counter()
            super().run()
            record["build_seconds"] = time.perf_counter() - start
            for ext in self.extensions:
                library = Path(self.get_ext_fullpath(ext.name))
                info = library.with_name(library.name.split(".")[0] + _build.AOT_INFO_SUFFIX)
                info.write_text(json.dumps(record, indent=1))

    return {"ext_modules": [extension], "cmdclass": {"build_ext": BuildWithRecord}}


setup(**_extension_setup_args())
