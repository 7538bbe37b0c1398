// Host-side check of the block ranges (csrc/common/block_range.h): for every Q block, the K/V blocks whose
// q_block_range contains it are exactly [0, kv_blocks_visiting) (the prefix the deterministic modes order their dQ
// additions by); the decode kernel's uniform splits (check_splits), its shares of the sequences' K/V blocks and its
// exact floor_div (check_shares); and the deterministic non-causal turns of rotated walks (check_rotated_turns).
// Built with g++ by tests/test_block_range.py; prints one line per mismatch, then "checked N".
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include <cuda_runtime.h>  // __host__ / __device__ for the host compiler

using std::max;
using std::min;

#include "common/block_range.h"

template <int kBlockM, int kBlockN, bool kCausal>
long check(int seqlen_q, int seqlen_k, bool top_left, long& cases) {
  flashcute::FwdParams p{};
  p.batch = 1, p.heads_q = 1, p.heads_kv = 1, p.seqlen_q = seqlen_q, p.seqlen_k = seqlen_k;
  p.causal = kCausal, p.causal_top_left = top_left, p.causal_offset = top_left ? 0 : seqlen_k - seqlen_q;
  flashcute::SeqInfo const seq(p, 0);
  int const m_blocks = (seqlen_q + kBlockM - 1) / kBlockM, n_blocks = (seqlen_k + kBlockN - 1) / kBlockN;
  long bad = 0;
  for (int m = 0; m < m_blocks; ++m) {
    int const n_end = flashcute::kv_blocks_visiting<kBlockM, kBlockN, kCausal>(seq, m);
    for (int n = 0; n < n_blocks; ++n) {
      flashcute::QBlockRange const r = flashcute::q_block_range<kBlockM, kBlockN, kCausal>(seq, n);
      bool const visits = r.m_block_min <= m && m < r.m_block_max;
      if (visits != (n < n_end)) {
        std::printf("mismatch block_m %d block_n %d causal %d top_left %d sq %d sk %d: m %d n %d visits %d n_end %d\n",
                    kBlockM, kBlockN, int(kCausal), int(top_left), seqlen_q, seqlen_k, m, n, int(visits), n_end);
        ++bad;
      }
    }
  }
  ++cases;
  return bad;
}

// split_kv_block_range (uniform splits): the splits of a Q block's K/V blocks cover [0, n_block_max) once, in order,
// each masking exactly the blocks the whole range masks; and the combine, which reads a sequence's shares as
// KVShares of batch x num_splits per lane (first_cta .. last_cta), reads exactly its splits' slots.
long check_splits(long& cases) {
  long bad = 0;
  for (int n_max = 0; n_max <= 40; ++n_max) {
    for (int unmasked = 0; unmasked <= n_max; ++unmasked) {
      for (int splits = 1; splits <= 12; ++splits) {
        int next = 0;
        for (int s = 0; s < splits; ++s) {
          flashcute::KVBlockRange const r = flashcute::split_kv_block_range({n_max, unmasked}, s, splits);
          if (r.n_block_min >= r.n_block_max) { continue; }
          bool const ok = r.n_block_min == next && r.n_block_unmasked >= r.n_block_min &&
                          r.n_block_unmasked <= r.n_block_max &&
                          r.n_block_unmasked == std::max(r.n_block_min, std::min(unmasked, r.n_block_max));
          if (!ok) {
            std::printf("split mismatch n_max %d unmasked %d splits %d split %d: [%d, %d) unmasked %d\n", n_max,
                        unmasked, splits, s, r.n_block_min, r.n_block_max, r.n_block_unmasked);
            ++bad;
          }
          next = r.n_block_max;
        }
        if (next != n_max) {
          std::printf("splits of n_max %d (%d splits) end at %d\n", n_max, splits, next);
          ++bad;
        }
      }
    }
  }
  for (int batch = 1; batch <= 6; ++batch) {
    for (int unit_blocks = 1; unit_blocks <= 40; ++unit_blocks) {
      for (int splits = 1; splits <= unit_blocks; ++splits) {  // the plan caps num_splits at the blocks
        flashcute::KVShares const shares{unit_blocks, int64_t(batch) * unit_blocks, int64_t(batch) * splits};
        for (int b = 0; b < batch; ++b) {
          if (shares.first_cta(b) != int64_t(b) * splits || shares.last_cta(b) != int64_t(b) * splits + splits - 1) {
            std::printf("uniform splits: batch %d unit_blocks %d splits %d: sequence %d reads shares %ld .. %ld\n",
                        batch, unit_blocks, splits, b, long(shares.first_cta(b)), long(shares.last_cta(b)));
            ++bad;
          }
        }
      }
    }
  }
  ++cases;
  return bad;
}

