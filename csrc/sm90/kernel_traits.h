// Compile-time plan of the SM90 forward for one (element type, head dim, causal flag): tile shape, the two
// warpgroup-wide TiledMMAs, GMMA-swizzled shared-memory layouts, pipelines and the shared-memory budget.
#pragma once

#include <cute/tensor.hpp>
#include <cute/atom/mma_atom.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/pipeline/pipeline.hpp>

namespace flashcute::sm90 {

using namespace cute;

// Tile sizes per head dim, starting from FlashAttention-3's measured choices. Each consumer warpgroup owns
// 64 query rows, so kBlockM / 64 consumer warpgroups; kBlockN is bounded by registers (S, P and O live in
// registers) and by shared memory (Q + kStages of K and V, and O's own buffer where it fits; see
// kOAliasesV). Non-causal hdim 128 takes 128 x 128 like causal: 128 x 176 needs O over the V stages, and
// each tile then waits for its first V until the previous tile's O is stored (H200, bf16, two runs: 128 x 128
// is 5-9% faster at seqlen 512-1k, 3% at 2k, within 1.5% either way from 4k; benchmarks/notes.md). Long key
// sequences take the wider LongSeqlenKTile below.
// Causal hdim 64 takes 128-row Q blocks: with 192 rows the paired causal work units (tile_scheduler.h) are
// uneven whenever a head has an odd number of Q blocks, and short sequences waste a third of the last block
// (measured on the H200: 196 vs 141 TFLOP/s at seqlen 512, equal at 16k).
// kSoftmaxReduceParts: partial results per row in the softmax's max and sum (common/utils.h row_reduce):
// 4 measured 2-8% faster than one serial chain for hdim 128 and non-causal hdim 64, 3-6% slower for causal
// hdim 64 (H200, benchmarks/notes.md); the head dims not measured take 4.
// kSkipUnchangedRescale: a warp whose 16 rows all kept their running max (corrections exactly 1) skips the
// O rescale (mainloop.h). hdim 64, where the softmax's instructions bound the kernel: +1-3% from seqlen 2k
// (causal +2-3%), equal below; hdim 128: equal with 128 x 128 tiles, 2% slower with 128 x 160 (H200,
// harness held ~0.6 s per shape, two runs; benchmarks/notes.md); the head dims not measured leave it off.
// kRescaleOutsideTurn: O *= correction right after the wait for the P.V (mainloop.h), so the other warpgroups
// get the tensor cores sooner, instead of between this warpgroup's S and P.V issues. Work per clock rises up
// to 5%, but where the power cap sets the clock it gives most of that back (H200, bf16 and fp16, sustained
// harness, mean over seqlen 512-16k, per shape within the run-to-run spread of 1-3%): on for hdim 96 (+2%),
// hdim 128's 128 x 128 tiles and hdim 256 causal (+1%), hdim 64 and 192 non-causal (+0.7%); off where it
// lost: hdim 128's long-seqlen_k tile (-1 to -2%), hdim 256 non-causal (-1 to 0%), hdim 64 causal (-1 to
// -5%), hdim 192 causal (-0.3%).
template <int kHeadDim, bool kCausal>
struct TileConfig;
template <bool kCausal>
struct TileConfig<64, kCausal> {
  static constexpr int kBlockM = kCausal ? 128 : 192, kBlockN = 128, kStages = 2;
  static constexpr int kSoftmaxReduceParts = kCausal ? 1 : 4;
  static constexpr bool kSkipUnchangedRescale = true, kRescaleOutsideTurn = !kCausal;
};
template <bool kCausal>
struct TileConfig<96, kCausal> {
  static constexpr int kBlockM = 128, kBlockN = 128, kStages = 2, kSoftmaxReduceParts = 4;
  static constexpr bool kSkipUnchangedRescale = false, kRescaleOutsideTurn = true;
};
template <bool kCausal>
struct TileConfig<128, kCausal> {
  static constexpr int kBlockM = 128, kBlockN = 128, kStages = 2, kSoftmaxReduceParts = 4;
  static constexpr bool kSkipUnchangedRescale = false, kRescaleOutsideTurn = true;
};
template <bool kCausal>
struct TileConfig<192, kCausal> {
  static constexpr int kBlockM = 128, kBlockN = 112, kStages = 2, kSoftmaxReduceParts = 4;
  static constexpr bool kSkipUnchangedRescale = false, kRescaleOutsideTurn = !kCausal;
};
template <bool kCausal>
struct TileConfig<256, kCausal> {
  static constexpr int kBlockM = 128, kBlockN = 80, kStages = 2, kSoftmaxReduceParts = 4;
  static constexpr bool kSkipUnchangedRescale = false, kRescaleOutsideTurn = kCausal;
};

// A second, wider tile for long key sequences, where one exists (kBlockN = 0: none); launch.h takes it when
// seqlen_k >= kLongSeqlenKMin. Fewer K/V blocks per tile means fewer O rescales, pipeline and ping-pong
// handoffs and wgmma batches per FLOP, which counts once the board's power cap sets the clock. hdim 128
// non-causal, 128 x 160 (O keeps its own buffer) vs 128 x 128 on the H200, each shape run ~0.6 s so the
// clock settles at 1.4-1.6 GHz, two runs, bf16 and fp16: +1% at seqlen 4k, +2% at 8k, +4-5% at 16k, equal
// at 2k, 8-13% slower at 512-1k where the last block of 160 is mostly empty (benchmarks/notes.md).
template <int kHeadDim, bool kCausal>
struct LongSeqlenKTile {
  static constexpr int kBlockN = 0;
};
template <>
struct LongSeqlenKTile<128, false> {
  static constexpr int kBlockN = 160;
};
constexpr int kLongSeqlenKMin = 4096;

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

// kLongSeqlenK: the LongSeqlenKTile variant (kBlockN from it, the rest from TileConfig but for
// kRescaleOutsideTurn, which it leaves off: measured 1-2% slower there).
template <typename Element_, int kHeadDim_, bool kCausal_, bool kLongSeqlenK_ = false>
struct KernelTraits {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr bool kCausal = kCausal_;
  static constexpr bool kLongSeqlenK = kLongSeqlenK_;
  static_assert(!kLongSeqlenK || LongSeqlenKTile<kHeadDim, kCausal>::kBlockN > 0);
  static constexpr int kBlockM = TileConfig<kHeadDim, kCausal>::kBlockM;
  static constexpr int kBlockN =
      kLongSeqlenK ? LongSeqlenKTile<kHeadDim, kCausal>::kBlockN : TileConfig<kHeadDim, kCausal>::kBlockN;
  static constexpr int kStages = TileConfig<kHeadDim, kCausal>::kStages;
  static constexpr int kSoftmaxReduceParts = TileConfig<kHeadDim, kCausal>::kSoftmaxReduceParts;
  static constexpr bool kSkipUnchangedRescale = TileConfig<kHeadDim, kCausal>::kSkipUnchangedRescale;
  static constexpr bool kRescaleOutsideTurn = !kLongSeqlenK && TileConfig<kHeadDim, kCausal>::kRescaleOutsideTurn;
  static_assert(kBlockM % 64 == 0 && kBlockN % 16 == 0 && kHeadDim % 16 == 0);

  // Warp specialization: warpgroup 0 produces (TMA), warpgroups 1.. consume (wgmma + softmax).
  static constexpr int kNumMmaWarpGroups = kBlockM / 64;
  static_assert(kNumMmaWarpGroups == 2 || kNumMmaWarpGroups == 3);
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
