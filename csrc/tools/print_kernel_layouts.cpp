// Prints every layout and atom of every shipped kernel configuration, from the kernels' own trait headers.
//
// Host-only: compiled with g++ -std=c++17 -fpermissive -Icsrc -I<CUTLASS include> -I<CUDA include> (no GPU,
// no nvcc). tests/test_kernel_layouts.py compares the output with flashcute.kernel_configs, line by line;
// flashcute.explain draws from that mirror. Every string is CuTe's own cute::print.
//
// Output: one block per configuration, "== <arch> <dtype> hdim<d>[ causal|noncausal|decode[ key-split]|backward]",
// then "<name>: <value>".
#include <cstdio>

// The kernels are built with this (flashcute._build.NVCC_FLAGS): the GMMA atoms must match theirs.
#define CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED

// sm90/kernel_traits.h pulls in cutlass/pipeline/pipeline.hpp, whose device-only member functions name
// threadIdx and __syncthreads; declare them for the host compiler (never called here). -fpermissive lets g++
// accept a member alias in sm100_pipeline.hpp that nvcc's host pass accepts.
#include <cuda_runtime.h>
#include <device_launch_parameters.h>
void __syncthreads();

#include <cute/tensor.hpp>

#include "instantiations/kernel_table.h"
#include "sm80/bwd_kernel_traits.h"
#include "sm80/kernel_traits.h"
#include "sm90/bwd_kernel_traits.h"
#include "sm90/kernel_traits.h"

