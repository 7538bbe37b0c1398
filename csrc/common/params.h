// The plain parameter structs that cross from the torch-facing file (flash_api.cpp) to the kernels.
// Torch-free on purpose: kernel translation units include only CUDA and CUTLASS headers.
//
// AttnParams holds what every attention op shares (the Q/K/V/O tensors and the LSE, shapes, scale and mask);
// each op's struct derives from it and adds its own parts.
#pragma once

#include <cstdint>

namespace flashcute {

struct AttnParams {
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
  int seqlen_q;       // per batch: common/seqlen.h SeqInfo gives each tile its batch's lengths and offsets
  int seqlen_k;
  int head_dim;       // the caller's head dim (multiple of 8, <= the kernel's instantiated kHeadDim)

  float softmax_scale;       // applied to Q.K^T before the softmax
  float softmax_scale_log2;  // softmax_scale * log2(e): the kernels use exp2

  // Mask: with causal, key j is visible to query i iff j <= i + causal_offset: seqlen_k - seqlen_q aligns the
  // diagonal bottom-right (FlashAttention's convention), 0 top-left (torch SDPA's, causal_top_left).
  bool causal;
  bool causal_top_left;
  int causal_offset;  // of every sequence of a fixed-length batch (common/seqlen.h SeqInfo::causal_offset)

  int num_sms;  // multiprocessors of the device, for persistent schedulers
};

// The forward writes O and the LSE of the base; it adds nothing of its own yet.
struct FwdParams : AttnParams {};

}  // namespace flashcute
