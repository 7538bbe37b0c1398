"""flashcute: a FlashAttention forward for PyTorch written in NVIDIA CuTe, and flashcute.layout, a pure-Python
mirror of CuTe's layout algebra.

`import flashcute` needs no GPU, no nvcc and, for flashcute.layout, not even torch. The CUDA extension is
loaded (and JIT-built on first use) by `load_extension()` or by the first `flash_attn_func` call.
"""

__version__ = "0.1.0"

try:
    import torch  # noqa: F401
except ImportError:  # flashcute.layout needs only numpy and matplotlib

    def __getattr__(name):
        if name in ("flash_attn_func", "load_extension", "build", "sdpa"):
            raise ImportError(f"flashcute.{name} needs PyTorch: pip install torch")
        raise AttributeError(f"module 'flashcute' has no attribute {name!r}")

else:
    from flashcute._build import FlashcuteUnavailable, build
    from flashcute.interface import flash_attn_func, load_extension
    from flashcute.sdpa import sdpa  # the function; the module stays importable as flashcute.sdpa

__all__ = ["FlashcuteUnavailable", "__version__", "build", "flash_attn_func", "load_extension", "sdpa"]
