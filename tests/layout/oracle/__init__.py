"""The C++ oracle: host-only programs compiled against the real CuTe headers (no GPU needed).

Three ways to use it:

* ``run_oracle(cpp_name, stdin_text)`` builds ``tests/layout/oracle/<cpp_name>.cpp`` (cached by a
  hash of the source, flags and headers) and runs it with ``stdin_text``; one request per line
  lets thousands of cases share one compiled program.  The dynamic-integer corpus works this way
  (``dynamic_layouts.cpp``, ``dynamic_tensors.cpp``), as does ``tiled.cpp`` (TiledMMA/TiledCopy).
* ``run_cases(name, cases)`` generates a program from C++ statements (one per case, each printing
  its result, e.g. ``print(composition(A, B));``), compiles it in chunks and returns one output
  string per case.  This is for what needs compile-time types (``Int<N>``, static_assert rejections):
  cases whose types make C++ reject the program come back as :class:`CxxRejected` with the
  compiler's message.
* ``compiles(body)`` tells whether a snippet compiles (for checking that C++ rejects what the mirror
  rejects).

``cpp(obj)`` writes a Python layout object as a C++ expression (``Int(4)`` -> ``Int<4>{}``,
``4`` -> ``int(4)``).  Missing g++ / CUTLASS / CUDA headers raise :class:`OracleUnavailable` naming
what is missing; tests turn that into a failure, never a skip.

Compiler line: ``g++ -std=c++17 -O1 -w -I<cutlass>/include -I$CUDA_HOME/include -I$CUDA_HOME/include/cccl``
(CUDA 13 keeps libcu++'s ``<cuda/std/...>`` under ``include/cccl``; ``-w`` hides CUDA's vector-type
deprecation warnings).  ``-O1``, not ``-O0``: at -O0 g++ emits every one of the thousands of tiny CuTe
helpers a program instantiates; -O1 inlines them away, which halves the compile time and makes the
binaries 50-100 times smaller (the printed results are the same: tests/layout/oracle/README.md).
``$CXX`` overrides g++, ``$FLASHCUTE_ORACLE_CXXFLAGS`` appends flags (e.g. ``-O0``),
``$FLASHCUTE_CUTLASS_INCLUDE`` names the CUTLASS include folder.

Compiling: every build is a job in one process-wide pool of ``$FLASHCUTE_ORACLE_JOBS`` (default: the
number of cores) g++ processes; tests/conftest.py queues the programs the collected tests need when
collection ends, so they compile while the pure-Python tests run, and prints a line per program
built.  ``<cute/tensor.hpp>`` is precompiled once per session into a temporary folder (about 180 MB,
removed at exit) and only when something must be compiled.

Cache: ``$FLASHCUTE_ORACLE_CACHE`` or ``~/.cache/flashcute/oracle`` holds the binaries (tens of KB
each) and the verdicts of ``compiles``; entries unused for 30 days are removed at the end of a
session.  ``$FLASHCUTE_ORACLE_FULL=1`` (or ``pytest --oracle-full``) selects the full static corpus
and every TiledMMA/TiledCopy configuration (see tests/layout/oracle/README.md).
"""

import atexit
import collections
import fcntl
import hashlib
import heapq
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from functools import lru_cache
from pathlib import Path

HERE = Path(__file__).resolve().parent
CASE_SEPARATOR = "\x1e"
DEFAULT_CHUNK = 150
FULL_ENV = "FLASHCUTE_ORACLE_FULL"


class OracleUnavailable(RuntimeError):
    """The C++ toolchain or the CuTe headers are missing (the message says which)."""


class CxxRejected(str):
    """Marks a case C++ refused to compile; the string is the compiler's diagnostic."""


def full():
    """Whether the full (opt-in) oracle corpus is selected: ``$FLASHCUTE_ORACLE_FULL`` set and not 0."""
    return os.environ.get(FULL_ENV, "").strip().lower() not in ("", "0", "no", "false", "off")


# ---------------------------------------------------------------------------------------------
# Toolchain discovery
# ---------------------------------------------------------------------------------------------

