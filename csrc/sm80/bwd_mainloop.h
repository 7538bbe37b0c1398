// The SM80 backward mainloop of one K/V block (FlashAttention-2's backward): K and V stay in shared memory; the
// Q/dO blocks that see them are walked one by one, each recomputing its scores and probabilities from the LSE the
// forward saved:
//   S = Q.K^T | P = exp(S * scale - LSE) | dP = dO.V^T | dS = P * (dP - D) | dV += P^T.dO
//   | dQ(block) = dS.K, added to the float32 accumulator in global memory | dK += dS^T.Q
// P and dS go through shared memory: the dV/dK gemms need them transposed. Q and dO are double-buffered:
// the next block loads (cp.async) while this one computes.
#pragma once

#include <cute/tensor.hpp>

#include "common/block_range.h"
#include "common/mask.h"
#include "common/params.h"
#include "common/seqlen.h"
#include "common/turnstile.h"
#include "common/utils.h"
#include "sm80/gemm.h"
#include "sm80/gmem.h"

namespace flashcute::sm80 {

using namespace cute;

template <class Traits, bool kCausal>
struct BwdMainloop {
  using Element = typename Traits::Element;
  using TileShape_MNK = typename Traits::TileShape_MNK;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kStages = Traits::kStages;

  // Shared memory: Q and dO stages, K, V, P, dS (Traits::kSmemBytes in all).
  struct SharedStorage {
    Element* q;   // kStages x (BLK_M, D)
    Element* dO;  // kStages x (BLK_M, D)
    Element* k;   // (BLK_N, D)
    Element* v;   // (BLK_N, D)
    Element* p;   // (BLK_M, BLK_N)
    Element* dS;  // (BLK_M, BLK_N)

    __device__ explicit SharedStorage(char* smem)
        : q(reinterpret_cast<Element*>(smem)),
          dO(q + kStages * Traits::kSmemQdOElems),
          k(dO + kStages * Traits::kSmemQdOElems),
          v(k + Traits::kSmemKVElems),
          p(v + Traits::kSmemKVElems),
          dS(p + Traits::kSmemPdSElems) {}
  };

