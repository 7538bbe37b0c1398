// The SM90 backward's consumer mainloop for head dims 192 and 256 (BwdKernelTraitsQueriesAlongM): queries along
// the wgmma M mode, and its dQ warp. The producer's loads are BwdMainloop's.
//
// Consumer warpgroups, per Q block m (warpgroup w computes S and dP for its half of the 64 keys):
//   S = Q(m).K^T ; dP = dO(m).V^T                     (SS, async)
//   P = exp2(S * scale * log2(e) - LSE * log2(e)) (masked where needed) ; dS = P * (dP - D)
//   P, dS -> shared memory (stmatrix)               ; [every warpgroup's P and dS written]
//   dV^T += dO(m)^T.P ; dQ(m) = dS.K ; dK^T += Q(m)^T.dS   (SS, head dim along M for dV^T and dK^T)
//   dQ(m) added into the float32 accumulator from the registers (red.global.add); or, deterministic:
//   [every warpgroup's gemms done] dQ(m) parked in block m's own stages: warpgroup 0's half over Q(m), warpgroup
//   1's over dO(m) (each stage holds exactly one such float32 half), for the stage's dQ warp.
// Deterministic, a dQ warp per stage takes the turn (turnstile), adds both halves with bulk reductions and releases
// each stage to the producer once its half has been read: the consumers never wait for the turnstile, without the
// 48-64 KB a dQ buffer of the first plan's kind would take here, and one block's turn, reduction and completion
// overlap the next block's (benchmarks/notes.md#d-sm90-bwd-det-dq-warp-per-stage). Not in the default mode: a
// stage would wait for its reduction before the producer could refill it (benchmarks/notes.md#d-sm90-bwd-det-park).
// P and dS have kPdSStages (2) stages of their own, used in turn whatever the Q/dO stages: the stage a warpgroup
// writes for block m + 1 was last read by block m - 1's gemms, which every warpgroup waited for before the block-m
// barrier.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>

#include "common/block_range.h"
#include "common/mask.h"
#include "common/params.h"
#include "common/seqlen.h"
#include "common/turnstile.h"
#include "common/utils.h"
#include "sm80/gmem.h"
#include "sm90/bwd_kernel_traits.h"
#include "sm90/bwd_mainloop.h"
#include "sm90/gmem.h"
#include "sm90/named_barriers.h"
#include "sm90/wgmma.h"

namespace flashcute::sm90 {

using namespace cute;

template <class Traits, bool kCausal>
struct BwdMainloopQueriesAlongM : BwdMainloop<Traits, kCausal> {
  using Base = BwdMainloop<Traits, kCausal>;
  using Element = typename Traits::Element;
  using TileShape_MNK = typename Traits::TileShape_MNK;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kHeadDim = Traits::kHeadDim;
  static constexpr int kNumMmaThreads = Traits::kNumMmaThreads;

  // barrier_dq_full: every consumer thread arrives once it has parked its part of the block's dQ.
  template <class SharedStorage>
  CUTLASS_DEVICE static void init_barriers(SharedStorage& shared) {
    CUTLASS_PRAGMA_UNROLL
    for (int stage = 0; stage < Traits::kStages; ++stage) { shared.barrier_dq_full[stage].init(kNumMmaThreads); }
  }
  // Deterministic: the dQ warp releases the stages it reduced dQ from; otherwise every consumer thread, as in
  // BwdMainloop.
  CUTLASS_DEVICE static int stage_release_arrivals(BwdParams const& bwd) {
    return bwd.dq_semaphore != nullptr ? 1 : kNumMmaThreads;
  }

