// The global tensors of one (batch, head) as the SM80 kernels address them: (seqlen, head_dim) views of Q, K, V
// and O and the (seqlen_q) LSE row, built from the tile's SeqInfo; and the backward's dO, dQ, dK, dV, D and
// float32 accumulators. The one place where params and sequence info become addresses.
#pragma once

#include <cute/tensor.hpp>

#include "common/block_range.h"
#include "common/params.h"
#include "common/seqlen.h"

namespace flashcute::sm80 {

using namespace cute;

// (rows, head_dim) rows of one head, starting `offset` elements from base.
template <class T>
CUTE_DEVICE auto head_rows(T* base, int64_t offset, int rows, int head_dim, int64_t row_stride) {
  return make_tensor(make_gmem_ptr(base + offset), make_shape(rows, head_dim), make_stride(row_stride, _1{}));
}

// The (sequence, row block) of a backward pre- or postprocess CTA: blockIdx (z, x), or, on the SM90 backward's
// packed-batch grid, entry blockIdx.x of its table (common/params.h), whose sequence is batch past the blocks.
CUTE_DEVICE SequenceBlock row_block_of_cta(int const* table) {
  if (table == nullptr) { return {int(blockIdx.z), int(blockIdx.x)}; }
  return table_entry(table, int(blockIdx.x));
}

// -> (mQ, mK, mV, mO, mLSE): (seqlen_q, d), (seqlen_k, d), (seqlen_k, d), (seqlen_q, d), (seqlen_q)
template <class Element, class Seq>
CUTE_DEVICE auto make_gmem_tensors(AttnParams const& p, Seq const& seq, int head, int head_kv) {
  Tensor mQ = head_rows(static_cast<Element const*>(p.q_ptr), seq.q_offset() + head * p.q_head_stride,
                        seq.seqlen_q(), p.head_dim, p.q_row_stride);
  Tensor mK = head_rows(static_cast<Element const*>(p.k_ptr), seq.k_offset() + head_kv * p.k_head_stride,
                        seq.seqlen_k(), p.head_dim, p.k_row_stride);
  Tensor mV = head_rows(static_cast<Element const*>(p.v_ptr), seq.v_offset() + head_kv * p.v_head_stride,
                        seq.seqlen_k(), p.head_dim, p.v_row_stride);
  Tensor mO = head_rows(static_cast<Element*>(p.o_ptr), seq.o_offset() + head * p.o_head_stride, seq.seqlen_q(),
                        p.head_dim, p.o_row_stride);
  Tensor mLSE = make_tensor(make_gmem_ptr(p.lse_ptr + seq.lse_offset() + head * seq.lse_head_stride()),
                            make_shape(seq.seqlen_q()));
  return cute::make_tuple(mQ, mK, mV, mO, mLSE);
}

// The backward's gradients: -> (mdO, mdQ, mdK, mdV): (seqlen_q, d), (seqlen_q, d), (seqlen_k, d), (seqlen_k, d).
template <class Element>
CUTE_DEVICE auto make_grad_tensors(BwdParams const& p, SeqInfo const& seq, int head, int head_kv) {
  Tensor mdO = head_rows(static_cast<Element const*>(p.do_ptr),
                         seq.q_rows_offset(p.do_batch_stride, p.do_row_stride) + head * p.do_head_stride, seq.seqlen_q(), p.head_dim,
                         p.do_row_stride);
  Tensor mdQ = head_rows(static_cast<Element*>(p.dq_ptr), seq.q_rows_offset(p.dq_batch_stride, p.dq_row_stride) + head * p.dq_head_stride,
                         seq.seqlen_q(), p.head_dim, p.dq_row_stride);
  Tensor mdK = head_rows(static_cast<Element*>(p.dk_ptr),
                         seq.k_rows_offset(p.dk_batch_stride, p.dk_row_stride) + head_kv * p.dk_head_stride, seq.seqlen_k(),
                         p.head_dim, p.dk_row_stride);
  Tensor mdV = head_rows(static_cast<Element*>(p.dv_ptr),
                         seq.k_rows_offset(p.dv_batch_stride, p.dv_row_stride) + head_kv * p.dv_head_stride, seq.seqlen_k(),
                         p.head_dim, p.dv_row_stride);
  return cute::make_tuple(mdO, mdQ, mdK, mdV);
}

// One (batch, query head)'s rows of a backward per-row workspace (common/params.h BwdParams dsoftmax_sum_ptr,
// lse_log2_ptr): (its rows in dq_accum, padding included).
CUTE_DEVICE auto make_row_workspace_tensor(float* base, SeqInfo const& seq, int head) {
  return make_tensor(make_gmem_ptr(base + seq.q_accum_head_row(head)),
                     make_shape(int(seq.q_accum_rows())));
}

// A block of a float32 accumulator (common/params.h BwdParams): kBlockRows x kHeadDim floats in a TiledMma's
// register order, element i of thread t at i * kThreads + t, so that each atomic (or load, or store)
// instruction of a warp covers 128 contiguous bytes. With kGroupThreads < kThreads, each group of kGroupThreads
// consecutive threads owns a contiguous chunk in that order (thread g * kGroupThreads + t at
// g * kGroupThreads * elements + i * kGroupThreads + t): the SM90 backward's consumer warpgroups hand their dQ on
// one at a time. With kVec > 1 a thread's elements go in runs of kVec (element i of thread t at
// (i / kVec * kGroupThreads + t) * kVec + i % kVec), so that a warp moves them with 16-byte instructions.
// head_rows: the (batch, head)'s first row (SeqInfo's q_accum_head_row or k_accum_head_row).
// -> (kThreads, elements per thread)
template <int kBlockRows, int kHeadDim, int kThreads, int kGroupThreads = kThreads, int kVec = 1>
CUTE_DEVICE auto accum_block(float* base, int64_t head_rows, int block) {
  static_assert((kBlockRows * kHeadDim) % kThreads == 0 && kBwdAccumRowAlign % kBlockRows == 0);
  static_assert(kThreads % kGroupThreads == 0);
  constexpr int kElems = kBlockRows * kHeadDim / kThreads;
  static_assert(kElems % kVec == 0);
  using Threads =
      Layout<Shape<Int<kGroupThreads>, Int<kThreads / kGroupThreads>>, Stride<Int<kVec>, Int<kGroupThreads * kElems>>>;
  using Elements = Layout<Shape<Int<kVec>, Int<kElems / kVec>>, Stride<_1, Int<kGroupThreads * kVec>>>;
  return make_tensor(make_gmem_ptr(base + (head_rows + int64_t(block) * kBlockRows) * kHeadDim),
                     make_layout(coalesce(Threads{}), coalesce(Elements{})));
}

// slots += acc, elementwise: slots is a thread's (elements) of accum_block, acc the registers it mirrors.
// `red`, spelled out: ptxas kept atomicAdd's unused result as an `atom` that returns a value, and holding those
// results took registers the mainloop spills without. (sm_90's 16-byte vector atomics measured no faster.)
template <class TensorG, class TensorAcc>
CUTE_DEVICE void atomic_add_accum(TensorG&& slots, TensorAcc const& acc) {
  CUTE_STATIC_ASSERT_V(size(acc) == size(slots));
  CUTE_UNROLL
  for (int i = 0; i < size(acc); ++i) {
    asm volatile("red.global.add.f32 [%0], %1;" ::"l"(&slots(i)), "f"(acc(i)) : "memory");
  }
}

}  // namespace flashcute::sm80
