// The SM80 kernels' building blocks between memory and the tensor cores: predicated gmem -> smem tile loads
// (cp.async), and gemms whose shared-memory -> register copies (ldmatrix) run one k-slice ahead of the mma.sync.
// Shared by the forward and backward mainloops.
#pragma once

#include <cute/tensor.hpp>

namespace flashcute::sm80 {

using namespace cute;

// gmem -> smem tile copy; columns >= col_end and (with kCheckRows) rows >= row_end are zero-filled (cp.async
// ZFILL), so ragged tails and head dims below the instantiated one read as zeros and never touch memory.
// tXcX: the identity tensor partitioned like the source, giving each copy vector's (row, col).
template <bool kCheckRows, class TiledCopy, class TensorG, class TensorS, class TensorC>
__device__ inline void load_tile(TiledCopy const& tiled_copy, TensorG const& tXgX, TensorS& tXsX,
                                 TensorC const& tXcX, int row_end, int col_end) {
  CUTE_UNROLL
  for (int m = 0; m < size<1>(tXgX); ++m) {
    bool const row_ok = !kCheckRows || get<0>(tXcX(0, m, 0)) < row_end;
    CUTE_UNROLL
    for (int k = 0; k < size<2>(tXgX); ++k) {
      bool const ok = row_ok && get<1>(tXcX(0, m, k)) < col_end;
      copy(tiled_copy.with(ok), tXgX(_, m, k), tXsX(_, m, k));
    }
  }
}

// acc += A . B^T with both operands in shared memory.
template <class TensorAcc, class TensorRA, class TensorRB, class TensorSA, class TensorSB, class TiledMma,
          class TiledCopyA, class TiledCopyB, class ThrCopyA, class ThrCopyB>
__device__ inline void gemm_ss(TensorAcc& acc, TensorRA& tCrA, TensorRB& tCrB, TensorSA const& tCsA,
                               TensorSB const& tCsB, TiledMma const& tiled_mma,
                               TiledCopyA const& copy_a, TiledCopyB const& copy_b,
                               ThrCopyA const& thr_copy_a, ThrCopyB const& thr_copy_b) {
  Tensor tCrA_view = thr_copy_a.retile_D(tCrA);
  Tensor tCrB_view = thr_copy_b.retile_D(tCrB);
  CUTE_STATIC_ASSERT_V(size<1>(tCsA) == size<1>(tCrA_view));  // MMA_M: ldmatrix covers the fragment's rows
  CUTE_STATIC_ASSERT_V(size<1>(tCsB) == size<1>(tCrB_view));  // MMA_N
  CUTE_STATIC_ASSERT_V(size<2>(tCrA) == size<2>(tCrB));       // the k-slices of A and B pair up
  copy(copy_a, tCsA(_, _, 0), tCrA_view(_, _, 0));
  copy(copy_b, tCsB(_, _, 0), tCrB_view(_, _, 0));
  CUTE_UNROLL
  for (int k = 0; k < size<2>(tCrA); ++k) {
    if (k + 1 < size<2>(tCrA)) {
      copy(copy_a, tCsA(_, _, k + 1), tCrA_view(_, _, k + 1));
      copy(copy_b, tCsB(_, _, k + 1), tCrB_view(_, _, k + 1));
    }
    gemm(tiled_mma, tCrA(_, _, k), tCrB(_, _, k), acc);
  }
}

// acc += A . B^T with A already in registers (P, straight from the softmax) and B in shared memory.
template <class TensorAcc, class TensorRA, class TensorRB, class TensorSB, class TiledMma,
          class TiledCopyB, class ThrCopyB>
__device__ inline void gemm_rs(TensorAcc& acc, TensorRA const& tCrA, TensorRB& tCrB, TensorSB const& tCsB,
                               TiledMma const& tiled_mma, TiledCopyB const& copy_b,
                               ThrCopyB const& thr_copy_b) {
  Tensor tCrB_view = thr_copy_b.retile_D(tCrB);
  copy(copy_b, tCsB(_, _, 0), tCrB_view(_, _, 0));
  CUTE_UNROLL
  for (int k = 0; k < size<2>(tCrA); ++k) {
    if (k + 1 < size<2>(tCrA)) { copy(copy_b, tCsB(_, _, k + 1), tCrB_view(_, _, k + 1)); }
    gemm(tiled_mma, tCrA(_, _, k), tCrB(_, _, k), acc);
  }
}

}  // namespace flashcute::sm80
