// The SM90 mainloop of one Q tile: the producer's TMA loads and the consumers' wgmma + online softmax.
//
// Producer (one thread): Q once into its single-stage pipeline, then K and V blocks from the last visible
// one down to 0 through kStages-deep pipelines, in the order the consumers need them:
//   K(n_max-1) | K(n_max-2) V(n_max-1) | ... | K(0) V(1) | V(0)
// Each load arms its stage's full barrier with the tile's byte count; TMA zero-fills rows past seqlen and
// columns past head_dim, so every box lands whole.
//
// Consumer warpgroups (64 query rows each), with the softmax of block n overlapping the P.V of block n+1:
//   S = Q.K(n_max-1)^T ; softmax -> P
//   for n = n_max-2 .. 0:  [S = Q.K(n)^T ; O *= correction ; O += P.V(n+1)] ; wait S ; softmax(S) -> correction
//                          ; wait P.V ; P = S
//   O *= correction ; O += P.V(0)
// The bracketed issues take turns with the other consumer warpgroups (WarpGroupPingPong). Where the traits set
// kRescaleOutsideTurn, O *= correction leaves the bracket and follows "wait P.V" instead (the last one then
// needs none after the loop).
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/pipeline/pipeline.hpp>

#include "common/block_range.h"
#include "common/mask.h"
#include "common/params.h"
#include "common/seqlen.h"
#include "common/softmax.h"
#include "common/utils.h"
#include "sm90/gmem.h"
#include "sm90/kernel_traits.h"
#include "sm90/pipelines.h"
#include "sm90/tile_scheduler.h"
#include "sm90/warpgroup_pingpong.h"
#include "sm90/wgmma.h"

namespace flashcute::sm90 {

using namespace cute;

template <class Traits>
struct Mainloop {
  using Element = typename Traits::Element;
  using TileShape_MNK = typename Traits::TileShape_MNK;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr bool kCausal = Traits::kCausal;

