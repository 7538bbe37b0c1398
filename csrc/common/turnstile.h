// Deterministic accumulation across CTAs: several CTAs add float32 partial sums into one buffer (the backward's
// dQ, and dK/dV with GQA); float addition is not associative, so with atomics in arrival order the result can
// change from run to run. A turnstile per buffer region makes the CTAs add in a fixed order: CTA `turn` waits
// until the counter reaches `turn` (spin_until_at_least), adds, then passes the turn on. The CTAs that wait on one
// another are launched in turn order (they are ordered by blockIdx), so the one being waited for is already
// resident. The counter counts the CTAs that have passed, so it never goes past a waiting CTA's turn: waiting for
// at least the turn is waiting for it. Not for exactly it: overlapping sequences of malformed cu_seqlens
// (decreasing, which no sync checks) can share a region with turns 0, 1, ... each, and a count that went past one
// of them would never come back to it: the call would not finish.
// spin_until_at_least and release_add are also the counter operations of the SM90 backward's dQ claims
// (sm90/bwd_mainloop.h), which order no additions, only the zeroing before them, and of its completed dQ blocks
// (BwdParams::dq_done), which the postprocess waits for.
#pragma once

namespace flashcute {

// One thread: returns once the counter has reached at least `value`; between reads it sleeps about backoff_ns
// nanoseconds (0: reads back to back, for a wait expected to be short).
__device__ __forceinline__ void spin_until_at_least(int const* counter, int value, unsigned backoff_ns = 0) {
  int seen;
  while (true) {
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(seen) : "l"(counter) : "memory");
    if (seen >= value) { return; }
    if (backoff_ns > 0) { __nanosleep(backoff_ns); }
  }
}

// Adds `value` to the counter once this thread's earlier writes are visible at the GPU scope, without waiting.
__device__ __forceinline__ void release_add(int* counter, int value) {
  asm volatile("red.release.gpu.global.add.s32 [%0], %1;" :: "l"(counter), "r"(value) : "memory");
}

// One thread, once the additions it stands for are complete and visible to it: lets the next CTA in.
__device__ __forceinline__ void turnstile_release(int* counter) {
  __threadfence();
  atomicAdd(counter, 1);
}

// Every thread of a group that `sync` synchronises (the CTA by default); `leader` is one of them.
template <class Sync>
__device__ __forceinline__ void turnstile_wait(int const* counter, int turn, bool leader, Sync const& sync) {
  if (leader) { spin_until_at_least(counter, turn); }
  sync();
}
// After the group's additions: makes them visible, then lets the next CTA in.
template <class Sync>
__device__ __forceinline__ void turnstile_pass(int* counter, bool leader, Sync const& sync) {
  __threadfence();
  sync();
  if (leader) { atomicAdd(counter, 1); }
}

__device__ __forceinline__ void turnstile_wait(int const* counter, int turn) {
  turnstile_wait(counter, turn, threadIdx.x == 0, [] { __syncthreads(); });
}
__device__ __forceinline__ void turnstile_pass(int* counter) {
  turnstile_pass(counter, threadIdx.x == 0, [] { __syncthreads(); });
}

}  // namespace flashcute
