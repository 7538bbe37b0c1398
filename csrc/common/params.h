// The plain parameter structs that cross from the torch-facing file (flash_api.cpp) to the kernels.
// Torch-free on purpose: kernel translation units include only CUDA and CUTLASS headers.
//
// AttnParams holds what every attention op shares (the Q/K/V/O tensors and the LSE, shapes, scale and mask);
// each op's struct derives from it and adds its own parts.
#pragma once

#include <cstdint>

namespace flashcute {

struct AttnParams {
  // Tensors in (batch, seqlen, heads, head_dim) order; the head_dim stride is 1.
  const void* __restrict__ q_ptr;
  const void* __restrict__ k_ptr;
  const void* __restrict__ v_ptr;
  void* __restrict__ o_ptr;
  float* __restrict__ lse_ptr;  // (batch, heads_q, seqlen_q), or (heads_q, total_q) with varlen; contiguous

  // Strides in elements. 64-bit: batch * seqlen * heads * head_dim can pass 2^31.
  int64_t q_batch_stride, q_row_stride, q_head_stride;
  int64_t k_batch_stride, k_row_stride, k_head_stride;
  int64_t v_batch_stride, v_row_stride, v_head_stride;
  int64_t o_batch_stride, o_row_stride, o_head_stride;

  // Variable-length batches: q, k, v and o are packed (total, heads, head_dim) tensors, and sequence b holds rows
  // cu_seqlens_q[b]..cu_seqlens_q[b + 1] of q and o (cu_seqlens_k: of k and v), of which seqused_k (if set) keeps
  // the first seqused_k[b] keys. seqlen_q / seqlen_k are then the caller's maximum lengths (they size the grid),
  // total_q / total_k the packed rows, and the batch strides unused. Null for fixed-length batches.
  const int* __restrict__ cu_seqlens_q;
  const int* __restrict__ cu_seqlens_k;
  const int* __restrict__ seqused_k;
  int total_q, total_k;
  // Fixed-length decode (a contiguous cache): sequence b's keys start at row cache_leftpad[b] of its cache, the rows
  // before it being left padding (common/seqlen.h SeqInfoOf kMaybeSequsedFixed). Null otherwise.
  const int* __restrict__ cache_leftpad;
  // Fixed-length decode with an in-place append: sequence b's keys end at max(seqused_k[b], 0) + seqused_k_appended
  // (at most seqlen_k), the rows the call appends included. 0 otherwise.
  int seqused_k_appended;

  int batch;
  int heads_q;
  int heads_kv;       // heads_q % heads_kv == 0; query head h reads key/value head h / (heads_q / heads_kv)
  int seqlen_q;       // per sequence: common/seqlen.h SeqInfo gives each tile its sequence's lengths and offsets
  int seqlen_k;
  int head_dim;       // the caller's head dim (multiple of 8, <= the kernel's instantiated kHeadDim)

  float softmax_scale;       // applied to Q.K^T before the softmax
  float softmax_scale_log2;  // softmax_scale * log2(e): the kernels use exp2

  // Mask: with causal, key j is visible to query i iff j <= i + causal_offset: seqlen_k - seqlen_q aligns the
  // diagonal bottom-right (FlashAttention's convention), 0 top-left (torch SDPA's, causal_top_left).
  bool causal;
  bool causal_top_left;
  int causal_offset;  // of every sequence of a fixed-length batch (common/seqlen.h SeqInfo::causal_offset)

