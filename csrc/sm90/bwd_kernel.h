// The SM90 backward kernel, warp-specialized. One CTA per (K/V block, query head, batch), blockIdx.x fastest so that
// the K/V blocks of a head, whose dQ additions deterministic mode orders (BwdMainloop::dq_turn), run together
// (varlen: blockIdx.x runs over the K/V blocks of all the sequences, BwdParams::kv_block_table). Warpgroup 0
// produces: warp 0 issues the TMA loads (K, V once; Q and dO blocks through the pipelines), warp 1 adds each Q
// block's dQ into the float32 accumulator with bulk reductions, one per consumer warpgroup's chunk. Warpgroups 1 and
// 2 consume: each owns 64 keys of the block and keeps their dK and dV in registers over the Q blocks
// (bwd_mainloop.h), then writes them (bwd_epilogue.h). At head dims 192 and 256 (BwdKernelTraitsQueriesAlongM) the
// consumers share a 64-key block, each keeps half of dK^T and dV^T, and they add dQ themselves
// (bwd_mainloop_queries_along_m.h); deterministic, they park it over the block's spent Q/dO stages instead, and warp
// 1 takes the turn, reduces it and releases them. The preprocess (D, LSE * log2(e), the zeroed dQ accumulator,
// which for short queries the kernel zeroes instead: BwdParams::dq_claims) runs before, the postprocess (dQ; dK and
// dV with GQA) after, its dQ blocks as soon as their additions are complete (BwdParams::dq_done).
//
// Barriers: the Q and dO pipelines (full: TMA bytes, K's with the first Q block and V's with the first dO block, so
// the first S^T gemm waits for K and Q only; empty: every consumer thread after the gemm that last read the stage,
// or at 192 / 256 in deterministic mode the dQ warp once it has reduced the dQ parked there); named kdS (consumers,
// before the dQ gemm reads dS), kdQEmptyFirst / kdQFullFirst + i (consumer warpgroup i + the dQ warp, around that
// warpgroup's chunk of the two dQ buffers; at 192 / 256 kStagesRead and the mbarriers barrier_dq_full instead),
// kEpilogue (consumers).
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/reg_reconfig.h>

#include "common/block_range.h"
#include "common/params.h"
#include "common/seqlen.h"
#include "common/utils.h"
#include "sm90/bwd_epilogue.h"
#include "sm90/bwd_kernel_traits.h"
#include "sm90/bwd_mainloop.h"
#include "sm90/bwd_mainloop_queries_along_m.h"

namespace flashcute::sm90 {

using namespace cute;

template <class Traits, bool kCausal>
using BwdMainloopOf = cute::conditional_t<Traits::kKeysAlongM, BwdMainloop<Traits, kCausal>,
                                          BwdMainloopQueriesAlongM<Traits, kCausal>>;

template <class Traits, bool kCausal>
struct BwdKernelParams {
  BwdParams bwd;
  typename BwdMainloopOf<Traits, kCausal>::Params mainloop;
  typename BwdEpilogue<Traits>::Params epilogue;
};

// kVarlen: the instantiation whose grid runs over a packed batch's K/V blocks (BwdParams::kv_block_table); the
// fixed-length one reads its block and batch from blockIdx alone.
template <class Traits, bool kCausal, bool kVarlen>
__global__ void __launch_bounds__(Traits::kNumThreads, 1)
    bwd_kernel(CUTE_GRID_CONSTANT BwdKernelParams<Traits, kCausal> const params) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Mainloop = BwdMainloopOf<Traits, kCausal>;
  using Epilogue = BwdEpilogue<Traits>;
  using SharedStorage = typename Traits::SharedStorage;
  using TileShape_MNK = typename Traits::TileShape_MNK;
  BwdParams const& bwd = params.bwd;

  extern __shared__ char smem_buf[];
  SharedStorage& shared = *reinterpret_cast<SharedStorage*>(smem_buf);

