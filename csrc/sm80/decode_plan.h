// The split-KV decode kernel's plan (decode_kernel.h, decode_launch.h), its rules only, in plain C++: how a kernel
// reads K/V, how many of its CTAs an SM holds, the shared memory each takes and launches with, and the split count.
// No CUDA or CuTe here, so that csrc/tools/print_decode_plans.cpp can print plans with g++ and
// flashcute/explain/decode.py can be held equal to them (tests/test_decode_plan.py).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace flashcute::sm80 {

// How a split-KV kernel reads K/V: a contiguous cache; a paged one by cp.async (PagedKV); a paged one by TMA
// (PagedTmaKV: Hopper, page sizes that are multiples of kPagedTmaRows).
enum class KVLayout { kContiguous, kPaged, kPagedTma };

// Split-KV CTAs resident per SM, which the split count plans for, by how K/V is read and how many keys each CTA
// streams. Each launches with enough shared memory that no more fit (split_kv_smem_bytes). On Hopper, a CTA that
// streams kLongShareKeys keys or more reads a contiguous cache, or a paged one by TMA, fastest alone on its SM;
// where it streams fewer, a second CTA hides each one's prologue and epilogue (benchmarks/notes.md
// #d-decode-one-cta-per-sm, #d-decode-paged-tma, #d-decode-contiguous-short-two-per-sm; three were slower,
// #d-decode-short-three-per-sm). A paged cache read by cp.async keeps two: its loads wait on the block table, which
// the second CTA hides.
constexpr int64_t kLongShareKeys = 4096;
constexpr int decode_ctas_per_sm(KVLayout layout, int64_t keys_per_cta) {
  return layout == KVLayout::kPaged || keys_per_cta < kLongShareKeys ? 2 : 1;
}
// The most an SM holds of a split-KV kernel, for __launch_bounds__.
constexpr int kDecodeMaxCtasPerSm = 2;

// A device whose DRAM feeds each SM more than this many GB/s needs more bytes in flight per SM than the H100's plans
// keep (the same latency at a higher bandwidth): the H200 (4.8 TB/s over 132 SMs: 36) is above it; the H100 (3.35
// TB/s: 25) and the A100 (2.0 TB/s over 108: 19) are below (benchmarks/notes.md#d-decode-fast-memory).
constexpr double kFastMemoryGBpsPerSm = 30;
constexpr bool decode_fast_memory(double dram_gbps, int num_sms) { return dram_gbps > kFastMemoryGBpsPerSm * num_sms; }

// The layout whose residency (decode_ctas_per_sm) a kernel plans for: with fast memory the 64-row tile's TMA pages
// keep two CTAs per SM, as cp.async pages do; one CTA alone does not overlap its 64 rows' arithmetic with its loads
// there (benchmarks/notes.md#d-decode-fast-memory).
constexpr KVLayout residency_layout(KVLayout layout, bool key_split_tile, bool fast_memory) {
  return layout == KVLayout::kPagedTma && !key_split_tile && fast_memory ? KVLayout::kPaged : layout;
}

// With num_splits splits of n_blocks K/V blocks of block_n keys.
constexpr int split_kv_ctas_per_sm(KVLayout layout, int n_blocks, int block_n, int num_splits) {
  return decode_ctas_per_sm(layout, int64_t((n_blocks + num_splits - 1) / num_splits) * block_n);
}

// Two stages of K and V (mainloop.h KVPipeline) where they take at most 80 KiB (hdim 64's 64-row tile); else one K
// and one V buffer, with K(n-1) issued early: the larger tiles ran slower with two stages. traits_smem_bytes: Q and
// one K and one V buffer (kernel_traits.h kSmemBytes); kv_buffer_bytes: one K (or V) buffer.
constexpr int decode_kv_stages(int traits_smem_bytes, int kv_buffer_bytes) {
  return traits_smem_bytes + 2 * kv_buffer_bytes <= 80 * 1024 ? 2 : 1;
}
// The key-split tile launches with two stages of K and V where its CTAs run alone on their SMs (long shares) with
// fast memory, a second block in flight per SM; not over cp.async pages, which keep two CTAs per SM
// (benchmarks/notes.md#d-decode-fast-memory).
constexpr bool decode_two_stage_launch(KVLayout layout, bool key_split_tile, int ctas_per_sm, bool fast_memory) {
  return layout != KVLayout::kPaged && key_split_tile && ctas_per_sm == 1 && fast_memory;
}

