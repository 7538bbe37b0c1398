#include "flashcute_cute_all.hpp"
#include <cute/arch/mma_sm90_gmma_ext.hpp>          // GMMA N = 24, 40, ...
#include <cute/atom/mma_traits_sm90_gmma_ext.hpp>
// Oracle for flashcute.layout atoms / TiledMMA / TiledCopy: real CuTe, host only.
//
// The configurations are C++ types, so they are fixed here; stdin picks what to print about
// them, so the Python side can ask for any tensor shape, stride or thread at run time.
// The corpus is split into parts (ORACLE_PART, defined by the test before compiling) so each
// translation unit stays small enough to build in parallel.  Parts 0-2 span every atom and every
// builder (plain, widened, deep and permuted TiledMMAs, GMMA, tv copies, copies from a TiledMMA's
// A/B/C, make_tiled_copy_C_atom) and are the default run; parts 3-5 hold the other combinations and
// join with FLASHCUTE_ORACLE_FULL=1.
//
// stdin, one query per line; stdout, one line per query (fields separated by a tab):
//   list                                  the part's configurations, one per line, then "end":
//                                           "mma-atom <id> <op>", "copy-atom <id> <op> <bits>",
//                                           "mma <id> <op> <thr> <perm>",
//                                           "copy <id> mma<A|B|C> <copy-op> <bits> <mma-op> <thr> <perm>",
//                                           "copy <id> tv <copy-op> <bits> <thr> <val>"
//                                         with " INVALID" appended where CuTe's static asserts reject it,
//                                         " IDENT" where the configuration answers identC / identS
//   mma-atom <id>                         ThrID, Shape_MNK, LayoutA_TV, LayoutB_TV, LayoutC_TV
//   copy-atom <id>                        ThrID, ValLayoutSrc, ValLayoutDst, ValLayoutRef
//   mma <id> tv                           ThrLayoutVMNK, tile_shape, layoutA_TV, layoutB_TV, layoutC_TV
//   mma <id> part<A|B|C> M N sM sN thr    layout and offset of thr's partition of (M,N):(sM,sN)
//   mma <id> frag<A|B|C> thr              partition_fragment of a (2*tile):LayoutRight tensor
//   mma <id> identC M N thr               print of thr's partition_C of make_identity_tensor((M,N))
//   copy <id> tv                          Tiler_MN, TiledLayout_TV, layoutS_TV, layoutD_TV
//   copy <id> part<S|D> M N sM sN thr     layout and offset of thr's partition
//   copy <id> retile thr                  retile_D of a register fragment (see retile_fragment)
//   copy <id> identS M N thr              print of thr's partition_S of make_identity_tensor((M,N))
#include <cstdint>
#include <functional>
#include <sstream>
#include <type_traits>
#include <vector>

#ifndef ORACLE_PART
#define ORACLE_PART 0
#endif

using namespace cute;

struct Entry {
  std::function<void()> describe;                  // its "list" line
  std::function<void(std::istringstream&)> query;  // answers one query
};

static std::vector<Entry> mma_atoms, copy_atoms, mmas, copies;

static void tab() { printf("\t"); }

// Only differences of pointers are printed, so any base address does.
template <class T>
T* fake_base() { return reinterpret_cast<T*>(uintptr_t(1) << 32); }

template <class T, class Tensor>
void print_partition(Tensor const& part) {
  print(part.layout()); tab();
  printf("%ld", long(raw_pointer_cast(part.data()) - fake_base<T>()));
}

// The (M,N):(sM,sN) tensor a query names.
template <class T>
auto dynamic_tensor(std::istringstream& in) {
  int m, n, sm, sn;
  in >> m >> n >> sm >> sn;
  return make_tensor(make_gmem_ptr(fake_base<T>()), make_layout(make_shape(m, n), make_stride(sm, sn)));
}

template <class T, class Shape2>
auto static_row_major(Shape2 const& shape) {
  return make_tensor(make_smem_ptr(fake_base<T>()), make_layout(shape, LayoutRight{}));
}

template <class T> constexpr int bits_of = int(sizeof_bits<T>::value);

//
// Atoms
//

