// Compile-time plan of the SM90 forward for one (element type, head dim, causal flag): tile shape, the two
// warpgroup-wide TiledMMAs, GMMA-swizzled shared-memory layouts, pipelines and the shared-memory budget.
#pragma once

#include <cute/tensor.hpp>
#include <cute/atom/mma_atom.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/pipeline/pipeline.hpp>

#include "instantiations/kernel_table.h"
#include "sm90/named_barriers.h"

namespace flashcute::sm90 {

using namespace cute;

// The widest GMMA swizzle atom (128, 64 or 32 bytes of contiguous head dim) that tiles kHeadDim.
template <typename Element, int kHeadDim>
constexpr auto k_major_smem_atom() {
  static_assert(sizeof(Element) == 2);
  if constexpr (kHeadDim % 64 == 0) {
    return GMMA::Layout_K_SW128_Atom<Element>{};
  } else if constexpr (kHeadDim % 32 == 0) {
    return GMMA::Layout_K_SW64_Atom<Element>{};
  } else {
    static_assert(kHeadDim % 16 == 0);
    return GMMA::Layout_K_SW32_Atom<Element>{};
  }
}

// One row of flashcute/kernel_table.py (instantiations/kernel_table.h FwdTile): tile shape, stages and mainloop
// options per (head dim, variant); kLongSeqlenK is the non-causal tile taken from seqlen_k >= kLongSeqlenKMin.
template <typename Element_, int kHeadDim_, bool kCausal_, bool kLongSeqlenK_ = false>
struct KernelTraits {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr bool kCausal = kCausal_;
  static constexpr bool kLongSeqlenK = kLongSeqlenK_;
  static_assert(!(kCausal && kLongSeqlenK), "the long-seqlen_k tiles are non-causal");
  using Tile = FwdTile<kHeadDim, kLongSeqlenK ? FwdVariant::kNonCausalLongK
                                              : kCausal ? FwdVariant::kCausal : FwdVariant::kNonCausal>;
  static_assert(Tile::kShipped, "no SM90 forward tile for this head dim and variant in flashcute/kernel_table.py");
  static constexpr int kBlockM = Tile::kBlockM;
  static constexpr int kBlockN = Tile::kBlockN;
  static constexpr int kStages = Tile::kStages;
  static constexpr int kSoftmaxReduceParts = Tile::kSoftmaxReduceParts;
  static constexpr bool kSkipUnchangedRescale = Tile::kSkipUnchangedRescale;
  static constexpr bool kRescaleOutsideTurn = Tile::kRescaleOutsideTurn;
  static_assert(kBlockM % 64 == 0 && kBlockN % 16 == 0 && kHeadDim % 16 == 0);

  // Warp specialization: warpgroup 0 produces (TMA), warpgroups 1.. consume (wgmma + softmax).
  static constexpr int kNumMmaWarpGroups = kBlockM / 64;
  static_assert(kNumMmaWarpGroups == 2 || kNumMmaWarpGroups == kMaxMmaWarpGroups);
  static constexpr int kNumMmaThreads = kNumMmaWarpGroups * cutlass::NumThreadsPerWarpGroup;
  static constexpr int kNumThreads = kNumMmaThreads + cutlass::NumThreadsPerWarpGroup;
  // setmaxnreg: registers move from the producer (which needs few) to the consumers, but only within what the
  // CTA was launched with (65536 / kNumThreads per thread, in steps of 8, for one CTA per SM): asking for more
  // leaves the consumers' setmaxnreg.inc waiting forever (seen with 48 + 2 x 232 at 384 threads).
  static constexpr int kProducerRegs = kNumMmaWarpGroups == 2 ? 24 : 32;
  static constexpr int kConsumerRegs = kNumMmaWarpGroups == 2 ? 240 : 160;
  static constexpr int kLaunchRegs = 65536 / kNumThreads / 8 * 8;
  static_assert(128 * kProducerRegs + kNumMmaThreads * kConsumerRegs <= kNumThreads * kLaunchRegs);

  using TileShape_MNK = Shape<Int<kBlockM>, Int<kBlockN>, Int<kHeadDim>>;

