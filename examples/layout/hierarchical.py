"""The hierarchical layout (4,(2,4)):(2,(1,8)): column index j = (j0, j1) with j0 < 2, j1 < 4.

    python examples/layout/hierarchical.py [OUT_DIR]    (default: a new temporary folder)
"""

from flashcute.layout import draw_layout, draw_memory, idx2crd, parse_layout, print_layout, shape

from _output import output_dir  # examples/layout/_output.py: a script's folder is on sys.path


def main(out):
    layout = parse_layout("(4,(2,4)):(2,(1,8))")
    print_layout(layout)
    for j in range(8):
        print(f"column {j} = coordinate {idx2crd(j, shape(layout, 1))}: offsets {[layout(i, j) for i in range(4)]}")
    for ext in ("png", "svg"):
        draw_layout(layout, out / f"hierarchical.{ext}")
        draw_memory(layout, out / f"hierarchical_memory.{ext}")
    print(f"pictures in {out}")


if __name__ == "__main__":
    main(output_dir(__doc__))
