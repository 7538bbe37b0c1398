"""Swizzle<B,M,S>, composed layouts (``A o offset o B``) and the shared-memory atoms built from them.

Follows ``cute/swizzle.hpp``, ``cute/layout_composed.hpp``, ``cute/swizzle_layout.hpp`` and
``cute/pointer_flagged.hpp``:

* :class:`Swizzle` XORs the ``B`` bits at ``M + max(0,S)`` into the bits at ``M - min(0,S)``.
* :class:`ComposedLayout` is ``layout_a o offset o layout_b``; most operations act on
  ``layout_b`` (which defines the domain) and re-compose, exactly as C++ does.
* Slicing a swizzled layout decays to a plain layout when C++ does (tracking statically and
  dynamically known offset bits with :class:`MixedBits`).
* :func:`sm80_swizzle_atom` and :func:`gmma_smem_atom` build the SM80 ldmatrix-friendly atoms and
  the SM90 GMMA atoms (``GMMA::Layout_K_SW128_Atom<T>`` ...) the way C++ does.
"""

import numpy as np

from .int_tuple import Int, is_static, is_int, all_underscore, cmin, gcd, div, shiftr, idx2crd, crd2idx
from .layout import (
    Layout, composition, right_inverse, left_inverse, upcast, downcast, max_common_layout,
    max_common_vector, logical_product, slice_layout, dice_layout, size, max_alignment,
)
from .printing import to_str

__all__ = [
    "Swizzle", "make_swizzle", "ComposedLayout", "make_composed_layout", "MixedBits",
    "SmemPtrFlag", "get_swizzle_portion", "get_nonswizzle_portion",
    "as_position_independent_swizzle_layout", "sm80_swizzle_atom", "gmma_smem_atom",
]

_U32 = 0xFFFFFFFF


class Swizzle:
    """C++ ``Swizzle<B,M,S>``: ``offset ^ ((offset & yyy_msk) >> S)``; printed ``Sw<B,M,S>``.

    ``B`` bits of mask, ``M`` least-significant bits kept, shift ``S`` (``|S| >= B``).
    Calling it on an int, an ``Int`` or a numpy array applies the XOR.
    """

    __slots__ = ("num_bits", "num_base", "num_shft")
    is_swizzle = True

    def __init__(self, b, m, s=None):
        s = b if s is None else s
        b, m, s = int(b), int(m), int(s)
        if m < 0:
            raise ValueError(f"Swizzle<{b},{m},{s}>: MBase must be non-negative")
        if b < 0:
            raise ValueError(f"Swizzle<{b},{m},{s}>: BBits must be non-negative")
        if abs(s) < b:
            raise ValueError(f"Swizzle<{b},{m},{s}>: abs(SShift) must be at least BBits")
        self.num_bits, self.num_base, self.num_shft = b, m, s

    @property
    def bit_msk(self):
        return (1 << self.num_bits) - 1

    @property
    def yyy_msk(self):
        return self.bit_msk << (self.num_base + max(0, self.num_shft))

    @property
    def zzz_msk(self):
        return self.bit_msk << (self.num_base - min(0, self.num_shft))

    @property
    def swizzle_code(self):
        return (self.yyy_msk | self.zzz_msk) & _U32

    def __call__(self, offset):
        if isinstance(offset, np.ndarray):
            y, s = self.yyy_msk, self.num_shft
            sel = offset & y
            return offset ^ (sel >> s if s >= 0 else sel << -s)
        if isinstance(offset, MixedBits):
            return offset ^ _shiftr_any(offset & Int(self.yyy_msk), Int(self.num_shft))
        if isinstance(offset, tuple) or not is_int(offset):
            raise TypeError(f"Swizzle applies to integer offsets, got {offset!r}")
        return offset ^ shiftr(offset & Int(self.yyy_msk), Int(self.num_shft))

    def _key(self):
        return (self.num_bits, self.num_base, self.num_shft)

    def __eq__(self, other):
        return isinstance(other, Swizzle) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def cute_str(self):
        return f"Sw<{self.num_bits},{self.num_base},{self.num_shft}>"

    __str__ = cute_str

    def __repr__(self):
        return self.cute_str()


def _popcount(x):
    return bin(x & _U32).count("1")


def _countr_zero(x):
    x &= _U32
    return 32 if x == 0 else (x & -x).bit_length() - 1