  using TmaLoadQ = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensorQKVO<Element>{}, typename Traits::SmemLayoutQ{},
                                          select<0, 2>(TileShape_MNK{}), _1{}));
  using TmaLoadKV = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensorQKVO<Element>{},
                                           take<0, 2>(typename Traits::SmemLayoutK{}),
                                           select<1, 2>(TileShape_MNK{}), _1{}));

  struct Params {
    TmaLoadQ tma_load_q;
    TmaLoadKV tma_load_k;
    TmaLoadKV tma_load_v;
    ShapeQKVO shape_q;
    ShapeQKVO shape_kv;
  };

  static Params make_params(FwdParams const& p) {
    auto [mQ, mK, mV, mO] = make_gmem_tensors<Element>(p);
    return {make_tma_copy(SM90_TMA_LOAD{}, mQ, typename Traits::SmemLayoutQ{}, select<0, 2>(TileShape_MNK{}), _1{}),
            make_tma_copy(SM90_TMA_LOAD{}, mK, take<0, 2>(typename Traits::SmemLayoutK{}),
                          select<1, 2>(TileShape_MNK{}), _1{}),
            make_tma_copy(SM90_TMA_LOAD{}, mV, take<0, 2>(typename Traits::SmemLayoutV{}),
                          select<1, 2>(TileShape_MNK{}), _1{}),
            mQ.shape(), mK.shape()};
  }

  CUTLASS_DEVICE static void prefetch_descriptors(Params const& params) {
    cute::prefetch_tma_descriptor(params.tma_load_q.get_tma_descriptor());
    cute::prefetch_tma_descriptor(params.tma_load_k.get_tma_descriptor());
    cute::prefetch_tma_descriptor(params.tma_load_v.get_tma_descriptor());
  }

  // Producer, one thread. work_tiles_before: tiles with work this CTA loaded earlier. Where O is staged over
  // the V stages, the first V of this tile waits for the previous tile's O store (barrier_o).
  template <class SharedStorage, class Seq>
  CUTLASS_DEVICE static void load(Params const& params, FwdParams const& fwd, Seq const& seq,
                                  SharedStorage& shared, Pipelines<Traits>& pipes, WorkTile const& tile, int head_kv,
                                  int n_block_max, int work_tiles_before) {
    Tensor mQ = params.tma_load_q.get_tma_tensor(params.shape_q);
    Tensor mK = params.tma_load_k.get_tma_tensor(params.shape_kv);
    Tensor mV = params.tma_load_v.get_tma_tensor(params.shape_kv);
    // Slicing one sequence and head first keeps every box inside them: rows past its seqlen are out of bounds.
    SequenceRows const q_rows = SequenceRows::of_q(fwd, seq);
    SequenceRows const k_rows = SequenceRows::of_k(fwd, seq);
    Tensor gQ = local_tile(q_rows.of_head(mQ, tile.head), select<0, 2>(TileShape_MNK{}),
                           make_coord(tile.m_block, _0{}));  // (M, D)
    Tensor gK = local_tile(k_rows.of_head(mK, head_kv), select<1, 2>(TileShape_MNK{}), make_coord(_, _0{}));  // (N, D, n)
    Tensor gV = local_tile(k_rows.of_head(mV, head_kv), select<1, 2>(TileShape_MNK{}), make_coord(_, _0{}));  // (N, D, n)

    Tensor sQ = make_tensor(make_smem_ptr(shared.smem_q.data()), typename Traits::SmemLayoutQ{});
    Tensor sK = make_tensor(make_smem_ptr(shared.smem_k.data()), typename Traits::SmemLayoutK{});
    Tensor sV = make_tensor(make_smem_ptr(shared.vo.smem_v.data()), typename Traits::SmemLayoutV{});

    auto tma_q = tma_partition(params.tma_load_q, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sQ),
                               group_modes<0, 2>(gQ));
    auto tma_k = tma_partition(params.tma_load_k, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sK),
                               group_modes<0, 2>(gK));
    auto tma_v = tma_partition(params.tma_load_v, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sV),
                               group_modes<0, 2>(gV));
    Tensor tQgQ = get<0>(tma_q);  // (TMA)
    Tensor tQsQ = get<1>(tma_q);  // (TMA)
    Tensor tKgK = get<0>(tma_k);  // (TMA, n)
    Tensor tKsK = get<1>(tma_k);  // (TMA, stage)
    Tensor tVgV = get<0>(tma_v);  // (TMA, n)
    Tensor tVsV = get<1>(tma_v);  // (TMA, stage)

    auto load_k = [&](int n_block) CUTLASS_LAMBDA_FUNC_INLINE {
      pipes.k.producer_acquire(pipes.k_state);
      copy(params.tma_load_k.with(*pipes.k.producer_get_barrier(pipes.k_state)), tKgK(_, n_block),
           tKsK(_, pipes.k_state.index()));
      ++pipes.k_state;
    };
    auto load_v = [&](int n_block) CUTLASS_LAMBDA_FUNC_INLINE {
      pipes.v.producer_acquire(pipes.v_state);
      copy(params.tma_load_v.with(*pipes.v.producer_get_barrier(pipes.v_state)), tVgV(_, n_block),
           tVsV(_, pipes.v_state.index()));
      ++pipes.v_state;
    };

    pipes.q.producer_acquire(pipes.q_state);
    copy(params.tma_load_q.with(*pipes.q.producer_get_barrier(pipes.q_state)), tQgQ, tQsQ);
    ++pipes.q_state;

    int n_block = n_block_max - 1;
    load_k(n_block);
    if constexpr (Traits::kOAliasesV) {
      if (work_tiles_before > 0) { shared.barrier_o.wait((work_tiles_before - 1) & 1); }
    }
    for (; n_block > 0; --n_block) {
      load_k(n_block - 1);
      load_v(n_block);
    }
    load_v(0);
  }

  // Consumer warpgroups: O (unnormalised, tOrO) and the softmax statistics of one Q tile.
  template <class SharedStorage, class FragO, class Softmax, class Seq>
  CUTLASS_DEVICE static void mma(SharedStorage& shared, Pipelines<Traits>& pipes, FragO& tOrO, Softmax& softmax,
                                 FwdParams const& fwd, Seq const& seq, int m_block, KVBlockRange const& range,
                                 int thread_idx, int wg) {
    using PingPong = WarpGroupPingPong<Traits::kNumMmaWarpGroups>;
    typename Traits::TiledMmaS tiled_mma_s;
    typename Traits::TiledMmaO tiled_mma_o;
    auto thr_mma_s = tiled_mma_s.get_thread_slice(thread_idx);
    auto thr_mma_o = tiled_mma_o.get_thread_slice(thread_idx);

    Tensor sQ = make_tensor(make_smem_ptr(shared.smem_q.data()), typename Traits::SmemLayoutQ{});
    Tensor sK = make_tensor(make_smem_ptr(shared.smem_k.data()), typename Traits::SmemLayoutK{});
    Tensor sVt = make_tensor(make_smem_ptr(shared.vo.smem_v.data()), typename Traits::SmemLayoutVt{});
    Tensor tSrQ = thr_mma_s.partition_fragment_A(sQ);   // (MMA, MMA_M, MMA_D) descriptors
    Tensor tSrK = thr_mma_s.partition_fragment_B(sK);   // (MMA, MMA_N, MMA_D, stage)
    Tensor tOrV = thr_mma_o.partition_fragment_B(sVt);  // (MMA, MMA_D, MMA_N, stage)

    Tensor tSrS = partition_fragment_C(tiled_mma_s, select<0, 1>(TileShape_MNK{}));  // (MMA, MMA_M, MMA_N)
    Tensor scores = make_rowcol(tSrS);
    Tensor tScS = make_rowcol(thr_mma_s.partition_C(make_identity_tensor(select<0, 1>(TileShape_MNK{}))));
    // P's registers are S's layout regrouped (acc_as_operand_a), so P = S converts register by register.
    Tensor tOrP = make_tensor<Element>(acc_as_operand_a(tSrS.layout()));  // (MMA, MMA_M, MMA_N / 16)
    CUTE_STATIC_ASSERT_V(size<2>(tOrP) == size<2>(tOrV));   // P's k-blocks are V^T's
    CUTE_STATIC_ASSERT_V(size<1>(tSrS) == size<1>(tOrO));   // S and O rows line up: one softmax row state each
    CUTE_STATIC_ASSERT_V(size<2>(tSrQ) == size<2>(tSrK));   // Q.K^T: the head-dim k-blocks pair up
    Tensor acc_o = make_rowcol(tOrO);
    // The rescale of O must wait until the in-flight P.V is done: OnlineSoftmax rescales this (rows, 1)
    // tensor of ones instead, leaving the correction of each row to apply to O later.
    Tensor correction = make_tensor<float>(Shape<Int<decltype(size<0>(scores))::value>, _1>{});
    // Where no row of a warp saw its max grow, every correction is exactly 1 (OnlineSoftmax's
    // kExactUnitCorrection) and the warp may skip the multiplies (Traits::kSkipUnchangedRescale).
    bool max_grew = true;
    auto rescale_o = [&]() CUTLASS_LAMBDA_FUNC_INLINE {
      if constexpr (Traits::kSkipUnchangedRescale) {
        if (!__any_sync(0xffffffff, max_grew)) { return; }
      }
      CUTLASS_PRAGMA_UNROLL
      for (int mi = 0; mi < size<0>(acc_o); ++mi) {
        CUTLASS_PRAGMA_UNROLL
        for (int dj = 0; dj < size<1>(acc_o); ++dj) { acc_o(mi, dj) *= correction(mi, 0); }
      }
    };
    auto softmax_step = [&](auto first, auto masked, int n_block) CUTLASS_LAMBDA_FUNC_INLINE {
      constexpr bool kFirst = decltype(first)::value;
      constexpr bool kMasked = decltype(masked)::value;
      if constexpr (kMasked) {
        apply_mask<kCausal>(scores, tScS, m_block * kBlockM, n_block * kBlockN, seq.seqlen_k(), seq.causal_offset());
      }
      fill(correction, 1.f);
      if constexpr (Traits::kSkipUnchangedRescale && !kFirst) {
        auto const max_before = softmax.row_max;
        softmax.template rescale<kFirst, kMasked>(scores, correction, fwd.softmax_scale_log2);
        max_grew = false;
        CUTLASS_PRAGMA_UNROLL
        for (int mi = 0; mi < size(max_before); ++mi) { max_grew |= softmax.row_max(mi) != max_before(mi); }
      } else {
        softmax.template rescale<kFirst, kMasked>(scores, correction, fwd.softmax_scale_log2);
        max_grew = !kFirst;  // the first block leaves the corrections at the 1s just filled
      }
    };
    auto issue_s = [&]() CUTLASS_LAMBDA_FUNC_INLINE {
      wgmma_gemm</*kZeroInit=*/true>(tiled_mma_s, tSrQ, tSrK(_, _, _, pipes.k_state.index()), tSrS);
    };
    auto issue_pv = [&]() CUTLASS_LAMBDA_FUNC_INLINE {
      wgmma_gemm</*kZeroInit=*/false>(tiled_mma_o, tOrP, tOrV(_, _, _, pipes.v_state.index()), tOrO);
    };
    auto release_k = [&](int n_block) CUTLASS_LAMBDA_FUNC_INLINE {
      pipes.k.consumer_release(pipes.k_state);
      ++pipes.k_state;
      if (n_block == 0) { pipes.q.consumer_release(pipes.q_state); }  // the tile's last use of Q
    };

    int n_block = range.n_block_max - 1;
    pipes.q.consumer_wait(pipes.q_state);
    pipes.k.consumer_wait(pipes.k_state);
    PingPong::wait_turn(wg);
    issue_s();
    PingPong::pass_turn(wg);
    warpgroup_wait<0>();
    warpgroup_fence_operand(tSrS);
    release_k(n_block);
    if (n_block >= range.n_block_unmasked) {
      softmax_step(cute::true_type{}, cute::true_type{}, n_block);
    } else {
      softmax_step(cute::true_type{}, cute::false_type{}, n_block);
    }
    convert_into(tSrS, tOrP);

    auto step = [&](auto masked) CUTLASS_LAMBDA_FUNC_INLINE {
      pipes.k.consumer_wait(pipes.k_state);
      PingPong::wait_turn(wg);
      issue_s();
      if constexpr (!Traits::kRescaleOutsideTurn) { rescale_o(); }
      pipes.v.consumer_wait(pipes.v_state);
      issue_pv();
      PingPong::pass_turn(wg);
      warpgroup_wait<1>();  // S done; P.V still running
      warpgroup_fence_operand(tSrS);
      release_k(n_block);
      softmax_step(cute::false_type{}, masked, n_block);
      warpgroup_wait<0>();
      warpgroup_fence_operand(tOrO);
      warpgroup_fence_operand(tOrP);
      pipes.v.consumer_release(pipes.v_state);
      ++pipes.v_state;
      if constexpr (Traits::kRescaleOutsideTurn) { rescale_o(); }  // for the next P.V
      convert_into(tSrS, tOrP);
    };
    for (--n_block; n_block >= range.n_block_unmasked; --n_block) { step(cute::true_type{}); }
    for (; n_block >= 0; --n_block) { step(cute::false_type{}); }

    if constexpr (!Traits::kRescaleOutsideTurn) { rescale_o(); }
    pipes.v.consumer_wait(pipes.v_state);
    PingPong::wait_turn(wg);
    issue_pv();
    PingPong::pass_turn(wg);
    warpgroup_wait<0>();
    warpgroup_fence_operand(tOrO);
    warpgroup_fence_operand(tOrP);
    pipes.v.consumer_release(pipes.v_state);
    ++pipes.v_state;
    ++pipes.q_state;
  }
};

}  // namespace flashcute::sm90
