// Launch template of the SM80 forward: grid (Q blocks, heads, batch), one kernel per causal flag.
#pragma once

#include <cuda_runtime.h>

#include "common/flash_params.h"
#include "sm80/kernel.h"
#include "sm80/kernel_traits.h"

namespace flashcute::sm80 {

template <class Traits, bool kCausal>
void launch(FwdParams const& params, cudaStream_t stream) {
  auto kernel = &fwd_kernel<Traits, kCausal>;
  constexpr int kSmemBytes = Traits::kSmemBytes;
  if constexpr (kSmemBytes >= 48 * 1024) {
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
  }
  dim3 const grid((params.seqlen_q + Traits::kBlockM - 1) / Traits::kBlockM, params.heads_q, params.batch);
  kernel<<<grid, Traits::kNThreads, kSmemBytes, stream>>>(params);
}

template <typename Element, int kHeadDim>
void run_fwd(FwdParams const& params, cudaStream_t stream) {
  using Traits = typename DefaultTraits<Element, kHeadDim>::type;
  if (params.causal) {
    launch<Traits, true>(params, stream);
  } else {
    launch<Traits, false>(params, stream);
  }
}

}  // namespace flashcute::sm80
