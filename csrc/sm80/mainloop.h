// SM80 mainloop stages: predicated cp.async tile loads and the two tensor-core gemms with their
// shared-memory -> register (ldmatrix) copies software-pipelined one k-slice ahead of the mma.sync.
#pragma once

#include <cute/tensor.hpp>

namespace flashcute::sm80 {

using namespace cute;

struct Mainloop {
  // gmem -> smem tile copy; columns >= col_end and (with kCheckRows) rows >= row_end are zero-filled (cp.async
  // ZFILL), so ragged tails and head dims below the instantiated one read as zeros and never touch memory.
  // tXcX: the identity tensor partitioned like the source, giving each copy vector's (row, col).
  template <bool kCheckRows, class TiledCopy, class TensorG, class TensorS, class TensorC>
  __device__ static void load_tile(TiledCopy const& tiled_copy, TensorG const& tXgX, TensorS& tXsX,
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
  __device__ static void gemm_ss(TensorAcc& acc, TensorRA& tCrA, TensorRB& tCrB, TensorSA const& tCsA,
                                 TensorSB const& tCsB, TiledMma const& tiled_mma,
                                 TiledCopyA const& copy_a, TiledCopyB const& copy_b,
                                 ThrCopyA const& thr_copy_a, ThrCopyB const& thr_copy_b) {
    Tensor tCrA_view = thr_copy_a.retile_D(tCrA);
    Tensor tCrB_view = thr_copy_b.retile_D(tCrB);
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
  __device__ static void gemm_rs(TensorAcc& acc, TensorRA const& tCrA, TensorRB& tCrB, TensorSB const& tCsB,
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

  // The S accumulator ((2 cols, 2 rows), MMA_M, MMA_N) of m16n8k16 read as the A operand of the next
  // m16n8k16 ((2, 2, 2), MMA_M, MMA_N / 2): two neighbouring n8 tiles form one k16 slice, so P feeds
  // P.V from registers without a trip through shared memory.
  template <class AccLayout>
  __device__ static constexpr auto acc_as_operand_a(AccLayout const& acc) {
    auto l = logical_divide(acc, Shape<Underscore, Underscore, _2>{});
    return make_layout(make_layout(get<0>(l), get<2, 0>(l)), get<1>(l), get<2, 1>(l));
  }
};

}  // namespace flashcute::sm80
