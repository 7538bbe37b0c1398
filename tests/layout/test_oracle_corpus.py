"""The mirror against real C++ CuTe: every corpus case must print exactly what C++ prints."""

import pytest

from tests.layout import corpus


def _report(rows, limit=15):
    return "\n".join(rows[:limit]) + (f"\n... and {len(rows) - limit} more" if len(rows) > limit else "")


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
