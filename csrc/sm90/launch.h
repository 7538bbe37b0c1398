// Host side of the SM90 forward: says whether TMA can address the inputs (requirements.h), encodes the tensor
// maps (passed to the kernel as __grid_constant__ parameters, nothing allocated), sizes the persistent grid and
// launches on the caller's stream. The kernel variant follows the causal flag, varlen or not (a packed batch first
// runs the scheduler's prepass, tile_scheduler.h) and, where a head dim has a long-seqlen_k tile (kernel_table.h
// FwdTile<d, kNonCausalLongK>), seqlen_k.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "common/launch.h"
#include "common/params.h"
#include "sm90/kernel.h"
#include "sm90/kernel_traits.h"
#include "sm90/requirements.h"
#include "sm90/varlen_schedule.h"

namespace flashcute::sm90 {

template <class Traits, bool kVarlen>
void launch(FwdParams const& params, cudaStream_t stream) {
  using Scheduler = TileScheduler<Traits::kBlockM, Traits::kCausal, kVarlen>;
  KernelParams<Traits, kVarlen> kernel_params{params, Mainloop<Traits>::make_params(params),
                                              Epilogue<Traits>::make_params(params),
                                              Scheduler::make_params(params, sizeof(typename Traits::Element))};
  int num_sms = params.num_sms;
  if (num_sms <= 0) {
    int device = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, device);
  }
  if constexpr (kVarlen) {  // the caller allocated params.varlen_schedule (flash_api.cpp)
    varlen_schedule_kernel<Traits::kBlockM, Traits::kBlockN, Traits::kCausal>
        <<<1, kVarlenScheduleThreads, 0, stream>>>(params);
  }
  constexpr auto kernel = &fwd_kernel<Traits, kVarlen>;
  constexpr int kSmemBytes = Traits::kSmemBytes;
  allow_dynamic_smem<kernel, kSmemBytes>();
  dim3 const grid(Scheduler::grid_size(kernel_params.scheduler, num_sms));
  kernel<<<grid, Traits::kNumThreads, kSmemBytes, stream>>>(kernel_params);
}

// The registry's entry (common/registry.h) for one (dtype, head dim).
template <typename Element, int kHeadDim>
struct FwdKernel {
  static bool can_run(FwdParams const& params, char* why, int why_size) {
    return tma_can_run(params, sizeof(Element), kHeadDim, KernelTraits<Element, kHeadDim, false>::kTmaBoxCols, why,
                       why_size);
  }

  static void launch(FwdParams const& params, cudaStream_t stream) {
    if (params.batch == 0 || params.heads_q == 0 || params.seqlen_q == 0) { return; }
    FwdParams const tma_params = with_tma_strides(params);
    bool const varlen = params.cu_seqlens_q != nullptr;
    auto launch_fixed_or_varlen = [&](auto traits) {
      using Traits = decltype(traits);
      if (varlen) {
        sm90::launch<Traits, true>(tma_params, stream);
      } else {
        sm90::launch<Traits, false>(tma_params, stream);
      }
    };
    if (params.causal) {
      launch_fixed_or_varlen(KernelTraits<Element, kHeadDim, true>{});
      return;
    }
    if constexpr (FwdTile<kHeadDim, FwdVariant::kNonCausalLongK>::kShipped) {
      // Fixed length only: a varlen seqlen_k is the longest sequence's, and most tiles see far fewer keys.
      if (params.seqlen_k >= kLongSeqlenKMin && !varlen) {
        sm90::launch<KernelTraits<Element, kHeadDim, false, true>, false>(tma_params, stream);
        return;
      }
    }
    launch_fixed_or_varlen(KernelTraits<Element, kHeadDim, false>{});
  }
};

}  // namespace flashcute::sm90
