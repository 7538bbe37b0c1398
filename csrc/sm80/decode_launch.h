// Launch template of the SM80 decode kernels (decode_kernel.h): append (when new keys come), split-KV forward
// over a grid of shares of the sequences' K/V blocks, combine. Also the split count and the grid (decode_plan.h's
// rules), for callers that leave them to the kernel.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>

#include "common/launch.h"
#include "common/params.h"
#include "instantiations/kernel_table.h"
#include "sm80/decode_kernel.h"
#include "sm80/decode_plan.h"
#include "sm80/kernel_traits.h"

namespace flashcute::sm80 {

// One split-KV kernel: its tile (Traits), mask and cache layout, the shared memory it uses, and how many of it an
// SM holds with a given split count (decode_plan.h). The key-split tile also comes with two K/V stages, for launches
// whose CTAs run alone on their SMs with fast memory (decode_plan.h decode_two_stage_launch).
template <class Traits_, bool kCausal, KVLayout kLayout_>
struct SplitKVKernel {
  using Traits = Traits_;
  static constexpr KVLayout kLayout = kLayout_;
  static constexpr bool kKeySplitTile = Traits::kKeySlices > 1;
  static constexpr bool kHasTwoStageLaunch = decode_two_stage_launch(kLayout, kKeySplitTile, 1, true);
  template <bool kTwoStages>
  using Mainloop = DecodeMainloop<Traits, kCausal, kTwoStages>;
  template <bool kEqualShares, bool kTwoStages = false>
  static constexpr auto kernel = &split_kv_kernel<Traits, kCausal, kLayout, kEqualShares, kTwoStages>;
  // Equal shares across sequences on the key-split tile, where plans split into few long shares.
  static constexpr bool kHasEqualShares = kKeySplitTile;
  template <bool kTwoStages>
  static constexpr int kSmemBytes =
      Mainloop<kTwoStages>::kSmemBytes +
      (kLayout == KVLayout::kPagedTma ? PagedTmaKV<Traits, Mainloop<kTwoStages>::kKVStages>::kSmemBytes
       : kLayout == KVLayout::kPaged  ? PagedKV<Traits::kBlockN, Traits::kNThreads>::kSmemBytes
                                      : 0);
  template <bool kTwoStages>
  static constexpr bool kSmemRuleHolds =
      kSmemBytes<kTwoStages> == split_kv_kernel_smem_bytes(Traits::kSmemBytes,
                                                           Traits::kSmemKVElems * int(sizeof(typename Traits::Element)),
                                                           Traits::kBlockN, kLayout, kTwoStages);
  static_assert(kSmemRuleHolds<false> && (!kHasTwoStageLaunch || kSmemRuleHolds<true>),
                "decode_plan.h's shared-memory rule (mirrored by flashcute/explain/decode.py) must match the kernel");
  static_assert(!kHasTwoStageLaunch || Mainloop<false>::kKVStages == 1, "the two-stage launch must differ");
  // Q blocks of a (batch, K/V head)'s rows (a step's queries times the GQA group it packs); K/V blocks of the longest
  // sequence; CTAs per SM of the planned grid.
  static int m_blocks(DecodeParams const& params) { return decode_q_blocks(params, Traits::kBlockM); }
  static int n_blocks(DecodeParams const& params) { return (params.seqlen_k + Traits::kBlockN - 1) / Traits::kBlockN; }
  static int64_t split_ctas(DecodeParams const& params) { return int64_t(params.lanes) * params.shares_per_lane; }
  // The layout whose residency the kernel plans for on params' device (decode_plan.h residency_layout).
  static KVLayout residency(DecodeParams const& params) {
    return residency_layout(kLayout, kKeySplitTile, params.fast_memory);
  }
  static int ctas_per_sm(DecodeParams const& params) {
    KVShares const shares = decode_shares(params);
    return shares_ctas_per_sm(residency(params), shares.blocks, shares.ctas, Traits::kBlockN);
  }
  static bool two_stages(DecodeParams const& params) {
    return decode_two_stage_launch(kLayout, kKeySplitTile, ctas_per_sm(params), params.fast_memory);
  }

