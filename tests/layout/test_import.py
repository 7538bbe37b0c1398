"""flashcute.layout imports with numpy only (no torch, no GPU), and its modules import one another without cycles."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "flashcute" / "layout"

# torch made unimportable, as if it were not installed
PROBE = """
import importlib.abc, sys

class NoTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r}")

sys.meta_path.insert(0, NoTorch())
import flashcute.layout as fl
loaded = sorted(m for m in sys.modules if m.startswith("flashcute") and not m.startswith("flashcute.layout"))
assert loaded == ["flashcute"], loaded
assert "torch" not in sys.modules
assert "matplotlib.pyplot" not in sys.modules
print(fl.Layout((fl.Int(4), 2)))
"""


def _run(code):
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_import_does_not_load_torch():
    r = _run("import flashcute.layout, sys; assert 'torch' not in sys.modules")
    assert r.returncode == 0, r.stderr


def test_import_without_torch_installed():
    r = _run(PROBE)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "(_4,2):(_1,_4)"


def _imports(path):
    """(absolute modules, modules of this package) that ``path`` imports, wherever the import statement is."""
    absolute, relative = set(), set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            absolute.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            absolute.add(node.module.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.level == 1:
            relative.update([node.module.split(".")[0]] if node.module else [a.name for a in node.names])
    return absolute, relative


def test_no_module_of_the_package_imports_torch():
    users = [p.name for p in PACKAGE.glob("*.py") if "torch" in _imports(p)[0]]
    assert not users, f"these flashcute.layout modules import torch: {users}"


def test_the_modules_import_each_other_without_cycles():
    graph = {p.stem: _imports(p)[1] for p in PACKAGE.glob("*.py") if p.stem not in ("__init__", "__main__")}
    done, path = set(), []

    def visit(module):
        assert module not in path, "import cycle: " + " -> ".join(path[path.index(module):] + [module])
        if module in done:
            return
        path.append(module)
        for dep in sorted(graph[module]):
            visit(dep)
        path.pop()
        done.add(module)

    for module in sorted(graph):
        visit(module)
    assert graph["int_tuple"] == set() and graph["swizzle"] == {"int_tuple"}
