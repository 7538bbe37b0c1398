// SM80 epilogue: O (already normalised, float) -> 16-bit -> staged in shared memory (Q's buffer) -> 128-bit
// coalesced stores, predicated on the ragged last rows and on head dims below the instantiated one;
// LSE written by the first thread of each quad.
#pragma once

#include <cute/tensor.hpp>

#include "common/utils.h"

namespace flashcute::sm80 {

using namespace cute;

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
    auto thr_mma = tiled_mma.get_thread_slice(tidx);

    // registers -> smem. sO aliases sQ, whose last reader (the final S gemm) every warp has passed.
    Tensor rO = convert_type<Element>(acc_o);
    auto smem_tiled_copy_O = make_tiled_copy_C(typename Traits::SmemCopyAtomO{}, tiled_mma);
    auto smem_thr_copy_O = smem_tiled_copy_O.get_thread_slice(tidx);
    Tensor taccOrO = smem_thr_copy_O.retile_S(rO);
    Tensor taccOsO = smem_thr_copy_O.partition_D(sO);
    CUTE_STATIC_ASSERT_V(size(taccOrO) == size(taccOsO));  // every accumulator element has its smem slot
    copy(smem_tiled_copy_O, taccOrO, taccOsO);

    // LSE: the quad's first thread (column 0 of the row) owns each row's value.
    Tensor cO = make_identity_tensor(Shape<Int<kBlockM>, Int<kHeadDim>>{});
    Tensor taccOcO = make_rowcol(thr_mma.partition_C(cO));
    if (get<1>(taccOcO(0, 0)) == 0) {
      CUTE_UNROLL
      for (int mi = 0; mi < size(lse); ++mi) {
        int const row = get<0>(taccOcO(mi, 0));
        if (row < row_end) { gLSE(row) = lse(mi); }
      }
    }
    __syncthreads();

    // smem -> registers -> gmem, 16 bytes per thread per access.
    typename Traits::GmemTiledCopyO gmem_tiled_copy_O;
    auto gmem_thr_copy_O = gmem_tiled_copy_O.get_thread_slice(tidx);
    Tensor tOsO = gmem_thr_copy_O.partition_S(sO);
    Tensor tOgO = gmem_thr_copy_O.partition_D(gO);
    Tensor tOcO = gmem_thr_copy_O.partition_D(cO);
    Tensor tOrO = make_fragment_like(tOsO);
    copy(gmem_tiled_copy_O, tOsO, tOrO);
    store_predicated(gmem_tiled_copy_O, tOrO, tOgO, tOcO, row_end, head_dim);
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

 private:
  template <class TiledCopy, class TensorR, class TensorG, class TensorC>
  __device__ static void store_predicated(TiledCopy const& tiled_copy, TensorR const& tOrO, TensorG& tOgO,
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
};

}  // namespace flashcute::sm80
