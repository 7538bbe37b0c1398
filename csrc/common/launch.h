// Host-side launch helper shared by the kernels' launch templates.
#pragma once

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

}  // namespace flashcute
