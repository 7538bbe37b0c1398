// Small device utilities shared by the SM80 and SM90 kernels.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/numeric_conversion.h>

namespace flashcute {

using namespace cute;

// fmaxf is one FMNMX; `a > b ? a : b` would be FSETP + FSEL (its NaN rule differs, so the compiler may not
// fuse it).
struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct SumOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};

// op(init, row(0), row(1), ...) with a short dependency chain: kParts independent partial results, then a
// tree over them. The softmax runs on one warp per scheduler while another warpgroup's (or warp's) gemms use
// the tensor cores, so its serial chains are exposed latency; how many partials pay for their registers is
// measured per kernel (the kernel traits' kSoftmaxReduceParts).
template <int kParts, class Op, class TensorRow>
__device__ __forceinline__ float row_reduce(TensorRow const& row, float init, Op op) {
  constexpr int kN = decltype(size(row))::value;
  static_assert(kParts > 0 && (kParts & (kParts - 1)) == 0 && kParts <= kN);
  float part[kParts];
  CUTE_UNROLL
  for (int j = 0; j < kParts; ++j) { part[j] = row(j); }
  CUTE_UNROLL
  for (int j = kParts; j < kN; ++j) { part[j % kParts] = op(part[j % kParts], row(j)); }
  CUTE_UNROLL
  for (int width = kParts / 2; width > 0; width /= 2) {
    CUTE_UNROLL
    for (int j = 0; j < width; ++j) { part[j] = op(part[j], part[j + width]); }
  }
  return op(init, part[0]);
}

// The 4 threads of a quad share the rows of an mma.sync / wgmma accumulator: reduce across them.
template <class Op>
__device__ __forceinline__ float quad_allreduce(float x, Op op) {
  x = op(x, __shfl_xor_sync(0xffffffff, x, 2));
  x = op(x, __shfl_xor_sync(0xffffffff, x, 1));
  return x;
}

// View an accumulator layout as (rows, cols) so softmax and masking can walk rows.
//   SM80 mma.sync  ((2 cols, 2 rows), MMA_M, MMA_N)       -> ((2, MMA_M), (2, MMA_N))
//   SM90 wgmma     ((2 cols, 2 rows, V), MMA_M, MMA_N)    -> ((2, MMA_M), (2, V, MMA_N))
template <class AccLayout>
CUTE_HOST_DEVICE constexpr auto make_rowcol_layout(AccLayout const& acc) {
  static_assert(decltype(rank(acc))::value == 3);
  static_assert(decltype(rank<0>(acc))::value == 2 || decltype(rank<0>(acc))::value == 3);
  if constexpr (decltype(rank<0>(acc))::value == 2) {
    return make_layout(make_layout(get<0, 1>(acc), get<1>(acc)),
                       make_layout(get<0, 0>(acc), get<2>(acc)));
  } else {
    return make_layout(make_layout(get<0, 1>(acc), get<1>(acc)),
                       make_layout(get<0, 0>(acc), get<0, 2>(acc), get<2>(acc)));
  }
}

template <class Engine, class Layout>
CUTE_HOST_DEVICE auto make_rowcol(Tensor<Engine, Layout>&& t) {
  return make_tensor(t.data(), make_rowcol_layout(t.layout()));
}
template <class Engine, class Layout>
CUTE_HOST_DEVICE auto make_rowcol(Tensor<Engine, Layout>& t) {
  return make_tensor(t.data(), make_rowcol_layout(t.layout()));
}

// Element-wise conversion of a compact register fragment (float accumulators -> 16-bit operands),
// vectorised through cutlass's array converter. The result has the same shape and element order.
template <typename To, class Engine, class Layout>
__device__ __forceinline__ auto convert_type(Tensor<Engine, Layout> const& src) {
  using From = typename Engine::value_type;
  constexpr int kNumel = decltype(size(src))::value;
  Tensor dst = make_fragment_like<To>(src);
  cutlass::NumericArrayConverter<To, From, kNumel> convert;
  *reinterpret_cast<cutlass::Array<To, kNumel>*>(dst.data()) =
      convert(*reinterpret_cast<cutlass::Array<From, kNumel> const*>(src.data()));
  return dst;
}

}  // namespace flashcute
