"""Layout (shape:stride) and its algebra, following C++ CuTe's ``cute/layout.hpp`` branch for branch.

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
    basis_get, basis_value, transform_leaf,
)
from .printing import to_str

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
]


def _check_shape(shape):
    for s in flatten(wrap(shape)):
        if isinstance(s, (Underscore, ScaledBasis)):
            raise TypeError(f"shape {to_str(shape)} contains {s!r}; shape leaves must be integers")
        if int(s) < 0:
            raise ValueError(f"shape {to_str(shape)} has a negative extent {s!r}")


def _check_stride(stride):
    for d in flatten(wrap(stride)):
        if isinstance(d, Underscore):
            raise TypeError(f"stride {to_str(stride)} contains '_'; stride leaves must be integers")


class Layout:
    """A CuTe layout: a function from (hierarchical) coordinates to offsets, ``shape:stride``.

    ``Layout(shape)`` gets compact column-major strides (C++ ``LayoutLeft``); ``Layout(shape,
    LayoutRight)`` row-major; ``Layout(shape, stride)`` needs ``stride`` congruent with ``shape``.
    Plain ints are dynamic, ``Int(n)`` static (see :mod:`flashcute.layout.int_tuple`).

    ``layout(i)``, ``layout(i, j)``, ``layout((i, (j, k)))`` evaluate (range-checked, unlike C++);
    a coordinate containing ``_`` slices: ``layout(_, 2)`` / ``layout[_, 2]`` is the sub-layout
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
    def __call__(self, *coord):
        if not coord:
            raise TypeError("Layout call needs a coordinate")
        coord = coord[0] if len(coord) == 1 else tuple(coord)
        coord = as_int_tuple(coord, "coordinate")
        _check_coord(coord, self.shape)
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
        """Vectorised ``layout(i)`` for an array of non-negative 1-D indices (the last mode extends, as in C++)."""
        idx = np.asarray(indices, dtype=np.int64)
        if idx.size and idx.min() < 0:
            raise ValueError("evaluate: indices must be non-negative")
        return _evaluate(self.shape, self.stride, idx)

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
    idx = idx.copy()
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
        coord = idx if k == last else idx % s
        if isinstance(d, ScaledBasis):
            out[..., d.modes[0]] += coord * int(d.value)
        elif int(d) != 0:
            out += coord * int(d)
        if k != last:
            idx //= s
    return out


def is_layout(x):
    return isinstance(x, Layout) or _is_composed(x)


def _is_composed(x):
    return getattr(x, "is_composed_layout", False)


def _is_tensor(x):
    return getattr(x, "is_tensor", False)


def _swizzle_module():
    from . import swizzle

    return swizzle


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
    if getattr(args[0], "is_swizzle", False) and len(args) == 1:
        return _swizzle_module().make_swizzle_layout(args[0])
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
    from .int_tuple import depth as _depth

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
    from .int_tuple import replace as _replace

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
        return _swizzle_module().composition3(lhs, rhs, more[0])
    sw = _swizzle_module()
    if _is_composed(lhs):
        return lhs._rebuild(composition(lhs.layout_b, rhs))
    if getattr(lhs, "is_swizzle", False):
        if getattr(rhs, "is_swizzle", False):
            return sw.compose_swizzles(lhs, rhs)
        return sw.composition3(lhs, Int(0), rhs)
    if not isinstance(lhs, Layout):
        raise TypeError(f"composition: left operand must be a layout, got {type(lhs).__name__}")
    if _is_composed(rhs) or getattr(rhs, "is_swizzle", False):
        return sw.compose_layout_with(lhs, rhs)
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
    if _is_composed(x) or getattr(x, "is_swizzle", False):
        return _swizzle_module().right_inverse_composed(x)
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
    if _is_composed(x) or getattr(x, "is_swizzle", False):
        return _swizzle_module().left_inverse_composed(x)
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
        return _swizzle_module().max_common_layout_composed(a, b)
    inv_b = right_inverse(b)
    common = coalesce(composition(a, inv_b))
    s0, d0 = _get(common.shape, 0), _get(common.stride, 0)
    if is_static(s0) and is_constant(1, d0):
        return composition(inv_b, get(common, 0))
    return Layout(Int(1), Int(0))


def max_common_vector(a, b):
    """C++ ``max_common_vector``: number of contiguous elements ``a`` and ``b`` agree on (static)."""
    if _is_composed(a) or _is_composed(b):
        return _swizzle_module().max_common_vector_composed(a, b)
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
        return _swizzle_module().logical_product_composed_tiler(block, tiler)
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
    if _is_composed(x) or getattr(x, "is_swizzle", False):
        return _swizzle_module().upcast_composed(x, n)
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
    if _is_composed(x) or getattr(x, "is_swizzle", False):
        return _swizzle_module().downcast_composed(x, n)
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
    if _is_composed(x) or getattr(x, "is_swizzle", False):
        return _swizzle_module().max_alignment_composed(x)
    c = coalesce(x)
    ss = tuple(s if is_static(s) else Int(1) for s in wrap(c.shape))
    sd = tuple(d if is_static(d) else Int(0) for d in wrap(c.stride))
    f = Layout(ss, sd)
    permuted = logical_divide(f, right_inverse(f))
    from .int_tuple import gcd as _gcd

    return _gcd(size(permuted, 0), _get(permuted.stride, 1))
