// The SM80 decode kernels (common/params.h DecodeParams): few query rows against many keys, where one CTA per
// (Q block, head, batch) would leave most SMs idle. Up to three kernels a step:
//   append_kv_kernel  new K/V rows into the cache, in place, where the split-KV kernel does not copy them itself
//                     (DecodeParams append_in_split_kv)
//   split_kv_kernel   each CTA runs the forward mainloop for its lane (a Q block of a grouped head) over its share of
//                     the sequences' K/V blocks (common/block_range.h decode_shares), sequence by sequence
//                     (contiguous, or paged: by cp.async, or by TMA on Hopper), and writes a partial O and LSE in
//                     float32 per sequence, or with one split the final O and LSE; where a (batch, K/V head) has few
//                     rows (kernel_traits.h DecodeTraits::KeySplit), its warps split each block's keys
//   combine_kernel    O = sum over a row's shares of exp(LSE_share - LSE) * O_share, LSE = log sum exp(LSE_share),
//                     where there are several
#pragma once

#include <cute/tensor.hpp>

#include "common/block_range.h"
#include "common/params.h"
#include "common/seqlen.h"
#include "common/utils.h"
#include "sm80/decode_plan.h"
#include "sm80/epilogue.h"
#include "sm80/gemm.h"
#include "sm80/gmem.h"
#include "sm80/kernel_traits.h"
#include "sm80/mainloop.h"
#include "sm80/paged_tma.h"

