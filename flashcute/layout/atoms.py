"""MMA and copy atoms: the thread-value layouts CuTe's traits define, by CuTe name.

The layouts are data transcribed from CUTLASS's ``cute/atom/mma_traits_sm80.hpp``,
``mma_traits_sm90_gmma.hpp``, ``copy_traits.hpp``, ``copy_traits_sm75.hpp``, ``copy_traits_sm80.hpp``
and ``copy_traits_sm90.hpp``, written in CuTe's own printed form so they read like the headers.

    >>> atom = mma_atom("SM80_16x8x16_F32BF16BF16F32_TN")
    >>> print(atom.layout_a_tv)
    ((_4,_8),(_2,_2,_2)):((_32,_1),(_16,_8,_128))
    >>> print(copy_atom("SM75_U32x4_LDSM_N", "half_t").val_layout_src)
    (_32,_8):(_8,_1)

MMA layouts map (thread, value) to an index of the atom's (M,K) / (N,K) / (M,N) tile
(column-major); copy layouts map (thread, value) to a bit of the atom's data, and
``Copy_Atom<Op, T>`` recasts them to elements of T.

Also the swizzled shared-memory layout atoms: :func:`sm80_swizzle_atom` (ldmatrix-friendly SM80
atoms) and :func:`gmma_smem_atom` (SM90 ``GMMA::Layout_K_SW128_Atom<T>`` ...), built the way C++ does.
"""

import re
from dataclasses import dataclass
from functools import lru_cache

from .int_tuple import Int
from .layout import ComposedLayout, Layout, composition, recast, size, upcast
from .printing import parse_layout, to_str
from .swizzle import SmemPtrFlag, Swizzle

__all__ = [
    "MMAAtom", "CopyAtom", "mma_atom", "copy_atom", "mma_atom_names", "copy_op_names",
    "VALUE_BITS", "sm80_swizzle_atom", "gmma_smem_atom",
]

# Element types CuTe atoms are instantiated with, and their widths.
VALUE_BITS = {
    "uint1_t": 1, "int8_t": 8, "uint8_t": 8, "float_e4m3_t": 8, "float_e5m2_t": 8,
    "half_t": 16, "bfloat16_t": 16, "int16_t": 16, "uint16_t": 16,
    "float": 32, "tfloat32_t": 32, "int32_t": 32, "uint32_t": 32, "int": 32,
    "double": 64, "int64_t": 64, "uint64_t": 64, "uint128_t": 128,
}


def _bits_of(value_type):
    if isinstance(value_type, int) and not isinstance(value_type, bool):
        if value_type <= 0:
            raise ValueError(f"value type width must be positive bits, got {value_type}")
        return value_type
    if value_type not in VALUE_BITS:
        raise ValueError(f"unknown value type {value_type!r}; expected one of {sorted(VALUE_BITS)} "
                         f"or a width in bits")
    return VALUE_BITS[value_type]


# ---------------------------------------------------------------------------------------------
# MMA atoms
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class MMAAtom:
    """``MMA_Atom<MMA_Traits<Op>>``: which thread holds which element of A, B and C."""

    name: str
    shape_mnk: tuple          # (M, N, K) static
    thr_id: Layout            # logical thread -> thread index
    layout_a_tv: Layout       # (thr, val) -> (m, k) index
    layout_b_tv: Layout       # (thr, val) -> (n, k) index
    layout_c_tv: Layout       # (thr, val) -> (m, n) index
    value_types: tuple        # (D, A, B, C) element type names
    a_from_smem: bool = False  # GMMA SS/RS: operands read by descriptor, not held in registers
    b_from_smem: bool = False

    def __str__(self):
        return ("MMA_Atom\n"
                f"  ThrID:      {self.thr_id}\n"
                f"  Shape_MNK:  {to_str(self.shape_mnk)}\n"
                f"  LayoutA_TV: {self.layout_a_tv}\n"
                f"  LayoutB_TV: {self.layout_b_tv}\n"
                f"  LayoutC_TV: {self.layout_c_tv}\n")


