// Persistent tile scheduler: one CTA per SM walks a fixed sequence of tiles, so the producer and the
// consumer warpgroups of a CTA agree on it without talking.
//
// Work units: (batch, head) pairs are cut into sections whose K/V take ~1.5 MB together; inside a section the
// units go Q-block slowest and heads fastest, so the CTAs running at one time share few K/V heads. CTA c
// takes units c, c + gridDim.x, ... (static round-robin), which balances only if units cost the same.
// Non-causal: a unit is one Q block, and all cost the same. Causal: the Q block m sees about m + 1 K/V
// blocks, so a unit pairs block m = num_m_blocks - 1 - p (long) with block p (short), and every pair costs
// about the same; the long one runs first. (Round-robin over single causal blocks left the slowest CTA
// with 1.2-1.8x the average work.)
#pragma once

#include <cute/config.hpp>

#include "common/params.h"

namespace flashcute::sm90 {

struct WorkTile {
  int m_block;  // -1: no tile (the second half of the unpaired middle block of a causal head)
  int head;
  int batch;
  CUTE_DEVICE bool is_valid() const { return m_block >= 0; }
};

template <int kBlockM, bool kCausal>
struct TileScheduler {
  static constexpr int kTilesPerUnit = kCausal ? 2 : 1;

  struct Params {
    int num_m_blocks;
    int units_per_bh;   // Q-block units of one (batch, head): num_m_blocks, or the pairs of them
    int num_heads;
    int num_bh;         // batch * heads
    int section_heads;  // (batch, head) pairs per L2 section
    int total_units;
  };

  static Params make_params(FwdParams const& p, int element_bytes) {
    Params sp;
    sp.num_m_blocks = (p.seqlen_q + kBlockM - 1) / kBlockM;
    sp.units_per_bh = (sp.num_m_blocks + kTilesPerUnit - 1) / kTilesPerUnit;
    sp.num_heads = p.heads_q;
    sp.num_bh = p.batch * p.heads_q;
    // K and V of one KV head, shared by heads_q / heads_kv query heads. A section's K/V is kept far below the
    // 50 MB L2: the fewer heads the running CTAs share, the more of their K/V reads hit. Measured on the
    // H200 (SM90 harness, bf16): 1.5 MB beat 25 MB by 4-10% at seqlen 512-1k (hdims 128 and 256, non-causal),
    // 2-5% at 2k-4k and up to 2% at 16k; 3 and 6 MB fell in between (benchmarks/notes.md).
    int64_t const kv_bytes = int64_t(p.seqlen_k) * p.head_dim * 2 * element_bytes;
    int64_t const l2_budget = int64_t(1536) * 1024;  // 1.5 MB
    int64_t const group = p.heads_q / p.heads_kv;
    int64_t heads = kv_bytes > 0 ? l2_budget / kv_bytes * group : sp.num_bh;
    if (heads < 1) heads = 1;
    sp.section_heads = int(heads < sp.num_bh ? heads : sp.num_bh);
    sp.total_units = sp.units_per_bh * sp.num_bh;
    return sp;
  }

  static int grid_size(Params const& sp, int num_sms) {
    return sp.total_units < num_sms ? sp.total_units : num_sms;
  }

  // The CTA's tiles, as a flat index unit * kTilesPerUnit + (tile within the unit):
  //   for (int i = first(params); i < end(params); i = next(i)) { WorkTile t = get(params, i); ... }
  CUTE_DEVICE static int first(Params const&) { return int(blockIdx.x) * kTilesPerUnit; }
  CUTE_DEVICE static int end(Params const& sp) { return sp.total_units * kTilesPerUnit; }
  CUTE_DEVICE static int next(int i) {
    return (i + 1) % kTilesPerUnit != 0 ? i + 1 : i + 1 + (int(gridDim.x) - 1) * kTilesPerUnit;
  }

  CUTE_DEVICE static WorkTile get(Params const& sp, int i) {
    int const unit = i / kTilesPerUnit;
    int const section_units = sp.section_heads * sp.units_per_bh;
    int const section = unit / section_units;
    int const in_section = unit - section * section_units;
    int const bh0 = section * sp.section_heads;
    int const heads_here = min(sp.section_heads, sp.num_bh - bh0);  // the last section may be short
    int const bh = bh0 + in_section % heads_here;
    int const batch = bh / sp.num_heads;
    int const head = bh - batch * sp.num_heads;
    int const u = in_section / heads_here;
    if constexpr (!kCausal) {
      return {u, head, batch};
    } else {
      int const m_long = sp.num_m_blocks - 1 - u;
      if (i % kTilesPerUnit == 0) { return {m_long, head, batch}; }
      return {u < m_long ? u : -1, head, batch};
    }
  }
};

}  // namespace flashcute::sm90
