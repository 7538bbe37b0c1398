// Online softmax (FlashAttention-2): running row max and row sum in registers; each new block of scores
// rescales the output accumulator instead of revisiting earlier blocks. Scores arrive unscaled; the softmax
// scale is folded into exp2 (one FFMA per element).
#pragma once

#include <cmath>

#include "utils.h"

namespace flashcute {

// kNRows: rows of the accumulator this thread holds; kReduceParts: partial results per row in the max and
// sum reductions (row_reduce). kExactUnitCorrection: a row whose max did not grow gets a correction of
// exactly 1, so a caller may skip multiplying by it (the SM90 mainloop's kSkipUnchangedRescale); otherwise
// one FFMA, row_max * scale - max_scaled, which can leave the product's rounding residue (and which the
// register-bound SM80 kernels keep: the subtract-then-scale form costs them 80-100 bytes of spills).
template <int kNRows, int kReduceParts, bool kExactUnitCorrection = false>
struct OnlineSoftmax {
  Tensor<ArrayEngine<float, kNRows>, Layout<Shape<Int<kNRows>>>> row_max;
  Tensor<ArrayEngine<float, kNRows>, Layout<Shape<Int<kNRows>>>> row_sum;  // per thread until finalize()

  // scores, acc_o: (rows, cols) views of this thread's accumulators.
  // kFirst: first block for these rows; kCheckInf: the block may have rows with every key masked.
  template <bool kFirst, bool kCheckInf, class TensorS, class TensorO>
  __device__ __forceinline__ void rescale(TensorS& scores, TensorO& acc_o, float scale_log2) {
    static_assert(decltype(size<0>(scores))::value == kNRows);
    CUTE_UNROLL
    for (int mi = 0; mi < kNRows; ++mi) {
      float const thread_max =
          row_reduce<kReduceParts>(scores(mi, _), kFirst ? -INFINITY : row_max(mi), MaxOp{});
      float const block_max = quad_allreduce(thread_max, MaxOp{});
      // A fully masked row keeps max = -inf; subtract 0 instead so exp2 gives 0, not NaN.
      float const max_scaled = (kCheckInf && block_max == -INFINITY) ? 0.f : block_max * scale_log2;
      if constexpr (!kFirst) {
        float correction;
        if constexpr (kExactUnitCorrection) {  // a row with no key yet has -inf on both sides and O = 0
          correction = (kCheckInf && block_max == -INFINITY) ? 1.f : exp2f((row_max(mi) - block_max) * scale_log2);
        } else {
          correction = exp2f(row_max(mi) * scale_log2 - max_scaled);
        }
        row_sum(mi) *= correction;
        CUTE_UNROLL
        for (int dj = 0; dj < size<1>(acc_o); ++dj) { acc_o(mi, dj) *= correction; }
      }
      row_max(mi) = block_max;
      CUTE_UNROLL
      for (int nj = 0; nj < size<1>(scores); ++nj) {
        scores(mi, nj) = exp2f(scores(mi, nj) * scale_log2 - max_scaled);
      }
      row_sum(mi) = row_reduce<kReduceParts>(scores(mi, _), kFirst ? 0.f : row_sum(mi), SumOp{});
    }
  }

  // Normalises acc_o in place; returns each row's natural-log LSE (-inf for rows that saw no key).
  template <class TensorO>
  __device__ __forceinline__ auto finalize(TensorO& acc_o, float softmax_scale) {
    Tensor lse = make_fragment_like(row_sum);
    CUTE_UNROLL
    for (int mi = 0; mi < kNRows; ++mi) {
      float const sum = quad_allreduce(row_sum(mi), SumOp{});
      bool const empty = sum == 0.f || sum != sum;
      float const inv_sum = empty ? 0.f : 1.f / sum;
      lse(mi) = empty ? -INFINITY : row_max(mi) * softmax_scale + __logf(sum);
      CUTE_UNROLL
      for (int dj = 0; dj < size<1>(acc_o); ++dj) { acc_o(mi, dj) *= inv_sum; }
    }
    return lse;
  }
};

}  // namespace flashcute
