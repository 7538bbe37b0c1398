// Launch template of the SM80 decode kernels (decode_kernel.h): append (when new keys come), split-KV forward
// over a grid (Q blocks x splits, heads, batch), combine. Also the split count, for callers that leave it to the
// kernel.
#pragma once

#include <cuda_runtime.h>

#include <cmath>

#include "common/launch.h"
#include "common/params.h"
#include "instantiations/kernel_table.h"
#include "sm80/decode_kernel.h"
#include "sm80/kernel_traits.h"

namespace flashcute::sm80 {

constexpr int kMaxSplits = 128;

// The split count for `ctas` CTAs over n_blocks K/V blocks, ctas_per_sm of them resident per SM: none where the
// CTAs fill most of one wave of the GPU; otherwise the fewest splits whose last wave is nearly as full as the best
// count's (FlashAttention-2's rule, with a stricter bar: decoding is bound by memory, and an SM without a CTA reads
// nothing), among counts that change the blocks per split.
inline int choose_num_splits(int64_t ctas, int n_blocks, int num_sms, int ctas_per_sm) {
  int64_t const slots = int64_t(ctas_per_sm) * num_sms;
  if (ctas <= 0 || n_blocks <= 1 || ctas * 5 >= slots * 4) { return 1; }
  int const max_splits = int(std::min<int64_t>({kMaxSplits, slots, n_blocks}));
  auto blocks_per_split = [&](int s) { return (n_blocks + s - 1) / s; };
  auto distinct = [&](int s) { return s == 1 || blocks_per_split(s) != blocks_per_split(s - 1); };
  auto wave_fill = [&](int s) {
    double const waves = double(ctas * s) / double(slots);
    return waves / std::ceil(waves);
  };
  double best = 0;
  for (int s = 1; s <= max_splits; ++s) {
    if (distinct(s)) { best = std::max(best, wave_fill(s)); }
  }
  for (int s = 1; s <= max_splits; ++s) {
    if (distinct(s) && wave_fill(s) >= 0.95 * best) { return s; }
  }
  return 1;
}

template <class Traits, bool kCausal, bool kPaged>
void launch_split_kv(DecodeParams const& params, cudaStream_t stream) {
  constexpr auto kernel = &split_kv_kernel<Traits, kCausal, kPaged>;
  using Paged = PagedKV<Traits::kBlockN, Traits::kNThreads>;
  constexpr int kSmemBytes = DecodeMainloop<Traits, kCausal>::kSmemBytes + (kPaged ? Paged::kSmemBytes : 0);
  allow_dynamic_smem<kernel, kSmemBytes>();
  int const m_blocks = (params.seqlen_q * params.pack_group + Traits::kBlockM - 1) / Traits::kBlockM;
  dim3 const grid(m_blocks * params.num_splits, params.heads_q / params.pack_group, params.batch);
  kernel<<<grid, Traits::kNThreads, kSmemBytes, stream>>>(params);
}

// The registry's entry (common/registry.h) for one (dtype, head dim).
template <typename Element, int kHeadDim>
struct DecodeKernel {
  using Traits = typename DecodeTraits<Element, kHeadDim>::type;

  static void plan(DecodeParams& params) {
    if (params.num_splits > 0) { return; }
    int64_t const m_blocks = (int64_t(params.seqlen_q) * params.pack_group + Traits::kBlockM - 1) / Traits::kBlockM;
    int const n_blocks = (params.seqlen_k + Traits::kBlockN - 1) / Traits::kBlockN;
    int64_t const ctas = m_blocks * (params.heads_q / params.pack_group) * params.batch;
    params.num_splits = choose_num_splits(ctas, n_blocks, params.num_sms, kDecodeCtasPerSm);
  }

  static void launch(DecodeParams const& params, cudaStream_t stream) {
    if (params.k_new_ptr != nullptr && params.seqlen_new > 0) {
      append_kv_kernel<Element><<<dim3(params.seqlen_new, params.batch), 128, 0, stream>>>(params);
    }
    int64_t const rows = int64_t(params.batch) * params.heads_q * params.seqlen_q;
    if (rows == 0) { return; }  // an append without queries
    bool const paged = params.block_table != nullptr;
    if (params.causal) {
      paged ? launch_split_kv<Traits, true, true>(params, stream)
            : launch_split_kv<Traits, true, false>(params, stream);
    } else {
      paged ? launch_split_kv<Traits, false, true>(params, stream)
            : launch_split_kv<Traits, false, false>(params, stream);
    }
    combine_kernel<Element, kHeadDim>
        <<<unsigned((rows + kCombineWarps - 1) / kCombineWarps), kCombineWarps * 32, 0, stream>>>(params);
  }

  // cp.async's 16-byte alignment is the op's own contract (flash_api.cpp checks it): any valid params run here.
  static bool can_run(DecodeParams const&, char*, int) { return true; }
};

}  // namespace flashcute::sm80
