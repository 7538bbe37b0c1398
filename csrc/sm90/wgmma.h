// wgmma helpers shared by the SM90 forward and backward: one asynchronous gemm batch, and the register view that
// turns a 16-bit copy of an accumulator into the A operand of the next gemm.
#pragma once

#include <cute/tensor.hpp>
#include <cute/atom/mma_atom.hpp>

namespace flashcute::sm90 {

using namespace cute;

// acc += A.B over the k blocks, issued asynchronously as one wgmma batch (wait with warpgroup_wait).
// kZeroInit: acc = A.B (the first k block overwrites instead of accumulating).
template <bool kZeroInit, class TiledMma, class TensorA, class TensorB, class TensorC>
CUTLASS_DEVICE void wgmma_gemm(TiledMma& tiled_mma, TensorA&& tCrA, TensorB&& tCrB, TensorC&& tCrC) {
  constexpr bool kARegisters =
      !is_same_v<typename cute::remove_cvref_t<TensorA>::engine_type::iterator, GMMA::DescriptorIterator>;
  if constexpr (kARegisters) { warpgroup_fence_operand(tCrA); }
  warpgroup_fence_operand(tCrC);
  warpgroup_arrive();
  tiled_mma.accumulate_ = kZeroInit ? GMMA::ScaleOut::Zero : GMMA::ScaleOut::One;
  CUTLASS_PRAGMA_UNROLL
  for (int k = 0; k < size<2>(tCrA); ++k) {
    cute::gemm(tiled_mma, tCrA(_, _, k), tCrB(_, _, k), tCrC);
    tiled_mma.accumulate_ = GMMA::ScaleOut::One;
  }
  warpgroup_commit_batch();
  warpgroup_fence_operand(tCrC);
  if constexpr (kARegisters) { warpgroup_fence_operand(tCrA); }
}

// The slice of a TiledMma over several warpgroups whose shared-memory operands (GMMA descriptors) a warpgroup
// reads: they depend on the warpgroup alone. With a warp-uniform warp_group (cutlass::canonical_warp_group_idx, a
// shuffle from lane 0) ptxas keeps the descriptors in uniform registers; sliced by a thread index it computed
// them per thread and moved them into uniform registers before every wgmma (R2UR). Accumulators and
// register operands still take get_thread_slice.
template <class TiledMma>
CUTLASS_DEVICE auto warpgroup_slice(TiledMma const& tiled_mma, int warp_group) {
  return tiled_mma.get_slice(warp_group * cutlass::NumThreadsPerWarpGroup);
}

// The wgmma accumulator ((2 cols, 2 rows, N/8), MMA_M, MMA_N) holds, per 16 columns, exactly the registers of the
// RS A operand ((2 cols, 2 rows, 2 col halves), MMA_M, MMA_K): regroup N/8 as (2, N/16). A 16-bit copy of the
// accumulator laid out like it (convert_into) is then the A operand of a gemm whose K mode is the N mode here.
template <class AccLayout>
CUTLASS_DEVICE constexpr auto acc_as_operand_a(AccLayout const& acc) {
  auto v = logical_divide(layout<0>(acc), Shape<Underscore, Underscore, _2>{});  // (2, 2, (2, N/16))
  return make_layout(make_layout(get<0>(v), get<1>(v), get<2, 0>(v)), layout<1>(acc),
                     make_layout(get<2, 1>(v), layout<2>(acc)));
}

}  // namespace flashcute::sm90