  // Whether this kernel copies the call's new K/V rows into the cache itself (decode_plan.h appends_in_split_kv).
  static bool appends_itself(DecodeParams const& params) {
    return params.k_new_ptr != nullptr &&
           appends_in_split_kv(kKeySplitTile, m_blocks(params), params.seqlen_new, params.seqlen_q,
                               split_ctas(params), ctas_per_sm(params), params.num_sms);
  }

  // The split count (where the caller leaves it, 0) and the grid, lanes x shares: one share per sequence without a
  // split; the caller's or the plan's split count, each sequence's blocks in that many shares; or, where the plan
  // splits into long shares, equal shares of all sequences' blocks in one wave (decode_plan.h plan_split_shares).
  static void plan(DecodeParams& params) {
    params.unit_rows = Traits::kBlockM;
    params.unit_blocks = n_blocks(params);
    int const lanes = decode_lanes(params);
    if (lanes == 0) {  // an append without queries: the append kernel only
      params.num_splits = 1, params.lanes = 0, params.shares_per_lane = 0, params.partial_slots = 0;
      params.equal_shares = false, params.append_in_split_kv = false;
      return;
    }
    bool const planned = params.num_splits <= 0;
    // A forced count past the blocks would leave shares without one: the combine reads every share of a sequence.
    params.num_splits = planned ? plan_num_splits(int64_t(lanes) * params.batch, n_blocks(params), Traits::kBlockN,
                                                  residency(params), params.num_sms)
                                : std::min(params.num_splits, n_blocks(params));
    // Waves of long unsplit CTAs run as one wave of equal shares instead: the plan splits (in two) for them.
    if (kHasEqualShares && planned && params.num_splits == 1 && n_blocks(params) > 1 &&
        plan_waves_as_shares(int64_t(lanes) * params.batch, lanes,
                             split_kv_ctas_per_sm(residency(params), n_blocks(params), Traits::kBlockN, 1),
                             params.num_sms)) {
      params.num_splits = 2;
    }
    int64_t const equal_shares = kHasEqualShares && planned && params.num_splits > 1
                                     ? plan_split_shares(int64_t(params.batch) * n_blocks(params), lanes,
                                                         Traits::kBlockN, residency(params), params.num_sms)
                                     : 0;
    params.equal_shares = equal_shares > 0;
    int64_t const shares = params.equal_shares ? equal_shares : int64_t(params.batch) * params.num_splits;
    params.lanes = lanes, params.shares_per_lane = shares;
    params.partial_slots = lanes * decode_slots_per_lane(params.batch, shares);
    params.append_in_split_kv = appends_itself(params);
  }

