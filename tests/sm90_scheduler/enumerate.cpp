// Host-side walk of the SM90 persistent schedule (csrc/sm90/tile_scheduler.h): every CTA's tile sequence,
// exactly as the kernel's producer and consumers walk it, for one problem given on the command line.
//   enumerate <causal> <block_m> <batch> <heads_q> <heads_kv> <seqlen_q> <seqlen_k> <head_dim> <num_sms>
//             [<lengths_q> x batch <lengths_k> x batch]
// With lengths, the batch is packed (varlen; seqlen_q / seqlen_k are then the maximum lengths) and walked with
// the schedule the kernel's prepass (varlen_schedule_kernel) would write: the sequences ordered by K/V blocks,
// most first, and their units counted in that order (computed here on the host).
// (And the backward's varlen grids: see sequence_blocks below.)
// Prints "tile <cta> <m_block> <head> <batch>" per visited tile, then "work <cta> <K/V blocks>" per CTA
// (the blocks its tiles visit, from common/block_range.h with 128-column blocks). Built with g++ by
// tests/test_sm90_scheduler.py; the device builtins the scheduler reads are plain globals here.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <cuda_runtime.h>  // __host__ / __device__ for the host compiler

using std::max;
using std::min;
struct BuiltinIndex {
  unsigned x;
};
BuiltinIndex blockIdx, gridDim;

#include "common/block_range.h"
#include "sm90/tile_scheduler.h"

template <int kBlockM, bool kCausal, bool kVarlen>
int walk(flashcute::FwdParams const& p, int num_sms) {
  using Scheduler = flashcute::sm90::TileScheduler<kBlockM, kCausal, kVarlen>;
  auto const sched = Scheduler::make_params(p, 2);
  gridDim.x = unsigned(Scheduler::grid_size(sched, num_sms));
  for (unsigned cta = 0; cta < gridDim.x; ++cta) {
    blockIdx.x = cta;
    long work = 0;
    int cursor = 0;
    int const end = Scheduler::end(sched, p);
    for (int i = Scheduler::first(sched); i < end; i = Scheduler::next(i)) {
      flashcute::sm90::WorkTile const tile = Scheduler::get(sched, p, i, cursor);
      if (!tile.is_valid()) { continue; }
      std::printf("tile %u %d %d %d\n", cta, tile.m_block, tile.head, tile.batch);
      flashcute::SeqInfo const seq(p, tile.batch);
      work += std::max(0, flashcute::kv_block_range<kBlockM, 128, kCausal>(seq, tile.m_block).n_block_max);
    }
    std::printf("work %u %ld\n", cta, work);
  }
  return 0;
}

// What varlen_schedule_kernel writes: (order, first_unit), the sequences by K/V blocks of kBlockN keys, most
// first (any order among equals: the kernel's is not stable either).
template <int kBlockM, bool kCausal>
std::vector<int> varlen_schedule(flashcute::FwdParams const& p, int block_n) {
  constexpr int kTilesPerUnit = kCausal ? 2 : 1;
  std::vector<int> schedule(2 * p.batch + 1);
  int* order = schedule.data();
  int* first_unit = order + p.batch;
  auto n_blocks = [&](int b) { return (flashcute::SeqInfo(p, b).seqlen_k() + block_n - 1) / block_n; };
  for (int b = 0; b < p.batch; ++b) { order[b] = b; }
  std::stable_sort(order, order + p.batch, [&](int a, int b) { return n_blocks(a) > n_blocks(b); });
  first_unit[0] = 0;
  for (int r = 0; r < p.batch; ++r) {
    int const num_m_blocks = (flashcute::SeqInfo(p, order[r]).seqlen_q() + kBlockM - 1) / kBlockM;
    first_unit[r + 1] = first_unit[r] + (num_m_blocks + kTilesPerUnit - 1) / kTilesPerUnit * p.heads_q;
  }
  return schedule;
}

template <int kBlockM, bool kCausal>
int walk_either(flashcute::FwdParams& p, int num_sms) {
  if (p.cu_seqlens_q == nullptr) { return walk<kBlockM, kCausal, false>(p, num_sms); }
  std::vector<int> schedule = varlen_schedule<kBlockM, kCausal>(p, 128);
  p.varlen_schedule = schedule.data();
  return walk<kBlockM, kCausal, true>(p, num_sms);
}

