"""The Python mirror of every shipped kernel configuration equals what the kernels' own C++ headers build.

csrc/tools/print_kernel_layouts.cpp includes the kernel-traits headers and prints every layout, TiledMMA
and TiledCopy with cute::print; flashcute.kernel_configs builds the same objects with flashcute.layout.
They must agree character for character, for every configuration the instantiations ship.

Needs g++ and the CUTLASS/CUDA headers (no GPU); without them the test fails saying what is missing.
The compiled program is cached by a hash of its source, the csrc headers and the toolchain.
"""

import re
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from flashcute.kernel_configs import decode_configs, shipped_configs, sm80_bwd_configs, sm90_bwd_configs  # noqa: E402
from tests.layout import oracle  # noqa: E402

TOOL = ROOT / "csrc" / "tools" / "print_kernel_layouts.cpp"


@lru_cache(maxsize=None)
def cxx_output():
    """stdout of print_kernel_layouts (built once per source/header/toolchain version)."""
    csrc = ROOT / "csrc"
    # -fpermissive: see the include notes at the top of print_kernel_layouts.cpp
    binary = oracle.build_file_or_fail(TOOL, [csrc], sorted(csrc.rglob("*.h")), ["-fpermissive"])
    r = subprocess.run([str(binary)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"print_kernel_layouts exited with {r.returncode}:\n{r.stderr[-4000:]}"
    return r.stdout


def parse(text):
    """{"<arch> <dtype> hdim<d>": {field: value}} from the program's output."""
    blocks, current = {}, None
    for line in text.splitlines():
        if line.startswith("== "):
            current = blocks.setdefault(line[3:], {})
        elif line:
            name, sep, value = line.partition(": ")
            assert sep and current is not None, f"unexpected line in print_kernel_layouts output: {line!r}"
            current[name] = value
    return blocks


def shipped_instantiations():
    """"<arch> <dtype> hdim<d>[ decode| backward]" of every generated forward, decode and backward kernel
    instantiation."""
    found = set()
    for path in (ROOT / "csrc" / "instantiations").glob("*.cu"):
        m = re.fullmatch(r"(fwd|bwd|decode)_(sm\d+)_(fp16|bf16)_hdim(\d+)", path.stem)
        assert m, f"unexpected instantiation file name {path.name}"
        found.add(f"{m[2]} {m[3]} hdim{m[4]}" + {"fwd": "", "decode": " decode", "bwd": " backward"}[m[1]])
    return found


CONFIGS = shipped_configs() + decode_configs() + sm80_bwd_configs() + sm90_bwd_configs()


def test_program_prints_every_instantiated_config():
    printed = set(parse(cxx_output()))
    # an SM90 forward instantiation holds both causal variants (their tiles differ)
    expected = {name if name.startswith("sm80 ") or name.endswith(" backward") else f"{name} {variant}"
                for name in shipped_instantiations() for variant in ("causal", "noncausal")}
    assert {n.split()[0] for n in expected} == {"sm80", "sm90"}, f"instantiations found: {sorted(expected)}"
    assert expected <= printed, f"print_kernel_layouts misses shipped configurations: {sorted(expected - printed)}"


def test_mirror_describes_every_printed_config():
    printed = set(parse(cxx_output()))
    mirrored = {cfg.header for cfg in CONFIGS}
    assert printed == mirrored, (f"only in C++: {sorted(printed - mirrored)}; "
                                 f"only in flashcute.kernel_configs: {sorted(mirrored - printed)}")


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c.header.replace(" ", "-"))
def test_mirror_equals_cxx(cfg):
    cxx = parse(cxx_output()).get(cfg.header)
    assert cxx is not None, f"print_kernel_layouts printed nothing for {cfg.header}"
    mirror = cfg.printed()
    assert list(mirror) == list(cxx), (f"{cfg.header}: field names differ; only in C++: "
                                       f"{[k for k in cxx if k not in mirror]}, only in the mirror: "
                                       f"{[k for k in mirror if k not in cxx]}")
    diffs = [f"  {name}:\n    C++:    {cxx[name]}\n    mirror: {mirror[name]}"
             for name in cxx if cxx[name] != mirror[name]]
    assert not diffs, f"{cfg.header}: the mirror differs from C++ CuTe:\n" + "\n".join(diffs)
