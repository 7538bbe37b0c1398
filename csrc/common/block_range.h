// Which K/V blocks a Q block visits (forward), which Q blocks a K/V block visits (backward), and which of them
// need masking; shared by every kernel.
#pragma once

#include "seqlen.h"

namespace flashcute {

struct KVBlockRange {
  int n_block_max;       // visit blocks [n_block_min, n_block_max); empty means no row of the Q block sees a key
  int n_block_unmasked;  // blocks below n_block_unmasked need no mask; the rest (ragged tail, diagonal) do
  int n_block_min = 0;   // > 0 only for a share of the keys (split_kv_block_range, KVShares::range_of)
};

// group > 1: the Q block's rows are grouped query heads (the decode kernel's packing), row r being query r / group.
template <int kBlockM, int kBlockN, bool kCausal, class Seq>
__host__ __device__ inline KVBlockRange kv_block_range(Seq const& seq, int m_block, int group = 1) {
  int n_block_max = (seq.seqlen_k() + kBlockN - 1) / kBlockN;
  int n_block_unmasked = seq.seqlen_k() / kBlockN;
  if constexpr (kCausal) {
    int const first_row = m_block * kBlockM / group;
    int const last_row = (min((m_block + 1) * kBlockM, seq.seqlen_q() * group) - 1) / group;
    // Keys visible to the last row end at last_row + offset; every row sees keys up to first_row + offset.
    int const last_visible_end = last_row + seq.causal_offset() + 1;
    int const all_visible_end = first_row + seq.causal_offset() + 1;
    n_block_max = min(n_block_max, last_visible_end <= 0 ? 0 : (last_visible_end + kBlockN - 1) / kBlockN);
    n_block_unmasked = min(n_block_unmasked, all_visible_end <= 0 ? 0 : all_visible_end / kBlockN);
  }
  return {n_block_max, min(n_block_unmasked, n_block_max)};
}

// Uniform split-KV: split `split` of `num_splits` takes the next ceil(n_block_max / num_splits) of a Q block's K/V
// blocks (the last ones may be empty: n_block_min >= n_block_max). One 32-bit division: the decode kernel computes
// it before its first load.
__host__ __device__ inline KVBlockRange split_kv_block_range(KVBlockRange range, int split, int num_splits) {
  int const per_split = (range.n_block_max + num_splits - 1) / num_splits;
  int const n_block_min = split * per_split;
  int const n_block_max = min(range.n_block_max, n_block_min + per_split);
  int const n_block_unmasked = min(range.n_block_unmasked, n_block_max);
  return {n_block_max, n_block_unmasked < n_block_min ? n_block_min : n_block_unmasked, n_block_min};
}

// floor(a / b) for 0 <= a < 2^53 and b > 0, exact: a quotient in double precision, corrected by one where its rounding
// put it off (a 64-bit integer division is a long instruction sequence, which the decode kernel's CTAs would wait
// on before their first loads).
__host__ __device__ inline int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = int64_t(double(a) / double(b));
  if (q * b > a) {
    --q;
  } else if ((q + 1) * b <= a) {
    ++q;
  }
  return q;
}

// Split-KV in equal shares: `units` units (the decode kernel's sequences) of unit_blocks K/V blocks each, their
// blocks numbered one unit after another, cut into `ctas` contiguous shares of blocks / ctas blocks (rounded down
// or up), one per CTA. A share may end inside one unit and go on in the next, so that every CTA streams as many
// blocks whatever the units' count; a unit's shares are its splits, and the CTAs holding them are
// cta_of(its first block) .. cta_of(its last).
struct KVShares {
  int64_t unit_blocks;  // K/V blocks of a unit: of the longest sequence
  int64_t blocks;       // of all units
  int64_t ctas;

  // The first block of a CTA's share; the CTA whose share holds a block; those holding a unit's first and last.
  __host__ __device__ int64_t start(int64_t cta) const { return floor_div(cta * blocks, ctas); }
  __host__ __device__ int64_t cta_of(int64_t block) const { return floor_div((block + 1) * ctas - 1, blocks); }
  __host__ __device__ int64_t first_cta(int64_t unit) const { return cta_of(unit * unit_blocks); }
  __host__ __device__ int64_t last_cta(int64_t unit) const { return cta_of((unit + 1) * unit_blocks - 1); }
  // The share of `cta` in `unit`, blocks [u0, u1) of its unit_blocks, as a range of the unit's own blocks (range, up
  // to its n_block_max: its sequence may be shorter than the longest), in proportion, so a short sequence spreads
  // over the same CTAs; masked blocks stay masked. Empty (n_block_min >= n_block_max) where it holds none.
  __host__ __device__ KVBlockRange range_of(KVBlockRange range, int64_t u0, int64_t u1) const {
    int const n_block_min = int(floor_div(u0 * range.n_block_max, unit_blocks));
    int const n_block_max = int(floor_div(u1 * range.n_block_max, unit_blocks));
    int const n_block_unmasked = min(range.n_block_unmasked, n_block_max);
    return {n_block_max, n_block_unmasked < n_block_min ? n_block_min : n_block_unmasked, n_block_min};
  }
};

