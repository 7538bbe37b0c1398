"""Layout (shape:stride) and its algebra, following C++ CuTe's ``cute/layout.hpp`` branch for branch,
and the composed (swizzled) layouts of ``cute/layout_composed.hpp`` and ``cute/swizzle_layout.hpp``.

The algebra's functions take plain and composed layouts alike (as C++'s overload sets do), so both
live here; :mod:`flashcute.layout.swizzle` holds only the swizzle functor and offset types, which
need no layouts.  Imports go one way: int_tuple <- swizzle <- layout <- printing.

* A :class:`ComposedLayout` is ``layout_a o offset o layout_b``; most operations act on
  ``layout_b`` (which defines the domain) and re-compose, exactly as C++ does.
* Slicing a swizzled layout decays to a plain layout when C++ does (tracking statically and
  dynamically known offset bits with :class:`~flashcute.layout.swizzle.MixedBits`).

Results are C++'s canonical ones, static-ness included (``str(result)`` equals C++'s ``print``).
Where C++ rejects an input at compile time (``static_assert``) this raises ValueError/TypeError
with C++'s reason.  One deliberate difference: C++ checks composition's divisibility conditions
only when the operands are static (the dynamic check is a commented-out assert); here they are
checked for dynamic values too, because the C++ result is then silently wrong.
"""

import numpy as np

from .int_tuple import (
    Int, ScaledBasis, Underscore, _, LayoutLeft, _MajorTag,
    is_int, is_static, is_constant, static_equal, has_underscore, as_int_tuple,
    div, mod, cmin, cabs, signum, ceil_div, congruent, evenly_divides,
    product, product_each, inner_product, sum_, flatten as _flatten_tuple, unflatten as _unflatten_tuple, wrap,
    unwrap, get as _get,
    take as _take, select as _select, append as _append, prepend as _prepend, group as _group,
    zip_, zip2_by, repeat_like, filter_zeros as _filter_zeros, compact_major, compact_order,
    crd2idx, idx2crd, crd2crd, slice_, dice as _dice, make_basis_like, as_arithmetic_tuple,
    basis_get, basis_value, transform_leaf, all_underscore, gcd, depth as _depth, replace as _replace, to_str,
)
from .swizzle import (
    Swizzle, MixedBits, SmemPtrFlag, UnsignedInt, make_swizzle, make_mixed_bits,
    _countr_zero, _to_mixed_bits, _xor, _and, _plain,
)

__all__ = [
    "Layout", "make_layout", "make_ordered_layout", "make_layout_like", "make_fragment_like",
    "make_identity_layout", "is_layout",
    "size", "cosize", "coshape", "coprofile", "rank", "depth", "shape", "stride", "get", "mode",
    "layout", "take", "select", "flatten", "unflatten", "flatten_layout", "unflatten_layout",
    "append", "prepend",
    "replace", "group", "slice_layout", "dice_layout", "slice_and_offset", "domain_offset",
    "coalesce", "filter_zeros", "filter", "composition", "complement", "right_inverse",
    "left_inverse", "max_common_layout", "max_common_vector", "nullspace", "zip_layout",
    "tile_unzip", "logical_divide", "zipped_divide", "tiled_divide", "flat_divide",
    "logical_product", "zipped_product", "tiled_product", "flat_product", "blocked_product",
    "raked_product", "tile_to_shape", "upcast", "downcast", "recast", "max_alignment",
    "ComposedLayout", "make_composed_layout", "get_swizzle_portion", "get_nonswizzle_portion",
    "as_position_independent_swizzle_layout",
]


def _check_shape(shape):
    # negative extents are allowed: C++ makes them, e.g. left_inverse(4:-1) is (_-1,_4):(_0,_1)
    for s in flatten(wrap(shape)):
        if isinstance(s, (Underscore, ScaledBasis)):
            raise TypeError(f"shape {to_str(shape)} contains {s!r}; shape leaves must be integers")


def _check_stride(stride):
    for d in flatten(wrap(stride)):
        if isinstance(d, Underscore):
            raise TypeError(f"stride {to_str(stride)} contains '_'; stride leaves must be integers")


class Layout:
    """A CuTe layout: a function from (hierarchical) coordinates to offsets, ``shape:stride``.

    ``Layout(shape)`` gets compact column-major strides (C++ ``LayoutLeft``); ``Layout(shape,
    LayoutRight)`` row-major; ``Layout(shape, stride)`` needs ``stride`` congruent with ``shape``.
    Plain ints are dynamic, ``Int(n)`` static (see :mod:`flashcute.layout.int_tuple`).

    ``layout(i)``, ``layout(i, j)``, ``layout((i, (j, k)))`` evaluate as C++ does: no range check,
    an index or coordinate past a mode's extent carries into the next mode and the last mode extends
    (``Layout(Int(4))(4) == 4``); ``layout(c, strict=True)`` raises for a coordinate outside the shape.
    A coordinate containing ``_`` slices: ``layout(_, 2)`` / ``layout[_, 2]`` is the sub-layout
    (its offset is ``slice_and_offset``).  ``str(layout)`` is C++'s ``print``.
    """

    __slots__ = ("shape", "stride")

    def __init__(self, shape, stride=None):
        shape = as_int_tuple(shape, "Layout shape")
        _check_shape(shape)
        if stride is None:
            stride = compact_major(shape, LayoutLeft)
        elif isinstance(stride, _MajorTag):
            stride = compact_major(shape, stride)
        else:
            stride = as_int_tuple(stride, "Layout stride")
            _check_stride(stride)
            if not congruent(shape, stride):
                raise ValueError(f"Layout: shape {to_str(shape)} and stride {to_str(stride)} are not congruent")
        self.shape = shape
        self.stride = stride

    # -- evaluation ------------------------------------------------------------------------
    def __call__(self, *coord, strict=False):
        coord = _coordinate(coord, self.shape, strict, "Layout")
        if has_underscore(coord):
            return slice_layout(coord, self)
        return crd2idx(coord, self.shape, self.stride)

    def __getitem__(self, coord):
        return self(coord)

    def offsets(self):
        """All offsets, in colexicographic coordinate order, as an int64 numpy array (vectorised).

        For identity layouts (basis strides) the result has one column per codomain mode.
        """
        n = int(product(self.shape))
        return _evaluate(self.shape, self.stride, np.arange(n, dtype=np.int64))

    def evaluate(self, indices):
        """Vectorised ``layout(i)`` for an array of 1-D indices, with C++'s arithmetic as ``layout(i)``."""
        return _evaluate(self.shape, self.stride, np.asarray(indices, dtype=np.int64))

    # -- C++ member conveniences -----------------------------------------------------------
    def compose(self, *tilers):
        return composition(self, tilers[0] if len(tilers) == 1 else tuple(tilers))

    def with_shape(self, *shape):
        return composition(self, Layout(shape[0] if len(shape) == 1 else tuple(shape)))

    def tile(self, *tilers):
        return tiled_divide(self, tilers[0] if len(tilers) == 1 else tuple(tilers))

    def get_hier_coord(self, idx):
        return idx2crd(idx, self.shape, self.stride)

    def get_flat_coord(self, idx):
        r = len(wrap(self.shape))
        return crd2crd(self.get_hier_coord(idx), self.shape, Int(1) if r == 1 else (Int(1),) * r)  # C++ repeat<R>

    def get_1d_coord(self, idx):
        return crd2idx(self.get_hier_coord(idx), self.shape)

    # -- identity and text -----------------------------------------------------------------
    def _key(self):
        return (_static_key(self.shape), _static_key(self.stride))

    def __eq__(self, other):
        return isinstance(other, Layout) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def cute_str(self):
        return to_str(self.shape) + ":" + to_str(self.stride)

    def __str__(self):
        return self.cute_str()

    def __repr__(self):
        return f"Layout({self.cute_str()})"


