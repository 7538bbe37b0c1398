// Oracle for dynamic-integer cases: one request per stdin line; each answer ends with "\x1e\n".
// Layout structures ("profiles") are fixed at compile time; their values are read at run time,
// so a single compiled program answers any number of random cases.
//
// Profiles (all ints dynamic):  1: s:d   2: (s0,s1):(d0,d1)   3: (s0,s1,s2):(d0,d1,d2)
//                               4: (s0,(s1,s2)):(d0,(d1,d2))   5: ((s0,s1),s2):((d0,d1),d2)
// Requests:
//   eval P <layout>              all offsets L(i), comma-terminated
//   print P <layout>             print(L)
//   idx2crd P <layout>           idx2crd(i, shape(L)) for every i, ';'-terminated
//   coalesce P <layout>          coalesce(L)
//   compose P Q <a> <b>          composition(A, B)
//   divide P <a> <b:profile 1>   logical_divide(A, B) then ' ' zipped_divide(A, B)
//   complement <a:profile 1> c   complement(A, c)
//   product Q <a:profile 1> <b>  logical_product(A, B)
//   print_layout P <layout>      print_layout(L), P in {2,4,5}
//   tile T K m n dm dn i j       local_tile of an (m,n):(dm,dn) counting tensor by static tiler T,
//                                coordinate kind K (0: (i,j), 1: (_,j), 2: (i,_)); layout and offset
//   ident T m n i j              identity tensor (m,n), local_tile by tiler T at (i,j): print(s) and
//                                elem_less(s(k), (m,n)) for every k
//   partition R m n dm dn idx    local_partition of an (m,n) counting tensor by static thread layout R
//   swizzle W x...               Swizzle number W (table below) applied to each x, comma-terminated
#include "flashcute_cute_all.hpp"
#include <iostream>
#include <sstream>
#include <string>

using namespace cute;

static int rd(std::istream& in) { int v = 0; in >> v; return v; }

template <int P>
auto read_profile(std::istream& in)
{
  int s0 = rd(in);
  if constexpr (P == 1) {
    int d0 = rd(in);
    return make_layout(s0, d0);
  } else if constexpr (P == 2) {
    int s1 = rd(in), d0 = rd(in), d1 = rd(in);
    return make_layout(make_shape(s0, s1), make_stride(d0, d1));
  } else {
    int s1 = rd(in), s2 = rd(in), d0 = rd(in), d1 = rd(in), d2 = rd(in);
    if constexpr (P == 3) return make_layout(make_shape(s0, s1, s2), make_stride(d0, d1, d2));
    if constexpr (P == 4) return make_layout(make_shape(s0, make_shape(s1, s2)), make_stride(d0, make_stride(d1, d2)));
    if constexpr (P == 5) return make_layout(make_shape(make_shape(s0, s1), s2), make_stride(make_stride(d0, d1), d2));
  }
}

template <class F>
void with_layout(int profile, std::istream& in, F&& f)
{
  switch (profile) {
    case 1: f(read_profile<1>(in)); break;
    case 2: f(read_profile<2>(in)); break;
    case 3: f(read_profile<3>(in)); break;
    case 4: f(read_profile<4>(in)); break;
    case 5: f(read_profile<5>(in)); break;
    default: printf("bad profile %d", profile);
  }
}

template <class F>
void with_rank2(int profile, std::istream& in, F&& f)
{
  switch (profile) {
    case 2: f(read_profile<2>(in)); break;
    case 4: f(read_profile<4>(in)); break;
    case 5: f(read_profile<5>(in)); break;
    default: printf("bad rank-2 profile %d", profile);
  }
}

template <class F>
void with_tiler(int t, F&& f)
{
  switch (t) {
    case 0: f(make_shape(Int<64>{}, Int<64>{})); break;
    case 1: f(make_shape(Int<128>{}, Int<64>{})); break;
    case 2: f(make_shape(Int<16>{}, Int<8>{})); break;
    case 3: f(make_shape(Int<32>{}, Int<128>{})); break;
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
    default: printf("bad thread layout %d", r);
  }
}

#define FC_SWIZZLES(X) X(0,3,3) X(1,3,3) X(2,3,3) X(3,3,3) X(1,4,3) X(2,4,3) X(3,4,3) X(2,0,3) \
                       X(3,2,3) X(2,1,5) X(1,2,1) X(3,0,-3) X(2,4,-4) X(0,4,3) X(3,3,4) X(1,0,2)

static void apply_swizzle(int w, std::istream& in)
{
  int index = 0;
#define FC_CASE(B, M, S) if (w == index++) { int x; while (in >> x) { print(Swizzle<B, M, S>{}(x)); print(','); } return; }
  FC_SWIZZLES(FC_CASE)
#undef FC_CASE
  printf("bad swizzle %d", w);
}

static void answer(std::string const& line)
{
  std::istringstream in(line);
  std::string op;
  in >> op;
  if (op == "eval") {
    with_layout(rd(in), in, [](auto L) { for (int i = 0; i < int(size(L)); ++i) { print(int(L(i))); print(','); } });
  } else if (op == "print") {
    with_layout(rd(in), in, [](auto L) { print(L); });
  } else if (op == "idx2crd") {
    with_layout(rd(in), in, [](auto L) { for (int i = 0; i < int(size(L)); ++i) { print(idx2crd(i, shape(L))); print(';'); } });
  } else if (op == "coalesce") {
    with_layout(rd(in), in, [](auto L) { print(coalesce(L)); });
  } else if (op == "compose") {
    int p = rd(in), q = rd(in);
    with_layout(p, in, [&](auto A) { with_layout(q, in, [&](auto B) { print(composition(A, B)); }); });
  } else if (op == "divide") {
    with_layout(rd(in), in, [&](auto A) {
      auto B = read_profile<1>(in);
      print(logical_divide(A, B)); print(' '); print(zipped_divide(A, B)); });
  } else if (op == "complement") {
    auto A = read_profile<1>(in);
    int c = rd(in);
    print(complement(A, c));
  } else if (op == "product") {
    int q = rd(in);
    auto A = read_profile<1>(in);
    with_layout(q, in, [&](auto B) { print(logical_product(A, B)); });
  } else if (op == "print_layout") {
    with_rank2(rd(in), in, [](auto L) { print_layout(L); });
  } else if (op == "tile") {
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
      for (int k = 0; k < int(size(s)); ++k) { print(int(elem_less(s(k), make_shape(m, n)))); }
    });
  } else if (op == "partition") {
    int r = rd(in), m = rd(in), n = rd(in), dm = rd(in), dn = rd(in), idx = rd(in);
    auto tensor = make_tensor(counting_iterator<int>{0}, make_layout(make_shape(m, n), make_stride(dm, dn)));
    with_threads(r, [&](auto thr) {
      auto s = local_partition(tensor, thr, idx);
      print(s.layout()); print(' '); print(int(s.data().n_));
    });
  } else if (op == "swizzle") {
    apply_swizzle(rd(in), in);
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
