// Sequence information of one batch entry, shared by every kernel and op: where its rows start in Q/K/V/O and
// the LSE, and how many there are. Fixed-length batches read seqlen_q/seqlen_k and the batch strides of the
// params; variable-length (packed) batches read each sequence's rows from cu_seqlens (and seqused_k). Nothing
// else in a kernel knows which of the two it runs.
//
// Accessors read the params where they are asked for, rather than copying them into members: the params sit
// in constant (kernel-parameter) memory, which the register-bound SM80 kernels read at no register cost (copies
// held in registers across the mainloop cost them spills: benchmarks/notes.md#d-seqinfo-accessors).
//
// Malformed cu_seqlens (decreasing, or past the packed rows) cannot be checked without a host synchronisation:
// the starts and lengths are clamped to the packed tensors, so such input gives wrong rows but never an access
// outside q, k, v, out, the LSE or the workspaces.
#pragma once

#include <cstdint>
#include <type_traits>

#include "params.h"

namespace flashcute {

// kMaybeVarlen = false: a kernel instantiated for fixed-length batches only, with no varlen code at all (the
// run-time check costs the register-bound SM80 forward spills: benchmarks/notes.md#d-sm80-fwd-varlen-template).
// kMaybeSequsedFixed: a fixed-length batch may set seqused_k (the decode kernel's cache lengths) and cache_leftpad:
// sequence b then has keys cache_leftpad[b] .. seqused_k[b] - 1 of its cache, and causal aligns its diagonal
// bottom-right.
// kReadOnce: a packed sequence's starts and lengths are read from cu_seqlens (and seqused_k) at construction and
// held, for a kernel that asks for them many times per tile across memory clobbers (every wgmma fence), where
// each ask would repeat its chain of global loads (benchmarks/notes.md#d-sm90-varlen-seqinfo-read-once).
struct NoSequenceRowsHeld {};
struct SequenceRowsHeld {
  int q_start_ = 0, k_start_ = 0, seqlen_q_ = 0, seqlen_k_ = 0;
};

template <bool kMaybeVarlen, bool kMaybeSequsedFixed = false, bool kReadOnce = false>
struct SeqInfoOf : std::conditional_t<kReadOnce, SequenceRowsHeld, NoSequenceRowsHeld> {
  AttnParams const& params;
  int batch;

  __host__ __device__ SeqInfoOf(AttnParams const& p, int b) : params(p), batch(b) {
    if constexpr (kReadOnce) {
      if (varlen()) {
        this->q_start_ = read_q_start(), this->k_start_ = read_k_start();
        this->seqlen_q_ = read_seqlen_q(), this->seqlen_k_ = read_seqlen_k();
      }
    }
  }

  __host__ __device__ bool varlen() const { return kMaybeVarlen && params.cu_seqlens_q != nullptr; }
  // This sequence's first row in the packed q (k) tensor (varlen only).
  __host__ __device__ int q_start() const {
    if constexpr (kReadOnce) {
      return this->q_start_;
    } else {
      return read_q_start();
    }
  }
  __host__ __device__ int k_start() const {
    if constexpr (kReadOnce) {
      return this->k_start_;
    } else {
      return read_k_start();
    }
  }

  // Rows of the sequence; with varlen at most the max_seqlen the grid was sized for (seqlen_q / seqlen_k).
  __host__ __device__ int seqlen_q() const {
    if (!varlen()) { return params.seqlen_q; }
    if constexpr (kReadOnce) {
      return this->seqlen_q_;
    } else {
      return read_seqlen_q();
    }
  }
  __host__ __device__ int seqlen_k() const {
    if (!varlen()) { return fixed_cache_keys() ? cache_keys_end() - cache_keys_start() : params.seqlen_k; }
    if constexpr (kReadOnce) {
      return this->seqlen_k_;
    } else {
      return read_seqlen_k();
    }
  }
  // Key j is visible to query i iff j <= i + causal_offset() (causal only); varlen aligns each sequence's
  // diagonal bottom-right.
  __host__ __device__ int causal_offset() const {
    return varlen() || fixed_cache_keys() ? seqlen_k() - seqlen_q() : params.causal_offset;
  }

