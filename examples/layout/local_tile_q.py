"""local_tile of Q (seqlen 2048, head dim 64) into 128-row tiles, as a FlashAttention kernel does.

    gQ = local_tile(mQ, make_shape(kBlockM, kHeadDim), make_coord(m_block, 0))   // one CTA's tile
    gQ = local_tile(mQ, make_shape(kBlockM, kHeadDim), make_coord(_, 0))         // all tiles, mode 2 = m_block

    python examples/layout/local_tile_q.py [OUT_DIR]    (default: a new temporary folder)
"""

from flashcute.layout import Int, Layout, LayoutRight, _, draw_layout, draw_tiling, local_tile, make_tensor

from _output import output_dir  # examples/layout/_output.py: a script's folder is on sys.path


def main(out):
    seqlen, head_dim, block_m = 2048, 64, 128
    mQ = make_tensor(None, Layout((seqlen, head_dim), LayoutRight))     # row-major Q of one head
    tile = (Int(block_m), Int(head_dim))
    gQ = local_tile(mQ, tile, (5, 0))
    print(f"mQ                     = {mQ.layout}")
    print(f"local_tile(mQ, tile, (5, 0)) = {gQ.layout}  starting at element {gQ.offset} (row {gQ.offset // head_dim})")
    all_tiles = local_tile(mQ, tile, (_, 0))
    print(f"local_tile(mQ, tile, (_, 0)) = {all_tiles.layout}  (last mode: {seqlen // block_m} tiles)")
    for ext in ("png", "svg"):
        draw_tiling((seqlen, head_dim), (block_m, head_dim), out / f"local_tile_q.{ext}", names=("query", "dim"))
    # one tile, rows subsampled to stay readable: offsets of gQ rows 0..7 (of 128)
    first_rows = Layout((Int(8), Int(head_dim)), LayoutRight)
    draw_layout(first_rows, out / "local_tile_q_rows.png",
                title=f"rows 0..7 of gQ(m_block=5) = offsets {gQ.offset} + {first_rows}")
    print(f"pictures in {out}")


if __name__ == "__main__":
    main(output_dir(__doc__))
