// The SM90 forward kernel: persistent, warp-specialized. Warpgroup 0 produces (one thread issues every
// TMA load), warpgroups 1.. consume (wgmma, online softmax, epilogue); setmaxnreg hands the producer's
// registers to the consumers. Both sides walk the same static tile sequence (TileScheduler), so the only
// communication is through mbarriers: the Q and K/V pipelines (pipelines.h), and barrier_o for the O staging
// buffer where it overlays the V stages (kOAliasesV): one arrival per warpgroup's stored slab, which the
// producer waits for before the next tile's first V.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/pipeline/pipeline.hpp>

#include "common/block_range.h"
#include "common/params.h"
#include "common/seqlen.h"
#include "common/softmax.h"
#include "common/utils.h"
#include "sm90/epilogue.h"
#include "sm90/kernel_traits.h"
#include "sm90/mainloop.h"
#include "sm90/pipelines.h"
#include "sm90/tile_scheduler.h"
#include "sm90/warpgroup_pingpong.h"

namespace flashcute::sm90 {

using namespace cute;

// kVarlen: the instantiation for packed batches; the fixed-length one has no varlen code (SeqInfoOf<false>).
template <class Traits, bool kVarlen>
struct KernelParams {
  FwdParams fwd;
  typename Mainloop<Traits>::Params mainloop;
  typename Epilogue<Traits>::Params epilogue;
  typename TileScheduler<Traits::kBlockM, Traits::kCausal, kVarlen>::Params scheduler;
};

template <class Traits, bool kVarlen>
__global__ void __launch_bounds__(Traits::kNumThreads, 1)
    fwd_kernel(CUTE_GRID_CONSTANT KernelParams<Traits, kVarlen> const params) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Element = typename Traits::Element;
  using TileShape_MNK = typename Traits::TileShape_MNK;
  using SharedStorage = typename Traits::SharedStorage;
  using Scheduler = TileScheduler<Traits::kBlockM, Traits::kCausal, kVarlen>;
  using Seq = SeqInfoOf<kVarlen, false, /*kReadOnce=*/true>;
  using PingPong = WarpGroupPingPong<Traits::kNumMmaWarpGroups>;
  constexpr int kBlockM = Traits::kBlockM;
  constexpr int kBlockN = Traits::kBlockN;
  constexpr bool kCausal = Traits::kCausal;
  typename Scheduler::Params const& sched = params.scheduler;

  extern __shared__ char smem_buf[];
  SharedStorage& shared = *reinterpret_cast<SharedStorage*>(smem_buf);

  int const warp_group_idx = cutlass::canonical_warp_group_idx();
  int const warp_idx = cutlass::canonical_warp_idx_sync();
  bool const is_producer = warp_group_idx == 0;

  if (warp_idx == 0 && cute::elect_one_sync()) {
    Mainloop<Traits>::prefetch_descriptors(params.mainloop);
    Epilogue<Traits>::prefetch_descriptors(params.epilogue);
    shared.barrier_o.init(/*arrive_count=*/Traits::kNumMmaWarpGroups);  // one O slab store per warpgroup
  }

  Pipelines<Traits> pipes(shared, is_producer);
  __syncthreads();  // barriers initialised (and fenced) before anyone waits on them

  if (is_producer) {
    cutlass::arch::warpgroup_reg_dealloc<Traits::kProducerRegs>();
    if (threadIdx.x != 0) { return; }
    int work_tiles = 0;
    int cursor = 0;
    int const end = Scheduler::end(sched, params.fwd);
    for (int i = Scheduler::first(sched); i < end; i = Scheduler::next(i)) {
      WorkTile const tile = Scheduler::get(sched, params.fwd, i, cursor);
      if (!tile.is_valid()) { continue; }
      Seq const seq(params.fwd, tile.batch);
      KVBlockRange const range = kv_block_range<kBlockM, kBlockN, kCausal>(seq, tile.m_block);
      if (range.n_block_max <= 0) { continue; }
      int const head_kv = tile.head / (params.fwd.heads_q / params.fwd.heads_kv);
      Mainloop<Traits>::load(params.mainloop, params.fwd, seq, shared, pipes, tile, head_kv, range.n_block_max,
                             work_tiles);
      ++work_tiles;
    }
  } else {
    cutlass::arch::warpgroup_reg_alloc<Traits::kConsumerRegs>();
    int const thread_idx = threadIdx.x - cutlass::NumThreadsPerWarpGroup;
    int const wg = warp_group_idx - 1;
    typename Traits::TiledMmaO tiled_mma_o;
    PingPong::start(wg);
    int cursor = 0;
    int const end = Scheduler::end(sched, params.fwd);
    for (int i = Scheduler::first(sched); i < end; i = Scheduler::next(i)) {
      WorkTile const tile = Scheduler::get(sched, params.fwd, i, cursor);
      if (!tile.is_valid()) { continue; }
      Seq const seq(params.fwd, tile.batch);
      KVBlockRange const range = kv_block_range<kBlockM, kBlockN, kCausal>(seq, tile.m_block);
      if (range.n_block_max <= 0) {
        Epilogue<Traits>::store_empty(params.fwd, seq, tile, thread_idx);
        continue;
      }
      Tensor tOrO = partition_fragment_C(tiled_mma_o, select<0, 2>(TileShape_MNK{}));  // (MMA, MMA_M, MMA_D)
      clear(tOrO);
      // 2 rows per thread per 64-row atom.
      OnlineSoftmax<2 * decltype(size<1>(tOrO))::value, Traits::kSoftmaxReduceParts, Traits::kSkipUnchangedRescale>
          softmax;
      Mainloop<Traits>::mma(shared, pipes, tOrO, softmax, params.fwd, seq, tile.m_block, range, thread_idx, wg);
      Tensor acc_o = make_rowcol(tOrO);
      Tensor lse = softmax.finalize(acc_o, params.fwd.softmax_scale);
      Epilogue<Traits>::store(params.epilogue, params.fwd, seq, shared, tOrO, lse, tile, thread_idx);
    }
    PingPong::finish(wg);
    Epilogue<Traits>::finish(thread_idx);
  }
#endif
}

}  // namespace flashcute::sm90
