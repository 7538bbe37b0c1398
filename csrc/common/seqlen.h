// Sequence information of one batch entry, shared by every kernel and op: where its rows start in Q/K/V/O and
// the LSE, and how many there are. Fixed-length batches read seqlen_q/seqlen_k and the batch strides of the
// params; per-sequence lengths (cu_seqlens, KV-cache lengths) change only this struct.
//
// Accessors read the params where they are asked for, rather than copying them into members: the params sit
// in constant (kernel-parameter) memory, which the register-bound SM80 kernels read at no register cost (copies
// held in registers across the mainloop cost them spills: benchmarks/notes.md#d-seqinfo-accessors).
#pragma once

#include <cstdint>

#include "params.h"

namespace flashcute {

struct SeqInfo {
  AttnParams const& params;
  int batch;

  __host__ __device__ SeqInfo(AttnParams const& p, int b) : params(p), batch(b) {}

  __host__ __device__ int seqlen_q() const { return params.seqlen_q; }
  __host__ __device__ int seqlen_k() const { return params.seqlen_k; }
  // Key j is visible to query i iff j <= i + causal_offset() (causal only).
  __host__ __device__ int causal_offset() const { return params.causal_offset; }
  // Elements to this batch's row 0 (head 0) of a tensor with Q's rows (Q, O, dO, dQ) or K's rows (K, V, dK, dV).
  __host__ __device__ int64_t q_rows_offset(int64_t batch_stride) const { return batch * batch_stride; }
  __host__ __device__ int64_t k_rows_offset(int64_t batch_stride) const { return batch * batch_stride; }
  __host__ __device__ int64_t q_offset() const { return q_rows_offset(params.q_batch_stride); }
  __host__ __device__ int64_t k_offset() const { return k_rows_offset(params.k_batch_stride); }
  __host__ __device__ int64_t v_offset() const { return k_rows_offset(params.v_batch_stride); }
  __host__ __device__ int64_t o_offset() const { return q_rows_offset(params.o_batch_stride); }
  // The LSE is (batch, heads_q, seqlen_q): this batch's (head 0, row 0), and the stride between heads. The
  // backward's D is laid out alike.
  __host__ __device__ int64_t lse_offset() const { return int64_t(batch) * params.heads_q * params.seqlen_q; }
  __host__ __device__ int64_t lse_head_stride() const { return params.seqlen_q; }
  // The backward's float32 accumulators (common/params.h BwdParams): rows per head, and this batch's first row,
  // for dQ's (heads_q) and, with GQA, dK's and dV's (heads_kv).
  __host__ __device__ int q_accum_rows() const { return round_up_accum_rows(params.seqlen_q); }
  __host__ __device__ int k_accum_rows() const { return round_up_accum_rows(params.seqlen_k); }
  __host__ __device__ int64_t q_accum_offset() const { return int64_t(batch) * params.heads_q * q_accum_rows(); }
  __host__ __device__ int64_t k_accum_offset() const { return int64_t(batch) * params.heads_kv * k_accum_rows(); }

 private:
  __host__ __device__ static int round_up_accum_rows(int rows) {
    return (rows + kBwdAccumRowAlign - 1) / kBwdAccumRowAlign * kBwdAccumRowAlign;
  }
};

}  // namespace flashcute
