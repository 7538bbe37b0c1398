"""TiledMMA and TiledCopy: atoms tiled over threads, with CuTe's algorithms (``cute/atom/mma_atom.hpp``,
``cute/atom/copy_atom.hpp``) step for step, so every TV layout and partition equals C++'s.

    >>> mma = make_tiled_mma(mma_atom("SM80_16x8x16_F32BF16BF16F32_TN"),
    ...                      Layout((Int(4), Int(1), Int(1))), (Int(64), Int(16), Int(16)))
    >>> print(mma.get_layoutC_TV())
    ((_4,_8,_4),((_2,_2),(_1,_2))):((_128,_1,_16),((_64,_8),(_0,_512)))
    >>> s2r = make_tiled_copy_A(copy_atom("SM75_U32x4_LDSM_N", "half_t"), mma)
    >>> tXsA = s2r.get_slice(37).partition_S(sA)            # sA: a Tensor over shared memory

A TV layout maps (thread index, value index) to the column-major index of an (M,N) tile.
"""

from .atoms import CopyAtom, MMAAtom, mma_atom
from .int_tuple import Int, Underscore, _, is_static, prepend as prepend_mode, product_each
from .layout import (
    Layout, append, coalesce, complement, composition, filter as filter_layout, is_layout, left_inverse,
    logical_divide, logical_product, make_fragment_like, make_layout, raked_product, rank, right_inverse,
    shape, size, tiled_product, upcast, zip_layout, zipped_divide,
)
from .printing import to_str
from .tensor import Tensor

__all__ = [
    "TiledMMA", "ThrMMA", "make_tiled_mma", "partition_shape_A", "partition_shape_B",
    "partition_shape_C", "partition_fragment_C",
    "TiledCopy", "ThrCopy", "make_tiled_copy", "make_layout_tv", "make_tiled_copy_A",
    "make_tiled_copy_B", "make_tiled_copy_C", "make_tiled_copy_C_atom", "make_tiled_copy_S",
    "make_tiled_copy_D",
]


def _wildcards(n):
    """C++ ``repeat<n>(_)``: ``_`` itself for one mode."""
    return _ if n == 1 else (_,) * n


def _as_layout_or_tensor(x, what):
    if isinstance(x, Tensor):
        return x.layout
    if is_layout(x):
        return x
    raise TypeError(f"{what} expects a Tensor or a layout, got {type(x).__name__}")


def _slice_like(x, thr_layout, coord):
    """Slice ``thr_layout`` (the re-tiled layout of ``x``) at ``coord``: a Tensor keeps its memory."""
    if isinstance(x, Tensor):
        return Tensor(x.engine, thr_layout, x.offset)(coord)
    return thr_layout(coord)


# ---------------------------------------------------------------------------------------------
# TiledMMA
# ---------------------------------------------------------------------------------------------

