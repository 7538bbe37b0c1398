// Small device utilities shared by the SM80 and SM90 kernels.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/numeric_conversion.h>

namespace flashcute {

using namespace cute;

struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return a > b ? a : b; }
};
struct SumOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};

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