  static SplitKVArgs<Traits, kLayout> args(DecodeParams const& params) {
    if constexpr (kLayout == KVLayout::kPagedTma) {
      return PagedTmaCopies<Traits>::make(params);
    } else {
      return {};
    }
  }
};

// Whether this build's code of the TMA kernel for the device holds its TMA (compiled for sm_90 or later; code for an
// older target, run through its PTX, would not), asked once per kernel.
template <class SplitKV>
bool binary_has_tma() {
  static bool const has = [] {
    cudaFuncAttributes attributes{};
    return cudaFuncGetAttributes(&attributes, SplitKV::template kernel<false>) == cudaSuccess &&
           attributes.binaryVersion >= 90;
  }();
  return has;
}

// fn(SplitKVKernel<Traits, causal, layout>{}) for params' mask and cache layout.
template <class Traits, bool kCausal, class Fn>
void with_split_kv_kernel(DecodeParams const& params, Fn&& fn) {
  using PagedTma = SplitKVKernel<Traits, kCausal, KVLayout::kPagedTma>;
  if (params.block_table == nullptr) {
    fn(SplitKVKernel<Traits, kCausal, KVLayout::kContiguous>{});
  } else if (PagedTmaCopies<Traits>::can_run(params) && binary_has_tma<PagedTma>()) {
    fn(PagedTma{});
  } else {
    fn(SplitKVKernel<Traits, kCausal, KVLayout::kPaged>{});
  }
}
template <class Traits, class Fn>
void with_split_kv_kernel(DecodeParams const& params, Fn&& fn) {
  params.causal ? with_split_kv_kernel<Traits, true>(params, fn) : with_split_kv_kernel<Traits, false>(params, fn);
}

template <class SplitKV, bool kTwoStages>
void launch_split_kv_with(DecodeParams const& params, cudaStream_t stream) {
  using Traits = typename SplitKV::Traits;
  int const smem_bytes = split_kv_smem_bytes(params.smem_per_sm, SplitKV::template kSmemBytes<kTwoStages>,
                                             SplitKV::ctas_per_sm(params));
  if constexpr (SplitKV::kHasEqualShares) {
    if (params.equal_shares) {
      constexpr auto kernel = SplitKV::template kernel<true, kTwoStages>;
      allow_dynamic_smem<kernel>(smem_bytes);
      kernel<<<unsigned(SplitKV::split_ctas(params)), Traits::kNThreads, smem_bytes, stream>>>(params,
                                                                                               SplitKV::args(params));
      return;
    }
  }
  constexpr auto kernel = SplitKV::template kernel<false, kTwoStages>;
  allow_dynamic_smem<kernel>(smem_bytes);
  dim3 const grid(SplitKV::m_blocks(params) * params.num_splits, params.heads_q / params.pack_group, params.batch);
  kernel<<<grid, Traits::kNThreads, smem_bytes, stream>>>(params, SplitKV::args(params));
}

template <class SplitKV>
void launch_split_kv(DecodeParams const& params, cudaStream_t stream) {
  if constexpr (SplitKV::kHasTwoStageLaunch) {
    if (SplitKV::two_stages(params)) { return launch_split_kv_with<SplitKV, true>(params, stream); }
  }
  launch_split_kv_with<SplitKV, false>(params, stream);
}

// The registry's entry (common/registry.h) for one (dtype, head dim).
template <typename Element, int kHeadDim>
struct DecodeKernel {
  using Traits = typename DecodeTraits<Element, kHeadDim>::type;
  using KeySplitTraits = typename DecodeTraits<Element, kHeadDim>::KeySplit;

  // The rows of a (batch, K/V head): a decoding step's queries times the GQA group it packs.
  static int64_t rows(DecodeParams const& params) { return int64_t(params.seqlen_q) * params.pack_group; }

  // fn(SplitKVKernel<...>{}) of the kernel params run on: the key-split tile where the rows fit it.
  template <class Fn>
  static void with_kernel(DecodeParams const& params, Fn&& fn) {
    rows(params) <= KeySplitTraits::kBlockM ? with_split_kv_kernel<KeySplitTraits>(params, fn)
                                            : with_split_kv_kernel<Traits>(params, fn);
  }

  static void plan(DecodeParams& params) {
    with_kernel(params, [&](auto split_kv) { decltype(split_kv)::plan(params); });
  }

  static void launch(DecodeParams const& params, cudaStream_t stream) {
    auto append = [&] {
      dim3 const grid(append_vector_blocks<Element>(params) * params.seqlen_new, params.batch, 2);
      append_kv_kernel<Element><<<grid, kAppendThreads, 0, stream>>>(params);
    };
    bool const appending = params.k_new_ptr != nullptr && params.seqlen_new > 0;
    int64_t const out_rows = int64_t(params.batch) * params.heads_q * params.seqlen_q;
    if (out_rows == 0) {  // an append without queries
      if (appending) { append(); }
      return;
    }
    if (appending && !params.append_in_split_kv) { append(); }
    with_kernel(params, [&](auto split_kv) { launch_split_kv<decltype(split_kv)>(params, stream); });
    if (params.num_splits > 1) {  // one split wrote O and LSE itself
      dim3 const grid(unsigned((out_rows + kCombineWarps - 1) / kCombineWarps));
      dim3 const block(kCombineWarps * 32);
      // On Hopper on, the combine's launch and index arithmetic overlap the split-KV kernel's last wave.
      if (params.arch >= 90) {
        launch_after_prior_grid_starts(&combine_kernel<Element, kHeadDim>, grid, block, 0, stream, params);
      } else {
        combine_kernel<Element, kHeadDim><<<grid, block, 0, stream>>>(params);
      }
    }
  }

  // cp.async's 16-byte alignment is the op's own contract (flash_api.cpp checks it): any valid params run here.
  static bool can_run(DecodeParams const&, char*, int) { return true; }
};

}  // namespace flashcute::sm80
