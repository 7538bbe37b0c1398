// Paged K/V by TMA, for the SM80 decode kernel on Hopper: where the page size is a multiple of kPagedTmaRows, a
// block's K (V) arrives as boxes of kPagedTmaRows rows x one swizzle atom's columns, each issued by one lane of warp
// 0 at (row in page, column, K/V head, page), instead of every thread issuing a cp.async per row chunk with its
// own page offset. The boxes land with the same swizzle as the cp.async copies (the tensor maps take it from the
// shared-memory atom), so the gemms read them unchanged. The first block the CTA loads (the only one that can be
// ragged) still comes by cp.async through PagedKV, which zero-fills its rows past the cache length; every later
// block lands on an mbarrier, one per stage (two stages: K and V arrive together) or one per operand (one K and
// one V buffer).
#pragma once

#include <cute/arch/copy_sm90_desc.hpp>
#include <cute/atom/copy_traits_sm90_tma.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>

#include "common/params.h"
#include "sm80/gemm.h"
#include "sm90/gmem.h"
#include "sm90/requirements.h"

namespace flashcute::sm80 {

using namespace cute;

// Rows of a box: 64 rows of a page in one copy. 16-row boxes, which would let 16-row pages take TMA too, read
// slower (benchmarks/notes.md#d-decode-paged-tma).
constexpr int kPagedTmaRows = 64;

// The tensor maps of a paged cache: K and V pools seen as (page_size, head_dim, heads_kv, num_pages); a box is
// (kPagedTmaRows, kBoxCols) of one head and page, columns past head_dim zero-filled.
template <class Traits>
struct PagedTmaCopies {
  using Element = typename Traits::Element;
  static constexpr int kBoxCols = Traits::kBlockKSmem;
  using BoxShape = Shape<Int<kPagedTmaRows>, Int<kBoxCols>>;
  // The box as TMA sees it: Traits::SmemLayoutAtom's swizzle (16-byte units XORed within 8 rows of 128 or 64
  // bytes), stated on addresses as the tensor maps take it; the same bytes, since the buffers start 1 KiB aligned.
  using SmemLayoutBoxAtom = cute::conditional_t<kBoxCols == 64, GMMA::Layout_K_SW128_Atom<Element>,
                                                GMMA::Layout_K_SW64_Atom<Element>>;
  using SmemLayoutBox = decltype(tile_to_shape(SmemLayoutBoxAtom{}, BoxShape{}));
  static_assert(kBoxCols == 64 || kBoxCols == 32);
  using TmaLoad = decltype(make_tma_copy(SM90_TMA_LOAD{}, sm90::GmemTensorQKVO<Element>{}, SmemLayoutBox{},
                                         BoxShape{}, _1{}));
  static constexpr uint32_t kBlockBytes = Traits::kBlockN * Traits::kHeadDim * sizeof(Element);

  TmaLoad k, v;
  sm90::ShapeQKVO shape;

  // Host: params' paged caches (params.block_table set).
  static PagedTmaCopies make(DecodeParams const& p) {
    sm90::ShapeQKVO const shape = make_shape(p.page_size, p.head_dim, p.heads_kv, p.num_pages);
    auto tma = [&](void const* ptr, int64_t page_stride, int64_t row_stride, int64_t head_stride) {
      return make_tma_copy(SM90_TMA_LOAD{}, sm90::make_gmem_tensor<Element>(ptr, shape, row_stride, head_stride,
                                                                            page_stride),
                           SmemLayoutBox{}, BoxShape{}, _1{});
    };
    return {tma(p.k_ptr, p.k_batch_stride, p.k_row_stride, p.k_head_stride),
            tma(p.v_ptr, p.v_batch_stride, p.v_row_stride, p.v_head_stride), shape};
  }

