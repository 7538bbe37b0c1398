// SM80 epilogue: O (already normalised, float) -> 16-bit -> staged in shared memory (Q's buffer) -> 128-bit
// coalesced stores, predicated on the ragged last rows and on head dims below the instantiated one;
// LSE written by the first thread of each quad. The store path is shared with the backward's dK/dV.
#pragma once

#include <cute/tensor.hpp>

#include "common/utils.h"

namespace flashcute::sm80 {

using namespace cute;

// Stores this thread's copy vectors of a tile (partitioned by tiled_copy) whose rows are < row_end and columns
// < head_dim. tOcO: the identity tensor partitioned like the destination.
template <class TiledCopy, class TensorR, class TensorG, class TensorC>
__device__ inline void store_predicated(TiledCopy const& tiled_copy, TensorR const& tOrO, TensorG& tOgO,
                                        TensorC const& tOcO, int row_end, int head_dim) {
  CUTE_UNROLL
  for (int m = 0; m < size<1>(tOrO); ++m) {
    if (get<0>(tOcO(0, m, 0)) < row_end) {
      CUTE_UNROLL
      for (int k = 0; k < size<2>(tOrO); ++k) {
        if (get<1>(tOcO(0, m, k)) < head_dim) { copy(tiled_copy, tOrO(_, m, k), tOgO(_, m, k)); }
      }
    }
  }
}

// A float accumulator tile (partitioned by tiled_mma) -> 16-bit -> staged in shared memory sX (through sAcc, its
// view in the accumulator's shape) -> 128-bit coalesced stores to gX, predicated as store_predicated. Every reader
// of sX must be behind a barrier all threads passed.
template <class SmemCopyAtom, class GmemTiledCopy, class TiledMma, class TensorAcc, class TensorSAcc, class TensorS,
          class TensorG>
__device__ inline void store_through_smem(TiledMma const& tiled_mma, TensorAcc const& acc, TensorSAcc& sAcc,
                                          TensorS& sX, TensorG& gX, int row_end, int head_dim, int tidx) {
  // registers -> smem
  Tensor rX = convert_type<typename TensorS::value_type>(acc);
  auto smem_tiled_copy = make_tiled_copy_C(SmemCopyAtom{}, tiled_mma);
  auto smem_thr_copy = smem_tiled_copy.get_thread_slice(tidx);
  Tensor taccXrX = smem_thr_copy.retile_S(rX);
  Tensor taccXsX = smem_thr_copy.partition_D(sAcc);
  CUTE_STATIC_ASSERT_V(size(taccXrX) == size(taccXsX));  // every accumulator element has its smem slot
  copy(smem_tiled_copy, taccXrX, taccXsX);
  __syncthreads();

  // smem -> registers -> gmem, 16 bytes per thread per access.
  GmemTiledCopy gmem_tiled_copy;
  auto gmem_thr_copy = gmem_tiled_copy.get_thread_slice(tidx);
  Tensor tXsX = gmem_thr_copy.partition_S(sX);
  Tensor tXgX = gmem_thr_copy.partition_D(gX);
  Tensor tXcX = gmem_thr_copy.partition_D(make_identity_tensor(shape(gX)));
  Tensor tXrX = make_fragment_like(tXsX);
  copy(gmem_tiled_copy, tXsX, tXrX);
  store_predicated(gmem_tiled_copy, tXrX, tXgX, tXcX, row_end, head_dim);
}

template <class SmemCopyAtom, class GmemTiledCopy, class TiledMma, class TensorAcc, class TensorS, class TensorG>
__device__ inline void store_through_smem(TiledMma const& tiled_mma, TensorAcc const& acc, TensorS& sX, TensorG& gX,
                                          int row_end, int head_dim, int tidx) {
  store_through_smem<SmemCopyAtom, GmemTiledCopy>(tiled_mma, acc, sX, sX, gX, row_end, head_dim, tidx);
}

template <class Traits>
struct Epilogue {
  using Element = typename Traits::Element;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kHeadDim = Traits::kHeadDim;

