"""The shipped kernel configurations, described in Python and built with flashcute.layout.

Each configuration names the same layouts and atoms as the kernel's C++ traits (csrc/sm80/kernel_traits.h,
csrc/sm90/kernel_traits.h, and the backwards' csrc/sm80/bwd_kernel_traits.h and csrc/sm90/bwd_kernel_traits.h) and
builds them the way the traits do (swizzled atoms, tile_to_shape, TiledMMA, make_tiled_copy[_A|_B|_C]).
``printed()`` gives every object as C++ ``cute::print`` writes it, under the names
csrc/tools/print_kernel_layouts.cpp uses, so tests/test_kernel_layouts.py can hold the two equal, character for
character.

    >>> from flashcute.kernel_configs import get_config
    >>> cfg = get_config("sm80", "bf16", 128)
    >>> print(cfg.smem_layout_q)
    Sw<3,3,3> o _0 o ((_8,_16),(_64,_2)):((_64,_512),(_1,_8192))
"""

from dataclasses import dataclass
from functools import cached_property

from . import kernel_table
from .layout import (
    Int, Layout, LayoutRight, Swizzle, composition, cosize, get_nonswizzle_portion, gmma_smem_atom, make_layout,
    make_ordered_layout, tile_to_shape, to_str,
)
from .layout.atoms import copy_atom, mma_atom
from .layout.tiled import make_tiled_copy, make_tiled_copy_A, make_tiled_copy_B, make_tiled_copy_C, make_tiled_mma

DTYPES = kernel_table.DTYPES
ELEMENT_BITS = {"fp16": 16, "bf16": 16}
CUTE_TYPE = {"fp16": "half_t", "bf16": "bfloat16_t"}
MMA_TYPE = {"fp16": "F16", "bf16": "BF16"}


def _printed(fields):
    return {name: to_str(value) if isinstance(value, tuple) else str(value) for name, value in fields.items()}


def _mma_fields(name, mma, atom_shape=False):
    fields = {f"{name}.atom_Shape_MNK": mma.atom.shape_mnk} if atom_shape else {}
    fields.update({
        f"{name}.ThrLayoutVMNK": mma.thr_layout_vmnk,
        f"{name}.tile_shape": mma.tile_shape,
        f"{name}.layoutA_TV": mma.get_layoutA_TV(),
        f"{name}.layoutB_TV": mma.get_layoutB_TV(),
        f"{name}.layoutC_TV": mma.get_layoutC_TV(),
    })
    return fields


def _copy_fields(name, tiled_copy):
    return {
        f"{name}.Tiler_MN": tiled_copy.tiler_mn,
        f"{name}.TiledLayout_TV": tiled_copy.layout_tv,
        f"{name}.layoutS_TV": tiled_copy.get_layoutS_TV(),
        f"{name}.layoutD_TV": tiled_copy.get_layoutD_TV(),
    }

class _ElementConfig:
    """What every configuration derives from its input type."""

    def __post_init__(self):
        if self.dtype not in ELEMENT_BITS:
            raise ValueError(f"dtype must be one of {DTYPES}, got {self.dtype!r}")

    @property
    def element_bits(self):
        return ELEMENT_BITS[self.dtype]

    @property
    def element_bytes(self):
        return self.element_bits // 8

    @property
    def element_type(self):
        return CUTE_TYPE[self.dtype]


