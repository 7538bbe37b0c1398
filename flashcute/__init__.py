"""flashcute: FlashAttention for PyTorch written in NVIDIA CuTe, and flashcute.layout, a pure-Python mirror of
CuTe's layout algebra.

`import flashcute` needs no GPU and no nvcc, and never imports torch itself, so `import flashcute.layout` stays
numpy-only. The torch API (`flash_attn_func`, `flash_attn_varlen_func`, `flash_attn_with_kvcache`, `sdpa`,
`load_extension`, `build`, `FlashcuteUnavailable` and the ops `torch.ops.flashcute.*` with their fake kernels) is
defined as soon as both flashcute and torch are imported, in either order. The CUDA extension is loaded (and
JIT-built on first use) by the first op call on a CUDA tensor, or ahead of it by `load_extension()`.
"""

import importlib
import importlib.abc
import importlib.util
import sys

__version__ = "0.1.0"

# name -> the module that defines it; each needs torch.
_TORCH_API = {
    "FlashcuteUnavailable": "flashcute._build",
    "build": "flashcute._build",
    "flash_attn_func": "flashcute.interface",
    "flash_attn_varlen_func": "flashcute.interface",
    "flash_attn_with_kvcache": "flashcute.interface",
    "load_extension": "flashcute.interface",
    "sdpa": "flashcute.sdpa",
}
__all__ = ["__version__", *_TORCH_API]


def _define_torch_api():
    """Import the torch-facing modules (defining torch.ops.flashcute.*) and bind the API names here."""
    importlib.import_module("flashcute._ops")
    for name, module in _TORCH_API.items():
        # Bound explicitly: importing flashcute.sdpa sets this package's `sdpa` to the module.
        globals()[name] = getattr(importlib.import_module(module), name)


def __getattr__(name):
    if name not in _TORCH_API:
        raise AttributeError(f"module 'flashcute' has no attribute {name!r}")
    try:
        import torch  # noqa: F401
    except ImportError as error:
        raise ImportError(f"flashcute.{name} needs PyTorch: pip install torch") from error
    _define_torch_api()
    return globals()[name]


class _DefineAfterTorchImport(importlib.abc.MetaPathFinder):
    """Defines the torch API right after `import torch` completes, for programs that import flashcute first."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None:
            return spec
        exec_torch = spec.loader.exec_module

        def exec_module(module):
            exec_torch(module)
            _define_torch_api()

        spec.loader.exec_module = exec_module
        return spec


if sys.modules.get("torch") is not None:
    _define_torch_api()
elif not any(isinstance(finder, _DefineAfterTorchImport) for finder in sys.meta_path):
    sys.meta_path.insert(0, _DefineAfterTorchImport())
