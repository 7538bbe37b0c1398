"""Registers and spills of the shipped kernels, from ptxas: the data behind flashcute/explain/ptxas.py.

    python csrc/tools/ptxas_report.py [-j JOBS] [--logs DIR] [UNIT.cu ...]
        compiles each instantiation (default: those of flashcute/kernel_table.py whose figures flashcute.explain
        records: the forward's and the SM90 backward's) for every target its arch runs on,
            nvcc <flashcute._build.NVCC_FLAGS> -Icsrc -I<CUTLASS include> -gencode=... -Xptxas -v -cubin UNIT.cu
        and prints MEASURED (to paste into flashcute/explain/ptxas.py once all are compiled), then where it
        differs from the stored one;
    python csrc/tools/ptxas_report.py --check LOG [LOG ...]
        compares the ptxas -v output in nvcc logs (CI's compiles with -Xptxas -v) with flashcute/explain/ptxas.py
        and exits 1 on any difference.

Each compile takes minutes; -j runs several at once.
"""

import argparse
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from flashcute import kernel_table  # noqa: E402  (pure Python: no torch)
from flashcute._build import NVCC_FLAGS, find_cutlass_include  # noqa: E402
from flashcute.explain import ptxas  # noqa: E402
from flashcute.explain.occupancy import DEVICES  # noqa: E402

UNITS = ROOT / "csrc" / "instantiations"


def compiles(names):
    """(unit file, target) of every compile: each instantiation (those named, or every one with recorded figures:
    the forward's and the SM90 backward's) for the target of each device its arch runs on."""
    units = [u for u in kernel_table.translation_units()
             if kernel_table.unit_filename(*u) in names or (not names and (u[0] == "fwd" or u[:2] == ("bwd", "sm90")))]
    return [(UNITS / kernel_table.unit_filename(*u), device.target) for u in units for device in DEVICES[u[1]]]


def ptxas_log(unit, target, nvcc, out_dir, logs=None):
    """nvcc's output for one compile with -Xptxas -v (also written to ``logs``/<unit>.<target>.log)."""
    number = target.removeprefix("sm_")
    cmd = [nvcc, *NVCC_FLAGS, f"-I{ROOT / 'csrc'}", f"-I{find_cutlass_include()}",
           f"-gencode=arch=compute_{number},code={target}", "-Xptxas", "-v", "-cubin",
           "-o", str(Path(out_dir) / f"{unit.stem}.{target}.cubin"), str(unit)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"nvcc failed on {unit.name} ({target}):\n{r.stderr[-4000:]}")
    if logs:
        (logs / f"{unit.stem}.{target}.log").write_text(r.stdout + r.stderr)
    return r.stdout + r.stderr


def _stdout(*cmd):
    """A command's output; '' where it cannot run (a copied tree without git)."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT).stdout.strip()
    except OSError:
        return ""


def provenance(nvcc):
    """What MEASURED_WITH should say: the CUDA and CUTLASS versions and the csrc commit."""
    cuda = re.search(r"release (\S+),", _stdout(nvcc, "--version"))
    version = (find_cutlass_include() / "cutlass" / "version.h").read_text()
    cutlass = ".".join(re.search(rf"#define CUTLASS_{part} (\d+)", version).group(1)
                       for part in ("MAJOR", "MINOR", "PATCH"))
    commit = _stdout("git", "rev-parse", "--short", "HEAD") or "?"
    dirty = _stdout("git", "status", "--porcelain", "--untracked-files=no", "csrc")
    return (f"CUDA {cuda.group(1) if cuda else '?'}, CUTLASS {cutlass}, csrc at {commit}"
            + (" with local changes" if dirty else ""))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("units", nargs="*", type=Path, help="instantiation files (default: all)")
    parser.add_argument("-j", "--jobs", type=int, default=1, help="compiles at once")
    parser.add_argument("--nvcc", default="nvcc")
    parser.add_argument("--logs", type=Path, help="also keep each compile's output here (input for --check)")
    parser.add_argument("--check", nargs="+", metavar="LOG", help="compare these nvcc -Xptxas -v logs instead")
    args = parser.parse_args(argv)
    if args.check:
        problems = ptxas.check(ptxas.parse_log("\n".join(Path(log).read_text() for log in args.check)))
        for problem in problems:
            print(problem)
        if not problems:
            print("ptxas registers and spills equal flashcute/explain/ptxas.py")
        return 1 if problems else 0

    todo = compiles({unit.name for unit in args.units})
    if not todo:
        parser.error("none of those files is an instantiation of flashcute/kernel_table.py")
    with tempfile.TemporaryDirectory() as out_dir, ThreadPoolExecutor(args.jobs) as pool:
        if args.logs:
            args.logs.mkdir(parents=True, exist_ok=True)
        logs = list(pool.map(lambda c: ptxas_log(*c, args.nvcc, out_dir, args.logs), todo))
    found = ptxas.parse_log("\n".join(logs))
    print(f'MEASURED_WITH = "{provenance(args.nvcc)}"\n')
    print(ptxas.measured_source(found))
    problems = ptxas.check(found)
    print("\n" + ("\n".join(["differs from flashcute/explain/ptxas.py:", *problems]) if problems else
                  "equal to flashcute/explain/ptxas.py"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