  // Deterministic, the dQ warps of the producer warpgroup, one per Q/dO stage (warps 1 to kStages; all 32 lanes,
  // lane 0 issues), each taking the Q blocks parked in its stage: for each, in its turn (BwdMainloop::dq_turn) and once
  // both warpgroups have parked their halves of dQ over Q's (warpgroup 0) and dO's (warpgroup 1) stage, two bulk
  // reductions add them into this head's float32 accumulator; each stage goes back to the producer once its half
  // has been read (its empty barrier counts this one arrival), the turn once both are complete. With one warp the
  // turn, reduction and completion of each block were serial, and the consumers waited for the stages they held.
  static constexpr int kdQWarps = Traits::kStages;
  static_assert(kdQWarps <= 3, "the dQ warps are the producer warpgroup's warps 1-3 (warp 0 loads)");
  template <class SharedStorage>
  CUTLASS_DEVICE static void store_dq(BwdParams const& bwd, SharedStorage& shared, SeqInfo const& seq, int n_block,
                                      int bidh, QBlockRange const& range, int stage) {
    constexpr int kHalfElems = Traits::kdQHalfElems;
    bool const lane0 = cute::elect_one_sync();
    // Tested on the kernel parameter, not on a turnstile pointer computed from it: with that test, compute-sanitizer
    // runs of the head-dim-192 packed-batch kernel spun on address 0 (benchmarks/notes.md#d-sm90-bwd-queries-along-m).
    if (bwd.dq_semaphore == nullptr) { return; }
    wait_for_prior_grid();  // the preprocess has zeroed the dQ accumulator
    float* const dq_accum_head = bwd.dq_accum_ptr + seq.q_accum_head_row(bidh) * kHeadDim;
    QBlockWalk const walk = Base::q_walk(bwd, range, n_block);
    // Step i of the walk is parked in stage i % kStages, the stage's (i / kStages)-th use (the consumers' states).
    for (int i = stage; i < walk.count; i += Traits::kStages) {
      int const m_block = walk[i];
      int* const counter = Base::dq_block_counter(bwd.dq_semaphore, seq, bidh, m_block);
      if (lane0) { spin_until_at_least(counter, Base::dq_turn(bwd, seq, m_block, n_block)); }
      shared.barrier_dq_full[stage].wait((i / Traits::kStages) % 2);
      if (lane0) {
        CUTLASS_PRAGMA_UNROLL
        for (int wg = 0; wg < Traits::kNumMmaWarpGroups; ++wg) {
          Element const* half = (wg == 0 ? shared.smem_q.data() : shared.smem_do.data()) + stage * Traits::kStageElems;
          bulk_reduce_add_f32(dq_accum_head + int64_t(m_block) * Traits::kdQElems + wg * kHalfElems,
                              reinterpret_cast<float const*>(half), kHalfElems * sizeof(float),
                              TMA::CacheHintSm90::EVICT_LAST);
          tma_store_arrive();
        }
        tma_store_wait<1>();  // Q's half read: Q's stage first, the first the block after next waits for
        shared.pipeline_q.empty_barrier_[stage].arrive();
        tma_store_wait<0>();
        shared.pipeline_do.empty_barrier_[stage].arrive();
        bulk_wait_complete();
        turnstile_release(counter);
      }
      __syncwarp();
    }
  }

