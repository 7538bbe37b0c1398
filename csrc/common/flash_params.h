// The plain parameter struct that crosses from the torch-facing file (flash_api.cpp) to the kernels.
// Torch-free on purpose: kernel translation units include only CUDA and CUTLASS headers.
#pragma once

#include <cstdint>

namespace flashcute {

struct FwdParams {
  // Tensors in (batch, seqlen, heads, head_dim) order; the head_dim stride is 1.
  const void* __restrict__ q_ptr;
  const void* __restrict__ k_ptr;
  const void* __restrict__ v_ptr;
  void* __restrict__ o_ptr;
  float* __restrict__ lse_ptr;  // (batch, heads_q, seqlen_q), contiguous

  // Strides in elements. 64-bit: batch * seqlen * heads * head_dim can pass 2^31.
  int64_t q_batch_stride, q_row_stride, q_head_stride;
  int64_t k_batch_stride, k_row_stride, k_head_stride;
  int64_t v_batch_stride, v_row_stride, v_head_stride;
  int64_t o_batch_stride, o_row_stride, o_head_stride;

  int batch;
  int heads_q;
  int heads_kv;       // heads_q % heads_kv == 0; query head h reads key/value head h / (heads_q / heads_kv)
  int seqlen_q;
  int seqlen_k;
  int head_dim;       // the caller's head dim (multiple of 8, <= the kernel's instantiated kHeadDim)

  float softmax_scale;       // applied to Q.K^T before the softmax
  float softmax_scale_log2;  // softmax_scale * log2(e): the kernels use exp2

  bool causal;
  // Key j is visible to query i iff j <= i + causal_offset (only when causal).
  // seqlen_k - seqlen_q aligns the diagonal bottom-right (FlashAttention), 0 top-left (torch SDPA).
  int causal_offset;

  int num_sms;  // multiprocessors of the device, for persistent schedulers
};

}  // namespace flashcute
