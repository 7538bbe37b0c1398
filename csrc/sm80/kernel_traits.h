// SM80 forward kernel configuration: every layout and atom the kernel uses, named once.
// Tiles: a CTA owns kBlockM query rows of one (batch, head) and walks K/V in blocks of kBlockN rows;
// the head dim is instantiated at kHeadDim (callers with smaller head dims are predicated, not padded).
// kKeySlices > 1 (the decode kernel's few-row tile): the warps split each K/V block's keys into that many
// slices instead of only stacking along M, each slice with its own softmax state, merged at the end.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/numeric_types.h>

#include "instantiations/kernel_table.h"
#include "sm80/copy_traits.h"

namespace flashcute::sm80 {

using namespace cute;

template <typename Element_, int kHeadDim_, int kBlockM_, int kBlockN_, int kNWarps_, int kSoftmaxPartsNonCausal_ = 4,
          int kSoftmaxPartsCausal_ = 4, int kKeySlices_ = 1>
struct KernelTraits : CopyTraits<Element_, kHeadDim_, kNWarps_ * 32> {
  using Base = CopyTraits<Element_, kHeadDim_, kNWarps_ * 32>;
  using Element = Element_;

  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kNWarps = kNWarps_;
  static constexpr int kNThreads = kNWarps * 32;
  using TileShape_MNK = Shape<Int<kBlockM>, Int<kBlockN>, Int<kHeadDim>>;
  static constexpr int kKeySlices = kKeySlices_;
  static constexpr int kWarpsM = kNWarps / kKeySlices;  // the warps of one key slice, stacked along M
  static constexpr int kMmaThreads = kWarpsM * 32;
  static constexpr int kBlockNSlice = kBlockN / kKeySlices;
  static_assert(kNWarps % kKeySlices == 0 && kBlockN % (16 * kKeySlices) == 0 && kBlockM % (16 * kWarpsM) == 0);
  // What one key slice's warps compute: S = Q.K^T over (kBlockM, kBlockNSlice) and O over (kBlockM, kHeadDim).
  using SliceTileShape_MNK = Shape<Int<kBlockM>, Int<kBlockNSlice>, Int<kHeadDim>>;
  // Partial results per row in the softmax's max and sum (common/utils.h row_reduce), per mask kind.
  static constexpr int kSoftmaxPartsNonCausal = kSoftmaxPartsNonCausal_;
  static constexpr int kSoftmaxPartsCausal = kSoftmaxPartsCausal_;

  // Tensor cores: a key slice's warps stacked along M, each warp owning 16-row slabs of the Q block.
  using TiledMma = TiledMMA<MMA_Atom<typename Base::MmaOp>, Layout<Shape<Int<kWarpsM>, _1, _1>>,
                            Tile<Int<16 * kWarpsM>, _16, _16>>;

  // Shared memory (Base::SmemLayoutAtom rows): Q, one K and one V block.
  using typename Base::SmemLayoutAtom;
  using SmemLayoutQ = decltype(tile_to_shape(SmemLayoutAtom{}, Shape<Int<kBlockM>, Int<kHeadDim>>{}));
  using SmemLayoutKV = decltype(tile_to_shape(SmemLayoutAtom{}, Shape<Int<kBlockN>, Int<kHeadDim>>{}));
  // V seen as (head_dim, kBlockN): the B operand of O = P.V, read with transposing ldmatrix.
  using SmemLayoutVt = decltype(composition(
      SmemLayoutKV{}, make_layout(Shape<Int<kHeadDim>, Int<kBlockN>>{}, GenRowMajor{})));
  using SmemLayoutVtNoSwizzle = decltype(get_nonswizzle_portion(SmemLayoutVt{}));
  using SmemLayoutO = SmemLayoutQ;  // O is staged in Q's buffer, free by then

  // O: registers -> smem -> gmem.
  using SmemCopyAtomO = typename Base::SmemCopyAtomStore;
  using GmemTiledCopyO = typename Base::GmemTiledCopy;

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

// The decode kernel's configurations of a head dim, from its DecodeTile row of flashcute/kernel_table.py: `type`
// stacks the warps along M (kBlockM rows); `KeySplit` serves up to kKeySplitBlockM rows (a decoding step's few
// queries times the GQA group) with one 16-row slab per key slice, the warps splitting each K/V block's keys.
template <typename Element, int kHeadDim>
struct DecodeTraits {
  using Tile = DecodeTile<kHeadDim>;
  static_assert(Tile::kShipped, "no SM80 decode tile for this head dim in flashcute/kernel_table.py");
  using type = KernelTraits<Element, kHeadDim, Tile::kBlockM, Tile::kBlockN, Tile::kNWarps>;
  using KeySplit = KernelTraits<Element, kHeadDim, Tile::kKeySplitBlockM, Tile::kKeySplitBlockN, Tile::kNWarps, 4, 4,
                                Tile::kKeySplitSlices>;
};

}  // namespace flashcute::sm80