// KVShares: the shares of every CTA count (up to one block each) tile all units' blocks once, in order, none empty;
// the CTAs touching a unit are first_cta .. last_cta; their partial slots (decode_partial_slot, for two lanes) are
// distinct and below the plan's count; and a unit's shares of any shorter range (range_of) cover it once, in
// order, each masking
// exactly the blocks the whole range masks.
long check_shares(long& cases) {
  long bad = 0;
  // floor_div against integer division, near the double's rounding (quotients next to integers, up to 2^53).
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < 200000; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    int64_t const b = int64_t(x % (1ull << (1 + i % 40))) + 1;
    int64_t const limit = (int64_t(1) << 53) - 1;
    int64_t const a = std::min<int64_t>(int64_t(x >> 11) % (limit + 1) / b * b - i % 3, limit);  // at a multiple
    if (a >= 0 && flashcute::floor_div(a, b) != a / b) {
      std::printf("floor_div(%ld, %ld) = %ld, not %ld\n", long(a), long(b), long(flashcute::floor_div(a, b)),
                  long(a / b));
      ++bad;
    }
  }
  for (int units = 1; units <= 5; ++units) {
    for (int unit_blocks = 1; unit_blocks <= 9; ++unit_blocks) {
      int const blocks = units * unit_blocks;
      for (int ctas = 1; ctas <= blocks; ++ctas) {
        flashcute::KVShares const shares{unit_blocks, blocks, ctas};
        flashcute::DecodeParams p{};
        p.batch = units, p.shares_per_lane = ctas;
        int const lanes = 2;
        std::vector<int> slot_seen(lanes * flashcute::decode_slots_per_lane(units, ctas), 0);
        for (int c = 0; c < ctas; ++c) {
          if (shares.start(c) >= shares.start(c + 1)) {
            std::printf("empty share: units %d unit_blocks %d ctas %d cta %d\n", units, unit_blocks, ctas, c);
            ++bad;
          }
        }
        for (int u = 0; u < units; ++u) {
          for (int c = 0; c < ctas; ++c) {
            bool const touches = shares.start(c) < (u + 1) * unit_blocks && shares.start(c + 1) > u * unit_blocks;
            bool const listed = shares.first_cta(u) <= c && c <= shares.last_cta(u);
            if (touches != listed) {
              std::printf("unit %d cta %d: touches %d listed %d (units %d unit_blocks %d ctas %d)\n", u, c,
                          int(touches), int(listed), units, unit_blocks, ctas);
              ++bad;
            }
            for (int lane = 0; touches && lane < lanes; ++lane) {
              int64_t const slot = flashcute::decode_partial_slot(p, lane, u, c);
              if (slot < 0 || slot >= int64_t(slot_seen.size()) || slot_seen[slot]++ != 0) {
                std::printf("slot %ld out of range or twice (units %d unit_blocks %d ctas %d lane %d)\n", long(slot),
                            units, unit_blocks, ctas, lane);
                ++bad;
              }
            }
          }
          for (int n_max = 0; n_max <= unit_blocks; ++n_max) {
            for (int unmasked = 0; unmasked <= n_max; ++unmasked) {
              int next = 0;
              for (int c = int(shares.first_cta(u)); c <= shares.last_cta(u); ++c) {
                int64_t const u0 = std::max<int64_t>(shares.start(c), int64_t(u) * unit_blocks) - u * unit_blocks;
                int64_t const u1 = std::min<int64_t>(shares.start(c + 1), int64_t(u + 1) * unit_blocks) -
                                   u * unit_blocks;
                flashcute::KVBlockRange const r = shares.range_of({n_max, unmasked}, u0, u1);
                if (r.n_block_min >= r.n_block_max) { continue; }
                bool const ok = r.n_block_min == next &&
                                r.n_block_unmasked == std::max(r.n_block_min, std::min(unmasked, r.n_block_max));
                if (!ok) {
                  std::printf("share mismatch n_max %d unmasked %d cta %d: [%d, %d) unmasked %d\n", n_max, unmasked, c,
                              r.n_block_min, r.n_block_max, r.n_block_unmasked);
                  ++bad;
                }
                next = r.n_block_max;
              }
              if (next != n_max) {
                std::printf("shares of n_max %d end at %d (units %d unit_blocks %d ctas %d)\n", n_max, next, units,
                            unit_blocks, ctas);
                ++bad;
              }
            }
          }
        }
        ++cases;
      }
    }
  }
  return bad;
}