// enumerate blocks <block_rows> <lengths...>: the SM90 backward's varlen tables (bwd_launch.h; what
// varlen_bwd_blocks_kernel writes for the pre- and postprocess): for each CTA x, "cta <x> <sequence> <block>", or
// "cta <x> none" past the sequences' blocks.
// enumerate kernel <block_n> <heads> <highest_first> <lengths...>: the kernel's 1-D grid over them (bwd_kernel.h,
// sequence_head_block_of): for each CTA, "cta <c> <sequence> <head> <block>", or "cta <c> none".
int sequence_blocks(int argc, char** argv) {
  bool const kernel_grid = std::string(argv[1]) == "kernel";
  int arg = 2;
  int const block_rows = std::atoi(argv[arg++]);
  int const heads = kernel_grid ? std::atoi(argv[arg++]) : 1;
  bool const highest_first = kernel_grid && std::atoi(argv[arg++]) != 0;
  int const batch = argc - arg;
  std::vector<int> first(batch + 1);
  int total = 0;
  for (int b = 0; b < batch; ++b) {
    int const length = std::atoi(argv[arg + b]);
    total += length;
    first[b + 1] = first[b] + (length + block_rows - 1) / block_rows;  // number_sequence_blocks's first
  }
  int const grid = total / block_rows + batch;
  std::vector<int> table(2 * grid);  // number_sequence_blocks's table
  for (int x = 0; x < grid; ++x) {
    flashcute::SequenceBlock const entry = flashcute::sequence_block_of(first.data(), batch, grid, x);
    table[2 * x] = entry.sequence, table[2 * x + 1] = entry.block;
    if (kernel_grid) { continue; }
    if (entry.sequence >= batch) {
      std::printf("cta %d none\n", x);
    } else {
      std::printf("cta %d %d %d\n", x, entry.sequence, entry.block);
    }
  }
  for (int c = 0; kernel_grid && c < grid * heads; ++c) {
    flashcute::SequenceHeadBlock const cta =
        flashcute::sequence_head_block_of(table.data(), first.data(), batch, heads, c, highest_first);
    if (cta.sequence >= batch) {
      std::printf("cta %d none\n", c);
    } else {
      std::printf("cta %d %d %d %d\n", c, cta.sequence, cta.head, cta.block);
    }
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc >= 3 && (std::string(argv[1]) == "blocks" || std::string(argv[1]) == "kernel")) {
    return sequence_blocks(argc, argv);
  }
  if (argc < 10) {
    std::fprintf(stderr, "usage: %s causal block_m batch heads_q heads_kv seqlen_q seqlen_k head_dim num_sms "
                 "[lengths_q... lengths_k...]\n", argv[0]);
    return 2;
  }
  int const causal = std::atoi(argv[1]), block_m = std::atoi(argv[2]);
  flashcute::FwdParams p{};
  p.batch = std::atoi(argv[3]), p.heads_q = std::atoi(argv[4]), p.heads_kv = std::atoi(argv[5]);
  p.seqlen_q = std::atoi(argv[6]), p.seqlen_k = std::atoi(argv[7]), p.head_dim = std::atoi(argv[8]);
  p.causal = causal != 0;
  p.causal_offset = p.seqlen_k - p.seqlen_q;  // bottom-right diagonal, FlashAttention's
  int const num_sms = std::atoi(argv[9]);
  std::vector<int> cu_q(p.batch + 1), cu_k(p.batch + 1);
  if (argc == 10 + 2 * p.batch && p.batch > 0) {
    for (int b = 0; b < p.batch; ++b) {
      cu_q[b + 1] = cu_q[b] + std::atoi(argv[10 + b]);
      cu_k[b + 1] = cu_k[b] + std::atoi(argv[10 + p.batch + b]);
    }
    p.cu_seqlens_q = cu_q.data(), p.cu_seqlens_k = cu_k.data();
    p.total_q = cu_q[p.batch], p.total_k = cu_k[p.batch];
  } else if (argc != 10) {
    std::fprintf(stderr, "give batch lengths of q and of k, or none\n");
    return 2;
  }
  if (block_m == 128) { return causal ? walk_either<128, true>(p, num_sms) : walk_either<128, false>(p, num_sms); }
  if (block_m == 192) { return causal ? walk_either<192, true>(p, num_sms) : walk_either<192, false>(p, num_sms); }
  std::fprintf(stderr, "block_m must be 128 or 192\n");
  return 2;
}