  // Fixed-length decode: the end of sequence b's keys in its cache (the rows the call appends included), and their
  // first (0 but where left-padded).
  __host__ __device__ int cache_keys_end() const {
    if (params.seqused_k == nullptr) { return params.seqlen_k; }
    return clamp_row(clamp_row(params.seqused_k[batch], params.seqlen_k) + params.seqused_k_appended, params.seqlen_k);
  }
  __host__ __device__ int cache_keys_start() const {
    bool const left_padded = fixed_cache_keys() && params.cache_leftpad != nullptr;
    return left_padded ? clamp_row(params.cache_leftpad[batch], cache_keys_end()) : 0;
  }

  // Elements to this sequence's row 0 (head 0) of a tensor with Q's rows (Q, O, dO, dQ) or K's rows (K, V, dK, dV).
  __host__ __device__ int64_t q_rows_offset(int64_t batch_stride, int64_t row_stride) const {
    return varlen() ? int64_t(q_start()) * row_stride : batch * batch_stride;
  }
  __host__ __device__ int64_t k_rows_offset(int64_t batch_stride, int64_t row_stride) const {
    return varlen() ? int64_t(k_start()) * row_stride
                    : batch * batch_stride + int64_t(cache_keys_start()) * row_stride;
  }
  __host__ __device__ int64_t q_offset() const { return q_rows_offset(params.q_batch_stride, params.q_row_stride); }
  __host__ __device__ int64_t k_offset() const { return k_rows_offset(params.k_batch_stride, params.k_row_stride); }
  __host__ __device__ int64_t v_offset() const { return k_rows_offset(params.v_batch_stride, params.v_row_stride); }
  __host__ __device__ int64_t o_offset() const { return q_rows_offset(params.o_batch_stride, params.o_row_stride); }
  // The LSE is (batch, heads_q, seqlen_q), or (heads_q, total_q) with varlen: this sequence's (head 0, row 0),
  // and the stride between heads. The backward's D is laid out alike.
  __host__ __device__ int64_t lse_offset() const {
    return varlen() ? int64_t(q_start()) : int64_t(batch) * params.heads_q * params.seqlen_q;
  }
  __host__ __device__ int64_t lse_head_stride() const { return varlen() ? params.total_q : params.seqlen_q; }

  // The backward's float32 accumulators (common/params.h BwdParams), for dQ's (heads_q) and, with GQA, dK's and
  // dV's (heads_kv), and its row workspaces (D, LSE * log2(e)): this sequence's first row, and the rows between
  // heads. Fixed length: (batch, heads, rows rounded up to kBwdAccumRowAlign). Varlen: (heads,
  // accum_rows_varlen(total, batch)), sequence b from row start + b * kVarlenRowGap rounded up to
  // kAccumRowQuantum. Each sequence keeps its rows rounded up to a block (at most kBwdAccumRowAlign - 1 more), and
  // every sequence and head starts 16-byte aligned in a row workspace (the SM90 backward bulk-copies its rows).
  static constexpr int kAccumRowQuantum = 4;
  static constexpr int kVarlenRowGap = kBwdAccumRowAlign + kAccumRowQuantum - 1;
  __host__ __device__ int64_t q_accum_offset() const {
    return varlen() ? varlen_accum_row(q_start()) : int64_t(batch) * params.heads_q * round_up_accum_rows(params.seqlen_q);
  }
  __host__ __device__ int64_t k_accum_offset() const {
    return varlen() ? varlen_accum_row(k_start()) : int64_t(batch) * params.heads_kv * round_up_accum_rows(params.seqlen_k);
  }
  __host__ __device__ int64_t q_accum_rows() const {
    return varlen() ? accum_rows_varlen(params.total_q, params.batch) : round_up_accum_rows(params.seqlen_q);
  }
  __host__ __device__ int64_t k_accum_rows() const {
    return varlen() ? accum_rows_varlen(params.total_k, params.batch) : round_up_accum_rows(params.seqlen_k);
  }
  // Head `head`'s first row of this sequence (a query head for dQ and the row workspaces, a key/value head for dK
  // and dV).
  __host__ __device__ int64_t q_accum_head_row(int head) const {
    return q_accum_offset() + int64_t(head) * q_accum_rows();
  }
  __host__ __device__ int64_t k_accum_head_row(int head) const {
    return k_accum_offset() + int64_t(head) * k_accum_rows();
  }
  // The deterministic mode's semaphores (BwdParams dq_semaphore / dkv_semaphore), one per kBwdSemaphoreRows
  // rows, laid out like the accumulators: this sequence's first, and the count between heads.
  __host__ __device__ int64_t q_semaphore_offset() const {
    return varlen() ? q_start() / kBwdSemaphoreRows + batch
                    : int64_t(batch) * params.heads_q * semaphores_for(params.seqlen_q);
  }
  __host__ __device__ int64_t k_semaphore_offset() const {
    return varlen() ? k_start() / kBwdSemaphoreRows + batch
                    : int64_t(batch) * params.heads_kv * semaphores_for(params.seqlen_k);
  }
  // The semaphore of Q block m_block (block_rows rows) of head `head`.
  __host__ __device__ int64_t q_block_semaphore(int head, int m_block, int block_rows) const {
    return q_semaphore_offset() + int64_t(head) * q_semaphores() + int64_t(m_block) * (block_rows / kBwdSemaphoreRows);
  }
  __host__ __device__ int64_t q_semaphores() const {
    return varlen() ? semaphores_varlen(params.total_q, params.batch) : semaphores_for(params.seqlen_q);
  }
  __host__ __device__ int64_t k_semaphores() const {
    return varlen() ? semaphores_varlen(params.total_k, params.batch) : semaphores_for(params.seqlen_k);
  }

