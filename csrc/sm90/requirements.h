// What the SM90 kernels need from their inputs beyond the ops' contract, checked on the host before a launch
// (FwdKernel::can_run and BwdKernel::can_run, which the registry asks when it picks a backend), and the stride
// fix-up the tensor maps need. TMA reads and writes through tensor maps: 16-byte aligned base addresses and
// strides that are positive multiples of 16 bytes below 2^40 (so no broadcast stride 0). A stride of a dimension
// with one index is never used and is not checked.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "common/params.h"

namespace flashcute::sm90 {

// Empty when TMA can address this (batch, seqlen, heads, head_dim) tensor, else the reason, naming it.
inline std::string tma_tensor_reason(char const* name, void const* ptr, int64_t batch_stride, int64_t row_stride,
                                     int64_t head_stride, int batch, int seqlen, int heads, int element_bytes) {
  auto stride_ok = [&](int64_t stride, int extent) {
    int64_t const bytes = stride * element_bytes;
    return extent <= 1 || (stride > 0 && bytes % 16 == 0 && bytes < (int64_t(1) << 40));
  };
  if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0) {
    return std::string(name) + " must start at a 16-byte aligned address for TMA";
  }
  if (!stride_ok(batch_stride, batch) || !stride_ok(row_stride, seqlen) || !stride_ok(head_stride, heads)) {
    return std::string(name) + " needs batch, sequence and head strides that are positive multiples of 16 bytes "
           "for TMA, got " + std::to_string(batch_stride) + ", " + std::to_string(row_stride) + ", " +
           std::to_string(head_stride) + " elements";
  }
  return "";
}

// The extents the tensor maps' strides step over: (batch entries, rows of Q's tensors, rows of K's tensors). Varlen:
// packed (total, heads, head_dim) tensors, whose tensor maps index rows by the row stride only (gmem.h), so one
// batch entry and the packed totals.
struct TmaExtents {
  int batch, q_rows, k_rows;
};
inline TmaExtents tma_extents(AttnParams const& p) {
  bool const varlen = p.cu_seqlens_q != nullptr;
  return varlen ? TmaExtents{1, p.total_q, p.total_k} : TmaExtents{p.batch, p.seqlen_q, p.seqlen_k};
}

// Empty when the SM90 kernel of the op (instantiated for kernel_head_dim, whose TMA boxes are box_cols wide) can run
// these parameters, else the reason, naming the tensor.
template <class Params>
std::string unsupported_reason(Params const& p, int element_bytes, int kernel_head_dim, int box_cols) {
  constexpr bool kBwd = std::is_same_v<Params, BwdParams>;
  TmaExtents const extents = tma_extents(p);
  std::string reason;
  auto check = [&](char const* name, void const* ptr, int64_t batch_stride, int64_t row_stride, int64_t head_stride,
                   int rows, int heads) {
    if (reason.empty()) {
      reason = tma_tensor_reason(name, ptr, batch_stride, row_stride, head_stride, extents.batch, rows, heads,
                                 element_bytes);
    }
  };
  check("q", p.q_ptr, p.q_batch_stride, p.q_row_stride, p.q_head_stride, extents.q_rows, p.heads_q);
  if constexpr (!kBwd) {  // the backward reads out with plain loads (its preprocess)
    check("out", p.o_ptr, p.o_batch_stride, p.o_row_stride, p.o_head_stride, extents.q_rows, p.heads_q);
  }
  if (extents.k_rows > 0) {  // with no keys, k and v are never read
    check("k", p.k_ptr, p.k_batch_stride, p.k_row_stride, p.k_head_stride, extents.k_rows, p.heads_kv);
    check("v", p.v_ptr, p.v_batch_stride, p.v_row_stride, p.v_head_stride, extents.k_rows, p.heads_kv);
  }
  if constexpr (kBwd) {
    check("dout", p.do_ptr, p.do_batch_stride, p.do_row_stride, p.do_head_stride, extents.q_rows, p.heads_q);
    check("dk", p.dk_ptr, p.dk_batch_stride, p.dk_row_stride, p.dk_head_stride, extents.k_rows, p.heads_kv);
    check("dv", p.dv_ptr, p.dv_batch_stride, p.dv_row_stride, p.dv_head_stride, extents.k_rows, p.heads_kv);
  }
  if (reason.empty() && (p.head_dim <= 0 || p.head_dim % 8 != 0)) {
    reason = "head_dim must be a positive multiple of 8, got " + std::to_string(p.head_dim);
  }
  // A packed batch's tensor maps start max_seqlen rows before the tensor (gmem.h make_rows_tensor). There a box
  // wholly past head_dim (only in builds without the head dim's own kernel) raised an illegal address on an H100
  // where it should have filled zeros, depending on the memory before the tensor; so each box must reach a column
  // below head_dim.
  int const padded_head_dim = (p.head_dim + box_cols - 1) / box_cols * box_cols;
  if (reason.empty() && p.cu_seqlens_q != nullptr && padded_head_dim < kernel_head_dim) {
    reason = "packed (varlen) batches with head_dim " + std::to_string(p.head_dim) +
             " need an SM90 kernel for head dim " + std::to_string(padded_head_dim) + ", and this build's nearest is " +
             std::to_string(kernel_head_dim) + " (FLASHCUTE_HDIMS chooses the build's head dims)";
  }
  return reason;
}