# SM80 mma.sync layouts (cute/atom/mma_traits_sm80.hpp)
_SM80_16x8_ROW = "((_4,_8),(_2,_2)):((_32,_1),(_16,_8))"         # (T32,V4) -> (M16,N8)
_SM80_8x8_ROW = "((_4,_8),_2):((_16,_1),_8)"                      # (T32,V2) -> (M8,N8)
_SM80 = {
    # shape MNK,       A layout,                                       B layout,                               C layout
    "16x8x8": ((16, 8, 8), _SM80_16x8_ROW, _SM80_8x8_ROW, _SM80_16x8_ROW),
    "16x8x16": ((16, 8, 16), "((_4,_8),(_2,_2,_2)):((_32,_1),(_16,_8,_128))",
                "((_4,_8),(_2,_2)):((_16,_1),(_8,_64))", _SM80_16x8_ROW),
}
_SM80_TYPES = {
    "F16F16F16F16": ("half_t", "half_t", "half_t", "half_t"),
    "F32F16F16F32": ("float", "half_t", "half_t", "float"),
    "F32BF16BF16F32": ("float", "bfloat16_t", "bfloat16_t", "float"),
}

# SM90 warpgroup GMMA layouts (cute/atom/mma_traits_sm90_gmma.hpp)
_GMMA_TYPES = {
    "F16F16F16": ("half_t", "half_t", "half_t", "half_t"),
    "F32F16F16": ("float", "half_t", "half_t", "float"),
    "F32BF16BF16": ("float", "bfloat16_t", "bfloat16_t", "float"),
}
_GMMA_A_REGS_16B = "((_4,_8,_4),(_2,_2,_2)):((_128,_1,_16),(_64,_8,_512))"   # ALayout_64x16


def _gmma_c_layout(n):
    # CLayout_64xN: warp w of the warpgroup owns rows 16w..16w+15
    return f"((_4,_8,_4),(_2,_2,_{n // 8})):((_128,_1,_16),(_64,_8,_512))"


def _gmma_smem_layout(mn, k):
    # ABLayout<M,K>: every one of the 128 threads sees the whole (MN,K) tile through the descriptor
    return f"(_128,(_{mn},_{k})):(_0,(_1,_{mn}))"


_SM80_NAME = re.compile(r"SM80_(16x8x8|16x8x16)_(F16F16F16F16|F32F16F16F32|F32BF16BF16F32)_TN$")
_GMMA_NAME = re.compile(r"SM90_64x(\d+)x16_(F16F16F16|F32F16F16|F32BF16BF16)_(SS|RS)(?:<.*>)?$")


@lru_cache(maxsize=None)
def mma_atom(name):
    """The MMA atom named as in CuTe, e.g. ``SM80_16x8x16_F32BF16BF16F32_TN``,
    ``SM90_64x128x16_F32BF16BF16_SS`` (GMMA major-ness template arguments may be appended;
    they do not change the layouts)."""
    if not isinstance(name, str):
        raise TypeError(f"mma_atom expects a CuTe MMA name (str), got {type(name).__name__}")
    name = name.strip().replace(" ", "")
    m = _SM80_NAME.match(name)
    if m:
        (sm, sn, sk), a, b, c = _SM80[m.group(1)]
        return MMAAtom(name, (Int(sm), Int(sn), Int(sk)), Layout(Int(32)),
                       parse_layout(a), parse_layout(b), parse_layout(c), _SM80_TYPES[m.group(2)])
    m = _GMMA_NAME.match(name)
    if m:
        n, types, source = int(m.group(1)), m.group(2), m.group(3)
        if n % 8 != 0 or not 8 <= n <= 256:
            raise ValueError(f"{name}: GMMA N must be a multiple of 8 in [8, 256], got {n}")
        a = _gmma_smem_layout(64, 16) if source == "SS" else _GMMA_A_REGS_16B
        return MMAAtom(re.sub(r"<.*>$", "", name), (Int(64), Int(n), Int(16)), Layout(Int(128)),
                       parse_layout(a), parse_layout(_gmma_smem_layout(n, 16)),
                       parse_layout(_gmma_c_layout(n)), _GMMA_TYPES[types],
                       a_from_smem=source == "SS", b_from_smem=True)
    raise ValueError(f"unknown MMA atom {name!r}; known: SM80_16x8x{{8,16}}_{{{','.join(_SM80_TYPES)}}}_TN and "
                     f"SM90_64x{{N}}x16_{{{','.join(_GMMA_TYPES)}}}_{{SS,RS}} with N a multiple of 8 up to 256")