def _cutlass_include():
    env = os.environ.get("FLASHCUTE_CUTLASS_INCLUDE")
    if env:
        path = Path(env)
    else:
        try:
            import cutlass_library
        except ImportError as e:
            raise OracleUnavailable(
                "CUTLASS headers not found: the python package 'nvidia-cutlass' (module cutlass_library) is not "
                "installed; install it or set FLASHCUTE_CUTLASS_INCLUDE to CUTLASS's include folder") from e
        path = Path(cutlass_library.__file__).resolve().parent / "source" / "include"
    if not (path / "cute" / "tensor.hpp").is_file():
        raise OracleUnavailable(f"CuTe headers not found: {path}/cute/tensor.hpp does not exist")
    return path


def _cuda_includes():
    root = Path(os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda")
    inc = root / "include"
    if not (inc / "cuda_runtime_api.h").is_file():
        raise OracleUnavailable(
            f"CUDA headers not found: {inc}/cuda_runtime_api.h does not exist (CuTe's host code includes it); "
            "set CUDA_HOME to a CUDA toolkit")
    dirs = [inc]
    if (inc / "cccl" / "cuda" / "std").is_dir():
        dirs.append(inc / "cccl")  # CUDA 13 keeps libcu++ (<cuda/std/...>) here
    return dirs


@lru_cache(maxsize=None)
def toolchain():
    """(compiler, flags, identity string) — raises OracleUnavailable naming what is missing."""
    cxx = os.environ.get("CXX", "g++")
    exe = shutil.which(cxx)
    if exe is None:
        raise OracleUnavailable(f"C++ compiler {cxx!r} not found on PATH (the CuTe oracle needs g++ with C++17)")
    version = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout.splitlines()[:1]
    includes = [_cutlass_include()] + _cuda_includes()
    extra = os.environ.get("FLASHCUTE_ORACLE_CXXFLAGS", "").split()
    flags = ["-std=c++17", "-O1", "-w", "-fmax-errors=40", *extra] + [f"-I{p}" for p in includes]
    header = includes[0] / "cute" / "tensor.hpp"
    stat = header.stat()
    identity = "|".join([exe, *version, *flags, str(stat.st_mtime_ns), str(stat.st_size)])
    return exe, flags, identity


_cache_ready = False


def cache_dir():
    global _cache_ready
    root = os.environ.get("FLASHCUTE_ORACLE_CACHE")
    path = Path(root) if root else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "flashcute" / "oracle"
    path.mkdir(parents=True, exist_ok=True)
    if not _cache_ready:
        _cache_ready = True
        for old in path.glob("pch-*"):  # precompiled headers of earlier versions (~175 MB each) lived here
            shutil.rmtree(old, ignore_errors=True)
    return path


def _digest(*parts):
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode() if isinstance(p, str) else p)
        h.update(b"\0")
    return h.hexdigest()[:20]


class _Lock:
    """An exclusive file lock (other processes building the same binary wait for it)."""

    def __init__(self, path):
        self.path = path

    def __enter__(self):
        self.f = open(self.path, "w")
        fcntl.flock(self.f, fcntl.LOCK_EX)

    def __exit__(self, *exc):
        fcntl.flock(self.f, fcntl.LOCK_UN)
        self.f.close()


def _touch(path):
    try:
        os.utime(path)
    except OSError:
        pass


def prune_cache(max_age_days=30):
    """Remove cache entries (binaries, verdicts, locks) not used for ``max_age_days``; returns bytes freed."""
    path = cache_dir()
    limit = time.time() - max_age_days * 86400
    freed = 0
    for entry in path.iterdir():
        try:
            st = entry.stat()
            stale = limit if not entry.name.endswith(".tmp") else time.time() - 3600  # left by a killed build
            if entry.is_file() and st.st_mtime < stale:
                entry.unlink()
                freed += st.st_size
        except OSError:
            pass
    return freed


# ---------------------------------------------------------------------------------------------
# The build pool: every g++ run is a job; callers wait for theirs, and progress is reported
# ---------------------------------------------------------------------------------------------

_procs = set()
_procs_lock = threading.Lock()


