#include "flashcute_cute_all.hpp"
// Oracle for tensors and swizzles on run-time integers: one request per stdin line; each answer ends
// with "\x1e\n" (the companion of dynamic_layouts.cpp; tests/layout/test_oracle_dynamic.py drives both).
// Tilers, thread layouts and swizzles are C++ types, so they come from the numbered tables below (the
// Python side has the same tables); tensor shapes, strides, coordinates and thread indices are read.
//
// Requests:
//   tile T K m n dm dn i j       local_tile of an (m,n):(dm,dn) counting tensor by tiler T, coordinate
//                                kind K (0: (i,j), 1: (_,j), 2: (i,_)); its layout and offset
//   ident T m n i j              identity tensor (m,n), local_tile by tiler T at (i,j): print(s) and
//                                elem_less(s(k), (m,n)) for every k
//   partition R m n dm dn idx    local_partition of an (m,n):(dm,dn) counting tensor by thread layout R
//   identpart R m n idx          local_partition of the identity tensor (m,n) by thread layout R: print(s)
//                                and elem_less(s(k), (m,n)) for every k
//   swizzle W x...               Swizzle number W applied to each x, comma-terminated
//   swz W P s... d...            composition(Swizzle W, L) for L of profile P (1: s0:d0, 2: (s0,s1):(d0,d1),
//                                6: (s0,s1):(_1,d1)): print it, then its offsets
//   swzcast V N P s... d...      upcast<N> of composition(Swizzle V, L) (P 2 or 6), and for P 6 downcast<N> too
#include <iostream>
#include <sstream>
#include <string>

using namespace cute;

static int rd(std::istream& in) { int v = 0; in >> v; return v; }

template <class F>
void with_tiler(int t, F&& f)
{
  switch (t) {
    case 0: f(make_shape(Int<64>{}, Int<64>{})); break;
    case 1: f(make_shape(Int<128>{}, Int<64>{})); break;
    case 2: f(make_shape(Int<16>{}, Int<8>{})); break;
    case 3: f(make_shape(Int<32>{}, Int<128>{})); break;
    case 4: f(make_shape(Int<1>{}, Int<64>{})); break;
    case 5: f(make_shape(Int<64>{}, Int<1>{})); break;
    case 6: f(make_shape(Int<1>{}, Int<1>{})); break;
    default: printf("bad tiler %d", t);
  }
}

template <class F>
void with_threads(int r, F&& f)
{
  switch (r) {
    case 0: f(Layout<Shape<_2, _16>>{}); break;
    case 1: f(make_layout(Shape<_16, _8>{}, LayoutRight{})); break;
    case 2: f(Layout<Shape<_4, _8>, Stride<_8, _1>>{}); break;
    case 3: f(Layout<Shape<_32, _4>>{}); break;
    case 4: f(Layout<Shape<_1, _32>>{}); break;
    case 5: f(Layout<Shape<_32, _1>>{}); break;
    case 6: f(make_layout(Shape<_1, _8>{}, LayoutRight{})); break;
    default: printf("bad thread layout %d", r);
  }
}

#define FC_SWIZZLES(X) X(0,3,3) X(1,3,3) X(2,3,3) X(3,3,3) X(1,4,3) X(2,4,3) X(3,4,3) X(2,0,3) \
                       X(3,2,3) X(2,1,5) X(1,2,1) X(3,0,-3) X(2,4,-4) X(0,4,3) X(3,3,4) X(1,0,2)
// Swizzles whose upcast degenerates for some N in {2,4,8} (C++ prints Sw<0,0,S>), and ones that do not.
#define FC_CAST_SWIZZLES(X) X(1,2,3) X(2,1,3) X(3,0,3) X(2,3,3) X(3,4,3) X(1,1,2)

template <class F>
void with_swizzle(int w, F&& f)
{
  int index = 0;
#define FC_CASE(B, M, S) if (w == index++) { f(Swizzle<B, M, S>{}); return; }
  FC_SWIZZLES(FC_CASE)
#undef FC_CASE
  printf("bad swizzle %d", w);
}

template <class F>
void with_cast_swizzle(int w, F&& f)
{
  int index = 0;
#define FC_CASE(B, M, S) if (w == index++) { f(Swizzle<B, M, S>{}); return; }
  FC_CAST_SWIZZLES(FC_CASE)
#undef FC_CASE
  printf("bad swizzle %d", w);
}

