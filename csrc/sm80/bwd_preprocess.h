// Backward preprocess, one CTA per (Q block, head, batch) (sm80/gmem.h row_block_of_cta): D = rowsum(dO * O) per
// query row (the softmax backward's correction, dS = P * (dP - D)), LSE * log2(e) where the kernel wants it, and
// zeroes the block's rows of dQ's float32 accumulator (not with BwdParams::dq_claims: the SM90 kernel does).
// Rows past the sequence in the block get D = 0 and LSE * log2(e) = +inf. Arch-neutral: the SM90 backward
// runs it with its own block height and thread count (sm90/bwd_kernel_traits.h PrePost).
#pragma once

#include <cute/tensor.hpp>

#include "common/params.h"
#include "common/seqlen.h"
#include "common/utils.h"
#include "sm80/gmem.h"

namespace flashcute::sm80 {

using namespace cute;

template <class Traits>
__global__ void __launch_bounds__(Traits::kNThreads) bwd_preprocess_kernel(__grid_constant__ BwdParams const params) {
  using Element = typename Traits::Element;
  constexpr int kBlockM = Traits::kBlockM;
  using TileShape = Shape<Int<kBlockM>, Int<Traits::kHeadDim>>;
  static_assert(kBlockM % (Traits::kNThreads / Traits::kGmemThreadsPerRow) == 0, "the copy's passes tile the block");
  auto const [bidb, m_block] = row_block_of_cta(params.q_block_table);
  int const bidh = blockIdx.y;
  int const tidx = threadIdx.x;
  allow_dependent_grids();  // the SM90 backward kernel may start; it waits for this grid before reading its outputs
  if (bidb >= params.batch) { return; }  // past the packed batch's blocks
  SeqInfo const seq(params, bidb);
  int const row_end = seq.seqlen_q() - m_block * kBlockM;  // valid rows of this block
  if (row_end <= 0) { return; }  // past a shorter sequence of a variable-length batch (its rows are never read)

  auto [mQ, mK, mV, mO, mLSE] = make_gmem_tensors<Element>(params, seq, bidh, 0);
  auto [mdO, mdQ, mdK, mdV] = make_grad_tensors<Element>(params, seq, bidh, 0);
  Tensor mD = make_row_workspace_tensor(params.dsoftmax_sum_ptr, seq, bidh);
  Tensor gO = local_tile(mO, TileShape{}, make_coord(m_block, 0));               // (BLK_M, D)
  Tensor gdO = local_tile(mdO, TileShape{}, make_coord(m_block, 0));             // (BLK_M, D)
  Tensor gD = local_tile(mD, Shape<Int<kBlockM>>{}, make_coord(m_block));        // (BLK_M)

  // D, a pass of rows at a time: its dO and O -> registers (zero outside the tile's rows and the head dim), each
  // row's products summed in this thread, then across the kGmemThreadsPerRow neighbouring lanes that share the row.
  // (All passes loaded before any sum kept 2 x 48 values live at head dim 192, and ptxas spilled at its 32
  // registers.)
  typename Traits::GmemTiledCopy gmem_tiled_copy;
  auto gmem_thr_copy = gmem_tiled_copy.get_thread_slice(tidx);
  Tensor tOgO = gmem_thr_copy.partition_S(gO);    // (CPY, CPY_M, CPY_D)
  Tensor tOgdO = gmem_thr_copy.partition_S(gdO);  // (CPY, CPY_M, CPY_D)
  Tensor tOcO = gmem_thr_copy.partition_S(make_identity_tensor(TileShape{}));
  CUTE_UNROLL
  for (int m = 0; m < size<1>(tOgO); ++m) {
    Tensor tOrO = make_fragment_like(tOgO(_, m, _));    // (CPY, CPY_D)
    Tensor tOrdO = make_fragment_like(tOgdO(_, m, _));  // (CPY, CPY_D)
    clear(tOrO);
    clear(tOrdO);
    CUTE_UNROLL
    for (int k = 0; k < size<2>(tOgO); ++k) {
      if (get<0>(tOcO(0, m, k)) < row_end && get<1>(tOcO(0, m, k)) < params.head_dim) {
        copy(gmem_tiled_copy, tOgO(_, m, k), tOrO(_, k));
        copy(gmem_tiled_copy, tOgdO(_, m, k), tOrdO(_, k));
      }
    }
    Tensor o = convert_type<float>(tOrO);
    Tensor dout = convert_type<float>(tOrdO);
    float sum = 0.f;
    CUTE_UNROLL
    for (int i = 0; i < size(o); ++i) { sum += o(i) * dout(i); }
    CUTE_UNROLL
    for (int lanes = Traits::kGmemThreadsPerRow / 2; lanes > 0; lanes /= 2) {
      sum += __shfl_xor_sync(0xffffffff, sum, lanes);
    }
    int const row = get<0>(tOcO(0, m, 0));
    if (get<1>(tOcO(0, m, 0)) == 0) { gD(row) = row < row_end ? sum : 0.f; }
  }
  if (params.lse_log2_ptr != nullptr) {
    Tensor gLSE = local_tile(mLSE, Shape<Int<kBlockM>>{}, make_coord(m_block));  // (BLK_M)
    Tensor gLSELog2 = local_tile(make_row_workspace_tensor(params.lse_log2_ptr, seq, bidh), Shape<Int<kBlockM>>{},
                                 make_coord(m_block));  // (BLK_M)
    for (int row = tidx; row < kBlockM; row += Traits::kNThreads) {
      float const lse = row < row_end ? gLSE(row) : INFINITY;
      gLSELog2(row) = (lse == -INFINITY ? INFINITY : lse) * float(M_LOG2E);
    }
  }

  // Zero this block of the dQ accumulator, unless the first K/V block of the SM90 kernel adding into it will
  // (BwdParams::dq_claims; the dQ postprocess, which waits for dq_done there, reads no block that none adds into).
  if (params.dq_claims != nullptr) { return; }
  Tensor tdQgdQaccum = accum_block<kBlockM, Traits::kHeadDim, Traits::kNThreads, Traits::kdQAccumGroupThreads,
                                   Traits::kdQAccumVec>(
      params.dq_accum_ptr, seq.q_accum_head_row(bidh), m_block)(tidx, _);
  Tensor zeros = make_fragment_like(tdQgdQaccum);
  clear(zeros);
  copy(AutoVectorizingCopyWithAssumedAlignment<128>{}, zeros, tdQgdQaccum);  // 16-byte stores where runs allow
}

}  // namespace flashcute::sm80
