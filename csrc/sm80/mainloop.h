// The SM80 mainloop of one Q block: Q stays in shared memory, K/V blocks are walked from the last visible one
// down to 0 (so the masked blocks come first and the rest run mask-free), and the online softmax rescales the O
// accumulator in registers. Copies overlap the tensor cores in one of three pipelines (KVPipeline):
//   kOneBuffer (the forward): one K buffer and one V buffer
//     wait K(n) | issue V(n) | S = Q.K(n)^T, mask | wait V(n) | issue K(n-1) | softmax | O += P.V(n)
//   kOneBufferKEarly (decode, bound by memory): K(n-1) is issued as soon as S(n) is done with K(n), before waiting
//   for V(n), so two blocks are in flight for a while; the first block's V is issued in the prologue
//     wait K(n) | issue V(n) | S = Q.K(n)^T, mask | issue K(n-1) | wait V(n) | softmax | O += P.V(n)
//   kTwoStages (decode where two stages of K and V fit): block n - 1 loads into one stage while block n is used
//     wait K(n), V(n) | S = Q.K(n)^T, mask | softmax | O += P.V(n) | issue K(n-2), V(n-2) into n's stage
// Loads are predicated cp.async; the gemms' shared-memory -> register (ldmatrix) copies run one k-slice ahead of
// the mma.sync. With key slices (Traits::kKeySlices > 1, the decode kernel's few-row tile) every thread copies,
// but each slice's warps compute over their own kBlockNSlice keys of each block, with their own softmax state: the
// caller merges the slices' partial results. Where Q rows and K/V blocks live in global memory is the caller's
// policy (gemm.h): a head's rows or grouped query heads; contiguous or paged K/V, whose page lookups for a block are
// fetched a step before its copies are issued and published to shared memory in between; or paged K/V by TMA
// (paged_tma.h), whose blocks after the first land on mbarriers that the policy's wait() waits for (after the first, that its
// cp.async writes are ordered before the TMA writes that reuse its buffers).
#pragma once

#include <cute/tensor.hpp>

#include "common/block_range.h"
#include "common/mask.h"
#include "common/seqlen.h"
#include "common/softmax.h"
#include "common/utils.h"
#include "sm80/gemm.h"

namespace flashcute::sm80 {

using namespace cute;

enum class KVPipeline { kOneBuffer, kOneBufferKEarly, kTwoStages };

template <class Traits, bool kCausal, KVPipeline kPipeline = KVPipeline::kOneBuffer>
struct Mainloop {
  using Element = typename Traits::Element;
  using TileShape_MNK = typename Traits::TileShape_MNK;
  using SliceTileShape_MNK = typename Traits::SliceTileShape_MNK;  // a key slice's gemms
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kBlockNSlice = Traits::kBlockNSlice;
  static constexpr int kSoftmaxParts = kCausal ? Traits::kSoftmaxPartsCausal : Traits::kSoftmaxPartsNonCausal;

  // The S accumulator ((2 cols, 2 rows), MMA_M, MMA_N) of m16n8k16 read as the A operand of the next
  // m16n8k16 ((2, 2, 2), MMA_M, MMA_N / 2): two neighbouring n8 tiles form one k16 slice, so P feeds
  // P.V from registers without a trip through shared memory.
  template <class AccLayout>
  __device__ static constexpr auto acc_as_operand_a(AccLayout const& acc) {
    auto l = logical_divide(acc, Shape<Underscore, Underscore, _2>{});
    return make_layout(make_layout(get<0>(l), get<2, 0>(l)), get<1>(l), get<2, 1>(l));
  }

  static constexpr int kKVStages = kPipeline == KVPipeline::kTwoStages ? 2 : 1;
  // kOneBufferKEarly: the prologue issues V(n) behind K(n), its buffer being free, so a CTA's first block does not
  // wait a round trip for its V.
  static constexpr bool kVInPrologue = kPipeline == KVPipeline::kOneBufferKEarly;
  static constexpr int kKVStageElems = 2 * Traits::kSmemKVElems;  // a K and a V buffer
  static constexpr int kSmemBytes = Traits::kSmemBytes + (kKVStages - 1) * kKVStageElems * sizeof(Element);

  // The shared memory the mainloop works in, from smem on: Q, then kKVStages x (a K and a V buffer); stage 0's.
  // -> (sQ, sK, sV)
  __device__ static auto smem_tensors(char* smem) {
    Tensor sQ = make_tensor(make_smem_ptr(reinterpret_cast<Element*>(smem)), typename Traits::SmemLayoutQ{});
    Tensor sK = make_tensor(sQ.data() + Int<Traits::kSmemQElems>{}, typename Traits::SmemLayoutKV{});
    Tensor sV = make_tensor(sK.data() + Int<Traits::kSmemKVElems>{}, typename Traits::SmemLayoutKV{});
    return cute::make_tuple(sQ, sK, sV);
  }

