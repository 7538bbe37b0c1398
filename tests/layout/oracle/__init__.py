"""The C++ oracle: host-only programs compiled against the real CuTe headers (no GPU needed).

Two ways to use it:

* ``run_oracle(cpp_name, stdin_text)`` builds ``tests/layout/oracle/<cpp_name>.cpp`` (cached by a
  hash of the source, flags and headers) and runs it with ``stdin_text``; one request per line
  lets thousands of cases share one process run.
* ``run_cases(name, cases)`` generates a program from C++ statements (one per case, each printing
  its result, e.g. ``print(composition(A, B));``), compiles it in chunks (cached, parallel) and
  returns one output string per case.  Cases whose types make C++ reject the program at compile
  time (``static_assert``) come back as :class:`CxxRejected` with the compiler's message.

``cpp(obj)`` writes a Python layout object as a C++ expression (``Int(4)`` -> ``Int<4>{}``,
``4`` -> ``int(4)``).  ``compiles(body)`` tells whether a snippet compiles (for checking that C++
rejects what the mirror rejects).  Missing g++ / CUTLASS / CUDA headers raise
:class:`OracleUnavailable` naming what is missing; tests turn that into a failure, never a skip.

Compiler line: ``g++ -std=c++17 -O0 -w -I<cutlass>/include -I$CUDA_HOME/include -I$CUDA_HOME/include/cccl``
(CUDA 13 keeps libcu++'s ``<cuda/std/...>`` under ``include/cccl``; ``-w`` hides CUDA's vector-type
deprecation warnings), with ``<cute/tensor.hpp>`` precompiled once.  ``$CXX`` overrides g++,
``$FLASHCUTE_CUTLASS_INCLUDE`` the CUTLASS include folder.  Generated programs compile in chunks of
200 cases; ``run_case_sets`` compiles several named sets in one pool (one job per core).

Cache directory: ``$FLASHCUTE_ORACLE_CACHE`` or ``~/.cache/flashcute/oracle``.
"""

import concurrent.futures
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

HERE = Path(__file__).resolve().parent
CASE_SEPARATOR = "\x1e"
DEFAULT_CHUNK = 200


class OracleUnavailable(RuntimeError):
    """The C++ toolchain or the CuTe headers are missing (the message says which)."""


class CxxRejected(str):
    """Marks a case C++ refused to compile; the string is the compiler's diagnostic."""


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
    flags = ["-std=c++17", "-O0", "-w", "-fmax-errors=40"] + [f"-I{p}" for p in includes]
    header = includes[0] / "cute" / "tensor.hpp"
    stat = header.stat()
    identity = "|".join([exe, *version, *flags, str(stat.st_mtime_ns), str(stat.st_size)])
    return exe, flags, identity


def cache_dir():
    root = os.environ.get("FLASHCUTE_ORACLE_CACHE")
    path = Path(root) if root else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "flashcute" / "oracle"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _digest(*parts):
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode() if isinstance(p, str) else p)
        h.update(b"\0")
    return h.hexdigest()[:20]


class _Lock:
    def __init__(self, path):
        self.path = path

    def __enter__(self):
        self.f = open(self.path, "w")
        fcntl.flock(self.f, fcntl.LOCK_EX)

    def __exit__(self, *exc):
        fcntl.flock(self.f, fcntl.LOCK_UN)
        self.f.close()


PCH_HEADER = "flashcute_cute_all.hpp"


def _pch_dir():
    """A precompiled ``<cute/tensor.hpp>`` (built once per toolchain) so small programs compile fast."""
    exe, flags, identity = toolchain()
    d = cache_dir() / f"pch-{_digest(identity)}"
    gch = d / (PCH_HEADER + ".gch")
    if gch.is_file():
        return d
    d.mkdir(parents=True, exist_ok=True)
    with _Lock(d / ".lock"):
        if not gch.is_file():
            hdr = d / PCH_HEADER
            hdr.write_text("#pragma once\n#include <cute/tensor.hpp>\n#include <cstdio>\n#include <iostream>\n#include <string>\n")
            tmp = d / (PCH_HEADER + ".gch.tmp")
            r = subprocess.run([exe, *flags, "-x", "c++-header", str(hdr), "-o", str(tmp)], capture_output=True, text=True)
            if r.returncode != 0:
                raise OracleUnavailable(f"cannot compile <cute/tensor.hpp> with {exe} {' '.join(flags)}:\n{r.stderr[-4000:]}")
            os.replace(tmp, gch)
    return d


def _compile(source, out_path, syntax_only=False):
    exe, flags, _ = toolchain()
    pch = _pch_dir()
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "oracle.cpp"
        src.write_text(source)
        cmd = [exe, *flags, f"-I{pch}", str(src)]
        cmd += ["-fsyntax-only"] if syntax_only else ["-o", str(out_path)]
        r = subprocess.run(cmd, capture_output=True, text=True)
    return r.returncode == 0, r.stderr.replace(str(src), "oracle.cpp")


PRELUDE = f'#include "{PCH_HEADER}"\nusing namespace cute;\n'


def _build_once(binary, compile_to):
    """``binary`` if cached, else ``compile_to(tmp_path) -> (ok, stderr)`` under a file lock, then renamed."""
    if binary.is_file():
        return binary
    with _Lock(str(binary) + ".lock"):
        if not binary.is_file():
            tmp = binary.with_name(binary.name + ".tmp")
            ok, err = compile_to(tmp)
            if not ok:
                raise RuntimeError(f"{binary.name.rsplit('-', 1)[0]} failed to compile:\n{err[-6000:]}")
            os.replace(tmp, binary)
    return binary


