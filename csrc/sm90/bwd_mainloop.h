// The SM90 backward mainloop of one K/V block: the producer's TMA loads, the dQ warp's bulk reductions and the
// consumers' five gemms per Q block.
//
// Producer (one thread): for each Q block that sees the K/V block, Q with its rows' LSE * log2(e), and dO with its
// rows' D, through kStages-deep pipelines (TMA for the tiles, a bulk copy for the row statistics, all counted on the
// stage's full barrier); K rides on the first Q block's barrier and V on the first dO block's, so the first S^T
// gemm needs only K and Q. Q, K, V and dO are loaded before the preprocess has finished (programmatic launch); LSE
// and D, which it writes, after. TMA zero-fills rows past seqlen and columns past
// head_dim; the statistics of padding rows are +inf and 0 (the preprocess wrote them), so their P and dS are 0.
//
// Consumer warpgroups (64 keys each), per Q block m:
//   S^T = K.Q(m)^T ; dP^T = V.dO(m)^T               (SS, async)
//   P^T = exp2(S^T * scale * log2(e) - LSE * log2(e)) (masked where needed) ; dS^T = P^T * (dP^T - D)
//   dS^T -> dS in shared memory (stmatrix .trans)  ; dV += P^T.dO(m)   (RS: P^T from registers)
//   [every warpgroup's dS written] ; dQ(m) = dS.K (SS) ; dK += dS^T.Q(m) (RS)
//   dQ(m) -> this warpgroup's chunk of one of two shared-memory buffers, for the dQ warp to add into the float32
//   accumulator with one bulk reduction per chunk.
// The softmax scale of dK and dQ is applied once, at the end (dK) and in the postprocess (dQ).
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/pipeline/pipeline.hpp>

#include "common/block_range.h"
#include "common/mask.h"
#include "common/params.h"
#include "common/seqlen.h"
#include "common/turnstile.h"
#include "common/utils.h"
#include "sm80/gmem.h"
#include "sm90/bwd_kernel_traits.h"
#include "sm90/gmem.h"
#include "sm90/named_barriers.h"
#include "sm90/wgmma.h"

namespace flashcute::sm90 {

using namespace cute;

// The Q and dO pipelines: they advance together (one stage index for both, and for dS).
template <class Traits>
struct BwdPipelines {
  using Pipeline = typename Traits::PipelineQdO;
  // empty: every consumer thread after the block's dK (Q) or dV (dO) gemm, or, where the mainloop parks dQ over
  // the spent stages (queries along M, deterministic), the dQ warp once after reducing it: release_arrivals.
  Pipeline q;   // full: Q tile + LSE rows (TMA bytes)
  Pipeline dO;  // full: dO tile + D rows (TMA bytes)
  typename Pipeline::PipelineState state;

  template <class SharedStorage>
  CUTLASS_DEVICE BwdPipelines(SharedStorage& shared, bool is_producer, int release_arrivals)
      : q(shared.pipeline_q, params(is_producer, release_arrivals), Shape<_1, _1, _1>{}),
        dO(shared.pipeline_do, params(is_producer, release_arrivals), Shape<_1, _1, _1>{}) {
    if (is_producer) { state = cutlass::make_producer_start_state<Pipeline>(); }
  }

 private:
  CUTLASS_DEVICE static typename Pipeline::Params params(bool is_producer, int release_arrivals) {
    typename Pipeline::Params p;
    p.transaction_bytes = Traits::kTmaBytesQdO;
    p.role = is_producer ? Pipeline::ThreadCategory::Producer : Pipeline::ThreadCategory::Consumer;
    p.is_leader = threadIdx.x == 0;
    p.num_consumers = release_arrivals;
    return p;
  }
};

// The softmax gradient's elementwise steps, on (rows, cols) views of the S and dP accumulators (keys or queries
// along the rows, either plan) and of the row statistics broadcast alike.
// P = exp2(S * scale * log2(e) - LSE * log2(e)), in place of S.
template <class TensorS, class TensorLse>
CUTLASS_DEVICE void scores_to_probs(TensorS& scores, TensorLse const& lse_log2, float softmax_scale_log2) {
  CUTLASS_PRAGMA_UNROLL
  for (int mi = 0; mi < size<0>(scores); ++mi) {
    CUTLASS_PRAGMA_UNROLL
    for (int nj = 0; nj < size<1>(scores); ++nj) {
      scores(mi, nj) = exp2f(scores(mi, nj) * softmax_scale_log2 - lse_log2(mi, nj));
    }
  }
}
// dS = P * (dP - D), in place of dP.
template <class TensorDP, class TensorP, class TensorD>
CUTLASS_DEVICE void dprobs_to_dscores(TensorDP& dscores, TensorP const& probs, TensorD const& dsum) {
  CUTLASS_PRAGMA_UNROLL
  for (int mi = 0; mi < size<0>(dscores); ++mi) {
    CUTLASS_PRAGMA_UNROLL
    for (int nj = 0; nj < size<1>(dscores); ++nj) {
      dscores(mi, nj) = probs(mi, nj) * (dscores(mi, nj) - dsum(mi, nj));
    }
  }
}

template <class Traits, bool kCausal>
struct BwdMainloop {
  using Element = typename Traits::Element;
  using TileShape_MNK = typename Traits::TileShape_MNK;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kHeadDim = Traits::kHeadDim;
  static constexpr int kNumMmaThreads = Traits::kNumMmaThreads;

