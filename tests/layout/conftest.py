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


@pytest.fixture(scope="session")
def corpus_runs(oracle):
    """Every corpus family: (cases, the mirror's answers, C++'s answers), compiled together in parallel."""
    import resource
    import time

    from tests.layout import corpus

    runs, sets = {}, {}
    for family in corpus.FAMILIES:
        cases = corpus.cases(family)
        expected, stmts = [], []
        for c in cases:
            try:
                expected.append(c.expected())
                stmts.append(c.cpp())
            except (ValueError, TypeError) as e:
                expected.append(e)  # reported by the test; not sent to C++ (it might fault at run time)
        runs[family] = (cases, expected)
        sets[f"corpus_{family}"] = (stmts, corpus.PRELUDES.get(family, ""))
    start, cpu0 = time.time(), resource.getrusage(resource.RUSAGE_CHILDREN)
    outputs = oracle.run_case_sets(sets)
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"\noracle corpus: {sum(len(c) for c, _e in runs.values())} cases, {time.time() - start:.0f}s wall, "
          f"{cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime:.0f}s compiler/oracle CPU")
    result = {}
    for family, (cases, expected) in runs.items():
        answers = iter(outputs[f"corpus_{family}"])
        result[family] = (cases, expected, [None if isinstance(e, Exception) else next(answers) for e in expected])
    return result