// The shared memory a split-KV kernel uses: the mainloop's (Q, then its K/V stages: two where two_stages, else
// decode_kv_stages'), then a paged cache's row offsets (two buffers of a K and a V offset per row of a block: gemm.h
// PagedKV), and by TMA two mbarriers.
constexpr int split_kv_kernel_smem_bytes(int traits_smem_bytes, int kv_buffer_bytes, int block_n, KVLayout layout,
                                         bool two_stages = false) {
  int const stages = two_stages ? 2 : decode_kv_stages(traits_smem_bytes, kv_buffer_bytes);
  int const mainloop = traits_smem_bytes + (stages - 1) * 2 * kv_buffer_bytes;
  int const offsets = 2 * 2 * block_n * int(sizeof(int64_t));
  return mainloop + (layout == KVLayout::kContiguous ? 0 : offsets) +
         (layout == KVLayout::kPagedTma ? 2 * int(sizeof(uint64_t)) : 0);
}

// The shared memory a split-KV CTA launches with: what it uses, and more than 1 / (ctas_per_sm + 1) of the SM's
// (smem_per_sm), so that an SM holds no more CTAs than the split count plans for (half an SM is below the per-CTA
// limit of every sm_80+ device).
inline int split_kv_smem_bytes(int smem_per_sm, int kernel_smem_bytes, int ctas_per_sm) {
  return std::max(kernel_smem_bytes, smem_per_sm / (ctas_per_sm + 1) + 128);
}

constexpr int kMaxSplits = 128;

// The split count for `ctas` CTAs over n_blocks K/V blocks, ctas_per_sm of them resident per SM: none where the
// CTAs fill most of one wave of the GPU (with split_thin_tails, and their last wave is at least 0.9 full); otherwise
// the fewest splits, up to split_cap, whose last wave is nearly as full as the best count's (FlashAttention-2's rule,
// with a stricter bar: decoding is bound by memory, and an SM without a CTA reads nothing), among counts that change
// the blocks per split.
inline int choose_num_splits(int64_t ctas, int n_blocks, int num_sms, int ctas_per_sm, int split_cap = kMaxSplits,
                             bool split_thin_tails = false) {
  int64_t const slots = int64_t(ctas_per_sm) * num_sms;
  auto wave_fill = [&](int s) {
    double const waves = double(ctas * s) / double(slots);
    return waves / std::ceil(waves);
  };
  if (ctas <= 0 || n_blocks <= 1 || (ctas * 5 >= slots * 4 && (!split_thin_tails || wave_fill(1) >= 0.9))) {
    return 1;
  }
  int const max_splits = int(std::min<int64_t>({int64_t(split_cap), slots, n_blocks}));
  auto blocks_per_split = [&](int s) { return (n_blocks + s - 1) / s; };
  auto distinct = [&](int s) { return s == 1 || blocks_per_split(s) != blocks_per_split(s - 1); };
  double best = 0;
  for (int s = 1; s <= max_splits; ++s) {
    if (distinct(s)) { best = std::max(best, wave_fill(s)); }
  }
  for (int s = 1; s <= max_splits; ++s) {
    if (distinct(s) && wave_fill(s) >= 0.95 * best) { return s; }
  }
  return 1;
}