def _static_key(t):
    if isinstance(t, tuple):
        return tuple(_static_key(a) for a in t)
    if isinstance(t, ScaledBasis):
        return ("E", _static_key(t.value), t.modes)
    return (int(t), isinstance(t, Int))


def _coordinate(args, shape, strict, what):
    """The coordinate of a call ``x(i)``, ``x(i, j)`` or ``x((i, j))``, range-checked only if ``strict``."""
    if not args:
        raise TypeError(f"{what} call needs a coordinate")
    coord = as_int_tuple(args[0] if len(args) == 1 else tuple(args), "coordinate")
    if strict:
        _check_coord(coord, shape)
    return coord


def _check_coord(coord, shape):
    """Range-check a (possibly partial, ``_``-containing) coordinate against ``shape`` (C++ does not check)."""
    if isinstance(coord, Underscore):
        return
    if isinstance(coord, tuple):
        if not isinstance(shape, tuple) or len(coord) != len(shape):
            raise ValueError(f"coordinate {to_str(coord)} does not match the rank of shape {to_str(shape)}")
        for c, s in zip(coord, shape):
            _check_coord(c, s)
        return
    n = int(product(shape))
    if not 0 <= int(coord) < n:
        raise ValueError(f"coordinate {int(coord)} out of range for shape {to_str(shape)} (size {n})")


def _evaluate(shape, stride, idx):
    flat_shape = [int(s) for s in flatten(wrap(shape))]
    flat_stride = flatten(wrap(stride))
    last = len(flat_shape) - 1
    bases = [d for d in flat_stride if isinstance(d, ScaledBasis)]
    if bases:
        if any(not isinstance(d, ScaledBasis) and int(d) != 0 for d in flat_stride):
            raise TypeError("offsets(): strides mix basis elements and integers")
        if any(len(b.modes) != 1 for b in bases):
            raise TypeError("offsets(): only depth-1 basis strides (E<i>) are supported")
        out = np.zeros(idx.shape + (1 + max(b.modes[0] for b in bases),), dtype=np.int64)
    else:
        out = np.zeros(idx.shape, dtype=np.int64)
    for k, (s, d) in enumerate(zip(flat_shape, flat_stride)):
        if k == last:
            coord = idx
        else:  # C++'s % and /, which truncate toward zero (idx - coord is a multiple of s: // is exact)
            coord = np.fmod(idx, s)
            idx = (idx - coord) // s
        if isinstance(d, ScaledBasis):
            out[..., d.modes[0]] += coord * int(d.value)
        elif int(d) != 0:
            out += coord * int(d)
    return out


def is_layout(x):
    return isinstance(x, Layout) or _is_composed(x)


def _is_composed(x):
    return isinstance(x, ComposedLayout)


def _is_tensor(x):
    return getattr(x, "is_tensor", False)


# ---------------------------------------------------------------------------------------------
# Construction
# ---------------------------------------------------------------------------------------------

def make_layout(*args):
    """C++ ``make_layout``.

    ``make_layout(shape)``, ``make_layout(shape, stride)``, ``make_layout(shape, LayoutRight)``;
    ``make_layout(l0, l1, ...)`` concatenates layouts into modes (one layout gives a rank-1 tuple,
    as in C++); ``make_layout(Swizzle)`` is the swizzle over its own domain.
    """
    if not args:
        raise TypeError("make_layout needs a shape or layouts")
    if isinstance(args[0], Layout):
        for a in args:
            if not isinstance(a, Layout):
                raise TypeError(f"make_layout: cannot concatenate a Layout with {type(a).__name__}")
        return Layout(tuple(a.shape for a in args), tuple(a.stride for a in args))
    if isinstance(args[0], Swizzle) and len(args) == 1:
        return make_swizzle_layout(args[0])
    if len(args) == 1:
        return Layout(args[0])
    if len(args) == 2:
        return Layout(args[0], args[1])
    raise TypeError("make_layout takes (shape), (shape, stride) or layouts")


def make_ordered_layout(shape, order):
    """Compact layout whose strides follow ``order`` (C++ ``make_ordered_layout``)."""
    shape = as_int_tuple(shape, "shape")
    if not isinstance(order, _MajorTag):
        order = as_int_tuple(order, "order")
    return Layout(shape, compact_order(shape, order))


def make_layout_like(layout):
    return Layout(layout.shape, compact_order(_filter_zeros(layout.stride, layout.shape), layout.stride))


def make_fragment_like(layout):
    """C++ ``make_fragment_like``: a compact layout like ``layout``, mode 0 column-major first."""
    if _is_composed(layout):
        return make_fragment_like(layout.layout_b)
    if not isinstance(layout, Layout):
        return Layout(as_int_tuple(layout, "shape"))
    r = int(rank(layout))
    if r > 1 and is_static(layout.shape):
        s0, d0 = layout.shape[0], layout.stride[0]
        first = Layout(s0, compact_major(_filter_zeros(d0, s0), LayoutLeft))
        rest = make_ordered_layout(_take(layout.shape, 1, r), _take(layout.stride, 1, r))
        return tiled_product(first, rest)
    return Layout(layout.shape)


def make_identity_layout(shape):
    """Layout mapping each coordinate to itself (strides are basis elements ``_1@i``)."""
    shape = as_int_tuple(shape, "shape")
    return Layout(shape, make_basis_like(shape))


# ---------------------------------------------------------------------------------------------
# Accessors (plain functions, as in C++)
# ---------------------------------------------------------------------------------------------

def _shape_of(x):
    if isinstance(x, Layout) or _is_composed(x) or _is_tensor(x):
        return x.shape
    return as_int_tuple(x)


def shape(x, *modes):
    return _get(_shape_of(x), *modes)


def stride(x, *modes):
    if _is_composed(x):
        raise TypeError("a ComposedLayout has no strides (C++ deletes stride() for it)")
    return _get(x.stride, *modes)


def size(x, *modes):
    """``size<modes...>(x)`` of an int-tuple, Layout, ComposedLayout or Tensor."""
    return product(shape(x, *modes))


def rank(x, *modes):
    s = shape(x, *modes)
    return Int(len(s)) if isinstance(s, tuple) else Int(1)


def depth(x, *modes):
    return _depth(shape(x, *modes))


def coshape(layout, *modes):
    """C++ ``coshape``: 1 + the largest coordinate reached in each codomain mode."""
    if _is_composed(layout):
        layout = layout.layout_b
    sub = get(layout, *modes) if modes else layout
    m1 = transform_leaf(sub.shape, lambda s: s - Int(1))
    ab = transform_leaf(sub.stride, cabs)
    co = as_arithmetic_tuple(inner_product(m1, ab))
    return transform_leaf(co, lambda c: c + Int(1))


def cosize(layout, *modes):
    """Size of the codomain (C++ ``cosize``); for a ComposedLayout that of its inner layout."""
    if getattr(layout, "is_tensor", False):
        layout = layout.layout
    return product(coshape(layout, *modes))


def coprofile(layout):
    return repeat_like(as_arithmetic_tuple(sum_(layout.stride)), Int(0))


