// Masking of a block of scores: keys past seqlen_k (ragged last block) and, for causal attention, keys past
// the diagonal. Only the blocks that need it call this; the others run mask-free.
#pragma once

#include <climits>
#include <cmath>

#include "utils.h"

namespace flashcute {

// scores: (rows, cols) view of this thread's S accumulator; coords: the same view of the identity tensor
// partitioned like S, giving each element's (row, col) inside the block. row0/col0: the block's origin.
// Key j is visible to query i iff j < seqlen_k and (if kCausal) j <= i + causal_offset. group > 1: the rows are
// grouped query heads (the decode kernel's packing), row r being query r / group.
template <bool kCausal, class TensorS, class TensorC>
__device__ __forceinline__ void apply_mask(TensorS& scores, TensorC const& coords, int row0, int col0,
                                           int seqlen_k, int causal_offset, int group = 1) {
  static_assert(decltype(rank(scores))::value == 2);
  CUTE_UNROLL
  for (int mi = 0; mi < size<0>(scores); ++mi) {
    int const row = (row0 + get<0>(coords(mi, 0))) / group;
    int const col_end = kCausal ? min(seqlen_k, row + causal_offset + 1) : seqlen_k;
    CUTE_UNROLL
    for (int nj = 0; nj < size<1>(scores); ++nj) {
      if (col0 + get<1>(coords(mi, nj)) >= col_end) { scores(mi, nj) = -INFINITY; }
    }
  }
}

// The same for a block of transposed scores (keys along rows, queries along columns: the SM90 backward's S^T).
// key0/query0: the block's origin.
template <bool kCausal, class TensorS, class TensorC>
__device__ __forceinline__ void apply_mask_transposed(TensorS& scores, TensorC const& coords, int key0, int query0,
                                                      int seqlen_k, int causal_offset) {
  static_assert(decltype(rank(scores))::value == 2);
  CUTE_UNROLL
  for (int mi = 0; mi < size<0>(scores); ++mi) {
    int const key = key0 + get<0>(coords(mi, 0));
    // Query i sees this key iff key < seqlen_k and (causal) i >= key - causal_offset.
    int const query_begin = key >= seqlen_k ? INT_MAX : kCausal ? key - causal_offset : INT_MIN;
    CUTE_UNROLL
    for (int nj = 0; nj < size<1>(scores); ++nj) {
      if (query0 + get<1>(coords(mi, nj)) < query_begin) { scores(mi, nj) = -INFINITY; }
    }
  }
}

}  // namespace flashcute
