"""flashcute.layout at interactive speed: bulk evaluation, bank reports, TV layouts, pictures.

    python benchmarks/bench_layout.py [--repeat N]

Prints one row per task: what it does, its size, the best time of N runs and the throughput.
"""

import argparse
import time

import numpy as np

from flashcute.layout import (
    Int, Layout, LayoutRight, Swizzle, composition, copy_atom, copy_report, draw_mma, make_tiled_copy,
    make_tiled_copy_A, make_tiled_mma, mma_atom, parse_layout, sm80_swizzle_atom, tile_to_shape,
    traversal_report,
)


def _best(fn, repeat):
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def tasks():
    # a 1024x1024 row-major matrix viewed as (8x128 rows) x (16x64 columns)
    million = Layout(((Int(8), Int(128)), (Int(16), Int(64))), ((Int(1024), Int(8192)), (Int(1), Int(16))))
    swizzled_million = composition(Swizzle(3, 3, 3), Layout((Int(1024), Int(1024)), LayoutRight))
    smem_256 = Layout((Int(256), Int(256)), LayoutRight)
    smem_256_sw = composition(Swizzle(5, 0, 8), smem_256)
    fa2 = make_tiled_mma(mma_atom("SM80_16x8x16_F32BF16BF16F32_TN"), Layout((Int(4), Int(1), Int(1))),
                         (Int(64), Int(16), Int(16)))
    s2r = make_tiled_copy_A(copy_atom("SM75_U32x4_LDSM_N", "bfloat16_t"), fa2)
    g2s = make_tiled_copy(copy_atom("SM80_CP_ASYNC_CACHEGLOBAL<uint128_t>", "bfloat16_t"),
                          Layout((Int(16), Int(8)), (Int(8), Int(1))), Layout((Int(1), Int(8))))
    smem_kv = tile_to_shape(sm80_swizzle_atom(64, 16, 8), (Int(128), Int(128)))
    return [
        ("offsets of a 1M-element hierarchical layout", 1 << 20, "elements", lambda: million.offsets()),
        ("offsets of a 1M-element swizzled layout", 1 << 20, "elements", lambda: swizzled_million.offsets()),
        ("evaluate 10k coordinates one by one", 10_000, "calls",
         lambda: [million(i) for i in range(0, 10_000 * 97, 97)]),
        ("bank report: warps sweep 256x256 floats by column", 256 * 256 // 32, "instructions",
         lambda: traversal_report(smem_256, 4, 32, "col")),
        ("bank report: same, swizzled Sw<5,0,8>", 256 * 256 // 32, "instructions",
         lambda: traversal_report(smem_256_sw, 4, 32, "col")),
        ("bank report: ldmatrix A, 128x128 bf16 Sw<3,3,3>", None, "instructions", lambda: copy_report(s2r, smem_kv)),
        ("bank report: cp.async 16B, 128x128 bf16 Sw<3,3,3>", None, "instructions", lambda: copy_report(g2s, smem_kv)),
        ("TiledMMA A/B/C TV layouts (FA2 64x16x16)", 3, "layouts",
         lambda: (fa2.get_layoutA_TV(), fa2.get_layoutB_TV(), fa2.get_layoutC_TV())),
        ("parse + print 100 layouts", 100, "layouts",
         lambda: [str(parse_layout("((_4,_8),(_2,_2,_2)):((_32,_1),(_16,_8,_128))")) for _ in range(100)]),
        ("draw the SM80 16x8x16 atom (no file)", 1, "pictures",
         lambda: draw_mma(mma_atom("SM80_16x8x16_F32BF16BF16F32_TN"))),
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"{'task':<52} {'size':>10} {'best (ms)':>10} {'throughput':>24}")
    for name, count, unit, fn in tasks():
        result = fn()
        if count is None:   # bank reports know their own size
            count = result.instructions
        t = _best(fn, args.repeat)
        rate = count / t if t > 0 else float("inf")
        print(f"{name:<52} {count:>10} {t * 1e3:>10.2f} {rate:>14.3g} {unit}/s")
    # sanity: both million-element layouts are permutations of 0..2^20-1
    for _name, _count, _unit, fn in tasks()[:2]:
        assert np.array_equal(np.sort(fn()), np.arange(1 << 20))


if __name__ == "__main__":
    main()
