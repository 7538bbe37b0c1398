// The SM80 FlashAttention-2 forward kernel. One CTA per (Q block, head, batch): the mainloop (mainloop.h)
// accumulates O and the softmax statistics of its Q block, the epilogue (epilogue.h) normalises and writes O and
// the LSE.
#pragma once

#include <cute/tensor.hpp>

#include "common/block_range.h"
#include "common/params.h"
#include "common/seqlen.h"
#include "sm80/epilogue.h"
#include "sm80/gmem.h"
#include "sm80/kernel_traits.h"
#include "sm80/mainloop.h"

namespace flashcute::sm80 {

using namespace cute;

// kVarlen: packed batches (cu_seqlens); fixed-length batches run an instantiation without that code.
template <class Traits, bool kCausal, bool kVarlen>
__global__ void __launch_bounds__(Traits::kNThreads) fwd_kernel(__grid_constant__ FwdParams const params) {
  using Element = typename Traits::Element;
  using TileShape_MNK = typename Traits::TileShape_MNK;
  using Mainloop = sm80::Mainloop<Traits, kCausal>;

  extern __shared__ __align__(128) char smem[];

  // Causal Q blocks near the end of the sequence have the most work: schedule them first.
  int const m_block = gridDim.x - 1 - blockIdx.x;
  int const bidh = blockIdx.y;
  int const bidb = blockIdx.z;
  int const bidh_kv = bidh / (params.heads_q / params.heads_kv);
  int const tidx = threadIdx.x;
  SeqInfoOf<kVarlen> const seq(params, bidb);
  int const q_row_end = seq.seqlen_q() - m_block * Traits::kBlockM;  // valid rows of this Q block
  if (q_row_end <= 0) { return; }  // past a shorter sequence of a variable-length batch

  auto [mQ, mK, mV, mO, mLSE] = make_gmem_tensors<Element>(params, seq, bidh, bidh_kv);
  Tensor gQ = local_tile(mQ, select<0, 2>(TileShape_MNK{}), make_coord(m_block, 0));  // (BLK_M, D)
  Tensor gK = local_tile(mK, select<1, 2>(TileShape_MNK{}), make_coord(_, 0));        // (BLK_N, D, n)
  Tensor gV = local_tile(mV, select<1, 2>(TileShape_MNK{}), make_coord(_, 0));        // (BLK_N, D, n)
  Tensor gO = local_tile(mO, select<0, 2>(TileShape_MNK{}), make_coord(m_block, 0));  // (BLK_M, D)
  Tensor gLSE = local_tile(mLSE, Shape<Int<Traits::kBlockM>>{}, make_coord(m_block));  // (BLK_M)

  KVBlockRange const range = kv_block_range<Traits::kBlockM, Traits::kBlockN, kCausal>(seq, m_block);
  if (range.n_block_max <= 0) {
    Epilogue<Traits>::store_empty(gO, gLSE, q_row_end, params.head_dim, tidx);
    return;
  }

  // Shared memory: Q, then one K and one V buffer; O is staged in Q's buffer by the epilogue.
  auto [sQ, sK, sV] = Mainloop::smem_tensors(smem);

  Tensor acc_o = partition_fragment_C(typename Traits::TiledMma{}, select<0, 2>(TileShape_MNK{}));  // (MMA, M, D)
  clear(acc_o);
  typename Mainloop::Softmax softmax;
  Mainloop::mma(gQ, QueryRows{}, gK, gV, ContiguousKV{}, sQ, sK, sV, acc_o, softmax, params, seq, m_block, range,
                tidx);

  Tensor acc_o_rowcol = make_rowcol(acc_o);
  Tensor lse = softmax.finalize(acc_o_rowcol, params.softmax_scale);
  Tensor sO = make_tensor(sQ.data(), typename Traits::SmemLayoutO{});
  Epilogue<Traits>::store(acc_o, lse, gO, gLSE, sO, q_row_end, params.head_dim, tidx);
}

}  // namespace flashcute::sm80
