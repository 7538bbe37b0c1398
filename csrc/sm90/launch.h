// Host side of the SM90 forward: checks what TMA requires, encodes the tensor maps (passed to the kernel as
// __grid_constant__ parameters, nothing allocated), sizes the persistent grid and launches on the stream.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include <cuda_runtime.h>

#include "common/flash_params.h"
#include "sm90/kernel.h"
#include "sm90/kernel_traits.h"

namespace flashcute::sm90 {

// Why the SM90 kernel cannot take these parameters, or an empty string if it can. TMA needs 16-byte
// aligned base addresses and strides that are multiples of 16 bytes; the softmax needs a positive scale
// (the row max of the unscaled scores is the max of the scaled ones).
inline std::string unsupported_reason(FwdParams const& p, int element_bytes = 2) {
  auto aligned = [](void const* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  auto stride_ok = [&](int64_t stride) { return (stride * element_bytes) % 16 == 0; };
  if (!aligned(p.q_ptr) || !aligned(p.k_ptr) || !aligned(p.v_ptr) || !aligned(p.o_ptr)) {
    return "q, k, v and out must start at 16-byte aligned addresses";
  }
  int64_t const strides[] = {p.q_batch_stride, p.q_row_stride, p.q_head_stride, p.k_batch_stride,
                             p.k_row_stride,   p.k_head_stride, p.v_batch_stride, p.v_row_stride,
                             p.v_head_stride,  p.o_batch_stride, p.o_row_stride, p.o_head_stride};
  for (int64_t s : strides) {
    if (!stride_ok(s) || s < 0) { return "every batch, sequence and head stride must be a non-negative multiple of 8 elements"; }
  }
  if (p.head_dim % 8 != 0) { return "head_dim must be a multiple of 8"; }
  if (!(p.softmax_scale > 0.f)) { return "softmax_scale must be positive"; }
  return "";
}

template <class Traits>
void launch(FwdParams const& params, cudaStream_t stream) {
  using Scheduler = TileScheduler<Traits::kBlockM, Traits::kCausal>;
  KernelParams<Traits> kernel_params{params, Mainloop<Traits>::make_params(params),
                                     Epilogue<Traits>::make_params(params),
                                     Scheduler::make_params(params, sizeof(typename Traits::Element))};
  int num_sms = params.num_sms;
  if (num_sms <= 0) {
    int device = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, device);
  }
  auto kernel = &fwd_kernel<Traits>;
  constexpr int kSmemBytes = Traits::kSmemBytes;
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
  dim3 const grid(Scheduler::grid_size(kernel_params.scheduler, num_sms));
  kernel<<<grid, Traits::kNumThreads, kSmemBytes, stream>>>(kernel_params);
}

template <typename Element, int kHeadDim>
void run_fwd(FwdParams const& params, cudaStream_t stream) {
  std::string const reason = unsupported_reason(params, sizeof(Element));
  if (!reason.empty()) { throw std::invalid_argument("flashcute sm90 backend: " + reason); }
  if (params.batch == 0 || params.heads_q == 0 || params.seqlen_q == 0) { return; }
  if (params.causal) {
    launch<KernelTraits<Element, kHeadDim, true>>(params, stream);
  } else {
    launch<KernelTraits<Element, kHeadDim, false>>(params, stream);
  }
}

}  // namespace flashcute::sm90