// The Q blocks of a (batch, K/V head)'s rows, a step's queries times the GQA group it packs, in blocks of
// rows_per_block: the plan's unit_rows (a kernel passes its kBlockM, a constant to divide by).
__host__ __device__ inline int decode_q_blocks(DecodeParams const& p, int rows_per_block) {
  return int((int64_t(p.seqlen_q) * p.pack_group + rows_per_block - 1) / rows_per_block);
}

// The decode kernel's lanes and shares (its plan stores their counts in DecodeParams). A lane is a Q block of a grouped
// head; every lane of a sequence reads the same K/V rows (a cache row holds all its heads), so the lanes take the same
// shares of the sequences' blocks, side by side in the grid (CTA = share x lanes + lane), and read each row at about
// the same time (benchmarks/notes.md#d-decode-equal-shares).
__host__ __device__ inline int decode_lanes(DecodeParams const& p) {
  return decode_q_blocks(p, p.unit_rows) * (p.heads_q / p.pack_group);
}
__host__ __device__ inline KVShares decode_shares(DecodeParams const& p) {
  return {p.unit_blocks, int64_t(p.batch) * p.unit_blocks, p.shares_per_lane};
}
// A lane's partial slots: along its blocks each new (sequence, share) pair moves the sequence, the share or both on
// by one, so share c of sequence b is the lane's slot b + c of batch + shares - 1 (DecodeParams partial_slots). With
// uniform splits, split s of sequence b is share b x num_splits + s.
__host__ __device__ inline int64_t decode_slots_per_lane(int batch, int64_t shares_per_lane) {
  return batch + shares_per_lane - 1;
}
__host__ __device__ inline int64_t decode_partial_slot(DecodeParams const& p, int lane, int b, int64_t share) {
  return lane * decode_slots_per_lane(p.batch, p.shares_per_lane) + b + share;
}

struct QBlockRange {
  int m_block_min;         // visit blocks [m_block_min, m_block_max); empty when m_block_min >= m_block_max
  int m_block_max;
  int m_block_masked_end;  // blocks below it cross the causal diagonal (a ragged K/V block masks every block)
};

// The Q blocks whose rows see some key of K/V block n_block. With causal, the set of K/V blocks visiting a Q
// block is always a prefix [0, n) of them: the backward's deterministic mode orders their dQ additions by it.
template <int kBlockM, int kBlockN, bool kCausal>
__host__ __device__ inline QBlockRange q_block_range(SeqInfo const& seq, int n_block) {
  int const m_block_max = (seq.seqlen_q() + kBlockM - 1) / kBlockM;
  int m_block_min = 0, m_block_masked_end = 0;
  if constexpr (kCausal) {
    // Row i sees key j iff j <= i + causal_offset: the block's first key from row first_row on, all of its
    // keys from row all_row on.
    int const first_row = n_block * kBlockN - seq.causal_offset();
    int const all_row = (n_block + 1) * kBlockN - 1 - seq.causal_offset();
    m_block_min = first_row <= 0 ? 0 : first_row / kBlockM;
    m_block_masked_end = all_row <= 0 ? 0 : (all_row + kBlockM - 1) / kBlockM;
  }
  m_block_masked_end = m_block_masked_end < m_block_min ? m_block_min : m_block_masked_end;
  return {m_block_min, m_block_max, min(m_block_masked_end, m_block_max)};
}

// The order in which a K/V block walks its Q blocks [m_block_min, m_block_min + count): from m_block_min + start
// on, cyclically. Every role of a backward CTA (loads, gemms, dQ additions) follows it.
struct QBlockWalk {
  int m_block_min, count, start;  // 0 <= start < count, or start = 0
  __host__ __device__ int operator[](int i) const {
    int const j = start + i;
    return m_block_min + (j < count ? j : j - count);
  }
};

// The SM90 backward's deterministic non-causal order. The K/V blocks of a head go in groups of `group`
// consecutive blocks; block n, the j-th of its group (j = n mod group), walks the m_blocks Q blocks from block
// j mod m_blocks on (rotated_walk_start), so it is at step s = (m - j) mod m_blocks of its walk at Q block m, and
// the blocks of a group reach a Q block at different steps. dQ block m is added group after group, and within a
// group in order of (step, j): the turn of block n is the number of K/V blocks in earlier groups, plus those of its
// group at an earlier step there, or at the same step with a lower j. A block thus waits only for lower blocks
// (launched before it) and for the blocks of its group, which must be resident with it: `group` is at most the
// CTAs the GPU runs at once (the SM count, one backward CTA per SM).
__host__ __device__ inline int rotated_walk_start(int n_block, int group, int m_blocks) {
  return n_block % group % m_blocks;
}
__host__ __device__ inline int rotated_walk_turn(int n_blocks, int m_blocks, int m_block, int n_block, int group) {
  int const first = n_block / group * group;  // the group's first block
  int const size = min(group, n_blocks - first);
  int const j = n_block - first;
  int const per_residue = size / m_blocks, extra = size % m_blocks;  // residues below `extra` have one more
  int const step = (m_block - j % m_blocks + m_blocks) % m_blocks;
  // The earlier steps' residues: m_block, m_block - 1, ..., m_block - step + 1 (mod m_blocks); those below extra.
  int const below = step <= m_block + 1
      ? max(0, min(m_block + 1, extra) - (m_block - step + 1))
      : min(m_block + 1, extra) + max(0, extra - (m_blocks - (step - m_block - 1)));
  return first + step * per_residue + below + j / m_blocks;
}

