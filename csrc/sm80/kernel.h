// The SM80 FlashAttention-2 forward kernel. One CTA per (Q block, head, batch): Q stays in shared memory,
// K/V blocks are walked from the last visible one down to 0 (so the masked blocks come first and the rest
// run mask-free), the online softmax rescales the O accumulator in registers, and the epilogue normalises
// and writes O and the LSE.
//
// Copies overlap the tensor cores with one K buffer and one V buffer:
//   wait K(n) | issue V(n) | S = Q.K(n)^T, mask | wait V(n) | issue K(n-1) | softmax | O += P.V(n)
#pragma once

#include <cute/tensor.hpp>

#include "common/block_range.h"
#include "common/flash_params.h"
#include "common/mask.h"
#include "common/softmax.h"
#include "common/utils.h"
#include "sm80/epilogue.h"
#include "sm80/kernel_traits.h"
#include "sm80/mainloop.h"

namespace flashcute::sm80 {

using namespace cute;

template <class Traits, bool kCausal>
__global__ void __launch_bounds__(Traits::kNThreads) fwd_kernel(__grid_constant__ FwdParams const params) {
  using Element = typename Traits::Element;
  using TileShape_MNK = typename Traits::TileShape_MNK;
  constexpr int kBlockM = Traits::kBlockM;
  constexpr int kBlockN = Traits::kBlockN;

  extern __shared__ __align__(128) char smem[];

  // Causal Q blocks near the end of the sequence have the most work: schedule them first.
  int const m_block = gridDim.x - 1 - blockIdx.x;
  int const bidh = blockIdx.y;
  int const bidb = blockIdx.z;
  int const bidh_kv = bidh / (params.heads_q / params.heads_kv);
  int const tidx = threadIdx.x;
  int const q_row_end = params.seqlen_q - m_block * kBlockM;  // valid rows of this Q block

  // Global tensors: (seqlen, head_dim) of this (batch, head), then tiled.
  Tensor mQ = make_tensor(make_gmem_ptr(static_cast<Element const*>(params.q_ptr) +
                                        bidb * params.q_batch_stride + bidh * params.q_head_stride),
                          make_shape(params.seqlen_q, params.head_dim), make_stride(params.q_row_stride, _1{}));
  Tensor mK = make_tensor(make_gmem_ptr(static_cast<Element const*>(params.k_ptr) +
                                        bidb * params.k_batch_stride + bidh_kv * params.k_head_stride),
                          make_shape(params.seqlen_k, params.head_dim), make_stride(params.k_row_stride, _1{}));
  Tensor mV = make_tensor(make_gmem_ptr(static_cast<Element const*>(params.v_ptr) +
                                        bidb * params.v_batch_stride + bidh_kv * params.v_head_stride),
                          make_shape(params.seqlen_k, params.head_dim), make_stride(params.v_row_stride, _1{}));
  Tensor mO = make_tensor(make_gmem_ptr(static_cast<Element*>(params.o_ptr) +
                                        bidb * params.o_batch_stride + bidh * params.o_head_stride),
                          make_shape(params.seqlen_q, params.head_dim), make_stride(params.o_row_stride, _1{}));
  Tensor mLSE = make_tensor(make_gmem_ptr(params.lse_ptr + (int64_t(bidb) * params.heads_q + bidh) * params.seqlen_q),
                            make_shape(params.seqlen_q));

  Tensor gQ = local_tile(mQ, select<0, 2>(TileShape_MNK{}), make_coord(m_block, 0));  // (BLK_M, D)
  Tensor gK = local_tile(mK, select<1, 2>(TileShape_MNK{}), make_coord(_, 0));        // (BLK_N, D, n)
  Tensor gV = local_tile(mV, select<1, 2>(TileShape_MNK{}), make_coord(_, 0));        // (BLK_N, D, n)
  Tensor gO = local_tile(mO, select<0, 2>(TileShape_MNK{}), make_coord(m_block, 0));  // (BLK_M, D)
  Tensor gLSE = local_tile(mLSE, Shape<Int<kBlockM>>{}, make_coord(m_block));         // (BLK_M)

  Tensor sQ = make_tensor(make_smem_ptr(reinterpret_cast<Element*>(smem)), typename Traits::SmemLayoutQ{});
  Tensor sK = make_tensor(sQ.data() + Int<Traits::kSmemQElems>{}, typename Traits::SmemLayoutKV{});
  Tensor sV = make_tensor(sK.data() + Int<Traits::kSmemKVElems>{}, typename Traits::SmemLayoutKV{});
  Tensor sVt = make_tensor(sV.data(), typename Traits::SmemLayoutVt{});
  Tensor sVtNoSwizzle = make_tensor(sV.data().get(), typename Traits::SmemLayoutVtNoSwizzle{});

  KVBlockRange const range = kv_block_range<kBlockM, kBlockN, kCausal>(params, m_block);
  if (range.n_block_max <= 0) {
    Epilogue<Traits>::store_empty(gO, gLSE, q_row_end, params.head_dim, tidx);
    return;
  }

  // gmem -> smem partitions, with identity tensors giving each copy vector's (row, col) for predication.
  typename Traits::GmemTiledCopyQKV gmem_tiled_copy_QKV;
  auto gmem_thr_copy_QKV = gmem_tiled_copy_QKV.get_thread_slice(tidx);
  Tensor tQgQ = gmem_thr_copy_QKV.partition_S(gQ);
  Tensor tQsQ = gmem_thr_copy_QKV.partition_D(sQ);
  Tensor tKgK = gmem_thr_copy_QKV.partition_S(gK);  // (CPY, CPY_N, CPY_D, n)
  Tensor tKsK = gmem_thr_copy_QKV.partition_D(sK);
  Tensor tVgV = gmem_thr_copy_QKV.partition_S(gV);
  Tensor tVsV = gmem_thr_copy_QKV.partition_D(sV);
  Tensor tQcQ = gmem_thr_copy_QKV.partition_S(make_identity_tensor(select<0, 2>(TileShape_MNK{})));
  Tensor tKVcKV = gmem_thr_copy_QKV.partition_S(make_identity_tensor(select<1, 2>(TileShape_MNK{})));

  // Tensor-core partitions: register fragments and their ldmatrix sources.
  typename Traits::TiledMma tiled_mma;
  auto thr_mma = tiled_mma.get_thread_slice(tidx);
  Tensor tSrQ = thr_mma.partition_fragment_A(sQ);             // (MMA, MMA_M, MMA_D)
  Tensor tSrK = thr_mma.partition_fragment_B(sK);             // (MMA, MMA_N, MMA_D)
  Tensor tOrVt = thr_mma.partition_fragment_B(sVtNoSwizzle);  // (MMA, MMA_D, MMA_N)
  Tensor acc_o = partition_fragment_C(tiled_mma, select<0, 2>(TileShape_MNK{}));  // (MMA, MMA_M, MMA_D)
  clear(acc_o);

  auto smem_tiled_copy_Q = make_tiled_copy_A(typename Traits::SmemCopyAtom{}, tiled_mma);
  auto smem_thr_copy_Q = smem_tiled_copy_Q.get_thread_slice(tidx);
  Tensor tSsQ = smem_thr_copy_Q.partition_S(sQ);
  auto smem_tiled_copy_K = make_tiled_copy_B(typename Traits::SmemCopyAtom{}, tiled_mma);
  auto smem_thr_copy_K = smem_tiled_copy_K.get_thread_slice(tidx);
  Tensor tSsK = smem_thr_copy_K.partition_S(sK);
  auto smem_tiled_copy_V = make_tiled_copy_B(typename Traits::SmemCopyAtomTransposed{}, tiled_mma);
  auto smem_thr_copy_V = smem_tiled_copy_V.get_thread_slice(tidx);
  Tensor tOsVt = smem_thr_copy_V.partition_S(sVt);

  // (row, col) inside the S block of each score this thread holds, for masking.
  Tensor tScS = make_rowcol(thr_mma.partition_C(make_identity_tensor(select<0, 1>(TileShape_MNK{}))));

  // Prologue: Q and the last visible K block (the only one that can be ragged) in flight.
  int n_block = range.n_block_max - 1;
  Mainloop::load_tile<true>(gmem_tiled_copy_QKV, tQgQ, tQsQ, tQcQ, q_row_end, params.head_dim);
  Mainloop::load_tile<true>(gmem_tiled_copy_QKV, tKgK(_, _, _, n_block), tKsK, tKVcKV,
                            params.seqlen_k - n_block * kBlockN, params.head_dim);
  cp_async_fence();

  OnlineSoftmax<decltype(size<0>(tScS))::value,
                kCausal ? Traits::kSoftmaxPartsCausal : Traits::kSoftmaxPartsFull> softmax;
  Tensor acc_o_rowcol = make_rowcol(acc_o);

  auto step = [&](auto first, auto masked) __attribute__((always_inline)) {
    constexpr bool kFirst = decltype(first)::value;
    constexpr bool kMasked = decltype(masked)::value;
    Tensor acc_s = partition_fragment_C(tiled_mma, select<0, 1>(TileShape_MNK{}));  // (MMA, MMA_M, MMA_N)
    clear(acc_s);
    cp_async_wait<0>();
    __syncthreads();  // K(n) landed; every warp is done with V(n+1)
    // Only the first (last visible) block can be ragged: the rows of every later block are all in range.
    Mainloop::load_tile<kFirst>(gmem_tiled_copy_QKV, tVgV(_, _, _, n_block), tVsV, tKVcKV,
                                params.seqlen_k - n_block * kBlockN, params.head_dim);
    cp_async_fence();

    Mainloop::gemm_ss(acc_s, tSrQ, tSrK, tSsQ, tSsK, tiled_mma, smem_tiled_copy_Q, smem_tiled_copy_K,
                      smem_thr_copy_Q, smem_thr_copy_K);
    Tensor scores = make_rowcol(acc_s);
    if constexpr (kMasked) {
      apply_mask<kCausal>(scores, tScS, m_block * kBlockM, n_block * kBlockN, params.seqlen_k,
                          params.causal_offset);
    }

    cp_async_wait<0>();
    __syncthreads();  // V(n) landed; every warp is done with K(n)
    if (n_block > 0) {
      Mainloop::load_tile<false>(gmem_tiled_copy_QKV, tKgK(_, _, _, n_block - 1), tKsK, tKVcKV, kBlockN,
                                 params.head_dim);
      cp_async_fence();
    }

    softmax.template rescale<kFirst, kMasked>(scores, acc_o_rowcol, params.softmax_scale_log2);

    Tensor rP = convert_type<Element>(acc_s);
    Tensor tOrP = make_tensor(rP.data(), Mainloop::acc_as_operand_a(rP.layout()));
    Mainloop::gemm_rs(acc_o, tOrP, tOrVt, tOsVt, tiled_mma, smem_tiled_copy_V, smem_thr_copy_V);
  };

  // Blocks [n_block_unmasked, n_block_max) hold the ragged tail and the causal diagonal.
  if (n_block >= range.n_block_unmasked) {
    step(cute::true_type{}, cute::true_type{});
  } else {
    step(cute::true_type{}, cute::false_type{});
  }
  for (--n_block; n_block >= range.n_block_unmasked; --n_block) { step(cute::false_type{}, cute::true_type{}); }
  for (; n_block >= 0; --n_block) { step(cute::false_type{}, cute::false_type{}); }

  Tensor lse = softmax.finalize(acc_o_rowcol, params.softmax_scale);
  Tensor sO = make_tensor(sQ.data(), typename Traits::SmemLayoutO{});
  Epilogue<Traits>::store(acc_o, lse, gO, gLSE, sO, q_row_end, params.head_dim, tidx);
}

}  // namespace flashcute::sm80