  // Host: whether these params' paged caches can take TMA on this device.
  static bool can_run(DecodeParams const& p) {
    auto addressable = [&](void const* ptr, int64_t page_stride, int64_t row_stride, int64_t head_stride) {
      return sm90::tma_tensor_reason("cache", ptr, page_stride, row_stride, head_stride, p.num_pages, p.page_size,
                                     p.heads_kv, sizeof(Element))
          .empty();
    };
    // Every box reaches a column below head_dim: a box wholly past it raised an illegal address on an H100 in the
    // SM90 forward (sm90/requirements.h), where zeros were due; builds without the head dim's own kernel take
    // cp.async.
    return p.arch >= 90 && p.block_table != nullptr && p.page_size % kPagedTmaRows == 0 &&
           p.head_dim > Traits::kHeadDim - kBoxCols &&
           addressable(p.k_ptr, p.k_batch_stride, p.k_row_stride, p.k_head_stride) &&
           addressable(p.v_ptr, p.v_batch_stride, p.v_row_stride, p.v_head_stride);
  }
};

// PagedKV (its cp.async path for the CTA's first block), with every later block by TMA into the mainloop's K and V
// buffers: sK0 / sV0 are stage 0's, kStageElems apart with two stages.
template <class Traits, int kStages>
struct PagedTmaKV : PagedKV<Traits::kBlockN, Traits::kNThreads> {
  using Base = PagedKV<Traits::kBlockN, Traits::kNThreads>;
  using Element = typename Traits::Element;
  using Copies = PagedTmaCopies<Traits>;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kBoxes = kBlockN / kPagedTmaRows;  // per column block; one lane each
  static constexpr int kColBlocks = Traits::kHeadDim / Copies::kBoxCols;
  static_assert(kBlockN % kPagedTmaRows == 0 && kBoxes <= 32 && Traits::kHeadDim % Copies::kBoxCols == 0);
  static constexpr int kSmemBytes = Base::kSmemBytes + 2 * sizeof(uint64_t);  // the offsets, then two barriers

  Copies const& copies;
  Element* sK0;
  Element* sV0;
  int stage_elems;
  int head;
  uint64_t* barriers;  // two stages: one per stage (K and V together); one buffer: K, V
  uint32_t phases = 0;  // bit i: the phase barrier i waits for next
  int2 box;            // lane < kBoxes of warp 0: (row in page, page) of box `lane` of the block fetched last
  int page_ahead;      // and the table's entry for its box of the block after that

  __device__ PagedTmaKV(Base const& base, Copies const& copies_, Element* sK0_, Element* sV0_, int stage_elems_,
                        int head_)
      : Base(base), copies(copies_), sK0(sK0_), sV0(sV0_), stage_elems(stage_elems_), head(head_),
        barriers(reinterpret_cast<uint64_t*>(base.offsets + 2 * 2 * kBlockN)) {
    if (this->tidx == 0) {
      // The tensor maps swizzle by address bits, the cp.async copies and ldmatrix by offsets from the buffers.
      if (cast_smem_ptr_to_uint(sK0) % 1024 != 0 || cast_smem_ptr_to_uint(sV0) % 1024 != 0) { __trap(); }
      for (int i = 0; i < 2; ++i) { initialize_barrier(barriers[i], kStages == 2 ? 2 : 1); }
      cutlass::arch::fence_barrier_init();
    }
    // prefetch_first's __syncthreads orders the initialisation before any use.
  }