template <class Op>
void add_mma_atom(char const* name) {
  int id = int(mma_atoms.size());
  mma_atoms.push_back({
    [=] { printf("mma-atom %d %s", id, name); },
    [](std::istringstream&) {
      using Atom = MMA_Atom<Op>;
      print(typename Atom::ThrID{});      tab();
      print(typename Atom::Shape_MNK{});  tab();
      print(typename Atom::LayoutA_TV{}); tab();
      print(typename Atom::LayoutB_TV{}); tab();
      print(typename Atom::LayoutC_TV{});
    }});
}

template <class Atom>
void print_copy_atom() {
  print(typename Atom::ThrID{});        tab();
  print(typename Atom::ValLayoutSrc{}); tab();
  print(typename Atom::ValLayoutDst{}); tab();
  print(typename Atom::ValLayoutRef{});
}

template <class Op, class T>
void add_copy_atom(char const* name) {
  int id = int(copy_atoms.size());
  copy_atoms.push_back({
    [=] { printf("copy-atom %d %s %d", id, name, bits_of<T>); },
    [](std::istringstream&) { print_copy_atom<Copy_Atom<Op, T>>(); }});
}

//
// TiledMMA
//

// Ident: whether the configuration answers identC / identS (partitions of identity tensors: their
// ArithTuple algebra doubles a configuration's compile time, so only some configurations have it).
template <class Op, class Thr, class Perm, bool Ident>
void query_mma(std::istringstream& in) {
  auto mma = make_tiled_mma(Op{}, Thr{}, Perm{});
  using Atom = MMA_Atom<Op>;
  auto tile = tile_shape(mma);
  std::string op;
  in >> op;
  if (op == "tv") {
    print(mma.get_thr_layout_vmnk()); tab();
    print(tile);                      tab();
    print(mma.get_layoutA_TV());      tab();
    print(mma.get_layoutB_TV());      tab();
    print(mma.get_layoutC_TV());
  } else if (op == "partA" || op == "partB" || op == "partC") {
    auto t = dynamic_tensor<half_t>(in);
    int thr; in >> thr;
    auto thr_mma = mma.get_slice(thr);
    if (op == "partA") print_partition<half_t>(thr_mma.partition_A(t));
    if (op == "partB") print_partition<half_t>(thr_mma.partition_B(t));
    if (op == "partC") print_partition<half_t>(thr_mma.partition_C(t));
  } else if (op == "identC") {
    int m, n, thr;
    in >> m >> n >> thr;
    if constexpr (Ident) print(mma.get_slice(thr).partition_C(make_identity_tensor(make_shape(m, n))));
    else printf("ERR no identity queries");
  } else if (op == "fragA" || op == "fragB" || op == "fragC") {
    int thr; in >> thr;
    auto thr_mma = mma.get_slice(thr);
    // GMMA operands read from shared memory are descriptors, not register fragments
    constexpr bool a_in_regs = std::is_same_v<typename Atom::FrgTypeA, typename Atom::ValTypeA>;
    constexpr bool b_in_regs = std::is_same_v<typename Atom::FrgTypeB, typename Atom::ValTypeB>;
    auto sA = static_row_major<typename Atom::ValTypeA>(make_shape(get<0>(tile) * _2{}, get<2>(tile) * _2{}));
    auto sB = static_row_major<typename Atom::ValTypeB>(make_shape(get<1>(tile) * _2{}, get<2>(tile) * _2{}));
    auto sC = static_row_major<typename Atom::ValTypeC>(make_shape(get<0>(tile) * _2{}, get<1>(tile) * _2{}));
    if (op == "fragA") { if constexpr (a_in_regs) print(thr_mma.partition_fragment_A(sA).layout()); else printf("DESCRIPTOR"); }
    if (op == "fragB") { if constexpr (b_in_regs) print(thr_mma.partition_fragment_B(sB).layout()); else printf("DESCRIPTOR"); }
    if (op == "fragC") print(thr_mma.partition_fragment_C(sC).layout());
  } else {
    printf("ERR unknown mma query %s", op.c_str());
  }
}

template <class Op, class Thr, class Perm, bool Ident = false>
void add_mma(char const* name) {
  int id = int(mmas.size());
  mmas.push_back({
    [=] { printf("mma %d %s ", id, name); print(Thr{}); printf(" "); print(Perm{}); if (Ident) printf(" IDENT"); },
    query_mma<Op, Thr, Perm, Ident>});
}

