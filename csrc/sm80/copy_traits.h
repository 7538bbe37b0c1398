// What the SM80 forward and backward kernels share, for an element type, a head dim and a thread count: the
// mma.sync atom, the swizzled shared-memory row atom, and the 128-bit copies between the memories.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/numeric_types.h>

namespace flashcute::sm80 {

using namespace cute;

template <typename Element, int kHeadDim, int kNThreads>
struct CopyTraits {
  static_assert(cute::is_same_v<Element, cutlass::half_t> || cute::is_same_v<Element, cutlass::bfloat16_t>);

  using MmaOp = cute::conditional_t<cute::is_same_v<Element, cutlass::half_t>,
                                    SM80_16x8x16_F32F16F16F32_TN, SM80_16x8x16_F32BF16BF16F32_TN>;

  // Shared memory: rows of kBlockKSmem 16-bit elements (64 = 128 B, or 32 = 64 B when the head dim is not a
  // multiple of 64), XOR-swizzled in 16-byte units so that both the 128-bit cp.async writes (8 threads per
  // row) and the ldmatrix reads (8 rows of 16 B per phase), transposed or not, hit 8 distinct bank groups.
  static constexpr int kBlockKSmem = kHeadDim % 64 == 0 ? 64 : 32;
  static constexpr int kSwizzleBits = kBlockKSmem == 64 ? 3 : 2;
  using SmemLayoutAtom = decltype(composition(
      Swizzle<kSwizzleBits, 3, 3>{},
      Layout<Shape<_8, Int<kBlockKSmem>>, Stride<Int<kBlockKSmem>, _1>>{}));

  // smem -> registers; registers -> smem (vectorises to the accumulators' 2-element runs).
  using SmemCopyAtom = Copy_Atom<SM75_U32x4_LDSM_N, Element>;
  using SmemCopyAtomTransposed = Copy_Atom<SM75_U16x8_LDSM_T, Element>;
  using SmemCopyAtomStore = Copy_Atom<AutoVectorizingCopyWithAssumedAlignment<128>, Element>;

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
  // 128-bit synchronous copies, e.g. out of a swizzled staging buffer into global memory.
  using GmemTiledCopy = decltype(make_tiled_copy(
      Copy_Atom<UniversalCopy<uint128_t>, Element>{}, GmemLayoutAtom{},
      Layout<Shape<_1, Int<kGmemElemsPerLoad>>>{}));
};

}  // namespace flashcute::sm80
