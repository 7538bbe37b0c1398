"""The mirror against real C++ CuTe: every corpus case must print exactly what C++ prints."""

import pytest

from tests.layout import corpus


def _report(rows, limit=15):
    return "\n".join(rows[:limit]) + (f"\n... and {len(rows) - limit} more" if len(rows) > limit else "")


@pytest.fixture(scope="module")
def corpus_runs(oracle):
    """All families' cases, the mirror's answers, and C++'s answers (compiled together, in parallel)."""
    runs, statements = {}, {}
    for family in corpus.FAMILIES:
        cases = corpus.cases(family)
        expected, stmts = [], []
        for c in cases:
            try:
                expected.append(c.expected())
                stmts.append(c.cpp())
            except (ValueError, TypeError) as e:
                expected.append(e)
                stmts.append(f"print({c.expr});" if c.stmt is None else c.stmt)
        runs[family] = (cases, expected)
        statements[f"corpus_{family}"] = stmts
    outputs = oracle.run_case_sets(statements)
    return {f: (cases, expected, outputs[f"corpus_{f}"]) for f, (cases, expected) in runs.items()}


@pytest.mark.parametrize("family", sorted(corpus.FAMILIES))
def test_corpus_family_matches_cpp(family, corpus_runs, oracle):
    cases, expected, outputs = corpus_runs[family]
    assert cases, f"empty corpus for {family}"
    problems = []
    for c, want, got in zip(cases, expected, outputs):
        if isinstance(want, Exception):
            problems.append(f"mirror rejected {c.label}: {want}")
        elif isinstance(got, oracle.CxxRejected):
            problems.append(f"C++ rejected what the mirror accepts: {c.label}\n    C++: {got}")
        elif want != got:
            problems.append(f"{c.label}\n    mirror: {want!r}\n    C++:    {got!r}")
    print(f"{family}: {len(cases)} cases compared with C++")
    assert not problems, f"{len(problems)} of {len(cases)} {family} cases differ from C++:\n" + _report(problems)
