"""The teaching scripts in examples/layout run and write their pictures (the quick ones; the
TV-map and FlashAttention-loop scripts draw thousands of labels and are left to be run by hand)."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flashcute.layout import size

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "layout"


def _load(name):
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))  # as when run as a script: its folder's _output.py is importable
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name, pictures", [
    ("row_col_major", ["col_major.png", "row_major_memory.svg"]),
    ("transpose", ["transpose_A.png", "transpose_At_memory.svg"]),
    ("hierarchical", ["hierarchical.png", "hierarchical_memory.svg"]),
    ("boundary_tile", ["boundary_tile.png", "boundary_tile.svg"]),
    ("local_tile_q", ["local_tile_q.png", "local_tile_q_rows.png"]),
])
def test_example_writes_its_pictures(tmp_path, capsys, name, pictures):
    _load(name).main(tmp_path)
    assert "pictures in" in capsys.readouterr().out
    for p in pictures:
        assert (tmp_path / p).stat().st_size > 1000, p


def test_bank_conflict_example_reports_hardware_counts(tmp_path, capsys, monkeypatch):
    module = _load("bank_conflicts")
    draw = module.draw_bank_map

    def draw_small_only(layout, *args, **kwargs):   # the 64x64 bank maps are slow to label
        if int(size(layout)) <= 256:
            draw(layout, *args, **kwargs)

    monkeypatch.setattr(module, "draw_bank_map", draw_small_only)
    module.main(tmp_path)
    out = capsys.readouterr().out
    assert "stride 8                   8         64      8        56     8-way" in out
    assert "stride 9 (padded)          8          8      8         0     1-way" in out
    assert "row-major 64x64           16        512     64       448     8-way" in out
    assert "Sw<3,3,3> atom            16         64     64         0     1-way" in out
    assert (tmp_path / "banks_column_stride8.png").is_file()


def test_examples_write_where_asked_else_to_a_new_temporary_folder(tmp_path):
    script = str(EXAMPLES / "row_col_major.py")
    cwd, tmp = tmp_path / "cwd", tmp_path / "tmp"
    cwd.mkdir()
    tmp.mkdir()
    run = dict(cwd=cwd, capture_output=True, text=True, timeout=300, env={**os.environ, "TMPDIR": str(tmp)})
    r = subprocess.run([sys.executable, script], **run)
    assert r.returncode == 0, r.stderr
    assert not list(cwd.iterdir())  # nothing in the current folder
    out = Path(r.stdout.strip().splitlines()[-1].removeprefix("pictures in "))
    assert out.parent == tmp and (out / "col_major.png").is_file()
    r = subprocess.run([sys.executable, script, "pictures"], **run)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("pictures in pictures") and (cwd / "pictures" / "col_major.png").is_file()
