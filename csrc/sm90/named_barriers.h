// Named barriers of the SM90 forward and backward (ids passed to cutlass::arch::NamedBarrier, which offsets them past
// CUTLASS's reserved ids). Each user owns a range; the static_asserts keep the ranges apart and within the 16
// hardware barriers.
#pragma once

#include <cstdint>

#include <cutlass/arch/barrier.h>

namespace flashcute::sm90 {

constexpr int kMaxMmaWarpGroups = 3;

enum class NamedBarrierId : uint32_t {
  kEpilogue = 0,                                        // all consumer threads, before O overwrites V stages
  kTurnFirst = 1,                                       // + i: the ping-pong turn of consumer warpgroup i
  kEpilogueSlabFirst = kTurnFirst + kMaxMmaWarpGroups,  // + i: consumer warpgroup i around its O slab
  kEnd = kEpilogueSlabFirst + kMaxMmaWarpGroups         // one past the last id
};

static_assert(uint32_t(NamedBarrierId::kEpilogue) < uint32_t(NamedBarrierId::kTurnFirst));
static_assert(uint32_t(NamedBarrierId::kTurnFirst) + kMaxMmaWarpGroups <=
              uint32_t(NamedBarrierId::kEpilogueSlabFirst));
static_assert(uint32_t(NamedBarrierId::kEnd) + cutlass::arch::NamedBarrier::ReservedNamedBarrierCount <=
                  cutlass::arch::NamedBarrier::HardwareMaxNumNamedBarriers,
              "more named barriers than the hardware has");

// The backward's (sm90/bwd_kernel.h): the consumer warpgroups and, for dQ, the producer warpgroup's dQ warp.
enum class BwdNamedBarrierId : uint32_t {
  kdS = 0,        // all consumer threads: every warpgroup's dS is in shared memory, the dQ gemm may read it
  kEpilogue = 1,  // all consumer threads: around dK/dV staged over the K/V buffers, and the GQA turnstile
  kdQEmptyFirst = 2,                                 // + i: warpgroup i's dQ buffer has been read (its + the dQ warp)
  kdQFullFirst = kdQEmptyFirst + kMaxMmaWarpGroups,  // + i: warpgroup i's dQ is in shared memory
  kEnd = kdQFullFirst + kMaxMmaWarpGroups,
  // The queries-along-M plan (bwd_mainloop_queries_along_m.h) has no dQ buffers, so it takes kdQEmptyFirst's id
  // (the hardware's 16 are all assigned): all consumer threads, every gemm has read the block's Q and dO stages.
  kStagesRead = kdQEmptyFirst
};

static_assert(uint32_t(BwdNamedBarrierId::kEnd) + cutlass::arch::NamedBarrier::ReservedNamedBarrierCount <=
                  cutlass::arch::NamedBarrier::HardwareMaxNumNamedBarriers,
              "more named barriers than the hardware has");

}  // namespace flashcute::sm90