  int num_sms;  // multiprocessors of the device, for persistent schedulers
};

// The forward writes O and the LSE of the base.
struct FwdParams : AttnParams {
  // Varlen on SM90: the persistent scheduler's order of the sequences, 2 * batch + 1 ints of workspace that the
  // kernel fills itself (sm90/tile_scheduler.h); null otherwise.
  int* __restrict__ varlen_schedule;
};

// Decoding (few query rows, many keys): the forward split over the keys, on fixed-length batches whose K/V may be
// a cache. The split-KV kernel's lanes are the Q blocks of every grouped head; for each, its CTAs take num_splits
// splits of each sequence's K/V blocks (common/block_range.h split_kv_block_range) or, where the plan sets
// equal_shares, equal shares of all sequences' blocks (KVShares, decode_shares), and write a partial O and LSE per
// sequence they touch; a combine kernel merges each (sequence, lane)'s into o_ptr / lse_ptr (with one split, each
// CTA one sequence, the kernel writes them itself). seqused_k (the base's) holds each sequence's number of keys
// where it is set.
struct DecodeParams : FwdParams {
  // Query heads per Q block: the heads_q / heads_kv heads of a K/V head share its Q blocks (GQA: each K/V byte is
  // read once for the group), row R of a (batch, K/V head) being query R / pack_group of head R % pack_group of the
  // group; 1 for MHA.
  int pack_group;
  // Set by the kernel's plan(): the splits of a sequence (>= 1; where the caller passes 0, the plan's count, and then
  // the shares may also cross sequences), the lanes (common/block_range.h decode_lanes) and each lane's shares (the
  // grid holds lanes x shares_per_lane CTAs; set here so that no CTA divides for them before its first load), a
  // lane's rows (the tile's) and K/V blocks of a sequence (of the longest).
  int num_splits;
  int lanes;
  int64_t shares_per_lane;
  int unit_rows, unit_blocks;
  bool equal_shares;  // the shares may cross sequences (else share b x num_splits + s is split s of sequence b)
  int smem_per_sm;  // shared memory of one SM of the device, bytes (sm80/decode_plan.h split_kv_smem_bytes)
  int arch;         // the device's compute capability, major * 10 + minor
  bool fast_memory;  // the device's DRAM bandwidth per SM above sm80/decode_plan.h kFastMemoryGBpsPerSm
  // Per partial slot (common/block_range.h decode_partial_slot; partial_slots of them, set by the plan), unit_rows
  // rows in the lane's row order (null with one split):
  int64_t partial_slots;
  float* __restrict__ o_accum_ptr;    // (slots, unit_rows, the kernel's kHeadDim)
  float* __restrict__ lse_accum_ptr;  // (slots, unit_rows); -inf where a share saw no key

  // Paged K/V: k_ptr / v_ptr are (num_pages, page_size, heads_kv, head_dim) (their batch strides are the page
  // strides), and key j of sequence b is row j % page_size of page block_table[b * block_table_batch_stride +
  // j / page_size]. Entries outside [0, num_pages) cannot be checked without a host synchronisation: they are
  // clamped, so no access leaves the caches. Null for contiguous K/V.
  const int* __restrict__ block_table;
  int64_t block_table_batch_stride;
  int page_size, num_pages;

  // In-place append (null k_new_ptr: none): rows i < seqlen_new of k_new / v_new (batch, seqlen_new, heads_kv,
  // head_dim) go to key cache_seqlens[b] + i of the cache (k_ptr / v_ptr), where that is below seqlen_k (the
  // capacity); seqused_k is cache_seqlens and seqused_k_appended seqlen_new, so the attention sees them. The
  // split-KV kernel copies them itself where append_in_split_kv (set by the plan: decode_launch.h
  // SplitKVKernel::appends_itself), else an append kernel runs first.
  const void* __restrict__ k_new_ptr;
  const void* __restrict__ v_new_ptr;
  int64_t k_new_batch_stride, k_new_row_stride, k_new_head_stride;
  int64_t v_new_batch_stride, v_new_row_stride, v_new_head_stride;
  int seqlen_new;
  const int* __restrict__ cache_seqlens;
  bool append_in_split_kv;
};

// The backward reads Q, K, V, O and the LSE of the base (O and the LSE as the forward wrote them) and dO, and
// writes dQ, dK, dV. dQ sums over K/V blocks that different CTAs own, so it accumulates in float32 first; so do
// dK and dV where several query heads share a key/value head (GQA/MQA).
struct BwdParams : AttnParams {
  const void* __restrict__ do_ptr;  // (batch, seqlen_q, heads_q, head_dim), like Q
  void* __restrict__ dq_ptr;
  void* __restrict__ dk_ptr;
  void* __restrict__ dv_ptr;
  int64_t do_batch_stride, do_row_stride, do_head_stride;
  int64_t dq_batch_stride, dq_row_stride, dq_head_stride;
  int64_t dk_batch_stride, dk_row_stride, dk_head_stride;
  int64_t dv_batch_stride, dv_row_stride, dv_head_stride;

