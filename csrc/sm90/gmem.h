// The global tensors of the SM90 kernels: the whole Q, K, V, O (and the backward's dO, dK, dV) as their tensor maps
// see them, (seqlen, head_dim, heads, batch) with head_dim contiguous and 64-bit strides, and the per-(batch, head)
// addresses the consumers write without TMA. The one place where params and sequence info become addresses.
#pragma once

#include <cute/tensor.hpp>

#include "common/params.h"
#include "common/seqlen.h"

namespace flashcute::sm90 {

using namespace cute;

using ShapeQKVO = Shape<int32_t, int32_t, int32_t, int32_t>;
using StrideQKVO = Stride<int64_t, _1, int64_t, int64_t>;

template <class Element>
using GmemTensorQKVO = decltype(make_tensor(make_gmem_ptr(static_cast<Element*>(nullptr)), ShapeQKVO{}, StrideQKVO{}));

template <class Element>
auto make_gmem_tensor(void const* ptr, ShapeQKVO const& shape, int64_t row, int64_t head, int64_t batch) {
  return make_tensor(make_gmem_ptr(static_cast<Element*>(const_cast<void*>(ptr))), shape, make_stride(row, _1{}, head, batch));
}

// Host, for the tensor maps. Fixed length: (seqlen, head_dim, heads, batch). A tensor map cannot have an empty
// extent; with seqlen_k == 0 no tile loads K/V anyway.
//
// Varlen: the packed (total, heads, head_dim) tensor seen as (max_seqlen, head_dim, heads, total + 1), whose last
// mode is the row where a sequence ends: (r, ., ., e) is packed row e - max_seqlen + r. A tile of the sequence
// [start, end) indexes it at e = end and r = max_seqlen - (end - start) + its row (SequenceRows), so its rows at
// or past the end fall past max_seqlen: out of bounds for TMA, zero-filled when loaded and clipped when stored,
// exactly as rows past seqlen with fixed lengths. No box reaches the next sequence's rows, whatever they hold.
// The tensor map's base lies max_seqlen rows before the tensor; only rows of the sequence are ever addressed.
inline ShapeQKVO rows_shape(AttnParams const& p, int seqlen, int heads, int total) {
  return make_shape(seqlen > 0 ? seqlen : 1, p.head_dim, heads, p.cu_seqlens_q != nullptr ? total + 1 : p.batch);
}

template <class Element>
auto make_rows_tensor(AttnParams const& p, void const* ptr, int seqlen, int heads, int total, int64_t batch_stride,
                      int64_t row_stride, int64_t head_stride) {
  ShapeQKVO const shape = rows_shape(p, seqlen, heads, total);
  if (p.cu_seqlens_q == nullptr) { return make_gmem_tensor<Element>(ptr, shape, row_stride, head_stride, batch_stride); }
  Element const* const base = static_cast<Element const*>(ptr) - int64_t(get<0>(shape)) * row_stride;
  return make_gmem_tensor<Element>(base, shape, row_stride, head_stride, row_stride);
}

template <class Element>
auto make_q_rows_tensor(AttnParams const& p, void const* ptr, int64_t batch_stride, int64_t row_stride,
                        int64_t head_stride) {
  return make_rows_tensor<Element>(p, ptr, p.seqlen_q, p.heads_q, p.total_q, batch_stride, row_stride, head_stride);
}
template <class Element>
auto make_k_rows_tensor(AttnParams const& p, void const* ptr, int64_t batch_stride, int64_t row_stride,
                        int64_t head_stride) {
  return make_rows_tensor<Element>(p, ptr, p.seqlen_k, p.heads_kv, p.total_k, batch_stride, row_stride, head_stride);
}

// -> (mQ, mK, mV, mO)
template <class Element>
auto make_gmem_tensors(AttnParams const& p) {
  return cute::make_tuple(
      make_q_rows_tensor<Element>(p, p.q_ptr, p.q_batch_stride, p.q_row_stride, p.q_head_stride),
      make_k_rows_tensor<Element>(p, p.k_ptr, p.k_batch_stride, p.k_row_stride, p.k_head_stride),
      make_k_rows_tensor<Element>(p, p.v_ptr, p.v_batch_stride, p.v_row_stride, p.v_head_stride),
      make_q_rows_tensor<Element>(p, p.o_ptr, p.o_batch_stride, p.o_row_stride, p.o_head_stride));
}

// The backward's: -> (mdO, mdK, mdV)
template <class Element>
auto make_grad_gmem_tensors(BwdParams const& p) {
  return cute::make_tuple(
      make_q_rows_tensor<Element>(p, p.do_ptr, p.do_batch_stride, p.do_row_stride, p.do_head_stride),
      make_k_rows_tensor<Element>(p, p.dk_ptr, p.dk_batch_stride, p.dk_row_stride, p.dk_head_stride),
      make_k_rows_tensor<Element>(p, p.dv_ptr, p.dv_batch_stride, p.dv_row_stride, p.dv_head_stride));
}

// Device: one sequence's rows of one head in a tensor-map view of make_gmem_tensors, (seqlen, head_dim), row 0
// being the sequence's first: the last-mode index and the row offset that view needs.
struct SequenceRows {
  int index;       // fixed length: the batch entry; varlen: the sequence's end row
  int row_offset;  // varlen: max_seqlen - the sequence's rows; 0 with fixed lengths

