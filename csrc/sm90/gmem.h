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

// Host, for the tensor maps: the shapes of the tensors with Q's rows and with K's rows. A tensor map cannot have
// an empty extent; with seqlen_k == 0 no tile loads K/V anyway.
inline ShapeQKVO q_rows_shape(AttnParams const& p) { return make_shape(p.seqlen_q, p.head_dim, p.heads_q, p.batch); }
inline ShapeQKVO k_rows_shape(AttnParams const& p) {
  return make_shape(p.seqlen_k > 0 ? p.seqlen_k : 1, p.head_dim, p.heads_kv, p.batch);
}

// -> (mQ, mK, mV, mO)
template <class Element>
auto make_gmem_tensors(AttnParams const& p) {
  return cute::make_tuple(
      make_gmem_tensor<Element>(p.q_ptr, q_rows_shape(p), p.q_row_stride, p.q_head_stride, p.q_batch_stride),
      make_gmem_tensor<Element>(p.k_ptr, k_rows_shape(p), p.k_row_stride, p.k_head_stride, p.k_batch_stride),
      make_gmem_tensor<Element>(p.v_ptr, k_rows_shape(p), p.v_row_stride, p.v_head_stride, p.v_batch_stride),
      make_gmem_tensor<Element>(p.o_ptr, q_rows_shape(p), p.o_row_stride, p.o_head_stride, p.o_batch_stride));
}

// The backward's: -> (mdO, mdK, mdV)
template <class Element>
auto make_grad_gmem_tensors(BwdParams const& p) {
  return cute::make_tuple(
      make_gmem_tensor<Element>(p.do_ptr, q_rows_shape(p), p.do_row_stride, p.do_head_stride, p.do_batch_stride),
      make_gmem_tensor<Element>(p.dk_ptr, k_rows_shape(p), p.dk_row_stride, p.dk_head_stride, p.dk_batch_stride),
      make_gmem_tensor<Element>(p.dv_ptr, k_rows_shape(p), p.dv_row_stride, p.dv_head_stride, p.dv_batch_stride));
}

// Device: row 0 of one (batch, head)'s O and LSE.
template <class Element>
CUTE_DEVICE Element* o_row0(AttnParams const& p, SeqInfo const& seq, int head) {
  return static_cast<Element*>(p.o_ptr) + seq.o_offset() + head * p.o_head_stride;
}
CUTE_DEVICE float* lse_row0(AttnParams const& p, SeqInfo const& seq, int head) {
  return p.lse_ptr + seq.lse_offset() + head * seq.lse_head_stride();
}

// gmem_dst[0, bytes) += smem_src[0, bytes) in float32: one asynchronous bulk reduction, committed with the issuing
// thread's bulk group (tma_store_arrive; tma_store_wait<n> waits for its shared-memory reads).
CUTE_DEVICE void bulk_reduce_add_f32(float* gmem_dst, float const* smem_src, int bytes) {
#if defined(CUTE_ARCH_TMA_SM90_ENABLED)
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n"
               :: "l"(gmem_dst), "r"(cast_smem_ptr_to_uint(smem_src)), "r"(bytes) : "memory");
#endif
}

// Waits until every bulk group of this thread has completed, its global writes included.
CUTE_DEVICE void bulk_wait_complete() {
#if defined(CUTE_ARCH_TMA_SM90_ENABLED)
  asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
#endif
}

}  // namespace flashcute::sm90
