// Sequence information of one batch entry, shared by every kernel and op: where its rows start in Q/K/V/O and
// the LSE, and how many there are. Fixed-length batches take seqlen_q/seqlen_k and the batch strides of the
// params; per-sequence lengths (cu_seqlens, KV-cache lengths) change only this struct.
#pragma once

#include <cstdint>

#include "params.h"

namespace flashcute {

struct SeqInfo {
  int seqlen_q;
  int seqlen_k;
  int causal_offset;  // key j is visible to query i iff j <= i + causal_offset (causal only)
  int64_t q_offset, k_offset, v_offset, o_offset;  // elements to this batch's row 0, head 0
  int64_t lse_offset;                              // elements to this batch's (head 0, row 0) LSE
  int64_t lse_head_stride;

  __host__ __device__ SeqInfo(AttnParams const& p, int batch)
      : seqlen_q(p.seqlen_q),
        seqlen_k(p.seqlen_k),
        causal_offset(p.causal_top_left ? 0 : p.seqlen_k - p.seqlen_q),
        q_offset(batch * p.q_batch_stride),
        k_offset(batch * p.k_batch_stride),
        v_offset(batch * p.v_batch_stride),
        o_offset(batch * p.o_batch_stride),
        lse_offset(int64_t(batch) * p.heads_q * p.seqlen_q),
        lse_head_stride(p.seqlen_q) {}
};

}  // namespace flashcute
