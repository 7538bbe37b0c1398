// Compile-time plan of the SM90 backward for one (element type, head dim): tile shape, the three warpgroup-wide
// TiledMMAs, GMMA-swizzled shared-memory layouts (and the transposed views the gemms read), pipelines and the
// shared-memory budget.
//
// Two plans (kernel_table.py Sm90BwdTile keys_along_m; BwdKernelTraitsFor picks by head dim):
// - BwdKernelTraits (head dims <= 128): keys run along the wgmma M mode: S^T = K.Q^T and dP^T = V.dO^T leave P^T
//   and dS^T in the accumulators of the warpgroup that owns those 64 keys, which are then, converted to 16 bits,
//   the register A operands of dV += P^T.dO and dK += dS^T.Q. Only dQ = dS.K needs dS the other way round: it
//   goes through shared memory.
// - BwdKernelTraitsQueriesAlongM (head dims 192, 256): 128 keys' dK and dV alone would take 2 x 64 x 256 / 128
//   registers per consumer thread at head dim 256. Queries run along M: S = Q.K^T and dP = dO.V^T with the 64
//   keys split over the warpgroups; P and dS go through shared memory, where they are the B operands of
//   dV^T += dO^T.P and dK^T += Q^T.dS (head dim along M) and dS the A operand of dQ = dS.K.
#pragma once

#include <cute/tensor.hpp>
#include <cute/atom/mma_atom.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/pipeline/pipeline.hpp>

#include "common/params.h"
#include "instantiations/kernel_table.h"
#include "sm80/copy_traits.h"
#include "sm90/kernel_traits.h"

namespace flashcute::sm90 {

using namespace cute;

// The preprocess and postprocess (sm80/bwd_preprocess.h, sm80/bwd_postprocess.h) are arch-neutral: they read this
// view of an SM90 backward (its block heights, its consumer threads and the TiledMMAs whose register order the
// float32 accumulators hold) and do their copies with SM80 instructions.
template <class Traits>
struct BwdPrePost : sm80::CopyTraits<typename Traits::Element, Traits::kHeadDim, Traits::kNumMmaThreads> {
  using Element = typename Traits::Element;
  static constexpr int kHeadDim = Traits::kHeadDim;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kNThreads = Traits::kNumMmaThreads;
  static constexpr int kdQAccumGroupThreads = Traits::kdQAccumGroupThreads;
  static constexpr int kdQAccumVec = Traits::kdQAccumVec;
  using TiledMmadQ = typename Traits::TiledMmadQ;
  using TiledMmadKV = typename Traits::TiledMmadKV;
  // dK and dV (GQA) accumulated as dK^T and dV^T: (head dim, keys).
  static constexpr bool kdKVTransposed = !Traits::kKeysAlongM;
  // The postprocess's staging tile: rows padded by 16 bytes, so the accumulator's 4-byte pairs (8 rows x 4
  // threads per warp store) land in 32 distinct banks. (A warpgroup's head-dim slice of dQ, 48 columns at head
  // dim 96, does not tile the 32- or 64-column swizzle atoms.)
  template <int kRows>
  using PaddedRows = Layout<Shape<Int<kRows>, Int<kHeadDim>>, Stride<Int<kHeadDim + 8>, _1>>;
  using SmemLayoutQdO = PaddedRows<kBlockM>;
  using SmemLayoutKV = PaddedRows<kBlockN>;
};

// What both plans share: the row's tile, the warp-specialized roles and their registers, the dQ gemm, the Q, dO,
// K and V shared-memory layouts (with their transposed views) and the Q/dO pipelines.
template <typename Element_, int kHeadDim_>
struct BwdKernelTraitsCommon {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;
  using Tile = BwdTile<kHeadDim>;
  static_assert(Tile::kShipped, "no SM90 backward tile for this head dim in flashcute/kernel_table.py");
  static constexpr int kBlockM = Tile::kBlockM;  // Q/dO rows per step
  static constexpr int kBlockN = Tile::kBlockN;  // K/V rows of the CTA
  static constexpr int kStages = Tile::kStages;  // Q/dO (with their LSE/D rows) stages; keys along M, dS's too
  static constexpr int kAtomLayoutMdQ = Tile::kAtomLayoutMdQ;