namespace {

using namespace cute;

template <class Element>
char const* dtype_name() {
  return cute::is_same_v<Element, cutlass::half_t> ? "fp16" : "bf16";
}

template <class T>
void field(char const* name, T const& value) {
  printf("%s: ", name);
  print(value);
  printf("\n");
}

void field(char const* name, int value) { printf("%s: %d\n", name, value); }

template <class TiledCopy>
void copy_fields(char const* name, TiledCopy const& tiled_copy) {
  printf("%s.Tiler_MN: ", name);
  print(typename TiledCopy::Tiler_MN{});
  printf("\n%s.TiledLayout_TV: ", name);
  print(typename TiledCopy::TiledLayout_TV{});
  printf("\n%s.layoutS_TV: ", name);
  print(tiled_copy.get_layoutS_TV());
  printf("\n%s.layoutD_TV: ", name);
  print(tiled_copy.get_layoutD_TV());
  printf("\n");
}

template <class Traits>
void print_sm80(char const* suffix = "") {
  using Element = typename Traits::Element;
  printf("== sm80 %s hdim%d%s\n", dtype_name<Element>(), Traits::kHeadDim, suffix);
  field("kBlockM", Traits::kBlockM);
  field("kBlockN", Traits::kBlockN);
  field("kHeadDim", Traits::kHeadDim);
  field("kNWarps", Traits::kNWarps);
  field("kNThreads", Traits::kNThreads);
  field("kKeySlices", Traits::kKeySlices);
  field("TileShape_MNK", typename Traits::TileShape_MNK{});
  // The SM80 kernel has one K and one V buffer (no kStages member): count the K/V buffers that
  // kSmemBytes pays for beyond Q, so a change to the buffering shows up here.
  int const elems = Traits::kSmemBytes / int(sizeof(Element));
  field("kv_stages", (elems - Traits::kSmemQElems) / (2 * Traits::kSmemKVElems));
  field("kSmemBytes", Traits::kSmemBytes);
  field("kSmemQElems", Traits::kSmemQElems);
  field("kSmemKVElems", Traits::kSmemKVElems);
  field("kBlockKSmem", Traits::kBlockKSmem);
  field("kGmemElemsPerLoad", Traits::kGmemElemsPerLoad);
  field("kGmemThreadsPerRow", Traits::kGmemThreadsPerRow);

  field("SmemLayoutAtom", typename Traits::SmemLayoutAtom{});
  field("SmemLayoutQ", typename Traits::SmemLayoutQ{});
  field("SmemLayoutKV", typename Traits::SmemLayoutKV{});
  field("SmemLayoutVt", typename Traits::SmemLayoutVt{});
  field("SmemLayoutVtNoSwizzle", typename Traits::SmemLayoutVtNoSwizzle{});
  field("SmemLayoutO", typename Traits::SmemLayoutO{});
  field("GmemLayoutAtom", typename Traits::GmemLayoutAtom{});

  typename Traits::TiledMma tiled_mma;
  field("TiledMma.ThrLayoutVMNK", tiled_mma.get_thr_layout_vmnk());
  field("TiledMma.tile_shape", tile_shape(tiled_mma));
  field("TiledMma.layoutA_TV", tiled_mma.get_layoutA_TV());
  field("TiledMma.layoutB_TV", tiled_mma.get_layoutB_TV());
  field("TiledMma.layoutC_TV", tiled_mma.get_layoutC_TV());

  copy_fields("GmemTiledCopyQKV", typename Traits::GmemTiledCopyQKV{});
  copy_fields("SmemTiledCopyQ", make_tiled_copy_A(typename Traits::SmemCopyAtom{}, tiled_mma));
  copy_fields("SmemTiledCopyK", make_tiled_copy_B(typename Traits::SmemCopyAtom{}, tiled_mma));
  copy_fields("SmemTiledCopyV", make_tiled_copy_B(typename Traits::SmemCopyAtomTransposed{}, tiled_mma));
  copy_fields("SmemTiledCopyO", make_tiled_copy_C(typename Traits::SmemCopyAtomO{}, tiled_mma));
  copy_fields("GmemTiledCopyO", typename Traits::GmemTiledCopyO{});
  printf("\n");
}

template <class TiledMma>
void mma_fields(char const* name, TiledMma const& tiled_mma) {
  printf("%s.atom_Shape_MNK: ", name);
  print(typename TiledMma::Atom::Shape_MNK{});
  printf("\n%s.ThrLayoutVMNK: ", name);
  print(tiled_mma.get_thr_layout_vmnk());
  printf("\n%s.tile_shape: ", name);
  print(tile_shape(tiled_mma));
  printf("\n%s.layoutA_TV: ", name);
  print(tiled_mma.get_layoutA_TV());
  printf("\n%s.layoutB_TV: ", name);
  print(tiled_mma.get_layoutB_TV());
  printf("\n%s.layoutC_TV: ", name);
  print(tiled_mma.get_layoutC_TV());
  printf("\n");
}

// The SM80 backward (csrc/sm80/bwd_kernel_traits.h): its layouts, its three TiledMMAs, and every TiledCopy that
// sm80/bwd_mainloop.h and bwd_epilogue.h make from them.
template <class Traits>
void print_sm80_bwd() {
  using Element = typename Traits::Element;
  printf("== sm80 %s hdim%d backward\n", dtype_name<Element>(), Traits::kHeadDim);
  field("kBlockM", Traits::kBlockM);
  field("kBlockN", Traits::kBlockN);
  field("kHeadDim", Traits::kHeadDim);
  field("kNWarps", Traits::kNWarps);
  field("kNThreads", Traits::kNThreads);
  field("kStages", Traits::kStages);
  field("TileShape_MNK", typename Traits::TileShape_MNK{});
  field("kSmemBytes", Traits::kSmemBytes);
  field("kBlockKSmemPdS", Traits::kBlockKSmemPdS);

  field("SmemLayoutAtom", typename Traits::SmemLayoutAtom{});
  field("SmemLayoutQdO", typename Traits::SmemLayoutQdO{});
  field("SmemLayoutKV", typename Traits::SmemLayoutKV{});
  field("SmemLayoutPdS", typename Traits::SmemLayoutPdS{});
  field("SmemLayoutQdOt", typename Traits::SmemLayoutQdOt{});
  field("SmemLayoutKt", typename Traits::SmemLayoutKt{});
  field("SmemLayoutPdSt", typename Traits::SmemLayoutPdSt{});
  field("SmemLayoutQdOtNoSwizzle", typename Traits::SmemLayoutQdOtNoSwizzle{});
  field("SmemLayoutKtNoSwizzle", typename Traits::SmemLayoutKtNoSwizzle{});
  field("SmemLayoutPdStNoSwizzle", typename Traits::SmemLayoutPdStNoSwizzle{});
  field("GmemLayoutAtom", typename Traits::GmemLayoutAtom{});

  typename Traits::TiledMmaSdP tiled_mma_sdp;
  typename Traits::TiledMmadKV tiled_mma_dkv;
  typename Traits::TiledMmadQ tiled_mma_dq;
  mma_fields("TiledMmaSdP", tiled_mma_sdp);
  mma_fields("TiledMmadKV", tiled_mma_dkv);
  mma_fields("TiledMmadQ", tiled_mma_dq);

  using Ldsm = typename Traits::SmemCopyAtom;
  using LdsmT = typename Traits::SmemCopyAtomTransposed;
  using Store = typename Traits::SmemCopyAtomStore;
  copy_fields("GmemTiledCopyQKV", typename Traits::GmemTiledCopyQKV{});
  copy_fields("SmemTiledCopyQdO", make_tiled_copy_A(Ldsm{}, tiled_mma_sdp));
  copy_fields("SmemTiledCopyKV", make_tiled_copy_B(Ldsm{}, tiled_mma_sdp));
  copy_fields("SmemTiledCopyPdS", make_tiled_copy_C(Store{}, tiled_mma_sdp));
  copy_fields("SmemTiledCopyPdSt", make_tiled_copy_A(LdsmT{}, tiled_mma_dkv));
  copy_fields("SmemTiledCopyQdOt", make_tiled_copy_B(LdsmT{}, tiled_mma_dkv));
  copy_fields("SmemTiledCopydS", make_tiled_copy_A(Ldsm{}, tiled_mma_dq));
  copy_fields("SmemTiledCopyKt", make_tiled_copy_B(LdsmT{}, tiled_mma_dq));
  copy_fields("SmemTiledCopydKV", make_tiled_copy_C(Store{}, tiled_mma_dkv));
  copy_fields("GmemTiledCopy", typename Traits::GmemTiledCopy{});
  printf("\n");
}

template <class Traits>
void print_sm90() {
  using Element = typename Traits::Element;
  printf("== sm90 %s hdim%d %s%s\n", dtype_name<Element>(), Traits::kHeadDim, Traits::kCausal ? "causal" : "noncausal",
         Traits::kLongSeqlenK ? "-longk" : "");
  field("kBlockM", Traits::kBlockM);
  field("kBlockN", Traits::kBlockN);
  field("kHeadDim", Traits::kHeadDim);
  field("kStages", Traits::kStages);
  field("kLongSeqlenK", int(Traits::kLongSeqlenK));
  field("kLongSeqlenKMin", flashcute::kLongSeqlenKMin);
  field("kNumMmaWarpGroups", Traits::kNumMmaWarpGroups);
  field("kNumMmaThreads", Traits::kNumMmaThreads);
  field("kNumThreads", Traits::kNumThreads);
  field("kProducerRegs", Traits::kProducerRegs);
  field("kConsumerRegs", Traits::kConsumerRegs);
  field("TileShape_MNK", typename Traits::TileShape_MNK{});
  field("kSmemBytes", Traits::kSmemBytes);
  field("kOAliasesV", int(Traits::kOAliasesV));
  field("kTmaBytesQ", int(Traits::kTmaBytesQ));
  field("kTmaBytesKV", int(Traits::kTmaBytesKV));
  field("kTmaBoxCols", Traits::kTmaBoxCols);

  field("SmemLayoutAtom", typename Traits::SmemLayoutAtom{});
  field("SmemLayoutQ", typename Traits::SmemLayoutQ{});
  field("SmemLayoutK", typename Traits::SmemLayoutK{});
  field("SmemLayoutV", typename Traits::SmemLayoutV{});
  field("SmemLayoutVt", typename Traits::SmemLayoutVt{});
  field("SmemLayoutO", typename Traits::SmemLayoutO{});
  field("SmemLayoutOSlab", typename Traits::SmemLayoutOSlab{});

  typename Traits::TiledMmaS tiled_mma_s;
  typename Traits::TiledMmaO tiled_mma_o;
  mma_fields("TiledMmaS", tiled_mma_s);
  mma_fields("TiledMmaO", tiled_mma_o);
  // The epilogue's registers -> smem copy of O.
  copy_fields("SmemTiledCopyO", make_tiled_copy_C(typename Traits::SmemCopyAtomO{}, tiled_mma_o));
  printf("\n");
}

// Either plan of csrc/sm90/bwd_kernel_traits.h (BwdKernelTraitsFor): the members both have, and in their place
// (if constexpr) those of one plan only.
template <class Traits>
void print_sm90_bwd() {
  using Element = typename Traits::Element;
  printf("== sm90 %s hdim%d backward\n", dtype_name<Element>(), Traits::kHeadDim);
  field("kBlockM", Traits::kBlockM);
  field("kBlockN", Traits::kBlockN);
  field("kHeadDim", Traits::kHeadDim);
  field("kStages", Traits::kStages);
  field("kKeysAlongM", int(Traits::kKeysAlongM));
  field("kAtomLayoutMdQ", Traits::kAtomLayoutMdQ);
  if constexpr (!Traits::kKeysAlongM) {
    field("kAtomLayoutMdKV", Traits::kAtomLayoutMdKV);
  }
  field("kNumMmaWarpGroups", Traits::kNumMmaWarpGroups);
  field("kNumThreads", Traits::kNumThreads);
  field("kProducerRegs", Traits::kProducerRegs);
  field("kConsumerRegs", Traits::kConsumerRegs);
  field("kLaunchRegs", Traits::kLaunchRegs);
  field("TileShape_MNK", typename Traits::TileShape_MNK{});
  field("kSmemBytes", Traits::kSmemBytes);
  field("kTmaBytesQdO", int(Traits::kTmaBytesQdO));
  field("kTmaBytesKV", int(Traits::kTmaBytesKV));
  field("kTmaBoxCols", Traits::kTmaBoxCols);

  field("SmemLayoutQ", typename Traits::SmemLayoutQ{});
  field("SmemLayoutK", typename Traits::SmemLayoutK{});
  field("SmemLayoutV", typename Traits::SmemLayoutV{});
  if constexpr (Traits::kKeysAlongM) {
    field("SmemLayoutdS", typename Traits::SmemLayoutdS{});
  } else {
    field("SmemLayoutPdS", typename Traits::SmemLayoutPdS{});
  }
  field("SmemLayoutQt", typename Traits::SmemLayoutQt{});
  field("SmemLayoutKt", typename Traits::SmemLayoutKt{});
  if constexpr (Traits::kKeysAlongM) {
    field("SmemLayoutdSt", typename Traits::SmemLayoutdSt{});
  } else {
    field("SmemLayoutVt", typename Traits::SmemLayoutVt{});
    field("SmemLayoutPdSt", typename Traits::SmemLayoutPdSt{});
  }
  field("SmemLayoutRowStatsMma", typename Traits::SmemLayoutRowStatsMma{});
  if constexpr (Traits::kdQThroughSmem) {
    field("SmemLayoutdQ", typename Traits::SmemLayoutdQ{});
  }

  typename Traits::TiledMmaSdP tiled_mma_sdp;
  typename Traits::TiledMmadKV tiled_mma_dkv;
  typename Traits::TiledMmadQ tiled_mma_dq;
  mma_fields("TiledMmaSdP", tiled_mma_sdp);
  mma_fields("TiledMmadKV", tiled_mma_dkv);
  mma_fields("TiledMmadQ", tiled_mma_dq);
  if constexpr (Traits::kKeysAlongM) {
    // dS^T registers -> dS in shared memory (transposing stmatrix), and the epilogue's dK/dV -> shared memory.
    copy_fields("SmemTiledCopydS", make_tiled_copy_C(typename Traits::SmemCopyAtomdS{}, tiled_mma_sdp));
  } else {
    // P and dS registers -> shared memory (stmatrix), and the epilogue's dK^T/dV^T -> K/V (transposing stmatrix).
    copy_fields("SmemTiledCopyPdS", make_tiled_copy_C(typename Traits::SmemCopyAtomPdS{}, tiled_mma_sdp));
  }
  copy_fields("SmemTiledCopydKV", make_tiled_copy_C(typename Traits::SmemCopyAtomdKV{}, tiled_mma_dkv));
  printf("\n");
}

// Every row of flashcute/kernel_table.py, in its order (instantiations/kernel_table.h's lists).
template <class Element>
void print_sm80_all() {
#define FLASHCUTE_PRINT_SM80(HEAD_DIM, VARIANT) \
  print_sm80<typename flashcute::sm80::DefaultTraits<Element, HEAD_DIM>::type>();
  FLASHCUTE_FWD_SM80_KERNELS(FLASHCUTE_PRINT_SM80)
#undef FLASHCUTE_PRINT_SM80
#define FLASHCUTE_PRINT_DECODE(HEAD_DIM, VARIANT)                                     \
  print_sm80<typename flashcute::sm80::DecodeTraits<Element, HEAD_DIM>::type>(" decode"); \
  print_sm80<typename flashcute::sm80::DecodeTraits<Element, HEAD_DIM>::KeySplit>(" decode key-split");
  FLASHCUTE_DECODE_SM80_KERNELS(FLASHCUTE_PRINT_DECODE)
#undef FLASHCUTE_PRINT_DECODE
#define FLASHCUTE_PRINT_SM80_BWD(HEAD_DIM, VARIANT) \
  print_sm80_bwd<typename flashcute::sm80::DefaultBwdTraits<Element, HEAD_DIM>::type>();
  FLASHCUTE_BWD_SM80_KERNELS(FLASHCUTE_PRINT_SM80_BWD)
#undef FLASHCUTE_PRINT_SM80_BWD
}

template <class Element>
void print_sm90_all() {
  using flashcute::FwdVariant;
#define FLASHCUTE_PRINT_SM90(HEAD_DIM, VARIANT)                                                                \
  print_sm90<flashcute::sm90::KernelTraits<Element, HEAD_DIM, FwdVariant::VARIANT == FwdVariant::kCausal,      \
                                           FwdVariant::VARIANT == FwdVariant::kNonCausalLongK>>();
  FLASHCUTE_FWD_SM90_KERNELS(FLASHCUTE_PRINT_SM90)
#undef FLASHCUTE_PRINT_SM90
#define FLASHCUTE_PRINT_SM90_BWD(HEAD_DIM, VARIANT) \
  print_sm90_bwd<flashcute::sm90::BwdKernelTraitsFor<Element, HEAD_DIM>>();
  FLASHCUTE_BWD_SM90_KERNELS(FLASHCUTE_PRINT_SM90_BWD)
#undef FLASHCUTE_PRINT_SM90_BWD
}

}  // namespace

int main() {
  print_sm80_all<cutlass::half_t>();
  print_sm80_all<cutlass::bfloat16_t>();
  print_sm90_all<cutlass::half_t>();
  print_sm90_all<cutlass::bfloat16_t>();
  return 0;
}
