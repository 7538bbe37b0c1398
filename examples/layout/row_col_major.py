"""Row-major vs column-major: the same 4x8 matrix, two layouts, two memory orders.

    python examples/layout/row_col_major.py [OUT_DIR]    (default: a new temporary folder)
"""

from flashcute.layout import Int, Layout, LayoutRight, draw_layout, draw_memory, print_layout

from _output import output_dir  # examples/layout/_output.py: a script's folder is on sys.path


def main(out):
    col_major = Layout((Int(4), Int(8)))                  # (4,8):(1,4), CuTe's default (LayoutLeft)
    row_major = Layout((Int(4), Int(8)), LayoutRight)     # (4,8):(8,1)
    for name, layout in (("col_major", col_major), ("row_major", row_major)):
        print_layout(layout)
        for ext in ("png", "svg"):
            draw_layout(layout, out / f"{name}.{ext}", title=f"{name.replace('_', '-')}  {layout}")
            draw_memory(layout, out / f"{name}_memory.{ext}")
    print(f"pictures in {out}")


if __name__ == "__main__":
    main(output_dir(__doc__))