def get(x, *modes):
    """``get<modes...>(layout)``: the sub-layout of a mode (also for ComposedLayout / int-tuples)."""
    if _is_tensor(x):
        return x._with_layout(get(x.layout, *modes))
    if _is_composed(x):
        return x._rebuild(get(x.layout_b, *modes))
    if isinstance(x, Layout):
        return Layout(_get(x.shape, *modes), _get(x.stride, *modes))
    return _get(x, *modes)


mode = get


def layout(x, *modes):
    """C++ ``layout<modes...>(x)``: ``x`` itself, or the sub-layout of a mode."""
    return get(x, *modes) if modes else x


def _per_layout(fn, x, *args):
    """Apply a shape/stride tuple operation to both halves of a layout (or to a composed layout's inner one)."""
    if _is_composed(x):
        return x._rebuild(_per_layout(fn, x.layout_b, *args))
    return Layout(fn(x.shape, *args), fn(x.stride, *args))


def take(x, b, e):
    if _is_tensor(x):
        return x._with_layout(take(x.layout, b, e))
    if not isinstance(x, Layout) and not _is_composed(x):
        return _take(x, b, e)
    if not b < e:
        raise ValueError(f"take<{b},{e}>: empty range")
    return _per_layout(_take, x, b, e)


def select(x, *idx):
    if _is_tensor(x):
        return x._with_layout(select(x.layout, *idx))
    if not isinstance(x, Layout) and not _is_composed(x):
        return _select(x, *idx)
    return _per_layout(_select, x, *idx)


def flatten_layout(x):
    if _is_tensor(x):
        return x._with_layout(flatten_layout(x.layout))
    return _per_layout(_flatten_tuple, x)


def unflatten_layout(x, target_profile):
    return _per_layout(_unflatten_tuple, x, target_profile)


def flatten(x):
    """C++ ``flatten``: of an int-tuple, or of a layout (shape and stride alike)."""
    if isinstance(x, Layout) or _is_composed(x) or _is_tensor(x):
        return flatten_layout(x)
    return _flatten_tuple(x)


def unflatten(x, target_profile):
    """C++ ``unflatten``: fold a flat int-tuple or layout into the profile of ``target_profile``."""
    if isinstance(x, Layout) or _is_composed(x):
        return unflatten_layout(x, target_profile)
    return _unflatten_tuple(x, target_profile)


def append(x, y=None, n=None):
    """C++ ``append`` (``y`` defaults to ``_1:_0``; with ``n`` it is ``append<N>``: pad to rank n)."""
    if y is None:
        y = Layout(Int(1), Int(0))
    if _is_composed(x):
        return x._rebuild(append(x.layout_b, y, n))
    return Layout(_append(x.shape, y.shape, n), _append(x.stride, y.stride, n))


def prepend(x, y=None, n=None):
    if y is None:
        y = Layout(Int(1), Int(0))
    return Layout(_prepend(x.shape, y.shape, n), _prepend(x.stride, y.stride, n))


def replace(x, n, y):
    return Layout(_replace(x.shape, n, y.shape), _replace(x.stride, n, y.stride))


def group(x, b, e=None):
    if _is_tensor(x):
        return x._with_layout(group(x.layout, b, e))
    return _per_layout(_group, x, b, e)


def zip_layout(a, b=None):
    """C++ ``zip`` of one layout's modes, or of two layouts' modes."""
    if _is_composed(a):
        return a._rebuild(zip_layout(a.layout_b))
    if b is None:
        return Layout(zip_(a.shape), zip_(a.stride))
    return Layout(zip_(a.shape, b.shape), zip_(a.stride, b.stride))


def _transform_layout(t0, t1, f, keep_rest=True):
    """C++ ``transform_layout``: f on paired modes, then (if ``keep_rest``) the unpaired modes of t0."""
    r0 = int(rank(t0)) if isinstance(t0, Layout) else len(wrap(t0))
    t1 = wrap(t1)
    if len(t1) > r0:
        raise ValueError(f"tiler {to_str(t1)} has more modes than the layout {to_str(t0)} (rank {r0})")
    parts = [f(get(t0, i), t1[i]) for i in range(len(t1))]
    if keep_rest:
        parts += [get(t0, i) for i in range(len(t1), r0)]
    return make_layout(*parts)


# ---------------------------------------------------------------------------------------------
# Slicing
# ---------------------------------------------------------------------------------------------

def slice_layout(coord, x):
    """C++ ``slice(coord, layout)``: keep the modes where ``coord`` has ``_``."""
    if _is_composed(x):
        return x.slice(coord)
    return Layout(slice_(coord, x.shape), slice_(coord, x.stride))


def dice_layout(coord, x):
    return Layout(_dice(coord, x.shape), _dice(coord, x.stride))


def slice_and_offset(coord, x):
    """C++ ``slice_and_offset``: (sub-layout, offset of the fixed coordinates)."""
    coord = as_int_tuple(coord, "coordinate")
    if _is_composed(x):
        return x.slice_and_offset(coord)
    return slice_layout(coord, x), crd2idx(coord, x.shape, x.stride)


def domain_offset(coord, x):
    if _is_composed(x):
        return x.domain_offset(coord)
    return x, crd2idx(coord, x.shape, x.stride)


# ---------------------------------------------------------------------------------------------
# Coalesce and filter
# ---------------------------------------------------------------------------------------------

def _bw_coalesce(old_shape, old_stride, new_shape, new_stride):
    for i in range(len(old_shape) - 2, -1, -1):
        s, d = old_shape[i], old_stride[i]
        if is_constant(1, s):
            continue
        if is_constant(1, new_shape):
            new_shape, new_stride = s, d
        elif is_static(_get(new_shape, 0)) and static_equal(s * d, _get(new_stride, 0)):
            new_shape = _replace_front(new_shape, s * _get(new_shape, 0))
            new_stride = _replace_front(new_stride, d)
        else:
            new_shape = _prepend(new_shape, s)
            new_stride = _prepend(new_stride, d)
    if is_constant(1, new_shape):
        return Layout(Int(1), Int(0))
    return Layout(new_shape, new_stride)


def _replace_front(t, x):
    return (x,) + t[1:] if isinstance(t, tuple) else x


def _coalesce_flat(x, extend):
    fs, fd = _flat_modes(x)
    last_shape = fs[-1]
    if extend and is_constant(1, last_shape):
        last_shape = Int(2)
    return _bw_coalesce(fs, fd, last_shape, fd[-1])


def _flat_modes(x):
    fs, fd = flatten(wrap(x.shape)), flatten(wrap(x.stride))
    if not fs:
        raise ValueError("coalesce of an empty layout")
    return fs, fd


def _coalesce_x(x, profile=None):
    """C++ ``detail::coalesce_x``: coalesce that also preserves the function outside the domain."""
    if isinstance(profile, tuple):
        return _transform_layout(x, profile, _coalesce_x)
    return _coalesce_flat(x, True)


def coalesce(x, profile=None):
    """Merge modes that can be merged (C++ ``coalesce``); with ``profile``, per mode of the profile.

    Also accepts a shape (int-tuple): combines neighbouring modes of equal static-ness.
    """
    if _is_tensor(x):
        return x._with_layout(coalesce(x.layout, profile))
    if _is_composed(x):
        return x._rebuild(coalesce(x.layout_b, profile))
    if not isinstance(x, Layout):
        return _coalesce_shape(as_int_tuple(x, "shape"))
    if isinstance(profile, tuple):
        return _transform_layout(x, profile, coalesce)
    return _coalesce_flat(x, False)


