// The varlen prepasses of the SM90 kernels, one CTA each. The forward's persistent scheduler (tile_scheduler.h):
// FwdParams::varlen_schedule, the sequences longest first and the first work unit of each in that order, before
// the forward kernel walks it. The backward's grids: BwdParams::kv_block_table and q_block_table. Device code
// only (the scheduler's header stays host-compilable for its tests).
#pragma once

#include <cute/config.hpp>

#include "common/block_range.h"
#include "common/params.h"
#include "common/seqlen.h"
#include "sm90/tile_scheduler.h"

namespace flashcute::sm90 {

// The prepass's launch shape and the K/V block counts it tells apart (longer sequences share the last bucket).
constexpr int kVarlenScheduleThreads = 512;
constexpr int kVarlenScheduleBuckets = 2048;

// Block-wide exclusive prefix sum of one value per thread; `total` gets the sum of all. Every thread must call it.
template <int kThreads>
CUTE_DEVICE int block_exclusive_sum(int value, int& total) {
  static_assert(kThreads % 32 == 0 && kThreads <= 32 * 32);
  __shared__ int warp_sums[kThreads / 32];
  int const lane = threadIdx.x % 32;
  int const warp = threadIdx.x / 32;
  int inclusive = value;
  CUTE_UNROLL
  for (int delta = 1; delta < 32; delta *= 2) {
    int const below = __shfl_up_sync(0xffffffff, inclusive, delta);
    if (lane >= delta) { inclusive += below; }
  }
  if (lane == 31) { warp_sums[warp] = inclusive; }
  __syncthreads();
  int warps_before = 0;
  total = 0;
  for (int w = 0; w < kThreads / 32; ++w) {
    warps_before += w < warp ? warp_sums[w] : 0;
    total += warp_sums[w];
  }
  __syncthreads();  // warp_sums free for the next call
  return warps_before + inclusive - value;
}

// The varlen prepass, one CTA: FwdParams::varlen_schedule = (order, first_unit). A counting sort orders the
// sequences by their K/V blocks, most first; then each gets its first unit of the walk in that order.
template <int kBlockM, int kBlockN, bool kCausal>
__global__ void __launch_bounds__(kVarlenScheduleThreads) varlen_schedule_kernel(__grid_constant__ FwdParams const params) {
  using Scheduler = TileScheduler<kBlockM, kCausal, true>;
  constexpr int kThreads = kVarlenScheduleThreads;
  constexpr int kBucketsPerThread = kVarlenScheduleBuckets / kThreads;
  __shared__ int bucket_start[kVarlenScheduleBuckets];
  int* const order = params.varlen_schedule;              // (batch)
  int* const first_unit = params.varlen_schedule + params.batch;  // (batch + 1); the sort's slots until the end
  int const batch = params.batch;
  // Bucket 0 holds the most K/V blocks, so the buckets in increasing order are the sequences longest first.
  auto bucket_of = [&](int b) {
    int const n_blocks = (SeqInfo(params, b).seqlen_k() + kBlockN - 1) / kBlockN;
    return kVarlenScheduleBuckets - 1 - min(n_blocks, kVarlenScheduleBuckets - 1);
  };

  for (int k = threadIdx.x; k < kVarlenScheduleBuckets; k += kThreads) { bucket_start[k] = 0; }
  __syncthreads();
  for (int b = threadIdx.x; b < batch; b += kThreads) { first_unit[b] = atomicAdd(&bucket_start[bucket_of(b)], 1); }
  __syncthreads();
  // Counts -> starts: each thread scans its run of buckets after the runs before it.
  int counts[kBucketsPerThread];
  int run = 0;
  CUTE_UNROLL
  for (int j = 0; j < kBucketsPerThread; ++j) {
    counts[j] = bucket_start[threadIdx.x * kBucketsPerThread + j];
    run += counts[j];
  }
  int total = 0;
  int start = block_exclusive_sum<kThreads>(run, total);
  CUTE_UNROLL
  for (int j = 0; j < kBucketsPerThread; ++j) {
    bucket_start[threadIdx.x * kBucketsPerThread + j] = start;
    start += counts[j];
  }
  __syncthreads();
  for (int b = threadIdx.x; b < batch; b += kThreads) { order[bucket_start[bucket_of(b)] + first_unit[b]] = b; }
  __syncthreads();
  // Each sequence's units (Q blocks, or causal pairs of them, times heads), summed in the order.
  int units_before = 0;
  for (int r0 = 0; r0 < batch; r0 += kThreads) {
    int const r = r0 + int(threadIdx.x);
    int units = 0;
    if (r < batch) {
      int const num_m_blocks = (SeqInfo(params, order[r]).seqlen_q() + kBlockM - 1) / kBlockM;
      units = (num_m_blocks + Scheduler::kTilesPerUnit - 1) / Scheduler::kTilesPerUnit * params.heads_q;
    }
    int chunk_units = 0;
    int const before = block_exclusive_sum<kThreads>(units, chunk_units);
    if (r < batch) { first_unit[r] = units_before + before; }
    units_before += chunk_units;
  }
  if (threadIdx.x == 0) { first_unit[batch] = units_before; }
}

// Numbers the blocks (kBlockRows rows) of the sequences of a packed batch one after another for a grid of grid_x
// CTAs per head: first[b], sequence b's first block (first[batch]: the total), then table[x], CTA x's
// (sequence, block) (common/block_range.h sequence_block_of). rows_of(b): sequence b's rows. Every thread of the
// CTA must call it.
template <int kBlockRows, class RowsOf>
CUTE_DEVICE void number_sequence_blocks(int batch, RowsOf rows_of, int grid_x, int* first, int* table) {
  int blocks_before = 0;
  for (int b0 = 0; b0 < batch; b0 += kVarlenScheduleThreads) {
    int const b = b0 + int(threadIdx.x);
    int const blocks = b < batch ? (rows_of(b) + kBlockRows - 1) / kBlockRows : 0;
    int chunk_blocks = 0;
    int const before = block_exclusive_sum<kVarlenScheduleThreads>(blocks, chunk_blocks);
    if (b < batch) { first[b] = blocks_before + before; }
    blocks_before += chunk_blocks;
  }
  if (threadIdx.x == 0) { first[batch] = blocks_before; }
  __syncthreads();  // first written (global writes of this CTA, visible to its threads after the barrier)
  for (int x = threadIdx.x; x < grid_x; x += kVarlenScheduleThreads) {
    SequenceBlock const entry = sequence_block_of(first, batch, grid_x, x);
    reinterpret_cast<int2*>(table)[x] = make_int2(entry.sequence, entry.block);
  }
}

// The SM90 backward's prepass for a packed batch, one CTA: the K/V blocks (kv_grid_x per head; BwdParams::
// first_kv_block, kv_block_table), which the kernel's grid and the dK / dV postprocess run on, and the Q blocks of
// the preprocess and the dQ postprocess (q_grid_x; first_q_block, q_block_table).
template <int kBlockM, int kBlockN>
__global__ void __launch_bounds__(kVarlenScheduleThreads)
    varlen_bwd_blocks_kernel(__grid_constant__ BwdParams const params, int q_grid_x, int kv_grid_x) {
  number_sequence_blocks<kBlockN>(params.batch, [&](int b) { return SeqInfo(params, b).seqlen_k(); }, kv_grid_x,
                                  params.first_kv_block, params.kv_block_table);
  number_sequence_blocks<kBlockM>(params.batch, [&](int b) { return SeqInfo(params, b).seqlen_q(); }, q_grid_x,
                                  params.first_q_block, params.q_block_table);
}

}  // namespace flashcute::sm90