//
// TiledCopy
//

template <bool Ident, class Copy, class Retile>
void query_copy(Copy const& copy, std::istringstream& in, Retile retile) {
  std::string op;
  in >> op;
  if (op == "tv") {
    print(typename Copy::Tiler_MN{});       tab();
    print(typename Copy::TiledLayout_TV{}); tab();
    print(copy.get_layoutS_TV());           tab();
    print(copy.get_layoutD_TV());
  } else if (op == "partS" || op == "partD") {
    auto t = dynamic_tensor<half_t>(in);
    int thr; in >> thr;
    auto thr_copy = copy.get_slice(thr);
    if (op == "partS") print_partition<half_t>(thr_copy.partition_S(t));
    else               print_partition<half_t>(thr_copy.partition_D(t));
  } else if (op == "identS") {
    int m, n, thr;
    in >> m >> n >> thr;
    if constexpr (Ident) print(copy.get_slice(thr).partition_S(make_identity_tensor(make_shape(m, n))));
    else printf("ERR no identity queries");
  } else if (op == "retile") {
    int thr; in >> thr;
    print(copy.get_slice(thr).retile_D(retile(thr)).layout());
  } else {
    printf("ERR unknown copy query %s", op.c_str());
  }
}

// Whether CuTe's TiledCopy static asserts accept this atom for this TV layout.
template <class Atom, class LayoutTV>
constexpr bool copy_fits() {
  using Ref = typename Atom::ValLayoutRef;
  return size<0>(LayoutTV{}) % size<0>(Ref{}) == 0 && size<1>(LayoutTV{}) % size<1>(Ref{}) == 0;
}

// make_tiled_copy_A|B|C(Copy_Atom<CopyOp,T>, make_tiled_mma(Op, Thr, Perm)); retile_D takes the
// thread's partition_fragment_A|B|C of a (2*tile):LayoutRight tensor, as kernels do.
template <class CopyOp, class T, char Which, class Op, class Thr, class Perm, bool Ident = false>
void add_copy_from_mma(char const* copy_name, char const* mma_name) {
  using Atom = Copy_Atom<CopyOp, T>;
  using Mma = decltype(make_tiled_mma(Op{}, Thr{}, Perm{}));
  int id = int(copies.size());
  constexpr bool fits = copy_fits<Atom, std::conditional_t<Which == 'A', decltype(Mma{}.get_layoutA_TV()),
                                        std::conditional_t<Which == 'B', decltype(Mma{}.get_layoutB_TV()),
                                                                         decltype(Mma{}.get_layoutC_TV())>>>();
  auto describe = [=] {
    printf("copy %d mma%c %s %d %s ", id, Which, copy_name, bits_of<T>, mma_name);
    print(Thr{}); printf(" "); print(Perm{});
    if (!fits) printf(" INVALID");
    else if (Ident) printf(" IDENT");
  };
  if constexpr (fits) {
    copies.push_back({describe, [](std::istringstream& in) {
      Mma mma{};
      auto tile = tile_shape(mma);
      auto retile = [&](int thr) {
        auto thr_mma = mma.get_slice(thr);
        using MAtom = MMA_Atom<Op>;
        if constexpr (Which == 'A')
          return thr_mma.partition_fragment_A(static_row_major<typename MAtom::ValTypeA>(make_shape(get<0>(tile) * _2{}, get<2>(tile) * _2{})));
        else if constexpr (Which == 'B')
          return thr_mma.partition_fragment_B(static_row_major<typename MAtom::ValTypeB>(make_shape(get<1>(tile) * _2{}, get<2>(tile) * _2{})));
        else
          return thr_mma.partition_fragment_C(static_row_major<typename MAtom::ValTypeC>(make_shape(get<0>(tile) * _2{}, get<1>(tile) * _2{})));
      };
      if constexpr (Which == 'A') query_copy<Ident>(make_tiled_copy_A(Atom{}, mma), in, retile);
      else if constexpr (Which == 'B') query_copy<Ident>(make_tiled_copy_B(Atom{}, mma), in, retile);
      else query_copy<Ident>(make_tiled_copy_C(Atom{}, mma), in, retile);
    }});
  } else {
    copies.push_back({describe, [](std::istringstream&) { printf("INVALID"); }});
  }
}

