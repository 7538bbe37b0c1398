// Which K/V blocks a Q block visits, and which of them need masking (shared by every kernel).
#pragma once

#include "seqlen.h"

namespace flashcute {

struct KVBlockRange {
  int n_block_max;       // visit blocks [0, n_block_max); <= 0 means no row of the Q block sees a key
  int n_block_unmasked;  // blocks [0, n_block_unmasked) need no mask; the rest (ragged tail, diagonal) do
};

template <int kBlockM, int kBlockN, bool kCausal>
__host__ __device__ inline KVBlockRange kv_block_range(SeqInfo const& seq, int m_block) {
  int n_block_max = (seq.seqlen_k() + kBlockN - 1) / kBlockN;
  int n_block_unmasked = seq.seqlen_k() / kBlockN;
  if constexpr (kCausal) {
    int const first_row = m_block * kBlockM;
    int const last_row = min((m_block + 1) * kBlockM, seq.seqlen_q()) - 1;
    // Keys visible to the last row end at last_row + offset; every row sees keys up to first_row + offset.
    int const last_visible_end = last_row + seq.causal_offset() + 1;
    int const all_visible_end = first_row + seq.causal_offset() + 1;
    n_block_max = min(n_block_max, last_visible_end <= 0 ? 0 : (last_visible_end + kBlockN - 1) / kBlockN);
    n_block_unmasked = min(n_block_unmasked, all_visible_end <= 0 ? 0 : all_visible_end / kBlockN);
  }
  return {n_block_max, min(n_block_unmasked, n_block_max)};
}

}  // namespace flashcute
