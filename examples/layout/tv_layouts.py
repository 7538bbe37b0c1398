"""Thread-value maps: the SM80 mma.sync atom, FlashAttention-2's TiledMMA, its ldmatrix copy, and a
Hopper GMMA accumulator -- each cell labelled with the thread and value that hold it.

    python examples/layout/tv_layouts.py [OUT_DIR]    (default: a new temporary folder)
"""

from flashcute.layout import (
    Int, Layout, copy_atom, draw_copy, draw_mma, draw_tv, make_tiled_copy, make_tiled_copy_A, make_tiled_copy_B,
    make_tiled_mma, mma_atom,
)

from _output import output_dir  # examples/layout/_output.py: a script's folder is on sys.path


def main(out):
    atom = mma_atom("SM80_16x8x16_F32BF16BF16F32_TN")
    fa2 = make_tiled_mma(atom, Layout((Int(4), Int(1), Int(1))), (Int(64), Int(16), Int(16)))
    print(fa2)
    gmma = make_tiled_mma(mma_atom("SM90_64x16x16_F32BF16BF16_SS"))
    gmem = make_tiled_copy(copy_atom("SM80_CP_ASYNC_CACHEGLOBAL<uint128_t>", "bfloat16_t"),
                           Layout((Int(16), Int(8)), (Int(8), Int(1))), Layout((Int(1), Int(8))))
    for ext in ("png", "svg"):
        draw_mma(atom, out / f"mma_sm80_16x8x16.{ext}")
        draw_mma(fa2, out / f"mma_fa2_64x16x16.{ext}")
        draw_copy(make_tiled_copy_A(copy_atom("SM75_U32x4_LDSM_N", "bfloat16_t"), fa2), out / f"ldmatrix_A.{ext}")
        draw_copy(make_tiled_copy_B(copy_atom("SM75_U16x8_LDSM_T", "bfloat16_t"), fa2), out / f"ldmatrix_T_B.{ext}")
        draw_copy(gmem, out / f"cp_async_16x8.{ext}")
        draw_tv(gmma.get_layoutC_TV(), (64, 16), out / f"gmma_64x16_C.{ext}",
                title="SM90 GMMA 64x16 accumulators: warp w of the warpgroup owns rows 16w..16w+15")
    print(f"pictures in {out}")


if __name__ == "__main__":
    main(output_dir(__doc__))