  template <class Seq>
  CUTE_DEVICE static SequenceRows of_q(AttnParams const& p, Seq const& seq) {
    return seq.varlen() ? SequenceRows{seq.q_start() + seq.seqlen_q(), p.seqlen_q - seq.seqlen_q()}
                        : SequenceRows{seq.batch, 0};
  }
  template <class Seq>
  CUTE_DEVICE static SequenceRows of_k(AttnParams const& p, Seq const& seq) {
    return seq.varlen() ? SequenceRows{seq.k_start() + seq.seqlen_k(), p.seqlen_k - seq.seqlen_k()}
                        : SequenceRows{seq.batch, 0};
  }

  template <class TmaTensor>
  CUTE_DEVICE auto of_head(TmaTensor const& m, int head) const {
    return domain_offset(make_coord(row_offset, _0{}), m(_, _, head, index));  // (seqlen, D)
  }
};

// Device: row 0 of one (batch, head)'s O and LSE.
template <class Element, class Seq>
CUTE_DEVICE Element* o_row0(AttnParams const& p, Seq const& seq, int head) {
  return static_cast<Element*>(p.o_ptr) + seq.o_offset() + head * p.o_head_stride;
}
template <class Seq>
CUTE_DEVICE float* lse_row0(AttnParams const& p, Seq const& seq, int head) {
  return p.lse_ptr + seq.lse_offset() + head * seq.lse_head_stride();
}

// gmem_dst[0, bytes) += smem_src[0, bytes) in float32: one asynchronous bulk reduction, committed with the issuing
// thread's bulk group (tma_store_arrive; tma_store_wait<n> waits for its shared-memory reads). `hint` is the L2
// eviction priority of the lines it adds into (TMA::CacheHintSm90).
CUTE_DEVICE void bulk_reduce_add_f32(float* gmem_dst, float const* smem_src, int bytes, TMA::CacheHintSm90 hint) {
#if defined(CUTE_ARCH_TMA_SM90_ENABLED)
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.L2::cache_hint.add.f32 [%0], [%1], %2, %3;\n"
               :: "l"(gmem_dst), "r"(cast_smem_ptr_to_uint(smem_src)), "r"(bytes), "l"(uint64_t(hint)) : "memory");
#endif
}

// Waits until every bulk group of this thread has completed, its global writes included.
CUTE_DEVICE void bulk_wait_complete() {
#if defined(CUTE_ARCH_TMA_SM90_ENABLED)
  asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
#endif
}

// Orders this thread's generic-proxy view of global memory and its asynchronous (bulk) operations on it: what its
// acquire made visible before its later bulk reductions, or its completed bulk writes before its later release.
CUTE_DEVICE void fence_proxy_async_global() {
#if defined(CUTE_ARCH_TMA_SM90_ENABLED)
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
#endif
}

}  // namespace flashcute::sm90