def make_swizzle(y, z):
    """C++ ``make_swizzle<Y,Z>()``: the Swizzle whose YYY and ZZZ masks are ``y`` and ``z``."""
    y, z = int(y) & _U32, int(z) & _U32
    bz, by = _popcount(y), _popcount(z)
    if bz != by:
        raise ValueError(f"make_swizzle: number of bits in Y={y:#x} and Z={z:#x} don't match")
    ty, tz = _countr_zero(y), _countr_zero(z)
    sw = Swizzle(bz, min(ty, tz) % 32, ty - tz)
    if (y | z) != sw.swizzle_code:
        raise ValueError(f"make_swizzle: Y={y:#x}, Z={z:#x} are not the masks of a Swizzle")
    return sw


class SmemPtrFlag(Int):
    """C++ ``smem_ptr_flag_bits<B>``: the offset of an unset smem pointer of B-bit elements.

    Behaves as a static ``_0`` in arithmetic; prints ``smem_ptr[Bb](unset)``.
    """

    def __new__(cls, bits):
        obj = int.__new__(cls, 0)
        obj.bits = int(bits)
        return obj

    def __repr__(self):
        return f"smem_ptr[{self.bits}b](unset)"

    __str__ = __repr__

    def __reduce__(self):
        return (SmemPtrFlag, (self.bits,))


def _is_static_zero_offset(o):
    # C++'s composition(Swizzle<0,M,S>, Int<0>, Layout) overload matches Int<0> exactly, not smem_ptr_flag
    return type(o) is Int and int(o) == 0


# ---------------------------------------------------------------------------------------------
# MixedBits: an offset whose bits are partly static, partly dynamic
# ---------------------------------------------------------------------------------------------

class MixedBits:
    """C++ ``MixedBits<S,F>``: value ``S | (dynamic & F)`` with static bits ``S`` and dynamic-bit flags ``F``.

    Prints like C++: ``M_S|(d&F)=value``.  Only bitwise operations keep it mixed; anything else
    converts it to a dynamic integer, as C++'s implicit ``uint32_t`` conversion does.
    """

    __slots__ = ("static_int", "static_flags", "dynamic_int")

    def __init__(self, s, f, d):
        self.static_int, self.static_flags, self.dynamic_int = s & _U32, f & _U32, d & _U32

    def __int__(self):
        return self.static_int | self.dynamic_int

    __index__ = __int__

    def __and__(self, o):
        if isinstance(o, MixedBits):
            s0, f0, d0, s1, f1, d1 = self._parts() + o._parts()
            return make_mixed_bits(Int(s0 & s1), ((s1 & f0) & d0) | ((s0 & f1) & d1) | (d0 & d1),
                                   Int((s1 & f0) | (s0 & f1) | (f0 & f1)))
        if isinstance(o, Int):
            s1 = int(o) & _U32
            return make_mixed_bits(Int(self.static_int & s1), self.dynamic_int, Int(self.static_flags & s1))
        return int(self) & o

    __rand__ = __and__

    def __or__(self, o):
        if isinstance(o, MixedBits):
            s0, f0, d0, s1, f1, d1 = self._parts() + o._parts()
            return make_mixed_bits(Int(s0 | s1), ((~s1 & f0) & d0) | ((~s0 & f1) & d1),
                                   Int((~s0 & f1) | (~s1 & f0)))
        if isinstance(o, Int):
            s1 = int(o) & _U32
            return make_mixed_bits(Int(self.static_int | s1), self.dynamic_int, Int(self.static_flags & ~s1))
        return int(self) | o

    __ror__ = __or__

    def __xor__(self, o):
        if isinstance(o, MixedBits):
            s0, f0, d0, s1, f1, d1 = self._parts() + o._parts()
            return make_mixed_bits(Int((~s0 & s1 & ~f0) | (s0 & ~s1 & ~f1)), (s0 | d0) ^ (s1 | d1), Int(f0 | f1))
        if isinstance(o, Int):
            s0, f0, d0 = self._parts()
            s1 = int(o) & _U32
            return make_mixed_bits(Int((~s0 & s1 & ~f0) | (s0 & ~s1)), (s0 | d0) ^ s1, Int(f0))
        return int(self) ^ o

    __rxor__ = __xor__

    def __lshift__(self, o):
        if isinstance(o, Int):
            n = int(o)
            return make_mixed_bits(Int(self.static_int << n), self.dynamic_int << n, Int(self.static_flags << n))
        return int(self) << o

    def __rshift__(self, o):
        if isinstance(o, Int):
            n = int(o)
            return make_mixed_bits(Int(self.static_int >> n), self.dynamic_int >> n, Int(self.static_flags >> n))
        return int(self) >> o

    def __add__(self, o):
        return int(self) + _plain(o)

    __radd__ = __add__

    def __sub__(self, o):
        return int(self) - _plain(o)

    def __rsub__(self, o):
        return _plain(o) - int(self)

    def __mul__(self, o):
        return int(self) * _plain(o)

    __rmul__ = __mul__

    def __neg__(self):
        return -int(self)

    def __eq__(self, o):
        return isinstance(o, (int, MixedBits)) and int(self) == int(o)

    def __hash__(self):
        return hash(int(self))

    def _parts(self):
        return (self.static_int, self.static_flags, self.dynamic_int)

    def __repr__(self):
        return f"M_{self.static_int}|({self.dynamic_int}&{self.static_flags})={int(self)}"

    cute_str = __repr__