  // float32 accumulators, zeroed before use (dq_accum by the preprocess, dk_accum / dv_accum by the caller;
  // those two are null without GQA: dK and dV then go straight to dk_ptr / dv_ptr). Rows of the kernel's
  // instantiated head dim, per sequence and head as common/seqlen.h SeqInfo places them, each CTA's block of rows
  // in its gemm's register order (sm80/gmem.h accum_block).
  float* __restrict__ dq_accum_ptr;
  float* __restrict__ dk_accum_ptr;
  float* __restrict__ dv_accum_ptr;
  // Per query row, in the rows of dq_accum (padding rows included), written by the preprocess: D = rowsum(dO * O)
  // (0 on padding rows), and, where the kernel asks for it (non-null: the SM90 backward, which copies whole row
  // blocks of both), LSE * log2(e) with +inf on padding rows and on rows that saw no key (so their P is 0).
  float* __restrict__ dsoftmax_sum_ptr;
  float* __restrict__ lse_log2_ptr;

  // Deterministic mode: the float32 additions into dq_accum (and dk_accum / dv_accum) happen in a fixed order,
  // each CTA waiting its turn on a counter per (batch, head, row block of kBwdSemaphoreRows rows), zeroed by the
  // caller. Null otherwise (atomics in any order).
  int* __restrict__ dq_semaphore;   // heads_q x SeqInfo::q_semaphores() per sequence block (common/seqlen.h)
  int* __restrict__ dkv_semaphore;  // heads_kv x SeqInfo::k_semaphores(), GQA only
  // The SM90 backward with keys along M, not deterministic, queries up to kBwdDqClaimsMaxSeqlenQ: a claim counter
  // per Q block of each head, laid out like dq_semaphore and zeroed by the caller. The first K/V block to claim
  // a Q block zeroes its rows of dq_accum inside the kernel, a block ahead of its own additions, so the preprocess
  // zeroes none (sm90/bwd_mainloop.h; set only with dq_done, so no row that no K/V block adds into is read). Null
  // otherwise: the preprocess zeroes all of dq_accum.
  int* __restrict__ dq_claims;
  // The SM90 backward with keys along M: per Q block of each head, laid out like dq_semaphore and zeroed by the
  // caller (deterministic: dq_semaphore itself), the K/V blocks whose additions into its rows of dq_accum are
  // complete. The dQ postprocess converts a block once all the K/V blocks adding into it have counted
  // (common/block_range.h kv_blocks_adding_dq), while the kernel's last CTAs still run. Null otherwise: the
  // postprocess waits for the whole kernel.
  int* __restrict__ dq_done;

  // Varlen on SM90: the grids run over the blocks of the sequences one after another, K/V blocks (kBlockN keys:
  // the kernel, and the dK / dV postprocess) and Q blocks (kBlockM queries: the preprocess, the dQ postprocess).
  // The kernel's prepass (sm90/varlen_schedule.h) writes first_*_block[b], sequence b's first block (batch + 1
  // ints, the last the total), and then *_block_table[x], the (sequence, block) that CTA x runs ((batch, 0) for
  // none): one load per CTA. Workspaces of the caller, the tables sized by varlen_block_table_entries. Null
  // otherwise.
  int* __restrict__ first_kv_block;
  int* __restrict__ kv_block_table;  // (sequence, block) pairs, 8-byte aligned
  int* __restrict__ first_q_block;
  int* __restrict__ q_block_table;  // (sequence, block) pairs, 8-byte aligned
};

// The SM90 backward's Q and K/V blocks are at least this tall, so a packed batch's grids have at most
// total / kSm90BwdMinBlockRows + batch CTAs per head (sm90/bwd_launch.h).
constexpr int kSm90BwdMinBlockRows = 64;
inline int64_t varlen_block_table_entries(int64_t total, int64_t batch) { return total / kSm90BwdMinBlockRows + batch; }

// The semaphores are sized for row blocks of this many rows; the kernels' blocks are at least as tall.
constexpr int kBwdSemaphoreRows = 64;
// The longest queries (seqlen_q, or max_seqlen_q) for which the SM90 backward zeroes dq_accum in the kernel
// (BwdParams::dq_claims): there the preprocess's zeroing is a large part of the call, longer the claims cost the
// kernel more than they save (benchmarks/notes.md#d-sm90-bwd-dq-claims).
constexpr int64_t kBwdDqClaimsMaxSeqlenQ = 1024;
// The accumulators' rows per (batch, head) are rounded up to a multiple of this, which every block height divides.
constexpr int kBwdAccumRowAlign = 128;

}  // namespace flashcute
