// SM80 backward postprocess, one CTA per (row block, head, batch): a float32 accumulator -> the gradient in
// 16-bit. dQ always (its accumulator gathers every K/V block's share, scaled by the softmax scale here); dK and
// dV with GQA (their shares arrive scaled).
#pragma once

#include <cute/tensor.hpp>

#include "common/params.h"
#include "common/seqlen.h"
#include "common/utils.h"
#include "sm80/epilogue.h"
#include "sm80/gmem.h"

namespace flashcute::sm80 {

using namespace cute;

enum class Grad { kDQ, kDK, kDV };

template <class Traits, Grad kGrad>
__global__ void __launch_bounds__(Traits::kNThreads) bwd_postprocess_kernel(__grid_constant__ BwdParams const params) {
  using Element = typename Traits::Element;
  constexpr int kBlockM = Traits::kBlockM;
  using TileShape = Shape<Int<kBlockM>, Int<Traits::kHeadDim>>;
  int const m_block = blockIdx.x;
  int const bidh = blockIdx.y;  // a query head for dQ, a key/value head for dK and dV
  int const bidb = blockIdx.z;
  int const tidx = threadIdx.x;
  SeqInfo const seq(params, bidb);

  // (accumulator, gradient, rows, scale) of kGrad: (rows, d) float32 and 16-bit views.
  auto const grads = make_grad_tensors<Element>(params, seq, bidh, bidh);  // (mdO, mdQ, mdK, mdV)
  auto const workspaces = make_workspace_tensors(params, seq, bidh, bidh);  // (mD, mdQaccum, mdKaccum, mdVaccum)
  auto const [mAccum, mOut, rows, scale] = [&] {
    if constexpr (kGrad == Grad::kDQ) {
      return cute::make_tuple(get<1>(workspaces), get<1>(grads), seq.seqlen_q(), params.softmax_scale);
    } else if constexpr (kGrad == Grad::kDK) {
      return cute::make_tuple(get<2>(workspaces), get<2>(grads), seq.seqlen_k(), 1.f);
    } else {
      return cute::make_tuple(get<3>(workspaces), get<3>(grads), seq.seqlen_k(), 1.f);
    }
  }();
  int const row_end = rows - m_block * kBlockM;
  Tensor gAccum = local_tile(mAccum, TileShape{}, make_coord(m_block, 0));  // (BLK_M, D) float
  Tensor gOut = local_tile(mOut, TileShape{}, make_coord(m_block, 0));      // (BLK_M, D)

  // Both copies give each thread the same 4 elements of a row: 16 bytes of float in, 8 bytes of 16-bit out.
  typename Traits::GmemTiledCopyAccum accum_tiled_copy;
  typename Traits::GmemTiledCopyFromAccum out_tiled_copy;
  Tensor tAgA = accum_tiled_copy.get_thread_slice(tidx).partition_S(gAccum);  // (CPY, CPY_M, CPY_D)
  Tensor tAgOut = out_tiled_copy.get_thread_slice(tidx).partition_D(gOut);     // (CPY, CPY_M, CPY_D)
  Tensor tAcA = accum_tiled_copy.get_thread_slice(tidx).partition_S(make_identity_tensor(TileShape{}));
  static_assert(decltype(size(tAgA))::value == decltype(size(tAgOut))::value);
  Tensor tArA = make_fragment_like(tAgA);
  CUTE_UNROLL
  for (int m = 0; m < size<1>(tAgA); ++m) {
    CUTE_UNROLL
    for (int k = 0; k < size<2>(tAgA); ++k) {
      if (get<0>(tAcA(0, m, k)) < row_end && get<1>(tAcA(0, m, k)) < params.head_dim) {
        copy(accum_tiled_copy, tAgA(_, m, k), tArA(_, m, k));
      }
    }
  }
  CUTE_UNROLL
  for (int i = 0; i < size(tArA); ++i) { tArA(i) *= scale; }
  Tensor tArOut = convert_type<Element>(tArA);
  store_predicated(out_tiled_copy, tArOut, tAgOut, tAcA, row_end, params.head_dim);
}

}  // namespace flashcute::sm80
