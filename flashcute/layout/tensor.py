"""Tensor = engine (memory) + layout (+ offset), with CuTe's tiling and partitioning (``cute/tensor_impl.hpp``).

The engine is flat memory: a 1-D numpy array, a 1-D torch tensor (duck-typed, torch is never
imported here), or ``None`` for a layout-only tensor whose "elements" are the offsets themselves.
Identity (coordinate) tensors from :func:`make_identity_tensor` return coordinates.

``t(coord)`` / ``t[coord]`` read an element; as in C++ a coordinate outside the shape is not an
error (the last mode extends; ``t(coord, strict=True)`` checks), but a memory engine still refuses
to read outside itself.  A coordinate with ``_`` slices and returns a Tensor whose offset moved
(C++ ``slice_and_offset``).  :func:`local_tile`, :func:`local_partition`, :func:`inner_partition`
and :func:`outer_partition` follow C++ exactly.
"""

import numpy as np

from .int_tuple import (
    Int, ArithTuple, _, as_int_tuple, has_underscore, is_tuple, product_each, append as _append,
    repeat_like, dice as _dice, elem_less, crd2idx, as_arithmetic_tuple, sum_,
)
from .layout import (
    Layout, make_identity_layout, slice_and_offset, zipped_divide, tiled_divide, composition, rank,
    dice_layout, _coordinate, _is_composed,
)
from .printing import to_str

__all__ = [
    "Tensor", "make_tensor", "make_identity_tensor", "make_coord_tensor", "local_tile",
    "local_partition", "inner_partition", "outer_partition", "elem_less", "elem_less_mask",
]


class Tensor:
    """A CuTe tensor: ``element(c) = engine[offset + layout(c)]``.

    ``offset`` is an integer for memory engines, an :class:`ArithTuple` coordinate for identity
    tensors.  ``layout`` may be a Layout or a ComposedLayout (swizzled shared memory).
    """

    __slots__ = ("engine", "layout", "offset")
    is_tensor = True

    def __init__(self, engine, layout, offset=0):
        if not (isinstance(layout, Layout) or _is_composed(layout)):
            raise TypeError(f"Tensor needs a Layout or ComposedLayout, got {type(layout).__name__}")
        if engine is not None and not isinstance(engine, _CoordEngine) and getattr(engine, "ndim", 1) != 1:
            raise ValueError(f"Tensor engine must be 1-D flat memory, got {getattr(engine, 'ndim', '?')} dimensions")
        self.engine, self.layout, self.offset = engine, layout, offset

    # -- shape queries ---------------------------------------------------------------------
    @property
    def shape(self):
        return self.layout.shape

    @property
    def stride(self):
        return self.layout.stride

    def __len__(self):
        raise TypeError("use size(tensor) (len() is ambiguous for hierarchical tensors)")

    # -- element access and slicing ----------------------------------------------------------
    def __call__(self, *coord, strict=False):
        c = _coordinate(coord, self.shape, strict, "Tensor")
        if has_underscore(c):
            sub, off = slice_and_offset(c, self.layout)
            return Tensor(self.engine, sub, _add_offset(self.offset, off))
        L = self.layout
        return self._read(L(c) if _is_composed(L) else crd2idx(c, L.shape, L.stride))

    def __getitem__(self, coord):
        return self(coord)

    def _read(self, idx):
        pos = _add_offset(self.offset, idx)
        if self.engine is None:
            return pos
        if isinstance(self.engine, _CoordEngine):
            return pos
        n = _engine_len(self.engine)
        if not 0 <= int(pos) < n:
            raise IndexError(f"tensor element at offset {int(pos)} is outside its engine of {n} elements")
        return self.engine[int(pos)]

    def offsets(self):
        """Engine positions of all elements in colexicographic order (numpy, vectorised)."""
        offs = self.layout.offsets()
        if isinstance(self.engine, _CoordEngine) or isinstance(self.offset, tuple):
            base = np.array([int(v) for v in self.offset], dtype=np.int64)
            if offs.ndim == 1:
                offs = offs[:, None]
            width = max(offs.shape[1], base.shape[0])
            out = np.zeros((offs.shape[0], width), dtype=np.int64)
            out[:, :offs.shape[1]] += offs
            out[:, :base.shape[0]] += base
            return out
        return offs + int(self.offset)

    def values(self):
        """All elements in colexicographic order: engine values, offsets (no engine) or coordinates (identity)."""
        pos = self.offsets()
        if self.engine is None or isinstance(self.engine, _CoordEngine):
            return pos
        n = _engine_len(self.engine)
        if pos.size and (pos.min() < 0 or pos.max() >= n):
            raise IndexError(f"tensor reaches offsets [{int(pos.min())}, {int(pos.max())}] outside its engine "
                             f"of {n} elements")
        if isinstance(self.engine, np.ndarray):
            return self.engine[pos]
        return self.engine[_as_engine_index(self.engine, pos)]

    def _with_layout(self, layout):
        return Tensor(self.engine, layout, self.offset)

    def compose(self, *tilers):
        return self._with_layout(composition(self.layout, tilers[0] if len(tilers) == 1 else tuple(tilers)))

    def tile(self, *tilers):
        return self._with_layout(tiled_divide(self.layout, tilers[0] if len(tilers) == 1 else tuple(tilers)))

    def cute_str(self):
        if isinstance(self.engine, _CoordEngine):
            head = "ArithTuple" + to_str(self.offset)
        elif self.engine is None:
            head = f"offset({to_str(self.offset)})"
        else:
            head = f"{type(self.engine).__name__}[{_engine_len(self.engine)}]+{to_str(self.offset)}"
        return f"{head} o {to_str(self.layout)}"

    __str__ = cute_str

    def __repr__(self):
        return f"Tensor({self.cute_str()})"


