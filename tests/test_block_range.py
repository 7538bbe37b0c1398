"""The block ranges (csrc/common/block_range.h), walked on the host: the K/V blocks visiting each Q block are
exactly the prefix kv_blocks_visiting gives, which the SM90 backward's deterministic mode waits on (a wrong count
would hang it); the decode kernel's uniform splits and its equal shares of the sequences' K/V blocks cover them
once, with distinct partial slots that the combine reads, each masking what its sequence masks (and floor_div is
exact); the turns of the
deterministic non-causal mode's rotated walks count the blocks ahead at each Q block exactly.
tests/block_range/visitors.cpp includes the kernels' header; built with g++."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.layout import oracle  # noqa: E402

PROGRAM = ROOT / "tests" / "block_range" / "visitors.cpp"
HEADERS = [ROOT / "csrc" / "common" / "block_range.h", ROOT / "csrc" / "common" / "params.h",
           ROOT / "csrc" / "common" / "seqlen.h"]


def test_block_ranges_and_deterministic_turns():
    binary = oracle.build_file_or_fail(PROGRAM, [ROOT / "csrc"], HEADERS)
    r = subprocess.run([str(binary)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert r.stdout.strip().endswith("checked 9124")
