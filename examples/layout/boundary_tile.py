"""The ragged last tile: seqlen 2000 in 128-row tiles leaves 80 valid rows in tile 15.

Kernels predicate it with an identity tensor: cQ = local_tile(make_identity_tensor(shape), ...)
holds each element's (row, col); elem_less(cQ(i), shape) says whether it exists.

    python examples/layout/boundary_tile.py [OUT_DIR]    (default: a new temporary folder)
"""

from flashcute.layout import Int, draw_tiling, elem_less_mask, local_tile, make_identity_tensor

from _output import output_dir  # examples/layout/_output.py: a script's folder is on sys.path


def main(out):
    seqlen, head_dim, block_m = 2000, 64, 128
    cQ = make_identity_tensor((seqlen, head_dim))
    n_tiles = -(-seqlen // block_m)
    last = local_tile(cQ, (Int(block_m), Int(head_dim)), (n_tiles - 1, 0))
    valid = elem_less_mask(last, (seqlen, head_dim)).reshape(head_dim, block_m).T   # (row, col)
    rows = valid.all(axis=1)
    print(f"{n_tiles} tiles; the last starts at {tuple(int(c) for c in last.offset)}: "
          f"{int(rows.sum())} of {block_m} rows valid, rows {int(rows.sum())}..{block_m - 1} predicated off")
    assert int(rows.sum()) == seqlen - (n_tiles - 1) * block_m
    for ext in ("png", "svg"):
        draw_tiling((seqlen, head_dim), (block_m, head_dim), out / f"boundary_tile.{ext}", names=("query", "dim"))
    print(f"pictures in {out}")


if __name__ == "__main__":
    main(output_dir(__doc__))