class TiledMMA:
    """C++ ``TiledMMA<Atom, AtomLayoutMNK, PermutationMNK>``; build it with :func:`make_tiled_mma`."""

    def __init__(self, atom, atom_layout_mnk, permutation_mnk):
        if not isinstance(atom, MMAAtom):
            raise TypeError(f"TiledMMA needs an MMAAtom (see mma_atom()), got {type(atom).__name__}")
        if int(rank(atom_layout_mnk)) != 3:
            raise ValueError(f"TiledMMA requires a rank-3 atom layout (M,N,K), got {atom_layout_mnk}")
        if len(permutation_mnk) != 3:
            raise ValueError(f"TiledMMA requires a rank-3 permutation (M,N,K), got {to_str(permutation_mnk)}")
        self.atom = atom
        self.permutation_mnk = permutation_mnk
        self.thr_layout_vmnk = tiled_product(atom.thr_id, atom_layout_mnk)

    # -- sizes -----------------------------------------------------------------------------
    def permutation(self, i):
        """C++ ``permutation_mnk<I>()``: the tiler of mode I (``_`` means atom size x threads)."""
        perm = self.permutation_mnk[i]
        if isinstance(perm, Underscore):
            return self.atom.shape_mnk[i] * size(self.thr_layout_vmnk, i + 1)
        return perm

    def tile_size(self, i):
        return size(self.permutation(i))

    @property
    def tile_shape(self):
        return tuple(self.tile_size(i) for i in range(3))

    @property
    def size(self):
        """Number of threads."""
        return size(self.thr_layout_vmnk)

    # -- thread-value tilings of a tensor --------------------------------------------------
    def _thrfrg(self, x, m, n, atom_tv, thr_m, thr_n, what):
        if int(rank(x)) < 2:
            raise ValueError(f"thrfrg_{what}: the tensor needs rank >= 2, got {to_str(shape(x))}")
        t = logical_divide(x, (self.permutation(m), self.permutation(n)))
        atom_tile = (Layout(self.atom.shape_mnk[m]), Layout(self.atom.shape_mnk[n]))
        tv = composition(zipped_divide(t, atom_tile), (atom_tv, _))
        thr_tile = (_, (Layout(size(self.thr_layout_vmnk, thr_m)), Layout(size(self.thr_layout_vmnk, thr_n))))
        return zipped_divide(tv, thr_tile)

    def thrfrg_C(self, layout):
        """(M,N,...) -> ((ThrV,(ThrM,ThrN)),(FrgV,(RestM,RestN,...)))"""
        return self._thrfrg(layout, 0, 1, self.atom.layout_c_tv, 1, 2, "C")

    def thrfrg_A(self, layout):
        """(M,K,...) -> ((ThrV,(ThrM,ThrK)),(FrgV,(RestM,RestK,...)))"""
        return self._thrfrg(layout, 0, 2, self.atom.layout_a_tv, 1, 3, "A")

    def thrfrg_B(self, layout):
        """(N,K,...) -> ((ThrV,(ThrN,ThrK)),(FrgV,(RestN,RestK,...)))"""
        return self._thrfrg(layout, 1, 2, self.atom.layout_b_tv, 2, 3, "B")

    # -- TV layouts of the whole tile --------------------------------------------------------
    def _thridx_to_thrid(self):
        # thr_idx -> (ThrV,ThrM,ThrN,ThrK)
        vmnk = self.thr_layout_vmnk
        return composition(Layout((size(vmnk), Int(1)), (Int(1), Int(0))),
                           right_inverse(make_layout(vmnk, complement(vmnk))))

    def get_layoutC_TV(self):
        """(thr_idx, val_idx) -> (M,N) index of the tile."""
        ref = Layout((self.tile_size(0), self.tile_size(1)))
        return composition(self.thrfrg_C(ref), (self._thridx_to_thrid(), _))

    def _operand_tv(self, thrfrg, ref, keep_m):
        # (ThrV,(ThrM,ThrK)) -> (ThrV,(ThrM,ThrN,ThrK)): the thread mode A (B) is not tiled over
        vmnk = self.thr_layout_vmnk
        stride = (Int(1), Int(0)) if keep_m else (Int(0), Int(1))
        tile = (_, (Layout((size(vmnk, 1), size(vmnk, 2)), stride), _))
        return composition(composition(thrfrg(ref), (tile, _)), (self._thridx_to_thrid(), _))

    def get_layoutA_TV(self):
        """(thr_idx, val_idx) -> (M,K) index of the tile."""
        return self._operand_tv(self.thrfrg_A, Layout((self.tile_size(0), self.tile_size(2))), True)

    def get_layoutB_TV(self):
        """(thr_idx, val_idx) -> (N,K) index of the tile."""
        return self._operand_tv(self.thrfrg_B, Layout((self.tile_size(1), self.tile_size(2))), False)

    # -- per thread --------------------------------------------------------------------------
    def get_slice(self, thr_idx):
        n = int(self.size)
        if not 0 <= int(thr_idx) < n:
            raise ValueError(f"thread index {thr_idx} out of range for a TiledMMA of {n} threads")
        return ThrMMA(self, self.thr_layout_vmnk.get_flat_coord(thr_idx))

    get_thread_slice = get_slice

    def __str__(self):
        return ("TiledMMA\n"
                f"  ThrLayoutVMNK:  {self.thr_layout_vmnk}\n"
                f"  PermutationMNK: {to_str(self.permutation_mnk)}\n"
                + str(self.atom))