// The registry's can_run for an SM90 kernel (common/registry.h): true, or false with the reason in `why`.
template <class Params>
bool tma_can_run(Params const& params, int element_bytes, int kernel_head_dim, int box_cols, char* why,
                 int why_size) {
  std::string const reason = unsupported_reason(params, element_bytes, kernel_head_dim, box_cols);
  if (!reason.empty() && why_size > 0) {
    std::strncpy(why, reason.c_str(), why_size - 1);
    why[why_size - 1] = '\0';
  }
  return reason.empty();
}

// Tensor maps need a valid stride even where it is never used: a dimension with a single index (torch keeps
// any value there), or k and v (dk, dv) when there are no keys. Give those 16 bytes.
template <class Params>
Params with_tma_strides(Params p) {
  int64_t const unused = 8;  // elements
  TmaExtents const extents = tma_extents(p);
  int const kv_batch = extents.k_rows > 0 ? extents.batch : 0;
  int const kv_heads = extents.k_rows > 0 ? p.heads_kv : 0;
  auto fix = [&](int64_t& stride, int extent) {
    if (extent <= 1) { stride = unused; }
  };
  auto fix_q_rows = [&](int64_t& batch_stride, int64_t& row, int64_t& head) {
    fix(batch_stride, extents.batch), fix(row, extents.q_rows), fix(head, p.heads_q);
  };
  auto fix_k_rows = [&](int64_t& batch_stride, int64_t& row, int64_t& head) {
    fix(batch_stride, kv_batch), fix(row, extents.k_rows), fix(head, kv_heads);
  };
  fix_q_rows(p.q_batch_stride, p.q_row_stride, p.q_head_stride);
  fix_q_rows(p.o_batch_stride, p.o_row_stride, p.o_head_stride);
  fix_k_rows(p.k_batch_stride, p.k_row_stride, p.k_head_stride);
  fix_k_rows(p.v_batch_stride, p.v_row_stride, p.v_head_stride);
  if constexpr (std::is_same_v<Params, BwdParams>) {
    fix_q_rows(p.do_batch_stride, p.do_row_stride, p.do_head_stride);
    fix_k_rows(p.dk_batch_stride, p.dk_row_stride, p.dk_head_stride);
    fix_k_rows(p.dv_batch_stride, p.dv_row_stride, p.dv_head_stride);
  }
  return p;
}

}  // namespace flashcute::sm90