  // Consumer warpgroups: accumulate the K/V block's dK^T (unscaled) and dV^T over its Q blocks, and add each Q
  // block's dQ (unscaled) into the accumulator, or, deterministic, park it for the dQ warp.
  template <class SharedStorage, class FragdKV>
  CUTLASS_DEVICE static void mma(BwdParams const& bwd, SharedStorage& shared, BwdPipelines<Traits>& pipes,
                                 FragdKV& tdKrdK, FragdKV& tdVrdV, SeqInfo const& seq, int n_block, int bidh,
                                 QBlockRange const& range, int thread_idx) {
    using cutlass::arch::NamedBarrier;
    typename Traits::TiledMmaSdP tiled_mma_sdp;
    typename Traits::TiledMmadKV tiled_mma_dkv;
    typename Traits::TiledMmadQ tiled_mma_dq;
    auto thr_mma_sdp = tiled_mma_sdp.get_thread_slice(thread_idx);
    int const warp_group = cutlass::canonical_warp_group_idx() - 1;  // consumer warpgroup, warp-uniform
    auto wg_mma_sdp = warpgroup_slice(tiled_mma_sdp, warp_group);
    auto wg_mma_dkv = warpgroup_slice(tiled_mma_dkv, warp_group);
    auto wg_mma_dq = warpgroup_slice(tiled_mma_dq, warp_group);

    Tensor sQ = make_tensor(make_smem_ptr(shared.smem_q.data()), typename Traits::SmemLayoutQ{});      // (M, D, stage)
    Tensor sdO = make_tensor(make_smem_ptr(shared.smem_do.data()), typename Traits::SmemLayoutdO{});   // (M, D, stage)
    Tensor sQt = make_tensor(make_smem_ptr(shared.smem_q.data()), typename Traits::SmemLayoutQt{});    // (D, M, stage)
    Tensor sdOt = make_tensor(make_smem_ptr(shared.smem_do.data()), typename Traits::SmemLayoutdOt{}); // (D, M, stage)
    Tensor sP = make_tensor(make_smem_ptr(shared.smem_p.data()), typename Traits::SmemLayoutPdS{});     // (M, N, pds)
    Tensor sPt = make_tensor(make_smem_ptr(shared.smem_p.data()), typename Traits::SmemLayoutPdSt{});   // (N, M, pds)
    Tensor sdS = make_tensor(make_smem_ptr(shared.smem_ds.data()), typename Traits::SmemLayoutPdS{});   // (M, N, pds)
    Tensor sdSt = make_tensor(make_smem_ptr(shared.smem_ds.data()), typename Traits::SmemLayoutPdSt{}); // (N, M, pds)
    Tensor sLSELog2 = make_tensor(make_smem_ptr(shared.smem_lse_log2.data()),
                                  typename Traits::SmemLayoutRowStatsMma{});  // (M, N, stage), stride 0 along N
    Tensor sD = make_tensor(make_smem_ptr(shared.smem_dsum.data()), typename Traits::SmemLayoutRowStatsMma{});

    // S = Q.K^T and dP = dO.V^T (their K and V operands: in the step)
    Tensor tSrQ = wg_mma_sdp.partition_fragment_A(sQ);     // (MMA, MMA_M, MMA_D, stage)
    Tensor tdPrdO = wg_mma_sdp.partition_fragment_A(sdO);  // (MMA, MMA_M, MMA_D, stage)
    // dV^T += dO^T.P and dK^T += Q^T.dS
    Tensor tdVrdOt = wg_mma_dkv.partition_fragment_A(sdOt);  // (MMA, MMA_D, MMA_M, stage)
    Tensor tdVrPt = wg_mma_dkv.partition_fragment_B(sPt);    // (MMA, MMA_N, MMA_M, pds)
    Tensor tdKrQt = wg_mma_dkv.partition_fragment_A(sQt);    // (MMA, MMA_D, MMA_M, stage)
    Tensor tdKrdSt = wg_mma_dkv.partition_fragment_B(sdSt);  // (MMA, MMA_N, MMA_M, pds)
    CUTE_STATIC_ASSERT_V(size<2>(tdVrdOt) == size<2>(tdVrPt));  // the query k-blocks pair up
    // dQ = dS.K
    Tensor tdQrdS = wg_mma_dq.partition_fragment_A(sdS);  // (MMA, MMA_M, MMA_N, pds)

    // P and dS registers -> shared memory, as they are.
    auto smem_tiled_copy_PdS = make_tiled_copy_C(typename Traits::SmemCopyAtomPdS{}, tiled_mma_sdp);
    auto smem_thr_copy_PdS = smem_tiled_copy_PdS.get_thread_slice(thread_idx);
    Tensor tPsP = smem_thr_copy_PdS.partition_D(sP);     // (CPY, CPY_M, CPY_N, pds)
    Tensor tdSsdS = smem_thr_copy_PdS.partition_D(sdS);  // (CPY, CPY_M, CPY_N, pds)

    // (query, key) inside the block of each S element of this thread, for the mask.
    Tensor tScS = make_rowcol(thr_mma_sdp.partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kBlockN>>{})));
    int const kv_row_end = seq.seqlen_k() - n_block * kBlockN;

