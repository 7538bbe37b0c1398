"""flashcute.layout imports with numpy only: no torch, no GPU, none of flashcute's torch parts."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import sys
sys.modules["torch"] = None  # make `import torch` fail as if torch were not installed
import flashcute.layout as fl
loaded = sorted(m for m in sys.modules if m.startswith("flashcute") and not m.startswith("flashcute.layout"))
assert loaded == ["flashcute"], loaded
assert sys.modules.get("torch") is None
assert "matplotlib.pyplot" not in sys.modules
print(fl.Layout((fl.Int(4), 2)))
"""


def test_import_without_torch():
    r = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "(_4,2):(_1,_4)"