def _coalesce_shape(s):
    if not isinstance(s, tuple):
        return s
    flat = flatten(s)
    init = flat[0]
    for a in flat[1:]:
        last = init[-1] if isinstance(init, tuple) else init
        if is_static(last) == is_static(a):
            init = (init[:-1] + (last * a,)) if isinstance(init, tuple) else last * a
        else:
            init = _append(init, a)
    return init


def filter_zeros(x, profile=None):
    """Replace the modes with static-0 stride (or 0 in ``profile``) by size ``_1``."""
    if profile is None:
        return Layout(_filter_zeros(x.stride, x.shape), x.stride)
    return Layout(_filter_zeros(profile, x.shape), x.stride)


def filter(x, profile=None):
    """Remove static-0 strides and size-1 modes (C++ ``filter``); per mode with ``profile``."""
    if _is_composed(x):
        return x._rebuild(filter(x.layout_b, profile))
    if isinstance(profile, tuple):
        return _transform_layout(x, profile, filter)
    return coalesce(filter_zeros(x))


# ---------------------------------------------------------------------------------------------
# Composition
# ---------------------------------------------------------------------------------------------

def _composition_impl(lhs_shape, lhs_stride, rhs_shape, rhs_stride):
    if isinstance(rhs_shape, tuple):
        return make_layout(*[_composition_impl(lhs_shape, lhs_stride, s, d) for s, d in zip(rhs_shape, rhs_stride)])
    if isinstance(rhs_stride, ScaledBasis):
        return _composition_impl(basis_get(rhs_stride, lhs_shape), basis_get(rhs_stride, lhs_stride),
                                 rhs_shape, basis_value(rhs_stride))
    if is_constant(0, rhs_stride):
        return Layout(rhs_shape, rhs_stride)
    if not isinstance(lhs_shape, tuple):
        return Layout(rhs_shape, rhs_stride * lhs_stride)
    result_shape, result_stride = (), ()
    rest_shape, rest_stride = rhs_shape, rhs_stride
    if int(rhs_stride) == 0:
        raise ValueError(f"composition: the right layout has a dynamic stride 0 over a multi-mode left layout "
                         f"{to_str(lhs_shape)}; C++ divides by it (a run-time fault); use a static _0 stride")
    for curr_shape, curr_stride in zip(lhs_shape[:-1], lhs_stride[:-1]):
        cond = int(mod(rest_stride, curr_shape)) == 0 or int(rest_stride) < int(curr_shape)
        if not cond and (is_static(curr_shape) and is_static(rest_stride) or int(rest_shape) > 1):
            raise ValueError(
                f"composition: stride divisibility condition violated: stride {rest_stride!r} is neither a "
                f"multiple of nor smaller than the shape {curr_shape!r} of the left layout")
        next_shape = ceil_div(curr_shape, cabs(rest_stride))
        next_stride = ceil_div(cabs(rest_stride), curr_shape) * signum(rest_stride)
        if is_constant(1, next_shape) or is_constant(1, rest_shape):
            rest_stride = next_stride
            continue
        new_shape = cmin(next_shape, rest_shape)
        if int(mod(rest_shape, new_shape)) != 0:
            raise ValueError(
                f"composition: shape divisibility condition violated: shape {rest_shape!r} of the right layout "
                f"is not divisible by {new_shape!r} (the left layout's mode {curr_shape!r} at stride {rest_stride!r})")
        result_shape += (new_shape,)
        result_stride += (rest_stride * curr_stride,)
        rest_shape = div(rest_shape, new_shape)
        rest_stride = next_stride
    if not result_shape:
        return Layout(rest_shape, rest_stride * lhs_stride[-1])
    if is_constant(1, rest_shape):
        return Layout(unwrap(result_shape), unwrap(result_stride))
    return Layout(result_shape + (rest_shape,), result_stride + (rest_stride * lhs_stride[-1],))


def composition(lhs, rhs, *more):
    """Functional composition ``lhs o rhs`` (C++ ``composition``): ``result(c) == lhs(rhs(c))``.

    ``rhs`` may be a Layout, an integer (a ``n:1`` tiler), ``_``, or a tuple of those (a by-mode
    tiler; modes of ``lhs`` beyond the tiler are dropped, as in C++).  With three arguments
    ``composition(A, offset, B)`` builds a ComposedLayout.  Swizzles and composed layouts are
    accepted on either side.  Non-divisible compositions raise ValueError.
    """
    if _is_tensor(lhs):
        return lhs._with_layout(composition(lhs.layout, rhs, *more))
    if more:
        if len(more) != 1:
            raise TypeError("composition takes 2 or 3 arguments")
        return composition3(lhs, rhs, more[0])
    if _is_composed(lhs):
        return lhs._rebuild(composition(lhs.layout_b, rhs))
    if isinstance(lhs, Swizzle):
        if isinstance(rhs, Swizzle):
            return compose_swizzles(lhs, rhs)
        return composition3(lhs, Int(0), rhs)
    if not isinstance(lhs, Layout):
        raise TypeError(f"composition: left operand must be a layout, got {type(lhs).__name__}")
    if _is_composed(rhs) or isinstance(rhs, Swizzle):
        return compose_layout_with(lhs, rhs)
    if isinstance(rhs, Layout):
        flat = _coalesce_x(lhs, coprofile(rhs))
        return _composition_impl(flat.shape, flat.stride, rhs.shape, rhs.stride)
    if isinstance(rhs, list):
        rhs = tuple(rhs)
    if isinstance(rhs, tuple):
        return _transform_layout(lhs, rhs, composition, keep_rest=False)
    if isinstance(rhs, Underscore):
        return lhs
    if is_int(rhs):
        flat = _coalesce_x(lhs)
        return _composition_impl(flat.shape, flat.stride, rhs, Int(1))
    raise TypeError(f"composition: unsupported right operand {rhs!r}")


# ---------------------------------------------------------------------------------------------
# Complement and inverses
# ---------------------------------------------------------------------------------------------

def _complement(shp, strd, cotarget):
    if not isinstance(strd, tuple) and is_constant(0, strd):
        return Layout(_coalesce_shape(cotarget))
    shp, strd = wrap(shp), wrap(strd)
    r = len(shp)
    if r != 1 and not is_static(strd):
        raise ValueError(f"complement: dynamic strides {to_str(strd)} are supported only for rank-1 layouts")
    result_shape, result_stride = (), (Int(1),)
    for i in range(r - 1):
        min_stride = strd[-1]
        for d in reversed(strd[:-1]):
            min_stride = cmin(d, min_stride)
        min_idx = next(j for j, d in enumerate(strd) if int(d) == int(min_stride))
        new_shape = div(min_stride, result_stride[i])
        if is_constant(0, new_shape):
            raise ValueError("complement: non-injective layout detected")
        new_stride = min_stride * shp[min_idx]
        shp, strd = shp[:min_idx] + shp[min_idx + 1:], strd[:min_idx] + strd[min_idx + 1:]
        result_shape += (new_shape,)
        result_stride += (new_stride,)
    new_shape = div(strd[0], result_stride[r - 1])
    if is_constant(0, new_shape):
        raise ValueError("complement: non-injective layout detected")
    result_shape += (new_shape,)
    new_stride = strd[0] * shp[0]
    rest_shape = _coalesce_shape(ceil_div(cotarget, new_stride))
    rest_stride = compact_major(rest_shape, LayoutLeft, new_stride)
    return coalesce(Layout((result_shape, rest_shape), (result_stride, rest_stride)))


