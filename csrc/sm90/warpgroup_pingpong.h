// Ping-pong of the consumer warpgroups: their wgmma issues take turns in a ring (wg 0, 1, .., 0, ...), so
// while one warpgroup's gemms run on the tensor cores the others do their softmax.
//
// Named barrier `turn(i)` (256 threads) completes when warpgroup i waits on it and warpgroup i-1 has
// passed the turn. The last warpgroup passes a first turn at start; the turn it passes after its last
// gemms is absorbed by warpgroup 0 at finish, so no barrier is left half-arrived when the CTA exits.
#pragma once

#include <cutlass/arch/barrier.h>

#include "sm90/named_barriers.h"

namespace flashcute::sm90 {

template <int kNumMmaWarpGroups>
struct WarpGroupPingPong {
  static_assert(kNumMmaWarpGroups <= kMaxMmaWarpGroups);
  static constexpr uint32_t kThreads = 2 * cutlass::NumThreadsPerWarpGroup;

  CUTLASS_DEVICE static uint32_t turn(int wg) { return uint32_t(NamedBarrierId::kTurnFirst) + wg; }

  CUTLASS_DEVICE static void start(int wg) {
    if (wg == kNumMmaWarpGroups - 1) { cutlass::arch::NamedBarrier::arrive(kThreads, turn(0)); }
  }
  CUTLASS_DEVICE static void wait_turn(int wg) { cutlass::arch::NamedBarrier::sync(kThreads, turn(wg)); }
  CUTLASS_DEVICE static void pass_turn(int wg) {
    cutlass::arch::NamedBarrier::arrive(kThreads, turn(wg + 1 == kNumMmaWarpGroups ? 0 : wg + 1));
  }
  CUTLASS_DEVICE static void finish(int wg) {
    if (wg == 0) { wait_turn(0); }
  }
};

}  // namespace flashcute::sm90