class _Sm80CopyTraits(_ElementConfig):
    """``flashcute::sm80::CopyTraits<Element, kHeadDim, kNThreads>``, the base of the SM80 forward's and backward's
    traits: the swizzled shared-memory atom, the shared-memory copy atoms, the 128-bit global-memory copies."""

    arch = "sm80"

    @property
    def n_threads(self):
        return self.n_warps * 32

    @property
    def mma_op(self):
        return "SM80_16x8x16_F32F16F16F32_TN" if self.dtype == "fp16" else "SM80_16x8x16_F32BF16BF16F32_TN"

    @property
    def block_k_smem(self):
        """Row width of the swizzle atom in elements: 64 (128 B) when the head dim allows, else 32."""
        return 64 if self.head_dim % 64 == 0 else 32

    @cached_property
    def smem_layout_atom(self):
        bits = 3 if self.block_k_smem == 64 else 2
        k = Int(self.block_k_smem)
        return composition(Swizzle(bits, 3, 3), Layout((Int(8), k), (k, Int(1))))

    @property
    def tile_shape_mnk(self):
        return (Int(self.block_m), Int(self.block_n), Int(self.head_dim))

    def _head_dim_rows(self, rows):
        """(rows, head_dim) of the swizzled atom: Q (and dO), K and V buffers."""
        return tile_to_shape(self.smem_layout_atom, (Int(rows), Int(self.head_dim)))

    @cached_property
    def smem_layout_kv(self):
        return self._head_dim_rows(self.block_n)

    # SmemCopyAtom, SmemCopyAtomTransposed, SmemCopyAtomStore
    def smem_copy_atom(self):
        return copy_atom("SM75_U32x4_LDSM_N", self.element_type)

    def smem_copy_atom_transposed(self):
        return copy_atom("SM75_U16x8_LDSM_T", self.element_type)

    def smem_copy_atom_store(self):
        return copy_atom("AutoVectorizingCopyWithAssumedAlignment<128>", self.element_type)

    @property
    def gmem_elems_per_load(self):
        return 128 // self.element_bits

    @property
    def gmem_threads_per_row(self):
        return self.block_k_smem // self.gmem_elems_per_load

    @cached_property
    def gmem_layout_atom(self):
        per_row = self.gmem_threads_per_row
        return Layout((Int(self.n_threads // per_row), Int(per_row)), (Int(per_row), Int(1)))

    def _gmem_tiled_copy(self, op):
        return make_tiled_copy(copy_atom(op, self.element_type), self.gmem_layout_atom,
                               Layout((Int(1), Int(self.gmem_elems_per_load))))

    @cached_property
    def gmem_tiled_copy_qkv(self):
        """128-bit cp.async into shared memory (zero-filling rows and columns out of bounds)."""
        return self._gmem_tiled_copy("SM80_CP_ASYNC_CACHEGLOBAL_ZFILL<uint128_t>")

    @cached_property
    def gmem_tiled_copy(self):
        """128-bit synchronous copies, e.g. out of a swizzled staging buffer into global memory."""
        return self._gmem_tiled_copy("UniversalCopy<uint128_t>")


@dataclass(frozen=True)
class Sm80Config(_Sm80CopyTraits):
    """One instantiation of ``flashcute::sm80::KernelTraits<Element, kHeadDim, kBlockM, kBlockN, kNWarps, ...,
    kKeySlices>``: the forward's (op "fwd") or the decode kernel's (op "decode"). key_slices > 1 (the decode
    kernel's key-split tile): the warps split each K/V block's keys into that many slices, each slice's warps
    stacked along M; the TiledMMA is one slice's."""

    dtype: str
    head_dim: int
    block_m: int
    block_n: int
    n_warps: int
    op: str = "fwd"
    key_slices: int = 1

    # -- tiles and threads -----------------------------------------------------------------

    @property
    def warps_m(self):
        """The warps of one key slice, stacked along M."""
        return self.n_warps // self.key_slices

    @property
    def kv_stages(self):
        """K/V buffers per operand: the SM80 kernel has one K and one V buffer."""
        return 1

    # -- shared memory ---------------------------------------------------------------------
    @cached_property
    def smem_layout_q(self):
        return self._head_dim_rows(self.block_m)

    @cached_property
    def smem_layout_vt(self):
        """V seen as (head_dim, kBlockN): the B operand of O = P.V."""
        return composition(self.smem_layout_kv, make_layout((Int(self.head_dim), Int(self.block_n)), LayoutRight))

    @cached_property
    def smem_layout_vt_noswizzle(self):
        return get_nonswizzle_portion(self.smem_layout_vt)

    @property
    def smem_layout_o(self):
        """O is staged in Q's buffer."""
        return self.smem_layout_q

    @property
    def smem_q_elems(self):
        return int(cosize(self.smem_layout_q))

    @property
    def smem_kv_elems(self):
        return int(cosize(self.smem_layout_kv))

    @property
    def smem_bytes(self):
        return (self.smem_q_elems + 2 * self.kv_stages * self.smem_kv_elems) * self.element_bytes

    # -- tensor cores and shared memory -> registers --------------------------------------------
    @cached_property
    def tiled_mma(self):
        """A key slice's warps stacked along M, each owning 16-row slabs of the Q block."""
        return make_tiled_mma(mma_atom(self.mma_op), Layout((Int(self.warps_m), Int(1), Int(1))),
                              (Int(16 * self.warps_m), Int(16), Int(16)))

    @cached_property
    def smem_tiled_copy_q(self):
        return make_tiled_copy_A(self.smem_copy_atom(), self.tiled_mma)

    @cached_property
    def smem_tiled_copy_k(self):
        return make_tiled_copy_B(self.smem_copy_atom(), self.tiled_mma)

    @cached_property
    def smem_tiled_copy_v(self):
        return make_tiled_copy_B(self.smem_copy_atom_transposed(), self.tiled_mma)

    @cached_property
    def smem_tiled_copy_o(self):
        return make_tiled_copy_C(self.smem_copy_atom_store(), self.tiled_mma)

    @property
    def gmem_tiled_copy_o(self):
        """128-bit loads from the O staging buffer, 128-bit stores to global memory (GmemTiledCopyO)."""
        return self.gmem_tiled_copy

    # -- everything, as C++ prints it ----------------------------------------------------------
    def printed(self):
        """``{name: cute::print string}`` in the order and under the names of print_kernel_layouts.cpp."""
        fields = {
            "kBlockM": self.block_m,
            "kBlockN": self.block_n,
            "kHeadDim": self.head_dim,
            "kNWarps": self.n_warps,
            "kNThreads": self.n_threads,
            "kKeySlices": self.key_slices,
            "TileShape_MNK": self.tile_shape_mnk,
            "kv_stages": self.kv_stages,
            "kSmemBytes": self.smem_bytes,
            "kSmemQElems": self.smem_q_elems,
            "kSmemKVElems": self.smem_kv_elems,
            "kBlockKSmem": self.block_k_smem,
            "kGmemElemsPerLoad": self.gmem_elems_per_load,
            "kGmemThreadsPerRow": self.gmem_threads_per_row,
            "SmemLayoutAtom": self.smem_layout_atom,
            "SmemLayoutQ": self.smem_layout_q,
            "SmemLayoutKV": self.smem_layout_kv,
            "SmemLayoutVt": self.smem_layout_vt,
            "SmemLayoutVtNoSwizzle": self.smem_layout_vt_noswizzle,
            "SmemLayoutO": self.smem_layout_o,
            "GmemLayoutAtom": self.gmem_layout_atom,
            **_mma_fields("TiledMma", self.tiled_mma),
        }
        for name, tiled_copy in self.tiled_copies().items():
            fields.update(_copy_fields(name, tiled_copy))
        return _printed(fields)

    def tiled_copies(self):
        """Every TiledCopy of the kernel, by the name print_kernel_layouts.cpp gives it."""
        return {
            "GmemTiledCopyQKV": self.gmem_tiled_copy_qkv,
            "SmemTiledCopyQ": self.smem_tiled_copy_q,
            "SmemTiledCopyK": self.smem_tiled_copy_k,
            "SmemTiledCopyV": self.smem_tiled_copy_v,
            "SmemTiledCopyO": self.smem_tiled_copy_o,
            "GmemTiledCopyO": self.gmem_tiled_copy_o,
        }

    @property
    def header(self):
        return (f"{self.arch} {self.dtype} hdim{self.head_dim}" + (" decode" if self.op == "decode" else "")
                + (" key-split" if self.key_slices > 1 else ""))


@dataclass(frozen=True)
class Sm80BwdConfig(_Sm80CopyTraits):
    """One instantiation of ``flashcute::sm80::BwdKernelTraits<Element, kHeadDim, kBlockM, kBlockN, kNWarps,
    kAtomLayoutMSdP, kAtomLayoutNdKV, kAtomLayoutMdQ>``: a CTA owns block_n key rows and walks Q/dO blocks of
    block_m rows; three gemm shapes, each with its own warp arrangement (atom_* warps along the first mode, the rest
    along the second, 16 columns per warp)."""

    dtype: str
    head_dim: int
    block_m: int
    block_n: int
    n_warps: int
    atom_sdp_m: int
    atom_dkv_n: int
    atom_dq_m: int

    stages = 2  # Q/dO stages

    # -- shared memory ---------------------------------------------------------------------
    @cached_property
    def smem_layout_qdo(self):
        return self._head_dim_rows(self.block_m)

    @property
    def block_k_smem_pds(self):
        return 64 if self.block_n % 64 == 0 else 32

    @cached_property
    def smem_layout_pds(self):
        """P and dS: (block_m, block_n), written from the S / dP accumulators and read as gemm operands."""
        k = Int(self.block_k_smem_pds)
        atom = composition(Swizzle(3 if self.block_k_smem_pds == 64 else 2, 3, 3), Layout((Int(8), k), (k, Int(1))))
        return tile_to_shape(atom, (Int(self.block_m), Int(self.block_n)))

    @staticmethod
    def _transposed(layout, rows, cols):
        """The same bytes seen along the other mode (read with transposing ldmatrix)."""
        return composition(layout, make_layout((Int(rows), Int(cols)), LayoutRight))

    @cached_property
    def smem_layout_qdot(self):
        return self._transposed(self.smem_layout_qdo, self.head_dim, self.block_m)

    @cached_property
    def smem_layout_kt(self):
        return self._transposed(self.smem_layout_kv, self.head_dim, self.block_n)

    @cached_property
    def smem_layout_pdst(self):
        return self._transposed(self.smem_layout_pds, self.block_n, self.block_m)

    @property
    def smem_bytes(self):
        """Q and dO (two stages each), K, V, P, dS."""
        elems = (2 * self.stages * int(cosize(self.smem_layout_qdo)) + 2 * int(cosize(self.smem_layout_kv))
                 + 2 * int(cosize(self.smem_layout_pds)))
        return elems * self.element_bytes

    # -- tensor cores ----------------------------------------------------------------------
    def _warp_tiled_mma(self, atom_layout):
        warps_n = self.n_warps // atom_layout
        return make_tiled_mma(mma_atom(self.mma_op), Layout((Int(atom_layout), Int(warps_n), Int(1))),
                              (Int(16 * atom_layout), Int(16 * warps_n), Int(16)))

    @cached_property
    def tiled_mma_sdp(self):
        """S = Q.K^T and dP = dO.V^T: (block_m, block_n)."""
        return self._warp_tiled_mma(self.atom_sdp_m)

    @cached_property
    def tiled_mma_dkv(self):
        """dV += P^T.dO and dK += dS^T.Q: (block_n, head_dim)."""
        return self._warp_tiled_mma(self.atom_dkv_n)

    @cached_property
    def tiled_mma_dq(self):
        """dQ = dS.K: (block_m, head_dim)."""
        return self._warp_tiled_mma(self.atom_dq_m)

    # -- shared memory <-> registers (sm80/bwd_mainloop.h, bwd_epilogue.h) --------------------------
    @cached_property
    def smem_tiled_copy_qdo(self):
        """Q and dO, the S and dP gemms' A operands (ldmatrix)."""
        return make_tiled_copy_A(self.smem_copy_atom(), self.tiled_mma_sdp)

    @cached_property
    def smem_tiled_copy_kv(self):
        """K and V, the S and dP gemms' B operands (ldmatrix)."""
        return make_tiled_copy_B(self.smem_copy_atom(), self.tiled_mma_sdp)

    @cached_property
    def smem_tiled_copy_pds(self):
        """P and dS from the S and dP accumulators into shared memory."""
        return make_tiled_copy_C(self.smem_copy_atom_store(), self.tiled_mma_sdp)

    @cached_property
    def smem_tiled_copy_pdst(self):
        """P^T and dS^T, the dV and dK gemms' A operands (ldmatrix.trans)."""
        return make_tiled_copy_A(self.smem_copy_atom_transposed(), self.tiled_mma_dkv)

    @cached_property
    def smem_tiled_copy_qdot(self):
        """dO^T and Q^T, the dV and dK gemms' B operands (ldmatrix.trans)."""
        return make_tiled_copy_B(self.smem_copy_atom_transposed(), self.tiled_mma_dkv)

    @cached_property
    def smem_tiled_copy_ds(self):
        """dS, the dQ gemm's A operand (ldmatrix)."""
        return make_tiled_copy_A(self.smem_copy_atom(), self.tiled_mma_dq)

    @cached_property
    def smem_tiled_copy_kt(self):
        """K^T, the dQ gemm's B operand (ldmatrix.trans)."""
        return make_tiled_copy_B(self.smem_copy_atom_transposed(), self.tiled_mma_dq)

    @cached_property
    def smem_tiled_copy_dkv(self):
        """The epilogue's dK and dV registers into K's and V's buffers."""
        return make_tiled_copy_C(self.smem_copy_atom_store(), self.tiled_mma_dkv)

    def tiled_copies(self):
        """Every TiledCopy the backward makes, by the name print_kernel_layouts.cpp gives it."""
        return {
            "GmemTiledCopyQKV": self.gmem_tiled_copy_qkv,
            "SmemTiledCopyQdO": self.smem_tiled_copy_qdo,
            "SmemTiledCopyKV": self.smem_tiled_copy_kv,
            "SmemTiledCopyPdS": self.smem_tiled_copy_pds,
            "SmemTiledCopyPdSt": self.smem_tiled_copy_pdst,
            "SmemTiledCopyQdOt": self.smem_tiled_copy_qdot,
            "SmemTiledCopydS": self.smem_tiled_copy_ds,
            "SmemTiledCopyKt": self.smem_tiled_copy_kt,
            "SmemTiledCopydKV": self.smem_tiled_copy_dkv,
            "GmemTiledCopy": self.gmem_tiled_copy,
        }

    def printed(self):
        """``{name: cute::print string}`` in the order and under the names of print_kernel_layouts.cpp."""
        fields = {
            "kBlockM": self.block_m,
            "kBlockN": self.block_n,
            "kHeadDim": self.head_dim,
            "kNWarps": self.n_warps,
            "kNThreads": self.n_threads,
            "kStages": self.stages,
            "TileShape_MNK": self.tile_shape_mnk,
            "kSmemBytes": self.smem_bytes,
            "kBlockKSmemPdS": self.block_k_smem_pds,
            "SmemLayoutAtom": self.smem_layout_atom,
            "SmemLayoutQdO": self.smem_layout_qdo,
            "SmemLayoutKV": self.smem_layout_kv,
            "SmemLayoutPdS": self.smem_layout_pds,
            "SmemLayoutQdOt": self.smem_layout_qdot,
            "SmemLayoutKt": self.smem_layout_kt,
            "SmemLayoutPdSt": self.smem_layout_pdst,
            "SmemLayoutQdOtNoSwizzle": get_nonswizzle_portion(self.smem_layout_qdot),
            "SmemLayoutKtNoSwizzle": get_nonswizzle_portion(self.smem_layout_kt),
            "SmemLayoutPdStNoSwizzle": get_nonswizzle_portion(self.smem_layout_pdst),
            "GmemLayoutAtom": self.gmem_layout_atom,
            **_mma_fields("TiledMmaSdP", self.tiled_mma_sdp, atom_shape=True),
            **_mma_fields("TiledMmadKV", self.tiled_mma_dkv, atom_shape=True),
            **_mma_fields("TiledMmadQ", self.tiled_mma_dq, atom_shape=True),
        }
        for name, tiled_copy in self.tiled_copies().items():
            fields.update(_copy_fields(name, tiled_copy))
        return _printed(fields)

    @property
    def header(self):
        return f"{self.arch} {self.dtype} hdim{self.head_dim} backward"


LONG_SEQLEN_K_MIN = kernel_table.LONG_SEQLEN_K_MIN
# flashcute builds with CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED (flashcute._build.NVCC_FLAGS), so
# GMMA::{ss,rs}_op_selector choose the atom whose N is the whole tile N: every multiple of 8 up to 256.
GMMA_MAX_N = 256
MBARRIER_BYTES = 8       # cutlass::arch::ClusterBarrier / ClusterTransactionBarrier: one 64-bit mbarrier
SMEM_ALIGN = 1024        # cute::array_aligned<..., 1024>: what the 128-byte swizzle atoms need
DQ_ACCUM_VEC = 4         # BwdKernelTraits::kdQAccumVec: a thread's dQ elements in runs of 4 floats
SMEM_MAX_BYTES = 227 * 1024  # what an SM90 CTA may use
REGS_PER_SM = 65536        # 32-bit registers per SM (sm_80 and sm_90)


def gmma_op(dtype, n, source):
    """The GMMA atom GMMA::{ss,rs}_op_selector picks for a (64, n) tile with float accumulators."""
    atom_n = next((g for g in range(GMMA_MAX_N, 0, -8) if n % g == 0), None)
    if atom_n is None:
        raise ValueError(f"no GMMA atom divides a tile N of {n}")
    t = MMA_TYPE[dtype]
    return f"SM90_64x{atom_n}x16_F32{t}{t}_{source}"


def gmma_tiled_mma(dtype, n, source, warpgroups_m, warpgroups_n=1):
    """``make_tiled_mma(GMMA::{ss,rs}_op_selector<..., Shape<_64, n, K>>(), Layout<Shape<m, n, _1>>{})``: one
    64-row GMMA atom per warpgroup, warpgroups_m of them along M and warpgroups_n along N."""
    return make_tiled_mma(mma_atom(gmma_op(dtype, n, source)),
                          Layout((Int(warpgroups_m), Int(warpgroups_n), Int(1))))


def _round_up(x, m):
    return -(-x // m) * m


def launch_regs(n_threads):
    """kLaunchRegs: __launch_bounds__(kNumThreads, 1) lets each thread have 65536 / kNumThreads registers, in steps
    of 8; ptxas reports this count, and setmaxnreg can only redistribute it."""
    return REGS_PER_SM // n_threads // 8 * 8


def k_major_atom_cols(width):
    """Contiguous 16-bit elements of the atom ``k_major_smem_atom`` picks for ``width``: 64, 32 or 16."""
    return 64 if width % 64 == 0 else 32 if width % 32 == 0 else 16


def k_major_smem_atom(width, bits):
    """C++ ``k_major_smem_atom<Element, width>`` (sm90/kernel_traits.h): the widest GMMA K-major swizzle atom
    (128, 64 or 32 bytes) whose contiguous extent tiles ``width`` elements."""
    kind = {64: "SW128", 32: "SW64", 16: "SW32"}[k_major_atom_cols(width)]
    return gmma_smem_atom("K", kind, bits)


def _storage_bytes(members, struct_align=SMEM_ALIGN):
    """sizeof of a struct of (bytes, alignment) members, each padded to its alignment, laid out in order."""
    offset = 0
    for size, align in members:
        offset = _round_up(offset, align) + _round_up(size, align)
    return _round_up(offset, struct_align)


@dataclass(frozen=True)
class Sm90Config(_ElementConfig):
    """One instantiation of ``flashcute::sm90::KernelTraits<Element, kHeadDim, kCausal, kLongSeqlenK>``: one
    producer warpgroup (TMA) and kBlockM / 64 consumer warpgroups (wgmma)."""

    dtype: str
    head_dim: int
    causal: bool
    block_m: int
    block_n: int
    stages: int
    long_seqlen_k: bool = False

    arch = "sm90"

    @property
    def n_mma_warpgroups(self):
        return self.block_m // 64

    @property
    def n_mma_threads(self):
        return self.n_mma_warpgroups * 128

    @property
    def n_threads(self):
        return self.n_mma_threads + 128

    @property
    def producer_regs(self):
        """setmaxnreg: the producer warpgroup gives registers to the consumers."""
        return 24 if self.n_mma_warpgroups == 2 else 32

    @property
    def consumer_regs(self):
        return 240 if self.n_mma_warpgroups == 2 else 160

    @property
    def launch_regs(self):
        return launch_regs(self.n_threads)

    @property
    def tile_shape_mnk(self):
        return (Int(self.block_m), Int(self.block_n), Int(self.head_dim))

    # -- shared memory ---------------------------------------------------------------------
    @cached_property
    def smem_layout_atom(self):
        """The widest GMMA K-major swizzle atom (128, 64 or 32 bytes of head dim) that tiles the head dim."""
        return k_major_smem_atom(self.head_dim, self.element_bits)

    @property
    def tma_box_cols(self):
        """kTmaBoxCols: head-dim columns of each TMA box of Q, K, V and O (the atom's row)."""
        return k_major_atom_cols(self.head_dim)

    @cached_property
    def smem_layout_q(self):
        return tile_to_shape(self.smem_layout_atom, (Int(self.block_m), Int(self.head_dim)))

    @cached_property
    def smem_layout_k(self):
        return tile_to_shape(self.smem_layout_atom, (Int(self.block_n), Int(self.head_dim), Int(self.stages)))

    @property
    def smem_layout_v(self):
        """Written by TMA exactly like K."""
        return self.smem_layout_k

    @cached_property
    def smem_layout_vt(self):
        """The V stages read as V^T (head_dim, kBlockN, stages), head dim contiguous: an MN-major B operand."""
        shape = (Int(self.head_dim), Int(self.block_n), Int(self.stages))
        return composition(self.smem_layout_v, make_ordered_layout(shape, (Int(2), Int(1), Int(3))))

    @cached_property
    def smem_layout_o_slab(self):
        """One consumer warpgroup's 64 rows of O, laid out like the box of its TMA store."""
        return tile_to_shape(self.smem_layout_atom, (Int(64), Int(self.head_dim)))

    @cached_property
    def smem_layout_o(self):
        """O is staged for the TMA stores: the warpgroups' slabs one after another, viewed as one
        (kBlockM, head_dim) tile; its own buffer, or over the V stages (kOAliasesV)."""
        slabs = tile_to_shape(self.smem_layout_atom, (Int(64), Int(self.head_dim), Int(self.n_mma_warpgroups)))
        rows = Layout((Int(64), Int(self.n_mma_warpgroups)), (Int(1), Int(64 * self.head_dim)))
        return composition(slabs, Layout((rows.shape, Int(self.head_dim)), (rows.stride, Int(64))))

    def _smem_array_bytes(self, layout):
        return _round_up(int(cosize(layout)) * self.element_bytes, SMEM_ALIGN)

    def _shared_storage_bytes(self, o_aliases_v):
        v, o = self._smem_array_bytes(self.smem_layout_v), self._smem_array_bytes(self.smem_layout_o)
        arrays = ((max(v, o) if o_aliases_v else v + o)
                  + self._smem_array_bytes(self.smem_layout_q) + self._smem_array_bytes(self.smem_layout_k))
        barriers = MBARRIER_BYTES * (2 * 1 + 2 * self.stages * 2 + 1)
        return _round_up(arrays + barriers, SMEM_ALIGN)

    @property
    def o_aliases_v(self):
        """kOAliasesV: O overlays the V stages only where its own buffer would not fit in 227 KiB."""
        return self._shared_storage_bytes(o_aliases_v=False) > SMEM_MAX_BYTES

    @property
    def smem_bytes(self):
        """sizeof(SharedStorage): {V stages, O} (or their union), Q, K (1024-aligned), then the Q, K, V
        pipelines' full and empty barriers and the O barrier; the struct is 1024-aligned."""
        return self._shared_storage_bytes(self.o_aliases_v)

    @property
    def tma_bytes_q(self):
        return self.block_m * self.head_dim * self.element_bytes

    @property
    def tma_bytes_kv(self):
        return self.block_n * self.head_dim * self.element_bytes

    # -- tensor cores ----------------------------------------------------------------------
    @cached_property
    def tiled_mma_s(self):
        """S = Q.K^T, both operands K-major in shared memory (SS); the warpgroups along M."""
        return gmma_tiled_mma(self.dtype, self.block_n, "SS", self.n_mma_warpgroups)

    @cached_property
    def tiled_mma_o(self):
        """O += P.V: P from registers, V^T MN-major in shared memory (RS)."""
        return gmma_tiled_mma(self.dtype, self.head_dim, "RS", self.n_mma_warpgroups)

    @cached_property
    def smem_tiled_copy_o(self):
        """O registers -> shared memory with stmatrix (csrc/sm90/epilogue.h)."""
        return make_tiled_copy_C(copy_atom("SM90_U32x4_STSM_N", self.element_type), self.tiled_mma_o)

    def tiled_copies(self):
        return {"SmemTiledCopyO": self.smem_tiled_copy_o}

    def printed(self):
        """``{name: cute::print string}`` in the order and under the names of print_kernel_layouts.cpp."""
        fields = {
            "kBlockM": self.block_m,
            "kBlockN": self.block_n,
            "kHeadDim": self.head_dim,
            "kStages": self.stages,
            "kLongSeqlenK": int(self.long_seqlen_k),
            "kLongSeqlenKMin": LONG_SEQLEN_K_MIN,
            "kNumMmaWarpGroups": self.n_mma_warpgroups,
            "kNumMmaThreads": self.n_mma_threads,
            "kNumThreads": self.n_threads,
            "kProducerRegs": self.producer_regs,
            "kConsumerRegs": self.consumer_regs,
            "TileShape_MNK": self.tile_shape_mnk,
            "kSmemBytes": self.smem_bytes,
            "kOAliasesV": int(self.o_aliases_v),
            "kTmaBytesQ": self.tma_bytes_q,
            "kTmaBytesKV": self.tma_bytes_kv,
            "kTmaBoxCols": self.tma_box_cols,
            "SmemLayoutAtom": self.smem_layout_atom,
            "SmemLayoutQ": self.smem_layout_q,
            "SmemLayoutK": self.smem_layout_k,
            "SmemLayoutV": self.smem_layout_v,
            "SmemLayoutVt": self.smem_layout_vt,
            "SmemLayoutO": self.smem_layout_o,
            "SmemLayoutOSlab": self.smem_layout_o_slab,
            **_mma_fields("TiledMmaS", self.tiled_mma_s, atom_shape=True),
            **_mma_fields("TiledMmaO", self.tiled_mma_o, atom_shape=True),
            **_copy_fields("SmemTiledCopyO", self.smem_tiled_copy_o),
        }
        return _printed(fields)

    @property
    def header(self):
        return f"{self.arch} {self.dtype} hdim{self.head_dim} {self.variant}"

    @property
    def variant(self):
        """Which of a head dim's kernels: noncausal, causal or noncausal-longk (seqlen_k >= LONG_SEQLEN_K_MIN)."""
        return ("causal" if self.causal else "noncausal") + ("-longk" if self.long_seqlen_k else "")


@dataclass(frozen=True)
class Sm90BwdConfig(_ElementConfig):
    """One instantiation of ``flashcute::sm90::BwdKernelTraitsFor<Element, kHeadDim>`` (csrc/sm90/bwd_kernel_traits.h):
    two consumer warpgroups; a CTA owns block_n keys and walks Q/dO blocks of block_m rows. One of two plans, as
    kernel_table's Sm90BwdTile says:

    - keys_along_m (``BwdKernelTraits``): S^T = K.Q^T and dP^T = V.dO^T with 64 keys per warpgroup along wgmma's M;
      P^T and dS^T stay in registers as the A operands of dV += P^T.dO and dK += dS^T.Q, dS goes through shared
      memory for dQ = dS.K, and dQ through shared memory to bulk reductions.
    - otherwise (``BwdKernelTraitsQueriesAlongM``, where 128 keys' dK and dV would not fit in registers): S = Q.K^T
      and dP = dO.V^T with the keys split over the warpgroups; P and dS go through shared memory as the B operands
      of dV^T += dO^T.P and dK^T += Q^T.dS (head dim along M, atom_dkv_m warpgroups along it), and dQ is added from
      registers (deterministic: each warpgroup's float32 half is parked over the block's spent Q or dO stage for the
      dQ warp's bulk reductions)."""

    dtype: str
    head_dim: int
    block_m: int
    block_n: int
    stages: int
    atom_dq_m: int
    keys_along_m: bool
    atom_dkv_m: int

    arch = "sm90"
    n_mma_warpgroups = 2
    dq_stages = 2
    producer_regs = 24
    consumer_regs = 240

    @property
    def n_threads(self):
        return 128 * (1 + self.n_mma_warpgroups)

    @property
    def launch_regs(self):
        return launch_regs(self.n_threads)

    @property
    def dq_through_smem(self):
        """kdQThroughSmem: dQ has float32 staging buffers of its own for the producer's bulk reductions, or (queries
        along M, where 64 KB at head dim 256 would not fit beside the Q/dO stages) is added from the accumulators, or
        in deterministic mode parked over the block's spent Q and dO stages."""
        return self.keys_along_m

    @property
    def ds_name(self):
        """The traits' name of the dS stages and of the copy into them: PdS where P's stages share the layout."""
        return "dS" if self.keys_along_m else "PdS"

    @property
    def dq_head_dim_per_warpgroup(self):
        return self.head_dim * self.atom_dq_m // self.n_mma_warpgroups

    @property
    def dkv_keys_per_warpgroup(self):
        """Queries along M: the keys of one warpgroup's dK^T / dV^T columns (atom_dkv_m warpgroups share them)."""
        return self.block_n * self.atom_dkv_m // self.n_mma_warpgroups

    @property
    def tma_box_cols(self):
        """kTmaBoxCols: head-dim columns of the narrowest TMA box (K's atom tiles one warpgroup's dQ slice)."""
        return min(k_major_atom_cols(self.head_dim), k_major_atom_cols(self.dq_head_dim_per_warpgroup))

    @property
    def tile_shape_mnk(self):
        return (Int(self.block_m), Int(self.block_n), Int(self.head_dim))

    # -- shared memory ---------------------------------------------------------------------
    @cached_property
    def smem_layout_q(self):
        """Q (and dO) stages: (block_m, head_dim, stages), head dim contiguous."""
        atom = k_major_smem_atom(self.head_dim, self.element_bits)
        return tile_to_shape(atom, (Int(self.block_m), Int(self.head_dim), Int(self.stages)))

    @cached_property
    def smem_layout_k(self):
        """K: its atom no wider than one warpgroup's head-dim slice of the dQ gemm, whose B operand K^T is."""
        atom = k_major_smem_atom(self.dq_head_dim_per_warpgroup, self.element_bits)
        return tile_to_shape(atom, (Int(self.block_n), Int(self.head_dim)))

    @cached_property
    def smem_layout_v(self):
        return tile_to_shape(k_major_smem_atom(self.head_dim, self.element_bits), (Int(self.block_n), Int(self.head_dim)))

    @property
    def ds_stages(self):
        """dS's stages: the Q/dO stages with keys along M; queries along M, P's and dS's own two (kPdSStages)."""
        return self.stages if self.keys_along_m else 2

    @cached_property
    def smem_layout_ds(self):
        """dS stages (queries along M: P's too): (block_m, block_n, ds_stages), keys contiguous. A GMMA descriptor
        cannot start inside a swizzle atom: with keys along M the atom spans all the keys (the dQ gemm's K-major A),
        otherwise one warpgroup's keys of dV^T / dK^T, whose B operands P^T and dS^T are."""
        keys = self.block_n if self.keys_along_m else self.dkv_keys_per_warpgroup
        atom = k_major_smem_atom(keys, self.element_bits)
        return tile_to_shape(atom, (Int(self.block_m), Int(self.block_n), Int(self.ds_stages)))

    def _transposed(self, layout, shape):
        return composition(layout, make_ordered_layout(shape, (Int(2), Int(1), Int(3))[:len(shape)]))

    @cached_property
    def smem_layout_qt(self):
        return self._transposed(self.smem_layout_q, (Int(self.head_dim), Int(self.block_m), Int(self.stages)))

    @cached_property
    def smem_layout_kt(self):
        return self._transposed(self.smem_layout_k, (Int(self.head_dim), Int(self.block_n)))

    @cached_property
    def smem_layout_vt(self):
        """V read as V^T (head_dim, block_n): queries along M, where the epilogue stages dV^T in V's buffer."""
        return self._transposed(self.smem_layout_v, (Int(self.head_dim), Int(self.block_n)))

    @cached_property
    def smem_layout_dst(self):
        return self._transposed(self.smem_layout_ds, (Int(self.block_n), Int(self.block_m), Int(self.ds_stages)))

    @property
    def smem_layout_row_stats_mma(self):
        """LSE * log2(e) and D per stage, broadcast over the keys in the shape of the S^T accumulator
        (block_n, block_m, stages), or of S (block_m, block_n, stages) with queries along M."""
        if self.keys_along_m:
            return Layout((Int(self.block_n), Int(self.block_m), Int(self.stages)), (Int(0), Int(1), Int(self.block_m)))
        return Layout((Int(self.block_m), Int(self.block_n), Int(self.stages)), (Int(1), Int(0), Int(self.block_m)))

    @property
    def smem_layout_dq(self):
        """(thread, element, buffer) of the dQ staging buffers (dq_through_smem): sm80/gmem.h accum_block's order
        with one chunk per consumer warpgroup and runs of DQ_ACCUM_VEC elements (16-byte stores)."""
        chunk = self.block_m * self.head_dim // self.n_mma_warpgroups
        vec = DQ_ACCUM_VEC
        return Layout(((Int(128), Int(self.n_mma_warpgroups)), (Int(vec), Int(chunk // 128 // vec)),
                       Int(self.dq_stages)),
                      ((Int(vec), Int(chunk)), (Int(1), Int(128 * vec)), Int(self.block_m * self.head_dim)))

    @property
    def smem_bytes(self):
        """sizeof(SharedStorage): Q, dO, K, V and dS (queries along M: P and dS), 1024-aligned, the float32 dQ
        buffers (dq_through_smem), LSE and D rows (128), the Q and dO pipelines' full and empty barriers; the
        struct is 1024-aligned."""
        def array(layout, element_bytes, align):
            return int(cosize(layout)) * element_bytes, align
        rows = self.block_m * self.stages * 4
        e = self.element_bytes
        operands = [self.smem_layout_q, self.smem_layout_q, self.smem_layout_k, self.smem_layout_v,
                    *[self.smem_layout_ds] * (1 if self.keys_along_m else 2)]
        return _storage_bytes([
            *(array(layout, e, SMEM_ALIGN) for layout in operands),
            *([array(self.smem_layout_dq, 4, 128)] if self.dq_through_smem else []),
            (rows, 128), (rows, 128),
            (2 * self.stages * MBARRIER_BYTES, MBARRIER_BYTES), (2 * self.stages * MBARRIER_BYTES, MBARRIER_BYTES),
        ])

    @property
    def tma_bytes_qdo(self):
        return self.block_m * self.head_dim * self.element_bytes + self.block_m * 4

    @property
    def tma_bytes_kv(self):
        """K's (or V's) bytes, expected on the first Q (dO) stage's barrier."""
        return self.block_n * self.head_dim * self.element_bytes

    # -- tensor cores ----------------------------------------------------------------------
    @cached_property
    def tiled_mma_sdp(self):
        """S^T = K.Q^T and dP^T = V.dO^T: (block_n, block_m), the warpgroups along the keys (M); queries along M,
        S = Q.K^T and dP = dO.V^T: (block_m, block_n), the warpgroups along the keys (N). Both SS."""
        if self.keys_along_m:
            return gmma_tiled_mma(self.dtype, self.block_m, "SS", self.n_mma_warpgroups)
        return gmma_tiled_mma(self.dtype, self.block_n // self.n_mma_warpgroups, "SS", 1, self.n_mma_warpgroups)

    @cached_property
    def tiled_mma_dkv(self):
        """dV += P^T.dO and dK += dS^T.Q: (block_n, head_dim), P^T and dS^T from registers (RS); queries along M,
        dV^T += dO^T.P and dK^T += Q^T.dS: (head_dim, block_n) from shared memory (SS), atom_dkv_m warpgroups along
        the head dim and the rest along the keys."""
        if self.keys_along_m:
            return gmma_tiled_mma(self.dtype, self.head_dim, "RS", self.n_mma_warpgroups)
        return gmma_tiled_mma(self.dtype, self.dkv_keys_per_warpgroup, "SS", self.atom_dkv_m,
                              self.n_mma_warpgroups // self.atom_dkv_m)

    @cached_property
    def tiled_mma_dq(self):
        """dQ = dS.K: (block_m, head_dim), block_m over atom_dq_m warpgroups and the head dim over the rest."""
        return gmma_tiled_mma(self.dtype, self.dq_head_dim_per_warpgroup, "SS", self.atom_dq_m,
                              self.n_mma_warpgroups // self.atom_dq_m)

    @cached_property
    def smem_tiled_copy_ds(self):
        """Registers -> the dS stages: dS^T transposed by stmatrix .trans; queries along M, P and dS as they are."""
        op = "SM90_U16x8_STSM_T" if self.keys_along_m else "SM90_U32x4_STSM_N"
        return make_tiled_copy_C(copy_atom(op, self.element_type), self.tiled_mma_sdp)

    @cached_property
    def smem_tiled_copy_dkv(self):
        """The epilogue's dK and dV registers -> the K and V buffers (stmatrix); queries along M, dK^T and dV^T
        transposed by stmatrix .trans."""
        op = "SM90_U32x4_STSM_N" if self.keys_along_m else "SM90_U16x8_STSM_T"
        return make_tiled_copy_C(copy_atom(op, self.element_type), self.tiled_mma_dkv)

    def printed(self):
        """``{name: cute::print string}`` in the order and under the names of print_kernel_layouts.cpp."""
        queries_along_m = not self.keys_along_m
        ds = self.ds_name
        fields = {
            "kBlockM": self.block_m,
            "kBlockN": self.block_n,
            "kHeadDim": self.head_dim,
            "kStages": self.stages,
            "kKeysAlongM": int(self.keys_along_m),
            "kAtomLayoutMdQ": self.atom_dq_m,
            **({"kAtomLayoutMdKV": self.atom_dkv_m} if queries_along_m else {}),
            "kNumMmaWarpGroups": self.n_mma_warpgroups,
            "kNumThreads": self.n_threads,
            "kProducerRegs": self.producer_regs,
            "kConsumerRegs": self.consumer_regs,
            "kLaunchRegs": self.launch_regs,
            "TileShape_MNK": self.tile_shape_mnk,
            "kSmemBytes": self.smem_bytes,
            "kTmaBytesQdO": self.tma_bytes_qdo,
            "kTmaBytesKV": self.tma_bytes_kv,
            "kTmaBoxCols": self.tma_box_cols,
            "SmemLayoutQ": self.smem_layout_q,
            "SmemLayoutK": self.smem_layout_k,
            "SmemLayoutV": self.smem_layout_v,
            f"SmemLayout{ds}": self.smem_layout_ds,
            "SmemLayoutQt": self.smem_layout_qt,
            "SmemLayoutKt": self.smem_layout_kt,
            **({"SmemLayoutVt": self.smem_layout_vt} if queries_along_m else {}),
            f"SmemLayout{ds}t": self.smem_layout_dst,
            "SmemLayoutRowStatsMma": self.smem_layout_row_stats_mma,
            **({"SmemLayoutdQ": self.smem_layout_dq} if self.dq_through_smem else {}),
            **_mma_fields("TiledMmaSdP", self.tiled_mma_sdp, atom_shape=True),
            **_mma_fields("TiledMmadKV", self.tiled_mma_dkv, atom_shape=True),
            **_mma_fields("TiledMmadQ", self.tiled_mma_dq, atom_shape=True),
            **_copy_fields(f"SmemTiledCopy{ds}", self.smem_tiled_copy_ds),
            **_copy_fields("SmemTiledCopydKV", self.smem_tiled_copy_dkv),
        }
        return _printed(fields)

    @property
    def header(self):
        return f"{self.arch} {self.dtype} hdim{self.head_dim} backward"


ARCHS = kernel_table.ARCHS


def config_for(kernel, dtype, key_split=False):
    """The configuration of one kernel_table row (forward, decode or backward) in one dtype; key_split: a decode
    row's key-split tile (kernel_table.Sm80DecodeTile) rather than its 64-row one."""
    tile = kernel.tile
    if isinstance(tile, kernel_table.Sm80BwdTile):
        return Sm80BwdConfig(dtype, kernel.head_dim, tile.block_m, tile.block_n, tile.warps, tile.atom_sdp_m,
                             tile.atom_dkv_n, tile.atom_dq_m)
    if isinstance(tile, kernel_table.Sm90BwdTile):
        return Sm90BwdConfig(dtype, kernel.head_dim, tile.block_m, tile.block_n, tile.stages, tile.atom_dq_m,
                             tile.keys_along_m, tile.atom_dkv_m)
    if key_split:
        return Sm80Config(dtype, kernel.head_dim, tile.key_split_block_m, tile.key_split_keys, tile.warps, kernel.op,
                          tile.key_split_slices)
    if kernel.arch == "sm80":
        return Sm80Config(dtype, kernel.head_dim, tile.block_m, tile.block_n, tile.warps, kernel.op)
    return Sm90Config(dtype, kernel.head_dim, kernel.variant == "causal", tile.block_m, tile.block_n, tile.stages,
                      kernel.variant == "noncausal-longk")


def shipped_kernel(op, arch, dtype, head_dim, what):
    """kernel_table's single-variant row for (op, arch, head_dim) after checking dtype and head_dim; ValueError
    naming the choices otherwise (``what``: the kernel as the message names it)."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    shipped = kernel_table.head_dims(op, arch)
    if head_dim not in shipped:
        raise ValueError(f"head_dim must be one of {shipped} for {what}, got {head_dim!r}")
    return kernel_table.find(op, arch, head_dim, "all")


def shipped_configs(arch=None):
    """Every shipped forward configuration (of one arch, or all): kernel_table's rows, dtype by dtype."""
    if arch not in (None, *ARCHS):
        raise ValueError(f"arch must be one of {ARCHS} (or None for all), got {arch!r}")
    archs = ARCHS if arch is None else (arch,)
    return [config_for(k, dtype) for a in archs for dtype in DTYPES for k in kernel_table.kernels("fwd", a)]


def decode_configs():
    """Every shipped decode configuration (SM80 traits of the split-KV kernel: each row's 64-row and key-split
    tiles), dtype by dtype."""
    return [config_for(k, dtype, key_split) for dtype in DTYPES for k in kernel_table.kernels("decode", "sm80")
            for key_split in (False, True)]


def sm80_bwd_configs():
    """Every shipped SM80 backward configuration, dtype by dtype."""
    return [config_for(k, dtype) for dtype in DTYPES for k in kernel_table.kernels("bwd", "sm80")]


def sm90_bwd_configs():
    """Every shipped SM90 backward configuration, dtype by dtype."""
    return [config_for(k, dtype) for dtype in DTYPES for k in kernel_table.kernels("bwd", "sm90")]


def get_config(arch, dtype, head_dim, causal=False, seqlen_k=None):
    """The shipped configuration for (arch, dtype, head_dim[, causal, seqlen_k: SM90 tiles depend on them])
    that the kernel would launch; ValueError naming the choices otherwise."""
    if arch not in ARCHS:
        raise ValueError(f"arch must be one of {ARCHS}, got {arch!r}")
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    if head_dim not in kernel_table.head_dims("fwd", arch):
        raise ValueError(f"head_dim must be one of {kernel_table.head_dims('fwd', arch)} for {arch}, got {head_dim!r}")
    if arch == "sm80":
        return config_for(kernel_table.find("fwd", "sm80", head_dim, "all"), dtype)
    variant = "causal" if causal else "noncausal"
    if not causal and seqlen_k is not None and seqlen_k >= LONG_SEQLEN_K_MIN:
        longk = [k for k in kernel_table.kernels("fwd", "sm90") if (k.head_dim, k.variant) == (head_dim, "noncausal-longk")]
        variant = "noncausal-longk" if longk else variant
    return config_for(kernel_table.find("fwd", "sm90", head_dim, variant), dtype)
