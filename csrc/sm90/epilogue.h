// Epilogue of one Q tile: O (normalised, converted to 16 bits) is staged in shared memory with stmatrix and
// written by one TMA store per consumer warpgroup (its 64 rows), which clips rows past the sequence's seqlen_q
// (gmem.h SequenceRows) and columns past head_dim; each row's LSE goes straight from the registers of the quad that owns it. Tiles where no
// row sees a key skip the mainloop and write zeros and -inf directly (predicated stores, no shared memory).
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>

#include "common/params.h"
#include "common/seqlen.h"
#include "common/utils.h"
#include "sm90/gmem.h"
#include "sm90/kernel_traits.h"
#include "sm90/named_barriers.h"
#include "sm90/tile_scheduler.h"

namespace flashcute::sm90 {

using namespace cute;

template <class Traits>
struct Epilogue {
  using Element = typename Traits::Element;
  using TileShape_MNK = typename Traits::TileShape_MNK;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kNumMmaThreads = Traits::kNumMmaThreads;

  // One TMA store per consumer warpgroup: its 64-row slab of the tile.
  using TmaStoreO = decltype(make_tma_copy(SM90_TMA_STORE{}, GmemTensorQKVO<Element>{}, typename Traits::SmemLayoutOSlab{},
                                           Shape<_64, Int<Traits::kHeadDim>>{}, _1{}));

  struct Params {
    TmaStoreO tma_store_o;
    ShapeQKVO shape_o;
  };

  static Params make_params(FwdParams const& p) {
    Tensor mO = get<3>(make_gmem_tensors<Element>(p));
    return {make_tma_copy(SM90_TMA_STORE{}, mO, typename Traits::SmemLayoutOSlab{},
                          Shape<_64, Int<Traits::kHeadDim>>{}, _1{}),
            mO.shape()};
  }

  CUTLASS_DEVICE static void prefetch_descriptors(Params const& params) {
    cute::prefetch_tma_descriptor(params.tma_store_o.get_tma_descriptor());
  }

  // (row, col) inside the tile of each O accumulator element of this thread, as (rows, cols).
  CUTLASS_DEVICE static auto o_coords(int thread_idx) {
    typename Traits::TiledMmaO tiled_mma_o;
    auto thr_mma_o = tiled_mma_o.get_thread_slice(thread_idx);
    return make_rowcol(thr_mma_o.partition_C(make_identity_tensor(select<0, 2>(TileShape_MNK{}))));
  }

  // The thread holding column 0 of a row (one per quad) writes that row's LSE.
  template <class TensorLse, class Seq>
  CUTLASS_DEVICE static void store_lse(FwdParams const& fwd, Seq const& seq, TensorLse const& lse,
                                       WorkTile const& tile, int thread_idx) {
    Tensor tOcO = o_coords(thread_idx);
    if (get<1>(tOcO(0, 0)) != 0) { return; }
    float* lse_ptr = lse_row0(fwd, seq, tile.head);
    CUTLASS_PRAGMA_UNROLL
    for (int mi = 0; mi < size(lse); ++mi) {
      int const row = tile.m_block * kBlockM + get<0>(tOcO(mi, 0));
      if (row < seq.seqlen_q()) { lse_ptr[row] = lse(mi); }
    }
  }

