// probe_decode_read_roof.py's reader: a kernel that only streams a (b, s, h, d) KV cache into shared memory, the way
// the decode kernel's loads do (16-byte cp.async, kStages blocks in flight per CTA), and reads nothing back.
// Plain CUDA, no torch header: built with nvcc by the script and called through ctypes.
//
// CTA c < main_ctas reads rows [share * rows_per_share, +rows_per_share) of lane c % lanes (share = c / lanes);
// a CTA past them reads rows [tail_first, rows) of lanes_per_tail lanes, one after another. A lane is col_bytes of
// every row, at lane * col_bytes.
#include <cstdint>

#include <cuda_runtime.h>

constexpr int kThreads = 128;

__device__ __forceinline__ void cp_async_16(uint32_t smem, char const* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem), "l"(gmem));
}

template <int kStages>
__global__ void __launch_bounds__(kThreads, 1)
    stream_kernel(char const* k, char const* v, int64_t rows, int64_t row_stride, int lanes, int64_t rows_per_share,
                  int main_ctas, int64_t tail_first, int lanes_per_tail, int col_bytes, int block_rows) {
  extern __shared__ __align__(128) char smem[];
  int const vecs_per_row = col_bytes / 16;  // a power of two
  int const row_shift = __ffs(vecs_per_row) - 1;
  int const stage_vecs = block_rows * vecs_per_row;  // of K; V's follow
  uint32_t const smem_base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  int lane0, n_lanes;
  int64_t first, last;
  if (int(blockIdx.x) < main_ctas) {
    lane0 = blockIdx.x % lanes;
    n_lanes = 1;
    first = (blockIdx.x / lanes) * rows_per_share;
    last = min(first + rows_per_share, rows);
  } else {
    lane0 = (blockIdx.x - main_ctas) * lanes_per_tail;
    n_lanes = lanes_per_tail;
    first = tail_first;
    last = rows;
  }
  int it = 0;
  for (int j = 0; j < n_lanes; ++j) {
    int64_t const col = int64_t(lane0 + j) * col_bytes;
    for (int64_t start = first; start < last; start += block_rows, ++it) {
      uint32_t const stage = smem_base + uint32_t((it % kStages) * 2 * stage_vecs * 16);
      for (int i = threadIdx.x; i < stage_vecs; i += kThreads) {
        int64_t const row = start + (i >> row_shift);
        if (row < last) {
          int64_t const offset = row * row_stride + col + (i & (vecs_per_row - 1)) * 16;
          cp_async_16(stage + i * 16, k + offset);
          cp_async_16(stage + (stage_vecs + i) * 16, v + offset);
        }
      }
      asm volatile("cp.async.commit_group;\n" ::);
      asm volatile("cp.async.wait_group %0;\n" ::"n"(kStages - 1));
    }
  }
  asm volatile("cp.async.wait_group 0;\n" ::);
}

template <int kStages>
static int launch(void const* k, void const* v, int64_t rows, int64_t row_stride, int lanes, int64_t rows_per_share,
                  int main_ctas, int64_t tail_first, int lanes_per_tail, int col_bytes, int block_rows, int ctas,
                  cudaStream_t stream) {
  int const smem = kStages * 2 * block_rows * col_bytes;
  cudaError_t err = cudaFuncSetAttribute(stream_kernel<kStages>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (err != cudaSuccess) { return int(err); }
  stream_kernel<kStages><<<ctas, kThreads, smem, stream>>>(static_cast<char const*>(k), static_cast<char const*>(v),
                                                            rows, row_stride, lanes, rows_per_share, main_ctas,
                                                            tail_first, lanes_per_tail, col_bytes, block_rows);
  return int(cudaGetLastError());
}

// Returns a cudaError_t (0: launched); -1 for a stage count it was not built with. Strides in bytes.
extern "C" int probe_stream(void const* k, void const* v, int64_t rows, int64_t row_stride, int lanes,
                            int64_t rows_per_share, int main_ctas, int64_t tail_first, int lanes_per_tail,
                            int col_bytes, int block_rows, int ctas, int stages, void* stream) {
  auto const s = static_cast<cudaStream_t>(stream);
  switch (stages) {
    case 2: return launch<2>(k, v, rows, row_stride, lanes, rows_per_share, main_ctas, tail_first, lanes_per_tail,
                             col_bytes, block_rows, ctas, s);
    case 3: return launch<3>(k, v, rows, row_stride, lanes, rows_per_share, main_ctas, tail_first, lanes_per_tail,
                             col_bytes, block_rows, ctas, s);
    case 4: return launch<4>(k, v, rows, row_stride, lanes, rows_per_share, main_ctas, tail_first, lanes_per_tail,
                             col_bytes, block_rows, ctas, s);
    default: return -1;
  }
}
