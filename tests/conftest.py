"""Shared fixtures. GPU tests skip cleanly where there is no CUDA device; where there is one, the extension
is loaded once per session (JIT-building it on first use) and a failure to build is a test error, not a skip."""

import pytest

try:
    import torch
except ImportError:  # the layout tests run without torch
    torch = None

HAS_CUDA = torch is not None and torch.cuda.is_available()


@pytest.fixture(scope="session")
def library():
    """The loaded flashcute extension (flashcute._build.LoadedLibrary)."""
    if not HAS_CUDA:
        pytest.skip("needs a CUDA GPU")
    import flashcute

    return flashcute.load_extension()
