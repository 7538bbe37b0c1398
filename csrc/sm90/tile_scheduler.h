// Persistent tile scheduler: one CTA per SM walks tiles tile_idx = blockIdx.x, + gridDim.x, ... of a fixed
// order, so the producer and the consumer warpgroups of a CTA agree on the sequence without talking.
//
// Order: (batch, head) pairs are cut into sections whose K/V fit in L2 together; inside a section the Q
// blocks go slowest and the heads fastest, so the CTAs running at one time share few K/V heads. Non-causal
// tiles all cost the same (static round-robin). Causal Q blocks near the end see the most keys, so they go
// first (longest work first): the short tiles fill in the tail of the wave.
#pragma once

#include <cute/config.hpp>

#include "common/flash_params.h"

namespace flashcute::sm90 {

struct WorkTile {
  int m_block;
  int head;
  int batch;
};

template <int kBlockM, bool kCausal>
struct TileScheduler {
  struct Params {
    int num_m_blocks;
    int num_heads;
    int num_bh;            // batch * heads
    int section_heads;     // (batch, head) pairs per L2 section
    int total_tiles;
  };

  static Params make_params(FwdParams const& p, int element_bytes) {
    Params sp;
    sp.num_m_blocks = (p.seqlen_q + kBlockM - 1) / kBlockM;
    sp.num_heads = p.heads_q;
    sp.num_bh = p.batch * p.heads_q;
    // K and V of one KV head, shared by heads_q / heads_kv query heads; aim for half of the H100/H200's L2.
    int64_t const kv_bytes = int64_t(p.seqlen_k) * p.head_dim * 2 * element_bytes;
    int64_t const l2_budget = int64_t(25) * 1024 * 1024;
    int64_t const group = p.heads_q / p.heads_kv;
    int64_t heads = kv_bytes > 0 ? l2_budget / kv_bytes * group : sp.num_bh;
    if (heads < 1) heads = 1;
    sp.section_heads = int(heads < sp.num_bh ? heads : sp.num_bh);
    sp.total_tiles = sp.num_m_blocks * sp.num_bh;
    return sp;
  }

  static int grid_size(Params const& sp, int num_sms) {
    return sp.total_tiles < num_sms ? sp.total_tiles : num_sms;
  }

  CUTE_DEVICE static WorkTile get(Params const& sp, int tile_idx) {
    int const section_tiles = sp.section_heads * sp.num_m_blocks;
    int const section = tile_idx / section_tiles;
    int const in_section = tile_idx - section * section_tiles;
    int const bh0 = section * sp.section_heads;
    int const heads_here = min(sp.section_heads, sp.num_bh - bh0);  // the last section may be short
    int const bh = bh0 + in_section % heads_here;
    int m_block = in_section / heads_here;
    if constexpr (kCausal) { m_block = sp.num_m_blocks - 1 - m_block; }
    int const batch = bh / sp.num_heads;
    return {m_block, bh - batch * sp.num_heads, batch};
  }
};

}  // namespace flashcute::sm90