  // acc_o: this thread's O accumulator; lse: one value per accumulator row of this thread;
  // gO: (kBlockM, kHeadDim) output tile; gLSE: (kBlockM) LSE tile; sO: staging buffer.
  template <class TensorAcc, class TensorLse, class TensorGO, class TensorGLse, class TensorSO>
  __device__ static void store(TensorAcc const& acc_o, TensorLse const& lse, TensorGO& gO, TensorGLse& gLSE,
                               TensorSO& sO, int row_end, int head_dim, int tidx) {
    typename Traits::TiledMma tiled_mma;
    store_lse(lse, gLSE, row_end, tidx);
    // sO aliases sQ, whose last reader (the final S gemm) every warp has passed.
    store_through_smem<typename Traits::SmemCopyAtomO, typename Traits::GmemTiledCopyO>(tiled_mma, acc_o, sO, gO,
                                                                                         row_end, head_dim, tidx);
  }

  // Split-KV: a split's O (normalised over its keys) and LSE, row by row through `rows` (decode_kernel.h FinalRows
  // or PartialRows: rows.o(row, col, value), rows.lse(row, value)), rows below row_end. Without key slices, straight
  // from the accumulator. With them (Traits::kKeySlices > 1), the slices' results are merged first, through shared
  // memory (smem: the mainloop's buffers, free once every warp is past its last gemm): LSE = log sum_s exp(LSE_s)
  // and O = sum_s exp(LSE_s - LSE) O_s, as the combine kernel merges splits.
  template <class TensorAcc, class TensorLse, class Rows>
  __device__ static void store_split(TensorAcc& acc_o, TensorLse const& lse, Rows const& rows, int row_end, int tidx,
                                     char* smem) {
    constexpr int kSlices = Traits::kKeySlices;
    typename Traits::TiledMma tiled_mma;
    auto thr_mma = tiled_mma.get_thread_slice(tidx % Traits::kMmaThreads);
    Tensor tOcO = thr_mma.partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kHeadDim>>{}));
    CUTE_STATIC_ASSERT_V(size(tOcO) == size(acc_o));
    Tensor tOcO_rowcol = make_rowcol(tOcO);
    bool const lse_owner = get<1>(tOcO_rowcol(0, 0)) == 0;  // the quad's first thread holds the row's LSE
    if constexpr (kSlices == 1) {
      CUTE_UNROLL
      for (int i = 0; i < size(acc_o); ++i) {
        if (get<0>(tOcO(i)) < row_end) { rows.o(get<0>(tOcO(i)), get<1>(tOcO(i)), acc_o(i)); }
      }
      if (lse_owner) {
        CUTE_UNROLL
        for (int mi = 0; mi < size(lse); ++mi) {
          int const row = get<0>(tOcO_rowcol(mi, 0));
          if (row < row_end) { rows.lse(row, lse(mi)); }
        }
      }
    } else {
      // (slice, row) LSEs, then (slice, row, col) weighted partial O; rows padded by 4 floats so that a warp's
      // 8 accumulator rows fall in different banks.
      constexpr int kRowStride = kHeadDim + 4;
      static_assert((kSlices * kBlockM * (1 + kRowStride)) * sizeof(float) <= Traits::kSmemBytes);
      float* smem_f = reinterpret_cast<float*>(smem);
      Tensor sLSE = make_tensor(make_smem_ptr(smem_f), make_layout(Shape<Int<kSlices>, Int<kBlockM>>{}, LayoutRight{}));
      Tensor sO = make_tensor(make_smem_ptr(smem_f + kSlices * kBlockM),
                              make_layout(Shape<Int<kSlices>, Int<kBlockM>, Int<kHeadDim>>{},
                                          Stride<Int<kBlockM * kRowStride>, Int<kRowStride>, _1>{}));
      int const slice = tidx / Traits::kMmaThreads;
      // The row's LSE over all slices (-inf when no slice saw a key).
      auto merged_lse = [&](int row) {
        float lse_max = -INFINITY;
        CUTE_UNROLL
        for (int s = 0; s < kSlices; ++s) { lse_max = fmaxf(lse_max, sLSE(s, row)); }
        if (lse_max == -INFINITY) { return -INFINITY; }
        float sum = 0.f;
        CUTE_UNROLL
        for (int s = 0; s < kSlices; ++s) { sum += __expf(sLSE(s, row) - lse_max); }
        return lse_max + __logf(sum);
      };

      __syncthreads();  // every warp is past its last gemm: the mainloop's buffers are free
      if (lse_owner) {
        CUTE_UNROLL
        for (int mi = 0; mi < size(lse); ++mi) { sLSE(slice, get<0>(tOcO_rowcol(mi, 0))) = lse(mi); }
      }
      __syncthreads();
      Tensor acc_o_rowcol = make_rowcol(acc_o);
      CUTE_UNROLL
      for (int mi = 0; mi < size(lse); ++mi) {
        float const row_lse = merged_lse(get<0>(tOcO_rowcol(mi, 0)));
        float const weight = lse(mi) == -INFINITY ? 0.f : __expf(lse(mi) - row_lse);
        CUTE_UNROLL
        for (int dj = 0; dj < size<1>(acc_o_rowcol); ++dj) { acc_o_rowcol(mi, dj) *= weight; }
      }
      Tensor tOsO = thr_mma.partition_C(sO(slice, _, _));  // (MMA, MMA_M, MMA_D)
      CUTE_STATIC_ASSERT_V(size(tOsO) == size(acc_o));
      copy(acc_o, tOsO);
      __syncthreads();
      for (int i = tidx; i < kBlockM * kHeadDim; i += Traits::kNThreads) {
        int const row = i / kHeadDim, col = i % kHeadDim;
        if (row < row_end) {
          float sum = 0.f;
          CUTE_UNROLL
          for (int s = 0; s < kSlices; ++s) { sum += sO(s, row, col); }
          rows.o(row, col, sum);
        }
      }
      for (int row = tidx; row < min(row_end, kBlockM); row += Traits::kNThreads) { rows.lse(row, merged_lse(row)); }
    }
  }

  // The LSE of each accumulator row below row_end: the quad's first thread (column 0 of the row) owns its value.
  template <class TensorLse, class TensorGLse>
  __device__ static void store_lse(TensorLse const& lse, TensorGLse& gLSE, int row_end, int tidx) {
    typename Traits::TiledMma tiled_mma;
    auto thr_mma = tiled_mma.get_thread_slice(tidx);
    Tensor taccOcO = make_rowcol(thr_mma.partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kHeadDim>>{})));
    if (get<1>(taccOcO(0, 0)) == 0) {
      CUTE_UNROLL
      for (int mi = 0; mi < size(lse); ++mi) {
        int const row = get<0>(taccOcO(mi, 0));
        if (row < row_end) { gLSE(row) = lse(mi); }
      }
    }
  }

  // For Q blocks where no row sees any key (causal with seqlen_q > seqlen_k): O = 0, LSE = -inf.
  template <class TensorGO, class TensorGLse>
  __device__ static void store_empty(TensorGO& gO, TensorGLse& gLSE, int row_end, int head_dim, int tidx) {
    typename Traits::GmemTiledCopyO gmem_tiled_copy_O;
    auto gmem_thr_copy_O = gmem_tiled_copy_O.get_thread_slice(tidx);
    Tensor tOgO = gmem_thr_copy_O.partition_D(gO);
    Tensor tOcO = gmem_thr_copy_O.partition_D(make_identity_tensor(Shape<Int<kBlockM>, Int<kHeadDim>>{}));
    Tensor tOrO = make_fragment_like(tOgO);
    clear(tOrO);
    store_predicated(gmem_tiled_copy_O, tOrO, tOgO, tOcO, row_end, head_dim);
    for (int row = tidx; row < kBlockM; row += Traits::kNThreads) {
      if (row < row_end) { gLSE(row) = -INFINITY; }
    }
  }
};

}  // namespace flashcute::sm80
