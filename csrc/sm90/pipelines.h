// The CTA's three TMA pipelines (Q, K/V stages) and this thread's position in each. Built once per CTA before
// the role split; the producer starts from the producer start state (its first acquire passes), the consumers
// from the default one.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/pipeline/pipeline.hpp>

namespace flashcute::sm90 {

template <class Traits>
struct Pipelines {
  using PipelineQ = typename Traits::PipelineQ;
  using PipelineKV = typename Traits::PipelineKV;

  PipelineQ q;   // Q tile    full: TMA bytes   empty: consumers after their last S gemm
  PipelineKV k;  // K blocks  full: TMA bytes   empty: consumers after the gemm reading it
  PipelineKV v;  // V blocks  likewise
  typename PipelineQ::PipelineState q_state;
  typename PipelineKV::PipelineState k_state;
  typename PipelineKV::PipelineState v_state;

  static constexpr cute::Shape<cute::_1, cute::_1, cute::_1> kOneCta{};  // no cluster

  template <class SharedStorage>
  CUTLASS_DEVICE Pipelines(SharedStorage& shared, bool is_producer)
      : q(shared.pipeline_q, params<PipelineQ>(is_producer, Traits::kTmaBytesQ), kOneCta),
        k(shared.pipeline_k, params<PipelineKV>(is_producer, Traits::kTmaBytesKV), kOneCta),
        v(shared.pipeline_v, params<PipelineKV>(is_producer, Traits::kTmaBytesKV), kOneCta) {
    if (is_producer) {
      q_state = cutlass::make_producer_start_state<PipelineQ>();
      k_state = cutlass::make_producer_start_state<PipelineKV>();
      v_state = cutlass::make_producer_start_state<PipelineKV>();
    }
  }

 private:
  // Warp 0 initialises the barriers; every consumer thread arrives on the empty barriers.
  template <class Pipeline>
  CUTLASS_DEVICE static typename Pipeline::Params params(bool is_producer, uint32_t transaction_bytes) {
    typename Pipeline::Params p;
    p.transaction_bytes = transaction_bytes;
    p.role = is_producer ? Pipeline::ThreadCategory::Producer : Pipeline::ThreadCategory::Consumer;
    p.is_leader = threadIdx.x == 0;
    p.num_consumers = Traits::kNumMmaThreads;
    return p;
  }
};

}  // namespace flashcute::sm90