// The split count a kernel of the layout plans for `ctas` CTAs (Q blocks x grouped heads x batch) over n_blocks
// blocks of block_n keys. The residency may depend on the split (the keys each CTA streams); more CTAs per SM only
// split further, keeping it.
inline int plan_num_splits(int64_t ctas, int n_blocks, int block_n, KVLayout layout, int num_sms) {
  int const unsplit = split_kv_ctas_per_sm(layout, n_blocks, block_n, 1);
  // Long shares alone on their SMs, in a grid whose last wave is below 0.9 full: split them too, into shares of at
  // least kLongShareKeys / 2 keys; in a grid just past one wave (its second under a quarter full), into up to four,
  // so that shorter caches reach the two-per-SM thirds that refill it (benchmarks/notes.md #d-decode-thin-tail-split,
  // #d-decode-thin-tail-bar, #d-decode-just-past-a-wave).
  bool const thin_tail = unsplit == 1;
  bool const just_past_a_wave = ctas > num_sms && ctas * 4 < int64_t(num_sms) * 5;
  int const cap = thin_tail ? int(std::max<int64_t>(just_past_a_wave ? 4 : 1,
                                                    int64_t(n_blocks) * block_n / (kLongShareKeys / 2)))
                            : kMaxSplits;
  int const splits = choose_num_splits(ctas, n_blocks, num_sms, unsplit, cap, thin_tail);
  int const resident = split_kv_ctas_per_sm(layout, n_blocks, block_n, splits);
  return resident == unsplit ? splits : choose_num_splits(ctas, n_blocks, num_sms, resident, cap, thin_tail);
}

// The shares per lane of a grid that splits, over `blocks` K/V blocks of block_n keys (all sequences'), each lane
// (a Q block of a grouped head) taking the same equal shares, which may cross sequences (common/block_range.h
// KVShares): one wave of lanes x shares CTAs, one per SM, where each share is long (decode_ctas_per_sm), so that no
// SM streams more than another and none waits on a thin last wave; 0 where the shares would be short (two per SM),
// which split uniformly: there, equal shares measured slower. Against uniform splits, whose grids fill waves only in
// steps of lanes x sequences (benchmarks/notes.md#d-decode-equal-shares).
inline int64_t plan_split_shares(int64_t blocks, int lanes, int block_n, KVLayout layout, int num_sms) {
  bool const long_shares = decode_ctas_per_sm(layout, blocks * lanes * block_n / num_sms) == 1;
  return long_shares ? num_sms / lanes : 0;
}
// Whether a grid that the split count leaves whole (ctas CTAs, lanes of them per sequence) runs instead as one wave of
// equal shares (the key-split tile, plan_split_shares): where its CTAs stream long shares alone on their SMs
// (ctas_per_sm 1) in more than one wave and at most kWavesAsSharesMax, and the last wave leaves at least
// 1 / kWavesAsSharesIdleParts of the grid's slots idle. Equal shares then walk several sequences per CTA in one wave,
// at the cost of partial results and the combine, which a last wave nearly full, or one of four, did not repay
// (benchmarks/notes.md#d-decode-waves-as-shares).
constexpr int kWavesAsSharesMax = 3;
constexpr int kWavesAsSharesIdleParts = 16;
constexpr bool plan_waves_as_shares(int64_t ctas, int lanes, int ctas_per_sm, int num_sms) {
  int64_t const slots = (ctas + num_sms - 1) / num_sms * num_sms;
  return ctas_per_sm == 1 && lanes <= num_sms && ctas > num_sms && ctas <= int64_t(kWavesAsSharesMax) * num_sms &&
         (slots - ctas) * kWavesAsSharesIdleParts >= slots;
}
// CTAs per SM of a grid whose lanes take `shares` shares of `blocks` blocks of block_n keys.
constexpr int shares_ctas_per_sm(KVLayout layout, int64_t blocks, int64_t shares, int block_n) {
  return decode_ctas_per_sm(layout, (blocks + shares - 1) / shares * block_n);
}

// Whether the split-KV kernel copies a call's seqlen_new new K/V rows into the cache itself, rather than after an
// append kernel: on the key-split tile with one Q block per (batch, K/V head) and no more new rows than queries (a
// decoding step), each kept row lies in the keys of one split, the only CTA that reads it; and where the grid of
// grid_ctas runs in at most two waves at ctas_per_sm, since each CTA waits for its copy's round trip before its
// first loads, which the append kernel's launch (about 3 us on an H100) pays once for the whole grid
// (benchmarks/notes.md#d-decode-append-in-split-kv).
inline bool appends_in_split_kv(bool key_split_tile, int m_blocks, int seqlen_new, int seqlen_q, int64_t grid_ctas,
                                int ctas_per_sm, int num_sms) {
  return key_split_tile && m_blocks == 1 && seqlen_new > 0 && seqlen_new <= seqlen_q &&
         grid_ctas <= int64_t(2) * ctas_per_sm * num_sms;
}

}  // namespace flashcute::sm80