def _plain(o):
    return int(o) if isinstance(o, MixedBits) else o


def make_mixed_bits(s, d, f):
    """C++ ``make_mixed_bits(C<s>, d, C<f>)``: a static Int when no dynamic bit survives."""
    s_, f_ = int(s) & _U32, int(f) & _U32
    new_f = f_ & ~s_ & _U32
    if new_f == 0 or is_static(d):
        return Int(s_) | (d & Int(new_f))
    return MixedBits(s_, new_f, int(d) & new_f)


def _shiftr_any(x, s):
    if isinstance(x, MixedBits):
        return x >> s if int(s) >= 0 else x << Int(-int(s))
    return shiftr(x, s)


def _to_mixed_bits(shape, stride, coord):
    if isinstance(shape, tuple):
        parts = [_to_mixed_bits(s, d, c) for s, d, c in zip(shape, stride, coord)]
        r = parts[-1]
        for p in reversed(parts[:-1]):
            r = _xor(p, r)
        return r
    span = shape * stride
    if not is_static(span) or not is_static(shape - Int(1)):
        raise ValueError("swizzle slicing needs static shapes and strides in the sliced modes")
    if int(span) != 0 and int(span) & (int(span) - 1):
        raise ValueError(f"swizzle slicing requires power-of-2 shape*stride, got {int(span)}")
    return make_mixed_bits(Int(0), coord * stride, (shape - Int(1)) * stride)


def _xor(a, b):
    if isinstance(b, MixedBits) and not isinstance(a, MixedBits):
        return b ^ a
    return a ^ b


def _and(a, b):
    if isinstance(b, MixedBits) and not isinstance(a, MixedBits):
        return b & a
    return a & b


# ---------------------------------------------------------------------------------------------
# ComposedLayout
# ---------------------------------------------------------------------------------------------

class ComposedLayout:
    """C++ ``ComposedLayout<A,O,B>``: ``c -> layout_a(offset + layout_b(c))``; printed ``A o O o B``.

    ``layout_b`` defines the domain (shape, size, rank); there are no strides.
    """

    __slots__ = ("layout_a", "offset", "layout_b")
    is_composed_layout = True

    def __init__(self, layout_a, offset, layout_b):
        self.layout_a, self.offset, self.layout_b = layout_a, offset, layout_b

    @property
    def shape(self):
        return self.layout_b.shape

    def _rebuild(self, new_b):
        return composition3(self.layout_a, self.offset, new_b)

    def __call__(self, *coord):
        if not coord:
            raise TypeError("ComposedLayout call needs a coordinate")
        c = coord[0] if len(coord) == 1 else tuple(coord)
        from .int_tuple import as_int_tuple, has_underscore

        c = as_int_tuple(c, "coordinate")
        if has_underscore(c):
            self.layout_b(c)  # range-checks the fixed part of the coordinate
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
    if not _is_static_zero_offset(b.offset) and not isinstance(b.offset, SmemPtrFlag):
        raise ValueError(f"composition(Layout, ComposedLayout) requires offset _0, got {to_str(b.offset)}")
    return composition(composition(a, b.layout_a), b.layout_b)


def compose_swizzles(s0, s1):
    """C++ ``composition(Swizzle, Swizzle)``: one swizzle with both masks (same shift only)."""
    if s0.num_shft != s1.num_shft:
        raise ValueError("composition: can only merge swizzles of the same shift")
    return make_swizzle(s0.yyy_msk ^ s1.yyy_msk, s0.zzz_msk ^ s1.zzz_msk)


