// The SM80 kernels' building blocks between memory and the tensor cores: predicated gmem -> smem tile loads
// (cp.async), and gemms whose shared-memory -> register copies (ldmatrix) run one k-slice ahead of the mma.sync.
// Shared by the forward and backward mainloops.
#pragma once

#include <cute/tensor.hpp>

namespace flashcute::sm80 {

using namespace cute;

// gmem -> smem tile copy; columns >= col_end and (with kCheckRows) rows >= row_end are zero-filled (cp.async
// ZFILL), so ragged tails and head dims below the instantiated one read as zeros and never touch memory.
// tXcX: the identity tensor partitioned like the source, giving each copy vector's (row, col).
template <bool kCheckRows, class TiledCopy, class TensorG, class TensorS, class TensorC>
__device__ inline void load_tile(TiledCopy const& tiled_copy, TensorG const& tXgX, TensorS& tXsX,
                                 TensorC const& tXcX, int row_end, int col_end) {
  CUTE_UNROLL
  for (int m = 0; m < size<1>(tXgX); ++m) {
    bool const row_ok = !kCheckRows || get<0>(tXcX(0, m, 0)) < row_end;
    CUTE_UNROLL
    for (int k = 0; k < size<2>(tXgX); ++k) {
      bool const ok = row_ok && get<1>(tXcX(0, m, k)) < col_end;
      copy(tiled_copy.with(ok), tXgX(_, m, k), tXsX(_, m, k));
    }
  }
}

// load_tile for rows that are not one strided tensor: row r of the tile is read row_offset(r) elements away from
// where tXgX puts it (asked only for rows below row_end).
template <bool kCheckRows, class TiledCopy, class TensorG, class TensorS, class TensorC, class RowOffset>
__device__ inline void load_tile_rows(TiledCopy const& tiled_copy, TensorG const& tXgX, TensorS& tXsX,
                                      TensorC const& tXcX, int row_end, int col_end, RowOffset const& row_offset) {
  CUTE_UNROLL
  for (int m = 0; m < size<1>(tXgX); ++m) {
    int const row = get<0>(tXcX(0, m, 0));
    bool const row_ok = !kCheckRows || row < row_end;
    int64_t const offset = row_ok ? row_offset(row) : 0;
    CUTE_UNROLL
    for (int k = 0; k < size<2>(tXgX); ++k) {
      bool const ok = row_ok && get<1>(tXcX(0, m, k)) < col_end;
      Tensor src = make_tensor(tXgX(_, m, k).data() + offset, tXgX(_, m, k).layout());
      copy(tiled_copy.with(ok), src, tXsX(_, m, k));
    }
  }
}

// Where the forward mainloop's Q rows come from. Query rows: the Q block is rows of one query head; tXgX is the
// thread's (CPY, CPY_M, CPY_D) partition of it.
struct QueryRows {
  __device__ static constexpr int group() { return 1; }

  template <class TiledCopy, class TensorG, class TensorS, class TensorC>
  __device__ void load(TiledCopy const& tiled_copy, TensorG const& tXgX, TensorS& tXsX, TensorC const& tXcX,
                       int row_end, int col_end) const {
    load_tile<true>(tiled_copy, tXgX, tXsX, tXcX, row_end, col_end);
  }
};

// Grouped query heads (decoding with GQA): the `group` query heads of a K/V head share the Q block, row R of the
// (batch, K/V head)'s rows being query R / group of query head first_head + R % group, so the CTA reads the K/V
// head once for all of them. tXgX partitions the (BLK_M, D) tile at (query 0, first_head) with row stride 0.
struct GroupedQueryRows {
  int group_size;
  int row0;  // the block's first row
  int64_t row_stride, head_stride;

  __device__ int group() const { return group_size; }

