// Host side of the SM90 backward: the preprocess, the warp-specialized kernel (one per causal flag) and the
// postprocess on the caller's stream. The pre- and postprocess are the SM80 backward's (arch-neutral) kernels,
// run with this kernel's block heights, threads and accumulator order (BwdKernelTraits::PrePost).
#pragma once

#include <cstdint>
#include <cstdio>

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
  static_assert(Traits::kBlockM >= kSm90BwdMinBlockRows && Traits::kBlockN >= kSm90BwdMinBlockRows,
                "the varlen grids would outgrow BwdParams::q_block_table / kv_block_table");
  auto blocks = [](int rows, int block) { return (rows + block - 1) / block; };
  // Fixed length: (blocks, heads, batch). Varlen: the sequences' blocks one after another, at most total / block
  // plus one partial block each (the prepass's tables give each CTA its sequence and block), so that the pre- and
  // postprocess skip the empty (sequence, block) pairs of a grid sized by the longest sequence; the kernel's, 1-D,
  // runs them in the fixed-length grid's order (bwd_kernel.h): a head's K/V blocks together, whose CTAs share its
  // Q and dO in L2 (benchmarks/notes.md#d-sm90-varlen-bwd-heads-inner), and each sequence's heads before the next
  // sequence's, as FlashAttention-4's varlen scheduler does, so a packed batch's last CTAs are its last sequence's.
  bool const varlen = params.cu_seqlens_q != nullptr;
  auto grid_of = [&](int rows, int total, int block, int heads) {
    return varlen ? dim3(packed_grid_blocks(total, block, params.batch), heads, 1)
                  : dim3(blocks(rows, block), heads, params.batch);
  };
  dim3 const q_grid = grid_of(params.seqlen_q, params.total_q, Traits::kBlockM, params.heads_q);
  dim3 const kv_grid = grid_of(params.seqlen_k, params.total_k, Traits::kBlockN, params.heads_q);
  dim3 const kv_heads_grid = grid_of(params.seqlen_k, params.total_k, Traits::kBlockN, params.heads_kv);
  if (varlen) {  // the caller allocated the prepass's workspaces (flash_api.cpp)
    varlen_bwd_blocks_kernel<Traits::kBlockM, Traits::kBlockN>
        <<<1, kVarlenScheduleThreads, 0, stream>>>(params, q_grid.x, kv_grid.x);
  }
  sm80::bwd_preprocess_kernel<PrePost><<<q_grid, PrePost::kNThreads, 0, stream>>>(params);

  BwdKernelParams<Traits, kCausal> const kernel_params{params, BwdMainloopOf<Traits, kCausal>::make_params(params),
                                                       BwdEpilogue<Traits>::make_params(params)};
  // The kernel and the postprocess start while the kernel before each still runs (their prologues and launch
  // latency hidden); each waits for it before reading its outputs (wait_for_prior_grid; with dq_done, the dQ
  // postprocess waits for each of its blocks' additions instead, and converts the blocks of the heads done while
  // the kernel's last wave runs).
  constexpr int kSmemBytes = Traits::kSmemBytes;
  constexpr auto kVarlenKernel = &bwd_kernel<Traits, kCausal, true>;
  constexpr auto kFixedKernel = &bwd_kernel<Traits, kCausal, false>;
  if (varlen) {
    allow_dynamic_smem<kVarlenKernel, kSmemBytes>();
  } else {
    allow_dynamic_smem<kFixedKernel, kSmemBytes>();
  }
  auto const kernel = varlen ? kVarlenKernel : kFixedKernel;
  dim3 const kernel_grid = varlen ? dim3(kv_grid.x * kv_grid.y) : kv_grid;  // can_run bounds the product
  // A kernel that did not launch counts no dq_done, and a dQ postprocess waiting for it would wait forever: its
  // error is left for the caller's check (cudaGetLastError) instead.
  if (launch_after_prior_grid_starts(kernel, kernel_grid, dim3(Traits::kNumThreads), kSmemBytes, stream,
                                     kernel_params) != cudaSuccess) {
    return;
  }

  constexpr bool kAfterPriorGridStarts = true;
  sm80::launch_postprocess<PrePost, sm80::Grad::kDQ>(params, q_grid, stream, kAfterPriorGridStarts);
  if (params.dk_accum_ptr != nullptr) {
    sm80::launch_postprocess<PrePost, sm80::Grad::kDK>(params, kv_heads_grid, stream, kAfterPriorGridStarts);
    sm80::launch_postprocess<PrePost, sm80::Grad::kDV>(params, kv_heads_grid, stream, kAfterPriorGridStarts);
  }
}

// The registry's entry (common/registry.h) for one (dtype, head dim).
template <typename Element, int kHeadDim>
struct BwdKernel {
  using Traits = BwdKernelTraitsFor<Element, kHeadDim>;

  // The caller allocates lse_log2_ptr for kernels of this arch (flash_api.cpp).
  static bool can_run(BwdParams const& params, char* why, int why_size) {
    bool const varlen = params.cu_seqlens_q != nullptr;
    int64_t const varlen_ctas =
        int64_t(packed_grid_blocks(params.total_k, Traits::kBlockN, params.batch)) * params.heads_q;
    if (varlen && varlen_ctas > int64_t(INT32_MAX)) {  // the packed batch's 1-D grid (launch_bwd)
      snprintf(why, why_size, "a packed batch needs (total_k / %d + batch) x heads_q <= 2^31 - 1 CTAs, got %lld",
               Traits::kBlockN, static_cast<long long>(varlen_ctas));
      return false;
    }
    return tma_can_run(params, sizeof(Element), kHeadDim, Traits::kTmaBoxCols, why, why_size);
  }

  static void launch(BwdParams const& params, cudaStream_t stream) {
    BwdParams tma_params = with_tma_strides(params);
    // Queries along M, the consumers add dQ themselves, into an accumulator the preprocess zeroes, and the
    // postprocess waits for the whole kernel.
    if constexpr (!Traits::kKeysAlongM) { tma_params.dq_claims = tma_params.dq_done = nullptr; }
    if (params.causal) {
      launch_bwd<Traits, true>(tma_params, stream);
    } else {
      launch_bwd<Traits, false>(tma_params, stream);
    }
  }
};

}  // namespace flashcute::sm90