  // Workspace sizes per head, for the host: rows of an accumulator, and semaphores.
  __host__ __device__ static int64_t accum_rows_varlen(int64_t total, int batch) {
    return round_up(total + int64_t(batch) * kVarlenRowGap, kAccumRowQuantum);
  }
  __host__ __device__ static int64_t round_up_accum_rows(int64_t rows) { return round_up(rows, kBwdAccumRowAlign); }
  __host__ __device__ static int64_t semaphores_for(int64_t rows) {
    return (rows + kBwdSemaphoreRows - 1) / kBwdSemaphoreRows;
  }
  __host__ __device__ static int64_t semaphores_varlen(int64_t total, int batch) {
    return semaphores_for(total) + batch;
  }

 private:
  __host__ __device__ int read_q_start() const { return clamp_row(params.cu_seqlens_q[batch], params.total_q); }
  __host__ __device__ int read_k_start() const { return clamp_row(params.cu_seqlens_k[batch], params.total_k); }
  __host__ __device__ int read_seqlen_q() const {
    int const rows = clamp_row(params.cu_seqlens_q[batch + 1], params.total_q) - read_q_start();
    return rows < 0 ? 0 : rows < params.seqlen_q ? rows : params.seqlen_q;
  }
  __host__ __device__ int read_seqlen_k() const {
    int rows = clamp_row(params.cu_seqlens_k[batch + 1], params.total_k) - read_k_start();
    if (params.seqused_k != nullptr && params.seqused_k[batch] < rows) { rows = params.seqused_k[batch]; }
    return rows < 0 ? 0 : rows < params.seqlen_k ? rows : params.seqlen_k;
  }
  __host__ __device__ static int64_t round_up(int64_t rows, int64_t multiple) {
    return (rows + multiple - 1) / multiple * multiple;
  }
  __host__ __device__ int64_t varlen_accum_row(int start) const {
    return round_up(int64_t(start) + int64_t(batch) * kVarlenRowGap, kAccumRowQuantum);
  }
  // A fixed-length batch whose sequences' keys are a range of their caches (seqused_k and / or cache_leftpad).
  __host__ __device__ bool fixed_cache_keys() const {
    return kMaybeSequsedFixed && !varlen() && (params.seqused_k != nullptr || params.cache_leftpad != nullptr);
  }
  __host__ __device__ static int clamp_row(int row, int total) { return row < 0 ? 0 : row < total ? row : total; }
};

// Whichever the params say (the backward, the SM90 forward, the host).
using SeqInfo = SeqInfoOf<true>;

}  // namespace flashcute