  // Warp specialization: warpgroup 0 produces (warp 0: TMA loads; warp 1: dQ's bulk reductions, where dQ goes
  // through shared memory), warpgroups 1..2 consume (wgmma, softmax gradient, epilogue).
  static constexpr int kNumMmaWarpGroups = 2;
  static constexpr int kNumMmaThreads = kNumMmaWarpGroups * cutlass::NumThreadsPerWarpGroup;
  static constexpr int kNumThreads = kNumMmaThreads + cutlass::NumThreadsPerWarpGroup;
  // setmaxnreg within the launch's 65536 / kNumThreads registers per thread (in steps of 8), as in the forward
  // (kernel_traits.h): more leaves the consumers' setmaxnreg.inc waiting forever.
  static constexpr int kProducerRegs = 24;
  static constexpr int kConsumerRegs = 240;
  static constexpr int kLaunchRegs = 65536 / kNumThreads / 8 * 8;
  static_assert(128 * kProducerRegs + kNumMmaThreads * kConsumerRegs <= kNumThreads * kLaunchRegs);
  static_assert(kBlockM % 64 == 0 && kBlockM >= kBwdSemaphoreRows && kBwdAccumRowAlign % kBlockM == 0);
  static_assert(kNumMmaWarpGroups % kAtomLayoutMdQ == 0);

  using TileShape_MNK = Shape<Int<kBlockM>, Int<kBlockN>, Int<kHeadDim>>;

  // dQ = dS.K: (BLK_M, D), the warpgroups split BLK_M over kAtomLayoutMdQ of them and D over the rest. A = dS
  // (K-major), B = K^T (an MN-major view of K).
  static constexpr int kdQHeadDimPerWarpGroup = kHeadDim * kAtomLayoutMdQ / kNumMmaWarpGroups;
  using TiledMmadQ = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float,
                           Shape<Int<kBlockM / kAtomLayoutMdQ>, Int<kdQHeadDimPerWarpGroup>, Int<kBlockN>>,
                           GMMA::Major::K, GMMA::Major::MN>(),
      Layout<Shape<Int<kAtomLayoutMdQ>, Int<kNumMmaWarpGroups / kAtomLayoutMdQ>, _1>>{}));
  // dQ's order in the float32 accumulator: sm80/gmem.h accum_block with one chunk per consumer warpgroup.
  static constexpr int kdQAccumGroupThreads = cutlass::NumThreadsPerWarpGroup;

  // Shared memory. A GMMA descriptor cannot start inside a swizzle atom, so K's atom is the widest that tiles the
  // dQ gemm's head-dim slice of one warpgroup (K^T is its B operand); the rest tile the whole head dim.
  using SmemLayoutAtomQdOV = decltype(k_major_smem_atom<Element, kHeadDim>());
  using SmemLayoutAtomK = decltype(k_major_smem_atom<Element, kdQHeadDimPerWarpGroup>());
  // Head-dim columns of the narrowest TMA box (requirements.h: packed batches need each box to reach a column
  // below head_dim).
  static constexpr int kTmaBoxCols = cute::min(size<1>(SmemLayoutAtomQdOV{}), size<1>(SmemLayoutAtomK{}));
  using SmemLayoutQ = decltype(tile_to_shape(SmemLayoutAtomQdOV{}, Shape<Int<kBlockM>, Int<kHeadDim>, Int<kStages>>{}));
  using SmemLayoutdO = SmemLayoutQ;
  using SmemLayoutK = decltype(tile_to_shape(SmemLayoutAtomK{}, Shape<Int<kBlockN>, Int<kHeadDim>>{}));
  using SmemLayoutV = decltype(tile_to_shape(SmemLayoutAtomQdOV{}, Shape<Int<kBlockN>, Int<kHeadDim>>{}));
  // Transposed views of the same bytes: Q^T, dO^T (D, BLK_M, stage); K^T (D, BLK_N).
  using SmemLayoutQt = decltype(composition(
      SmemLayoutQ{}, make_ordered_layout(Shape<Int<kHeadDim>, Int<kBlockM>, Int<kStages>>{}, Step<_2, _1, _3>{})));
  using SmemLayoutdOt = SmemLayoutQt;
  using SmemLayoutKt = decltype(composition(
      SmemLayoutK{}, make_ordered_layout(Shape<Int<kHeadDim>, Int<kBlockN>>{}, Step<_2, _1>{})));
  // LSE * log2(e) and D of each Q/dO stage's rows.
  using SmemLayoutRowStats = Layout<Shape<Int<kBlockM>, Int<kStages>>>;

  using PipelineQdO = cutlass::PipelineTmaAsync<kStages>;
  static constexpr uint32_t kTmaBytesQdO = kBlockM * kHeadDim * sizeof(Element) + kBlockM * sizeof(float);
  static constexpr uint32_t kTmaBytesKV = kBlockN * kHeadDim * sizeof(Element);  // K or V: with the first Q or dO
  static constexpr int kMaxSmemBytes = 227 * 1024;
};

