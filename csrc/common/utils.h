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

// A register copy of src in which src's broadcast (stride-0) modes stay broadcast: each distinct value is loaded
// once and held in one register, e.g. the row statistics of an accumulator's elements, loaded while its gemm runs.
template <class Engine, class Layout>
CUTE_DEVICE auto load_broadcast(Tensor<Engine, Layout> const& src) {
  using T = cute::remove_cvref_t<typename Engine::value_type>;
  auto distinct = make_layout(shape(filter_zeros(src.layout())));  // compact; stride 0 at the broadcast modes
  Tensor dst = make_tensor<T>(make_layout(shape(src), stride(distinct)));
  copy(filter_zeros(src), filter_zeros(dst));
  return dst;
}

// dst = src converted element-wise, storage position by storage position: dst is a fragment of the same size
// whose registers line up with src's (e.g. the A operand of the next gemm, laid over the same registers).
// Vectorised through cutlass's array converter, so each 32-bit register receives one packed pair; an
// element-wise copy of 16-bit values into dst compiles to PRMT/LOP3 re-packing (~2 instructions per score).
template <class EngineSrc, class LayoutSrc, class EngineDst, class LayoutDst>
__device__ __forceinline__ void convert_into(Tensor<EngineSrc, LayoutSrc> const& src,
                                             Tensor<EngineDst, LayoutDst>& dst) {
  using From = typename EngineSrc::value_type;
  using To = typename EngineDst::value_type;
  constexpr int kNumel = decltype(size(src))::value;
  static_assert(decltype(size(dst))::value == kNumel);
  cutlass::NumericArrayConverter<To, From, kNumel> convert;
  *reinterpret_cast<cutlass::Array<To, kNumel>*>(dst.data()) =
      convert(*reinterpret_cast<cutlass::Array<From, kNumel> const*>(src.data()));
}

// A new fragment with src's layout, converted element-wise.
template <typename To, class Engine, class Layout>
__device__ __forceinline__ auto convert_type(Tensor<Engine, Layout> const& src) {
  Tensor dst = make_fragment_like<To>(src);
  convert_into(src, dst);
  return dst;
}

// Programmatic dependent launch (SM90 on; no-ops on older GPUs and for kernels launched without it). A kernel
// launched with cudaLaunchAttributeProgrammaticStreamSerialization may start while the kernel before it on the
// stream still runs: wait_for_prior_grid() returns once that kernel has completed and its writes are visible to
// this grid, so every read of its outputs comes after it; allow_dependent_grids() lets the next such kernel start.
__device__ __forceinline__ void wait_for_prior_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void allow_dependent_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

}  // namespace flashcute