def _neg_offset(o):
    return -o if not isinstance(o, MixedBits) else -int(o)


def right_inverse_composed(x):
    if isinstance(x, Swizzle):
        return x
    if isinstance(x.layout_a, Swizzle) and _is_static_zero_offset(x.offset):
        return composition(right_inverse(x.layout_b), x.layout_a)
    return composition3(right_inverse(x.layout_b), _neg_offset(x.offset), right_inverse(x.layout_a))


def left_inverse_composed(x):
    if isinstance(x, Swizzle):
        return x
    if isinstance(x.layout_a, Swizzle) and _is_static_zero_offset(x.offset):
        return composition(left_inverse(x.layout_b), x.layout_a)
    return composition3(left_inverse(x.layout_b), _neg_offset(x.offset), left_inverse(x.layout_a))


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
        return make_mixed_bits(div(Int(o.static_int), n), o.dynamic_int // int(n), div(Int(o.static_flags), n))
    if is_static(o) and int(o) % int(n) != 0:
        raise ValueError(f"upcast<{int(n)}>: static offset {to_str(o)} is not divisible")
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
    if not _is_static_zero_offset(tiler.offset):
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
    from .int_tuple import dice as _dice

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
    from .layout import recast

    return composition3(recast(x.layout_a, 8, x.offset.bits), Int(0), x.layout_b)


# ---------------------------------------------------------------------------------------------
# Shared-memory atoms
# ---------------------------------------------------------------------------------------------

def sm80_swizzle_atom(k_elems=64, bits=16, rows=8):
    """SM80 K-major smem atom for ldmatrix / 128-bit loads, as FlashAttention-2 and CuTe's sgemm_sm80 build it.

    ``composition(Swizzle<B,M,3>, Layout<(rows, k):(k, 1)>)`` with ``M = log2(16 bytes / element)``
    and ``B = log2(row bytes / 16)`` capped at 3 (64 fp16 -> ``Sw<3,3,3>``, 32 fp16 -> ``Sw<2,3,3>``).
    """
    elem_bytes = int(bits) // 8
    if elem_bytes < 1 or 16 % elem_bytes:
        raise ValueError(f"sm80_swizzle_atom: unsupported element width {bits} bits")
    row_bytes = int(k_elems) * elem_bytes
    if row_bytes < 16 or row_bytes & (row_bytes - 1):
        raise ValueError(f"sm80_swizzle_atom: a row of {k_elems} elements must be a power-of-2 multiple of 16 bytes")
    m = (16 // elem_bytes).bit_length() - 1
    b = min(3, (row_bytes // 16).bit_length() - 1)
    return composition(Swizzle(b, m, 3), Layout((Int(rows), Int(k_elems)), (Int(k_elems), Int(1))))


_GMMA_SWIZZLE = {"INTER": 0, "SW32": 1, "SW64": 2, "SW128": 3}


def gmma_smem_atom(major, kind, bits):
    """SM90 ``GMMA::Layout_{K,MN}_{INTER,SW32,SW64,SW128}_Atom<T>`` for ``bits``-wide elements.

    Built as C++ does: the bit-level atom ``ComposedLayout<Swizzle<b,4,3>, smem_ptr_flag, Layout<...>>``
    upcast to the element width, e.g. K/SW128/16 -> ``Sw<3,4,3> o smem_ptr[16b](unset) o (_8,_64):(_64,_1)``.
    """
    major, kind = str(major).upper(), str(kind).upper()
    if kind not in _GMMA_SWIZZLE:
        raise ValueError(f"gmma_smem_atom: kind must be one of {sorted(_GMMA_SWIZZLE)}, got {kind!r}")
    b = _GMMA_SWIZZLE[kind]
    width = 128 << b
    if major == "K":
        bits_layout = Layout((Int(8), Int(width)), (Int(width), Int(1)))
    elif major == "MN":
        bits_layout = Layout((Int(width), Int(8)), (Int(1), Int(width)))
    else:
        raise ValueError(f"gmma_smem_atom: major must be 'K' or 'MN', got {major!r}")
    atom = ComposedLayout(Swizzle(b, 4, 3), SmemPtrFlag(1), bits_layout)
    return upcast(atom, int(bits))

