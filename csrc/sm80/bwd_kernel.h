// The SM80 FlashAttention-2 backward kernel. One CTA per (K/V block, query head, batch): the mainloop
// (bwd_mainloop.h) walks the Q blocks that see the K/V block, accumulating its dK and dV in registers and adding
// each Q block's dQ into a float32 accumulator; the epilogue (bwd_epilogue.h) writes dK and dV. The preprocess
// (bwd_preprocess.h) runs before it, the postprocess (bwd_postprocess.h) after.
#pragma once

#include <cute/tensor.hpp>

#include "common/block_range.h"
#include "common/params.h"
#include "common/seqlen.h"
#include "sm80/bwd_epilogue.h"
#include "sm80/bwd_kernel_traits.h"
#include "sm80/bwd_mainloop.h"
#include "sm80/gmem.h"

namespace flashcute::sm80 {

using namespace cute;

template <class Traits, bool kCausal>
__global__ void __launch_bounds__(Traits::kNThreads) bwd_kernel(__grid_constant__ BwdParams const params) {
  using Element = typename Traits::Element;
  using TileShape_MNK = typename Traits::TileShape_MNK;
  using Mainloop = BwdMainloop<Traits, kCausal>;

  extern __shared__ __align__(128) char smem[];

  // blockIdx.x is fastest in launch order: in deterministic mode the CTAs of one head add their dQ shares in
  // n_block order, and the query heads of a GQA group their dK/dV in head order (common/turnstile.h).
  int const n_block = blockIdx.x;
  int const bidh = blockIdx.y;
  int const bidb = blockIdx.z;
  int const group = params.heads_q / params.heads_kv;
  int const bidh_kv = bidh / group;
  int const tidx = threadIdx.x;
  SeqInfo const seq(params, bidb);
  int const kv_row_end = seq.seqlen_k() - n_block * Traits::kBlockN;  // valid rows of this K/V block
  if (kv_row_end <= 0) { return; }  // past a shorter sequence of a variable-length batch

  auto [mQ, mK, mV, mO, mLSE] = make_gmem_tensors<Element>(params, seq, bidh, bidh_kv);
  auto [mdO, mdQ, mdK, mdV] = make_grad_tensors<Element>(params, seq, bidh, bidh_kv);
  Tensor mD = make_row_workspace_tensor(params.dsoftmax_sum_ptr, seq, bidh);
  Tensor gQ = local_tile(mQ, select<0, 2>(TileShape_MNK{}), make_coord(_, 0));              // (BLK_M, D, m)
  Tensor gdO = local_tile(mdO, select<0, 2>(TileShape_MNK{}), make_coord(_, 0));            // (BLK_M, D, m)
  Tensor gLSE = local_tile(mLSE, Shape<Int<Traits::kBlockM>>{}, make_coord(_));             // (BLK_M, m)
  Tensor gD = local_tile(mD, Shape<Int<Traits::kBlockM>>{}, make_coord(_));                 // (BLK_M, m)
  Tensor gK = local_tile(mK, select<1, 2>(TileShape_MNK{}), make_coord(n_block, 0));        // (BLK_N, D)
  Tensor gV = local_tile(mV, select<1, 2>(TileShape_MNK{}), make_coord(n_block, 0));        // (BLK_N, D)

  QBlockRange const range = q_block_range<Traits::kBlockM, Traits::kBlockN, kCausal>(seq, n_block);
  typename Mainloop::SharedStorage const shared(smem);

  Tensor acc_dk = partition_fragment_C(typename Traits::TiledMmadKV{}, select<1, 2>(TileShape_MNK{}));  // (MMA, MMA_N, MMA_D)
  Tensor acc_dv = partition_fragment_C(typename Traits::TiledMmadKV{}, select<1, 2>(TileShape_MNK{}));
  clear(acc_dk);
  clear(acc_dv);
  Mainloop::run(gQ, gdO, gLSE, gD, gK, gV, shared, acc_dk, acc_dv, params, seq, n_block, bidb, bidh, range,
                tidx);

  // dK = scale * dS^T.Q: the softmax scale, left out of the loop, once here.
  CUTE_UNROLL
  for (int i = 0; i < size(acc_dk); ++i) { acc_dk(i) *= params.softmax_scale; }
  if (params.dk_accum_ptr == nullptr) {
    Tensor gdK = local_tile(mdK, select<1, 2>(TileShape_MNK{}), make_coord(n_block, 0));  // (BLK_N, D)
    Tensor gdV = local_tile(mdV, select<1, 2>(TileShape_MNK{}), make_coord(n_block, 0));  // (BLK_N, D)
    Tensor sK = make_tensor(make_smem_ptr(shared.k), typename Traits::SmemLayoutKV{});
    Tensor sV = make_tensor(make_smem_ptr(shared.v), typename Traits::SmemLayoutKV{});
    BwdEpilogue<Traits>::store(acc_dk, acc_dv, gdK, gdV, sK, sV, kv_row_end, params.head_dim, tidx);
  } else {
    int64_t const accum_rows = seq.k_accum_head_row(bidh_kv);
    auto thread_slots = [&](float* accum) {  // this thread's slots of the K/V block in a float32 accumulator
      return accum_block<Traits::kBlockN, Traits::kHeadDim, Traits::kNThreads>(accum, accum_rows, n_block)(tidx, _);
    };
    int* const turnstile = params.dkv_semaphore == nullptr ? nullptr
        : params.dkv_semaphore + seq.k_semaphore_offset() + int64_t(bidh_kv) * seq.k_semaphores() + n_block;
    BwdEpilogue<Traits>::add(acc_dk, acc_dv, thread_slots(params.dk_accum_ptr), thread_slots(params.dv_accum_ptr),
                             turnstile, bidh % group);
  }
}

}  // namespace flashcute::sm80
