"""Swizzle<B,M,S> and the offset types of swizzled layouts, following ``cute/swizzle.hpp`` and
``cute/pointer_flagged.hpp``.

* :class:`Swizzle` XORs the ``B`` bits at ``M + max(0,S)`` into the bits at ``M - min(0,S)``.
* :class:`MixedBits` is an offset whose bits are partly static, partly dynamic (slicing a swizzled
  layout tracks them to decide, as C++ does, whether the slice decays to a plain layout).
* :class:`SmemPtrFlag` is the offset of the SM90 GMMA atoms (``smem_ptr[16b](unset)``).

Like C++'s swizzle.hpp this needs no layouts; swizzled (composed) layouts and their algebra are in
:mod:`flashcute.layout.layout`, which builds on this module.
"""

import numpy as np

from .int_tuple import Int, is_static, is_int, shiftr

__all__ = ["Swizzle", "make_swizzle", "MixedBits", "SmemPtrFlag"]

_U32 = 0xFFFFFFFF


class Swizzle:
    """C++ ``Swizzle<B,M,S>``: ``offset ^ ((offset & yyy_msk) >> S)``; printed ``Sw<B,M,S>``.

    ``B`` bits of mask, ``M`` least-significant bits kept, shift ``S`` (``|S| >= B``).
    Calling it on an int, an ``Int`` or a numpy array applies the XOR.
    """

    __slots__ = ("num_bits", "num_base", "num_shft")

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


class UnsignedInt(Int):
    """A static unsigned integer, C++ ``C<Nu>``: what ``upcast<N>`` / ``downcast<N>`` make of a static offset
    (their ``N`` is a ``uint32_t``).  It computes and prints as :class:`Int` (``_0``), but it is not ``Int<0>``:
    ``Sw<0,M,S> o _0 o layout`` with this offset stays composed, where an ``Int<0>`` offset decays to the layout.
    """

    def __new__(cls, value):
        return int.__new__(cls, int(value))

    def __reduce__(self):
        return (UnsignedInt, (int(self),))


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