namespace flashcute::sm80 {

using namespace cute;

// Decode batches are fixed-length; a sequence's keys are seqused_k[b] where set (the cache lengths).
using DecodeSeqInfo = SeqInfoOf<false, true>;

// Key row `key` of sequence b in a cache (contiguous, or paged through the block table): elements from k_ptr.
__device__ inline int64_t cache_row_offset(DecodeParams const& p, int b, int key, int64_t batch_stride,
                                           int64_t row_stride) {
  if (p.block_table == nullptr) { return b * batch_stride + key * row_stride; }
  int const page = clamp_page(p.block_table[b * p.block_table_batch_stride + key / p.page_size], p.num_pages);
  return page * batch_stride + int64_t(key % p.page_size) * row_stride;
}

// Copies vector `vector` (16 bytes) of new row i of K (is_v false) or V into the cache of sequence b; vectors number
// heads_kv x head_dim / kVec per row, head-major.
template <class Element>
__device__ inline void append_vector(DecodeParams const& params, int b, int i, int key, bool is_v, int vector) {
  constexpr int kVec = 16 / sizeof(Element);
  int const vecs_per_head = params.head_dim / kVec;
  int const head = vector / vecs_per_head;
  int const col = (vector % vecs_per_head) * kVec;
  Element const* src = static_cast<Element const*>(is_v ? params.v_new_ptr : params.k_new_ptr) +
                       b * (is_v ? params.v_new_batch_stride : params.k_new_batch_stride) +
                       i * (is_v ? params.v_new_row_stride : params.k_new_row_stride) +
                       head * (is_v ? params.v_new_head_stride : params.k_new_head_stride) + col;
  Element* dst = static_cast<Element*>(const_cast<void*>(is_v ? params.v_ptr : params.k_ptr)) +
                 (is_v ? cache_row_offset(params, b, key, params.v_batch_stride, params.v_row_stride)
                       : cache_row_offset(params, b, key, params.k_batch_stride, params.k_row_stride)) +
                 head * (is_v ? params.v_head_stride : params.k_head_stride) + col;
  *reinterpret_cast<uint128_t*>(dst) = *reinterpret_cast<uint128_t const*>(src);
}

// Grid (vector blocks x seqlen_new, batch, 2: K then V), kAppendThreads threads: each thread copies one 16-byte
// vector of a row's heads, so a row's loads are all in flight at once (a loop over them waits for each load before
// its store, which may alias it). Row i of k_new / v_new goes to key cache_seqlens[b] + i of the cache when that is
// below the capacity (seqlen_k).
constexpr int kAppendThreads = 128;
template <class Element>
__host__ __device__ inline int append_row_vectors(DecodeParams const& params) {
  return params.heads_kv * (params.head_dim / (16 / int(sizeof(Element))));
}
template <class Element>
__host__ __device__ inline int append_vector_blocks(DecodeParams const& params) {
  return (append_row_vectors<Element>(params) + kAppendThreads - 1) / kAppendThreads;
}

template <class Element>
__global__ void __launch_bounds__(kAppendThreads) append_kv_kernel(__grid_constant__ DecodeParams const params) {
  int const vector_blocks = append_vector_blocks<Element>(params);
  int const i = blockIdx.x / vector_blocks;
  int const b = blockIdx.y;
  int const key = max(params.cache_seqlens[b], 0) + i;
  int const vector = (blockIdx.x % vector_blocks) * kAppendThreads + threadIdx.x;
  if (key >= params.seqlen_k || vector >= append_row_vectors<Element>(params)) { return; }
  append_vector<Element>(params, b, i, key, blockIdx.z == 1, vector);
}

// What a split-KV kernel takes beside its params: the paged cache's tensor maps where it reads them by TMA.
struct NoKVArgs {};
template <class Traits, KVLayout kLayout>
using SplitKVArgs = cute::conditional_t<kLayout == KVLayout::kPagedTma, PagedTmaCopies<Traits>, NoKVArgs>;

// decode_plan.h decode_kv_stages: two stages of K and V where they fit in 80 KiB, else one K and one V buffer with
// K(n-1) issued early.
template <class Traits>
constexpr KVPipeline decode_pipeline() {
  return decode_kv_stages(Traits::kSmemBytes, Traits::kSmemKVElems * int(sizeof(typename Traits::Element))) == 2
             ? KVPipeline::kTwoStages
             : KVPipeline::kOneBufferKEarly;
}

// kTwoStages: two stages whatever the tile (decode_plan.h decode_two_stage_launch).
template <class Traits, bool kCausal, bool kTwoStages = false>
using DecodeMainloop = Mainloop<Traits, kCausal, kTwoStages ? KVPipeline::kTwoStages : decode_pipeline<Traits>()>;

// Where a split-KV CTA writes row `row` (from 0, the CTA's first), column col of its result, and the row's LSE.
// FinalRows: O in the caller's dtype and strides (columns below head_dim) and LSE, row R of a (batch, K/V head)'s
// rows being query R / group of query head first_head + R % group (DecodeParams pack_group).
template <class Element>
struct FinalRows {
  DecodeParams const& params;
  int batch, first_head, row0;

  __device__ void o(int row, int col, float value) const {
    int const r = row0 + row;
    if (col < params.head_dim) {
      static_cast<Element*>(params.o_ptr)[batch * params.o_batch_stride + (r / params.pack_group) * params.o_row_stride +
                                          (first_head + r % params.pack_group) * params.o_head_stride + col] =
          Element(value);
    }
  }
  __device__ void lse(int row, float value) const {  // (batch, heads_q, seqlen_q)
    int const r = row0 + row;
    params.lse_ptr[(int64_t(batch) * params.heads_q + first_head + r % params.pack_group) * params.seqlen_q +
                   r / params.pack_group] = value;
  }
};
// PartialRows: one share's float32 O (all kHeadDim columns) and LSE at accum_row of DecodeParams o_accum_ptr.
template <int kHeadDim>
struct PartialRows {
  DecodeParams const& params;
  int64_t accum_row;