  using TmaLoadQdO = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensorQKVO<Element>{},
                                            take<0, 2>(typename Traits::SmemLayoutQ{}), select<0, 2>(TileShape_MNK{}), _1{}));
  using TmaLoadK = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensorQKVO<Element>{}, typename Traits::SmemLayoutK{},
                                          select<1, 2>(TileShape_MNK{}), _1{}));
  using TmaLoadV = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensorQKVO<Element>{}, typename Traits::SmemLayoutV{},
                                          select<1, 2>(TileShape_MNK{}), _1{}));

  struct Params {
    TmaLoadQdO tma_load_q;
    TmaLoadQdO tma_load_do;
    TmaLoadK tma_load_k;
    TmaLoadV tma_load_v;
    ShapeQKVO shape_q;
    ShapeQKVO shape_kv;
  };

  static Params make_params(BwdParams const& p) {
    auto [mQ, mK, mV, mO] = make_gmem_tensors<Element>(p);
    Tensor mdO = get<0>(make_grad_gmem_tensors<Element>(p));
    auto q_tile = select<0, 2>(TileShape_MNK{});
    auto kv_tile = select<1, 2>(TileShape_MNK{});
    return {make_tma_copy(SM90_TMA_LOAD{}, mQ, take<0, 2>(typename Traits::SmemLayoutQ{}), q_tile, _1{}),
            make_tma_copy(SM90_TMA_LOAD{}, mdO, take<0, 2>(typename Traits::SmemLayoutdO{}), q_tile, _1{}),
            make_tma_copy(SM90_TMA_LOAD{}, mK, typename Traits::SmemLayoutK{}, kv_tile, _1{}),
            make_tma_copy(SM90_TMA_LOAD{}, mV, typename Traits::SmemLayoutV{}, kv_tile, _1{}),
            mQ.shape(), mK.shape()};
  }

  // The plan's own mbarriers, by one thread before the pipelines' (which fence the initialisations): none here.
  template <class SharedStorage>
  CUTLASS_DEVICE static void init_barriers(SharedStorage&) {}
  // Arrivals that release a Q / dO stage (BwdPipelines): every consumer thread.
  CUTLASS_DEVICE static int stage_release_arrivals(BwdParams const&) { return Traits::kNumMmaThreads; }

  CUTLASS_DEVICE static void prefetch_descriptors(Params const& params) {
    cute::prefetch_tma_descriptor(params.tma_load_q.get_tma_descriptor());
    cute::prefetch_tma_descriptor(params.tma_load_do.get_tma_descriptor());
    cute::prefetch_tma_descriptor(params.tma_load_k.get_tma_descriptor());
    cute::prefetch_tma_descriptor(params.tma_load_v.get_tma_descriptor());
  }

  // Producer, one thread.
  template <class SharedStorage>
  CUTLASS_DEVICE static void load(Params const& params, BwdParams const& bwd, SharedStorage& shared,
                                  BwdPipelines<Traits>& pipes, SeqInfo const& seq, int n_block, int bidh, int bidh_kv,
                                  QBlockRange const& range) {
    Tensor mQ = params.tma_load_q.get_tma_tensor(params.shape_q);
    Tensor mdO = params.tma_load_do.get_tma_tensor(params.shape_q);
    Tensor mK = params.tma_load_k.get_tma_tensor(params.shape_kv);
    Tensor mV = params.tma_load_v.get_tma_tensor(params.shape_kv);
    // Slicing one sequence and head first keeps every box inside them: rows past its seqlen are out of bounds.
    SequenceRows const q_rows = SequenceRows::of_q(bwd, seq);
    SequenceRows const k_rows = SequenceRows::of_k(bwd, seq);
    Tensor gQ = local_tile(q_rows.of_head(mQ, bidh), select<0, 2>(TileShape_MNK{}), make_coord(_, _0{}));    // (M, D, m)
    Tensor gdO = local_tile(q_rows.of_head(mdO, bidh), select<0, 2>(TileShape_MNK{}), make_coord(_, _0{}));  // (M, D, m)
    Tensor gK = local_tile(k_rows.of_head(mK, bidh_kv), select<1, 2>(TileShape_MNK{}), make_coord(n_block, _0{}));  // (N, D)
    Tensor gV = local_tile(k_rows.of_head(mV, bidh_kv), select<1, 2>(TileShape_MNK{}), make_coord(n_block, _0{}));  // (N, D)
    Tensor gLSELog2 = local_tile(sm80::make_row_workspace_tensor(bwd.lse_log2_ptr, seq, bidh),
                                 Shape<Int<kBlockM>>{}, make_coord(_));  // (M, m)
    Tensor gD = local_tile(sm80::make_row_workspace_tensor(bwd.dsoftmax_sum_ptr, seq, bidh),
                           Shape<Int<kBlockM>>{}, make_coord(_));  // (M, m)

    Tensor sQ = make_tensor(make_smem_ptr(shared.smem_q.data()), typename Traits::SmemLayoutQ{});
    Tensor sdO = make_tensor(make_smem_ptr(shared.smem_do.data()), typename Traits::SmemLayoutdO{});
    Tensor sK = make_tensor(make_smem_ptr(shared.smem_k.data()), typename Traits::SmemLayoutK{});
    Tensor sV = make_tensor(make_smem_ptr(shared.smem_v.data()), typename Traits::SmemLayoutV{});
    Tensor sLSELog2 = make_tensor(make_smem_ptr(shared.smem_lse_log2.data()), typename Traits::SmemLayoutRowStats{});
    Tensor sD = make_tensor(make_smem_ptr(shared.smem_dsum.data()), typename Traits::SmemLayoutRowStats{});

    auto [tQgQ, tQsQ] = tma_partition(params.tma_load_q, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sQ),
                                      group_modes<0, 2>(gQ));  // (TMA, m), (TMA, stage)
    auto [tdOgdO, tdOsdO] = tma_partition(params.tma_load_do, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sdO),
                                          group_modes<0, 2>(gdO));  // (TMA, m), (TMA, stage)
    auto [tKgK, tKsK] = tma_partition(params.tma_load_k, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sK),
                                      group_modes<0, 2>(gK));  // (TMA), (TMA)
    auto [tVgV, tVsV] = tma_partition(params.tma_load_v, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sV),
                                      group_modes<0, 2>(gV));  // (TMA), (TMA)

    constexpr int kRowStatBytes = kBlockM * sizeof(float);
    QBlockWalk const walk = q_walk(bwd, range, n_block);
    for (int i = 0; i < walk.count; ++i) {
      int const m_block = walk[i];
      bool const first = i == 0;
      int const stage = pipes.state.index();
      // K's (V's) bytes are expected before the stage's arrival, so the phase cannot complete without them.
      if (first) { pipes.q.producer_expect_transaction(pipes.state, Traits::kTmaBytesKV); }
      pipes.q.producer_acquire(pipes.state);
      auto* q_full = pipes.q.producer_get_barrier(pipes.state);
      if (first) { copy(params.tma_load_k.with(*q_full), tKgK, tKsK); }
      // Q, dO and the dQ accumulator are read (added into) by every K/V block of the head; K and V once.
      copy(params.tma_load_q.with(*q_full, 0, TMA::CacheHintSm90::EVICT_LAST), tQgQ(_, m_block), tQsQ(_, stage));
      if (first) { wait_for_prior_grid(); }  // LSE and D: the preprocess's
      SM90_BULK_COPY_G2S::copy(&gLSELog2(0, m_block), q_full, &sLSELog2(0, stage), kRowStatBytes);
      if (first) { pipes.dO.producer_expect_transaction(pipes.state, Traits::kTmaBytesKV); }
      pipes.dO.producer_acquire(pipes.state);
      auto* do_full = pipes.dO.producer_get_barrier(pipes.state);
      if (first) { copy(params.tma_load_v.with(*do_full), tVgV, tVsV); }
      copy(params.tma_load_do.with(*do_full, 0, TMA::CacheHintSm90::EVICT_LAST), tdOgdO(_, m_block), tdOsdO(_, stage));
      SM90_BULK_COPY_G2S::copy(&gD(0, m_block), do_full, &sD(0, stage), kRowStatBytes);
      ++pipes.state;
    }
  }

  // Deterministic mode: the turnstile of this head's Q blocks (null otherwise). The K/V blocks visiting a Q block,
  // a prefix [0, n_end) of them (common/block_range.h), add its dQ in a fixed order (dq_turn): without causal, by
  // the step of their rotated walks (q_walk) at which they reach the Q block, in groups of at most the SM count
  // (rotated_walk_turn: a block waits for the higher blocks of its group, which must be resident); with causal,
  // decreasing n_block, since block n starts at the diagonal and a higher n_block reaches a given Q block sooner
  // (in n_block order, each would wait for all the lower ones' longer walks).
  // Q block m_block's counter of head bidh in `counters` (dq_semaphore, dq_claims or dq_done; null if they are).
  CUTLASS_DEVICE static int* dq_block_counter(int* counters, SeqInfo const& seq, int bidh, int m_block) {
    return counters == nullptr ? nullptr : counters + seq.q_block_semaphore(bidh, m_block, kBlockM);
  }
  CUTLASS_DEVICE static int dq_turn(BwdParams const& bwd, SeqInfo const& seq, int m_block, int n_block) {
    int const n_end = kv_blocks_visiting<kBlockM, kBlockN, kCausal>(seq, m_block);
    if constexpr (kCausal) { return n_end - 1 - n_block; }
    return rotated_walk_turn(n_end, (seq.seqlen_q() + kBlockM - 1) / kBlockM, m_block, n_block,
                             rotation_group(bwd));
  }
  // Deterministic and causal, a dQ block's turn goes to the highest K/V block first (dq_turn): the grids launch
  // each sequence's blocks highest first too (bwd_kernel.h; varlen: sequence_head_block_of), so that no CTA waits for
  // one not yet resident (FlashAttention-3's shortest first).
  CUTLASS_HOST_DEVICE static bool launch_highest_block_first(BwdParams const& bwd) {
    return kCausal && bwd.dq_semaphore != nullptr;
  }
  // The K/V blocks whose walks rotate together (rotated_walk_turn): at most the CTAs resident at once, one per SM.
  CUTLASS_DEVICE static int rotation_group(BwdParams const& bwd) { return bwd.num_sms > 0 ? bwd.num_sms : 1; }
  // The order this K/V block walks its Q blocks in. Deterministic without causal, each K/V block of a head starts
  // at its own Q block (rotated_walk_turn), so that none waits at the dQ turnstile for the ones before it at every
  // Q block; with causal they start at the diagonal already.
  CUTLASS_DEVICE static QBlockWalk q_walk(BwdParams const& bwd, QBlockRange const& range, int n_block) {
    int const count = range.m_block_max - range.m_block_min;
    bool const rotate = !kCausal && bwd.dq_semaphore != nullptr && count > 0;
    return {range.m_block_min, count, rotate ? rotated_walk_start(n_block, rotation_group(bwd), count) : 0};
  }

  // dq_claims (not deterministic): a Q block's claim counter counts the K/V blocks that have claimed it, plus
  // kDqZeroed once the first of them has zeroed its rows of the accumulator. The dQ warp claims each block of its
  // walk two blocks ahead (claim_dq_block: lane 0's atomic, its result read a block later), zeroes it one block ahead
  // if it was first (zero_if_first_claim), and waits for the zeros before its own additions (wait_dq_block_zeroed).
  static constexpr int kDqZeroed = 1 << 30;
  CUTLASS_DEVICE static int claim_dq_block(int* counter) {
    return cutlass::canonical_lane_idx() == 0 ? atomicAdd(counter, 1) : 0;
  }
  CUTLASS_DEVICE static void zero_if_first_claim(int claimed_before, int* counter, float* dq_accum_block) {
    if (__shfl_sync(0xffffffff, claimed_before, 0) != 0) { return; }
    float4* const rows = reinterpret_cast<float4*>(dq_accum_block);
    for (int i = cutlass::canonical_lane_idx(); i < Traits::kdQElems / 4; i += cutlass::NumThreadsPerWarp) {
      rows[i] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
    // Each lane releases its own zeros, without waiting for them: kDqZeroed once all 32 shares have landed.
    release_add(counter, kDqZeroed / cutlass::NumThreadsPerWarp);
  }
  // One thread, before its bulk reductions into the block: the zeros (generic proxy) ordered before them (async).
  CUTLASS_DEVICE static void wait_dq_block_zeroed(int const* counter) {
    spin_until_at_least(counter, kDqZeroed);
    fence_proxy_async_global();
  }

  // The dQ warp of the producer warpgroup (all 32 lanes, lane 0 issues), where dQ goes through shared memory: each
  // consumer warpgroup's chunk of a Q block's dQ, once that warpgroup has put it in shared memory, is added into
  // this head's float32 accumulator by one bulk reduction (the chunks in warpgroup order, a bulk group each), in
  // turn with a turnstile; with dq_claims, once the block is zeroed; with dq_done, counted once complete.
  // One dQ warp (bwd_kernel.h passes each dQ warp its index, 0 here).
  static constexpr int kdQWarps = 1;
  template <class SharedStorage>
  CUTLASS_DEVICE static void store_dq(BwdParams const& bwd, SharedStorage& shared, SeqInfo const& seq, int n_block,
                                      int bidh, QBlockRange const& range, int /*dq_warp*/) {
    using cutlass::arch::NamedBarrier;
    constexpr int kThreads = cutlass::NumThreadsPerWarpGroup + cutlass::NumThreadsPerWarp;
    constexpr int kWarpGroups = Traits::kNumMmaWarpGroups;
    constexpr int kBuffers = Traits::kdQStages;
    constexpr int kChunk = Traits::kdQChunkElems;
    bool const lane0 = cute::elect_one_sync();
    wait_for_prior_grid();  // the preprocess has zeroed the dQ accumulator (not with dq_claims)
    float* const dq_accum_head = bwd.dq_accum_ptr + seq.q_accum_head_row(bidh) * kHeadDim;
    QBlockWalk const walk = q_walk(bwd, range, n_block);
    int* const claims = bwd.dq_claims;  // null: the preprocess zeroed the accumulator
    auto claim_counter = [&](int i) { return dq_block_counter(claims, seq, bidh, walk[i]); };
    auto accum_block = [&](int i) { return dq_accum_head + int64_t(walk[i]) * Traits::kdQElems; };
    // dq_done: deterministic, the turnstile counts each block's completed additions already; otherwise this warp
    // counts the walk's blocks at its end, once all their reductions have completed (counted block by block, with a
    // release just after the next block's reductions, the kernel was slower: benchmarks/notes.md#d-sm90-bwd-dq-done).
    int* const done = bwd.dq_semaphore == nullptr ? bwd.dq_done : nullptr;
    // One loop per mode (claims or the turnstile, never both), so that each keeps only its own values in the dQ
    // warp's registers: one loop for all three spilled (benchmarks/notes.md#d-sm90-bwd-dq-warp-modes).
    auto reduce_blocks = [&](auto with_claims, auto with_turnstile) CUTLASS_LAMBDA_FUNC_INLINE {
      constexpr bool kClaims = decltype(with_claims)::value;
      constexpr bool kTurnstile = decltype(with_turnstile)::value;
      int next_claim = 0;  // lane 0: what the claim of walk step i + 1 found
      if constexpr (kClaims) {
        if (walk.count > 0) {
          zero_if_first_claim(claim_dq_block(claim_counter(0)), claim_counter(0), accum_block(0));
          if (walk.count > 1) { next_claim = claim_dq_block(claim_counter(1)); }
        }
      }
      for (int i = 0; i < walk.count; ++i) {
        int const m_block = walk[i];
        int const buffer = i % kBuffers;
        // Warpgroup w's chunk of this buffer is free once block m - kBuffers's reduction of it has read it: of the
        // bulk groups committed since, kBuffers * kWarpGroups - 1 - w may still be reading.
        for_each(make_int_sequence<kWarpGroups>{}, [&](auto wg) {
          if (lane0) { tma_store_wait<kBuffers * kWarpGroups - 1 - decltype(wg)::value>(); }
          __syncwarp();
          NamedBarrier::arrive(kThreads, uint32_t(BwdNamedBarrierId::kdQEmptyFirst) + wg);
        });
        if constexpr (kClaims) {  // while the consumers compute this block's dQ
          if (i + 1 < walk.count) {
            zero_if_first_claim(next_claim, claim_counter(i + 1), accum_block(i + 1));
            if (i + 2 < walk.count) { next_claim = claim_dq_block(claim_counter(i + 2)); }
          }
          if (lane0) { wait_dq_block_zeroed(claim_counter(i)); }
          __syncwarp();
        }
        int* const counter = kTurnstile ? dq_block_counter(bwd.dq_semaphore, seq, bidh, m_block) : nullptr;
        if constexpr (kTurnstile) {
          if (lane0) { spin_until_at_least(counter, dq_turn(bwd, seq, m_block, n_block)); }
        }
        for (int wg = 0; wg < kWarpGroups; ++wg) {
          NamedBarrier::sync(kThreads, uint32_t(BwdNamedBarrierId::kdQFullFirst) + wg);
          if (lane0) {
            bulk_reduce_add_f32(dq_accum_head + int64_t(m_block) * Traits::kdQElems + wg * kChunk,
                                shared.smem_dq.data() + buffer * Traits::kdQElems + wg * kChunk,
                                kChunk * sizeof(float), TMA::CacheHintSm90::EVICT_LAST);
            tma_store_arrive();
          }
        }
        if constexpr (kTurnstile) {
          if (lane0) {
            bulk_wait_complete();
            fence_proxy_async_global();  // the postprocess reads them after the turnstile's count (dq_done)
            turnstile_release(counter);
          }
        }
        __syncwarp();
      }
    };
    if (claims != nullptr) {
      reduce_blocks(cute::true_type{}, cute::false_type{});
    } else if (bwd.dq_semaphore != nullptr) {
      reduce_blocks(cute::false_type{}, cute::true_type{});
    } else {
      reduce_blocks(cute::false_type{}, cute::false_type{});
    }
    if (done == nullptr) {
      if (lane0) { tma_store_wait<0>(); }  // shared memory read before the CTA exits
      return;
    }
    if (lane0) {
      bulk_wait_complete();
      fence_proxy_async_global();  // the completed bulk writes (async proxy) before the release (generic)
    }
    __syncwarp();
    __threadfence();  // every lane's counts after them
    for (int i = cutlass::canonical_lane_idx(); i < walk.count; i += cutlass::NumThreadsPerWarp) {
      atomicAdd(dq_block_counter(done, seq, bidh, walk[i]), 1);
    }
  }

  // Consumer warpgroups: accumulate the K/V block's dK (unscaled) and dV over its Q blocks.
  template <class SharedStorage, class FragdKV>
  CUTLASS_DEVICE static void mma(BwdParams const& bwd, SharedStorage& shared, BwdPipelines<Traits>& pipes,
                                 FragdKV& tdKrdK, FragdKV& tdVrdV, SeqInfo const& seq, int n_block,
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

    Tensor sQ = make_tensor(make_smem_ptr(shared.smem_q.data()), typename Traits::SmemLayoutQ{});     // (M, D, stage)
    Tensor sdO = make_tensor(make_smem_ptr(shared.smem_do.data()), typename Traits::SmemLayoutdO{});  // (M, D, stage)
    Tensor sQt = make_tensor(make_smem_ptr(shared.smem_q.data()), typename Traits::SmemLayoutQt{});    // (D, M, stage)
    Tensor sdOt = make_tensor(make_smem_ptr(shared.smem_do.data()), typename Traits::SmemLayoutdOt{}); // (D, M, stage)
    Tensor sdS = make_tensor(make_smem_ptr(shared.smem_ds.data()), typename Traits::SmemLayoutdS{});    // (M, N, stage)
    Tensor sdSt = make_tensor(make_smem_ptr(shared.smem_ds.data()), typename Traits::SmemLayoutdSt{});  // (N, M, stage)
    Tensor sLSELog2 = make_tensor(make_smem_ptr(shared.smem_lse_log2.data()),
                                  typename Traits::SmemLayoutRowStatsMma{});  // (N, M, stage), stride 0 along N
    Tensor sD = make_tensor(make_smem_ptr(shared.smem_dsum.data()), typename Traits::SmemLayoutRowStatsMma{});
    Tensor sdQ = make_tensor(make_smem_ptr(shared.smem_dq.data()), typename Traits::SmemLayoutdQ{});  // (thread, element, buffer)
    int dq_buffer = 0;
    constexpr int kdQThreads = cutlass::NumThreadsPerWarpGroup + cutlass::NumThreadsPerWarp;

    // S^T = K.Q^T and dP^T = V.dO^T (their K and V operands: in the step)
    Tensor tSrQ = wg_mma_sdp.partition_fragment_B(sQ);     // (MMA, MMA_M, MMA_D, stage)
    Tensor tdPrdO = wg_mma_sdp.partition_fragment_B(sdO);  // (MMA, MMA_M, MMA_D, stage)
    // dV += P^T.dO and dK += dS^T.Q: the B operands, transposed views
    Tensor tdVrdOt = wg_mma_dkv.partition_fragment_B(sdOt);  // (MMA, MMA_D, MMA_M, stage)
    Tensor tdKrQt = wg_mma_dkv.partition_fragment_B(sQt);    // (MMA, MMA_D, MMA_M, stage)
    // dQ = dS.K
    Tensor tdQrdS = wg_mma_dq.partition_fragment_A(sdS);  // (MMA, MMA_M, MMA_N, stage)

    // dS^T registers -> dS in shared memory, transposed by stmatrix.
    auto smem_tiled_copy_dS = make_tiled_copy_C(typename Traits::SmemCopyAtomdS{}, tiled_mma_sdp);
    auto smem_thr_copy_dS = smem_tiled_copy_dS.get_thread_slice(thread_idx);
    Tensor tdSsdS = smem_thr_copy_dS.partition_D(sdSt);  // (CPY, CPY_N, CPY_M, stage)

    // (key, query) inside the block of each S^T element of this thread, for the mask.
    Tensor tScS = make_rowcol(thr_mma_sdp.partition_C(make_identity_tensor(Shape<Int<kBlockN>, Int<kBlockM>>{})));
    int const kv_row_end = seq.seqlen_k() - n_block * kBlockN;

    auto step = [&](int m_block, auto masked) CUTLASS_LAMBDA_FUNC_INLINE {
      int const stage = pipes.state.index();
      // K's and V's descriptors are the same at every step. Built here, from pointers the optimiser cannot see
      // through, they are recomputed with a few uniform-register adds; hoisted out of the loop they were held in
      // registers, and spilled (benchmarks/notes.md#d-sm90-bwd-kv-descriptors).
      Element* k_ptr = shared.smem_k.data();
      Element* v_ptr = shared.smem_v.data();
      asm volatile("" : "+l"(k_ptr), "+l"(v_ptr));
      Tensor sK = make_tensor(make_smem_ptr(k_ptr), typename Traits::SmemLayoutK{});    // (N, D)
      Tensor sKt = make_tensor(make_smem_ptr(k_ptr), typename Traits::SmemLayoutKt{});  // (D, N)
      Tensor sV = make_tensor(make_smem_ptr(v_ptr), typename Traits::SmemLayoutV{});    // (N, D)
      Tensor tSrK = wg_mma_sdp.partition_fragment_A(sK);     // (MMA, MMA_N, MMA_D)
      Tensor tdPrV = wg_mma_sdp.partition_fragment_A(sV);    // (MMA, MMA_N, MMA_D)
      Tensor tdQrKt = wg_mma_dq.partition_fragment_B(sKt);   // (MMA, MMA_D, MMA_N)
      CUTE_STATIC_ASSERT_V(size<2>(tSrK) == size<2>(tSrQ));     // S^T: the head-dim k-blocks pair up
      CUTE_STATIC_ASSERT_V(size<2>(tdQrdS) == size<2>(tdQrKt)); // dQ: the key k-blocks pair up
      Tensor tSrS = partition_fragment_C(tiled_mma_sdp, Shape<Int<kBlockN>, Int<kBlockM>>{});   // (MMA, MMA_N, MMA_M)
      Tensor tdPrdP = partition_fragment_C(tiled_mma_sdp, Shape<Int<kBlockN>, Int<kBlockM>>{});  // (MMA, MMA_N, MMA_M)
      // P^T = exp2(S^T * scale * log2(e) - LSE * log2(e)) and dS^T = P^T * (dP^T - D): a thread's columns are
      // queries, whose statistics it reads from this stage's rows through the accumulator's partition, into
      // registers while the gemms run where they fit (read after the waits, their latency stalls every step).
      auto row_stats = [&](auto const& sStats) {
        Tensor stats = make_rowcol(thr_mma_sdp.partition_C(sStats(_, _, stage)));  // (keys, queries)
        if constexpr (Traits::kRowStatsInRegisters) { return load_broadcast(stats); } else { return stats; }
      };
      pipes.q.consumer_wait(pipes.state);
      wgmma_gemm</*kZeroInit=*/true>(tiled_mma_sdp, tSrK, tSrQ(_, _, _, stage), tSrS);
      Tensor lse_log2 = row_stats(sLSELog2);
      pipes.dO.consumer_wait(pipes.state);
      wgmma_gemm</*kZeroInit=*/true>(tiled_mma_sdp, tdPrV, tdPrdO(_, _, _, stage), tdPrdP);
      Tensor dsum = row_stats(sD);
      warpgroup_wait<1>();
      warpgroup_fence_operand(tSrS);
      Tensor scores = make_rowcol(tSrS);  // (keys, queries)
      if constexpr (decltype(masked)::value) {
        apply_mask_transposed<kCausal>(scores, tScS, n_block * kBlockN, m_block * kBlockM, seq.seqlen_k(),
                                       seq.causal_offset());
      }
      scores_to_probs(scores, lse_log2, bwd.softmax_scale_log2);
      warpgroup_wait<0>();
      warpgroup_fence_operand(tdPrdP);
      Tensor dscores = make_rowcol(tdPrdP);  // dS^T = P^T * (dP^T - D), in place of dP^T
      dprobs_to_dscores(dscores, scores, dsum);
      // 16-bit copies, register for register: P^T and dS^T as the A operands of the dV and dK gemms.
      Tensor rP = make_tensor_like<Element>(tSrS);
      Tensor rdS = make_tensor_like<Element>(tdPrdP);
      convert_into(tSrS, rP);
      convert_into(tdPrdP, rdS);
      Tensor tdVrP = make_tensor(rP.data(), acc_as_operand_a(rP.layout()));     // (MMA, MMA_N, MMA_M / 16)
      Tensor tdKrdS = make_tensor(rdS.data(), acc_as_operand_a(rdS.layout()));  // (MMA, MMA_N, MMA_M / 16)
      CUTE_STATIC_ASSERT_V(size<2>(tdVrP) == size<2>(tdVrdOt));  // P^T's k-blocks are dO^T's

      copy(smem_tiled_copy_dS, smem_thr_copy_dS.retile_S(rdS), tdSsdS(_, _, _, stage));
      wgmma_gemm</*kZeroInit=*/false>(tiled_mma_dkv, tdVrP, tdVrdOt(_, _, _, stage), tdVrdV);
      // dS of both warpgroups in shared memory (generic-proxy writes -> visible to wgmma) before the dQ gemm; the
      // stage it overwrites was last read by the previous block's dQ gemm, which both warpgroups have waited for.
      cutlass::arch::fence_view_async_shared();
      NamedBarrier::sync(kNumMmaThreads, uint32_t(BwdNamedBarrierId::kdS));
      Tensor tdQrdQ = partition_fragment_C(tiled_mma_dq, select<0, 2>(TileShape_MNK{}));  // (MMA, MMA_M, MMA_D)
      wgmma_gemm</*kZeroInit=*/true>(tiled_mma_dq, tdQrdS(_, _, _, stage), tdQrKt, tdQrdQ);
      wgmma_gemm</*kZeroInit=*/false>(tiled_mma_dkv, tdKrdS, tdKrQt(_, _, _, stage), tdKrdK);
      warpgroup_wait<1>();  // dV and dQ done; dK still running
      warpgroup_fence_operand(tdQrdQ);
      pipes.dO.consumer_release(pipes.state);

      // This warpgroup's chunk of dQ: it meets only the dQ warp here, not the other warpgroup.
      NamedBarrier::sync(kdQThreads, uint32_t(BwdNamedBarrierId::kdQEmptyFirst) + warp_group);
      CUTE_STATIC_ASSERT_V(size(tdQrdQ) == size<1>(sdQ));
      copy(AutoVectorizingCopyWithAssumedAlignment<128>{}, make_tensor(tdQrdQ.data(), make_layout(size(tdQrdQ))),
           sdQ(thread_idx, _, dq_buffer));  // 16-byte stores, runs of kdQAccumVec
      dq_buffer = dq_buffer + 1 < Traits::kdQStages ? dq_buffer + 1 : 0;
      cutlass::arch::fence_view_async_shared();  // visible to the bulk reduction (async proxy)
      NamedBarrier::arrive(kdQThreads, uint32_t(BwdNamedBarrierId::kdQFullFirst) + warp_group);

      warpgroup_wait<0>();
      warpgroup_fence_operand(tdKrdK);
      pipes.q.consumer_release(pipes.state);
      ++pipes.state;
    };

    walk_steps(bwd, range, n_block, kv_row_end, step);
  }

  // The consumers' steps over the K/V block's walk (q_walk), step(m_block, masked) with masked a compile-time
  // bool: a ragged K/V block (the last, kv_row_end < kBlockN) masks its padding keys in every Q block; otherwise
  // only the diagonal's blocks, which come first. (A rotated walk is non-causal: every block or none masked.)
  template <class Step>
  CUTLASS_DEVICE static void walk_steps(BwdParams const& bwd, QBlockRange const& range, int n_block, int kv_row_end,
                                        Step&& step) {
    QBlockWalk const walk = q_walk(bwd, range, n_block);
    int const masked = (kv_row_end < kBlockN ? range.m_block_max : range.m_block_masked_end) - range.m_block_min;
    int i = 0;
    for (; i < masked; ++i) { step(walk[i], cute::true_type{}); }
    for (; i < walk.count; ++i) { step(walk[i], cute::false_type{}); }
  }
};

}  // namespace flashcute::sm90
