"""Transpose by swapping strides: (4,8):(8,1) and (8,4):(1,8) are the same memory read two ways.

No data moves: the transposed view's element (j, i) is the original's (i, j).

    python examples/layout/transpose.py [OUT_DIR]    (default: a new temporary folder)
"""

import numpy as np

from flashcute.layout import Int, Layout, draw_layout, draw_memory, select
from flashcute.layout.draw import layout_grid

from _output import output_dir  # examples/layout/_output.py: a script's folder is on sys.path


def main(out):
    a = Layout((Int(4), Int(8)), (Int(8), Int(1)))
    at = select(a, 1, 0)                                   # swap the modes: (8,4):(1,8)
    assert (layout_grid(at) == layout_grid(a).T).all()
    print(f"A   = {a}\nA^T = {at}   (offsets of A^T are A's, transposed: {np.array_equal(layout_grid(at), layout_grid(a).T)})")
    for name, layout in (("transpose_A", a), ("transpose_At", at)):
        for ext in ("png", "svg"):
            draw_layout(layout, out / f"{name}.{ext}")
            draw_memory(layout, out / f"{name}_memory.{ext}")
    print(f"pictures in {out}")


if __name__ == "__main__":
    main(output_dir(__doc__))
