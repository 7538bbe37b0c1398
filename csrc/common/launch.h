// Host-side launch helper shared by the kernels' launch templates.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

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

// Lets kKernel take smem_bytes of dynamic shared memory (cudaFuncAttributeMaxDynamicSharedMemorySize). The attribute
// is set only when a launch asks for more than it allows on the device so far, rather than at every launch: the call
// costs the host microseconds, which a decoding step (one launch per layer and token) pays in full. It only grows,
// to the largest size asked for, so launches of one kernel may ask for different sizes in any order. Devices past
// the 64th set it every time. Up to 48 KiB no attribute is needed.
template <auto kKernel>
void allow_dynamic_smem(int smem_bytes) {
  if (smem_bytes <= 48 * 1024) { return; }
  constexpr int kTrackedDevices = 64;
  static std::atomic<int> allowed[kTrackedDevices];  // per device: the size the attribute allows, 0 before it is set
  static std::mutex setting;                         // orders the sets, so a smaller size never follows a larger one
  int device = 0;
  cudaGetDevice(&device);
  if (device >= kTrackedDevices) {
    cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
    return;
  }
  if (allowed[device].load(std::memory_order_acquire) >= smem_bytes) { return; }
  std::lock_guard<std::mutex> lock(setting);
  if (allowed[device].load(std::memory_order_relaxed) >= smem_bytes) { return; }
  if (cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes) == cudaSuccess) {
    allowed[device].store(smem_bytes, std::memory_order_release);
  }
}

template <auto kKernel, int kSmemBytes>
void allow_dynamic_smem() {
  allow_dynamic_smem<kKernel>(kSmemBytes);
}

}  // namespace flashcute