  int n_block = blockIdx.x;
  int bidh = blockIdx.y;
  int bidb = blockIdx.z;
  // Varlen: a 1-D grid in the fixed-length grid's order, sequences for batch (common/block_range.h
  // sequence_head_block_of, over the prepass's numbering of the K/V blocks). A CTA past the last block, or of a
  // sequence whose blocks do not all fit the grid (malformed cu_seqlens_k; in deterministic mode its present blocks
  // would wait for the missing ones forever), has nothing to write; it waits for the preprocess like every CTA.
  if constexpr (kVarlen) {
    SequenceHeadBlock const cta = sequence_head_block_of(bwd.kv_block_table, bwd.first_kv_block, bwd.batch,
                                                         bwd.heads_q, int(blockIdx.x),
                                                         Mainloop::launch_highest_block_first(bwd));
    if (cta.sequence >= bwd.batch) {
      wait_for_prior_grid();
      return;
    }
    bidb = cta.sequence, bidh = cta.head, n_block = cta.block;
  } else if (Mainloop::launch_highest_block_first(bwd)) {
    n_block = gridDim.x - 1 - blockIdx.x;
  }
  int const bidh_kv = bidh / (bwd.heads_q / bwd.heads_kv);
  SeqInfo const seq(bwd, bidb);
  QBlockRange const range = q_block_range<Traits::kBlockM, Traits::kBlockN, kCausal>(seq, n_block);
  // No Q block sees these keys (causal aligned top-left with seqlen_k > seqlen_q, or a varlen sequence with no
  // queries): dK = dV = 0.
  bool const has_work = range.m_block_min < range.m_block_max;

  int const warp_group_idx = cutlass::canonical_warp_group_idx();
  int const warp_idx = cutlass::canonical_warp_idx_sync();
  bool const is_producer = warp_group_idx == 0;

  if (warp_idx == 0 && cute::elect_one_sync()) {
    Mainloop::prefetch_descriptors(params.mainloop);
    Epilogue::prefetch_descriptors(params.epilogue);
    Mainloop::init_barriers(shared);
  }
  BwdPipelines<Traits> pipes(shared, is_producer, Mainloop::stage_release_arrivals(bwd));
  __syncthreads();  // barriers initialised (and fenced) before anyone waits on them
  // Launched programmatically after the preprocess (bwd_launch.h): the producer waits for it before reading what it
  // wrote (LSE, D, the zeroed dQ accumulator); the postprocess may be launched now, and waits for this grid.
  allow_dependent_grids();

  if (is_producer) {
    cutlass::arch::warpgroup_reg_dealloc<Traits::kProducerRegs>();
    // Every CTA waits for the preprocess before it exits, so that the postprocess, which waits for this grid,
    // never reads a dQ accumulator the preprocess is still zeroing (a varlen batch may give no CTA any work).
    if (!has_work) {
      wait_for_prior_grid();
      return;
    }
    // The warp-uniform test first: tested after the per-thread one, ptxas kept values of both roles live across
    // the branch and spilled them at 24 registers (benchmarks/notes.md#d-sm90-bwd-producer-branch).
    if (warp_idx >= 1 && warp_idx <= Mainloop::kdQWarps) {  // the dQ warps: 1, or (queries along M) one per stage
      Mainloop::store_dq(bwd, shared, seq, n_block, bidh, range, /*dq_warp=*/warp_idx - 1);
    } else if (threadIdx.x == 0) {  // the pipelines' leader thread arms their barriers
      Mainloop::load(params.mainloop, bwd, shared, pipes, seq, n_block, bidh, bidh_kv, range);
    }
  } else {
    cutlass::arch::warpgroup_reg_alloc<Traits::kConsumerRegs>();
    int const thread_idx = threadIdx.x - cutlass::NumThreadsPerWarpGroup;
    typename Traits::TiledMmadKV tiled_mma_dkv;
    // dK and dV, or dK^T and dV^T where queries run along M.
    Tensor tdKrdK = partition_fragment_C(tiled_mma_dkv, typename Traits::TileShapedKV{});  // (MMA, MMA_N, MMA_D)
    Tensor tdVrdV = partition_fragment_C(tiled_mma_dkv, typename Traits::TileShapedKV{});  // (MMA, MMA_N, MMA_D)
    clear(tdKrdK);
    clear(tdVrdV);
    if (has_work) {
      if constexpr (Traits::kKeysAlongM) {
        Mainloop::mma(bwd, shared, pipes, tdKrdK, tdVrdV, seq, n_block, range, thread_idx);
      } else {  // these consumers add dQ themselves, outside deterministic mode
        Mainloop::mma(bwd, shared, pipes, tdKrdK, tdVrdV, seq, n_block, bidh, range, thread_idx);
      }
    }
    // dK = scale * dS^T.Q: the softmax scale, left out of the loop, once here.
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(tdKrdK); ++i) { tdKrdK(i) *= bwd.softmax_scale; }
    if (bwd.dk_accum_ptr == nullptr) {
      Epilogue::store(params.epilogue, bwd, seq, shared, tdKrdK, tdVrdV, n_block, bidh_kv, thread_idx);
    } else {
      Epilogue::add(bwd, seq, tdKrdK, tdVrdV, n_block, bidh, bidh_kv, thread_idx);
    }
  }
#endif
}

}  // namespace flashcute::sm90