// The names of the common part a plan's own definitions use.
#define FLASHCUTE_BWD_TRAITS_COMMON_NAMES(Common)                                                                  \
  using typename Common::Element;                                                                                \
  using Common::kHeadDim;                                                                                        \
  using Common::kBlockM;                                                                                         \
  using Common::kBlockN;                                                                                         \
  using Common::kStages;                                                                                         \
  using Common::kNumMmaWarpGroups;                                                                               \
  using typename Common::SmemLayoutQ;                                                                            \
  using typename Common::SmemLayoutdO;                                                                           \
  using typename Common::SmemLayoutK;                                                                            \
  using typename Common::SmemLayoutV;                                                                            \
  using typename Common::SmemLayoutRowStats;                                                                     \
  using typename Common::PipelineQdO

template <typename Element_, int kHeadDim_>
struct BwdKernelTraits : BwdKernelTraitsCommon<Element_, kHeadDim_> {
  using Common = BwdKernelTraitsCommon<Element_, kHeadDim_>;
  FLASHCUTE_BWD_TRAITS_COMMON_NAMES(Common);
  static constexpr bool kKeysAlongM = true;
  static constexpr bool kdQThroughSmem = true;  // dQ's own buffers, one bulk reduction per warpgroup's chunk
  static_assert(kBlockN == 64 * kNumMmaWarpGroups, "one 64-key slab per consumer warpgroup");
  // A step's LSE and D held in registers (kBlockM / 4 of each per thread), loaded while the S and dP gemms run;
  // with 128-row Q blocks (head dim 64) they would spill, and are read from shared memory where used.
  static constexpr bool kRowStatsInRegisters = kBlockM <= 64;

  using TileShapedKV = Shape<Int<kBlockN>, Int<kHeadDim>>;  // the dK and dV accumulators

