// Prints every layout and atom of every shipped kernel configuration, from the kernels' own trait headers.
//
// Host-only: compiled with g++ -std=c++17 -Icsrc -I<CUTLASS include> -I<CUDA include> (no GPU, no nvcc).
// tests/test_kernel_layouts.py compares the output with flashcute.kernel_configs, line by line;
// flashcute.explain draws from that mirror. Every string is CuTe's own cute::print.
//
// Output: one block per configuration, "== <arch> <dtype> hdim<d>", then "<name>: <value>" lines.
#include <cstdio>

#include <cute/tensor.hpp>

#include "sm80/kernel_traits.h"

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
void print_sm80() {
  using Element = typename Traits::Element;
  printf("== sm80 %s hdim%d\n", dtype_name<Element>(), Traits::kHeadDim);
  field("kBlockM", Traits::kBlockM);
  field("kBlockN", Traits::kBlockN);
  field("kHeadDim", Traits::kHeadDim);
  field("kNWarps", Traits::kNWarps);
  field("kNThreads", Traits::kNThreads);
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

template <class Element>
void print_sm80_all() {
  print_sm80<typename flashcute::sm80::DefaultTraits<Element, 64>::type>();
  print_sm80<typename flashcute::sm80::DefaultTraits<Element, 96>::type>();
  print_sm80<typename flashcute::sm80::DefaultTraits<Element, 128>::type>();
  print_sm80<typename flashcute::sm80::DefaultTraits<Element, 192>::type>();
  print_sm80<typename flashcute::sm80::DefaultTraits<Element, 256>::type>();
}

}  // namespace

int main() {
  print_sm80_all<cutlass::half_t>();
  print_sm80_all<cutlass::bfloat16_t>();
  return 0;
}