def complement(x, cotarget=None):
    """C++ ``complement``: the layout of the offsets below ``cotarget`` that ``x`` does not reach.

    ``cotarget`` (int, shape, or a Layout whose shape is used) defaults to ``cosize(x)``.
    """
    if _is_composed(x):
        return complement(x.layout_b, cosize(x) if cotarget is None else cotarget)
    f = filter(x)
    if cotarget is None:
        cotarget = cosize(f)
    elif isinstance(cotarget, Layout) or _is_composed(cotarget):
        cotarget = cotarget.shape
    else:
        cotarget = as_int_tuple(cotarget, "cotarget")
    return _complement(f.shape, f.stride, cotarget)


def _prefix_products(lshape):
    pre = [Int(1)]
    for s in lshape:
        pre.append(s * pre[-1])
    return pre


def _exchange_sort_by_key(keys, vals):
    pairs = list(zip(keys, vals))
    for i in range(len(pairs)):
        for j in range(i + 1, len(pairs)):
            if pairs[j][0] < pairs[i][0]:
                pairs[i], pairs[j] = pairs[j], pairs[i]
    return [v for _k, v in pairs]


def right_inverse(x):
    """C++ ``right_inverse``: ``x(result(i)) == i`` for ``i < size(result)`` (static strides only used)."""
    if isinstance(x, Underscore):
        return x
    if _is_composed(x) or isinstance(x, Swizzle):
        return right_inverse_composed(x)
    if is_int(x):
        return -x
    c = coalesce(x)
    lstride, lshape = wrap(c.stride), wrap(c.shape)
    pre = _prefix_products(lshape)
    idx = [i for i, d in enumerate(lstride) if is_static(d)]
    order = _exchange_sort_by_key([int(lstride[i]) for i in idx], idx)
    result_shape, result_stride, curr = (Int(1),), (Int(0),), Int(1)
    for i in order:
        if isinstance(curr, Int) and int(lstride[i]) == int(curr):
            result_shape += (lshape[i],)
            result_stride += (pre[i],)
            curr = lshape[i] * lstride[i]
    return coalesce(Layout(result_shape, result_stride))


def left_inverse(x):
    """C++ ``left_inverse``: ``result(x(i)) == i`` for injective ``x``; needs static strides."""
    if isinstance(x, Underscore):
        return x
    if _is_composed(x) or isinstance(x, Swizzle):
        return left_inverse_composed(x)
    if is_int(x):
        return -x
    c = coalesce(x)
    lstride, lshape = wrap(c.stride), wrap(c.shape)
    pre = _prefix_products(lshape)
    if not is_static(lstride):
        raise ValueError(f"left_inverse requires static strides, got {to_str(c.stride)}")
    order = _exchange_sort_by_key([int(d) for d in lstride], list(range(len(lstride))))
    result_shape, result_stride = (), (Int(0),)
    for i in order:
        d = lstride[i]
        if is_constant(0, d):
            continue
        sz = product(result_shape)
        if int(mod(d, sz)) != 0:
            raise ValueError(f"left_inverse: divisibility condition violated: stride {d!r} is not a multiple of {sz!r} "
                             f"(layout {to_str(x)} is not injective in a way left_inverse can invert)")
        result_shape += (div(d, sz),)
        result_stride += (pre[i],)
    return coalesce(Layout(result_shape + (lshape[order[-1]],), result_stride))


def max_common_layout(a, b):
    """C++ ``max_common_layout``: the largest layout R with ``a(R(i)) == i == b(R(i))``."""
    if _is_composed(a) or _is_composed(b):
        return max_common_layout_composed(a, b)
    inv_b = right_inverse(b)
    common = coalesce(composition(a, inv_b))
    s0, d0 = _get(common.shape, 0), _get(common.stride, 0)
    if is_static(s0) and is_constant(1, d0):
        return composition(inv_b, get(common, 0))
    return Layout(Int(1), Int(0))


def max_common_vector(a, b):
    """C++ ``max_common_vector``: number of contiguous elements ``a`` and ``b`` agree on (static)."""
    if _is_composed(a) or _is_composed(b):
        return max_common_vector_composed(a, b)
    common = coalesce(composition(a, right_inverse(b)))
    s0, d0 = _get(common.shape, 0), _get(common.stride, 0)
    if is_static(s0) and is_constant(1, d0):
        return s0
    return Int(1)


def nullspace(x):
    """C++ ``nullspace``: the layout of the coordinates that ``x`` maps to 0 (static-0 strides)."""
    fd = flatten(wrap(x.stride))
    fs = flatten(wrap(x.shape))
    iseq = [i for i, d in enumerate(fd) if is_constant(0, d)]
    if not iseq:
        return Layout(Int(1), Int(0))
    rstride = compact_major(fs, LayoutLeft)
    return Layout(unwrap(tuple(fs[i] for i in iseq)), unwrap(tuple(rstride[i] for i in iseq)))


# ---------------------------------------------------------------------------------------------
# Divide and product
# ---------------------------------------------------------------------------------------------

def tile_unzip(x, tiler):
    if _is_composed(x):
        return x._rebuild(tile_unzip(x.layout_b, tiler))
    return Layout(zip2_by(x.shape, tiler), zip2_by(x.stride, tiler))


def _as_tiler(t):
    if isinstance(t, list):
        t = tuple(t)
    if isinstance(t, tuple):
        return tuple(_as_tiler(a) for a in t)
    if isinstance(t, (Layout, Underscore)) or _is_composed(t):
        return t
    if is_int(t):
        return as_int_tuple(t)
    raise TypeError(f"tiler: expected a Layout, an integer, '_' or a tuple of them, got {t!r}")


def logical_divide(x, tiler):
    """C++ ``logical_divide``: ``x o (tiler, complement(tiler))``; by mode for a tuple tiler."""
    if _is_tensor(x):
        return x._with_layout(logical_divide(x.layout, tiler))
    if _is_composed(x):
        return x._rebuild(logical_divide(x.layout_b, tiler))
    tiler = _as_tiler(tiler)
    if isinstance(tiler, Layout) or _is_composed(tiler):
        return composition(x, make_layout(tiler, complement(tiler, shape(coalesce(x)))))
    if isinstance(tiler, tuple):
        return _transform_layout(x, tiler, logical_divide)
    if isinstance(tiler, Underscore):
        return x
    return logical_divide(x, Layout(tiler))


def zipped_divide(x, tiler):
    """``((tile modes), (rest modes))`` (C++ ``zipped_divide``)."""
    if _is_tensor(x):
        return x._with_layout(zipped_divide(x.layout, tiler))
    tiler = _as_tiler(tiler)
    return tile_unzip(logical_divide(x, tiler), tiler)


def _unpack(x, unpack_first):
    """C++ ``result(_, repeat<R1>(_))`` (or ``result(repeat<R0>(_), repeat<R1>(_))``) of a rank-2 result."""
    def wildcards(r):
        return _ if r == 1 else (_,) * r

    c0 = wildcards(int(rank(x, 0))) if unpack_first else _
    return slice_layout((c0, wildcards(int(rank(x, 1)))), x)


def tiled_divide(x, tiler):
    """``((tile modes), rest0, rest1, ...)`` (C++ ``tiled_divide``)."""
    if _is_tensor(x):
        return x._with_layout(tiled_divide(x.layout, tiler))
    return _unpack(zipped_divide(x, tiler), False)


