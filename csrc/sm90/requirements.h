// What the SM90 kernel needs from its inputs beyond the op's contract, checked on the host before a launch
// (launch.h FwdKernel::can_run, which the registry asks when it picks a backend). TMA reads and writes
// through tensor maps: 16-byte aligned base addresses and strides that are positive multiples of 16 bytes
// below 2^40 (so no broadcast stride 0). A stride of a dimension with one index is never used and is not
// checked.
#pragma once

#include <cstdint>
#include <string>

#include "common/params.h"

namespace flashcute::sm90 {

// Empty when the SM90 kernel can run these parameters, else the reason, naming the tensor.
inline std::string unsupported_reason(FwdParams const& p, int element_bytes) {
  if (p.cu_seqlens_q != nullptr) { return "variable-length batches run on the SM80 kernels (no SM90 varlen kernel yet)"; }
  auto check = [&](char const* name, void const* ptr, int64_t batch_stride, int64_t row_stride, int64_t head_stride,
                   int seqlen, int heads) -> std::string {
    auto stride_ok = [&](int64_t stride, int extent) {
      int64_t const bytes = stride * element_bytes;
      return extent <= 1 || (stride > 0 && bytes % 16 == 0 && bytes < (int64_t(1) << 40));
    };
    if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0) {
      return std::string(name) + " must start at a 16-byte aligned address for TMA";
    }
    if (!stride_ok(batch_stride, p.batch) || !stride_ok(row_stride, seqlen) || !stride_ok(head_stride, heads)) {
      return std::string(name) + " needs batch, sequence and head strides that are positive multiples of 16 bytes "
             "for TMA, got " + std::to_string(batch_stride) + ", " + std::to_string(row_stride) + ", " +
             std::to_string(head_stride) + " elements";
    }
    return "";
  };
  std::string reason = check("q", p.q_ptr, p.q_batch_stride, p.q_row_stride, p.q_head_stride, p.seqlen_q, p.heads_q);
  if (reason.empty()) {
    reason = check("out", p.o_ptr, p.o_batch_stride, p.o_row_stride, p.o_head_stride, p.seqlen_q, p.heads_q);
  }
  if (reason.empty() && p.seqlen_k > 0) {  // with no keys, k and v are never read
    reason = check("k", p.k_ptr, p.k_batch_stride, p.k_row_stride, p.k_head_stride, p.seqlen_k, p.heads_kv);
  }
  if (reason.empty() && p.seqlen_k > 0) {
    reason = check("v", p.v_ptr, p.v_batch_stride, p.v_row_stride, p.v_head_stride, p.seqlen_k, p.heads_kv);
  }
  if (reason.empty() && (p.head_dim <= 0 || p.head_dim % 8 != 0)) {
    reason = "head_dim must be a positive multiple of 8, got " + std::to_string(p.head_dim);
  }
  return reason;
}

}  // namespace flashcute::sm90