  // One 64-row slab per consumer warpgroup along M.
  using AtomLayoutMNK = Layout<Shape<Int<kNumMmaWarpGroups>, _1, _1>>;
  // S = Q.K^T: both operands K-major in shared memory (SS).
  using TiledMmaS = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float, Shape<_64, Int<kBlockN>, Int<kHeadDim>>>(),
      AtomLayoutMNK{}));
  static_assert(size<1>(typename TiledMmaS::Shape_MNK{}) == kBlockN,
                "S = Q.K^T should be one wgmma of N = kBlockN per k-step: compile with "
                "-DCUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED (flashcute._build.NVCC_FLAGS)");
  // O += P.V: P from registers (the S accumulator converted to 16 bits), V^T MN-major in shared memory (RS).
  using TiledMmaO = decltype(make_tiled_mma(
      GMMA::rs_op_selector<Element, Element, float, Shape<_64, Int<kHeadDim>, Int<kBlockN>>, GMMA::Major::K,
                           GMMA::Major::MN>(),
      AtomLayoutMNK{}));

  using SmemLayoutAtom = decltype(k_major_smem_atom<Element, kHeadDim>());
  // Head-dim columns of each TMA box of Q, K, V and O (requirements.h: packed batches need each box to reach a
  // column below head_dim).
  static constexpr int kTmaBoxCols = size<1>(SmemLayoutAtom{});
  using SmemLayoutQ = decltype(tile_to_shape(SmemLayoutAtom{}, Shape<Int<kBlockM>, Int<kHeadDim>>{}));
  using SmemLayoutK =
      decltype(tile_to_shape(SmemLayoutAtom{}, Shape<Int<kBlockN>, Int<kHeadDim>, Int<kStages>>{}));
  using SmemLayoutV = SmemLayoutK;  // written by TMA exactly like K: (kBlockN, head_dim) rows
  // The V stages read back as V^T (head_dim, kBlockN, stages), head dim contiguous: an MN-major B operand.
  using SmemLayoutVt = decltype(composition(
      SmemLayoutV{},
      make_ordered_layout(Shape<Int<kHeadDim>, Int<kBlockN>, Int<kStages>>{}, Step<_2, _1, _3>{})));
  // O is staged in shared memory for the TMA stores (see SharedStorage): one (64, head_dim) slab per consumer
  // warpgroup, each stored on its own, viewed as one (kBlockM, head_dim) tile for the register -> smem copy.
  using SmemLayoutOSlab = decltype(tile_to_shape(SmemLayoutAtom{}, Shape<_64, Int<kHeadDim>>{}));
  using SmemLayoutOSlabs =
      decltype(tile_to_shape(SmemLayoutAtom{}, Shape<_64, Int<kHeadDim>, Int<kBlockM / 64>>{}));
  using SmemLayoutO = decltype(composition(
      SmemLayoutOSlabs{},
      Layout<Shape<Shape<_64, Int<kBlockM / 64>>, Int<kHeadDim>>, Stride<Stride<_1, Int<64 * kHeadDim>>, _64>>{}));
  // registers -> smem for O: stmatrix, four 8x8 matrices of 16-bit elements per instruction.
  using SmemCopyAtomO = Copy_Atom<SM90_U32x4_STSM_N, Element>;

  using PipelineQ = cutlass::PipelineTmaAsync<1>;
  using PipelineKV = cutlass::PipelineTmaAsync<kStages>;
  using BarrierO = cutlass::arch::ClusterBarrier;

  static constexpr uint32_t kTmaBytesQ = kBlockM * kHeadDim * sizeof(Element);
  static constexpr uint32_t kTmaBytesKV = kBlockN * kHeadDim * sizeof(Element);

  // O is staged in its own buffer where that fits; otherwise it overlays the V stages, and the producer
  // loads a tile's first V only after the previous tile's O has left shared memory (barrier_o).
  struct SmemVSeparateO {
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutV>, 1024> smem_v;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutO>, 1024> smem_o;
  };
  union SmemVAliasedO {
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutV>, 1024> smem_v;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutO>, 1024> smem_o;
  };
  template <class SmemVO>
  struct SharedStorageWith {
    SmemVO vo;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutQ>, 1024> smem_q;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutK>, 1024> smem_k;
    typename PipelineQ::SharedStorage pipeline_q;
    typename PipelineKV::SharedStorage pipeline_k;
    typename PipelineKV::SharedStorage pipeline_v;
    BarrierO barrier_o;
  };
  static constexpr int kMaxSmemBytes = 227 * 1024;  // what an SM90 CTA may use
  static constexpr bool kOAliasesV = sizeof(SharedStorageWith<SmemVSeparateO>) > kMaxSmemBytes;
  using SharedStorage = SharedStorageWith<cute::conditional_t<kOAliasesV, SmemVAliasedO, SmemVSeparateO>>;
  static_assert(cute::cosize_v<SmemLayoutO> <= cute::cosize_v<SmemLayoutV>);
  static constexpr int kSmemBytes = sizeof(SharedStorage);
  static_assert(kSmemBytes <= kMaxSmemBytes, "shared memory plan exceeds the 227 KiB an SM90 CTA may use");
};

}  // namespace flashcute::sm90
