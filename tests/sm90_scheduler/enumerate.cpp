// Host-side walk of the SM90 persistent schedule (csrc/sm90/tile_scheduler.h): every CTA's tile sequence,
// exactly as the kernel's producer and consumers walk it, for one problem given on the command line.
//   enumerate <causal> <block_m> <batch> <heads_q> <heads_kv> <seqlen_q> <seqlen_k> <head_dim> <num_sms>
// Prints "tile <cta> <m_block> <head> <batch>" per visited tile, then "work <cta> <K/V blocks>" per CTA
// (the blocks its tiles visit, from common/block_range.h with 128-column blocks). Built with g++ by
// tests/test_sm90_scheduler.py; the device builtins the scheduler reads are plain globals here.
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>  // __host__ / __device__ for the host compiler

using std::min;
struct BuiltinIndex {
  unsigned x;
};
BuiltinIndex blockIdx, gridDim;

#include "common/block_range.h"
#include "sm90/tile_scheduler.h"

template <int kBlockM, bool kCausal>
int walk(flashcute::FwdParams const& p, int num_sms) {
  using Scheduler = flashcute::sm90::TileScheduler<kBlockM, kCausal>;
  auto const sched = Scheduler::make_params(p, 2);
  gridDim.x = unsigned(Scheduler::grid_size(sched, num_sms));
  for (unsigned cta = 0; cta < gridDim.x; ++cta) {
    blockIdx.x = cta;
    long work = 0;
    for (int i = Scheduler::first(sched); i < Scheduler::end(sched); i = Scheduler::next(i)) {
      flashcute::sm90::WorkTile const tile = Scheduler::get(sched, i);
      if (!tile.is_valid()) { continue; }
      std::printf("tile %u %d %d %d\n", cta, tile.m_block, tile.head, tile.batch);
      flashcute::SeqInfo const seq(p, tile.batch);
      work += std::max(0, flashcute::kv_block_range<kBlockM, 128, kCausal>(seq, tile.m_block).n_block_max);
    }
    std::printf("work %u %ld\n", cta, work);
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 10) {
    std::fprintf(stderr, "usage: %s causal block_m batch heads_q heads_kv seqlen_q seqlen_k head_dim num_sms\n",
                 argv[0]);
    return 2;
  }
  int const causal = std::atoi(argv[1]), block_m = std::atoi(argv[2]);
  flashcute::FwdParams p{};
  p.batch = std::atoi(argv[3]), p.heads_q = std::atoi(argv[4]), p.heads_kv = std::atoi(argv[5]);
  p.seqlen_q = std::atoi(argv[6]), p.seqlen_k = std::atoi(argv[7]), p.head_dim = std::atoi(argv[8]);
  p.causal = causal != 0;
  p.causal_offset = p.seqlen_k - p.seqlen_q;  // bottom-right diagonal, FlashAttention's
  int const num_sms = std::atoi(argv[9]);
  if (block_m == 128) { return causal ? walk<128, true>(p, num_sms) : walk<128, false>(p, num_sms); }
  if (block_m == 192) { return causal ? walk<192, true>(p, num_sms) : walk<192, false>(p, num_sms); }
  std::fprintf(stderr, "block_m must be 128 or 192\n");
  return 2;
}
