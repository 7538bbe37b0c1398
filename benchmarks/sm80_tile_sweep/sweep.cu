// Times SM80 tile configurations of one head dim against each other on the FlashAttention-paper shapes
// (batch * seqlen = 16k, hidden 2048, bf16), to choose sm80::DefaultTraits by measurement. One translation unit
// per configuration (VARIANT_* macros, see build.sh), linked into one program.
#include <cstdio>
#include <vector>

#include "sm80/launch.h"

using Element = cutlass::bfloat16_t;

#ifdef VARIANT_BLOCK_M
using Traits = flashcute::sm80::KernelTraits<Element, VARIANT_HEAD_DIM, VARIANT_BLOCK_M, VARIANT_BLOCK_N, VARIANT_WARPS>;
#define NAME_(d, m, n, w) variant_d##d##_m##m##_n##n##_w##w
#define NAME(d, m, n, w) NAME_(d, m, n, w)
void NAME(VARIANT_HEAD_DIM, VARIANT_BLOCK_M, VARIANT_BLOCK_N, VARIANT_WARPS)(flashcute::FwdParams const& p, cudaStream_t s) {
  if (p.causal) flashcute::sm80::launch<Traits, true>(p, s); else flashcute::sm80::launch<Traits, false>(p, s);
}
#else
struct Variant { char const* name; int head_dim; void (*run)(flashcute::FwdParams const&, cudaStream_t); };
#define DECLARE(d, m, n, w) void variant_d##d##_m##m##_n##n##_w##w(flashcute::FwdParams const&, cudaStream_t);
#include "variants.inc"
#undef DECLARE
#define DECLARE(d, m, n, w) {#d " " #m "x" #n " " #w "w", d, variant_d##d##_m##m##_n##n##_w##w},
static Variant const kVariants[] = {
#include "variants.inc"
};

__global__ void fill(Element* x, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    unsigned h = unsigned(i) * 2654435761u ^ seed;
    h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15;
    x[i] = Element(float(h & 0xffff) / 32768.f - 1.f);
  }
}

int main() {
  int const seqlens[] = {1024, 2048, 4096, 16384};
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  std::printf("%-22s %6s %6s %9s\n", "variant", "causal", "seqlen", "TFLOP/s");
  for (auto const& variant : kVariants) {
    for (int causal = 0; causal < 2; ++causal) {
      for (int seqlen : seqlens) {
        int const d = variant.head_dim, batch = 16384 / seqlen, heads = 2048 / d;
        size_t const n = size_t(batch) * seqlen * heads * d;
        Element *q, *k, *v, *o;
        float* lse;
        cudaMalloc(&q, n * 2), cudaMalloc(&k, n * 2), cudaMalloc(&v, n * 2), cudaMalloc(&o, n * 2);
        cudaMalloc(&lse, size_t(batch) * heads * seqlen * 4);
        fill<<<1024, 256>>>(q, n, 1), fill<<<1024, 256>>>(k, n, 2), fill<<<1024, 256>>>(v, n, 3);
        flashcute::FwdParams p{};
        p.q_ptr = q, p.k_ptr = k, p.v_ptr = v, p.o_ptr = o, p.lse_ptr = lse;
        int64_t const row = int64_t(heads) * d, bat = row * seqlen;
        p.q_batch_stride = p.k_batch_stride = p.v_batch_stride = p.o_batch_stride = bat;
        p.q_row_stride = p.k_row_stride = p.v_row_stride = p.o_row_stride = row;
        p.q_head_stride = p.k_head_stride = p.v_head_stride = p.o_head_stride = d;
        p.batch = batch, p.heads_q = p.heads_kv = heads, p.seqlen_q = p.seqlen_k = seqlen, p.head_dim = d;
        p.softmax_scale = 1.f / sqrtf(float(d)), p.softmax_scale_log2 = p.softmax_scale * 1.4426950408889634f;
        p.causal = causal, p.causal_top_left = true, p.causal_offset = 0, p.num_sms = 132;
        for (int i = 0; i < 5; ++i) variant.run(p, 0);
        int const iters = 30;
        cudaEventRecord(start);
        for (int i = 0; i < iters; ++i) variant.run(p, 0);
        cudaEventRecord(stop);
        cudaEventSynchronize(stop);
        float ms = 0;
        cudaEventElapsedTime(&ms, start, stop);
        double const flops = 4.0 * batch * heads * double(seqlen) * seqlen * d / (causal ? 2 : 1);
        cudaError_t err = cudaGetLastError();
        std::printf("%-22s %6d %6d %9.1f %s\n", variant.name, causal, seqlen, flops / (ms / iters * 1e-3) / 1e12,
                    err == cudaSuccess ? "" : cudaGetErrorString(err));
        cudaFree(q), cudaFree(k), cudaFree(v), cudaFree(o), cudaFree(lse);
      }
    }
  }
  return 0;
}
#endif
