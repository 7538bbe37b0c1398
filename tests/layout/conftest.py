"""tests/layout: make ``tests.layout.oracle`` importable and provide the ``oracle`` fixture.

The oracle tests never skip: without g++, CUTLASS or CUDA headers they fail saying what is missing.
"""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.layout import oracle as _oracle  # noqa: E402


@pytest.fixture(scope="session")
def oracle():
    """The oracle module, with its toolchain checked (a failure, not a skip, when something is missing)."""
    try:
        _oracle.toolchain()
        _oracle._pch_dir()
    except _oracle.OracleUnavailable as e:
        pytest.fail(f"C++ CuTe oracle unavailable: {e}")
    return _oracle
