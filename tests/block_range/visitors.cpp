// Host-side check of the backward's block ranges (csrc/common/block_range.h): for every Q block, the K/V blocks
// whose q_block_range contains it are exactly [0, kv_blocks_visiting) (the prefix the deterministic modes order
// their dQ additions by), the decode kernel's splits of a K/V range (check_splits), and the deterministic
// non-causal turns of rotated walks (check_rotated_turns). Built with g++ by tests/test_block_range.py; prints
// one line per mismatch, then "checked N".
#include <algorithm>
#include <cstdio>

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

// split_kv_block_range: the splits of a Q block's K/V blocks cover [0, n_block_max) once, in order, and each
// split masks exactly the blocks the whole range masks.
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
  ++cases;
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
  bad += check_rotated_turns(cases);
  std::printf("checked %ld\n", cases);
  return bad == 0 ? 0 : 1;
}