def flat_divide(x, tiler):
    """``(tile0, tile1, ..., rest0, rest1, ...)`` (C++ ``flat_divide``)."""
    if _is_tensor(x):
        return x._with_layout(flat_divide(x.layout, tiler))
    return _unpack(zipped_divide(x, tiler), True)


def logical_product(block, tiler):
    """C++ ``logical_product``: ``(block, complement(block, size*cosize(tiler)) o tiler)``."""
    if _is_composed(block):
        return block._rebuild(logical_product(block.layout_b, tiler))
    tiler = _as_tiler(tiler)
    if _is_composed(tiler):
        return logical_product_composed_tiler(block, tiler)
    if isinstance(tiler, Layout):
        return make_layout(block, composition(complement(block, size(block) * cosize(tiler)), tiler))
    if isinstance(tiler, tuple):
        return _transform_layout(block, tiler, logical_product)
    if isinstance(tiler, Underscore):
        return block
    return logical_product(block, Layout(tiler))


def zipped_product(block, tiler):
    tiler = _as_tiler(tiler)
    return tile_unzip(logical_product(block, tiler), tiler)


def tiled_product(block, tiler):
    return _unpack(zipped_product(block, tiler), False)


def flat_product(block, tiler):
    return _unpack(zipped_product(block, tiler), True)


def _rank_sensitive_product(block, tiler, raked):
    if _is_composed(block):
        return block._rebuild(_rank_sensitive_product(block.layout_b, tiler, raked))
    if not isinstance(block, Layout) or not isinstance(tiler, Layout):
        raise TypeError("blocked_product / raked_product take two layouts")
    r = max(int(rank(block)), int(rank(tiler)))
    result = logical_product(append(block, n=r), append(tiler, n=r))
    a, b = get(result, 0), get(result, 1)
    return zip_layout(b, a) if raked else zip_layout(a, b)


def blocked_product(block, tiler):
    """C++ ``blocked_product``: repeat ``block`` over ``tiler``, blocks contiguous."""
    return _rank_sensitive_product(block, tiler, False)


def raked_product(block, tiler):
    """C++ ``raked_product``: repeat ``block`` over ``tiler``, blocks interleaved."""
    return _rank_sensitive_product(block, tiler, True)


def tile_to_shape(block, trg_shape, ord_shape=LayoutLeft):
    """C++ ``tile_to_shape``: repeat ``block`` (in mode order ``ord_shape``) to fill ``trg_shape``."""
    if _is_composed(block):
        return block._rebuild(tile_to_shape(block.layout_b, trg_shape, ord_shape))
    trg_shape = as_int_tuple(trg_shape, "target shape")
    if not isinstance(ord_shape, _MajorTag):
        ord_shape = as_int_tuple(ord_shape, "mode order")
    r = len(wrap(trg_shape))
    if int(rank(block)) > r:
        raise ValueError(f"tile_to_shape: rank of layout {to_str(block)} must be <= rank of target shape "
                         f"{to_str(trg_shape)}")
    padded = append(block, n=r)
    block_shape = product_each(padded.shape)
    target_shape = product_each(trg_shape)
    if is_static(target_shape) and not evenly_divides(target_shape, block_shape):
        raise ValueError(f"tile_to_shape: block shape {to_str(block_shape)} does not divide the target shape "
                         f"{to_str(target_shape)}")
    product_shape = ceil_div(target_shape, block_shape)
    return blocked_product(padded, make_ordered_layout(product_shape, ord_shape))


# ---------------------------------------------------------------------------------------------
# Upcast / downcast / recast
# ---------------------------------------------------------------------------------------------

def _upcast(n, s, d):
    if isinstance(s, tuple):
        return make_layout(*[_upcast(n, si, di) for si, di in zip(s, d)])
    if is_constant(0, d):
        return Layout(s, d)
    if is_static(d):
        if int(mod(d, n)) != 0 and int(mod(n, d)) != 0:
            raise ValueError(f"upcast<{int(n)}>: divisibility condition violated by stride {d!r}")
        return Layout(ceil_div(s, ceil_div(n, cabs(d))), signum(d) * ceil_div(cabs(d), n))
    return Layout(s, div(d, n))


def upcast(x, n):
    """C++ ``upcast<N>``: view ``x`` in elements N times wider (stride-1 extents shrink by N)."""
    n = Int(n)
    if _is_composed(x) or isinstance(x, Swizzle):
        return upcast_composed(x, n)
    if is_int(x):
        return div(x, n)
    return _upcast(n, x.shape, x.stride)


def _downcast(n, s, d):
    if isinstance(s, tuple):
        return make_layout(*[_downcast(n, si, di) for si, di in zip(s, d)])
    if is_constant(1, d) or is_constant(-1, d):
        return Layout(s * n, d)
    return Layout(s, d * n)


def downcast(x, n):
    """C++ ``downcast<N>``: view ``x`` in elements N times narrower (stride-1 extents grow by N)."""
    n = Int(n)
    if _is_composed(x) or isinstance(x, Swizzle):
        return downcast_composed(x, n)
    if is_int(x):
        return x * n
    if not any(is_constant(1, d) for d in flatten(wrap(x.stride))):
        raise ValueError(f"downcast requires adjacent elements (a static stride _1) in {to_str(x)}")
    return _downcast(n, x.shape, x.stride)


def recast(x, old_bits, new_bits):
    """C++ ``recast_layout<Old,New>`` for element widths in bits (e.g. ``recast(l, 16, 128)``)."""
    from math import gcd as _pygcd

    g = _pygcd(int(new_bits), int(old_bits))
    num, den = int(new_bits) // g, int(old_bits) // g
    if num == 1 and den == 1:
        return x
    if num == 1:
        return downcast(x, den)
    if den == 1:
        return upcast(x, num)
    return downcast(upcast(x, num), den)


def max_alignment(x):
    """C++ ``max_alignment``: the largest N for which ``upcast<N>`` compiles (static parts only)."""
    if _is_composed(x) or isinstance(x, Swizzle):
        return max_alignment_composed(x)
    c = coalesce(x)
    ss = tuple(s if is_static(s) else Int(1) for s in wrap(c.shape))
    sd = tuple(d if is_static(d) else Int(0) for d in wrap(c.stride))
    f = Layout(ss, sd)
    permuted = logical_divide(f, right_inverse(f))
    return gcd(size(permuted, 0), _get(permuted.stride, 1))


# ---------------------------------------------------------------------------------------------
# Composed layouts and swizzles (cute/layout_composed.hpp, cute/swizzle_layout.hpp)
# ---------------------------------------------------------------------------------------------

