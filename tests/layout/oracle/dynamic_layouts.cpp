#include "flashcute_cute_all.hpp"
// Oracle for the layout algebra on run-time integers: one request per stdin line; each answer ends
// with "\x1e\n".  Layout structures ("profiles") are fixed at compile time and their values read at
// run time, so one compiled program answers any number of random cases (tests/layout/test_oracle_dynamic.py
// sends thousands).  Two profiles mix in compile-time integers, as kernels do (a static unit stride).
//
// Profiles: a layout is written "P s... d..." (all shapes, then all strides; values at static
// positions are read and ignored):
//   1: s0:d0                      2: (s0,s1):(d0,d1)             3: (s0,s1,s2):(d0,d1,d2)
//   4: (s0,(s1,s2)):(d0,(d1,d2))  5: ((s0,s1),s2):((d0,d1),d2)   6: (s0,s1):(_1,d1)
//   7: ((_2,s1),s2):((_1,d1),d2)
// Requests (A, B, L are layouts as above; t is a tiler written "Q b... e..." like a layout):
//   eval L                 L(i) for every i < size(L), comma-terminated
//   evalx L k              L(i) for size(L) <= i < size(L)+k (outside the domain), comma-terminated
//   print L | idx2crd L | coalesce L | coalesce_each L | filter L | right_inverse L
//   compose A B            composition(A, B)
//   compose2 A b0 d0 b1 d1 composition(A, make_tile(b0:d0, b1:d1)) (A of rank >= 2)
//   divide A b d           logical, zipped, tiled and flat divide by b:d (space-separated)
//   divide2 A b0 d0 b1 d1  the same by the tile (b0:d0, b1:d1) (A of rank >= 2)
//   complement a d c       complement(a:d, c);  complement1 a d: complement(a:d)
//   product a d B          logical, zipped, tiled and flat product of a:d and B, and for B of rank >= 2
//                          blocked and raked product
//   upcast N L | downcast N L   N in {2,4,8} (downcast: profiles 6 and 7)
//   common A B             max_common_vector(A, B), max_common_layout(A, B)
//   shape_ops L d          ceil_div(shape(L), d), shape_div(shape(L), d)
//   crd2idx L c...         crd2idx(c, shape(L)) and L(c) for a coordinate c congruent with the shape
//   like L                 make_fragment_like, make_layout_like, max_alignment, flatten, and for rank >= 2
//                          take<0,2>, select<1,0>, group<0,2>, append(L, L), prepend<4>  (' | '-separated)
//   coords L i             L.get_hier_coord(i), L.get_flat_coord(i), L.get_1d_coord(i)
//   slice L k i            slice_and_offset of L by (_, i) (k = 0) or (i, _) (k = 1) (rank-2 profiles)
//   tile_to_shape T m n o  tile_to_shape(block T, (m, n), order o: 0 col-major, 1 row-major)
//   print_layout L         print_layout(L) (rank-2 profiles)
#include <iostream>
#include <sstream>
#include <string>

using namespace cute;

static int rd(std::istream& in) { int v = 0; in >> v; return v; }

template <int P>
auto read_profile(std::istream& in)
{
  constexpr int n = P == 1 ? 1 : (P == 2 || P == 6) ? 2 : 3;
  int s[3] = {}, d[3] = {};
  for (int i = 0; i < n; ++i) s[i] = rd(in);
  for (int i = 0; i < n; ++i) d[i] = rd(in);
  if constexpr (P == 1) return make_layout(s[0], d[0]);
  else if constexpr (P == 2) return make_layout(make_shape(s[0], s[1]), make_stride(d[0], d[1]));
  else if constexpr (P == 3) return make_layout(make_shape(s[0], s[1], s[2]), make_stride(d[0], d[1], d[2]));
  else if constexpr (P == 4) return make_layout(make_shape(s[0], make_shape(s[1], s[2])), make_stride(d[0], make_stride(d[1], d[2])));
  else if constexpr (P == 5) return make_layout(make_shape(make_shape(s[0], s[1]), s[2]), make_stride(make_stride(d[0], d[1]), d[2]));
  else if constexpr (P == 6) return make_layout(make_shape(s[0], s[1]), make_stride(_1{}, d[1]));
  else return make_layout(make_shape(make_shape(_2{}, s[1]), s[2]), make_stride(make_stride(_1{}, d[1]), d[2]));
}

