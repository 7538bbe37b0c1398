// SM80 backward kernel configuration: every layout and atom the backward kernels use, named once.
// Tiles: a CTA owns kBlockN key/value rows of one (batch, query head) and walks the Q/dO blocks of kBlockM rows
// that see them, accumulating dK and dV in registers and adding each Q block's share of dQ to a float32
// accumulator in global memory.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/numeric_types.h>

#include "common/params.h"
#include "instantiations/kernel_table.h"

namespace flashcute::sm80 {

using namespace cute;

template <typename Element_, int kHeadDim_, int kBlockM_, int kBlockN_, int kNWarps_, int kAtomLayoutMSdP,
          int kAtomLayoutNdKV, int kAtomLayoutMdQ>
struct BwdKernelTraits {
  using Element = Element_;
  static_assert(cute::is_same_v<Element, cutlass::half_t> || cute::is_same_v<Element, cutlass::bfloat16_t>);

  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kNWarps = kNWarps_;
  static constexpr int kNThreads = kNWarps * 32;
  static_assert(kBlockM >= kBwdSemaphoreRows && kBlockN >= kBwdSemaphoreRows);  // the semaphores' row blocks
  using TileShape_MNK = Shape<Int<kBlockM>, Int<kBlockN>, Int<kHeadDim>>;

  // Tensor cores: three gemm shapes, each with its own warp arrangement (kAtomLayout* warps along the first
  // mode, the rest along the second) and 16 columns per warp, so B operands load with 4-matrix ldmatrix:
  //   S = Q.K^T and dP = dO.V^T   (BLK_M, BLK_N)
  //   dV += P^T.dO and dK += dS^T.Q  (BLK_N, D)
  //   dQ = dS.K                    (BLK_M, D)
  using MmaOp = cute::conditional_t<cute::is_same_v<Element, cutlass::half_t>,
                                    SM80_16x8x16_F32F16F16F32_TN, SM80_16x8x16_F32BF16BF16F32_TN>;
  template <int kAtomLayout>
  using WarpTiledMma = TiledMMA<MMA_Atom<MmaOp>, Layout<Shape<Int<kAtomLayout>, Int<kNWarps / kAtomLayout>, _1>>,
                                Tile<Int<16 * kAtomLayout>, Int<16 * kNWarps / kAtomLayout>, _16>>;
  using TiledMmaSdP = WarpTiledMma<kAtomLayoutMSdP>;
  using TiledMmadKV = WarpTiledMma<kAtomLayoutNdKV>;
  using TiledMmadQ = WarpTiledMma<kAtomLayoutMdQ>;

  // Shared memory rows of kBlockKSmem 16-bit elements, XOR-swizzled in 16-byte units as in the forward
  // (kernel_traits.h): conflict-free for 128-bit cp.async writes and for ldmatrix reads, transposed or not.
  static constexpr int kBlockKSmem = kHeadDim % 64 == 0 ? 64 : 32;
  static constexpr int kSwizzleBits = kBlockKSmem == 64 ? 3 : 2;
  using SmemLayoutAtom = decltype(composition(
      Swizzle<kSwizzleBits, 3, 3>{},
      Layout<Shape<_8, Int<kBlockKSmem>>, Stride<Int<kBlockKSmem>, _1>>{}));
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

  // smem -> registers, and registers -> smem for P, dS and the dK/dV staging (2-element accumulator runs).
  using SmemCopyAtom = Copy_Atom<SM75_U32x4_LDSM_N, Element>;
  using SmemCopyAtomTransposed = Copy_Atom<SM75_U16x8_LDSM_T, Element>;
  using SmemCopyAtomStore = Copy_Atom<AutoVectorizingCopyWithAssumedAlignment<128>, Element>;

  // gmem -> smem: 128-bit cp.async as the forward's (ZFILL past the sequence and the head dim).
  static constexpr int kGmemElemsPerLoad = sizeof(uint128_t) / sizeof(Element);
  static constexpr int kGmemThreadsPerRow = kBlockKSmem / kGmemElemsPerLoad;
  static_assert(kNThreads % kGmemThreadsPerRow == 0);
  using GmemLayoutAtom = Layout<Shape<Int<kNThreads / kGmemThreadsPerRow>, Int<kGmemThreadsPerRow>>,
                                Stride<Int<kGmemThreadsPerRow>, _1>>;
  using GmemTiledCopyQKV = decltype(make_tiled_copy(
      Copy_Atom<SM80_CP_ASYNC_CACHEGLOBAL_ZFILL<uint128_t>, Element>{}, GmemLayoutAtom{},
      Layout<Shape<_1, Int<kGmemElemsPerLoad>>>{}));
  // 128-bit synchronous copies: dO and O into registers (the preprocess), gradients out of a staging buffer.
  using GmemTiledCopy = decltype(make_tiled_copy(
      Copy_Atom<UniversalCopy<uint128_t>, Element>{}, GmemLayoutAtom{},
      Layout<Shape<_1, Int<kGmemElemsPerLoad>>>{}));
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