  using AtomLayoutKeys = Layout<Shape<Int<kNumMmaWarpGroups>, _1, _1>>;  // warpgroup w: keys [64w, 64w + 64)
  // S^T = K.Q^T and dP^T = V.dO^T: (BLK_N, BLK_M), every operand K-major (head dim contiguous) in shared memory.
  using TiledMmaSdP = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float, Shape<_64, Int<kBlockM>, Int<kHeadDim>>>(), AtomLayoutKeys{}));
  // dV += P^T.dO and dK += dS^T.Q: (BLK_N, D); A from the S^T / dP^T registers, B = dO^T / Q^T (MN-major views).
  using TiledMmadKV = decltype(make_tiled_mma(
      GMMA::rs_op_selector<Element, Element, float, Shape<_64, Int<kHeadDim>, Int<kBlockM>>, GMMA::Major::K,
                           GMMA::Major::MN>(),
      AtomLayoutKeys{}));

  // dS: (BLK_M, BLK_N) per stage, keys contiguous (the dQ gemm's K-major A), and dS^T (BLK_N, BLK_M, stage).
  using SmemLayoutdS = decltype(tile_to_shape(k_major_smem_atom<Element, kBlockN>(),
                                              Shape<Int<kBlockM>, Int<kBlockN>, Int<kStages>>{}));
  using SmemLayoutdSt = decltype(composition(
      SmemLayoutdS{}, make_ordered_layout(Shape<Int<kBlockN>, Int<kBlockM>, Int<kStages>>{}, Step<_2, _1, _3>{})));
  // The row statistics broadcast over the keys (BLK_N, BLK_M, stage): a thread reads the values of its S^T
  // accumulator's columns through the accumulator's own partition.
  using SmemLayoutRowStatsMma = Layout<Shape<Int<kBlockN>, Int<kBlockM>, Int<kStages>>, Stride<_0, _1, Int<kBlockM>>>;
  // dQ of one Q block in float32, in the register order of sm80/gmem.h accum_block with one chunk per consumer
  // warpgroup and runs of 4 elements (element i of its thread t at (i / 4 * 128 + t) * 4 + i % 4): written with
  // conflict-free 16-byte stores, and each warpgroup's chunk bulk-reduced into dq_accum as soon as that warpgroup
  // has written it, so neither waits for the other there. Two buffers, so the consumers write block m + 1's while
  // block m's reductions still read.
  static constexpr int kdQElems = kBlockM * kHeadDim;
  static constexpr int kdQChunkElems = kdQElems / kNumMmaWarpGroups;
  static constexpr int kdQStages = 2;
  using Common::kdQAccumGroupThreads;
  static constexpr int kdQAccumVec = 4;
  using SmemLayoutdQ = Layout<Shape<Shape<Int<kdQAccumGroupThreads>, Int<kNumMmaWarpGroups>>,
                                    Shape<Int<kdQAccumVec>, Int<kdQChunkElems / kdQAccumGroupThreads / kdQAccumVec>>,
                                    Int<kdQStages>>,
                              Stride<Stride<Int<kdQAccumVec>, Int<kdQChunkElems>>,
                                     Stride<_1, Int<kdQAccumGroupThreads * kdQAccumVec>>, Int<kdQElems>>>;
  // (thread, element, buffer)

  // registers -> smem: dS^T transposed into dS (stmatrix .trans), dK/dV as they are (stmatrix) over K and V.
  using SmemCopyAtomdS = Copy_Atom<SM90_U16x8_STSM_T, Element>;
  using SmemCopyAtomdKV = Copy_Atom<SM90_U32x4_STSM_N, Element>;
  using SmemLayoutdKStage = SmemLayoutK;  // the K and V buffers as the dK and dV accumulators see them
  using SmemLayoutdVStage = SmemLayoutV;

  struct SharedStorage {
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutQ>, 1024> smem_q;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutdO>, 1024> smem_do;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutK>, 1024> smem_k;   // dK at the end
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutV>, 1024> smem_v;   // dV at the end
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutdS>, 1024> smem_ds;
    cute::array_aligned<float, cute::cosize_v<SmemLayoutdQ>, 128> smem_dq;
    cute::array_aligned<float, cute::cosize_v<SmemLayoutRowStats>, 128> smem_lse_log2;
    cute::array_aligned<float, cute::cosize_v<SmemLayoutRowStats>, 128> smem_dsum;
    typename PipelineQdO::SharedStorage pipeline_q;
    typename PipelineQdO::SharedStorage pipeline_do;
  };
  static constexpr int kSmemBytes = sizeof(SharedStorage);
  static_assert(kSmemBytes <= Common::kMaxSmemBytes, "shared memory plan exceeds the 227 KiB an SM90 CTA may use");

  using PrePost = BwdPrePost<BwdKernelTraits>;
};