// rotated_walk_turn: at each Q block, the turns of the K/V blocks are 0 .. n_blocks - 1: the blocks of earlier
// groups first, then those of the block's group in order of (step of the block's walk at which it reaches the Q
// block, block index), the walk of the j-th block of a group starting at j mod m_blocks (rotated_walk_start). So
// a block waits only for lower blocks and for those of its own group (deadlock-free when a group is resident).
long check_rotated_turns(long& cases) {
  long bad = 0;
  for (int group : {1, 3, 7, 64}) {
    for (int n_blocks = 1; n_blocks <= 40; ++n_blocks) {
      for (int m_blocks = 1; m_blocks <= 40; ++m_blocks) {
        for (int m = 0; m < m_blocks; ++m) {
          auto step_of = [&](int n) {  // the step of block n's walk at Q block m
            flashcute::QBlockWalk const walk{0, m_blocks, flashcute::rotated_walk_start(n, group, m_blocks)};
            int step = 0;
            while (walk[step] != m) { ++step; }
            return step;
          };
          for (int n = 0; n < n_blocks; ++n) {
            int expected = 0;  // blocks of earlier groups; of this group, at an earlier step or a lower index
            for (int other = 0; other < n_blocks; ++other) {
              bool const same_group = other / group == n / group;
              expected += other / group < n / group ||
                          (same_group && (step_of(other) < step_of(n) || (step_of(other) == step_of(n) && other < n)));
            }
            int const turn = flashcute::rotated_walk_turn(n_blocks, m_blocks, m, n, group);
            if (turn != expected) {
              std::printf("rotated turn group %d n_blocks %d m_blocks %d m %d n %d: %d, expected %d\n", group,
                          n_blocks, m_blocks, m, n, turn, expected);
              ++bad;
            }
            for (int other = n + 1; other < n_blocks; ++other) {  // waits only within its group among higher blocks
              if (other / group != n / group &&
                  flashcute::rotated_walk_turn(n_blocks, m_blocks, m, other, group) < turn) {
                std::printf("block %d waits for the higher block %d of another group (group %d)\n", n, other, group);
                ++bad;
              }
            }
          }
        }
        ++cases;
      }
    }
  }
  return bad;
}

int main() {
  int const lengths[] = {1, 17, 63, 64, 65, 113, 127, 128, 129, 200, 255, 256, 257, 1000, 1023, 4097};
  long bad = 0, cases = 0;
  for (int sq : lengths) {
    for (int sk : lengths) {
      for (bool top_left : {false, true}) {
        bad += check<64, 128, true>(sq, sk, top_left, cases) + check<128, 128, true>(sq, sk, top_left, cases);
        bad += check<64, 128, false>(sq, sk, top_left, cases) + check<64, 64, true>(sq, sk, top_left, cases);
      }
    }
  }
  bad += check_splits(cases);
  bad += check_shares(cases);
  bad += check_rotated_turns(cases);
  std::printf("checked %ld\n", cases);
  return bad == 0 ? 0 : 1;
}
