// Launch template of the SM80 backward: preprocess (grid: Q blocks, query heads, batch), the main kernel (K/V
// blocks, query heads, batch; one per causal flag), postprocess (dQ; with GQA dK and dV too).
#pragma once

#include <cstdio>

#include <cuda_runtime.h>

#include "common/launch.h"
#include "common/params.h"
#include "sm80/bwd_kernel.h"
#include "sm80/bwd_kernel_traits.h"
#include "sm80/bwd_postprocess.h"
#include "sm80/bwd_preprocess.h"

namespace flashcute::sm80 {

// grid: (row blocks, heads, batch), or the SM90 backward's packed-batch grid (row_block_of_cta).
// after_prior_grid_starts: launched while the kernel before it may still run (the SM90 backward's), which the
// postprocess waits for before reading the accumulators.
template <class Traits, Grad kGrad>
void launch_postprocess(BwdParams const& params, dim3 grid, cudaStream_t stream, bool after_prior_grid_starts = false) {
  constexpr int kSmemBytes = PostprocessOf<Traits, kGrad>::kSmemBytes;
  static_assert(kSmemBytes <= 48 * 1024);
  if (after_prior_grid_starts) {
    launch_after_prior_grid_starts(&bwd_postprocess_kernel<Traits, kGrad>, grid, dim3(Traits::kNThreads), kSmemBytes,
                                   stream, params);
  } else {
    bwd_postprocess_kernel<Traits, kGrad><<<grid, Traits::kNThreads, kSmemBytes, stream>>>(params);
  }
}

template <class Traits, bool kCausal>
void launch_bwd(BwdParams const& params, cudaStream_t stream) {
  constexpr int kBlockM = Traits::kBlockM, kBlockN = Traits::kBlockN, kThreads = Traits::kNThreads;
  auto blocks = [](int rows, int block) { return (rows + block - 1) / block; };

  bwd_preprocess_kernel<Traits>
      <<<dim3(blocks(params.seqlen_q, kBlockM), params.heads_q, params.batch), kThreads, 0, stream>>>(params);

  constexpr auto kernel = &bwd_kernel<Traits, kCausal>;
  constexpr int kSmemBytes = Traits::kSmemBytes;
  allow_dynamic_smem<kernel, kSmemBytes>();
  kernel<<<dim3(blocks(params.seqlen_k, kBlockN), params.heads_q, params.batch), kThreads, kSmemBytes, stream>>>(
      params);

  launch_postprocess<Traits, Grad::kDQ>(params, dim3(blocks(params.seqlen_q, kBlockM), params.heads_q, params.batch),
                                        stream);
  if (params.dk_accum_ptr != nullptr) {
    dim3 const kv_grid(blocks(params.seqlen_k, kBlockN), params.heads_kv, params.batch);
    launch_postprocess<Traits, Grad::kDK>(params, kv_grid, stream);
    launch_postprocess<Traits, Grad::kDV>(params, kv_grid, stream);
  }
}

// The registry's entry (common/registry.h) for one (dtype, head dim).
template <typename Element, int kHeadDim>
struct BwdKernel {
  using Traits = typename DefaultBwdTraits<Element, kHeadDim>::type;

  static void launch(BwdParams const& params, cudaStream_t stream) {
    if (params.causal) {
      launch_bwd<Traits, true>(params, stream);
    } else {
      launch_bwd<Traits, false>(params, stream);
    }
  }

  // The tile needs Traits::kSmemBytes of shared memory per CTA (Hopper and A100-class GPUs have it).
  static bool can_run(BwdParams const&, char* why, int why_size) {
    int device = 0, smem_per_block = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&smem_per_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess) {
      snprintf(why, why_size, "could not query the GPU's shared memory per block");
      return false;
    }
    if (smem_per_block < Traits::kSmemBytes) {
      snprintf(why, why_size, "the head_dim %d backward tile needs %d KiB of shared memory per block, this GPU offers %d KiB",
               kHeadDim, Traits::kSmemBytes / 1024, smem_per_block / 1024);
      return false;
    }
    return true;
  }
};

}  // namespace flashcute::sm80
