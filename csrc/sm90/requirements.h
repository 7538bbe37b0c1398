// What the SM90 kernel needs from its inputs beyond the op's contract, checked on the host (torch-free and
// CUTLASS-free, so the torch-facing file can ask before choosing this backend). TMA reads and writes
// through tensor maps: 16-byte aligned base addresses and strides that are positive multiples of 16 bytes
// below 2^40. A stride of a dimension with one index is never used and is not checked. The softmax takes
// the row max of the unscaled scores, which is the max of the scaled ones only for a positive scale.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "common/flash_params.h"

namespace flashcute::sm90 {

// Empty when the SM90 kernel can run these parameters, else the reason.
inline std::string unsupported_reason(FwdParams const& p, int element_bytes) {
  auto aligned = [](void const* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  auto stride_ok = [&](int64_t stride, int extent) {
    return extent <= 1 || (stride > 0 && (stride * element_bytes) % 16 == 0 && stride * element_bytes < (int64_t(1) << 40));
  };
  bool const has_keys = p.seqlen_k > 0;
  if (!aligned(p.q_ptr) || !aligned(p.o_ptr) || (has_keys && (!aligned(p.k_ptr) || !aligned(p.v_ptr)))) {
    return "q, k, v and out must start at 16-byte aligned addresses";
  }
  bool strides_ok = stride_ok(p.q_batch_stride, p.batch) && stride_ok(p.q_row_stride, p.seqlen_q) &&
                    stride_ok(p.q_head_stride, p.heads_q) && stride_ok(p.o_batch_stride, p.batch) &&
                    stride_ok(p.o_row_stride, p.seqlen_q) && stride_ok(p.o_head_stride, p.heads_q);
  if (has_keys) {
    strides_ok = strides_ok && stride_ok(p.k_batch_stride, p.batch) && stride_ok(p.k_row_stride, p.seqlen_k) &&
                 stride_ok(p.k_head_stride, p.heads_kv) && stride_ok(p.v_batch_stride, p.batch) &&
                 stride_ok(p.v_row_stride, p.seqlen_k) && stride_ok(p.v_head_stride, p.heads_kv);
  }
  if (!strides_ok) { return "batch, sequence and head strides must be positive multiples of 16 bytes"; }
  if (p.head_dim <= 0 || p.head_dim % 8 != 0) { return "head_dim must be a positive multiple of 8"; }
  if (!(p.softmax_scale > 0.f) || !std::isfinite(p.softmax_scale)) { return "softmax_scale must be positive and finite"; }
  return "";
}

}  // namespace flashcute::sm90
