// Host-side launch helper shared by the kernels' launch templates.
#pragma once

#include <atomic>
#include <cstdint>

#include <cuda_runtime.h>

namespace flashcute {

// Launches kernel<<<grid, block, smem_bytes, stream>>>(args...) allowed to start before the kernel ahead of it on
// the stream has finished (programmatic dependent launch, SM90 on; elsewhere an ordinary launch): the kernel must
// call wait_for_prior_grid() (common/utils.h) before it reads anything that kernel writes.
template <class... KernelArgs, class... Args>
cudaError_t launch_after_prior_grid_starts(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, int smem_bytes,
                                           cudaStream_t stream, Args const&... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = size_t(smem_bytes);
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, kernel, args...);
}

// Lets kKernel take smem_bytes of dynamic shared memory (cudaFuncAttributeMaxDynamicSharedMemorySize), set once
// per device rather than at every launch: the call costs the host microseconds, which a decoding step (one launch
// per layer and token) pays in full. smem_bytes must be the same at every call on a device. Devices past the 64th
// set it every time. Below 48 KiB no attribute is needed.
template <auto kKernel>
void allow_dynamic_smem(int smem_bytes) {
  if (smem_bytes < 48 * 1024) { return; }
  static std::atomic<uint64_t> set_on{0};  // one bit per device, per kernel instantiation
  int device = 0;
  cudaGetDevice(&device);
  uint64_t const bit = device < 64 ? uint64_t(1) << device : 0;
  if (bit != 0 && (set_on.load(std::memory_order_relaxed) & bit) != 0) { return; }
  if (cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes) == cudaSuccess) {
    set_on.fetch_or(bit, std::memory_order_relaxed);
  }
}

template <auto kKernel, int kSmemBytes>
void allow_dynamic_smem() {
  allow_dynamic_smem<kKernel>(kSmemBytes);
}

}  // namespace flashcute
