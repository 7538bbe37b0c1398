// SM80 backward epilogue: a K/V block's dK (scaled by the softmax scale) and dV. Without GQA the CTA owns those
// rows: 16-bit, staged in K's and V's shared-memory buffers, coalesced stores. With GQA the query heads of a group
// add into float32 accumulators (atomics; in deterministic mode in head order), converted afterwards
// (bwd_postprocess.h).
#pragma once

#include <cute/tensor.hpp>

#include "common/turnstile.h"
#include "common/utils.h"
#include "sm80/epilogue.h"
#include "sm80/gmem.h"

namespace flashcute::sm80 {

using namespace cute;

template <class Traits>
struct BwdEpilogue {
  // acc_dk, acc_dv: (MMA, MMA_N, MMA_D) accumulators of TiledMmadKV; gdK, gdV: (BLK_N, D) output tiles;
  // sK, sV: the K/V buffers, whose last readers (the final gemms) are still running.
  template <class TensorAcc, class TensorG, class TensorS>
  __device__ static void store(TensorAcc const& acc_dk, TensorAcc const& acc_dv, TensorG& gdK, TensorG& gdV,
                               TensorS& sK, TensorS& sV, int row_end, int head_dim, int tidx) {
    typename Traits::TiledMmadKV tiled_mma;
    __syncthreads();
    store_through_smem<typename Traits::SmemCopyAtomStore, typename Traits::GmemTiledCopy>(tiled_mma, acc_dk, sK, gdK,
                                                                                            row_end, head_dim, tidx);
    store_through_smem<typename Traits::SmemCopyAtomStore, typename Traits::GmemTiledCopy>(tiled_mma, acc_dv, sV, gdV,
                                                                                            row_end, head_dim, tidx);
  }

  // GQA: tdKgdKaccum, tdVgdVaccum: this thread's slots of the block in the float32 accumulators (sm80/gmem.h
  // accum_block), one per accumulator register. turnstile: null, or this K/V block's counter and the CTA's turn
  // (its query head's index within the group).
  template <class TensorAcc, class TensorG>
  __device__ static void add(TensorAcc const& acc_dk, TensorAcc const& acc_dv, TensorG tdKgdKaccum,
                             TensorG tdVgdVaccum, int* turnstile, int turn) {
    if (turnstile != nullptr) { turnstile_wait(turnstile, turn); }
    atomic_add_accum(tdKgdKaccum, acc_dk);
    atomic_add_accum(tdVgdVaccum, acc_dv);
    if (turnstile != nullptr) { turnstile_pass(turnstile); }
  }
};

}  // namespace flashcute::sm80