// make_tiled_copy_C_atom(Copy_Atom<CopyOp,T>, make_tiled_mma(Op, Thr, Perm)): the smallest tile of C
// one atom call per thread covers (pipelined epilogues); retile_D takes the thread's accumulators.
template <class CopyOp, class T, class Op, class Thr, class Perm, bool Ident = false>
void add_copy_C_atom(char const* copy_name, char const* mma_name) {
  using Atom = Copy_Atom<CopyOp, T>;
  using Mma = decltype(make_tiled_mma(Op{}, Thr{}, Perm{}));
  int id = int(copies.size());
  copies.push_back({
    [=] {
      printf("copy %d mmaC_atom %s %d %s ", id, copy_name, bits_of<T>, mma_name); print(Thr{}); printf(" "); print(Perm{});
      if (Ident) printf(" IDENT");
    },
    [](std::istringstream& in) {
      Mma mma{};
      auto tile = tile_shape(mma);
      auto retile = [&](int thr) {
        return mma.get_slice(thr).partition_fragment_C(
            static_row_major<typename MMA_Atom<Op>::ValTypeC>(make_shape(get<0>(tile) * _2{}, get<1>(tile) * _2{})));
      };
      query_copy<Ident>(make_tiled_copy_C_atom(Atom{}, mma), in, retile);
    }});
}

// make_tiled_copy(Copy_Atom<CopyOp,T>, thr_layout, val_layout); retile_D takes a register
// fragment made like the thread's partition_D of one tile.
template <class CopyOp, class T, class Thr, class Val, bool Ident = false>
void add_copy_tv(char const* copy_name) {
  using Atom = Copy_Atom<CopyOp, T>;
  int id = int(copies.size());
  constexpr bool fits = size(Val{}) % Atom::NumValSrc == 0 && size(Thr{}) % size(typename Atom::ThrID{}) == 0;
  auto describe = [=] {
    printf("copy %d tv %s %d ", id, copy_name, bits_of<T>);
    print(Thr{}); printf(" "); print(Val{});
    if (!fits) printf(" INVALID");
    else if (Ident) printf(" IDENT");
  };
  if constexpr (fits) {
    copies.push_back({describe, [](std::istringstream& in) {
      auto copy = make_tiled_copy(Atom{}, Thr{}, Val{});
      auto retile = [&](int thr) {
        using Tiler = typename decltype(copy)::Tiler_MN;
        auto tile = make_tensor(make_gmem_ptr(fake_base<T>()), make_layout(Tiler{}));
        return make_fragment_like(copy.get_slice(thr).partition_D(tile));
      };
      query_copy<Ident>(copy, in, retile);
    }});
  } else {
    copies.push_back({describe, [](std::istringstream&) { printf("INVALID"); }});
  }
}

//
// The corpus
//

using Plain = Tile<Underscore, Underscore, Underscore>;

// Permutations of an atom (AM,AN,AK) tiled by Thr: none, two atoms along N (FlashAttention-2's
// Tile<16*warps,16,16>), value repetition in M, N and K, and true permutations of M and N.
template <class Op, class Thr>
struct Perms {
  static constexpr int TM = size<0>(Thr{}), TN = size<1>(Thr{}), TK = size<2>(Thr{});
  static constexpr int AM = size<0>(typename MMA_Traits<Op>::Shape_MNK{});
  static constexpr int AN = size<1>(typename MMA_Traits<Op>::Shape_MNK{});
  static constexpr int AK = size<2>(typename MMA_Traits<Op>::Shape_MNK{});
  using Widened  = Tile<Int<AM * TM>, Int<2 * AN * TN>, Int<AK * TK>>;
  using Deep     = Tile<Int<2 * AM * TM>, Int<2 * AN * TN>, Int<2 * AK * TK>>;
  using Permuted = Tile<Layout<Shape<_2, Int<AM / 2>, Int<TM>>, Stride<Int<AM / 2>, _1, Int<AM>>>,
                        Layout<Shape<Int<AN>, _2, Int<TN>>, Stride<_2, _1, Int<2 * AN>>>,
                        Underscore>;
};