class ThrMMA:
    """One thread's view of a TiledMMA (C++ ``ThrMMA``): partitions of A, B, C."""

    def __init__(self, tiled_mma, thr_vmnk):
        self.tiled_mma, self.thr_vmnk = tiled_mma, thr_vmnk

    def _partition(self, x, thrfrg, m, n, what):
        layout = _as_layout_or_tensor(x, f"partition_{what}")
        thr = thrfrg(layout)
        v = self.thr_vmnk
        coord = ((v[0], (v[m], v[n])), (_, _wildcards(int(rank(thr, 1, 1)))))
        return _slice_like(x, thr, coord)

    def partition_C(self, ctensor):
        """(M,N,...) -> (FrgV,RestM,RestN,...): this thread's accumulators."""
        return self._partition(ctensor, self.tiled_mma.thrfrg_C, 1, 2, "C")

    def partition_A(self, atensor):
        """(M,K,...) -> (FrgV,RestM,RestK,...)"""
        return self._partition(atensor, self.tiled_mma.thrfrg_A, 1, 3, "A")

    def partition_B(self, btensor):
        """(N,K,...) -> (FrgV,RestN,RestK,...)"""
        return self._partition(btensor, self.tiled_mma.thrfrg_B, 2, 3, "B")

    def partition_fragment_C(self, ctensor):
        """A register fragment shaped like partition_C (column-major, as C++ allocates it)."""
        return Tensor(None, Layout(shape(self.partition_C(ctensor))))

    def _fragment(self, part, from_smem, what):
        if from_smem:
            raise ValueError(f"{self.tiled_mma.atom.name} reads operand {what} from shared memory through a "
                             f"descriptor; it has no register fragment (use partition_{what})")
        return Tensor(None, make_fragment_like(part.layout if isinstance(part, Tensor) else part))

    def partition_fragment_A(self, atensor):
        """A register fragment like partition_A, laid out as C++ ``make_fragment_like``."""
        return self._fragment(self.partition_A(atensor), self.tiled_mma.atom.a_from_smem, "A")

    def partition_fragment_B(self, btensor):
        return self._fragment(self.partition_B(btensor), self.tiled_mma.atom.b_from_smem, "B")


def _static_permutation(p, i):
    if isinstance(p, Underscore):
        return p
    if isinstance(p, Layout):
        if not (is_static(p.shape) and is_static(p.stride)):
            raise ValueError(f"TiledMMA requires static permutations; mode {i} is {p}")
        return p
    if isinstance(p, bool) or not isinstance(p, int):
        raise TypeError(f"permutation mode {i} must be an int, a Layout or _, got {p!r}")
    if int(p) <= 0:
        raise ValueError(f"permutation mode {i} must be positive, got {p}")
    return Int(p)   # permutations are compile-time constants in C++