def mma_atom_names():
    """The MMA atom names :func:`mma_atom` knows (GMMA listed for the usual N only)."""
    names = [f"SM80_{shape}_{types}_TN" for shape in _SM80 for types in _SM80_TYPES]
    names += [f"SM90_64x{n}x16_{types}_{src}" for n in (8, 16, 32, 64, 96, 128, 192, 256)
              for types in _GMMA_TYPES for src in ("SS", "RS")]
    return names


# ---------------------------------------------------------------------------------------------
# Copy atoms
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CopyAtom:
    """``Copy_Atom<Op, ValueType>``: bit layouts of the traits, recast to elements of ValueType."""

    name: str
    value_type: str
    value_bits: int
    thr_id: Layout
    src_bits: Layout          # (src thr, src val) -> bit
    dst_bits: Layout          # (dst thr, dst val) -> bit
    ref_bits: Layout          # (ref thr, ref val) -> bit; TiledCopy's TV layouts are in these terms

    def _recast(self, bits_layout):
        return recast(bits_layout, 1, self.value_bits)

    @property
    def val_layout_src(self):
        return self._recast(self.src_bits)

    @property
    def val_layout_dst(self):
        return self._recast(self.dst_bits)

    @property
    def val_layout_ref(self):
        return self._recast(self.ref_bits)

    @property
    def num_val_src(self):
        return int(size(self.val_layout_src, 1))

    @property
    def num_val_dst(self):
        return int(size(self.val_layout_dst, 1))

    def __str__(self):
        return ("Copy_Atom\n"
                f"  ThrID:        {self.thr_id}\n"
                f"  ValLayoutSrc: {self.val_layout_src}\n"
                f"  ValLayoutDst: {self.val_layout_dst}\n"
                f"  ValLayoutRef: {self.val_layout_ref}\n"
                f"  ValueType:    {self.value_bits}b\n")


# ldmatrix (cute/atom/copy_traits_sm75.hpp): (src, dst) bit layouts; the reference is dst.
_LDSM = {
    "SM75_U32x1_LDSM_N": ("((_8,_4),_128):((_128,_0),_1)", "(_32,_32):(_32,_1)"),
    "SM75_U32x2_LDSM_N": ("((_16,_2),_128):((_128,_0),_1)", "(_32,(_32,_2)):(_32,(_1,_1024))"),
    "SM75_U32x4_LDSM_N": ("(_32,_128):(_128,_1)", "(_32,(_32,_4)):(_32,(_1,_1024))"),
    "SM75_U16x2_LDSM_T": ("((_8,_4),_128):((_128,_0),_1)", "((_4,_8),(_16,_2)):((_256,_16),(_1,_128))"),
    "SM75_U16x4_LDSM_T": ("((_16,_2),_128):((_128,_0),_1)",
                          "((_4,_8),(_16,_2,_2)):((_256,_16),(_1,_128,_1024))"),
    "SM75_U16x8_LDSM_T": ("(_32,_128):(_128,_1)", "((_4,_8),(_16,_2,_4)):((_256,_16),(_1,_128,_1024))"),
}
# stmatrix (copy_traits_sm90.hpp) swaps ldmatrix's source and destination; the reference is src.
_STSM_OF = {
    "SM90_U32x1_STSM_N": "SM75_U32x1_LDSM_N", "SM90_U32x2_STSM_N": "SM75_U32x2_LDSM_N",
    "SM90_U32x4_STSM_N": "SM75_U32x4_LDSM_N", "SM90_U16x2_STSM_T": "SM75_U16x2_LDSM_T",
    "SM90_U16x4_STSM_T": "SM75_U16x4_LDSM_T", "SM90_U16x8_STSM_T": "SM75_U16x8_LDSM_T",
}
# one thread moving one S -> D (copy_traits.hpp, copy_traits_sm80.hpp); the reference is src.
_SINGLE_THREAD = re.compile(
    r"(UniversalCopy|SM80_CP_ASYNC_CACHE(?:ALWAYS|GLOBAL)(?:_ZFILL)?)<\s*(\w+)\s*(?:,\s*(\w+)\s*)?>$")
