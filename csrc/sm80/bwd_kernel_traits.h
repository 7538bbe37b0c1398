// SM80 backward kernel configuration: every layout and atom the backward kernels use, named once.
// Tiles: a CTA owns kBlockN key/value rows of one (batch, query head) and walks the Q/dO blocks of kBlockM rows
// that see them, accumulating dK and dV in registers and adding each Q block's share of dQ to a float32
// accumulator in global memory.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/numeric_types.h>

#include "common/params.h"
#include "instantiations/kernel_table.h"
#include "sm80/copy_traits.h"

namespace flashcute::sm80 {

using namespace cute;

template <typename Element_, int kHeadDim_, int kBlockM_, int kBlockN_, int kNWarps_, int kAtomLayoutMSdP,
          int kAtomLayoutNdKV, int kAtomLayoutMdQ>
struct BwdKernelTraits : CopyTraits<Element_, kHeadDim_, kNWarps_ * 32> {
  using Base = CopyTraits<Element_, kHeadDim_, kNWarps_ * 32>;
  using Element = Element_;

  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kNWarps = kNWarps_;
  static constexpr int kNThreads = kNWarps * 32;
  // dQ's accumulator order (sm80/gmem.h accum_block): one group, one element per run.
  static constexpr int kdQAccumGroupThreads = kNThreads;
  static constexpr int kdQAccumVec = 1;
  static constexpr bool kdKVTransposed = false;           // dK and dV accumulate as (keys, head dim)
  static_assert(kBlockM >= kBwdSemaphoreRows && kBlockN >= kBwdSemaphoreRows);  // the semaphores' row blocks
  using TileShape_MNK = Shape<Int<kBlockM>, Int<kBlockN>, Int<kHeadDim>>;

  // Tensor cores: three gemm shapes, each with its own warp arrangement (kAtomLayout* warps along the first
  // mode, the rest along the second) and 16 columns per warp, so B operands load with 4-matrix ldmatrix:
  //   S = Q.K^T and dP = dO.V^T   (BLK_M, BLK_N)
  //   dV += P^T.dO and dK += dS^T.Q  (BLK_N, D)
  //   dQ = dS.K                    (BLK_M, D)
  template <int kAtomLayout>
  using WarpTiledMma = TiledMMA<MMA_Atom<typename Base::MmaOp>, Layout<Shape<Int<kAtomLayout>, Int<kNWarps / kAtomLayout>, _1>>,
                                Tile<Int<16 * kAtomLayout>, Int<16 * kNWarps / kAtomLayout>, _16>>;
  using TiledMmaSdP = WarpTiledMma<kAtomLayoutMSdP>;
  using TiledMmadKV = WarpTiledMma<kAtomLayoutNdKV>;
  using TiledMmadQ = WarpTiledMma<kAtomLayoutMdQ>;

  // Shared memory (Base::SmemLayoutAtom rows, as the forward's).
  using typename Base::SmemLayoutAtom;
  // Q and dO: (BLK_M, D) per stage; two stages, so block m + 1 loads while block m computes.
  static constexpr int kStages = 2;
  using SmemLayoutQdO = decltype(tile_to_shape(SmemLayoutAtom{}, Shape<Int<kBlockM>, Int<kHeadDim>>{}));
  using SmemLayoutKV = decltype(tile_to_shape(SmemLayoutAtom{}, Shape<Int<kBlockN>, Int<kHeadDim>>{}));
  // P and dS: (BLK_M, BLK_N), written from the S/dP accumulators, read as gemm operands.
  static constexpr int kBlockKSmemPdS = kBlockN % 64 == 0 ? 64 : 32;
  using SmemLayoutPdS = decltype(tile_to_shape(
      composition(Swizzle<kBlockKSmemPdS == 64 ? 3 : 2, 3, 3>{},
                  Layout<Shape<_8, Int<kBlockKSmemPdS>>, Stride<Int<kBlockKSmemPdS>, _1>>{}),
      Shape<Int<kBlockM>, Int<kBlockN>>{}));

  // Transposed views of the same bytes, for the gemms that take an operand along its other mode:
  // Q^T, dO^T (D, BLK_M); K^T (D, BLK_N); P^T, dS^T (BLK_N, BLK_M). Read with transposing ldmatrix.
  template <class Layout, int kRows, int kCols>
  using Transposed = decltype(composition(Layout{}, make_layout(Shape<Int<kRows>, Int<kCols>>{}, GenRowMajor{})));
  using SmemLayoutQdOt = Transposed<SmemLayoutQdO, kHeadDim, kBlockM>;
  using SmemLayoutKt = Transposed<SmemLayoutKV, kHeadDim, kBlockN>;
  using SmemLayoutPdSt = Transposed<SmemLayoutPdS, kBlockN, kBlockM>;
  // Their unswizzled forms give the register fragments' shapes.
  using SmemLayoutQdOtNoSwizzle = decltype(get_nonswizzle_portion(SmemLayoutQdOt{}));
  using SmemLayoutKtNoSwizzle = decltype(get_nonswizzle_portion(SmemLayoutKt{}));
  using SmemLayoutPdStNoSwizzle = decltype(get_nonswizzle_portion(SmemLayoutPdSt{}));

  // Q and dO (two stages each), K, V, P, dS. dK and dV are staged in K's and V's buffers at the end.
  static constexpr int kSmemQdOElems = cosize_v<SmemLayoutQdO>;
  static constexpr int kSmemKVElems = cosize_v<SmemLayoutKV>;
  static constexpr int kSmemPdSElems = cosize_v<SmemLayoutPdS>;
  static constexpr int kSmemBytes =
      (2 * kStages * kSmemQdOElems + 2 * kSmemKVElems + 2 * kSmemPdSElems) * sizeof(Element);
};

// The shipped configuration of a head dim: its row of flashcute/kernel_table.py (instantiations/kernel_table.h).
template <typename Element, int kHeadDim>
struct DefaultBwdTraits {
  using Tile = BwdTile<kHeadDim>;
  static_assert(Tile::kShipped, "no SM80 backward tile for this head dim in flashcute/kernel_table.py");
  using type = BwdKernelTraits<Element, kHeadDim, Tile::kBlockM, Tile::kBlockN, Tile::kNWarps, Tile::kAtomLayoutMSdP,
                               Tile::kAtomLayoutNdKV, Tile::kAtomLayoutMdQ>;
};

}  // namespace flashcute::sm80
