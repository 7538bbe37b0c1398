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
//
// Varlen: units differ by sequence (a unit costs about the sequence's K/V blocks), and the grid, sized for the
// longest sequence, would hold mostly empty tiles. A one-CTA prepass (varlen_schedule.h) orders the
// sequences longest first and counts their units; the walk then covers just those units in that order, sections
// of heads inside each sequence, so the round-robin deals out units of similar cost together and the last ones
// dealt are the cheapest (longest-processing-time first).
#pragma once

#include <cute/config.hpp>

#include "common/params.h"
#include "common/seqlen.h"

namespace flashcute::sm90 {

struct WorkTile {
  int m_block;  // -1: no tile (the second half of the unpaired middle block of a causal head)
  int head;
  int batch;
  CUTE_DEVICE bool is_valid() const { return m_block >= 0; }
};

// kVarlen: the instantiation for packed batches (the fixed-length one has no varlen code at all).
template <int kBlockM, bool kCausal, bool kVarlen>
struct TileScheduler {
  static constexpr int kTilesPerUnit = kCausal ? 2 : 1;

  struct Params {
    int num_m_blocks;
    int units_per_bh;   // Q-block units of one (batch, head): num_m_blocks, or the pairs of them
    int num_heads;
    int num_bh;         // batch * heads
    int section_heads;  // (batch, head) pairs per L2 section
    int total_units;
    int group;          // query heads per K/V head
    int kv_row_bytes;   // bytes of K and V per key of one head
    // Varlen (FwdParams::varlen_schedule): the sequences longest first, and the first unit of each (in that
    // order; first_unit[batch] is the total).
    int const* order;
    int const* first_unit;
  };

  // K and V of one KV head, shared by heads_q / heads_kv query heads. A section's K/V is kept far below the
  // 50 MB L2: the fewer heads the running CTAs share, the more of their K/V reads hit. Measured on the H200
  // (SM90 harness, bf16): 1.5 MB beat 25 MB by 4-10% at seqlen 512-1k (hdims 128 and 256, non-causal), 2-5% at
  // 2k-4k and up to 2% at 16k; 3 and 6 MB fell in between (benchmarks/notes.md).
  __host__ __device__ static int section_heads_for(Params const& sp, int seqlen_k, int heads) {
    int64_t const kv_bytes = int64_t(seqlen_k) * sp.kv_row_bytes;
    int64_t const l2_budget = int64_t(1536) * 1024;  // 1.5 MB
    int64_t const section = kv_bytes > 0 ? l2_budget / kv_bytes * sp.group : heads;
    return int(section < 1 ? 1 : section < heads ? section : heads);
  }

  static Params make_params(FwdParams const& p, int element_bytes) {
    Params sp;
    sp.num_m_blocks = (p.seqlen_q + kBlockM - 1) / kBlockM;
    sp.units_per_bh = (sp.num_m_blocks + kTilesPerUnit - 1) / kTilesPerUnit;
    sp.num_heads = p.heads_q;
    sp.num_bh = p.batch * p.heads_q;
    sp.group = p.heads_q / p.heads_kv;
    sp.kv_row_bytes = p.head_dim * 2 * element_bytes;
    sp.section_heads = section_heads_for(sp, p.seqlen_k, sp.num_bh);
    sp.total_units = sp.units_per_bh * sp.num_bh;
    sp.order = p.varlen_schedule;
    sp.first_unit = p.varlen_schedule == nullptr ? nullptr : p.varlen_schedule + p.batch;
    return sp;
  }

  static int grid_size(Params const& sp, int num_sms) {
    return sp.total_units < num_sms ? sp.total_units : num_sms;
  }

  // The CTA's tiles, as a flat index unit * kTilesPerUnit + (tile within the unit), and a cursor into the
  // varlen order that only moves forward:
  //   int cursor = 0;
  //   for (int i = first(params); i < end(params, fwd); i = next(i)) { WorkTile t = get(params, fwd, i, cursor); }
  CUTE_DEVICE static int first(Params const&) { return int(blockIdx.x) * kTilesPerUnit; }
  CUTE_DEVICE static int end(Params const& sp, FwdParams const& fwd) {
    if constexpr (kVarlen) {
      return sp.first_unit[fwd.batch] * kTilesPerUnit;
    } else {
      return sp.total_units * kTilesPerUnit;
    }
  }
  CUTE_DEVICE static int next(int i) {
    return (i + 1) % kTilesPerUnit != 0 ? i + 1 : i + 1 + (int(gridDim.x) - 1) * kTilesPerUnit;
  }

  CUTE_DEVICE static WorkTile get(Params const& sp, FwdParams const& fwd, int i, int& cursor) {
    int const unit = i / kTilesPerUnit;
    if constexpr (!kVarlen) {
      auto const [bh, u] = section_walk(unit, sp.section_heads, sp.num_bh, sp.units_per_bh);
      int const batch = bh / sp.num_heads;
      return tile(u, bh - batch * sp.num_heads, batch, sp.num_m_blocks, i);
    } else {
      while (sp.first_unit[cursor + 1] <= unit) { ++cursor; }
      int const batch = sp.order[cursor];
      SeqInfoOf<true, false, /*kReadOnce=*/true> const seq(fwd, batch);
      int const num_m_blocks = (seq.seqlen_q() + kBlockM - 1) / kBlockM;
      int const units_per_head = (num_m_blocks + kTilesPerUnit - 1) / kTilesPerUnit;
      int const section_heads = section_heads_for(sp, seq.seqlen_k(), sp.num_heads);
      auto const [head, u] = section_walk(unit - sp.first_unit[cursor], section_heads, sp.num_heads, units_per_head);
      return tile(u, head, batch, num_m_blocks, i);
    }
  }

 private:
  struct Slot {
    int head;  // of the walk's heads (fixed length: (batch, head) pairs)
    int u;     // unit of that head
  };

  // Unit `unit` of `heads` heads of `units_per_head` units each, in sections of section_heads heads: sections one
  // after another, inside each the unit slowest and the head fastest (the last section may be short).
  CUTE_DEVICE static Slot section_walk(int unit, int section_heads, int heads, int units_per_head) {
    int const section_units = section_heads * units_per_head;
    int const section = unit / section_units;
    int const in_section = unit - section * section_units;
    int const head0 = section * section_heads;
    int const heads_here = min(section_heads, heads - head0);
    return {head0 + in_section % heads_here, in_section / heads_here};
  }

  CUTE_DEVICE static WorkTile tile(int u, int head, int batch, int num_m_blocks, int i) {
    if constexpr (!kCausal) {
      return {u, head, batch};
    } else {
      int const m_long = num_m_blocks - 1 - u;
      if (i % kTilesPerUnit == 0) { return {m_long, head, batch}; }
      return {u < m_long ? u : -1, head, batch};
    }
  }
};

}  // namespace flashcute::sm90
