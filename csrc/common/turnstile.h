// Deterministic accumulation across CTAs: several CTAs add float32 partial sums into one buffer (the backward's
// dQ, and dK/dV with GQA); float addition is not associative, so with atomics in arrival order the result can
// change from run to run. A turnstile per buffer region makes the CTAs add in a fixed order: CTA `turn` waits
// until the counter reaches `turn`, adds, then passes the turn on. The CTAs that wait on one another are
// launched in turn order (they are ordered by blockIdx), so the one being waited for is already resident.
#pragma once

namespace flashcute {

// Call with every thread of the CTA; returns once the counter has reached `turn`.
__device__ __forceinline__ void turnstile_wait(int const* counter, int turn) {
  if (threadIdx.x == 0) {
    int seen;
    do {
      asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(seen) : "l"(counter) : "memory");
    } while (seen != turn);
  }
  __syncthreads();
}

// Call with every thread of the CTA after its additions: makes them visible, then lets the next CTA in.
__device__ __forceinline__ void turnstile_pass(int* counter) {
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) { atomicAdd(counter, 1); }
}

}  // namespace flashcute