class _CoordEngine:
    """Marks an identity tensor: elements are coordinates (C++ ``ArithmeticTupleIterator``)."""

    __slots__ = ()


def _engine_len(engine):
    n = getattr(engine, "shape", None)
    return int(n[0]) if n is not None else len(engine)


def _as_engine_index(engine, pos):
    # torch tensors index with torch tensors; avoid importing torch by asking the engine for its type
    to = getattr(engine, "new_tensor", None)
    return to(pos).long() if to is not None else pos


def _add_offset(offset, idx):
    if isinstance(offset, tuple) or isinstance(idx, tuple):
        return as_arithmetic_tuple(offset) + as_arithmetic_tuple(idx) if isinstance(offset, tuple) else (
            ArithTuple(as_arithmetic_tuple(idx)).__radd__(offset))
    return offset + idx


def make_tensor(engine, layout=None, offset=0):
    """``make_tensor(engine, layout)``: ``engine`` is 1-D memory (numpy/torch) or None (offsets only).

    ``layout`` may be a Layout, a ComposedLayout or a shape (compact column-major, as C++).
    """
    if layout is None:
        raise TypeError("make_tensor needs a layout (or a shape)")
    if not (isinstance(layout, Layout) or _is_composed(layout)):
        layout = Layout(layout)
    if engine is not None and not isinstance(engine, _CoordEngine):
        if getattr(engine, "ndim", 1) != 1:
            engine = engine.reshape(-1)
    return Tensor(engine, layout, offset)


def make_coord_tensor(layout):
    """C++ ``make_coord_tensor``: a tensor whose elements are ``layout``'s (basis-valued) results."""
    base = repeat_like(as_arithmetic_tuple(sum_(layout.stride)), Int(0))
    return Tensor(_CoordEngine(), layout, ArithTuple(base if isinstance(base, tuple) else (base,)))


def make_identity_tensor(shape):
    """C++ ``make_identity_tensor``: element ``c`` is the coordinate ``c`` itself (for predication)."""
    return make_coord_tensor(make_identity_layout(shape))


def _zipped(tensor, tiler):
    return tensor._with_layout(zipped_divide(tensor.layout, tiler))


def _slice(tensor, coord):
    return tensor(coord)


def inner_partition(tensor, tiler, coord):
    """C++ ``inner_partition``: tile ``tensor`` by ``tiler`` and keep the tile at ``coord`` of the rest."""
    _require_tensor(tensor, "inner_partition")
    tiled = _zipped(tensor, tiler)
    r0 = int(rank(tiled.layout, 0))
    first = _ if r0 == 1 else (_,) * r0
    coord = as_int_tuple(coord, "coordinate")
    if is_tuple(coord):
        r1 = int(rank(tiled.layout, 1))
        return _slice(tiled, (first, _append(coord, _, r1)))
    return _slice(tiled, (first, coord))


def outer_partition(tensor, tiler, coord):
    """C++ ``outer_partition``: tile ``tensor`` by ``tiler`` and keep element ``coord`` of every tile."""
    _require_tensor(tensor, "outer_partition")
    tiled = _zipped(tensor, tiler)
    r1 = int(rank(tiled.layout, 1))
    second = _ if r1 == 1 else (_,) * r1
    coord = as_int_tuple(coord, "coordinate")
    if is_tuple(coord):
        r0 = int(rank(tiled.layout, 0))
        return _slice(tiled, (_append(coord, _, r0), second))
    return _slice(tiled, (coord, second))


def local_tile(tensor, tiler, coord, proj=None):
    """C++ ``local_tile``: the tile of ``tensor`` at ``coord`` (``_`` in ``coord`` keeps a tile-count mode).

    ``proj`` (e.g. ``(1, _, 1)``, C++ ``Step<_1,X,_1>``) drops the modes marked ``_`` from
    ``tiler`` and ``coord`` first: ``local_tile(mK, (bM, bN, bK), (m, _, _), (_, 1, 1))``.
    """
    if proj is not None:
        proj = as_int_tuple(proj, "projection")
        return local_tile(tensor, _dice(proj, _as_tuple_tiler(tiler)), _dice(proj, as_int_tuple(coord, "coordinate")))
    return inner_partition(tensor, tiler, coord)


def _as_tuple_tiler(t):
    if isinstance(t, list):
        return tuple(t)
    return t


def local_partition(tensor, tile, index, proj=None):
    """C++ ``local_partition``: the elements thread ``index`` of the thread layout ``tile`` owns."""
    if not isinstance(tile, Layout):
        raise TypeError("local_partition: the thread tile must be a Layout")
    if proj is not None:
        return local_partition(tensor, dice_layout(as_int_tuple(proj, "projection"), tile), index)
    return outer_partition(tensor, product_each(tile.shape), tile.get_flat_coord(index))


def elem_less_mask(coord_tensor, bound):
    """Vectorised C++ ``elem_less(coord, bound)`` over all elements of a coordinate tensor.

    Returns a bool numpy array in colexicographic order: the predicate guarding ragged tiles.
    """
    coords = coord_tensor.values() if isinstance(coord_tensor, Tensor) else np.asarray(coord_tensor)
    bound = np.array([int(b) for b in (bound if isinstance(bound, tuple) else (bound,))], dtype=np.int64)
    if coords.ndim == 1:
        coords = coords[:, None]
    if coords.shape[1] > bound.shape[0]:
        return np.zeros(coords.shape[0], dtype=bool)
    return np.all(coords < bound[None, :coords.shape[1]], axis=1)


def _require_tensor(t, what):
    if not isinstance(t, Tensor):
        raise TypeError(f"{what} expects a Tensor, got {type(t).__name__}")

