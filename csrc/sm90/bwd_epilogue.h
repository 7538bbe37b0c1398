// Epilogue of one K/V block of the SM90 backward. Without GQA, dK (scaled) and dV (or dK^T and dV^T where queries
// run along M) are converted to 16 bits, staged over the K and V buffers with stmatrix (transposing dK^T and dV^T)
// and written by two TMA stores, which clip rows past the sequence's seqlen_k
// (gmem.h SequenceRows) and columns past head_dim. With GQA the query heads of a group share dK and dV: each adds its share into the float32
// accumulators (sm80/gmem.h accum_block order, red.global.add), in head order in deterministic mode, and the
// postprocess converts them (BwdPrePost::kdKVTransposed says which orientation).
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>

#include "common/params.h"
#include "common/seqlen.h"
#include "common/turnstile.h"
#include "common/utils.h"
#include "sm80/gmem.h"
#include "sm90/bwd_kernel_traits.h"
#include "sm90/gmem.h"
#include "sm90/named_barriers.h"

namespace flashcute::sm90 {

using namespace cute;

template <class Traits>
struct BwdEpilogue {
  using Element = typename Traits::Element;
  using TileShape_MNK = typename Traits::TileShape_MNK;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kNumMmaThreads = Traits::kNumMmaThreads;

  using TmaStoreK = decltype(make_tma_copy(SM90_TMA_STORE{}, GmemTensorQKVO<Element>{}, typename Traits::SmemLayoutK{},
                                           select<1, 2>(TileShape_MNK{}), _1{}));
  using TmaStoreV = decltype(make_tma_copy(SM90_TMA_STORE{}, GmemTensorQKVO<Element>{}, typename Traits::SmemLayoutV{},
                                           select<1, 2>(TileShape_MNK{}), _1{}));

  struct Params {
    TmaStoreK tma_store_dk;
    TmaStoreV tma_store_dv;
    ShapeQKVO shape_kv;
  };

  static Params make_params(BwdParams const& p) {
    auto [mdO, mdK, mdV] = make_grad_gmem_tensors<Element>(p);
    return {make_tma_copy(SM90_TMA_STORE{}, mdK, typename Traits::SmemLayoutK{}, select<1, 2>(TileShape_MNK{}), _1{}),
            make_tma_copy(SM90_TMA_STORE{}, mdV, typename Traits::SmemLayoutV{}, select<1, 2>(TileShape_MNK{}), _1{}),
            mdK.shape()};
  }

  CUTLASS_DEVICE static void prefetch_descriptors(Params const& params) {
    cute::prefetch_tma_descriptor(params.tma_store_dk.get_tma_descriptor());
    cute::prefetch_tma_descriptor(params.tma_store_dv.get_tma_descriptor());
  }

  CUTLASS_DEVICE static void sync_consumers() {
    cutlass::arch::NamedBarrier::sync(kNumMmaThreads, uint32_t(BwdNamedBarrierId::kEpilogue));
  }

  // Consumer threads, without GQA.
  template <class SharedStorage, class FragdKV>
  CUTLASS_DEVICE static void store(Params const& params, BwdParams const& bwd, SeqInfo const& seq,
                                   SharedStorage& shared, FragdKV const& tdKrdK, FragdKV const& tdVrdV, int n_block,
                                   int bidh_kv, int thread_idx) {
    Tensor sK = make_tensor(make_smem_ptr(shared.smem_k.data()), typename Traits::SmemLayoutK{});  // (N, D)
    Tensor sV = make_tensor(make_smem_ptr(shared.smem_v.data()), typename Traits::SmemLayoutV{});  // (N, D)
    // The same buffers in the accumulators' orientation: (N, D), or (D, N) where queries run along M.
    Tensor sdK = make_tensor(make_smem_ptr(shared.smem_k.data()), typename Traits::SmemLayoutdKStage{});
    Tensor sdV = make_tensor(make_smem_ptr(shared.smem_v.data()), typename Traits::SmemLayoutdVStage{});
    typename Traits::TiledMmadKV tiled_mma_dkv;
    auto smem_tiled_copy = make_tiled_copy_C(typename Traits::SmemCopyAtomdKV{}, tiled_mma_dkv);
    auto smem_thr_copy = smem_tiled_copy.get_thread_slice(thread_idx);
    Tensor rdK = convert_type<Element>(tdKrdK);
    Tensor rdV = convert_type<Element>(tdVrdV);

    sync_consumers();  // every warpgroup's last gemm has read K and V
    copy(smem_tiled_copy, smem_thr_copy.retile_S(rdK), smem_thr_copy.partition_D(sdK));
    copy(smem_tiled_copy, smem_thr_copy.retile_S(rdV), smem_thr_copy.partition_D(sdV));
    cutlass::arch::fence_view_async_shared();  // generic-proxy writes -> visible to the TMA (async proxy)
    sync_consumers();

    if (thread_idx == 0) {
      auto store_tile = [&](auto const& tma_store, auto const& sX) {
        Tensor mX = tma_store.get_tma_tensor(params.shape_kv);
        Tensor gX = local_tile(SequenceRows::of_k(bwd, seq).of_head(mX, bidh_kv), select<1, 2>(TileShape_MNK{}),
                               make_coord(n_block, _0{}));  // (N, D)
        auto [tXgX, tXsX] = tma_partition(tma_store, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sX), group_modes<0, 2>(gX));
        copy(tma_store, tXsX, tXgX);
      };
      store_tile(params.tma_store_dk, sK);
      store_tile(params.tma_store_dv, sV);
      tma_store_arrive();
      tma_store_wait<0>();  // shared memory read before the CTA exits
    }
  }

  // Consumer threads, with GQA: this query head's shares of dK and dV into the float32 accumulators.
  template <class FragdKV>
  CUTLASS_DEVICE static void add(BwdParams const& bwd, SeqInfo const& seq, FragdKV const& tdKrdK,
                                 FragdKV const& tdVrdV, int n_block, int bidh, int bidh_kv, int thread_idx) {
    int64_t const accum_rows = seq.k_accum_head_row(bidh_kv);
    auto thread_slots = [&](float* accum) {
      return sm80::accum_block<kBlockN, Traits::kHeadDim, kNumMmaThreads>(accum, accum_rows, n_block)(thread_idx, _);
    };
    int* const turnstile = bwd.dkv_semaphore == nullptr ? nullptr
        : bwd.dkv_semaphore + seq.k_semaphore_offset() + int64_t(bidh_kv) * seq.k_semaphores() + n_block;
    bool const leader = thread_idx == 0;
    if (turnstile != nullptr) { turnstile_wait(turnstile, bidh % (bwd.heads_q / bwd.heads_kv), leader, sync_consumers); }
    sm80::atomic_add_accum(thread_slots(bwd.dk_accum_ptr), tdKrdK);
    sm80::atomic_add_accum(thread_slots(bwd.dv_accum_ptr), tdVrdV);
    if (turnstile != nullptr) { turnstile_pass(turnstile, leader, sync_consumers); }
  }
};

}  // namespace flashcute::sm90