  // Consumer threads. Each warpgroup stages its 64 rows in its own slab of sO and its first thread stores them
  // with TMA, so the warpgroups do not wait for each other (their ping-pong offset carries into the next tile).
  // That thread waits for its previous store before the slab is rewritten; where sO overlays the V stages,
  // every warpgroup's last P.V must have read them first, and each store is waited for before barrier_o.
  template <class SharedStorage, class FragO, class TensorLse, class Seq>
  CUTLASS_DEVICE static void store(Params const& params, FwdParams const& fwd, Seq const& seq,
                                   SharedStorage& shared, FragO const& tOrO, TensorLse const& lse, WorkTile const& tile,
                                   int thread_idx) {
    int const wg = thread_idx / cutlass::NumThreadsPerWarpGroup;
    bool const is_slab_leader = thread_idx % cutlass::NumThreadsPerWarpGroup == 0;
    uint32_t const slab_barrier = uint32_t(NamedBarrierId::kEpilogueSlabFirst) + wg;
    Tensor sO = make_tensor(make_smem_ptr(shared.vo.smem_o.data()), typename Traits::SmemLayoutO{});
    typename Traits::TiledMmaO tiled_mma_o;
    auto smem_tiled_copy_O = make_tiled_copy_C(typename Traits::SmemCopyAtomO{}, tiled_mma_o);
    auto smem_thr_copy_O = smem_tiled_copy_O.get_thread_slice(thread_idx);
    Tensor rO = convert_type<Element>(tOrO);
    Tensor taccOrO = smem_thr_copy_O.retile_S(rO);     // (CPY, CPY_M, CPY_D)
    Tensor taccOsO = smem_thr_copy_O.partition_D(sO);  // (CPY, CPY_M, CPY_D)
    CUTE_STATIC_ASSERT_V(size(taccOrO) == size(taccOsO));  // every accumulator element has its smem slot

    if constexpr (Traits::kOAliasesV) {
      cutlass::arch::NamedBarrier::sync(kNumMmaThreads, uint32_t(NamedBarrierId::kEpilogue));
    } else {
      if (is_slab_leader) { tma_store_wait<0>(); }
      cutlass::arch::NamedBarrier::sync(cutlass::NumThreadsPerWarpGroup, slab_barrier);
    }
    copy(smem_tiled_copy_O, taccOrO, taccOsO);
    cutlass::arch::fence_view_async_shared();  // generic-proxy writes -> visible to the TMA (async proxy)
    cutlass::arch::NamedBarrier::sync(cutlass::NumThreadsPerWarpGroup, slab_barrier);

    if (is_slab_leader) {
      // Slabs lie one after another, each laid out like the TMA box (SmemLayoutOSlabs).
      Element* slab_ptr = shared.vo.smem_o.data() + wg * cosize_v<typename Traits::SmemLayoutOSlab>;
      Tensor sO_slab = make_tensor(make_smem_ptr(slab_ptr), typename Traits::SmemLayoutOSlab{});  // (64, D)
      Tensor mO = params.tma_store_o.get_tma_tensor(params.shape_o);
      Tensor gO_slab = local_tile(SequenceRows::of_q(fwd, seq).of_head(mO, tile.head), Shape<_64, Int<Traits::kHeadDim>>{},
                                  make_coord(tile.m_block * Traits::kNumMmaWarpGroups + wg, _0{}));  // (64, D)
      auto [tOgO, tOsO] = tma_partition(params.tma_store_o, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sO_slab),
                                        group_modes<0, 2>(gO_slab));
      copy(params.tma_store_o, tOsO, tOgO);
      tma_store_arrive();
      if constexpr (Traits::kOAliasesV) {
        tma_store_wait<0>();  // shared memory read; the global writes complete before the grid does
        shared.barrier_o.arrive();
      }
    }
    store_lse(fwd, seq, lse, tile, thread_idx);
  }

  // Before the CTA exits: each warpgroup's last O store has read shared memory.
  CUTLASS_DEVICE static void finish(int thread_idx) {
    if (thread_idx % cutlass::NumThreadsPerWarpGroup == 0) { tma_store_wait<0>(); }
  }

  // No row of this tile sees a key: O = 0 and LSE = -inf, written from registers.
  template <class Seq>
  CUTLASS_DEVICE static void store_empty(FwdParams const& fwd, Seq const& seq, WorkTile const& tile,
                                         int thread_idx) {
    Tensor tOcO = o_coords(thread_idx);
    Element* o_ptr = o_row0<Element>(fwd, seq, tile.head);
    CUTLASS_PRAGMA_UNROLL
    for (int mi = 0; mi < size<0>(tOcO); ++mi) {
      int const row = tile.m_block * kBlockM + get<0>(tOcO(mi, 0));
      if (row >= seq.seqlen_q()) { continue; }
      CUTLASS_PRAGMA_UNROLL
      for (int dj = 0; dj < size<1>(tOcO); ++dj) {
        int const col = get<1>(tOcO(mi, dj));
        if (col < fwd.head_dim) { o_ptr[row * fwd.o_row_stride + col] = Element(0.f); }
      }
    }
    Tensor lse = make_tensor<float>(Shape<Int<decltype(size<0>(tOcO))::value>>{});
    fill(lse, -INFINITY);
    store_lse(fwd, seq, lse, tile, thread_idx);
  }
};

}  // namespace flashcute::sm90
