"""Padding vs swizzle against shared-memory bank conflicts, as the hardware counts them.

1. A warp reads one column of a 32x8 float tile (32-bit loads): row stride 8 puts the column in
   4 banks (8-way conflict); padding the row to 9 floats or XOR-swizzling (Sw<3,0,5>) spreads it
   over all 32 banks.
2. ldmatrix.x4 feeding an SM80 MMA from a 64x64 bf16 tile (FlashAttention-2's K/V tile): rows of
   128 bytes put the 8 rows of each 8x8 matrix in the same 4 banks (8-way); padding rows to 72
   elements or CuTe's Sw<3,3,3> swizzle atom removes the conflicts.

    python examples/layout/bank_conflicts.py [OUT_DIR]    (default: a new temporary folder)
"""

from flashcute.layout import (
    Int, Layout, LayoutRight, Swizzle, composition, copy_atom, copy_report, draw_bank_map, make_tiled_copy_A,
    make_tiled_mma, mma_atom, sm80_swizzle_atom, tile_to_shape, traversal_report,
)

from _output import output_dir  # examples/layout/_output.py: a script's folder is on sys.path


def column_reads():
    rows, cols = Int(32), Int(8)
    return {
        "stride8": ("stride 8", Layout((rows, cols), (Int(8), Int(1)))),
        "stride9": ("stride 9 (padded)", Layout((rows, cols), (Int(9), Int(1)))),
        "swizzle": ("Sw<3,0,5> swizzle", composition(Swizzle(3, 0, 5), Layout((rows, cols), (Int(8), Int(1))))),
    }


def ldmatrix_tiles():
    shape = (Int(64), Int(64))
    return {
        "rowmajor": ("row-major 64x64", Layout(shape, LayoutRight)),
        "padded": ("padded rows (72)", Layout(shape, (Int(72), Int(1)))),
        "swizzle": ("Sw<3,3,3> atom", tile_to_shape(sm80_swizzle_atom(64, 16, 8), shape)),
    }


def table(title, rows):
    print(title)
    print(f"  {'layout':<22} {'instr':>5} {'wavefronts':>10} {'ideal':>6} {'conflicts':>9} {'worst':>6}")
    for name, report in rows:
        wave, ideal, extra = report.total()
        print(f"  {name:<22} {report.instructions:>5} {wave:>10} {ideal:>6} {extra:>9} {int(report.degree.max()):>5}-way")


def main(out):
    results = []
    for key, (name, layout) in column_reads().items():
        report = traversal_report(layout, 4, bits=32, order="col")
        results.append((name, report))
        for ext in ("png", "svg"):
            draw_bank_map(layout, 4, out / f"banks_column_{key}.{ext}",
                          highlight=range(32),
                          title=f"{name}: {layout}\nwarp reads column 0 (outlined): "
                                f"{int(report.wavefronts[0])} wavefronts, {int(report.degree[0])}-way")
    table("A warp reads a column of a 32x8 float tile (32-bit loads):", results)

    mma = make_tiled_mma(mma_atom("SM80_16x8x16_F32BF16BF16F32_TN"), Layout((Int(4), Int(1), Int(1))),
                         (Int(64), Int(16), Int(16)))
    s2r = make_tiled_copy_A(copy_atom("SM75_U32x4_LDSM_N", "bfloat16_t"), mma)
    results = []
    for key, (name, layout) in ldmatrix_tiles().items():
        report = copy_report(s2r, layout)
        results.append((name, report))
        # the 8 elements of each 16-byte row instruction 0 names
        index = {int(o): k for k, o in enumerate(layout.offsets())}
        rows = [index[int(r) // 2 + e] for r in report.addresses[0] for e in range(8)]
        for ext in ("png", "svg"):
            draw_bank_map(layout, 2, out / f"banks_ldmatrix_{key}.{ext}", highlight=rows,
                          title=f"{name}: {layout}\nldmatrix.x4 rows of instruction 0 outlined: "
                                f"{int(report.wavefronts[0])} wavefronts, {int(report.degree[0])}-way")
    table("ldmatrix.x4 of the A operand (SM80 16x8x16, 4 warps) from a 64x64 bf16 tile:", results)
    print(f"pictures in {out}")


if __name__ == "__main__":
    main(output_dir(__doc__))