_AUTO_VECTORIZING = re.compile(r"(AutoVectorizingCopyWithAssumedAlignment<\s*\d+\s*>|AutoVectorizingCopy|DefaultCopy)$")


def _one_thread(bits):
    return Layout((Int(1), Int(bits)))


@lru_cache(maxsize=None)
def copy_atom(op, value_type):
    """``Copy_Atom<op, value_type>``: e.g. ``copy_atom("SM75_U32x4_LDSM_N", "half_t")``,
    ``copy_atom("SM80_CP_ASYNC_CACHEGLOBAL<uint128_t>", "bfloat16_t")``,
    ``copy_atom("UniversalCopy<uint32_t>", "float")``. ``value_type`` may be a width in bits."""
    if not isinstance(op, str):
        raise TypeError(f"copy_atom expects a CuTe copy operation name (str), got {type(op).__name__}")
    op = op.strip()
    bits = _bits_of(value_type)
    type_name = value_type if isinstance(value_type, str) else f"uint{bits}_t"
    if op in _LDSM:
        src, dst = (parse_layout(t) for t in _LDSM[op])
        thr, ref = Layout(Int(32)), dst
    elif op in _STSM_OF:
        dst, src = (parse_layout(t) for t in _LDSM[_STSM_OF[op]])
        thr, ref = Layout(Int(32)), src
    elif _SINGLE_THREAD.match(op):
        kind, s, d = _SINGLE_THREAD.match(op).groups()
        src, dst = _one_thread(_bits_of(s)), _one_thread(_bits_of(d or s))
        thr, ref = Layout(Int(1)), src
    elif _AUTO_VECTORIZING.match(op):
        # the vector width is chosen when copying, the atom itself is one element
        src = dst = ref = Layout((Int(1), Int(1)), (Int(0), Int(0)))
        thr = Layout(Int(1))
    else:
        raise ValueError(f"unknown copy operation {op!r}; known: {', '.join(copy_op_names())}")
    atom = CopyAtom(op, type_name, bits, thr, src, dst, ref)
    for what, lay in (("Src", "val_layout_src"), ("Dst", "val_layout_dst"), ("Ref", "val_layout_ref")):
        try:
            n_thr = size(getattr(atom, lay), 0)
        except ValueError as e:
            raise ValueError(f"Copy_Atom<{op}, {type_name}>: {what} layout cannot be recast to "
                             f"{bits}-bit values ({e})") from e
        if int(n_thr) != int(size(thr)):
            raise ValueError(f"Copy_Atom<{op}, {type_name}>: CopyOperation is not valid for {what} "
                             f"of {bits}-bit values")
    return atom


def copy_op_names():
    return (list(_LDSM) + list(_STSM_OF)
            + ["UniversalCopy<T>", "SM80_CP_ASYNC_CACHEALWAYS<T>", "SM80_CP_ASYNC_CACHEGLOBAL<T>",
               "SM80_CP_ASYNC_CACHEALWAYS_ZFILL<T>", "SM80_CP_ASYNC_CACHEGLOBAL_ZFILL<T>",
               "AutoVectorizingCopyWithAssumedAlignment<N>", "DefaultCopy"])


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