class ComposedLayout:
    """C++ ``ComposedLayout<A,O,B>``: ``c -> layout_a(offset + layout_b(c))``; printed ``A o O o B``.

    ``layout_b`` defines the domain (shape, size, rank); there are no strides.
    """

    __slots__ = ("layout_a", "offset", "layout_b")

    def __init__(self, layout_a, offset, layout_b):
        self.layout_a, self.offset, self.layout_b = layout_a, offset, layout_b

    @property
    def shape(self):
        return self.layout_b.shape

    def _rebuild(self, new_b):
        return composition3(self.layout_a, self.offset, new_b)

    def __call__(self, *coord, strict=False):
        c = _coordinate(coord, self.shape, strict, "ComposedLayout")
        if has_underscore(c):
            return self.slice(c)
        return _apply_outer(self.layout_a, self.offset + self.layout_b(c))

    def __getitem__(self, coord):
        return self(coord)

    def offsets(self):
        """All offsets in colexicographic order (vectorised)."""
        inner = self.layout_b.offsets() + int(self.offset)
        if isinstance(self.layout_a, Swizzle):
            return self.layout_a(inner)
        return self.layout_a.evaluate(inner)

    def slice_and_offset(self, coord):
        if isinstance(self.layout_a, Swizzle):
            return _swizzle_slice_and_offset(coord, self)
        sub = slice_layout(coord, self.layout_b)
        off = crd2idx(coord, self.layout_b.shape, self.layout_b.stride)
        return ComposedLayout(self.layout_a, self.offset + off, sub), Int(0)

    def slice(self, coord):
        return self.slice_and_offset(coord)[0]

    def domain_offset(self, coord):
        off = crd2idx(coord, self.layout_b.shape, self.layout_b.stride)
        return ComposedLayout(self.layout_a, self.offset + off, self.layout_b), Int(0)

    def compose(self, *tilers):
        return composition(self, tilers[0] if len(tilers) == 1 else tuple(tilers))

    def _key(self):
        a = self.layout_a._key() if hasattr(self.layout_a, "_key") else self.layout_a
        return (a, to_str(self.offset), self.layout_b._key())

    def __eq__(self, other):
        return isinstance(other, ComposedLayout) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def cute_str(self):
        return f"{to_str(self.layout_a)} o {to_str(self.offset)} o {to_str(self.layout_b)}"

    __str__ = cute_str

    def __repr__(self):
        return f"ComposedLayout({self.cute_str()})"


def _apply_outer(a, x):
    if isinstance(a, Layout):
        return crd2idx(x, a.shape, a.stride)
    return a(x)


def make_composed_layout(layout_a, offset, layout_b):
    """C++ ``make_composed_layout``: always a ComposedLayout (no simplification)."""
    return ComposedLayout(layout_a, offset, layout_b)


def _is_static_zero_offset(o):
    # C++'s composition(Swizzle<0,M,S>, Int<0>, Layout) overload matches Int<0> exactly: not smem_ptr_flag,
    # not the C<0u> of an upcast offset
    return type(o) is Int and int(o) == 0


def _is_constant_zero(o):
    # C++ is_constant<0, Offset>: Int<0> and C<0u>, not smem_ptr_flag (a type derived from Int<0>)
    return is_constant(0, o) and not isinstance(o, SmemPtrFlag)


def composition3(layout_a, offset, layout_b):
    """C++ ``composition(A, offset, B)``: ComposedLayout, except ``Sw<0,M,S> o _0 o Layout`` is the Layout."""
    if (isinstance(layout_a, Swizzle) and layout_a.num_bits == 0 and _is_static_zero_offset(offset)
            and isinstance(layout_b, Layout)):
        return layout_b
    return ComposedLayout(layout_a, offset, layout_b)


def make_swizzle_layout(sw):
    """C++ ``make_layout(Swizzle<B,M,S>)``: the swizzle over ``2^(M+B+|S|)`` elements."""
    return composition3(sw, Int(0), Layout(Int(1 << (sw.num_base + sw.num_bits + abs(sw.num_shft))), Int(1)))


def compose_layout_with(a, b):
    """``composition(Layout, Swizzle)`` and ``composition(Layout, ComposedLayout)``."""
    if isinstance(b, Swizzle):
        active_y = crd2idx(Int(b.yyy_msk), a.shape, a.stride)
        active_z = crd2idx(Int(b.zzz_msk), a.shape, a.stride)
        if not (is_static(active_y) and is_static(active_z)):
            raise ValueError("composition(Layout, Swizzle) needs a static layout")
        return composition3(make_swizzle(active_y, active_z), Int(0), a)
    if not is_constant(0, b.offset):  # C++ asserts offset == Int<0>{}, a comparison of values
        raise ValueError(f"composition(Layout, ComposedLayout) requires offset _0, got {to_str(b.offset)}")
    return composition(composition(a, b.layout_a), b.layout_b)


def compose_swizzles(s0, s1):
    """C++ ``composition(Swizzle, Swizzle)``: one swizzle with both masks (same shift only)."""
    if s0.num_shft != s1.num_shft:
        raise ValueError("composition: can only merge swizzles of the same shift")
    return make_swizzle(s0.yyy_msk ^ s1.yyy_msk, s0.zzz_msk ^ s1.zzz_msk)


def _neg_offset(o):
    return -o if not isinstance(o, MixedBits) else -int(o)


def _inverse_composed(x, inverse):
    """C++'s right_inverse / left_inverse of a swizzle or a composed layout, with `inverse` the layout's one."""
    if isinstance(x, Swizzle):
        return x
    if isinstance(x.layout_a, Swizzle) and _is_constant_zero(x.offset):
        return composition(inverse(x.layout_b), x.layout_a)
    return composition3(inverse(x.layout_b), _neg_offset(x.offset), inverse(x.layout_a))


def right_inverse_composed(x):
    return _inverse_composed(x, right_inverse)


def left_inverse_composed(x):
    return _inverse_composed(x, left_inverse)


def _log2_pow2(n, what):
    n = int(n)
    if n <= 0 or n & (n - 1):
        raise ValueError(f"{what}: N must be a power of two, got {n}")
    return n.bit_length() - 1


def _upcast_swizzle(sw, n):
    new_m = sw.num_base - _log2_pow2(n, "upcast of a Swizzle")
    if new_m >= 0:
        return Swizzle(sw.num_bits, new_m, sw.num_shft)
    return Swizzle(max(sw.num_bits + new_m, 0), 0, sw.num_shft)