  template <class TiledCopy, class TensorG, class TensorS, class TensorC>
  __device__ void load(TiledCopy const& tiled_copy, TensorG const& tXgX, TensorS& tXsX, TensorC const& tXcX,
                       int row_end, int col_end) const {
    load_tile_rows<true>(tiled_copy, tXgX, tXsX, tXcX, row_end, col_end, [&](int row) {
      int const r = row0 + row;
      return (r / group_size) * row_stride + (r % group_size) * head_stride;
    });
  }
};

// Which of the two a K/V policy's load copies (PagedKV keeps each row's offset for both).
enum class KVOperand { K, V };

// Where the forward mainloop's K/V blocks come from. Contiguous: block n is rows [n * kBlockN, (n + 1) * kBlockN)
// of the (batch, head)'s K (V); tXgX is the thread's (CPY, CPY_N, CPY_D, n) partition of those blocks.
struct ContiguousKV {
  __device__ void prefetch_first(int /*n_block*/, int /*row_end*/) {}
  __device__ void fetch(int /*n_block*/) {}
  __device__ void publish(int /*n_block*/) {}
  template <KVOperand, bool kFirst>
  __device__ void wait(int /*n_block*/) {}  // cp.async only: the mainloop's cp_async_wait covers it

  template <KVOperand, bool kCheckRows, class TiledCopy, class TensorG, class TensorS, class TensorC>
  __device__ void load(TiledCopy const& tiled_copy, TensorG const& tXgX, int n_block, TensorS& tXsX,
                       TensorC const& tXcX, int row_end, int col_end) const {
    load_tile<kCheckRows>(tiled_copy, tXgX(_, _, _, n_block), tXsX, tXcX, row_end, col_end);
  }
};

// A block-table entry clamped into the cache's pages: entries cannot be checked without a host synchronisation,
// and a wrong one must not move an access outside the cache.
__device__ inline int clamp_page(int page, int num_pages) {
  return page < 0 ? 0 : page < num_pages ? page : num_pages - 1;
}

// Paged: key j lives at row j % page_size of page block_table[j / page_size] (common/params.h DecodeParams);
// tXgX is the thread's (CPY, CPY_N, CPY_D) partition of block 0 of the head as if its rows were contiguous.
// The CTA looks up block n's pages a step before the copies that need them (K(n), then V(n)): fetch(n) reads the
// table (each thread kBlockN / kNThreads rows) into registers before a gemm, publish(n) turns them into each row's
// K and V offsets in shared memory after it (two buffers, block n in buffer n % 2), so the table's latency hides
// under the gemm and a copy adds one offset per row. The mainloop's barriers order the writes before the copies
// that read them. Thread 0 also prefetches the table's entries kTableLeadBlocks blocks ahead into L1: a 128-byte
// line of the table serves several blocks, and its first load would otherwise wait behind the K/V traffic in DRAM
// for longer than a step (benchmarks/notes.md#d-decode-paged-table-prefetch).
template <int kBlockN, int kNThreads>
struct PagedKV {
  static_assert(kBlockN % kNThreads == 0 || kNThreads % kBlockN == 0);
  static constexpr int kRowsPerThread = (kBlockN + kNThreads - 1) / kNThreads;
  static constexpr int kSmemBytes = 2 * 2 * kBlockN * sizeof(int64_t);
  int const* block_table;  // this sequence's row of the table
  int page_size, num_pages;
  int64_t k_page_stride, k_row_stride, v_page_stride, v_row_stride;
  int64_t* offsets;  // shared, (kBlockN, K/V, buffer): where each row of a block is, relative to block 0's row
  int tidx;
  int2 fetched[kRowsPerThread];  // (page, row in the page) of rows tidx + i * kNThreads of the block fetched last

  static constexpr int kTableLeadBlocks = 16;
  __device__ void fetch(int n_block, int row_end = kBlockN) {
    if (tidx == 0 && n_block >= kTableLeadBlocks) {
      int const* ahead = block_table + (n_block - kTableLeadBlocks) * kBlockN / page_size;
      asm volatile("prefetch.global.L1 [%0];" : : "l"(ahead) : "memory");
    }
    CUTE_UNROLL
    for (int i = 0; i < kRowsPerThread; ++i) {
      int const row = tidx + i * kNThreads;
      int const key = n_block * kBlockN + row;
      int const page = row < row_end && row < kBlockN ? block_table[key / page_size] : 0;
      fetched[i] = make_int2(page, key % page_size);
    }
  }
  __device__ void publish(int n_block) {
    int64_t* buffer = offsets + (n_block % 2) * 2 * kBlockN;
    CUTE_UNROLL
    for (int i = 0; i < kRowsPerThread; ++i) {
      int const row = tidx + i * kNThreads;
      if (row < kBlockN) {
        int64_t const page = clamp_page(fetched[i].x, num_pages);
        int64_t const shift = fetched[i].y - row;
        buffer[row] = page * k_page_stride + shift * k_row_stride;
        buffer[kBlockN + row] = page * v_page_stride + shift * v_row_stride;
      }
    }
  }
  __device__ void prefetch_first(int n_block, int row_end) {
    fetch(n_block, row_end);
    publish(n_block);
    __syncthreads();
  }
  template <KVOperand, bool kFirst>
  __device__ void wait(int /*n_block*/) {}  // cp.async only: the mainloop's cp_async_wait covers it

