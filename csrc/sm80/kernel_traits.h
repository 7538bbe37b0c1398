// SM80 forward kernel configuration: every layout and atom the kernel uses, named once.
// Tiles: a CTA owns kBlockM query rows of one (batch, head) and walks K/V in blocks of kBlockN rows;
// the head dim is instantiated at kHeadDim (callers with smaller head dims are predicated, not padded).
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/numeric_types.h>

#include "instantiations/kernel_table.h"

namespace flashcute::sm80 {

using namespace cute;

template <typename Element_, int kHeadDim_, int kBlockM_, int kBlockN_, int kNWarps_, int kSoftmaxPartsNonCausal_ = 4,
          int kSoftmaxPartsCausal_ = 4>
struct KernelTraits {
  using Element = Element_;
  static_assert(cute::is_same_v<Element, cutlass::half_t> || cute::is_same_v<Element, cutlass::bfloat16_t>);

  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kNWarps = kNWarps_;
  static constexpr int kNThreads = kNWarps * 32;
  using TileShape_MNK = Shape<Int<kBlockM>, Int<kBlockN>, Int<kHeadDim>>;
  // Partial results per row in the softmax's max and sum (common/utils.h row_reduce), per mask kind.
  static constexpr int kSoftmaxPartsNonCausal = kSoftmaxPartsNonCausal_;
  static constexpr int kSoftmaxPartsCausal = kSoftmaxPartsCausal_;

  // Tensor cores: warps stacked along M, each warp owning 16-row slabs of the Q block.
  using MmaOp = cute::conditional_t<cute::is_same_v<Element, cutlass::half_t>,
                                    SM80_16x8x16_F32F16F16F32_TN, SM80_16x8x16_F32BF16BF16F32_TN>;
  using TiledMma = TiledMMA<MMA_Atom<MmaOp>, Layout<Shape<Int<kNWarps>, _1, _1>>,
                            Tile<Int<16 * kNWarps>, _16, _16>>;

  // Shared memory: rows of kBlockKSmem 16-bit elements (64 = 128 B, or 32 = 64 B when the head dim is not a
  // multiple of 64), XOR-swizzled in 16-byte units so that both the 128-bit cp.async writes (8 threads per
  // row) and the ldmatrix reads (8 rows of 16 B per phase) hit 8 distinct bank groups.
  static constexpr int kBlockKSmem = kHeadDim % 64 == 0 ? 64 : 32;
  static constexpr int kSwizzleBits = kBlockKSmem == 64 ? 3 : 2;
  using SmemLayoutAtom = decltype(composition(
      Swizzle<kSwizzleBits, 3, 3>{},
      Layout<Shape<_8, Int<kBlockKSmem>>, Stride<Int<kBlockKSmem>, _1>>{}));
  using SmemLayoutQ = decltype(tile_to_shape(SmemLayoutAtom{}, Shape<Int<kBlockM>, Int<kHeadDim>>{}));
  using SmemLayoutKV = decltype(tile_to_shape(SmemLayoutAtom{}, Shape<Int<kBlockN>, Int<kHeadDim>>{}));
  // V seen as (head_dim, kBlockN): the B operand of O = P.V, read with transposing ldmatrix.
  using SmemLayoutVt = decltype(composition(
      SmemLayoutKV{}, make_layout(Shape<Int<kHeadDim>, Int<kBlockN>>{}, GenRowMajor{})));
  using SmemLayoutVtNoSwizzle = decltype(get_nonswizzle_portion(SmemLayoutVt{}));
  using SmemLayoutO = SmemLayoutQ;  // O is staged in Q's buffer, free by then

  // smem -> registers.
  using SmemCopyAtom = Copy_Atom<SM75_U32x4_LDSM_N, Element>;
  using SmemCopyAtomTransposed = Copy_Atom<SM75_U16x8_LDSM_T, Element>;
  // registers -> smem for O (vectorises to the accumulator's 2-element runs).
  using SmemCopyAtomO = Copy_Atom<AutoVectorizingCopyWithAssumedAlignment<128>, Element>;

  // gmem -> smem: 128-bit cp.async, kGmemThreadsPerRow threads cover one kBlockKSmem-wide row chunk.
  // CACHEGLOBAL: K/V are streamed once per CTA, keep them out of L1. ZFILL: out-of-bounds rows/cols read 0.
  static constexpr int kGmemElemsPerLoad = sizeof(uint128_t) / sizeof(Element);
  static constexpr int kGmemThreadsPerRow = kBlockKSmem / kGmemElemsPerLoad;
  static_assert(kNThreads % kGmemThreadsPerRow == 0);
  using GmemLayoutAtom = Layout<Shape<Int<kNThreads / kGmemThreadsPerRow>, Int<kGmemThreadsPerRow>>,
                                Stride<Int<kGmemThreadsPerRow>, _1>>;
  using GmemTiledCopyQKV = decltype(make_tiled_copy(
      Copy_Atom<SM80_CP_ASYNC_CACHEGLOBAL_ZFILL<uint128_t>, Element>{}, GmemLayoutAtom{},
      Layout<Shape<_1, Int<kGmemElemsPerLoad>>>{}));
  // smem -> gmem for O: 128-bit loads from the swizzled staging buffer, 128-bit stores.
  using GmemTiledCopyO = decltype(make_tiled_copy(
      Copy_Atom<UniversalCopy<uint128_t>, Element>{}, GmemLayoutAtom{},
      Layout<Shape<_1, Int<kGmemElemsPerLoad>>>{}));

  // Q, then K and V (one buffer each: V(n) streams in during S(n), K(n-1) during P.V(n)).
  static constexpr int kSmemQElems = cosize_v<SmemLayoutQ>;
  static constexpr int kSmemKVElems = cosize_v<SmemLayoutKV>;
  static constexpr int kSmemBytes = (kSmemQElems + 2 * kSmemKVElems) * sizeof(Element);
};

// The shipped configuration of a head dim: its row of flashcute/kernel_table.py (instantiations/kernel_table.h).
template <typename Element, int kHeadDim>
struct DefaultTraits {
  using Tile = FwdTile<kHeadDim>;
  static_assert(Tile::kShipped, "no SM80 forward tile for this head dim in flashcute/kernel_table.py");
  using type = KernelTraits<Element, kHeadDim, Tile::kBlockM, Tile::kBlockN, Tile::kNWarps, Tile::kSoftmaxPartsNonCausal,
                            Tile::kSoftmaxPartsCausal>;
};

}  // namespace flashcute::sm80