def _upcast_offset(o, n):
    if isinstance(o, MixedBits):
        _log2_pow2(n, "upcast of MixedBits")
        if o.static_int % int(n) or o.static_flags % int(n):
            raise ValueError(f"upcast<{int(n)}>: the static bits of offset {to_str(o)} are not divisible "
                             "(C++ safe_div's static_assert)")
        return make_mixed_bits(div(Int(o.static_int), n), o.dynamic_int // int(n), div(Int(o.static_flags), n))
    if is_static(o):
        if int(o) % int(n) != 0:
            raise ValueError(f"upcast<{int(n)}>: static offset {to_str(o)} is not divisible")
        return UnsignedInt(div(o, n))  # C++ divides by a uint32_t N
    return div(o, n)


def upcast_composed(x, n):
    if isinstance(x, Swizzle):
        return _upcast_swizzle(x, n)
    if isinstance(x.offset, SmemPtrFlag):
        return composition3(x.layout_a, SmemPtrFlag(x.offset.bits * int(n)), upcast(x.layout_b, n))
    return composition3(upcast(x.layout_a, n), _upcast_offset(x.offset, n), upcast(x.layout_b, n))


def downcast_composed(x, n):
    if isinstance(x, Swizzle):
        return Swizzle(x.num_bits, x.num_base + _log2_pow2(n, "downcast of a Swizzle"), x.num_shft)
    if isinstance(x.offset, SmemPtrFlag):
        return composition3(x.layout_a, SmemPtrFlag(x.offset.bits // int(n)), downcast(x.layout_b, n))
    off = x.offset
    if isinstance(off, MixedBits):
        _log2_pow2(n, "downcast of MixedBits")
        off = make_mixed_bits(Int(off.static_int * int(n)), off.dynamic_int * int(n), Int(off.static_flags * int(n)))
    elif is_static(off):
        off = UnsignedInt(off * n)  # C++ multiplies by a uint32_t N
    else:
        off = off * n
    return composition3(downcast(x.layout_a, n), off, downcast(x.layout_b, n))


def max_common_layout_composed(a, b):
    if isinstance(a, ComposedLayout) and isinstance(b, Layout) and isinstance(a.layout_a, Swizzle):
        common = max_common_layout(a.layout_b, b)
        base = 1 << a.layout_a.num_base
        return composition(common, Int(base)) if base < int(size(common)) else common
    if isinstance(b, ComposedLayout) and isinstance(a, Layout):
        return max_common_layout_composed(b, a)
    raise TypeError("max_common_layout: supported for a swizzled ComposedLayout and a Layout")


def max_common_vector_composed(a, b):
    if isinstance(a, ComposedLayout) and isinstance(b, ComposedLayout):
        vec = max_common_vector(a.layout_b, b.layout_b)
        if a.layout_a == b.layout_a:
            return vec
        return cmin(cmin(vec, Int(1 << a.layout_a.num_base)), Int(1 << b.layout_a.num_base))
    if isinstance(a, ComposedLayout):
        return cmin(max_common_vector(a.layout_b, b), Int(1 << a.layout_a.num_base))
    return max_common_vector_composed(b, a)


def max_alignment_composed(x):
    if isinstance(x, Swizzle):
        return Int(1 << x.num_base)
    if not isinstance(x.layout_a, Swizzle):
        return Int(1)
    if isinstance(x.offset, MixedBits):
        off = Int(1 << _countr_zero(x.offset.static_int | x.offset.static_flags))
    elif is_static(x.offset):
        off = x.offset
    else:
        off = x.offset
    return gcd(gcd(Int(1 << x.layout_a.num_base), off), max_alignment(x.layout_b))


def _swizzle_projections(sw):
    b, m, s = sw.num_bits, sw.num_base, abs(sw.num_shft)
    shp = (Int(1 << m), Int(1 << b), Int(1 << (s - b)), Int(1 << b), Int(1))
    only_zy = Layout(shp, (Int(0), Int(1 << m), Int(0), Int(1 << (m + s)), Int(0)))
    return shp, only_zy


def logical_product_composed_tiler(block, tiler):
    """C++ ``logical_product(Layout, ComposedLayout<Swizzle,...>)``: moves the swizzle onto the product."""
    if not isinstance(tiler.layout_a, Swizzle):
        raise TypeError("logical_product with a composed tiler needs a Swizzle outer function")
    if not is_constant(0, tiler.offset):  # C++ asserts offset == Int<0>{}, a comparison of values
        raise ValueError("logical_product: require Swizzle offset == _0")
    sw = tiler.layout_a
    new_layout = logical_product(block, tiler.layout_b)
    _shp, only_zy = _swizzle_projections(sw)
    layout_only_zy = composition(only_zy, tiler.layout_b)
    active = crd2idx(size(layout_only_zy) - Int(1), layout_only_zy.shape, layout_only_zy.stride)
    active_z = active & Int(sw.zzz_msk)
    active_y = active & Int(sw.yyy_msk)
    tb = tiler.layout_b
    new_z = crd2idx((Int(0), crd2idx(active_z, tb.shape, tb.stride)), new_layout.shape, new_layout.stride)
    new_y = crd2idx((Int(0), crd2idx(active_y, tb.shape, tb.stride)), new_layout.shape, new_layout.stride)
    return composition3(make_swizzle(new_y, new_z), Int(0), new_layout)


def _cond_return(cond, cond_static, t, f):
    """C++ ``conditional_return(b, t, f)`` with static-ness of the condition and of the values."""
    if cond_static:
        return t if cond else f
    if isinstance(t, Int) and isinstance(f, Int) and int(t) == int(f):
        return t
    return int(t) if cond else int(f)


def _swizzle_strides(z_side, z, y, offset, nbits):
    out = []
    for i in range(nbits):
        probe = _and(offset, Int(y << i) if z_side else Int(z << i))
        cond = int(probe) == 0
        cond_static = isinstance(probe, Int)
        if z_side:
            out.append(_cond_return(cond, cond_static, Int(z * (1 << i)), Int(-z * (1 << i))))
        else:
            out.append(_cond_return(cond, cond_static, Int((y + z) * (1 << i)), Int((y - z) * (1 << i))))
    return tuple(out)


def _swizzle_slice_and_offset(coord, layout):
    sw = layout.layout_a
    if all_underscore(coord):
        return composition3(sw, layout.offset, slice_layout(coord, layout.layout_b)), Int(0)
    b, m, s = sw.num_bits, sw.num_base, abs(sw.num_shft)
    shp, only_zy = _swizzle_projections(sw)
    anti_zy = Layout(shp, (Int(1), Int(0), Int(1 << (m + b)), Int(0), Int(1 << (m + b + s))))
    sliced = slice_layout(coord, layout.layout_b)
    diced = dice_layout(coord, layout.layout_b)
    diced_coord = _dice(coord, coord)
    diced_anti = composition(anti_zy, diced)
    diced_only = composition(only_zy, diced)
    offset_only_zy = _xor(layout.offset, _to_mixed_bits(diced_only.shape, diced_only.stride,
                                                        idx2crd(diced_coord, diced_only.shape)))
    offset_anti_zy = crd2idx(diced_coord, diced_anti.shape, diced_anti.stride)
    sliced_only = composition(only_zy, sliced)
    active = crd2idx(size(sliced_only) - Int(1), sliced_only.shape, sliced_only.stride)
    if isinstance(active, Int) and int(active) & ~int(sw(active)):
        # the remaining layout hits both Y and Z bits: not reducible
        return composition3(sw, offset_only_zy, sliced), offset_anti_zy
    zm, ym = sw.zzz_msk, sw.yyy_msk
    z, y = zm & -zm, ym & -ym
    stride_lo = _swizzle_strides(z < y, z, y, offset_only_zy, b)
    stride_hi = _swizzle_strides(z > y, z, y, offset_only_zy, b)
    two = (Int(2),) * b
    sw_layout = Layout((Int(1 << m), _unwrap_rep(two), Int(1 << (s - b)), _unwrap_rep(two), Int(1)),
                       (Int(1), _unwrap_rep(stride_lo), Int(1 << (m + b)), _unwrap_rep(stride_hi),
                        Int(1 << (m + b + s))))
    return composition(sw_layout, sliced), _add_offsets(sw(offset_only_zy), offset_anti_zy)


def _unwrap_rep(t):
    # C++ repeat<B>(x) is x itself for B == 1
    return t[0] if len(t) == 1 else t


def _add_offsets(a, b):
    if isinstance(a, MixedBits):
        return int(a) + _plain(b)
    return a + b


def get_swizzle_portion(x):
    return x.layout_a if isinstance(x, ComposedLayout) and isinstance(x.layout_a, Swizzle) else Swizzle(0, 4, 3)


def get_nonswizzle_portion(x):
    return x.layout_b if isinstance(x, ComposedLayout) and isinstance(x.layout_a, Swizzle) else x


def as_position_independent_swizzle_layout(x):
    """C++ ``as_position_independent_swizzle_layout``: recast a byte-address swizzle to element units."""
    if not (isinstance(x, ComposedLayout) and isinstance(x.offset, SmemPtrFlag)):
        return x
    return composition3(recast(x.layout_a, 8, x.offset.bits), Int(0), x.layout_b)