template <typename Element_, int kHeadDim_>
struct BwdKernelTraitsQueriesAlongM : BwdKernelTraitsCommon<Element_, kHeadDim_> {
  using Common = BwdKernelTraitsCommon<Element_, kHeadDim_>;
  FLASHCUTE_BWD_TRAITS_COMMON_NAMES(Common);
  static_assert(!Common::Tile::kKeysAlongM, "the row is a keys-along-M tile (BwdKernelTraits)");
  static constexpr bool kKeysAlongM = false;
  // No dQ buffer of its own (64 KB at head dim 256 would not fit beside two Q/dO stages): the consumers add dQ from
  // their registers (red.global.add), or, deterministic, each warpgroup parks its float32 half of dQ over Q's or
  // dO's stage of the block once read (64 x D x 2 bytes either way) for the dQ warp's turn.
  static constexpr bool kdQThroughSmem = false;
  static constexpr int kdQAccumVec = 1;  // red.global.add: one element per run keeps a warp's 32 adds contiguous
  static constexpr int kStageElems = kBlockM * kHeadDim;  // one Q or dO stage
  static constexpr int kdQElems = kBlockM * kHeadDim;
  static constexpr int kdQHalfElems = kdQElems / kNumMmaWarpGroups;
  static_assert(kdQHalfElems * sizeof(float) == kStageElems * sizeof(Element), "a dQ half fills one stage");
  static_assert(cosize_v<SmemLayoutQ> == kStageElems * kStages, "the stages lie one after another");
  using SmemLayoutdQHalf =
      Layout<Shape<Int<cutlass::NumThreadsPerWarpGroup>, Int<kdQHalfElems / cutlass::NumThreadsPerWarpGroup>>,
             Stride<_1, Int<cutlass::NumThreadsPerWarpGroup>>>;  // (thread, element)
  // Per stage, every consumer thread arrives once its part of the dQ halves is parked: an mbarrier, since the
  // consumers may park two blocks ahead of the dQ warp (a named barrier's count would run into the next block's).
  using BarrierdQFull = cutlass::arch::ClusterBarrier;
  static constexpr int kAtomLayoutMdKV = Common::Tile::kAtomLayoutMdKV;  // warpgroups along dK^T's head dim
  static_assert(kBlockM == 64, "S and dP: one wgmma M of queries, the warpgroups split the keys");
  static_assert(kBwdAccumRowAlign % kBlockN == 0 && kNumMmaWarpGroups % kAtomLayoutMdKV == 0);

  using TileShapedKV = Shape<Int<kHeadDim>, Int<kBlockN>>;  // the dK^T and dV^T accumulators