// The sequence owning block `block` of blocks numbered across the sequences one after another, first[b] being
// sequence b's first (first[batch]: the total): the b with first[b] <= block < first[b + 1], or batch past them.
__host__ __device__ inline int sequence_of_block(int const* first, int batch, int block) {
  int lo = 0, hi = batch;  // first[lo] <= block, and block < first[hi] unless hi == batch
  if (block >= first[batch]) { return batch; }
  while (hi - lo > 1) {
    int const mid = (lo + hi) / 2;
    if (first[mid] <= block) { lo = mid; } else { hi = mid; }
  }
  return lo;
}

// Entry x of a grid of grid_x CTAs over those blocks (the SM90 backward's varlen tables, common/params.h): the
// sequence and its block; {batch, 0} past the last block and for every block of a sequence that does not fit the
// grid whole (malformed cu_seqlens only).
struct SequenceBlock {
  int sequence;
  int block;
};
__host__ __device__ inline SequenceBlock sequence_block_of(int const* first, int batch, int grid_x, int x) {
  int const b = sequence_of_block(first, batch, x);
  if (b >= batch || first[b + 1] > grid_x) { return {batch, 0}; }
  return {b, x - first[b]};
}

// CTAs per head of a packed batch's grid over blocks of block_rows rows (the SM90 backward's, sm90/bwd_launch.h): at
// most total / block_rows full blocks, plus one partial block per sequence.
__host__ __device__ inline int packed_grid_blocks(int total, int block_rows, int batch) {
  return total / block_rows + batch;
}

// Entry x of such a table as the prepass stores it (int pairs, 8-byte aligned): one load.
__host__ __device__ inline SequenceBlock table_entry(int const* table, int x) {
  int2 const entry = reinterpret_cast<int2 const*>(table)[x];
  return {entry.x, entry.y};
}

// CTA cta of the SM90 backward kernel's packed-batch grid, grid_x * heads CTAs in the fixed-length grid's order
// with sequences for batch: the sequences one after another, each one's CTAs head by head, a head's blocks in a
// row, increasing or (highest_first) decreasing. Sequence s owns CTAs [first[s] * heads, first[s + 1] * heads), so
// table entry cta / heads names it (one load, then two). sequence = batch: no block (sequence_block_of).
struct SequenceHeadBlock {
  int sequence;
  int head;
  int block;
};
__host__ __device__ inline SequenceHeadBlock sequence_head_block_of(int const* table, int const* first, int batch,
                                                                    int heads, int cta, bool highest_first) {
  int const sequence = table_entry(table, cta / heads).sequence;
  if (sequence >= batch) { return {batch, 0, 0}; }
  int const blocks = first[sequence + 1] - first[sequence];
  int const in_sequence = cta - first[sequence] * heads;
  int const head = in_sequence / blocks;
  int const i = in_sequence - head * blocks;
  return {sequence, head, highest_first ? blocks - 1 - i : i};
}

// The K/V blocks that visit Q block m_block in the backward (the inverse of q_block_range): blocks [0, n_end).
template <int kBlockM, int kBlockN, bool kCausal>
__host__ __device__ inline int kv_blocks_visiting(SeqInfo const& seq, int m_block) {
  int const n_blocks = (seq.seqlen_k() + kBlockN - 1) / kBlockN;
  if constexpr (!kCausal) { return n_blocks; }
  // q_block_range: block n visits m iff its first_row = n * kBlockN - causal_offset < (m + 1) * kBlockM.
  int const end = (m_block + 1) * kBlockM + seq.causal_offset();
  return end <= 0 ? 0 : min(n_blocks, (end + kBlockN - 1) / kBlockN);
}

// The SM90 backward's K/V blocks that add into Q block m_block of sequence seq.batch (the count its
// BwdParams::dq_done counter reaches): those visiting it, or none where a packed batch's sequence does not fit the
// kernel's grid whole (sequence_block_of: no CTA runs its blocks).
template <int kBlockM, int kBlockN>
__host__ __device__ inline int kv_blocks_adding_dq(BwdParams const& p, SeqInfo const& seq, int m_block) {
  bool const packed = p.first_kv_block != nullptr;
  if (packed && p.first_kv_block[seq.batch + 1] > packed_grid_blocks(p.total_k, kBlockN, p.batch)) { return 0; }
  return p.causal ? kv_blocks_visiting<kBlockM, kBlockN, true>(seq, m_block)
                  : kv_blocks_visiting<kBlockM, kBlockN, false>(seq, m_block);
}

}  // namespace flashcute
