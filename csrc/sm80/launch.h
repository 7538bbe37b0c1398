// Launch template of the SM80 forward: grid (Q blocks, heads, batch), one kernel per causal flag and per kind of
// batch (fixed-length or packed).
#pragma once

#include <cuda_runtime.h>

#include "common/launch.h"
#include "common/params.h"
#include "sm80/kernel.h"
#include "sm80/kernel_traits.h"

namespace flashcute::sm80 {

template <class Traits, bool kCausal, bool kVarlen>
void launch(FwdParams const& params, cudaStream_t stream) {
  constexpr auto kernel = &fwd_kernel<Traits, kCausal, kVarlen>;
  constexpr int kSmemBytes = Traits::kSmemBytes;
  allow_dynamic_smem<kernel, kSmemBytes>();
  dim3 const grid((params.seqlen_q + Traits::kBlockM - 1) / Traits::kBlockM, params.heads_q, params.batch);
  kernel<<<grid, Traits::kNThreads, kSmemBytes, stream>>>(params);
}

// The registry's entry (common/registry.h) for one (dtype, head dim).
template <typename Element, int kHeadDim>
struct FwdKernel {
  using Traits = typename DefaultTraits<Element, kHeadDim>::type;

  static void launch(FwdParams const& params, cudaStream_t stream) {
    bool const varlen = params.cu_seqlens_q != nullptr;
    if (params.causal) {
      varlen ? sm80::launch<Traits, true, true>(params, stream) : sm80::launch<Traits, true, false>(params, stream);
    } else {
      varlen ? sm80::launch<Traits, false, true>(params, stream) : sm80::launch<Traits, false, false>(params, stream);
    }
  }

  // cp.async's 16-byte alignment is the op's own contract (flash_api.cpp checks it): any valid params run here.
  static bool can_run(FwdParams const&, char*, int) { return true; }
};

}  // namespace flashcute::sm80