def build(name, source):
    """Compile ``source`` (cached by hash) and return the binary's path; RuntimeError on a compile error."""
    _, _, identity = toolchain()
    return _build_once(cache_dir() / f"{name}-{_digest(identity, source)}", lambda tmp: _compile(source, tmp))


def build_file(path, include_dirs=(), depends=(), extra_flags=()):
    """Compile the standalone program ``path`` (no precompiled header) and return the binary's path, cached by
    its text, the files it ``depends`` on (headers it includes) and the toolchain; RuntimeError on a compile
    error."""
    exe, flags, identity = toolchain()
    path = Path(path)
    key = [identity, *map(str, extra_flags)]
    for dep in [path, *depends]:
        key += [str(dep), Path(dep).read_bytes()]

    def compile_to(tmp):
        cmd = [exe, *flags, *extra_flags, *(f"-I{d}" for d in include_dirs), str(path), "-o", str(tmp)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        return r.returncode == 0, r.stderr

    return _build_once(cache_dir() / f"{path.stem}-{_digest(*key)}", compile_to)


def run_binary(binary, stdin_text="", timeout=600):
    r = subprocess.run([str(binary)], input=stdin_text, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"oracle {binary.name} exited with {r.returncode}:\n{r.stderr[-4000:]}")
    return r.stdout


def run_oracle(cpp_name, stdin_text=""):
    """Build ``tests/layout/oracle/<cpp_name>.cpp`` (cached) and run it with ``stdin_text``; returns stdout.

    The .cpp may ``#include "flashcute_cute_all.hpp"`` (precompiled cute/tensor.hpp) or the CuTe
    headers directly.
    """
    path = HERE / f"{cpp_name}.cpp"
    if not path.is_file():
        raise FileNotFoundError(f"no oracle program {path}")
    return run_binary(build(cpp_name, path.read_text()), stdin_text)


# ---------------------------------------------------------------------------------------------
# Generated programs
# ---------------------------------------------------------------------------------------------

def _case_source(cases, prelude):
    header = f"{PRELUDE}{prelude}\nint main() {{\n"
    body = []
    for c in cases:
        if "\n" in c:
            raise ValueError("a case must be a single line of C++")
        body.append(f'  {{ {c} }} printf("\\x1e");\n')
    return header + "".join(body) + "  return 0;\n}\n", header.count("\n") + 1


def _rejected_lines(err):
    return {int(m) for m in re.findall(r"oracle\.cpp:(\d+):", err)}


def _build_or_reject(name, source, first, ncases):
    """Build a chunk; returns (binary, {}) or (None, {case index: diagnostic}) — both cached."""
    _, _, identity = toolchain()
    binary = cache_dir() / f"{name}-{_digest(identity, source)}"
    marker = binary.with_name(binary.name + ".rejected.json")
    if binary.is_file():
        return binary, {}
    if marker.is_file():
        return None, {int(k): v for k, v in json.loads(marker.read_text()).items()}
    with _Lock(str(binary) + ".lock"):
        if binary.is_file():
            return binary, {}
        if marker.is_file():
            return None, {int(k): v for k, v in json.loads(marker.read_text()).items()}
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
        r = subprocess.run([str(binary)], capture_output=True, text=True, timeout=600)
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


def run_cases(name, cases, prelude="", chunk=DEFAULT_CHUNK):
    """Compile and run generated C++ cases (one statement per case); one output (or CxxRejected) per case."""
    return run_case_sets({name: list(cases)}, prelude, chunk)[name]


def run_case_sets(sets, prelude="", chunk=DEFAULT_CHUNK):
    """``run_cases`` for several named case lists at once, all chunks sharing one pool of compilers.

    ``sets`` maps a name to a list of statements, or to ``(statements, prelude)`` for a set that
    needs extra includes (e.g. ``#include <cute/atom/mma_traits_sm90_gmma.hpp>``).
    """
    toolchain()
    _pch_dir()
    jobs = []
    for name, spec in sets.items():
        cases, pre = spec if isinstance(spec, tuple) else (spec, prelude)
        cases = list(cases)
        jobs += [(name, i // chunk, cases[i:i + chunk], pre) for i in range(0, len(cases), chunk)]
    workers = max(1, min(len(jobs), os.cpu_count() or 2))
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        parts = list(pool.map(lambda job: _run_chunk(f"{job[0]}{job[1]}", job[2], job[3]), jobs))
    out = {name: [] for name in sets}
    for job, part in zip(jobs, parts):
        out[job[0]].extend(part)
    return out


def compiles(body, prelude=""):
    """Whether ``int main() { body }`` compiles against CuTe (result cached); returns (ok, diagnostics)."""
    _, _, identity = toolchain()
    source = f"{PRELUDE}{prelude}\nint main() {{ {body} }}\n"
    marker = cache_dir() / f"syntax-{_digest(identity, source)}"
    for suffix, ok in ((".ok", True), (".fail", False)):
        if marker.with_suffix(suffix).is_file():
            return ok, marker.with_suffix(suffix).read_text()
    ok, err = _compile(source, None, syntax_only=True)
    marker.with_suffix(".ok" if ok else ".fail").write_text(err)
    return ok, err


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
