// The global tensors of one (batch, head) as the SM80 kernels address them: (seqlen, head_dim) views of Q, K, V
// and O and the (seqlen_q) LSE row, built from the tile's SeqInfo. The one place where params and sequence
// info become addresses.
#pragma once

#include <cute/tensor.hpp>

#include "common/params.h"
#include "common/seqlen.h"

namespace flashcute::sm80 {

using namespace cute;

// -> (mQ, mK, mV, mO, mLSE): (seqlen_q, d), (seqlen_k, d), (seqlen_k, d), (seqlen_q, d), (seqlen_q)
template <class Element>
CUTE_DEVICE auto make_gmem_tensors(AttnParams const& p, SeqInfo const& seq, int head, int head_kv) {
  auto view = [&](auto* base, int64_t offset, int64_t head_offset, int rows, int64_t row_stride) {
    return make_tensor(make_gmem_ptr(base + offset + head_offset), make_shape(rows, p.head_dim),
                       make_stride(row_stride, _1{}));
  };
  Tensor mQ = view(static_cast<Element const*>(p.q_ptr), seq.q_offset(), head * p.q_head_stride, seq.seqlen_q(),
                   p.q_row_stride);
  Tensor mK = view(static_cast<Element const*>(p.k_ptr), seq.k_offset(), head_kv * p.k_head_stride, seq.seqlen_k(),
                   p.k_row_stride);
  Tensor mV = view(static_cast<Element const*>(p.v_ptr), seq.v_offset(), head_kv * p.v_head_stride, seq.seqlen_k(),
                   p.v_row_stride);
  Tensor mO = view(static_cast<Element*>(p.o_ptr), seq.o_offset(), head * p.o_head_stride, seq.seqlen_q(),
                   p.o_row_stride);
  Tensor mLSE = make_tensor(make_gmem_ptr(p.lse_ptr + seq.lse_offset() + head * seq.lse_head_stride()),
                            make_shape(seq.seqlen_q()));
  return cute::make_tuple(mQ, mK, mV, mO, mLSE);
}

}  // namespace flashcute::sm80