// Calls f(layout) with the layout of the profile named next on the line.
template <class F>
void with_layout(std::istream& in, F&& f)
{
  switch (rd(in)) {
    case 1: f(read_profile<1>(in)); break;
    case 2: f(read_profile<2>(in)); break;
    case 3: f(read_profile<3>(in)); break;
    case 4: f(read_profile<4>(in)); break;
    case 5: f(read_profile<5>(in)); break;
    case 6: f(read_profile<6>(in)); break;
    case 7: f(read_profile<7>(in)); break;
    default: printf("bad profile");
  }
}

// The same for the layouts of rank 2 (profiles 2, 4, 5, 6, 7).
template <class F>
void with_rank2(std::istream& in, F&& f)
{
  switch (rd(in)) {
    case 2: f(read_profile<2>(in)); break;
    case 4: f(read_profile<4>(in)); break;
    case 5: f(read_profile<5>(in)); break;
    case 6: f(read_profile<6>(in)); break;
    case 7: f(read_profile<7>(in)); break;
    default: printf("bad rank-2 profile");
  }
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
void with_block(int t, F&& f)
{
  switch (t) {
    case 0: f(Layout<Shape<_8, _4>>{}); break;
    case 1: f(Layout<Shape<_2, _8>, Stride<_8, _1>>{}); break;
    case 2: f(Layout<Shape<Shape<_2, _2>, _4>, Stride<Stride<_1, _8>, _2>>{}); break;
    case 3: f(Layout<Shape<_1, _16>>{}); break;
    default: printf("bad block %d", t);
  }
}

static void sep() { printf(" | "); }

template <class L>
void offsets(L const& layout, int from, int to)
{
  for (int i = from; i < to; ++i) { print(int(layout(i))); print(','); }
}

template <class L>
void like(L const& layout)
{
  print(make_fragment_like(layout)); sep();
  print(make_layout_like(layout)); sep();
  print(max_alignment(layout)); sep();
  print(flatten(layout));
  if constexpr (decltype(rank(layout))::value >= 2) {
    sep(); print(take<0, 2>(layout));
    sep(); print(select<1, 0>(layout));
    sep(); print(group<0, 2>(layout));
    sep(); print(append(layout, layout));
    sep(); print(prepend<4>(layout));
  }
}

// A coordinate congruent with the shape, read from the line (a braced list reads left to right).
template <class Shape>
auto read_coord(Shape const& shape, std::istream& in);

template <class Shape, int... I>
auto read_coords(Shape const& shape, std::istream& in, int_sequence<I...>)
{
  return cute::tuple<decltype(read_coord(get<I>(shape), in))...>{read_coord(get<I>(shape), in)...};
}

template <class Shape>
auto read_coord(Shape const& shape, std::istream& in)
{
  if constexpr (is_tuple<Shape>::value) {
    return read_coords(shape, in, make_int_sequence<tuple_size<Shape>::value>{});
  } else {
    return rd(in);
  }
}

static void answer(std::string const& line)
{
  std::istringstream in(line);
  std::string op;
  in >> op;
  if (op == "eval") {
    with_layout(in, [](auto L) { offsets(L, 0, int(size(L))); });
  } else if (op == "evalx") {
    with_layout(in, [&](auto L) { int k = rd(in); offsets(L, int(size(L)), int(size(L)) + k); });
  } else if (op == "print") {
    with_layout(in, [](auto L) { print(L); });
  } else if (op == "idx2crd") {
    with_layout(in, [](auto L) { for (int i = 0; i < int(size(L)); ++i) { print(idx2crd(i, shape(L))); print(';'); } });
  } else if (op == "coalesce") {
    with_layout(in, [](auto L) { print(coalesce(L)); });
  } else if (op == "coalesce_each") {
    with_layout(in, [](auto L) { print(coalesce(L, repeat<decltype(rank(L))::value>(_1{}))); });
  } else if (op == "filter") {
    with_layout(in, [](auto L) { print(filter(L)); });
  } else if (op == "right_inverse") {
    with_layout(in, [](auto L) { print(right_inverse(L)); });
  } else if (op == "compose") {
    with_layout(in, [&](auto A) { with_layout(in, [&](auto B) { print(composition(A, B)); }); });
  } else if (op == "compose2") {
    with_rank2(in, [&](auto A) {
      int b0 = rd(in), d0 = rd(in), b1 = rd(in), d1 = rd(in);
      print(composition(A, make_tile(make_layout(b0, d0), make_layout(b1, d1)))); });
  } else if (op == "divide") {
    with_layout(in, [&](auto A) {
      auto B = read_profile<1>(in);
      print(logical_divide(A, B)); printf(" "); print(zipped_divide(A, B)); printf(" ");
      print(tiled_divide(A, B)); printf(" "); print(flat_divide(A, B)); });
  } else if (op == "divide2") {
    with_rank2(in, [&](auto A) {
      int b0 = rd(in), d0 = rd(in), b1 = rd(in), d1 = rd(in);
      auto T = make_tile(make_layout(b0, d0), make_layout(b1, d1));
      print(logical_divide(A, T)); printf(" "); print(zipped_divide(A, T)); printf(" ");
      print(tiled_divide(A, T)); printf(" "); print(flat_divide(A, T)); });
  } else if (op == "complement") {
    auto A = read_profile<1>(in);
    int c = rd(in);
    print(complement(A, c));
  } else if (op == "complement1") {
    print(complement(read_profile<1>(in)));
  } else if (op == "product") {
    auto A = read_profile<1>(in);
    with_layout(in, [&](auto B) {
      print(logical_product(A, B)); printf(" "); print(zipped_product(A, B)); printf(" ");
      print(tiled_product(A, B)); printf(" "); print(flat_product(A, B));
      if constexpr (decltype(rank(B))::value >= 2) {  // C++ cannot zip two rank-1 integers
        printf(" "); print(blocked_product(A, B)); printf(" "); print(raked_product(A, B));
      } });
  } else if (op == "upcast") {
    with_n(rd(in), [&](auto n) { with_layout(in, [&](auto L) { print(upcast<decltype(n)::value>(L)); }); });
  } else if (op == "downcast") {
    with_n(rd(in), [&](auto n) {
      switch (rd(in)) {
        case 6: print(downcast<decltype(n)::value>(read_profile<6>(in))); break;
        case 7: print(downcast<decltype(n)::value>(read_profile<7>(in))); break;
        default: printf("bad downcast profile");
      } });
  } else if (op == "common") {
    with_rank2(in, [&](auto A) { with_rank2(in, [&](auto B) {
      print(max_common_vector(A, B)); printf(" "); print(max_common_layout(A, B)); }); });
  } else if (op == "shape_ops") {
    with_layout(in, [&](auto L) { int d = rd(in); print(ceil_div(shape(L), d)); printf(" "); print(shape_div(shape(L), d)); });
  } else if (op == "crd2idx") {
    with_layout(in, [&](auto L) { auto c = read_coord(shape(L), in); print(crd2idx(c, shape(L))); printf(" "); print(L(c)); });
  } else if (op == "like") {
    with_layout(in, [](auto L) { like(L); });
  } else if (op == "coords") {
    with_layout(in, [&](auto L) {
      int i = rd(in);
      print(L.get_hier_coord(i)); printf(" "); print(L.get_flat_coord(i)); printf(" "); print(L.get_1d_coord(i)); });
  } else if (op == "slice") {
    with_rank2(in, [&](auto L) {
      int k = rd(in), i = rd(in);
      auto show = [](auto so) { print(get<0>(so)); printf(" "); print(get<1>(so)); };
      if (k == 0) show(slice_and_offset(make_coord(_, i), L));
      else show(slice_and_offset(make_coord(i, _), L)); });
  } else if (op == "tile_to_shape") {
    int t = rd(in), m = rd(in), n = rd(in), o = rd(in);
    with_block(t, [&](auto block) {
      if (o == 0) print(tile_to_shape(block, make_shape(m, n)));
      else print(tile_to_shape(block, make_shape(m, n), Step<_2, _1>{})); });
  } else if (op == "print_layout") {
    with_rank2(in, [](auto L) { print_layout(L); });
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