    // dQ's float32 accumulator rows of this head.
    int64_t const dq_accum_rows = seq.q_accum_head_row(bidh);
    // Deterministic: this warpgroup's half of dQ, parked over Q's (warpgroup 0) or dO's (warpgroup 1) stage once
    // read: (thread, element), sm80/gmem.h accum_block's order with one chunk per warpgroup.
    bool const deterministic = bwd.dq_semaphore != nullptr;
    int const thread_in_group = thread_idx % cutlass::NumThreadsPerWarpGroup;
    Element* const dq_half_stages = warp_group == 0 ? shared.smem_q.data() : shared.smem_do.data();

    int pds = 0;  // P's and dS's stage
    auto step = [&](int m_block, auto masked) CUTLASS_LAMBDA_FUNC_INLINE {
      int const stage = pipes.state.index();
      // K's and V's descriptors, built in the step from pointers the optimiser cannot see through (as in
      // BwdMainloop::mma: hoisted, they were held in registers and spilled).
      Element* k_ptr = shared.smem_k.data();
      Element* v_ptr = shared.smem_v.data();
      asm volatile("" : "+l"(k_ptr), "+l"(v_ptr));
      Tensor sK = make_tensor(make_smem_ptr(k_ptr), typename Traits::SmemLayoutK{});    // (N, D)
      Tensor sKt = make_tensor(make_smem_ptr(k_ptr), typename Traits::SmemLayoutKt{});  // (D, N)
      Tensor sV = make_tensor(make_smem_ptr(v_ptr), typename Traits::SmemLayoutV{});    // (N, D)
      Tensor tSrK = wg_mma_sdp.partition_fragment_B(sK);    // (MMA, MMA_N, MMA_D)
      Tensor tdPrV = wg_mma_sdp.partition_fragment_B(sV);   // (MMA, MMA_N, MMA_D)
      Tensor tdQrKt = wg_mma_dq.partition_fragment_B(sKt);  // (MMA, MMA_D, MMA_N)
      CUTE_STATIC_ASSERT_V(size<2>(tSrQ) == size<2>(tSrK));      // S: the head-dim k-blocks pair up
      CUTE_STATIC_ASSERT_V(size<2>(tdQrdS) == size<2>(tdQrKt));  // dQ: the key k-blocks pair up
      Tensor tSrS = partition_fragment_C(tiled_mma_sdp, Shape<Int<kBlockM>, Int<kBlockN>>{});    // (MMA, MMA_M, MMA_N)
      Tensor tdPrdP = partition_fragment_C(tiled_mma_sdp, Shape<Int<kBlockM>, Int<kBlockN>>{});  // (MMA, MMA_M, MMA_N)
      // P = exp2(S * scale * log2(e) - LSE * log2(e)) and dS = P * (dP - D): a thread's rows are queries, whose
      // statistics it reads from this stage's rows through the accumulator's partition, into registers while the
      // gemms run.
      pipes.q.consumer_wait(pipes.state);
      wgmma_gemm</*kZeroInit=*/true>(tiled_mma_sdp, tSrQ(_, _, _, stage), tSrK, tSrS);
      Tensor lse_log2 = load_broadcast(make_rowcol(thr_mma_sdp.partition_C(sLSELog2(_, _, stage))));  // (queries, keys)
      pipes.dO.consumer_wait(pipes.state);
      wgmma_gemm</*kZeroInit=*/true>(tiled_mma_sdp, tdPrdO(_, _, _, stage), tdPrV, tdPrdP);
      Tensor dsum = load_broadcast(make_rowcol(thr_mma_sdp.partition_C(sD(_, _, stage))));  // (queries, keys)
      warpgroup_wait<1>();
      warpgroup_fence_operand(tSrS);
      Tensor scores = make_rowcol(tSrS);  // (queries, keys)
      if constexpr (decltype(masked)::value) {
        apply_mask<kCausal>(scores, tScS, m_block * kBlockM, n_block * kBlockN, seq.seqlen_k(), seq.causal_offset());
      }
      scores_to_probs(scores, lse_log2, bwd.softmax_scale_log2);
      warpgroup_wait<0>();
      warpgroup_fence_operand(tdPrdP);
      Tensor dscores = make_rowcol(tdPrdP);  // dS = P * (dP - D), in place of dP
      dprobs_to_dscores(dscores, scores, dsum);
      Tensor rP = make_tensor_like<Element>(tSrS);
      Tensor rdS = make_tensor_like<Element>(tdPrdP);
      convert_into(tSrS, rP);
      convert_into(tdPrdP, rdS);
      copy(smem_tiled_copy_PdS, smem_thr_copy_PdS.retile_S(rP), tPsP(_, _, _, pds));
      copy(smem_tiled_copy_PdS, smem_thr_copy_PdS.retile_S(rdS), tdSsdS(_, _, _, pds));
      // Both warpgroups' halves in shared memory (generic-proxy writes -> visible to wgmma) before any gemm reads
      // them.
      cutlass::arch::fence_view_async_shared();
      NamedBarrier::sync(kNumMmaThreads, uint32_t(BwdNamedBarrierId::kdS));

      Tensor tdQrdQ = partition_fragment_C(tiled_mma_dq, select<0, 2>(TileShape_MNK{}));  // (MMA, MMA_M, MMA_D)
      wgmma_gemm</*kZeroInit=*/false>(tiled_mma_dkv, tdVrdOt(_, _, _, stage), tdVrPt(_, _, _, pds), tdVrdV);
      wgmma_gemm</*kZeroInit=*/true>(tiled_mma_dq, tdQrdS(_, _, _, pds), tdQrKt, tdQrdQ);
      wgmma_gemm</*kZeroInit=*/false>(tiled_mma_dkv, tdKrQt(_, _, _, stage), tdKrdSt(_, _, _, pds), tdKrdK);
      warpgroup_wait<2>();  // dV^T done: dO read
      if (!deterministic) { pipes.dO.consumer_release(pipes.state); }
      warpgroup_wait<1>();  // dQ done; dK^T still running
      warpgroup_fence_operand(tdQrdQ);
      if (!deterministic) {
        Tensor tdQgdQ = sm80::accum_block<kBlockM, kHeadDim, kNumMmaThreads, Traits::kdQAccumGroupThreads,
                                          Traits::kdQAccumVec>(bwd.dq_accum_ptr, dq_accum_rows, m_block)(
            thread_idx, _);  // (elements)
        sm80::atomic_add_accum(tdQgdQ, tdQrdQ);
      }
      warpgroup_wait<0>();
      warpgroup_fence_operand(tdKrdK);
      if (!deterministic) {
        pipes.q.consumer_release(pipes.state);
      } else {
        // Both warpgroups' gemms have read this stage's Q and dO: park the dQ halves over them for the dQ warp,
        // which takes the turn and releases the stages to the producer once it has reduced both. The consumers do
        // not wait for the turnstile.
        NamedBarrier::sync(kNumMmaThreads, uint32_t(BwdNamedBarrierId::kStagesRead));
        Tensor sdQ = make_tensor(make_smem_ptr(reinterpret_cast<float*>(dq_half_stages + stage * Traits::kStageElems)),
                                 typename Traits::SmemLayoutdQHalf{});  // (thread, element)
        CUTE_STATIC_ASSERT_V(size(tdQrdQ) == size<1>(sdQ));
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < size(tdQrdQ); ++i) { sdQ(thread_in_group, i) = tdQrdQ(i); }
        cutlass::arch::fence_view_async_shared();  // visible to the bulk reduction (async proxy)
        shared.barrier_dq_full[stage].arrive();
      }
      ++pipes.state;
      pds = pds + 1 == Traits::kPdSStages ? 0 : pds + 1;
    };

    Base::walk_steps(bwd, range, n_block, kv_row_end, step);
  }
};

}  // namespace flashcute::sm90