  // gQ, gdO: (BLK_M, D, m) Q/dO blocks; gLSE, gD: (BLK_M, m) their LSE and D rows; gK, gV: (BLK_N, D) this
  // CTA's K/V block. Accumulates dK (unscaled) and dV of the block into acc_dk, acc_dv (MMA, MMA_N, MMA_D) and
  // adds each Q block's dQ (unscaled) into this head's float32 dQ accumulator.
  template <class TensorGQ, class TensorGRow, class TensorGKV, class TensorAcc>
  __device__ __forceinline__ static void run(TensorGQ const& gQ, TensorGQ const& gdO, TensorGRow const& gLSE,
                                             TensorGRow const& gD, TensorGKV const& gK,
                                             TensorGKV const& gV, SharedStorage const& smem, TensorAcc& acc_dk,
                                             TensorAcc& acc_dv, BwdParams const& params, SeqInfo const& seq,
                                             int n_block, int bidb, int bidh, QBlockRange const& range, int tidx) {
    Tensor sK = make_tensor(make_smem_ptr(smem.k), typename Traits::SmemLayoutKV{});   // (BLK_N, D)
    Tensor sKt = make_tensor(make_smem_ptr(smem.k), typename Traits::SmemLayoutKt{});  // (D, BLK_N)
    Tensor sV = make_tensor(make_smem_ptr(smem.v), typename Traits::SmemLayoutKV{});   // (BLK_N, D)
    Tensor sP = make_tensor(make_smem_ptr(smem.p), typename Traits::SmemLayoutPdS{});  // (BLK_M, BLK_N)
    Tensor sPt = make_tensor(make_smem_ptr(smem.p), typename Traits::SmemLayoutPdSt{});  // (BLK_N, BLK_M)
    Tensor sdS = make_tensor(make_smem_ptr(smem.dS), typename Traits::SmemLayoutPdS{});
    Tensor sdSt = make_tensor(make_smem_ptr(smem.dS), typename Traits::SmemLayoutPdSt{});
    // Stage s of Q / dO, and its transposed view (D, BLK_M).
    auto stage_of = [&](Element* base, int stage) { return base + stage * Traits::kSmemQdOElems; };
    auto smem_qdo = [&](Element* base, int stage) {
      return make_tensor(make_smem_ptr(stage_of(base, stage)), typename Traits::SmemLayoutQdO{});
    };
    auto smem_qdo_t = [&](Element* base, int stage) {
      return make_tensor(make_smem_ptr(stage_of(base, stage)), typename Traits::SmemLayoutQdOt{});
    };

    // gmem -> smem partitions, with identity tensors giving each copy vector's (row, col) for predication.
    typename Traits::GmemTiledCopyQKV gmem_tiled_copy;
    auto gmem_thr_copy = gmem_tiled_copy.get_thread_slice(tidx);
    Tensor tQgQ = gmem_thr_copy.partition_S(gQ);     // (CPY, CPY_M, CPY_D, m)
    Tensor tdOgdO = gmem_thr_copy.partition_S(gdO);  // (CPY, CPY_M, CPY_D, m)
    Tensor tQcQ = gmem_thr_copy.partition_S(make_identity_tensor(select<0, 2>(TileShape_MNK{})));
    Tensor tKgK = gmem_thr_copy.partition_S(gK);     // (CPY, CPY_N, CPY_D)
    Tensor tKsK = gmem_thr_copy.partition_D(sK);
    Tensor tVgV = gmem_thr_copy.partition_S(gV);
    Tensor tVsV = gmem_thr_copy.partition_D(sV);
    Tensor tKcK = gmem_thr_copy.partition_S(make_identity_tensor(select<1, 2>(TileShape_MNK{})));

    // S = Q.K^T and dP = dO.V^T: register fragments and their ldmatrix sources.
    typename Traits::TiledMmaSdP tiled_mma_sdp;
    auto thr_mma_sdp = tiled_mma_sdp.get_thread_slice(tidx);
    Tensor tSrQ = thr_mma_sdp.partition_fragment_A(smem_qdo(smem.q, 0));    // (MMA, MMA_M, MMA_D)
    Tensor tSrK = thr_mma_sdp.partition_fragment_B(sK);                     // (MMA, MMA_N, MMA_D)
    Tensor tdPrdO = thr_mma_sdp.partition_fragment_A(smem_qdo(smem.dO, 0));  // (MMA, MMA_M, MMA_D)
    Tensor tdPrV = thr_mma_sdp.partition_fragment_B(sV);                    // (MMA, MMA_N, MMA_D)
    auto smem_tiled_copy_QdO = make_tiled_copy_A(typename Traits::SmemCopyAtom{}, tiled_mma_sdp);
    auto smem_thr_copy_QdO = smem_tiled_copy_QdO.get_thread_slice(tidx);
    auto smem_tiled_copy_KV = make_tiled_copy_B(typename Traits::SmemCopyAtom{}, tiled_mma_sdp);
    auto smem_thr_copy_KV = smem_tiled_copy_KV.get_thread_slice(tidx);
    Tensor tSsK = smem_thr_copy_KV.partition_S(sK);
    Tensor tdPsV = smem_thr_copy_KV.partition_S(sV);
    // P and dS: accumulators -> 16-bit -> shared memory.
    auto smem_tiled_copy_PdS = make_tiled_copy_C(typename Traits::SmemCopyAtomStore{}, tiled_mma_sdp);
    auto smem_thr_copy_PdS = smem_tiled_copy_PdS.get_thread_slice(tidx);
    Tensor tPsP = smem_thr_copy_PdS.partition_D(sP);     // (CPY, CPY_M, CPY_N)
    Tensor tdSsdS = smem_thr_copy_PdS.partition_D(sdS);  // (CPY, CPY_M, CPY_N)

    // dV += P^T.dO and dK += dS^T.Q: both operands transposed in shared memory.
    typename Traits::TiledMmadKV tiled_mma_dkv;
    auto thr_mma_dkv = tiled_mma_dkv.get_thread_slice(tidx);
    Tensor tdVrPt = thr_mma_dkv.partition_fragment_A(
        make_tensor(smem.p, typename Traits::SmemLayoutPdStNoSwizzle{}));  // (MMA, MMA_N, MMA_M)
    Tensor tdVrdOt = thr_mma_dkv.partition_fragment_B(
        make_tensor(smem.dO, typename Traits::SmemLayoutQdOtNoSwizzle{}));  // (MMA, MMA_D, MMA_M)
    Tensor tdKrdSt = make_fragment_like(tdVrPt);
    Tensor tdKrQt = make_fragment_like(tdVrdOt);
    auto smem_tiled_copy_PdSt = make_tiled_copy_A(typename Traits::SmemCopyAtomTransposed{}, tiled_mma_dkv);
    auto smem_thr_copy_PdSt = smem_tiled_copy_PdSt.get_thread_slice(tidx);
    auto smem_tiled_copy_QdOt = make_tiled_copy_B(typename Traits::SmemCopyAtomTransposed{}, tiled_mma_dkv);
    auto smem_thr_copy_QdOt = smem_tiled_copy_QdOt.get_thread_slice(tidx);
    Tensor tdVsPt = smem_thr_copy_PdSt.partition_S(sPt);
    Tensor tdKsdSt = smem_thr_copy_PdSt.partition_S(sdSt);

    // dQ = dS.K: dS as stored, K transposed.
    typename Traits::TiledMmadQ tiled_mma_dq;
    auto thr_mma_dq = tiled_mma_dq.get_thread_slice(tidx);
    Tensor tdQrdS = thr_mma_dq.partition_fragment_A(sdS);  // (MMA, MMA_M, MMA_N)
    Tensor tdQrKt = thr_mma_dq.partition_fragment_B(
        make_tensor(smem.k, typename Traits::SmemLayoutKtNoSwizzle{}));  // (MMA, MMA_D, MMA_N)
    auto smem_tiled_copy_dS = make_tiled_copy_A(typename Traits::SmemCopyAtom{}, tiled_mma_dq);
    auto smem_thr_copy_dS = smem_tiled_copy_dS.get_thread_slice(tidx);
    auto smem_tiled_copy_Kt = make_tiled_copy_B(typename Traits::SmemCopyAtomTransposed{}, tiled_mma_dq);
    auto smem_thr_copy_Kt = smem_tiled_copy_Kt.get_thread_slice(tidx);
    Tensor tdQsdS = smem_thr_copy_dS.partition_S(sdS);
    Tensor tdQsKt = smem_thr_copy_Kt.partition_S(sKt);
    int64_t const dq_accum_rows = seq.q_accum_head_row(bidh);

    // (row, col) inside the S block of each score this thread holds: masking, and the LSE / D of its rows.
    Tensor tScS = make_rowcol(thr_mma_sdp.partition_C(make_identity_tensor(select<0, 1>(TileShape_MNK{}))));
    constexpr int kRows = decltype(size<0>(tScS))::value;

    int const kv_row_end = seq.seqlen_k() - n_block * kBlockN;  // valid rows of this K/V block
    auto load_q_do = [&](int m_block, int stage) {
      int const row_end = seq.seqlen_q() - m_block * kBlockM;
      Tensor tQsQ = gmem_thr_copy.partition_D(smem_qdo(smem.q, stage));
      Tensor tdOsdO = gmem_thr_copy.partition_D(smem_qdo(smem.dO, stage));
      load_tile<true>(gmem_tiled_copy, tQgQ(_, _, _, m_block), tQsQ, tQcQ, row_end, params.head_dim);
      load_tile<true>(gmem_tiled_copy, tdOgdO(_, _, _, m_block), tdOsdO, tQcQ, row_end, params.head_dim);
    };

    int* const dq_turnstile = params.dq_semaphore == nullptr ? nullptr
        : params.dq_semaphore + seq.q_semaphore_offset() + int64_t(bidh) * seq.q_semaphores();
    // The i-th Q block visited. The K/V blocks of a head run side by side; without causal they would all start
    // at Q block 0 and add into the same dQ block at once, so each starts at its own. (Causal ranges already start
    // at the diagonal.) Deterministic mode walks in order: its turnstile lets the K/V blocks add in turn.
    int const m_blocks = range.m_block_max - range.m_block_min;
    int const m_first = !kCausal && dq_turnstile == nullptr && m_blocks > 0 ? n_block % m_blocks : 0;
    auto m_block_at = [&](int i) {
      int const j = i + m_first;
      return range.m_block_min + (j < m_blocks ? j : j - m_blocks);
    };

    // Prologue: K, V and the first Q/dO block in flight.
    load_tile<true>(gmem_tiled_copy, tKgK, tKsK, tKcK, kv_row_end, params.head_dim);
    load_tile<true>(gmem_tiled_copy, tVgV, tVsV, tKcK, kv_row_end, params.head_dim);
    if (m_blocks > 0) { load_q_do(m_block_at(0), 0); }
    cp_async_fence();

    // One body for masked and unmasked blocks (a runtime branch): the loop is large, one copy of it is kinder to
    // the instruction cache than two.
    auto step = [&](int i, int m_block, bool masked) __attribute__((always_inline)) {
      int const stage = i % kStages;
      int const row_end = seq.seqlen_q() - m_block * kBlockM;  // valid rows of this Q block

      // This thread's rows: LSE scaled for exp2 (+inf past the sequence and for rows that saw no key, so their
      // P is 0), and D.
      float lse_log2[kRows], dsum[kRows];
      CUTE_UNROLL
      for (int mi = 0; mi < kRows; ++mi) {
        int const row = get<0>(tScS(mi, 0));
        float const lse = row < row_end ? gLSE(row, m_block) : INFINITY;
        lse_log2[mi] = (lse == -INFINITY ? INFINITY : lse) * float(M_LOG2E);
        dsum[mi] = row < row_end ? gD(row, m_block) : 0.f;
      }

      cp_async_wait<0>();
      __syncthreads();  // Q/dO(m) (and K, V) landed; every warp is done with block m - 1's buffers
      if (i + 1 < m_blocks) {
        load_q_do(m_block_at(i + 1), (stage + 1) % kStages);
        cp_async_fence();
      }

      Tensor sQ = smem_qdo(smem.q, stage);
      Tensor sdO = smem_qdo(smem.dO, stage);
      Tensor acc_s = partition_fragment_C(tiled_mma_sdp, select<0, 1>(TileShape_MNK{}));  // (MMA, MMA_M, MMA_N)
      clear(acc_s);
      gemm_ss(acc_s, tSrQ, tSrK, smem_thr_copy_QdO.partition_S(sQ), tSsK, tiled_mma_sdp, smem_tiled_copy_QdO,
              smem_tiled_copy_KV, smem_thr_copy_QdO, smem_thr_copy_KV);
      // P = exp(S * scale - LSE), in place of S; to shared memory while dP = dO.V^T runs.
      Tensor scores = make_rowcol(acc_s);
      if (masked) {
        apply_mask<kCausal>(scores, tScS, m_block * kBlockM, n_block * kBlockN, seq.seqlen_k(), seq.causal_offset());
      }
      CUTE_UNROLL
      for (int mi = 0; mi < kRows; ++mi) {
        CUTE_UNROLL
        for (int nj = 0; nj < size<1>(scores); ++nj) {
          scores(mi, nj) = exp2f(scores(mi, nj) * params.softmax_scale_log2 - lse_log2[mi]);
        }
      }
      Tensor rP = convert_type<Element>(acc_s);
      copy(smem_tiled_copy_PdS, smem_thr_copy_PdS.retile_S(rP), tPsP);

      Tensor acc_dp = partition_fragment_C(tiled_mma_sdp, select<0, 1>(TileShape_MNK{}));  // (MMA, MMA_M, MMA_N)
      clear(acc_dp);
      gemm_ss(acc_dp, tdPrdO, tdPrV, smem_thr_copy_QdO.partition_S(sdO), tdPsV, tiled_mma_sdp,
              smem_tiled_copy_QdO, smem_tiled_copy_KV, smem_thr_copy_QdO, smem_thr_copy_KV);

      // dS = P * (dP - D), in place of dP.
      Tensor dscores = make_rowcol(acc_dp);
      CUTE_UNROLL
      for (int mi = 0; mi < kRows; ++mi) {
        CUTE_UNROLL
        for (int nj = 0; nj < size<1>(dscores); ++nj) { dscores(mi, nj) = scores(mi, nj) * (dscores(mi, nj) - dsum[mi]); }
      }
      Tensor rdS = convert_type<Element>(acc_dp);
      copy(smem_tiled_copy_PdS, smem_thr_copy_PdS.retile_S(rdS), tdSsdS);
      __syncthreads();  // P and dS visible to every warp

      gemm_ss(acc_dv, tdVrPt, tdVrdOt, tdVsPt, smem_thr_copy_QdOt.partition_S(smem_qdo_t(smem.dO, stage)),
              tiled_mma_dkv, smem_tiled_copy_PdSt, smem_tiled_copy_QdOt, smem_thr_copy_PdSt, smem_thr_copy_QdOt);

      // dQ's share, added to the accumulator before the dK gemm, which then runs while the atomics drain.
      Tensor acc_dq = partition_fragment_C(tiled_mma_dq, select<0, 2>(TileShape_MNK{}));  // (MMA, MMA_M, MMA_D)
      clear(acc_dq);
      gemm_ss(acc_dq, tdQrdS, tdQrKt, tdQsdS, tdQsKt, tiled_mma_dq, smem_tiled_copy_dS, smem_tiled_copy_Kt,
              smem_thr_copy_dS, smem_thr_copy_Kt);
      // This thread's slots of the block in the accumulator; padding rows and columns add zeros.
      Tensor tdQgdQaccum = accum_block<kBlockM, Traits::kHeadDim, Traits::kNThreads>(params.dq_accum_ptr, dq_accum_rows,
                                                                                    m_block)(tidx, _);
      // Deterministic: the K/V blocks visiting a Q block are a prefix [0, n) (q_block_range), so turn n_block.
      if (dq_turnstile != nullptr) { turnstile_wait(dq_turnstile + m_block, n_block); }
      atomic_add_accum(tdQgdQaccum, acc_dq);
      if (dq_turnstile != nullptr) { turnstile_pass(dq_turnstile + m_block); }

      gemm_ss(acc_dk, tdKrdSt, tdKrQt, tdKsdSt, smem_thr_copy_QdOt.partition_S(smem_qdo_t(smem.q, stage)),
              tiled_mma_dkv, smem_tiled_copy_PdSt, smem_tiled_copy_QdOt, smem_thr_copy_PdSt, smem_thr_copy_QdOt);
    };

    // A ragged K/V block (the last) masks its padding in every Q block; otherwise only the diagonal's blocks.
    int const masked_end = kv_row_end < kBlockN ? range.m_block_max : range.m_block_masked_end;
    for (int i = 0; i < m_blocks; ++i) {
      int const m_block = m_block_at(i);
      step(i, m_block, m_block < masked_end);
    }
    cp_async_wait<0>();  // K and V (an empty range computes nothing but still loaded them)
  }
};

}  // namespace flashcute::sm80