  __device__ void o(int row, int col, float value) const {
    params.o_accum_ptr[(accum_row + row) * kHeadDim + col] = value;
  }
  __device__ void lse(int row, float value) const { params.lse_accum_ptr[accum_row + row] = value; }
};

// Inside the split-KV kernel (DecodeParams append_in_split_kv: the key-split tile, one Q block per (batch, K/V
// head), no more new rows than queries), before its loads of a sequence: the CTA copies the new rows of sequence b and
// K/V head h_kv among its share's keys (range), which no other CTA reads, and the sequence's first share those before a
// left-padded cache's first key, which none reads, into the cache; then makes them visible to its own loads (the
// barrier orders them before cp.async's; TMA reads through the async proxy, hence its fence).
template <class Traits, KVLayout kLayout>
__device__ void append_in_split_kv(DecodeParams const& params, DecodeSeqInfo const& seq, int b, int h_kv,
                                   KVBlockRange const& range, bool first_share) {
  using Element = typename Traits::Element;
  constexpr int kVec = 16 / sizeof(Element);
  int const vecs_per_head = params.head_dim / kVec;
  int const start = max(params.cache_seqlens[b], 0);
  int const first_key = seq.cache_keys_start();
  // (row i, K or V, vector of head h_kv) over the CTA's threads; row i is key start + i of the cache.
  for (int job = threadIdx.x; job < params.seqlen_new * 2 * vecs_per_head; job += Traits::kNThreads) {
    int const i = job / (2 * vecs_per_head);
    int const key = start + i;
    int const block = key - first_key < 0 ? -1 : (key - first_key) / Traits::kBlockN;
    bool const mine = block >= range.n_block_min && block < range.n_block_max;
    if (key < params.seqlen_k && (mine || (first_share && block < 0))) {
      append_vector<Element>(params, b, i, key, (job / vecs_per_head) % 2 == 1,
                             h_kv * vecs_per_head + job % vecs_per_head);
    }
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (kLayout == KVLayout::kPagedTma) { asm volatile("fence.proxy.async.global;" ::: "memory"); }
#endif
  __syncthreads();
}

// A share of lane `lane` in sequence bidb, share_range(the lane's K/V blocks) (first_share: the sequence's first):
// the mainloop over them, then the lane's rows written (final with one split, else to partial slot `slot`).
template <class Traits, bool kCausal, KVLayout kLayout, bool kTwoStages, class ShareRange>
__device__ __forceinline__ void split_kv_share(DecodeParams const& params, SplitKVArgs<Traits, kLayout> const& kv_args,
                                               int bidb, int lane, int64_t slot, bool first_share,
                                               ShareRange const& share_range, char* smem) {
  using Element = typename Traits::Element;
  using TileShape_MNK = typename Traits::TileShape_MNK;
  using Mainloop = DecodeMainloop<Traits, kCausal, kTwoStages>;
  constexpr int kBlockM = Traits::kBlockM;
  constexpr int kHeadDim = Traits::kHeadDim;

  int const group = params.pack_group;
  int const rows = params.seqlen_q * group;  // of a (batch, K/V head) with grouping, else of a (batch, query head)
  int const m_blocks = decode_q_blocks(params, kBlockM);
  int const m_block = lane % m_blocks;
  int const bidh = lane / m_blocks;  // the group's first query head is bidh * group
  int const bidh_kv = bidh * group / (params.heads_q / params.heads_kv);
  int const tidx = threadIdx.x;
  DecodeSeqInfo const seq(params, bidb);
  int const q_row_end = rows - m_block * kBlockM;
  KVBlockRange const range = share_range(kv_block_range<kBlockM, Traits::kBlockN, kCausal>(seq, m_block, group));
  if constexpr (Traits::kKeySlices > 1) {
    if (params.append_in_split_kv) {
      append_in_split_kv<Traits, kLayout>(params, seq, bidb, bidh_kv, range, first_share);
    }
  }

  // Where the CTA's rows go: with one split, straight to O and LSE (no combine kernel runs); with several, this
  // share's partial O and LSE in float32 (common/params.h DecodeParams o_accum_ptr), for the combine kernel.
  FinalRows<Element> const final_rows{params, bidb, bidh * group, m_block * kBlockM};
  PartialRows<kHeadDim> const partial_rows{params, slot * kBlockM};
  bool const one_split = params.num_splits == 1;

  if (range.n_block_min >= range.n_block_max) {  // no key in this share: O = 0, LSE = -inf (the combine skips it)
    for (int row = tidx; row < min(q_row_end, kBlockM); row += Traits::kNThreads) {
      if (one_split) {
        for (int col = 0; col < kHeadDim; ++col) { final_rows.o(row, col, 0.f); }
        final_rows.lse(row, -INFINITY);
      } else {
        partial_rows.lse(row, -INFINITY);
      }
    }
    return;
  }

  auto [mQ, mK, mV, mO, mLSE] = make_gmem_tensors<Element>(params, seq, bidh * group, bidh_kv);
  // The group's rows, all at (query 0, head bidh * group): GroupedQueryRows moves each to its query and head.
  Tensor mQgroup = make_tensor(mQ.data(), make_shape(rows, params.head_dim), make_stride(_0{}, _1{}));
  Tensor gQ = local_tile(mQgroup, select<0, 2>(TileShape_MNK{}), make_coord(m_block, 0));  // (BLK_M, D)
  GroupedQueryRows const q{group, m_block * kBlockM, params.q_row_stride, params.q_head_stride};

  auto [sQ, sK, sV] = Mainloop::smem_tensors(smem);

  Tensor acc_o = partition_fragment_C(typename Traits::TiledMma{}, select<0, 2>(TileShape_MNK{}));  // (MMA, M, D)
  clear(acc_o);
  typename Mainloop::Softmax softmax;
  if constexpr (kLayout != KVLayout::kContiguous) {
    // The head's rows from page 0 on, as if contiguous: PagedKV moves each row to its page.
    Tensor mKh = head_rows(static_cast<Element const*>(params.k_ptr), bidh_kv * params.k_head_stride, seq.seqlen_k(),
                           params.head_dim, params.k_row_stride);
    Tensor mVh = head_rows(static_cast<Element const*>(params.v_ptr), bidh_kv * params.v_head_stride, seq.seqlen_k(),
                           params.head_dim, params.v_row_stride);
    Tensor gK = local_tile(mKh, select<1, 2>(TileShape_MNK{}), make_coord(0, 0));  // (BLK_N, D)
    Tensor gV = local_tile(mVh, select<1, 2>(TileShape_MNK{}), make_coord(0, 0));  // (BLK_N, D)
    PagedKV<Traits::kBlockN, Traits::kNThreads> kv{params.block_table + bidb * params.block_table_batch_stride,
                                                   params.page_size, params.num_pages, params.k_batch_stride,
                                                   params.k_row_stride, params.v_batch_stride, params.v_row_stride,
                                                   reinterpret_cast<int64_t*>(smem + Mainloop::kSmemBytes), tidx};
    if constexpr (kLayout == KVLayout::kPagedTma) {
      PagedTmaKV<Traits, Mainloop::kKVStages> tma_kv{kv, kv_args, raw_pointer_cast(sK.data()),
                                                     raw_pointer_cast(sV.data()), Mainloop::kKVStageElems, bidh_kv};
      Mainloop::mma(gQ, q, gK, gV, tma_kv, sQ, sK, sV, acc_o, softmax, params, seq, m_block, range, tidx);
    } else {
      Mainloop::mma(gQ, q, gK, gV, kv, sQ, sK, sV, acc_o, softmax, params, seq, m_block, range, tidx);
    }
  } else {
    Tensor gK = local_tile(mK, select<1, 2>(TileShape_MNK{}), make_coord(_, 0));  // (BLK_N, D, n)
    Tensor gV = local_tile(mV, select<1, 2>(TileShape_MNK{}), make_coord(_, 0));  // (BLK_N, D, n)
    Mainloop::mma(gQ, q, gK, gV, ContiguousKV{}, sQ, sK, sV, acc_o, softmax, params, seq, m_block, range, tidx);
  }

  Tensor acc_o_rowcol = make_rowcol(acc_o);
  Tensor lse = softmax.finalize(acc_o_rowcol, params.softmax_scale);
  if (one_split) {
    Epilogue<Traits>::store_split(acc_o, lse, final_rows, q_row_end, tidx, smem);
  } else {
    Epilogue<Traits>::store_split(acc_o, lse, partial_rows, q_row_end, tidx, smem);
  }
}

// kEqualShares (DecodeParams equal_shares, the key-split tile only): grid (lanes x shares_per_lane), CTA
// share x lanes + lane takes that share of the sequences' K/V blocks (decode_shares) for its lane, sequence by
// sequence. Otherwise grid (Q blocks x num_splits, grouped heads, batch): split s of sequence b for one lane
// (split_kv_block_range), the kernel of one share that the grid names itself, with no 64-bit or floating-point
// division before its first load (a kernel with the walk took 30-45 more registers; the shares' index arithmetic
// cost one-split grids 2%: benchmarks/notes.md#d-decode-equal-shares). kTwoStages: two K/V stages in place of the
// tile's own pipeline (DecodeMainloop).
template <class Traits, bool kCausal, KVLayout kLayout, bool kEqualShares, bool kTwoStages>
__global__ void __launch_bounds__(Traits::kNThreads, kDecodeMaxCtasPerSm)
    split_kv_kernel(__grid_constant__ DecodeParams const params,
                    __grid_constant__ SplitKVArgs<Traits, kLayout> const kv_args) {
  // Mainloop::kSmemBytes, then PagedKV's row offsets when paged (and PagedTmaKV's barriers with TMA). 1 KiB aligned:
  // TMA swizzles by address bits.
  extern __shared__ __align__(1024) char smem[];
  allow_dependent_grids();  // the combine kernel may start (decode_launch.h); it waits for this grid's partials
  if constexpr (!kEqualShares) {
    int const m_blocks = decode_q_blocks(params, Traits::kBlockM);
    int const split = blockIdx.x / m_blocks;
    int const lane = blockIdx.y * m_blocks + blockIdx.x % m_blocks;
    int const bidb = blockIdx.z;
    int64_t const slot = decode_partial_slot(params, lane, bidb, int64_t(bidb) * params.num_splits + split);
    split_kv_share<Traits, kCausal, kLayout, kTwoStages>(
        params, kv_args, bidb, lane, slot, split == 0,
        [&](KVBlockRange whole) { return split_kv_block_range(whole, split, params.num_splits); }, smem);
  } else {
    // The i-th sequence the share touches, its bounds recomputed from the params each time: held across the
    // mainloop they cost its paged kernels spills.
    for (int i = 0;; ++i) {
      int const lanes = params.lanes;
      KVShares const shares = decode_shares(params);
      int64_t const share = blockIdx.x / lanes;
      int64_t const begin = shares.start(share), end = shares.start(share + 1);
      int64_t const b = floor_div(begin, shares.unit_blocks) + i;
      int64_t const b_start = b * shares.unit_blocks;
      if (b_start >= end) { break; }
      if (i > 0) { __syncthreads(); }  // the previous sequence's epilogue is done with shared memory
      int const lane = blockIdx.x % lanes;
      int64_t const u0 = max(begin, b_start) - b_start, u1 = min(end, b_start + shares.unit_blocks) - b_start;
      split_kv_share<Traits, kCausal, kLayout, kTwoStages>(
          params, kv_args, int(b), lane, decode_partial_slot(params, lane, int(b), share), u0 == 0,
          [&](KVBlockRange whole) { return shares.range_of(whole, u0, u1); }, smem);
    }
  }
}

// One warp per (batch, head, query row), kCombineWarps rows per CTA: the row's LSE over its unit's shares
// (skipping those that saw no key), then its O as the LSE-weighted sum of the shares' O, in the caller's dtype and
// strides.
constexpr int kCombineWarps = 4;

template <class Element, int kHeadDim>
__global__ void __launch_bounds__(kCombineWarps * 32) combine_kernel(__grid_constant__ DecodeParams const params) {
  constexpr int kColsPerLane = (kHeadDim + 31) / 32;
  int const lane = threadIdx.x % 32;
  int64_t const rows = int64_t(params.batch) * params.heads_q * params.seqlen_q;
  int64_t const row = int64_t(blockIdx.x) * kCombineWarps + threadIdx.x / 32;
  if (row >= rows) { return; }
  int const i = row % params.seqlen_q;
  int const h = (row / params.seqlen_q) % params.heads_q;
  int const b = row / (int64_t(params.seqlen_q) * params.heads_q);
  // Its split-KV lane and row there: row i * group + h % group of grouped head h / group's rows, in Q blocks of
  // unit_rows; its sequence's shares of that lane have consecutive slots.
  int const group = params.pack_group;
  int const group_row = i * group + h % group;
  int const row_lane = h / group * decode_q_blocks(params, params.unit_rows) + group_row / params.unit_rows;
  KVShares const shares = decode_shares(params);
  int64_t const first_slot = decode_partial_slot(params, row_lane, b, shares.first_cta(b));
  int const shares_of_row = int(shares.last_cta(b) - shares.first_cta(b) + 1);
  int64_t const accum_row = first_slot * params.unit_rows + group_row % params.unit_rows;
  wait_for_prior_grid();  // launched programmatically after the split-KV kernel: its partials complete

  // (shares) LSEs and (shares, kHeadDim) partial O of this row.
  Tensor gLSEaccum = make_tensor(make_gmem_ptr(params.lse_accum_ptr + accum_row), make_shape(shares_of_row),
                                 make_stride(params.unit_rows));
  Tensor gOaccum = make_tensor(make_gmem_ptr(params.o_accum_ptr + accum_row * kHeadDim),
                               make_shape(shares_of_row, Int<kHeadDim>{}),
                               make_stride(int64_t(params.unit_rows) * kHeadDim, _1{}));

  float lse_max = -INFINITY;
  for (int s = lane; s < shares_of_row; s += 32) { lse_max = fmaxf(lse_max, gLSEaccum(s)); }
  for (int offset = 16; offset > 0; offset /= 2) {
    lse_max = fmaxf(lse_max, __shfl_xor_sync(0xffffffff, lse_max, offset));
  }
  float sum = 0.f;
  if (lse_max != -INFINITY) {
    for (int s = lane; s < shares_of_row; s += 32) { sum += __expf(gLSEaccum(s) - lse_max); }
  }
  for (int offset = 16; offset > 0; offset /= 2) { sum += __shfl_xor_sync(0xffffffff, sum, offset); }
  float const lse = sum == 0.f ? -INFINITY : lse_max + __logf(sum);

  // Columns lane, lane + 32, ...: each share's row is read as 128-byte warp-wide runs.
  float acc[kColsPerLane] = {};
  if (lse != -INFINITY) {
    for (int s = 0; s < shares_of_row; ++s) {
      float const lse_s = gLSEaccum(s);
      if (lse_s == -INFINITY) { continue; }
      float const weight = __expf(lse_s - lse);
      CUTE_UNROLL
      for (int c = 0; c < kColsPerLane; ++c) {
        int const col = lane + 32 * c;
        if (col < kHeadDim) { acc[c] += weight * gOaccum(s, col); }
      }
    }
  }
  Tensor gO = make_tensor(make_gmem_ptr(static_cast<Element*>(params.o_ptr) + b * params.o_batch_stride +
                                         i * params.o_row_stride + h * params.o_head_stride),
                          make_shape(params.head_dim));
  CUTE_UNROLL
  for (int c = 0; c < kColsPerLane; ++c) {
    int const col = lane + 32 * c;
    if (col < params.head_dim) { gO(col) = Element(acc[c]); }
  }
  if (lane == 0) { params.lse_ptr[row] = lse; }  // (batch, heads_q, seqlen_q), the row order above
}

}  // namespace flashcute::sm80