def make_tiled_mma(atom, thr_layout=None, permutations=None):
    """C++ ``make_tiled_mma(atom, thr_layout, permutations)``.

    ``thr_layout``: how atoms are laid out over threads in (M,N,K), default ``(_1,_1,_1)``;
    ``permutations``: up to three tilers of M, N, K (ints, Layouts or ``_``); plain ints are
    taken as static, as C++ requires.
    """
    if isinstance(atom, str):
        atom = mma_atom(atom)
    if thr_layout is None:
        thr_layout = Layout((Int(1), Int(1), Int(1)))
    if not isinstance(thr_layout, Layout):
        raise TypeError(f"thr_layout must be a Layout, got {type(thr_layout).__name__}")
    if int(rank(thr_layout)) > 3:
        raise ValueError(f"thr_layout has rank {int(rank(thr_layout))}; an MMA tiles at most (M,N,K)")
    thr_layout_mnk = append(thr_layout, Layout(Int(1), Int(0)), 3)
    perms = () if permutations is None else tuple(permutations) if isinstance(permutations, (tuple, list)) \
        else (permutations,)
    if len(perms) > 3:
        raise ValueError(f"at most three permutations (M,N,K), got {len(perms)}")
    perms = tuple(_static_permutation(p, i) for i, p in enumerate(perms)) + (_,) * (3 - len(perms))
    return TiledMMA(atom, thr_layout_mnk, perms)


def _partition_shape(mma, thrfrg, shape_xy):
    dummy = Layout(shape_xy)
    tv = thrfrg(dummy)
    return shape(tv((Int(0), (_, _wildcards(int(rank(dummy)))))))


def partition_shape_C(mma, shape_mn):
    return _partition_shape(mma, mma.thrfrg_C, shape_mn)


def partition_shape_A(mma, shape_mk):
    return _partition_shape(mma, mma.thrfrg_A, shape_mk)


def partition_shape_B(mma, shape_nk):
    return _partition_shape(mma, mma.thrfrg_B, shape_nk)


def partition_fragment_C(mma, shape_mn):
    """C++ ``partition_fragment_C(tiled_mma, shape_MN)``: the accumulator fragment of any thread."""
    return Tensor(None, Layout(partition_shape_C(mma, shape_mn)))


# ---------------------------------------------------------------------------------------------
# TiledCopy
# ---------------------------------------------------------------------------------------------