#define GMMA(N, KIND) SM90_64x##N##x16_##KIND<GMMA::Major::K, GMMA::Major::K>

using W1 = Layout<Shape<_1, _1, _1>>;
using W2 = Layout<Shape<_2, _1, _1>>;
using W4 = Layout<Shape<_4, _1, _1>>;
using W8 = Layout<Shape<_8, _1, _1>>;
using W14 = Layout<Shape<_1, _4, _1>>;
using W12 = Layout<Shape<_1, _2, _1>>;
using W22RowMajor = Layout<Shape<_2, _2, _1>, Stride<_2, _1, _0>>;
using W42 = Layout<Shape<_4, _2, _1>>;
using W2K2 = Layout<Shape<_2, _1, _2>>;

using BF16_16x8x16 = SM80_16x8x16_F32BF16BF16F32_TN;
using F16_16x8x16 = SM80_16x8x16_F32F16F16F32_TN;
using F16_16x8x8 = SM80_16x8x8_F32F16F16F32_TN;
using BF16_16x8x8 = SM80_16x8x8_F32BF16BF16F32_TN;

// Each TiledMMA / TiledCopy costs seconds of compile time, so the corpus spans the algorithm's
// branches (plain, widened, deep and permuted tiles; row-major and K-split warp layouts; GMMA
// with one and two warpgroups) with few types, and leaves the breadth to run-time queries.
static void register_part() {
#if ORACLE_PART == 0
  add_mma_atom<SM80_16x8x8_F16F16F16F16_TN>("SM80_16x8x8_F16F16F16F16_TN");
  add_mma_atom<SM80_16x8x16_F16F16F16F16_TN>("SM80_16x8x16_F16F16F16F16_TN");
  add_mma_atom<SM80_16x8x8_F32F16F16F32_TN>("SM80_16x8x8_F32F16F16F32_TN");
  add_mma_atom<SM80_16x8x16_F32F16F16F32_TN>("SM80_16x8x16_F32F16F16F32_TN");
  add_mma_atom<SM80_16x8x8_F32BF16BF16F32_TN>("SM80_16x8x8_F32BF16BF16F32_TN");
  add_mma_atom<SM80_16x8x16_F32BF16BF16F32_TN>("SM80_16x8x16_F32BF16BF16F32_TN");
#define ADD_GMMA_ATOMS(N)                                                        \
  add_mma_atom<GMMA(N, F16F16F16_SS)>("SM90_64x" #N "x16_F16F16F16_SS");          \
  add_mma_atom<GMMA(N, F32F16F16_SS)>("SM90_64x" #N "x16_F32F16F16_SS");          \
  add_mma_atom<GMMA(N, F32F16F16_RS)>("SM90_64x" #N "x16_F32F16F16_RS");          \
  add_mma_atom<GMMA(N, F32BF16BF16_SS)>("SM90_64x" #N "x16_F32BF16BF16_SS");      \
  add_mma_atom<GMMA(N, F32BF16BF16_RS)>("SM90_64x" #N "x16_F32BF16BF16_RS");
  ADD_GMMA_ATOMS(8) ADD_GMMA_ATOMS(16) ADD_GMMA_ATOMS(24) ADD_GMMA_ATOMS(32) ADD_GMMA_ATOMS(64)
  ADD_GMMA_ATOMS(96) ADD_GMMA_ATOMS(128) ADD_GMMA_ATOMS(192) ADD_GMMA_ATOMS(256)

  add_copy_atom<SM75_U32x1_LDSM_N, half_t>("SM75_U32x1_LDSM_N");
  add_copy_atom<SM75_U32x2_LDSM_N, half_t>("SM75_U32x2_LDSM_N");
  add_copy_atom<SM75_U32x4_LDSM_N, half_t>("SM75_U32x4_LDSM_N");
  add_copy_atom<SM75_U16x2_LDSM_T, half_t>("SM75_U16x2_LDSM_T");
  add_copy_atom<SM75_U16x4_LDSM_T, half_t>("SM75_U16x4_LDSM_T");
  add_copy_atom<SM75_U16x8_LDSM_T, half_t>("SM75_U16x8_LDSM_T");
  add_copy_atom<SM75_U32x1_LDSM_N, float>("SM75_U32x1_LDSM_N");
  add_copy_atom<SM75_U32x4_LDSM_N, float>("SM75_U32x4_LDSM_N");
  add_copy_atom<SM75_U32x4_LDSM_N, uint8_t>("SM75_U32x4_LDSM_N");
  add_copy_atom<SM90_U32x1_STSM_N, half_t>("SM90_U32x1_STSM_N");
  add_copy_atom<SM90_U32x2_STSM_N, half_t>("SM90_U32x2_STSM_N");
  add_copy_atom<SM90_U32x4_STSM_N, half_t>("SM90_U32x4_STSM_N");
  add_copy_atom<SM90_U16x2_STSM_T, half_t>("SM90_U16x2_STSM_T");
  add_copy_atom<SM90_U16x4_STSM_T, half_t>("SM90_U16x4_STSM_T");
  add_copy_atom<SM90_U16x8_STSM_T, half_t>("SM90_U16x8_STSM_T");
  add_copy_atom<SM80_CP_ASYNC_CACHEGLOBAL<uint128_t>, half_t>("SM80_CP_ASYNC_CACHEGLOBAL<uint128_t>");
  add_copy_atom<SM80_CP_ASYNC_CACHEALWAYS<uint128_t>, bfloat16_t>("SM80_CP_ASYNC_CACHEALWAYS<uint128_t>");
  add_copy_atom<SM80_CP_ASYNC_CACHEGLOBAL<uint128_t>, float>("SM80_CP_ASYNC_CACHEGLOBAL<uint128_t>");
  add_copy_atom<SM80_CP_ASYNC_CACHEALWAYS<uint64_t>, half_t>("SM80_CP_ASYNC_CACHEALWAYS<uint64_t>");
  add_copy_atom<SM80_CP_ASYNC_CACHEGLOBAL_ZFILL<uint128_t>, half_t>("SM80_CP_ASYNC_CACHEGLOBAL_ZFILL<uint128_t>");
  add_copy_atom<UniversalCopy<uint128_t>, half_t>("UniversalCopy<uint128_t>");
  add_copy_atom<UniversalCopy<uint128_t>, float>("UniversalCopy<uint128_t>");
  add_copy_atom<UniversalCopy<uint64_t>, half_t>("UniversalCopy<uint64_t>");
  add_copy_atom<UniversalCopy<uint32_t>, half_t>("UniversalCopy<uint32_t>");
  add_copy_atom<UniversalCopy<half_t>, half_t>("UniversalCopy<half_t>");
  add_copy_atom<UniversalCopy<float>, float>("UniversalCopy<float>");
  add_copy_atom<DefaultCopy, half_t>("DefaultCopy");
  add_copy_atom<AutoVectorizingCopyWithAssumedAlignment<128>, half_t>("AutoVectorizingCopyWithAssumedAlignment<128>");

  // TiledMMA: plain, widened (FlashAttention-2's Tile<16*warps,16,16>), deep and permuted tiles
  add_mma<BF16_16x8x16, W1, Plain, true>("SM80_16x8x16_F32BF16BF16F32_TN");
  add_mma<BF16_16x8x16, W4, Perms<BF16_16x8x16, W4>::Widened, true>("SM80_16x8x16_F32BF16BF16F32_TN");
  add_mma<BF16_16x8x16, W22RowMajor, Perms<BF16_16x8x16, W22RowMajor>::Deep>("SM80_16x8x16_F32BF16BF16F32_TN");
  add_mma<BF16_16x8x16, W2K2, Perms<BF16_16x8x16, W2K2>::Permuted>("SM80_16x8x16_F32BF16BF16F32_TN");
#elif ORACLE_PART == 1
  // GMMA with two consumer warpgroups and with one (register-sourced A)
  add_mma<GMMA(128, F32BF16BF16_SS), W2, Plain, true>("SM90_64x128x16_F32BF16BF16_SS");
  add_mma<GMMA(64, F32F16F16_RS), W1, Plain>("SM90_64x64x16_F32F16F16_RS");

  // gmem <-> smem copies: FlashAttention-2's 16x8 row-major threads with 8 values each, and others
  using RowMajor16x8 = Layout<Shape<_16, _8>, Stride<_8, _1>>;
  using RowMajor32x4 = Layout<Shape<_32, _4>, Stride<_4, _1>>;
  using ColMajor16x8 = Layout<Shape<_16, _8>>;
  using RowMajor8x4  = Layout<Shape<_8, _4>, Stride<_4, _1>>;
  using Nested       = Layout<Shape<Shape<_4, _2>, _4>, Stride<Stride<_1, _16>, _4>>;
  add_copy_tv<SM80_CP_ASYNC_CACHEGLOBAL<uint128_t>, half_t, RowMajor16x8, Layout<Shape<_1, _8>>, true>("SM80_CP_ASYNC_CACHEGLOBAL<uint128_t>");
  add_copy_tv<SM80_CP_ASYNC_CACHEGLOBAL<uint128_t>, half_t, RowMajor16x8, Layout<Shape<_1, _4>>>("SM80_CP_ASYNC_CACHEGLOBAL<uint128_t>");
  add_copy_tv<SM80_CP_ASYNC_CACHEGLOBAL<uint128_t>, float, RowMajor32x4, Layout<Shape<_1, _4>>>("SM80_CP_ASYNC_CACHEGLOBAL<uint128_t>");
  add_copy_tv<UniversalCopy<uint128_t>, half_t, ColMajor16x8, Layout<Shape<_8, _1>>, true>("UniversalCopy<uint128_t>");
  add_copy_tv<UniversalCopy<uint64_t>, half_t, ColMajor16x8, Layout<Shape<_4, _2>>>("UniversalCopy<uint64_t>");
  add_copy_tv<UniversalCopy<uint128_t>, half_t, RowMajor8x4, Layout<Shape<_2, _8>, Stride<_8, _1>>>("UniversalCopy<uint128_t>");
  add_copy_tv<UniversalCopy<half_t>, half_t, Nested, Layout<Shape<_1, _8>>>("UniversalCopy<half_t>");
  add_copy_tv<UniversalCopy<uint64_t>, half_t, Layout<_32>, Layout<_8>, true>("UniversalCopy<uint64_t>");
#elif ORACLE_PART == 2
  // smem -> registers (ldmatrix) and registers -> smem (stmatrix) around FlashAttention-2's TiledMMA
  using FA2 = Perms<BF16_16x8x16, W4>::Widened;   // Tile<_64,_16,_16>
  add_copy_from_mma<SM75_U32x4_LDSM_N, half_t, 'A', BF16_16x8x16, W4, FA2, true>("SM75_U32x4_LDSM_N", "SM80_16x8x16_F32BF16BF16F32_TN");
  add_copy_from_mma<SM75_U16x8_LDSM_T, half_t, 'B', BF16_16x8x16, W4, FA2>("SM75_U16x8_LDSM_T", "SM80_16x8x16_F32BF16BF16F32_TN");
  add_copy_from_mma<SM90_U32x4_STSM_N, half_t, 'C', BF16_16x8x16, W4, FA2>("SM90_U32x4_STSM_N", "SM80_16x8x16_F32BF16BF16F32_TN");
  // FlashAttention-3's epilogue: stmatrix from the accumulators of two consumer warpgroups
  add_copy_from_mma<SM90_U32x4_STSM_N, half_t, 'C', GMMA(128, F32BF16BF16_SS), W2, Plain>("SM90_U32x4_STSM_N", "SM90_64x128x16_F32BF16BF16_SS");
  // pipelined epilogues: make_tiled_copy_C_atom
  add_copy_C_atom<SM90_U32x4_STSM_N, half_t, BF16_16x8x16, W4, Perms<BF16_16x8x16, W4>::Widened, true>("SM90_U32x4_STSM_N", "SM80_16x8x16_F32BF16BF16F32_TN");
#elif ORACLE_PART == 3  // FLASHCUTE_ORACLE_FULL=1 only, from here on
  // the other TiledMMAs: other atoms, warp layouts and permutations; GMMA N = 96, 256, 24
  add_mma<F16_16x8x16, W14, Plain, true>("SM80_16x8x16_F32F16F16F32_TN");
  add_mma<F16_16x8x8, W8, Perms<F16_16x8x8, W8>::Widened>("SM80_16x8x8_F32F16F16F32_TN");
  add_mma<F16_16x8x8, W42, Perms<F16_16x8x8, W42>::Permuted>("SM80_16x8x8_F32F16F16F32_TN");
  add_mma<BF16_16x8x8, W2, Perms<BF16_16x8x8, W2>::Deep>("SM80_16x8x8_F32BF16BF16F32_TN");
  add_mma<GMMA(96, F32F16F16_SS), W12, Plain>("SM90_64x96x16_F32F16F16_SS");
  add_mma<GMMA(256, F32BF16BF16_RS), W2, Plain>("SM90_64x256x16_F32BF16BF16_RS");
  add_mma<GMMA(24, F32F16F16_RS), W1, Plain, true>("SM90_64x24x16_F32F16F16_RS");
#elif ORACLE_PART == 4
  // copies from the A, B and C of other TiledMMAs
  using FA2 = Perms<BF16_16x8x16, W4>::Widened;   // Tile<_64,_16,_16>
  add_copy_from_mma<SM75_U32x4_LDSM_N, half_t, 'B', BF16_16x8x16, W4, FA2>("SM75_U32x4_LDSM_N", "SM80_16x8x16_F32BF16BF16F32_TN");
  add_copy_from_mma<SM75_U32x2_LDSM_N, half_t, 'A', BF16_16x8x16, W1, Plain, true>("SM75_U32x2_LDSM_N", "SM80_16x8x16_F32BF16BF16F32_TN");
  add_copy_from_mma<SM75_U32x4_LDSM_N, half_t, 'B', BF16_16x8x16, W1, Plain>("SM75_U32x4_LDSM_N", "SM80_16x8x16_F32BF16BF16F32_TN");
  add_copy_from_mma<SM75_U32x1_LDSM_N, half_t, 'A', BF16_16x8x16, W22RowMajor, Perms<BF16_16x8x16, W22RowMajor>::Deep>("SM75_U32x1_LDSM_N", "SM80_16x8x16_F32BF16BF16F32_TN");
  add_copy_from_mma<SM75_U32x2_LDSM_N, half_t, 'B', BF16_16x8x16, W2K2, Perms<BF16_16x8x16, W2K2>::Permuted>("SM75_U32x2_LDSM_N", "SM80_16x8x16_F32BF16BF16F32_TN");
  add_copy_from_mma<SM75_U16x4_LDSM_T, half_t, 'B', F16_16x8x8, W42, Perms<F16_16x8x8, W42>::Permuted>("SM75_U16x4_LDSM_T", "SM80_16x8x8_F32F16F16F32_TN");
  add_copy_from_mma<UniversalCopy<uint32_t>, half_t, 'C', F16_16x8x8, W8, Perms<F16_16x8x8, W8>::Widened>("UniversalCopy<uint32_t>", "SM80_16x8x8_F32F16F16F32_TN");
#elif ORACLE_PART == 5
  // make_tiled_copy_C_atom around a permuted TiledMMA and a GMMA
  add_copy_C_atom<SM90_U32x2_STSM_N, half_t, F16_16x8x8, W42, Perms<F16_16x8x8, W42>::Permuted>("SM90_U32x2_STSM_N", "SM80_16x8x8_F32F16F16F32_TN");
  add_copy_C_atom<UniversalCopy<uint32_t>, half_t, GMMA(64, F32F16F16_RS), W2, Plain>("UniversalCopy<uint32_t>", "SM90_64x64x16_F32F16F16_RS");
#endif
}

int main() {
  register_part();
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string cmd;
    in >> cmd;
    std::vector<Entry>* table = cmd == "mma-atom" ? &mma_atoms : cmd == "copy-atom" ? &copy_atoms
                              : cmd == "mma" ? &mmas : cmd == "copy" ? &copies : nullptr;
    if (cmd == "list") {
      for (auto* t : {&mma_atoms, &copy_atoms, &mmas, &copies})
        for (auto& e : *t) { e.describe(); printf("\n"); }
      printf("end");
    } else if (table) {
      size_t id = size_t(-1);
      in >> id;
      if (id < table->size()) (*table)[id].query(in);
      else printf("ERR no %s %zu", cmd.c_str(), id);
    } else if (!cmd.empty()) {
      printf("ERR unknown command %s", cmd.c_str());
    }
    printf("\n");
    fflush(stdout);
  }
}