template <class F>
void with_n(int n, F&& f)
{
  switch (n) {
    case 2: f(Int<2>{}); break;
    case 4: f(Int<4>{}); break;
    case 8: f(Int<8>{}); break;
    default: printf("bad N %d", n);
  }
}

template <class F>
void with_small_layout(std::istream& in, F&& f)
{
  int p = rd(in);
  if (p == 1) { int s = rd(in), d = rd(in); f(make_layout(s, d)); return; }
  int s0 = rd(in), s1 = rd(in), d0 = rd(in), d1 = rd(in);
  if (p == 2) f(make_layout(make_shape(s0, s1), make_stride(d0, d1)));
  else if (p == 6) f(make_layout(make_shape(s0, s1), make_stride(_1{}, d1)));
  else printf("bad profile %d", p);
}

template <class T, class S>
void predicates(T const& t, S const& shape)
{
  for (int k = 0; k < int(size(t)); ++k) { print(int(elem_less(t(k), shape))); }
}

static void answer(std::string const& line)
{
  std::istringstream in(line);
  std::string op;
  in >> op;
  if (op == "tile") {
    int t = rd(in), k = rd(in), m = rd(in), n = rd(in), dm = rd(in), dn = rd(in), i = rd(in), j = rd(in);
    auto tensor = make_tensor(counting_iterator<int>{0}, make_layout(make_shape(m, n), make_stride(dm, dn)));
    with_tiler(t, [&](auto tiler) {
      auto show = [](auto s) { print(s.layout()); print(' '); print(int(s.data().n_)); };
      if (k == 0) show(local_tile(tensor, tiler, make_coord(i, j)));
      if (k == 1) show(local_tile(tensor, tiler, make_coord(_, j)));
      if (k == 2) show(local_tile(tensor, tiler, make_coord(i, _)));
    });
  } else if (op == "ident") {
    int t = rd(in), m = rd(in), n = rd(in), i = rd(in), j = rd(in);
    auto c = make_identity_tensor(make_shape(m, n));
    with_tiler(t, [&](auto tiler) {
      auto s = local_tile(c, tiler, make_coord(i, j));
      print(s); print(' ');
      predicates(s, make_shape(m, n));
    });
  } else if (op == "partition") {
    int r = rd(in), m = rd(in), n = rd(in), dm = rd(in), dn = rd(in), idx = rd(in);
    auto tensor = make_tensor(counting_iterator<int>{0}, make_layout(make_shape(m, n), make_stride(dm, dn)));
    with_threads(r, [&](auto thr) {
      auto s = local_partition(tensor, thr, idx);
      print(s.layout()); print(' '); print(int(s.data().n_));
    });
  } else if (op == "identpart") {
    int r = rd(in), m = rd(in), n = rd(in), idx = rd(in);
    auto c = make_identity_tensor(make_shape(m, n));
    with_threads(r, [&](auto thr) {
      auto s = local_partition(c, thr, idx);
      print(s); print(' ');
      predicates(s, make_shape(m, n));
    });
  } else if (op == "swizzle") {
    with_swizzle(rd(in), [&](auto sw) { int x; while (in >> x) { print(sw(x)); print(','); } });
  } else if (op == "swz") {
    with_swizzle(rd(in), [&](auto sw) {
      with_small_layout(in, [&](auto L) {
        auto c = composition(sw, L);
        print(c); print(' ');
        for (int i = 0; i < int(size(c)); ++i) { print(int(c(i))); print(','); }
      });
    });
  } else if (op == "swzcast") {
    with_cast_swizzle(rd(in), [&](auto sw) {
      with_n(rd(in), [&](auto n) {
        with_small_layout(in, [&](auto L) {
          constexpr int N = decltype(n)::value;
          auto c = composition(sw, L);
          print(upcast<N>(c));
          if constexpr (is_static<decltype(stride<0>(L))>::value) { print(' '); print(downcast<N>(c)); }
        });
      });
    });
  } else {
    printf("unknown request %s", op.c_str());
  }
}

int main()
{
  std::string line;
  while (std::getline(std::cin, line)) {
    answer(line);
    printf("\x1e\n");
  }
  return 0;
}