class TiledCopy:
    """C++ ``TiledCopy<Atom, LayoutCopy_TV, Tiler_MN>``: ``layout_tv`` maps (thr, val) in the atom's
    reference terms to a coordinate of the ``tiler_mn`` tile."""

    def __init__(self, atom, layout_tv, tiler_mn):
        if not isinstance(atom, CopyAtom):
            raise TypeError(f"TiledCopy needs a CopyAtom (see copy_atom()), got {type(atom).__name__}")
        self.atom, self.layout_tv = atom, layout_tv
        self.tiler_mn = tiler_mn if isinstance(tiler_mn, tuple) else (tiler_mn,)
        ref = atom.val_layout_ref
        self.atom_num_thr, self.atom_num_val = size(ref, 0), size(ref, 1)
        n_thr, n_val = size(layout_tv, 0), size(layout_tv, 1)
        if int(n_thr) % int(self.atom_num_thr) != 0:
            raise ValueError(f"TiledCopy uses too few threads for {atom.name}: {int(n_thr)} threads is not a "
                             f"multiple of the atom's {int(self.atom_num_thr)}")
        if int(n_val) % int(self.atom_num_val) != 0:
            raise ValueError(f"TiledCopy uses too few values for {atom.name}<{atom.value_type}>: {int(n_val)} "
                             f"values per thread is not a multiple of the atom's {int(self.atom_num_val)}")

    @property
    def size(self):
        """Number of threads (C++ ``size(tiled_copy)``)."""
        return size(self.layout_tv, 0)

    def _ref2(self, trg):
        return composition(right_inverse(self.atom.val_layout_ref), trg)

    def tile2thrfrg(self, layout, ref2trg):
        """((TileM,TileN,...),(RestM,RestN,...)) -> (Thr,(FrgV,FrgX),(RestM,RestN,...))"""
        atom_layout_tv = zipped_divide(self.layout_tv, (self.atom_num_thr, self.atom_num_val))
        trg_layout_tv = composition(atom_layout_tv, (ref2trg, _))
        thrval2mn = coalesce(zip_layout(trg_layout_tv), (Int(1), (Int(1), Int(1))))
        tv = composition(layout, (thrval2mn, _))
        return tv(((_, _), _))

    def _tidfrg(self, layout, trg, what):
        if int(rank(layout)) < len(self.tiler_mn):
            raise ValueError(f"tidfrg_{what}: rank of the tensor ({int(rank(layout))}) is smaller than the "
                             f"tiler's ({len(self.tiler_mn)})")
        return self.tile2thrfrg(zipped_divide(layout, self.tiler_mn), self._ref2(trg))

    def tidfrg_S(self, layout):
        """(M,N,...) -> (Thr,(FrgV,FrgX),(RestM,RestN,...)) in source terms."""
        return self._tidfrg(layout, self.atom.val_layout_src, "S")

    def tidfrg_D(self, layout):
        return self._tidfrg(layout, self.atom.val_layout_dst, "D")

    def _tiler_shape(self):
        return tuple(shape(t) if isinstance(t, Layout) else t for t in self.tiler_mn)

    def _layout_tv_of(self, trg):
        ref = Layout((self._tiler_shape(), Int(1)))
        return self.tile2thrfrg(ref, self._ref2(trg))((_, _, Int(0)))

    def get_layoutS_TV(self):
        """(thr_idx, val_idx) -> (M,N) index of the tile, source side."""
        return self._layout_tv_of(self.atom.val_layout_src)

    def get_layoutD_TV(self):
        return self._layout_tv_of(self.atom.val_layout_dst)

    def retile(self, layout):
        """C++ ``TiledCopy::retile``: a register fragment's layout re-grouped by copy instruction."""
        r = int(rank(layout))
        v = size(layout, 0)
        if not is_static(v):
            raise ValueError(f"retile needs a fragment whose first mode has a static size, got {to_str(shape(layout))}")
        n_thr = self.size
        frg_layout_mn = upcast(composition(right_inverse(self.layout_tv), Layout(self._tiler_shape())), n_thr * v)
        frg_layout_v = zipped_divide(logical_product(Layout(v), right_inverse(frg_layout_mn)),
                                     Layout(self.atom_num_val))
        tiled = zipped_divide(layout, prepend_mode(product_each(shape(frg_layout_mn)), v))
        v_layout = composition(tiled, (frg_layout_v, _))
        return v_layout((_, (Int(0),) + (_,) * (r - 1)))

    def get_slice(self, thr_idx):
        n = int(self.size)
        if not 0 <= int(thr_idx) < n:
            raise ValueError(f"thread index {thr_idx} out of range for a TiledCopy of {n} threads")
        return ThrCopy(self, thr_idx)

    get_thread_slice = get_slice

    def __str__(self):
        return ("TiledCopy\n"
                f"  Tiler_MN:       {to_str(self.tiler_mn)}\n"
                f"  TiledLayout_TV: {self.layout_tv}\n"
                + str(self.atom))


class ThrCopy:
    """One thread's view of a TiledCopy (C++ ``ThrCopy``)."""

    def __init__(self, tiled_copy, thr_idx):
        self.tiled_copy, self.thr_idx = tiled_copy, thr_idx

    def _partition(self, x, tidfrg, what):
        layout = _as_layout_or_tensor(x, f"partition_{what}")
        return _slice_like(x, tidfrg(layout), (self.thr_idx, _, _wildcards(int(rank(layout)))))

    def partition_S(self, stensor):
        """(M,N,...) -> (CopyV,RestM,RestN,...): what this thread reads."""
        return self._partition(stensor, self.tiled_copy.tidfrg_S, "S")

    def partition_D(self, dtensor):
        """(M,N,...) -> (CopyV,RestM,RestN,...): what this thread writes."""
        return self._partition(dtensor, self.tiled_copy.tidfrg_D, "D")

    def retile_S(self, tensor):
        return self._retile(tensor)

    def retile_D(self, tensor):
        return self._retile(tensor)

    def _retile(self, x):
        layout = _as_layout_or_tensor(x, "retile")
        new = self.tiled_copy.retile(layout)
        return Tensor(x.engine, new, x.offset) if isinstance(x, Tensor) else new