  template <KVOperand kOperand, bool kCheckRows, class TiledCopy, class TensorG, class TensorS, class TensorC>
  __device__ void load(TiledCopy const& tiled_copy, TensorG const& tXgX, int n_block, TensorS& tXsX,
                       TensorC const& tXcX, int row_end, int col_end) const {
    int64_t const* buffer = offsets + ((n_block % 2) * 2 + (kOperand == KVOperand::V)) * kBlockN;
    load_tile_rows<kCheckRows>(tiled_copy, tXgX, tXsX, tXcX, row_end, col_end, [&](int row) { return buffer[row]; });
  }
};

// acc += A . B^T with both operands in shared memory.
template <class TensorAcc, class TensorRA, class TensorRB, class TensorSA, class TensorSB, class TiledMma,
          class TiledCopyA, class TiledCopyB, class ThrCopyA, class ThrCopyB>
__device__ inline void gemm_ss(TensorAcc& acc, TensorRA& tCrA, TensorRB& tCrB, TensorSA const& tCsA,
                               TensorSB const& tCsB, TiledMma const& tiled_mma,
                               TiledCopyA const& copy_a, TiledCopyB const& copy_b,
                               ThrCopyA const& thr_copy_a, ThrCopyB const& thr_copy_b) {
  Tensor tCrA_view = thr_copy_a.retile_D(tCrA);
  Tensor tCrB_view = thr_copy_b.retile_D(tCrB);
  CUTE_STATIC_ASSERT_V(size<1>(tCsA) == size<1>(tCrA_view));  // MMA_M: ldmatrix covers the fragment's rows
  CUTE_STATIC_ASSERT_V(size<1>(tCsB) == size<1>(tCrB_view));  // MMA_N
  CUTE_STATIC_ASSERT_V(size<2>(tCrA) == size<2>(tCrB));       // the k-slices of A and B pair up
  copy(copy_a, tCsA(_, _, 0), tCrA_view(_, _, 0));
  copy(copy_b, tCsB(_, _, 0), tCrB_view(_, _, 0));
  CUTE_UNROLL
  for (int k = 0; k < size<2>(tCrA); ++k) {
    if (k + 1 < size<2>(tCrA)) {
      copy(copy_a, tCsA(_, _, k + 1), tCrA_view(_, _, k + 1));
      copy(copy_b, tCsB(_, _, k + 1), tCrB_view(_, _, k + 1));
    }
    gemm(tiled_mma, tCrA(_, _, k), tCrB(_, _, k), acc);
  }
}

// acc += A . B^T with A already in registers (P, straight from the softmax) and B in shared memory.
template <class TensorAcc, class TensorRA, class TensorRB, class TensorSB, class TiledMma,
          class TiledCopyB, class ThrCopyB>
__device__ inline void gemm_rs(TensorAcc& acc, TensorRA const& tCrA, TensorRB& tCrB, TensorSB const& tCsB,
                               TiledMma const& tiled_mma, TiledCopyB const& copy_b,
                               ThrCopyB const& thr_copy_b) {
  Tensor tCrB_view = thr_copy_b.retile_D(tCrB);
  copy(copy_b, tCsB(_, _, 0), tCrB_view(_, _, 0));
  CUTE_UNROLL
  for (int k = 0; k < size<2>(tCrA); ++k) {
    if (k + 1 < size<2>(tCrA)) { copy(copy_b, tCsB(_, _, k + 1), tCrB_view(_, _, k + 1)); }
    gemm(tiled_mma, tCrA(_, _, k), tCrB(_, _, k), acc);
  }
}

}  // namespace flashcute::sm80