  // S = Q.K^T and dP = dO.V^T: (BLK_M, BLK_N), warpgroup w takes keys [w, w + 1) * BLK_N / 2; every operand
  // K-major (head dim contiguous).
  static constexpr int kSdPKeysPerWarpGroup = kBlockN / kNumMmaWarpGroups;
  using TiledMmaSdP = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float, Shape<_64, Int<kSdPKeysPerWarpGroup>, Int<kHeadDim>>>(),
      Layout<Shape<_1, Int<kNumMmaWarpGroups>, _1>>{}));
  // dV^T += dO^T.P and dK^T += Q^T.dS: (D, BLK_N), kAtomLayoutMdKV warpgroups along the head dim, the rest along
  // the keys. A = dO^T / Q^T and B = P^T / dS^T: MN-major views of the stages.
  static constexpr int kdKVKeysPerWarpGroup = kBlockN * kAtomLayoutMdKV / kNumMmaWarpGroups;
  using TiledMmadKV = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float, Shape<_64, Int<kdKVKeysPerWarpGroup>, Int<kBlockM>>,
                           GMMA::Major::MN, GMMA::Major::MN>(),
      Layout<Shape<Int<kAtomLayoutMdKV>, Int<kNumMmaWarpGroups / kAtomLayoutMdKV>, _1>>{}));

  // P and dS: (BLK_M, BLK_N) per stage, keys contiguous; their atom tiles a warpgroup's keys of dV^T / dK^T (P^T
  // and dS^T are their B operands). dQ's A reads dS as it is. Two stages whatever the Q/dO stages: a block's P and
  // dS are read by its own gemms, which every warpgroup waits for before the next block's dS barrier.
  static constexpr int kPdSStages = 2;
  using SmemLayoutAtomPdS = decltype(k_major_smem_atom<Element, kdKVKeysPerWarpGroup>());
  using SmemLayoutPdS =
      decltype(tile_to_shape(SmemLayoutAtomPdS{}, Shape<Int<kBlockM>, Int<kBlockN>, Int<kPdSStages>>{}));
  // Transposed views: V^T (D, BLK_N), the epilogue's; P^T, dS^T (BLK_N, BLK_M, stage).
  using SmemLayoutVt = decltype(composition(
      SmemLayoutV{}, make_ordered_layout(Shape<Int<kHeadDim>, Int<kBlockN>>{}, Step<_2, _1>{})));
  using SmemLayoutPdSt = decltype(composition(
      SmemLayoutPdS{}, make_ordered_layout(Shape<Int<kBlockN>, Int<kBlockM>, Int<kPdSStages>>{}, Step<_2, _1, _3>{})));
  // The row statistics broadcast over the keys (BLK_M, BLK_N, stage).
  using SmemLayoutRowStatsMma = Layout<Shape<Int<kBlockM>, Int<kBlockN>, Int<kStages>>, Stride<_1, _0, Int<kBlockM>>>;

  // registers -> smem: P and dS as they are (stmatrix); dK^T / dV^T transposed into the K / V buffers
  // (stmatrix .trans) for the epilogue's TMA stores.
  using SmemCopyAtomPdS = Copy_Atom<SM90_U32x4_STSM_N, Element>;
  using SmemCopyAtomdKV = Copy_Atom<SM90_U16x8_STSM_T, Element>;
  using SmemLayoutdKStage = typename Common::SmemLayoutKt;
  using SmemLayoutdVStage = SmemLayoutVt;

  struct SharedStorage {
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutQ>, 1024> smem_q;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutdO>, 1024> smem_do;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutK>, 1024> smem_k;   // dK at the end
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutV>, 1024> smem_v;   // dV at the end
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutPdS>, 1024> smem_p;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutPdS>, 1024> smem_ds;
    cute::array_aligned<float, cute::cosize_v<SmemLayoutRowStats>, 128> smem_lse_log2;
    cute::array_aligned<float, cute::cosize_v<SmemLayoutRowStats>, 128> smem_dsum;
    typename PipelineQdO::SharedStorage pipeline_q;
    typename PipelineQdO::SharedStorage pipeline_do;
    BarrierdQFull barrier_dq_full[kStages];  // both dQ halves parked over the stage
  };
  static constexpr int kSmemBytes = sizeof(SharedStorage);
  static_assert(kSmemBytes <= Common::kMaxSmemBytes, "shared memory plan exceeds the 227 KiB an SM90 CTA may use");

  using PrePost = BwdPrePost<BwdKernelTraitsQueriesAlongM>;
};

#undef FLASHCUTE_BWD_TRAITS_COMMON_NAMES

// The plan of a head dim's shipped tile.
template <typename Element, int kHeadDim>
using BwdKernelTraitsFor = cute::conditional_t<BwdTile<kHeadDim>::kKeysAlongM, BwdKernelTraits<Element, kHeadDim>,
                                               BwdKernelTraitsQueriesAlongM<Element, kHeadDim>>;

}  // namespace flashcute::sm90