def make_layout_tv(thr_layout, val_layout=None):
    """(tiler_mn, layout_tv) of threads ``thr_layout`` ((m,n) -> thr) each owning ``val_layout``
    ((m,n) -> val): the body of C++ ``make_tiled_copy`` (CuTe DSL's ``make_layout_tv``)."""
    if val_layout is None:
        val_layout = Layout(Int(1))
    if not isinstance(thr_layout, Layout) or not isinstance(val_layout, Layout):
        raise TypeError("make_layout_tv takes two Layouts: (m,n) -> thread and (m,n) -> value")
    layout_mn = raked_product(thr_layout, val_layout)
    layout_tv = composition(right_inverse(layout_mn), Layout((size(thr_layout), size(val_layout))))
    return product_each(shape(layout_mn)), layout_tv


def make_tiled_copy(atom, thr_layout, val_layout=None):
    """C++ ``make_tiled_copy(copy_atom, thr_layout, val_layout)``."""
    tiler, layout_tv = make_layout_tv(thr_layout, val_layout)
    return TiledCopy(atom, layout_tv, tiler)


def _require_mma(mma):
    if not isinstance(mma, TiledMMA):
        raise TypeError(f"expected a TiledMMA (see make_tiled_mma), got {type(mma).__name__}")
    return mma


def make_tiled_copy_A(atom, mma):
    """The copy whose threads/values match the TiledMMA's A operand (e.g. ldmatrix -> registers)."""
    mma = _require_mma(mma)
    return TiledCopy(atom, mma.get_layoutA_TV(), (mma.tile_size(0), mma.tile_size(2)))


def make_tiled_copy_B(atom, mma):
    mma = _require_mma(mma)
    return TiledCopy(atom, mma.get_layoutB_TV(), (mma.tile_size(1), mma.tile_size(2)))


def make_tiled_copy_C(atom, mma):
    mma = _require_mma(mma)
    return TiledCopy(atom, mma.get_layoutC_TV(), (mma.tile_size(0), mma.tile_size(1)))


def make_tiled_copy_C_atom(atom, mma):
    """C++ ``make_tiled_copy_C_atom``: the smallest TiledCopy covering one copy atom's worth of C."""
    layout_c = _require_mma(mma).get_layoutC_TV()
    copy_v = Int(atom.num_val_src)
    if int(copy_v) > int(size(layout_c, 1)):
        raise ValueError(f"{atom.name} moves {int(copy_v)} values, more than a thread's {int(size(layout_c, 1))} accumulators")
    layout_tv = composition(layout_c, Layout((size(layout_c, 0), copy_v)))
    mma_tiler = (mma.tile_size(0), mma.tile_size(1))
    tiler = tuple(filter_layout(composition(Layout(mma_tiler, tuple(Int(1) if j == i else Int(0) for j in range(2))),
                                            layout_tv))
                  for i in range(2))
    tile2mma = composition(Layout(mma_tiler), tiler)
    return TiledCopy(atom, composition(left_inverse(tile2mma), layout_tv), tiler)


def _require_copy(tiled_copy):
    if not isinstance(tiled_copy, TiledCopy):
        raise TypeError(f"expected a TiledCopy, got {type(tiled_copy).__name__}")
    return tiled_copy


def make_tiled_copy_S(atom, tiled_copy):
    """A TiledCopy of ``atom`` matching ``tiled_copy``'s source TV layout."""
    return TiledCopy(atom, _require_copy(tiled_copy).get_layoutS_TV(), tiled_copy.tiler_mn)


def make_tiled_copy_D(atom, tiled_copy):
    return TiledCopy(atom, _require_copy(tiled_copy).get_layoutD_TV(), tiled_copy.tiler_mn)