def _run(cmd, stdin_text=None, timeout=None):
    """``subprocess.run(cmd, capture_output=True, text=True)``, with the process known to ``POOL.shutdown``."""
    with subprocess.Popen(cmd, stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        with _procs_lock:
            _procs.add(proc)
        try:
            out, err = proc.communicate(stdin_text, timeout=timeout)
        except BaseException:
            proc.kill()
            raise
        finally:
            with _procs_lock:
                _procs.discard(proc)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


class _Job:
    __slots__ = ("key", "label", "fn", "priority", "state", "value", "error", "done", "started", "seconds")

    def __init__(self, key, label, fn, priority):
        self.key, self.label, self.fn, self.priority = key, label, fn, priority
        self.state, self.value, self.error = "queued", None, None
        self.done = threading.Event()
        self.started = self.seconds = None


class _Pool:
    """A priority queue of build jobs run by up to ``workers`` threads (each running one g++).

    A job is identified by its key (the binary it produces), so asking twice waits for one build.
    A thread that needs a job still queued runs it itself.  Finished builds are reported through
    ``reporter`` (set by tests/conftest.py), always from the main thread: ``drain`` is called
    between tests and while the main thread waits.
    """

    def __init__(self):
        self._cv = threading.Condition()
        self._heap = []
        self._jobs = {}
        self._seq = itertools.count()
        self._threads = 0
        self._messages = collections.deque()
        self.workers = max(1, int(os.environ.get("FLASHCUTE_ORACLE_JOBS") or os.cpu_count() or 2))
        self.reporter = None
        self.announce = None  # printed when the first build starts
        self._local = threading.local()
        self.built = 0
        self.compile_seconds = 0.0

    def submit(self, key, label, fn, priority=50):
        """Queue ``fn`` (lower ``priority`` first) unless a job with ``key`` exists; returns the job."""
        with self._cv:
            job = self._jobs.get(key)
            if job is None:
                job = self._jobs[key] = _Job(key, label, fn, priority)
            elif job.state != "queued" or priority >= job.priority:
                return job
            job.priority = priority
            heapq.heappush(self._heap, (priority, next(self._seq), job))
            if self._threads < self.workers:
                self._threads += 1
                threading.Thread(target=self._work, name=f"oracle-build-{self._threads}", daemon=True).start()
            self._cv.notify()
        return job

    def _claim(self):
        """The first queued job, now marked running, or None (call with the lock held)."""
        while self._heap and (self._heap[0][2].state != "queued" or self._heap[0][0] != self._heap[0][2].priority):
            heapq.heappop(self._heap)
        if not self._heap:
            return None
        job = heapq.heappop(self._heap)[2]
        job.state = "running"
        return job

    def _work(self):
        while True:
            with self._cv:
                job = self._claim()
                while job is None:
                    self._cv.wait()
                    job = self._claim()
            self._run(job)

    def _run(self, job):
        if job.label and self.announce:
            with self._cv:
                if self.announce:
                    self._messages.append(self.announce)
                    self.announce = None
        job.started = time.monotonic()
        interrupted = None
        self._local.depth = getattr(self._local, "depth", 0) + 1
        try:
            job.value = job.fn()
        except (KeyboardInterrupt, SystemExit) as e:
            job.error = interrupted = e
        except BaseException as e:  # noqa: B036 - pytest.fail() raises a BaseException; re-raised by result()
            job.error = e
        finally:
            self._local.depth -= 1
        job.seconds = time.monotonic() - job.started
        with self._cv:
            job.state = "done"
            if job.label:
                self.built += 1
                self.compile_seconds += job.seconds
                status = "FAILED" if job.error is not None else "built"
                self._messages.append(f"{status} {job.label} in {job.seconds:.0f}s{self._tally()}")
            self._cv.notify_all()
        job.done.set()
        if interrupted is not None:
            raise interrupted

    def _tally(self):
        running = sum(1 for j in self._jobs.values() if j.state == "running" and j.label)
        queued = sum(1 for j in self._jobs.values() if j.state == "queued" and j.label)
        return f" ({running} compiling, {queued} queued)" if running or queued else ""

    def shutdown(self):
        """Drop the queued jobs and stop the compilers still running (the session is over)."""
        with self._cv:
            for job in self._jobs.values():
                if job.state == "queued":
                    job.state, job.error = "done", RuntimeError("oracle build cancelled: the session ended")
                    job.done.set()
            self._heap.clear()
        with _procs_lock:
            for proc in list(_procs):
                proc.kill()

    def forget(self, key, value):
        """Drop the finished job ``key`` if it produced ``value`` (so that asking again runs it again)."""
        with self._cv:
            job = self._jobs.get(key)
            if job is not None and job.state == "done" and job.value == value:
                del self._jobs[key]

    def result(self, job):
        """Wait for ``job`` (running it here if it is still queued); its value, or its exception re-raised."""
        with self._cv:
            steal = job.state == "queued"
            if steal:
                job.state = "running"
        main = threading.current_thread() is threading.main_thread()
        if steal:
            self._run(job)
        # rather than wait idle, the main thread compiles something still queued (not from inside a job:
        # that job would wait for this one)
        while main and not getattr(self._local, "depth", 0) and not job.done.is_set():
            with self._cv:
                other = self._claim()
            if other is None:
                break
            self._run(other)
            self.drain()
        if not job.done.is_set():
            waited, next_note = 0.0, 5.0
            while not job.done.wait(timeout=1.0 if main else None):
                waited += 1.0
                self.drain()
                if waited >= next_note and job.label:
                    with self._cv:
                        tally = self._tally()
                    self.note(f"waiting for {job.label}: g++ running for {time.monotonic() - job.started:.0f}s{tally}")
                    next_note = waited + 30.0
        self.drain()
        if job.error is not None:
            raise job.error
        return job.value

    def run(self, key, label, fn, priority=50):
        return self.result(self.submit(key, label, fn, priority))

    def note(self, message):
        self._messages.append(message)
        self.drain()

    def drain(self):
        """Print the queued progress messages (main thread only; elsewhere they wait for it)."""
        if threading.current_thread() is not threading.main_thread():
            return
        while self._messages:
            message = self._messages.popleft()
            if self.reporter is not None:
                self.reporter(message)
            else:
                print(f"[C++ oracle] {message}", file=sys.stderr, flush=True)


POOL = _Pool()


# ---------------------------------------------------------------------------------------------
# The precompiled header: one per session, in a temporary folder
# ---------------------------------------------------------------------------------------------

PCH_HEADER = "flashcute_cute_all.hpp"
PCH_TEXT = "#pragma once\n#include <cute/tensor.hpp>\n#include <cstdio>\n#include <iostream>\n#include <string>\n"
_PCH_PREFIX = "flashcute-oracle-pch-"


def _remove_stale_pch_dirs():
    """Precompiled headers left by sessions that were killed (their process is gone)."""
    for d in Path(tempfile.gettempdir()).glob(_PCH_PREFIX + "*"):
        try:
            pid = int(d.name[len(_PCH_PREFIX):].split("-")[0])
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
        except (ValueError, PermissionError, OSError):
            pass


def _build_pch():
    exe, flags, _ = toolchain()
    _remove_stale_pch_dirs()
    d = Path(tempfile.mkdtemp(prefix=f"{_PCH_PREFIX}{os.getpid()}-"))
    atexit.register(shutil.rmtree, d, True)
    hdr = d / PCH_HEADER
    hdr.write_text(PCH_TEXT)
    r = _run([exe, *flags, "-x", "c++-header", str(hdr), "-o", str(d / (PCH_HEADER + ".gch"))])
    if r.returncode != 0:
        shutil.rmtree(d, ignore_errors=True)
        raise OracleUnavailable(f"cannot compile <cute/tensor.hpp> with {exe} {' '.join(flags)}:\n{r.stderr[-4000:]}")
    return d


def _pch_dir():
    """The folder holding the session's precompiled ``<cute/tensor.hpp>`` (built on first use, and again if
    someone removed it meanwhile)."""
    d = POOL.run("pch", "precompiled header <cute/tensor.hpp>", _build_pch, priority=0)
    if not (d / (PCH_HEADER + ".gch")).is_file():
        POOL.forget("pch", d)
        d = POOL.run("pch", "precompiled header <cute/tensor.hpp>", _build_pch, priority=0)
    return d


def _compile(source, out_path, syntax_only=False):
    exe, flags, _ = toolchain()
    pch = _pch_dir()
    with tempfile.TemporaryDirectory(prefix="flashcute-oracle-") as tmp:
        src = Path(tmp) / "oracle.cpp"
        src.write_text(source)
        cmd = [exe, *flags, f"-I{pch}", str(src)]
        cmd += ["-fsyntax-only"] if syntax_only else ["-o", str(out_path)]
        r = _run(cmd)
    return r.returncode == 0, r.stderr.replace(str(src), "oracle.cpp")


PRELUDE = f'#include "{PCH_HEADER}"\nusing namespace cute;\n'


def _build_job(binary, compile_to, label, priority):
    """The pool job that produces ``binary`` with ``compile_to(tmp_path) -> (ok, stderr)`` under a file lock
    (renamed into place when it succeeds); a compile error is a RuntimeError, remembered for the session."""

    def job():
        if not binary.is_file():
            with _Lock(str(binary) + ".lock"):
                if not binary.is_file():
                    tmp = binary.with_name(binary.name + ".tmp")
                    ok, err = compile_to(tmp)
                    if not ok:
                        raise RuntimeError(f"{binary.name.rsplit('-', 1)[0]} failed to compile:\n{err[-6000:]}")
                    os.replace(tmp, binary)
        return binary

    return POOL.submit(str(binary), label, job, priority)


def _build_once(binary, compile_to, label, priority):
    if binary.is_file():
        _touch(binary)
        return binary
    return POOL.result(_build_job(binary, compile_to, label, priority))


def _binary_path(name, source):
    _, _, identity = toolchain()
    return cache_dir() / f"{name}-{_digest(identity, source)}"


def build(name, source, priority=50):
    """Compile ``source`` (cached by hash) and return the binary's path; RuntimeError on a compile error."""
    return _build_once(_binary_path(name, source), lambda tmp: _compile(source, tmp), name, priority)


def prefetch(name, source, priority=50):
    """Queue ``build(name, source)`` without waiting for it."""
    binary = _binary_path(name, source)
    if not binary.is_file():
        _build_job(binary, lambda tmp: _compile(source, tmp), name, priority)


def _file_build(path, include_dirs, depends, extra_flags):
    exe, flags, identity = toolchain()
    path = Path(path)
    key = [identity, *map(str, extra_flags)]
    for dep in [path, *depends]:
        key += [str(dep), Path(dep).read_bytes()]

    def compile_to(tmp):
        cmd = [exe, *flags, *extra_flags, *(f"-I{d}" for d in include_dirs), str(path), "-o", str(tmp)]
        r = _run(cmd)
        return r.returncode == 0, r.stderr

    return cache_dir() / f"{path.stem}-{_digest(*key)}", compile_to, path.name


def build_file(path, include_dirs=(), depends=(), extra_flags=(), priority=50):
    """Compile the standalone program ``path`` (no precompiled header) and return the binary's path, cached by
    its text, the files it ``depends`` on (headers it includes) and the toolchain; RuntimeError on a compile
    error."""
    binary, compile_to, label = _file_build(path, include_dirs, depends, extra_flags)
    return _build_once(binary, compile_to, label, priority)


def build_file_or_fail(path, include_dirs=(), depends=(), extra_flags=()):
    """``build_file(...)`` for a test: a missing toolchain or a compile error fails the calling test, naming the
    program and what went wrong."""
    try:
        return build_file(path, include_dirs, depends, extra_flags)
    except (OracleUnavailable, RuntimeError) as e:
        import pytest

        pytest.fail(f"cannot build {Path(path).name} host-only: {e}")


def prefetch_file(path, include_dirs=(), depends=(), extra_flags=(), priority=50):
    """Queue ``build_file(...)`` without waiting for it."""
    binary, compile_to, label = _file_build(path, include_dirs, depends, extra_flags)
    if not binary.is_file():
        _build_job(binary, compile_to, label, priority)


def run_binary(binary, stdin_text="", timeout=600):
    r = _run([str(binary)], stdin_text, timeout)
    if r.returncode != 0:
        raise RuntimeError(f"oracle {binary.name} exited with {r.returncode}:\n{r.stderr[-4000:]}")
    return r.stdout


def program_source(cpp_name, part=None):
    """The text of ``tests/layout/oracle/<cpp_name>.cpp``, with ``#define ORACLE_PART <part>`` after its first
    line (the precompiled-header include must stay first) when ``part`` is given."""
    path = HERE / f"{cpp_name}.cpp"
    if not path.is_file():
        raise FileNotFoundError(f"no oracle program {path}")
    text = path.read_text()
    if part is None:
        return text
    first, rest = text.split("\n", 1)
    return f"{first}\n#define ORACLE_PART {part}\n{rest}"


def program_name(cpp_name, part=None):
    return cpp_name if part is None else f"{cpp_name}{part}"


def build_program(cpp_name, part=None, priority=50):
    return build(program_name(cpp_name, part), program_source(cpp_name, part), priority)


def prefetch_program(cpp_name, part=None, priority=50):
    prefetch(program_name(cpp_name, part), program_source(cpp_name, part), priority)


def run_oracle(cpp_name, stdin_text="", part=None):
    """Build ``tests/layout/oracle/<cpp_name>.cpp`` (cached) and run it with ``stdin_text``; returns stdout.

    The .cpp may ``#include "flashcute_cute_all.hpp"`` (precompiled cute/tensor.hpp) or the CuTe
    headers directly.
    """
    return run_binary(build_program(cpp_name, part), stdin_text)


# ---------------------------------------------------------------------------------------------
# Generated programs
# ---------------------------------------------------------------------------------------------

def _case_source(cases, prelude):
    """The program of a chunk: one function per case, one line each (a compile error's line number names the
    case), called in order by main.  ``noinline`` keeps g++ -O1 from merging them into one huge main(), whose
    optimisation takes far longer than that of the separate functions."""
    header = f"{PRELUDE}{prelude}\n"
    body = []
    for i, c in enumerate(cases):
        if "\n" in c:
            raise ValueError("a case must be a single line of C++")
        body.append(f"__attribute__((noinline)) static void case_{i}() {{ {c} }}\n")
    calls = "".join(f'  case_{i}(); printf("\\x1e");\n' for i in range(len(cases)))
    return header + "".join(body) + "int main() {\n" + calls + "  return 0;\n}\n", header.count("\n") + 1


def _rejected_lines(err):
    return {int(m) for m in re.findall(r"oracle\.cpp:(\d+):", err)}


def _build_or_reject(name, source, first, ncases):
    """Build a chunk; returns (binary, {}) or (None, {case index: diagnostic}) — both cached."""
    binary = _binary_path(name, source)
    marker = binary.with_name(binary.name + ".rejected.json")

    def cached():
        if binary.is_file():
            _touch(binary)
            return binary, {}
        if marker.is_file():
            _touch(marker)
            return None, {int(k): v for k, v in json.loads(marker.read_text()).items()}
        return None

    hit = cached()
    if hit is not None:
        return hit
    with _Lock(str(binary) + ".lock"):
        hit = cached()
        if hit is not None:
            return hit
        tmp = binary.with_name(binary.name + ".tmp")
        ok, err = _compile(source, tmp)
        if ok:
            os.replace(tmp, binary)
            return binary, {}
        bad = {ln - first: _diagnostic_for(err, ln) for ln in _rejected_lines(err) if 0 <= ln - first < ncases}
        if not bad:
            raise RuntimeError(f"oracle chunk {name!r} failed to compile outside the cases:\n{err[-6000:]}")
        marker.write_text(json.dumps(bad))
        return None, bad


def _run_chunk(name, cases, prelude):
    """Outputs for one chunk; cases C++ rejects are dropped (and reported) until the rest compiles."""
    alive = list(range(len(cases)))
    rejected = {}
    for _attempt in range(10):
        source, first = _case_source([cases[i] for i in alive], prelude)
        binary, bad = _build_or_reject(name, source, first, len(alive))
        if binary is None:
            for k, msg in bad.items():
                rejected[alive[k]] = CxxRejected(msg)
            alive = [i for j, i in enumerate(alive) if j not in bad]
            continue
        r = _run([str(binary)], timeout=600)
        outputs = r.stdout.split(CASE_SEPARATOR)[:-1]
        if r.returncode != 0:
            crashed = cases[alive[len(outputs)]] if len(outputs) < len(alive) else "?"
            raise RuntimeError(f"oracle chunk {name!r} died (exit {r.returncode}) in case {crashed}\n{r.stderr[-2000:]}")
        if len(outputs) != len(alive):
            raise RuntimeError(f"oracle chunk {name!r}: {len(outputs)} outputs for {len(alive)} cases")
        result = dict(zip(alive, outputs))
        result.update(rejected)
        return [result[i] for i in range(len(cases))]
    raise RuntimeError(f"oracle chunk {name!r}: too many rejected cases to isolate")


def _diagnostic_for(err, line):
    msgs = re.findall(r"error: (.*)", err)
    return f"line {line}: " + ("; ".join(dict.fromkeys(msgs))[:500] if msgs else err[-500:])


def _chunk_jobs(sets, prelude, chunk, priority):
    jobs = []
    for name, spec in sets.items():
        cases, pre, size = (spec + (None,))[:3] if isinstance(spec, tuple) else (spec, prelude, None)
        cases, size = list(cases), size or chunk
        for i in range(0, len(cases), size):
            part, label = cases[i:i + size], f"{name}{i // size}"
            binary = _binary_path(label, _case_source(part, pre)[0])
            cached = binary.is_file() or binary.with_name(binary.name + ".rejected.json").is_file()
            count = f"{len(part)} case{'s' if len(part) != 1 else ''}"
            jobs.append((name, POOL.submit(f"chunk:{binary}", None if cached else f"{label} ({count})",
                                           lambda label=label, part=part, pre=pre: _run_chunk(label, part, pre),
                                           priority)))
    return jobs


def run_cases(name, cases, prelude="", chunk=DEFAULT_CHUNK):
    """Compile and run generated C++ cases (one statement per case); one output (or CxxRejected) per case."""
    return run_case_sets({name: list(cases)}, prelude, chunk)[name]


def run_case_sets(sets, prelude="", chunk=DEFAULT_CHUNK, priority=50):
    """``run_cases`` for several named case lists at once, all chunks compiled by the build pool.

    ``sets`` maps a name to a list of statements, or to ``(statements, prelude)`` for a set that
    needs extra includes (e.g. ``#include <cute/atom/mma_traits_sm90_gmma.hpp>``), or to
    ``(statements, prelude, chunk)`` for a set with its own chunk size.
    """
    toolchain()
    out = {name: [] for name in sets}
    for name, job in _chunk_jobs(sets, prelude, chunk, priority):
        out[name].extend(POOL.result(job))
    return out


def prefetch_case_sets(sets, prelude="", chunk=DEFAULT_CHUNK, priority=50):
    """Queue the chunks ``run_case_sets(sets, ...)`` will need, without waiting."""
    _chunk_jobs(sets, prelude, chunk, priority)


def _syntax_job(body, prelude):
    """(queued job, None), or (None, cached verdict)."""
    source = f"{PRELUDE}{prelude}\nint main() {{ {body} }}\n"
    marker = _binary_path("syntax", source)
    verdicts = [(marker.with_suffix(".ok"), True), (marker.with_suffix(".fail"), False)]
    for path, ok in verdicts:
        if path.is_file():
            _touch(path)
            return None, (ok, path.read_text())

    def check():
        ok, err = _compile(source, None, syntax_only=True)
        marker.with_suffix(".ok" if ok else ".fail").write_text(err)
        return ok, err

    return POOL.submit("syntax:" + str(marker), None, check, priority=10), None


def compiles(body, prelude=""):
    """Whether ``int main() { body }`` compiles against CuTe (verdict cached); returns (ok, diagnostics)."""
    job, verdict = _syntax_job(body, prelude)
    return verdict if job is None else POOL.result(job)


def prefetch_compiles(body, prelude=""):
    """Queue ``compiles(body, prelude)`` without waiting."""
    _syntax_job(body, prelude)


# ---------------------------------------------------------------------------------------------
# Python objects as C++ expressions
# ---------------------------------------------------------------------------------------------

def cpp(x):
    """C++ expression building the CuTe object equal to the Python layout object ``x``."""
    from flashcute.layout import (
        ComposedLayout, Int, Layout, LayoutLeft, LayoutRight, ScaledBasis, SmemPtrFlag, Swizzle, Underscore,
    )

    if x is LayoutLeft or x is LayoutRight:
        return f"{x!r}{{}}"
    if isinstance(x, SmemPtrFlag):
        return f"smem_ptr_flag_bits<{x.bits}>{{}}"
    if isinstance(x, Int):
        return f"Int<{int(x)}>{{}}"
    if isinstance(x, Underscore):
        return "_"
    if isinstance(x, bool):
        raise TypeError("bool is not a CuTe integer")
    if isinstance(x, int):
        return f"int({int(x)})"
    if isinstance(x, tuple):
        return "make_tuple(" + ", ".join(cpp(a) for a in x) + ")"
    if isinstance(x, ScaledBasis):
        modes = ",".join(str(m) for m in x.modes)
        return f"({cpp(x.value)} * E<{modes}>{{}})"
    if isinstance(x, Layout):
        return f"make_layout({cpp(x.shape)}, {cpp(x.stride)})"
    if isinstance(x, Swizzle):
        return f"Swizzle<{x.num_bits},{x.num_base},{x.num_shft}>{{}}"
    if isinstance(x, ComposedLayout):
        return f"make_composed_layout({cpp(x.layout_a)}, {cpp(x.offset)}, {cpp(x.layout_b)})"
    raise TypeError(f"cpp(): cannot write {type(x).__name__} as C++")
