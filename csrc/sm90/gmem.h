// The global tensors of the SM90 forward: the whole Q, K, V, O as their tensor maps see them, (seqlen,
// head_dim, heads, batch) with head_dim contiguous and 64-bit strides, and the per-(batch, head) addresses the
// consumers write without TMA. The one place where params and sequence info become addresses.
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

// Host, for the tensor maps: -> (mQ, mK, mV, mO). A tensor map cannot have an empty extent; with seqlen_k == 0
// no tile loads K/V anyway.
template <class Element>
auto make_gmem_tensors(AttnParams const& p) {
  ShapeQKVO const shape_q = make_shape(p.seqlen_q, p.head_dim, p.heads_q, p.batch);
  ShapeQKVO const shape_kv = make_shape(p.seqlen_k > 0 ? p.seqlen_k : 1, p.head_dim, p.heads_kv, p.batch);
  auto gmem = [](void const* ptr, ShapeQKVO const& shape, int64_t row, int64_t head, int64_t batch) {
    return make_tensor(make_gmem_ptr(static_cast<Element*>(const_cast<void*>(ptr))), shape,
                       make_stride(row, _1{}, head, batch));
  };
  return cute::make_tuple(gmem(p.q_ptr, shape_q, p.q_row_stride, p.q_head_stride, p.q_batch_stride),
                          gmem(p.k_ptr, shape_kv, p.k_row_stride, p.k_head_stride, p.k_batch_stride),
                          gmem(p.v_ptr, shape_kv, p.v_row_stride, p.v_head_stride, p.v_batch_stride),
                          gmem(p.o_ptr, shape_q, p.o_row_stride, p.o_head_stride, p.o_batch_stride));
}

// Device: row 0 of one (batch, head)'s O and LSE.
template <class Element>
CUTE_DEVICE Element* o_row0(AttnParams const& p, SeqInfo const& seq, int head) {
  return static_cast<Element*>(p.o_ptr) + seq.o_offset() + head * p.o_head_stride;
}
CUTE_DEVICE float* lse_row0(AttnParams const& p, SeqInfo const& seq, int head) {
  return p.lse_ptr + seq.lse_offset() + head * seq.lse_head_stride();
}

}  // namespace flashcute::sm90
