"""The mirror against real C++ CuTe on compile-time types: every corpus case must print exactly what C++ prints.

The corpus (tests/layout/corpus.py) is generated C++, one statement per case, for what needs ``Int<N>``
types: static and mixed layouts, static_assert rejections, swizzles, atoms.  The default run compares a
seeded sample of every family (and every fixed case); ``FLASHCUTE_ORACLE_FULL=1`` compares the full corpus.
"""

import pytest

from tests.layout import corpus

# the corpus_runs fixture (tests/layout/conftest.py) compiles and runs the corpus


def _report(rows, limit=15):
    return "\n".join(rows[:limit]) + (f"\n... and {len(rows) - limit} more" if len(rows) > limit else "")


@pytest.mark.parametrize("family", sorted(corpus.FAMILIES))
def test_corpus_family_matches_cpp(family, corpus_runs, oracle):
    cases, expected, outputs = corpus_runs[family]
    assert cases, f"empty corpus for {family}"
    problems, both_reject = [], 0
    for c, want, got in zip(cases, expected, outputs):
        if isinstance(want, Exception):
            if isinstance(got, oracle.CxxRejected):
                both_reject += 1  # C++ refuses to compile it as well
            elif got is None:
                problems.append(f"mirror rejected {c.label}: {want}")
            else:
                problems.append(f"mirror rejected {c.label}: {want}\n    C++:    {got!r}")
        elif isinstance(got, oracle.CxxRejected):
            problems.append(f"C++ rejected what the mirror accepts: {c.label}\n    C++: {got}")
        elif want != got:
            problems.append(f"{c.label}\n    mirror: {want!r}\n    C++:    {got!r}")
    print(f"{family}: {len(cases)} cases compared with C++ ({both_reject} rejected by both)")
    assert not problems, f"{len(problems)} of {len(cases)} {family} cases differ from C++:\n" + _report(problems)


def test_cpp_prints_what_the_differential_notes_state(corpus_runs, oracle):
    """tests/layout/new_differential_cases.md records what C++ printed in the differential run; C++ still does."""
    stated = corpus.md_expected()
    if not stated:
        pytest.skip("no tests/layout/new_differential_cases.md")
    cases, _expected, outputs = corpus_runs["differential"]
    printed = {c.label[len("listed: "):]: got for c, got in zip(cases, outputs) if c.label.startswith("listed: ")}
    assert set(stated) <= set(printed), f"listed but not in the corpus: {sorted(set(stated) - set(printed))}"
    wrong = [f"{expr}\n    the notes: {text!r}\n    C++:       {printed[expr]!r}"
             for expr, text in stated.items() if printed[expr] != text]
    assert not wrong, "C++ prints otherwise than tests/layout/new_differential_cases.md states:\n" + "\n".join(wrong)
