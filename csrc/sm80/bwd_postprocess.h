// SM80 backward postprocess, one CTA per (row block, head, batch) (sm80/gmem.h row_block_of_cta): a block of a
// float32 accumulator (in the register order of the gemm that produced it, sm80/gmem.h accum_block) -> the
// gradient in 16-bit, staged in shared memory for coalesced stores. dQ always (its accumulator gathers every K/V
// block's share, scaled by the softmax scale here); dK and dV with GQA (their shares arrive scaled).
// After the SM90 backward with BwdParams::dq_done, a dQ block waits only for the K/V blocks adding into it: the
// blocks of heads the kernel has finished are converted on the SMs its last wave leaves idle.
#pragma once

#include <cute/tensor.hpp>

#include "common/block_range.h"
#include "common/params.h"
#include "common/seqlen.h"
#include "common/turnstile.h"
#include "common/utils.h"
#include "sm80/epilogue.h"
#include "sm80/gmem.h"

namespace flashcute::sm80 {

using namespace cute;

enum class Grad { kDQ, kDK, kDV };

// The gemm, block height and shared-memory layout a gradient's accumulator blocks were written with.
template <class Traits, Grad kGrad>
struct PostprocessOf {
  static constexpr bool kIsDQ = kGrad == Grad::kDQ;
  using TiledMma = cute::conditional_t<kIsDQ, typename Traits::TiledMmadQ, typename Traits::TiledMmadKV>;
  static constexpr int kBlockRows = kIsDQ ? Traits::kBlockM : Traits::kBlockN;
  using SmemLayout = cute::conditional_t<kIsDQ, typename Traits::SmemLayoutQdO, typename Traits::SmemLayoutKV>;
  static constexpr int kSmemBytes = cosize_v<SmemLayout> * sizeof(typename Traits::Element);
  static constexpr int kAccumGroupThreads = kIsDQ ? Traits::kdQAccumGroupThreads : Traits::kNThreads;
  static constexpr int kAccumVec = kIsDQ ? Traits::kdQAccumVec : 1;
  // dK^T / dV^T (SM90 head dims 192, 256): the accumulator is (head dim, rows), written into the staging tile
  // through its transposed view.
  static constexpr bool kTransposed = !kIsDQ && Traits::kdKVTransposed;
  using Rows = Int<kBlockRows>;
  using HeadDim = Int<Traits::kHeadDim>;
  using AccShape = cute::conditional_t<kTransposed, Shape<HeadDim, Rows>, Shape<Rows, HeadDim>>;
  using SmemLayoutAcc = cute::conditional_t<
      kTransposed, decltype(composition(SmemLayout{}, make_ordered_layout(Shape<HeadDim, Rows>{}, Step<_2, _1>{}))),
      SmemLayout>;
};

template <class Traits, Grad kGrad>
__global__ void __launch_bounds__(Traits::kNThreads) bwd_postprocess_kernel(__grid_constant__ BwdParams const params) {
  using Element = typename Traits::Element;
  using Of = PostprocessOf<Traits, kGrad>;
  constexpr int kBlockRows = Of::kBlockRows;
  static_assert(kBlockRows % (Traits::kNThreads / Traits::kGmemThreadsPerRow) == 0, "the copy's passes tile the block");
  extern __shared__ __align__(128) char smem[];
  auto const [bidb, block] = row_block_of_cta(Of::kIsDQ ? params.q_block_table : params.kv_block_table);
  int const bidh = blockIdx.y;  // a query head for dQ, a key/value head for dK and dV
  int const tidx = threadIdx.x;
  // Launched programmatically after the SM90 backward kernel: its accumulators complete. Per block with dq_done;
  // the grid's last CTA still waits for the whole kernel, so that this grid ends after it (what follows on the
  // stream, the dK / dV postprocess included, waits for this grid).
  bool const per_block = Of::kIsDQ && params.dq_done != nullptr;
  bool const last_cta = blockIdx.x == gridDim.x - 1 && blockIdx.y == gridDim.y - 1 && blockIdx.z == gridDim.z - 1;
  if (!per_block || last_cta) { wait_for_prior_grid(); }
  if (bidb >= params.batch) { return; }  // past the packed batch's blocks
  SeqInfo const seq(params, bidb);

  auto [mdO, mdQ, mdK, mdV] = make_grad_tensors<Element>(params, seq, bidh, bidh);
  float* const accum = kGrad == Grad::kDQ ? params.dq_accum_ptr
                       : kGrad == Grad::kDK ? params.dk_accum_ptr : params.dv_accum_ptr;
  int64_t const accum_rows = Of::kIsDQ ? seq.q_accum_head_row(bidh) : seq.k_accum_head_row(bidh);
  auto const& mOut = kGrad == Grad::kDQ ? mdQ : kGrad == Grad::kDK ? mdK : mdV;  // (rows, d)
  int const row_end = (Of::kIsDQ ? seq.seqlen_q() : seq.seqlen_k()) - block * kBlockRows;
  if (row_end <= 0) { return; }  // past a shorter sequence of a variable-length batch
  float const scale = kGrad == Grad::kDQ ? params.softmax_scale : 1.f;
  Tensor gOut = local_tile(mOut, Shape<Int<kBlockRows>, Int<Traits::kHeadDim>>{}, make_coord(block, 0));

  // The block back into the registers it came from (coalesced loads), scaled. A dQ block that no K/V block adds
  // into is zero; with dq_done its accumulator is not read then (the preprocess may still be zeroing it).
  typename Of::TiledMma tiled_mma;
  Tensor acc = partition_fragment_C(tiled_mma, typename Of::AccShape{});  // (MMA, MMA_M, MMA_D)
  int const adding = per_block ? kv_blocks_adding_dq<Traits::kBlockM, Traits::kBlockN>(params, seq, block) : 0;
  if (adding > 0) {
    int const* const done = params.dq_done + seq.q_block_semaphore(bidh, block, kBlockRows);
    if (tidx == 0) { spin_until_at_least(done, adding, /*backoff_ns=*/256); }
    __syncthreads();
  }
  if (!per_block || adding > 0) {
    Tensor tAgA = accum_block<kBlockRows, Traits::kHeadDim, Traits::kNThreads, Of::kAccumGroupThreads, Of::kAccumVec>(
        accum, accum_rows, block)(tidx, _);  // (elements)
    CUTE_STATIC_ASSERT_V(size(acc) == size(tAgA));
    Tensor tArA = make_fragment_like(tAgA);
    copy(AutoVectorizingCopyWithAssumedAlignment<128>{}, tAgA, tArA);  // 16-byte loads where runs allow
    CUTE_UNROLL
    for (int i = 0; i < size(acc); ++i) { acc(i) = tArA(i) * scale; }
  } else {
    clear(acc);
  }

  Tensor sOut = make_tensor(make_smem_ptr(reinterpret_cast<Element*>(smem)), typename Of::SmemLayout{});
  Tensor sOutAcc = make_tensor(sOut.data(), typename Of::SmemLayoutAcc{});
  store_through_smem<typename Traits::SmemCopyAtomStore, typename Traits::GmemTiledCopy>(
      tiled_mma, acc, sOutAcc, sOut, gOut, row_end, params.head_dim, tidx);
}

}  // namespace flashcute::sm80
