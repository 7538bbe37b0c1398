// A C entry point to FlashAttention-3's SM90 backward (Dao-AILab/flash-attention hopper/), for bench_fa3_bwd.py:
// fixed-length MHA over (batch, seqlen, heads, head_dim) contiguous tensors, bf16, head dims 64 and 128, the
// float32 workspaces allocated by the caller. build.sh compiles it with FlashAttention-3's two instantiation units.
#include <cuda_runtime.h>
#include <cutlass/numeric_types.h>

#include "flash.h"

// FlashAttention-3's query block height for these head dims (flash_api.cpp mha_bwd): the workspaces' row rounding.
extern "C" int fa3_block_m(int head_dim, int causal) { return head_dim <= 64 ? 128 : (causal ? 64 : 80); }

// dq, dk, dv = the backward of softmax(q.k^T * scale).v given out, lse (batch, heads, seqlen_q) and dout. dsum and
// lse_log2: (batch, heads, seqlen_q rounded up to fa3_block_m) floats; dq_accum the same rows times head_dim;
// dq_semaphore (seqlen_q blocks, batch, heads) ints. 0 on success, 1 for an unbuilt head dim, 2 for a launch error.
extern "C" int fa3_bwd(void* q, void* k, void* v, void* out, void* dout, void* dq, void* dk, void* dv, void* lse,
                       void* dsum, void* lse_log2, void* dq_accum, void* dq_semaphore, int batch, int seqlen_q,
                       int seqlen_k, int heads, int head_dim, float scale, int causal, void* stream) {
  if (head_dim != 64 && head_dim != 128) { return 1; }
  int const block_m = fa3_block_m(head_dim, causal), block_n = 128;
  int64_t const row = int64_t(heads) * head_dim;
  Flash_bwd_params p = {};
  p.is_bf16 = true;
  p.q_ptr = q, p.k_ptr = k, p.v_ptr = v, p.o_ptr = out, p.do_ptr = dout;
  p.dq_ptr = dq, p.dk_ptr = dk, p.dv_ptr = dv;
  p.q_row_stride = p.k_row_stride = p.v_row_stride = p.o_row_stride = p.do_row_stride = row;
  p.dq_row_stride = p.dk_row_stride = p.dv_row_stride = row;
  p.q_head_stride = p.k_head_stride = p.v_head_stride = p.o_head_stride = p.do_head_stride = head_dim;
  p.dq_head_stride = p.dk_head_stride = p.dv_head_stride = head_dim;
  p.v_dim_stride = 1;
  p.q_batch_stride = p.o_batch_stride = p.do_batch_stride = p.dq_batch_stride = int64_t(seqlen_q) * row;
  p.k_batch_stride = p.v_batch_stride = p.dk_batch_stride = p.dv_batch_stride = int64_t(seqlen_k) * row;
  p.b = batch, p.h = heads, p.h_k = heads, p.seqlen_q = seqlen_q, p.seqlen_k = seqlen_k;
  p.seqlen_q_rounded = (seqlen_q + block_m - 1) / block_m * block_m;
  p.seqlen_k_rounded = (seqlen_k + block_n - 1) / block_n * block_n;
  p.d = p.d_rounded = p.dv = p.dv_rounded = head_dim;
  p.total_q = batch * seqlen_q, p.total_k = batch * seqlen_k;
  p.scale_softmax = scale;
  p.p_dropout = 1.f, p.p_dropout_in_uint8_t = 255, p.rp_dropout = 1.f;  // keep-probability 1: no dropout
  p.is_causal = causal != 0;  // bottom-right aligned, as FlashAttention's set_params_fprop sets it
  p.window_size_left = seqlen_k - 1, p.window_size_right = causal ? 0 : seqlen_q - 1;
  p.softmax_lse_ptr = lse, p.dsoftmax_sum = dsum, p.softmax_lse_log2_ptr = lse_log2;
  p.dq_accum_ptr = dq_accum, p.dq_semaphore = static_cast<int*>(dq_semaphore);
  int device = 0;
  cudaGetDevice(&device);
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, device);
  p.arch = prop.major * 10 + prop.minor, p.num_sm = prop.multiProcessorCount;
  auto const s = static_cast<cudaStream_t>(stream);
  if (head_dim == 64) {
    run_mha_bwd_<90, cutlass::bfloat16_t, 64, false>(p, s);
  } else {
    run_mha_bwd_<90, cutlass::bfloat16_t, 128, false>(p, s);
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