  // Lane < kBoxes: the table's entry for its box of block n (n >= 0, and n full: within the table's row).
  __device__ int lookup(int n_block) const {
    return this->block_table[(n_block * kBlockN + this->tidx * kPagedTmaRows) / this->page_size];
  }
  // The mainloop fetches blocks one after another, highest first (prefetch_first(n), then fetch(n - 1), fetch(n - 2),
  // ...): block n's boxes come from the entries the call before looked up, and block n - 1's are looked up now, so
  // each load of the table has a whole step to land before the copies that need it
  // (benchmarks/notes.md#d-decode-paged-tma-lookahead).
  __device__ void fetch(int n_block) {
    if (this->tidx < kBoxes) {
      int const key = n_block * kBlockN + this->tidx * kPagedTmaRows;
      box = make_int2(key % this->page_size, clamp_page(page_ahead, this->num_pages));
      if (n_block > 0) { page_ahead = lookup(n_block - 1); }
    }
  }
  __device__ void publish(int /*n_block*/) {}
  // Before the prologue's loads of block n: its row offsets for cp.async (the first block) and, for a full block
  // (the second, with two stages), its boxes' pages; a ragged block's boxes would look past the table's row. Either
  // way block n - 1's entries are looked up for the fetch that follows.
  __device__ void prefetch_first(int n_block, int row_end) {
    Base::prefetch_first(n_block, row_end);
    if (this->tidx < kBoxes) {
      if (row_end >= kBlockN) {
        page_ahead = lookup(n_block);
        fetch(n_block);
      } else if (n_block > 0) {
        page_ahead = lookup(n_block - 1);
      }
    }
  }

  __device__ int barrier_of(KVOperand operand, int n_block) const {
    return kStages == 2 ? n_block % 2 : int(operand == KVOperand::V);
  }

  template <KVOperand kOperand, bool kCheckRows, class TiledCopy, class TensorG, class TensorS, class TensorC>
  __device__ void load(TiledCopy const& tiled_copy, TensorG const& tXgX, int n_block, TensorS& tXsX,
                       TensorC const& tXcX, int row_end, int col_end) {
    if constexpr (kCheckRows) {
      Base::template load<kOperand, true>(tiled_copy, tXgX, n_block, tXsX, tXcX, row_end, col_end);
    } else {
      if (this->tidx >= 32) { return; }
      uint64_t& barrier = barriers[barrier_of(kOperand, n_block)];
      if (this->tidx == 0) { set_barrier_transaction_bytes(barrier, Copies::kBlockBytes); }
      __syncwarp();
      if (this->tidx < kBoxes) {
        auto const& tma = kOperand == KVOperand::K ? copies.k : copies.v;
        Element* const stage = (kOperand == KVOperand::K ? sK0 : sV0) + (kStages == 2 ? (n_block % 2) * stage_elems : 0);
        Tensor mX = tma.get_tma_tensor(copies.shape);  // (page_size, head_dim, heads_kv, num_pages) coordinates
        CUTE_UNROLL
        for (int j = 0; j < kColBlocks; ++j) {
          // Box `tidx` of column block j: rows [64 tidx, 64 tidx + 64) of the K/V block, as the (kBlockN,
          // kHeadDim) buffer's swizzle atoms place them (rows of 8-row atoms first, then column blocks).
          Tensor gBox = local_tile(mX(_, _, head, box.y), typename Copies::BoxShape{},
                                   make_coord(box.x / kPagedTmaRows, j));
          Tensor sBox = make_tensor(make_smem_ptr(stage + (this->tidx * kPagedTmaRows + j * kBlockN) * Copies::kBoxCols),
                                    typename Copies::SmemLayoutBox{});
          auto [tXgBox, tXsBox] = tma_partition(tma, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sBox),
                                                group_modes<0, 2>(gBox));
          copy(tma.with(barrier), tXgBox, tXsBox);
        }
      }
    }
  }

  // After the mainloop's cp_async_wait for block n's K (two stages: K and V) or V. For a block loaded by TMA (every
  // block after the first): it landed. For the first: this thread's cp.async writes to the buffers are ordered
  // before the TMA writes that reuse them, across proxies (the mainloop's __syncthreads follows).
  template <KVOperand kOperand, bool kFirst>
  __device__ void wait(int n_block) {
    if constexpr (kFirst) {
      cutlass::arch::fence_view_async_shared();
    } else {
      if (kStages == 2 && kOperand == KVOperand::V) { return; }
      int const i = barrier_of(kOperand, n_block);
      wait_barrier(barriers[i], (phases >> i) & 1);
      phases ^= 1u << i;
    }
  }
};

}  // namespace flashcute::sm80
