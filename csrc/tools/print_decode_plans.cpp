// Answers questions about the split-KV decode plan from the kernels' own rules (sm80/decode_plan.h), one per line of
// standard input, one answer line each:
//
//   plan <layout> <num_sms> <block_n> <n_blocks> <ctas>   ->  <num_splits> <ctas_per_sm at that split count>
//   smem <layout> <traits_smem_bytes> <kv_buffer_bytes> <block_n> <two_stages 0|1>
//       ->  <kernel shared memory> <K/V stages of the tile's own pipeline>
//   launch <smem_per_sm> <kernel_smem_bytes> <ctas_per_sm>   ->  <shared memory the CTA launches with>
//   shares <layout> <num_sms> <block_n> <blocks> <lanes>   ->  <equal shares per lane, 0: none> <their ctas_per_sm>
//   waves <ctas> <lanes> <ctas_per_sm> <num_sms>   ->  1 where an unsplit grid runs as one wave of equal shares
//   append <key_split_tile 0|1> <m_blocks> <seqlen_new> <seqlen_q> <grid_ctas> <ctas_per_sm> <num_sms>
//       ->  1 where the split-KV kernel copies the new rows itself, else 0
//   memory <dram_gbps> <num_sms> <layout> <key_split_tile 0|1> <ctas_per_sm>
//       ->  <fast memory 0|1> <the residency layout: 0 contiguous, 1 paged, 2 paged-tma> <two-stage launch 0|1>
//
// <layout>: contiguous, paged or paged-tma. Plain C++ (g++ -std=c++17 -Icsrc, no CUDA): tests/test_decode_plan.py
// asks it what flashcute/explain/decode.py computes and compares.
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>

#include "sm80/decode_plan.h"

using flashcute::sm80::KVLayout;

namespace {

bool parse_layout(std::string const& name, KVLayout& layout) {
  if (name == "contiguous") {
    layout = KVLayout::kContiguous;
  } else if (name == "paged") {
    layout = KVLayout::kPaged;
  } else if (name == "paged-tma") {
    layout = KVLayout::kPagedTma;
  } else {
    return false;
  }
  return true;
}

}  // namespace

int main() {
  namespace plan = flashcute::sm80;
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string what, layout_name;
    in >> what;
    KVLayout layout{};
    if (what == "plan") {
      int num_sms, block_n, n_blocks;
      long long ctas;
      if (in >> layout_name >> num_sms >> block_n >> n_blocks >> ctas && parse_layout(layout_name, layout)) {
        int const splits = plan::plan_num_splits(ctas, n_blocks, block_n, layout, num_sms);
        printf("%d %d\n", splits, plan::split_kv_ctas_per_sm(layout, n_blocks, block_n, splits));
        continue;
      }
    } else if (what == "smem") {
      int traits_smem, kv_buffer, block_n, two_stages;
      if (in >> layout_name >> traits_smem >> kv_buffer >> block_n >> two_stages && parse_layout(layout_name, layout)) {
        printf("%d %d\n", plan::split_kv_kernel_smem_bytes(traits_smem, kv_buffer, block_n, layout, two_stages != 0),
               plan::decode_kv_stages(traits_smem, kv_buffer));
        continue;
      }
    } else if (what == "memory") {
      double dram_gbps;
      int num_sms, key_split, ctas_per_sm;
      if (in >> dram_gbps >> num_sms >> layout_name >> key_split >> ctas_per_sm && parse_layout(layout_name, layout)) {
        bool const fast = plan::decode_fast_memory(dram_gbps, num_sms);
        printf("%d %d %d\n", int(fast), int(plan::residency_layout(layout, key_split != 0, fast)),
               int(plan::decode_two_stage_launch(layout, key_split != 0, ctas_per_sm, fast)));
        continue;
      }
    } else if (what == "append") {
      int key_split, m_blocks, seqlen_new, seqlen_q, ctas_per_sm, num_sms;
      long long grid_ctas;
      if (in >> key_split >> m_blocks >> seqlen_new >> seqlen_q >> grid_ctas >> ctas_per_sm >> num_sms) {
        printf("%d\n", int(plan::appends_in_split_kv(key_split != 0, m_blocks, seqlen_new, seqlen_q, grid_ctas,
                                                      ctas_per_sm, num_sms)));
        continue;
      }
    } else if (what == "shares") {
      int num_sms, block_n, lanes;
      long long blocks;
      if (in >> layout_name >> num_sms >> block_n >> blocks >> lanes && parse_layout(layout_name, layout)) {
        long long const shares = plan::plan_split_shares(blocks, lanes, block_n, layout, num_sms);
        printf("%lld %d\n", shares, shares > 0 ? plan::shares_ctas_per_sm(layout, blocks, shares, block_n) : 0);
        continue;
      }
    } else if (what == "waves") {
      int lanes, ctas_per_sm, num_sms;
      long long ctas;
      if (in >> ctas >> lanes >> ctas_per_sm >> num_sms) {
        printf("%d\n", int(plan::plan_waves_as_shares(ctas, lanes, ctas_per_sm, num_sms)));
        continue;
      }
    } else if (what == "launch") {
      int smem_per_sm, kernel_smem, ctas_per_sm;
      if (in >> smem_per_sm >> kernel_smem >> ctas_per_sm) {
        printf("%d\n", plan::split_kv_smem_bytes(smem_per_sm, kernel_smem, ctas_per_sm));
        continue;
      }
    }
    fprintf(stderr, "print_decode_plans: cannot read %s\n", line.c_str());
    return 1;
  }
  return 0;
}
