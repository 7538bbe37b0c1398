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
    except _oracle.OracleUnavailable as e:
        pytest.fail(f"C++ CuTe oracle unavailable: {e}")
    return _oracle


@pytest.fixture(scope="session")
def corpus_runs(oracle):
    """Every corpus family (tests/layout/corpus.py): (cases, the mirror's answers, C++'s answers; None where the
    mirror rejected a case that was not sent to C++)."""
    from tests.layout import corpus

    runs, sets = corpus.prepared()
    outputs = oracle.run_case_sets(sets, priority=30)
    return {family: (cases, expected, [None if w is None else outputs[w[0]][w[1]] for w in where])
            for family, (cases, expected, where) in runs.items()}
