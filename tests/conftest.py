"""Shared fixtures. GPU tests skip cleanly where there is no CUDA device; where there is one, the extension
is loaded once per session (JIT-building it on first use) and a failure to build is a test error, not a skip.

Tests that compile C++ on the host (the CuTe oracle in tests/layout, test_kernel_layouts.py,
test_sm90_scheduler.py) share one pool of g++ jobs (tests/layout/oracle): when collection ends, every
program the selected tests need is queued, those tests are moved after the pure-Python ones so the
programs compile meanwhile, and a line per program built is printed ("[C++ oracle] built ...").
``--oracle-full`` (or ``FLASHCUTE_ORACLE_FULL=1``) selects the full static oracle corpus.
"""

import contextlib
import sys
from pathlib import Path

import pytest

try:
    import torch
except ImportError:  # the layout tests run without torch
    torch = None

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

HAS_CUDA = torch is not None and torch.cuda.is_available()


@pytest.fixture(scope="session")
def library():
    """The loaded flashcute extension (flashcute._build.LoadedLibrary)."""
    if not HAS_CUDA:
        pytest.skip("needs a CUDA GPU")
    import flashcute

    return flashcute.load_extension()


# ---------------------------------------------------------------------------------------------
# C++ programs: queued at collection, compiled in the background, progress on the terminal
# ---------------------------------------------------------------------------------------------

def pytest_addoption(parser):
    parser.addoption("--oracle-full", action="store_true", default=False,
                     help="compare the CuTe mirror with C++ on the full static oracle corpus and every "
                          "TiledMMA/TiledCopy configuration (same as FLASHCUTE_ORACLE_FULL=1; several minutes)")


def _oracle():
    from tests.layout import oracle

    return oracle


def pytest_configure(config):
    import os

    if config.getoption("--oracle-full", default=False):
        os.environ[_oracle().FULL_ENV] = "1"


def _reporter(config):
    tr = config.pluginmanager.get_plugin("terminalreporter")
    capman = config.pluginmanager.get_plugin("capturemanager")

    def report(message):
        line = f"[C++ oracle] {message}"
        if tr is None:
            print(line, file=sys.stderr, flush=True)
            return
        with capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext():
            if tr._tw.width_of_current_line:
                tr._tw.line()
            tr._tw.line(line)
            tr._tw.flush()

    return report


# Test files whose tests compile C++, in the order they run (after all others; then any other test using
# the ``oracle`` fixture).  A test module may define ``oracle_prefetch()`` to queue its programs; the two
# top-level ones are queued by calling the module's own cached build function in the background.
CXX_MODULES = ["test_errors.py", "test_atoms.py", "test_sm90_scheduler.py", "test_oracle_dynamic.py",
               "test_kernel_layouts.py", "test_tiled_oracle.py", "test_oracle_corpus.py"]
_BACKGROUND_BUILDERS = {"test_kernel_layouts.py": "cxx_output", "test_sm90_scheduler.py": "enumerate_binary"}


def _cxx_rank(item):
    name = item.path.name
    uses_oracle = "oracle" in getattr(item, "fixturenames", ())
    if name in ("test_errors.py", "test_atoms.py"):  # only the tests asking the oracle whether C++ compiles
        return 1 + CXX_MODULES.index(name) if uses_oracle else 0
    if name in CXX_MODULES:
        return 1 + CXX_MODULES.index(name)
    return 1 + len(CXX_MODULES) if uses_oracle else 0


def pytest_collection_modifyitems(session, config, items):
    ranks = {id(item): _cxx_rank(item) for item in items}
    items.sort(key=lambda item: ranks[id(item)])  # stable: the pure-Python tests first, in their order
    for item in items:
        if ranks[id(item)]:
            item.add_marker(pytest.mark.cxx)


def pytest_collection_finish(session):
    items = [item for item in session.items if _cxx_rank(item)]
    if not items or session.config.option.collectonly:
        return
    oracle = _oracle()
    oracle.POOL.reporter = _reporter(session.config)
    try:
        oracle.toolchain()
    except oracle.OracleUnavailable:
        return  # the tests themselves fail and say what is missing
    modules = {}
    for item in items:
        module = getattr(item, "module", None)
        if module is not None:
            modules.setdefault(module.__name__, module)
        params = getattr(getattr(item, "callspec", None), "params", {})
        if isinstance(params.get("cpp_body"), str):
            oracle.prefetch_compiles(params["cpp_body"])
    if any("corpus_runs" in item.fixturenames for item in items):
        from tests.layout import corpus

        corpus.prefetch()
    for module in modules.values():
        prefetch = getattr(module, "oracle_prefetch", None)
        builder = getattr(module, _BACKGROUND_BUILDERS.get(Path(module.__file__).name, ""), None)
        if prefetch is not None:
            prefetch()
        elif builder is not None:
            oracle.POOL.submit(f"prefetch:{module.__name__}", None, builder, priority=20)
    scope = "the full corpus" if oracle.full() else f"{oracle.FULL_ENV}=1 for the full corpus"
    oracle.POOL.announce = (f"compiling the C++ programs of {len(modules)} test files against CuTe in the background "
                            f"({oracle.POOL.workers} g++ jobs; {scope})")


def _pool():
    oracle = sys.modules.get("tests.layout.oracle")
    return None if oracle is None else oracle.POOL


def pytest_runtest_logfinish(nodeid, location):
    if _pool() is not None:
        _pool().drain()


def pytest_terminal_summary(terminalreporter):
    pool = _pool()
    if pool is not None and pool.built:
        pool.drain()
        pool.note(f"{pool.built} builds, {pool.compile_seconds:.0f}s in all; cache: "
                  f"{sys.modules['tests.layout.oracle'].cache_dir()}")


def pytest_unconfigure(config):
    oracle = sys.modules.get("tests.layout.oracle")
    if oracle is None:
        return
    oracle.POOL.shutdown()
    oracle.POOL.reporter = None
    with contextlib.suppress(OSError, oracle.OracleUnavailable):
        oracle.prune_cache()
