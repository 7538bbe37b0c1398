// Host side of the SM90 backward: the preprocess, the warp-specialized kernel (one per causal flag) and the
// postprocess on the caller's stream. The pre- and postprocess are the SM80 backward's (arch-neutral) kernels,
// run with this kernel's block heights, threads and accumulator order (BwdKernelTraits::PrePost).
#pragma once

#include <cuda_runtime.h>

#include "common/launch.h"
#include "common/params.h"
#include "sm80/bwd_launch.h"
#include "sm90/bwd_kernel.h"
#include "sm90/bwd_kernel_traits.h"
#include "sm90/requirements.h"
#include "sm90/varlen_schedule.h"

namespace flashcute::sm90 {

template <class Traits, bool kCausal>
void launch_bwd(BwdParams const& params, cudaStream_t stream) {
  using PrePost = typename Traits::PrePost;
  auto blocks = [](int rows, int block) { return (rows + block - 1) / block; };
  auto varlen_grid_x = [](BwdParams const& p) { return p.total_k / Traits::kBlockN + p.batch; };

  bool const varlen = params.cu_seqlens_q != nullptr;
  static_assert(Traits::kBlockN >= kSm90BwdMinBlockN, "the varlen grid would outgrow BwdParams::kv_block_table");
  if (varlen) {  // the caller allocated the prepass's workspaces (flash_api.cpp)
    bool const reverse_blocks = BwdMainloopOf<Traits, kCausal>::launch_highest_block_first(params);
    varlen_kv_blocks_kernel<Traits::kBlockN>
        <<<1, kVarlenScheduleThreads, 0, stream>>>(params, varlen_grid_x(params), reverse_blocks);
  }
  sm80::bwd_preprocess_kernel<PrePost>
      <<<dim3(blocks(params.seqlen_q, Traits::kBlockM), params.heads_q, params.batch), PrePost::kNThreads, 0, stream>>>(
          params);

  BwdKernelParams<Traits, kCausal> const kernel_params{params, BwdMainloopOf<Traits, kCausal>::make_params(params),
                                                       BwdEpilogue<Traits>::make_params(params)};
  // The kernel and the postprocess start while the kernel before each still runs (their prologues and launch
  // latency hidden); each waits for it before reading its outputs (wait_for_prior_grid).
  constexpr int kSmemBytes = Traits::kSmemBytes;
  constexpr auto kVarlenKernel = &bwd_kernel<Traits, kCausal, true>;
  constexpr auto kFixedKernel = &bwd_kernel<Traits, kCausal, false>;
  if (varlen) {
    allow_dynamic_smem<kVarlenKernel, kSmemBytes>();
  } else {
    allow_dynamic_smem<kFixedKernel, kSmemBytes>();
  }
  auto const kernel = varlen ? kVarlenKernel : kFixedKernel;
  // Varlen: the sequences' K/V blocks one after another, at most total_k / kBlockN plus one partial block each
  // (the prepass's kv_block_table gives each CTA its sequence and block), head by head, so that a head's CTAs
  // share its Q and dO in L2 (benchmarks/notes.md#d-sm90-varlen-bwd-heads-inner); fixed length: (K/V blocks,
  // heads, batch).
  dim3 const grid = varlen ? dim3(varlen_grid_x(params), params.heads_q, 1)
                           : dim3(blocks(params.seqlen_k, Traits::kBlockN), params.heads_q, params.batch);
  launch_after_prior_grid_starts(kernel, grid, dim3(Traits::kNumThreads), kSmemBytes, stream, kernel_params);

  constexpr bool kAfterPriorGridStarts = true;
  sm80::launch_postprocess<PrePost, sm80::Grad::kDQ>(params, blocks(params.seqlen_q, Traits::kBlockM), params.heads_q,
                                                     stream, kAfterPriorGridStarts);
  if (params.dk_accum_ptr != nullptr) {
    int const kv_blocks = blocks(params.seqlen_k, Traits::kBlockN);
    sm80::launch_postprocess<PrePost, sm80::Grad::kDK>(params, kv_blocks, params.heads_kv, stream,
                                                       kAfterPriorGridStarts);
    sm80::launch_postprocess<PrePost, sm80::Grad::kDV>(params, kv_blocks, params.heads_kv, stream,
                                                       kAfterPriorGridStarts);
  }
}

// The registry's entry (common/registry.h) for one (dtype, head dim).
template <typename Element, int kHeadDim>
struct BwdKernel {
  using Traits = BwdKernelTraitsFor<Element, kHeadDim>;

  // The caller allocates lse_log2_ptr for kernels of this arch (flash_api.cpp).
  static bool can_run(BwdParams const& params, char* why, int why_size) {
    return tma_can_run(params, sizeof(Element), kHeadDim, Traits::kTmaBoxCols, why, why_size);
  }

  static void launch(BwdParams const& params, cudaStream_t stream) {
    BwdParams const tma_params = with_tma_strides(params);
    if (params.causal) {
      launch_bwd<Traits, true>(tma_params, stream);
    } else {
      launch_bwd<Traits, false>(tma_params, stream);
    }
  }
};

}  // namespace flashcute::sm90