  // This thread's softmax state: one row per accumulator row it holds (of its key slice).
  using Softmax = OnlineSoftmax<decltype(size<0>(make_rowcol_layout(
                                    partition_fragment_C(typename Traits::TiledMma{},
                                                         select<0, 1>(SliceTileShape_MNK{})).layout())))::value,
                                kSoftmaxParts>;

  // The key slice a thread computes for, and its index among that slice's kMmaThreads threads.
  __device__ static int key_slice(int tidx) { return Traits::kKeySlices == 1 ? 0 : tidx / Traits::kMmaThreads; }
  __device__ static int mma_tidx(int tidx) { return Traits::kKeySlices == 1 ? tidx : tidx % Traits::kMmaThreads; }

  // gQ: (BLK_M, D) Q block as q reads it (gemm.h QueryRows or GroupedQueryRows); gK, gV: the K/V blocks as kv
  // reads them (gemm.h ContiguousKV: (BLK_N, D, n); PagedKV: (BLK_N, D), block 0; taken by value, as PagedKV holds
  // the page lookups it fetched); sQ, sK, sV: their shared-memory buffers. Accumulates the unnormalised O of the Q
  // block over the K/V blocks of range into acc_o (MMA, MMA_M, MMA_D) and its statistics into softmax.
  template <class TensorGQ, class Q, class TensorGKV, class KV, class TensorSQ, class TensorSKV, class TensorO,
            class Seq>
  __device__ __forceinline__ static void mma(TensorGQ const& gQ, Q const& q, TensorGKV const& gK, TensorGKV const& gV,
                                             KV kv, TensorSQ& sQ, TensorSKV& sK, TensorSKV& sV, TensorO& acc_o,
                                             Softmax& softmax, AttnParams const& params, Seq const& seq, int m_block,
                                             KVBlockRange const& range, int tidx) {
    Tensor sVt = make_tensor(sV.data(), typename Traits::SmemLayoutVt{});
    Tensor sVtNoSwizzle = make_tensor(sV.data().get(), typename Traits::SmemLayoutVtNoSwizzle{});

    // gmem -> smem partitions, with identity tensors giving each copy vector's (row, col) for predication.
    typename Traits::GmemTiledCopyQKV gmem_tiled_copy_QKV;
    auto gmem_thr_copy_QKV = gmem_tiled_copy_QKV.get_thread_slice(tidx);
    Tensor tQgQ = gmem_thr_copy_QKV.partition_S(gQ);  // (CPY, CPY_M, CPY_D)
    Tensor tQsQ = gmem_thr_copy_QKV.partition_D(sQ);
    Tensor tKgK = gmem_thr_copy_QKV.partition_S(gK);  // (CPY, CPY_N, CPY_D, n), or (CPY, CPY_N, CPY_D) paged
    Tensor tKsK = gmem_thr_copy_QKV.partition_D(sK);  // (CPY, CPY_N, CPY_D)
    Tensor tVgV = gmem_thr_copy_QKV.partition_S(gV);
    Tensor tVsV = gmem_thr_copy_QKV.partition_D(sV);
    Tensor tQcQ = gmem_thr_copy_QKV.partition_S(make_identity_tensor(select<0, 2>(TileShape_MNK{})));
    Tensor tKVcKV = gmem_thr_copy_QKV.partition_S(make_identity_tensor(select<1, 2>(TileShape_MNK{})));
    static_assert(decltype(size<1>(tKgK))::value == decltype(size<1>(tKsK))::value);

    // This thread's key slice of the K and V^T blocks (the blocks themselves, as they are, without key slices).
    int const slice = key_slice(tidx);
    auto slice_of = [&](auto const& tensor, auto tile, auto coord) {
      if constexpr (Traits::kKeySlices == 1) {
        return tensor;
      } else {
        return local_tile(tensor, tile, coord);
      }
    };
    Tensor sKslice = slice_of(sK, select<1, 2>(SliceTileShape_MNK{}), make_coord(slice, 0));    // (BLK_N_SLICE, D)
    Tensor sVtSlice = slice_of(sVt, select<2, 1>(SliceTileShape_MNK{}), make_coord(0, slice));  // (D, BLK_N_SLICE)
    Tensor sVtSliceNoSwizzle = slice_of(sVtNoSwizzle, select<2, 1>(SliceTileShape_MNK{}), make_coord(0, slice));

    // Tensor-core partitions: register fragments and their ldmatrix sources.
    int const mma_thread = mma_tidx(tidx);
    typename Traits::TiledMma tiled_mma;
    auto thr_mma = tiled_mma.get_thread_slice(mma_thread);
    Tensor tSrQ = thr_mma.partition_fragment_A(sQ);                  // (MMA, MMA_M, MMA_D)
    Tensor tSrK = thr_mma.partition_fragment_B(sKslice);             // (MMA, MMA_N, MMA_D)
    Tensor tOrVt = thr_mma.partition_fragment_B(sVtSliceNoSwizzle);  // (MMA, MMA_D, MMA_N)

    auto smem_tiled_copy_Q = make_tiled_copy_A(typename Traits::SmemCopyAtom{}, tiled_mma);
    auto smem_thr_copy_Q = smem_tiled_copy_Q.get_thread_slice(mma_thread);
    Tensor tSsQ = smem_thr_copy_Q.partition_S(sQ);
    auto smem_tiled_copy_K = make_tiled_copy_B(typename Traits::SmemCopyAtom{}, tiled_mma);
    auto smem_thr_copy_K = smem_tiled_copy_K.get_thread_slice(mma_thread);
    Tensor tSsK = smem_thr_copy_K.partition_S(sKslice);
    auto smem_tiled_copy_V = make_tiled_copy_B(typename Traits::SmemCopyAtomTransposed{}, tiled_mma);
    auto smem_thr_copy_V = smem_tiled_copy_V.get_thread_slice(mma_thread);
    Tensor tOsVt = smem_thr_copy_V.partition_S(sVtSlice);

    // (row, col) inside the slice's S block of each score this thread holds, for masking; the slice's first key.
    Tensor tScS = make_rowcol(thr_mma.partition_C(make_identity_tensor(select<0, 1>(SliceTileShape_MNK{}))));
    int const slice_col0 = slice * kBlockNSlice;
    int const q_row_end = seq.seqlen_q() * q.group() - m_block * kBlockM;  // valid rows of this Q block

    // kTwoStages: block n's K and V buffers and their partitions are stage n % 2's, offset from stage 0's.
    auto at_stage = [&](auto const& tensor, int n) {
      return make_tensor(tensor.data() + (kKVStages == 2 ? (n % 2) * kKVStageElems : 0), tensor.layout());
    };
    auto load_kv = [&](auto check_rows, int n, int row_end) {  // kTwoStages: block n's K and V, one group
      Tensor tKsK_n = at_stage(tKsK, n);
      Tensor tVsV_n = at_stage(tVsV, n);
      kv.template load<KVOperand::K, decltype(check_rows)::value>(gmem_tiled_copy_QKV, tKgK, n, tKsK_n, tKVcKV,
                                                                  row_end, params.head_dim);
      kv.template load<KVOperand::V, decltype(check_rows)::value>(gmem_tiled_copy_QKV, tVgV, n, tVsV_n, tKVcKV,
                                                                  row_end, params.head_dim);
      cp_async_fence();
    };

    // Prologue: Q and the last visible K block (the only one that can be ragged) in flight; with two stages its V
    // and the next block's K and V too.
    int n_block = range.n_block_max - 1;
    q.load(gmem_tiled_copy_QKV, tQgQ, tQsQ, tQcQ, q_row_end, params.head_dim);
    kv.prefetch_first(n_block, seq.seqlen_k() - n_block * kBlockN);
    if constexpr (kKVStages == 2) {
      load_kv(cute::true_type{}, n_block, seq.seqlen_k() - n_block * kBlockN);
      if (n_block > range.n_block_min) {
        kv.prefetch_first(n_block - 1, kBlockN);
        load_kv(cute::false_type{}, n_block - 1, kBlockN);
      }
    } else {
      kv.template load<KVOperand::K, true>(gmem_tiled_copy_QKV, tKgK, n_block, tKsK, tKVcKV,
                                           seq.seqlen_k() - n_block * kBlockN, params.head_dim);
      cp_async_fence();
      if constexpr (kVInPrologue) {
        kv.template load<KVOperand::V, true>(gmem_tiled_copy_QKV, tVgV, n_block, tVsV, tKVcKV,
                                             seq.seqlen_k() - n_block * kBlockN, params.head_dim);
        cp_async_fence();
      }
    }

    Tensor acc_o_rowcol = make_rowcol(acc_o);
    auto step = [&](auto first, auto masked) __attribute__((always_inline)) {
      constexpr bool kFirst = decltype(first)::value;
      constexpr bool kMasked = decltype(masked)::value;
      Tensor acc_s = partition_fragment_C(tiled_mma, select<0, 1>(SliceTileShape_MNK{}));  // (MMA, MMA_M, MMA_N)
      clear(acc_s);
      bool const has_next = n_block > range.n_block_min;
      [[maybe_unused]] bool const has_after_next = n_block - 1 > range.n_block_min;
      if constexpr (kKVStages == 2) {
        if (has_next) {
          cp_async_wait<1>();
        } else {
          cp_async_wait<0>();
        }
        kv.template wait<KVOperand::K, kFirst>(n_block);
        __syncthreads();  // K(n) and V(n) landed
        if (has_after_next) { kv.fetch(n_block - 2); }
      } else {
        constexpr bool kVIssued = kFirst && kVInPrologue;
        cp_async_wait<kVIssued ? 1 : 0>();
        kv.template wait<KVOperand::K, kFirst>(n_block);
        __syncthreads();  // K(n) landed; every warp is done with V(n+1)
        // Only the first (last visible) block can be ragged: the rows of every later block are all in range.
        if constexpr (!kVIssued) {
          kv.template load<KVOperand::V, kFirst>(gmem_tiled_copy_QKV, tVgV, n_block, tVsV, tKVcKV,
                                                 seq.seqlen_k() - n_block * kBlockN, params.head_dim);
          cp_async_fence();
        }
        if (has_next) { kv.fetch(n_block - 1); }
      }

      gemm_ss(acc_s, tSrQ, tSrK, tSsQ, at_stage(tSsK, n_block), tiled_mma, smem_tiled_copy_Q, smem_tiled_copy_K,
              smem_thr_copy_Q, smem_thr_copy_K);
      Tensor scores = make_rowcol(acc_s);
      if constexpr (kMasked) {
        apply_mask<kCausal>(scores, tScS, m_block * kBlockM, n_block * kBlockN + slice_col0, seq.seqlen_k(),
                            seq.causal_offset(), q.group());
      }

      if constexpr (kKVStages == 2) {
        if (has_after_next) { kv.publish(n_block - 2); }
      } else {
        auto load_next_k = [&]() {
          kv.template load<KVOperand::K, false>(gmem_tiled_copy_QKV, tKgK, n_block - 1, tKsK, tKVcKV, kBlockN,
                                                params.head_dim);
          cp_async_fence();
        };
        if (has_next) { kv.publish(n_block - 1); }
        if constexpr (kPipeline == KVPipeline::kOneBufferKEarly) {
          __syncthreads();  // every warp is done with K(n)
          if (has_next) {
            load_next_k();
            cp_async_wait<1>();
          } else {
            cp_async_wait<0>();
          }
          kv.template wait<KVOperand::V, kFirst>(n_block);
          __syncthreads();  // V(n) landed
        } else {
          cp_async_wait<0>();
          kv.template wait<KVOperand::V, kFirst>(n_block);
          __syncthreads();  // V(n) landed; every warp is done with K(n)
          if (has_next) { load_next_k(); }
        }
      }

      softmax.template rescale<kFirst, kMasked>(scores, acc_o_rowcol, params.softmax_scale_log2);

      Tensor rP = convert_type<Element>(acc_s);
      Tensor tOrP = make_tensor(rP.data(), acc_as_operand_a(rP.layout()));  // (MMA, MMA_M, MMA_N / 2)
      CUTE_STATIC_ASSERT_V(size<2>(tOrP) == size<2>(tOrVt));  // P's k-slices are V^T's: P.V needs no smem trip
      gemm_rs(acc_o, tOrP, tOrVt, at_stage(tOsVt, n_block), tiled_mma, smem_tiled_copy_V, smem_thr_copy_V);

      if constexpr (kKVStages == 2) {
        if (has_after_next) {
          __syncthreads();  // every warp is done with stage n % 2; block n - 2's row offsets are published
          load_kv(cute::false_type{}, n_block - 2, kBlockN);
        }
      }
    };

    // Blocks [n_block_unmasked, n_block_max) hold the ragged tail and the causal diagonal.
    if (n_block >= range.n_block_unmasked) {
      step(cute::true_type{}, cute::true_type{});
    } else {
      step(cute::true_type{}, cute::false_type{});
    }
    for (--n_block; n_block >= range.n_block_unmasked; --n_block) { step(cute::false_type{}, cute::true_type{}); }
    for (; n_block >= range.n_block_min; --n_block) { step(cute::false_type{}, cute::false_type{}); }
  }
};

}  // namespace flashcute::sm80
