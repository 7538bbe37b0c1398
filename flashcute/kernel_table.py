"""The shipped kernels: one row per (op, arch, head dim, variant) with its tile configuration.

This table is the one source of truth for which kernels exist. Its readers:

- ``csrc/generate_instantiations.py`` writes one ``.cu`` per (op, arch, dtype, head dim) and
  ``csrc/instantiations/kernel_table.h`` (the C++ tile configurations the traits read);
- ``flashcute._build`` (JIT) and ``setup.py`` (AOT) compile those files, restricted by FLASHCUTE_DTYPES /
  FLASHCUTE_HDIMS / FLASHCUTE_KERNELS;
- ``flashcute.kernel_configs`` and ``flashcute.explain`` rebuild each kernel's layouts from it;
- the tests (``tests/test_kernel_table.py`` checks the generated C++ is current; ``tests/test_kernel_layouts.py``
  compares the layouts with the C++ traits).

Adding a kernel means adding a row here and running ``python csrc/generate_instantiations.py``. Each row's
``why`` is one line; the measurements behind it are in benchmarks/notes.md under its ``decision`` anchor.

Pure Python (no torch, no numpy), so the build and the layout tools can import it anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

DTYPES = ("fp16", "bf16")
OPS = ("fwd", "bwd", "decode")
ARCHS = ("sm80", "sm90")


@dataclass(frozen=True)
class Sm80Tile:
    """``flashcute::sm80::KernelTraits``: kBlockM x kBlockN tiles on kNWarps warps stacked along M, one K and one
    V buffer. softmax_parts: partial results per row in the softmax reductions (common/utils.h row_reduce), for
    the non-causal and the causal kernel."""

    block_m: int
    block_n: int
    warps: int
    softmax_parts_noncausal: int = 4
    softmax_parts_causal: int = 4


@dataclass(frozen=True)
class Sm80DecodeTile(Sm80Tile):
    """``flashcute::sm80::DecodeTraits``: the Sm80Tile (``type``) for a (batch, K/V head) with more than
    key_split_block_m query rows, and ``KeySplit`` for up to that many (a decoding step's few queries times the GQA
    group): key_split_block_m rows on 16-row slabs of warps, the warps' slabs splitting each K/V block (of
    key_split_block_n keys, else block_n) into warps x 16 / key_split_block_m key slices, each with its own softmax
    state, merged at the end. With 64 rows, a step with 1-4 rows would spend 16-64x the tensor-core and exponential
    work its K/V bytes need."""

    key_split_block_m: int = 16
    key_split_block_n: int | None = None  # the key-split tile's K/V blocks; None: block_n

    @property
    def key_split_keys(self) -> int:
        return self.key_split_block_n or self.block_n

    @property
    def key_split_slices(self) -> int:
        """The key slices of the key-split tile: one per 16-row slab of warps."""
        return self.warps * 16 // self.key_split_block_m


@dataclass(frozen=True)
class Sm80BwdTile:
    """``flashcute::sm80::BwdKernelTraits``: a CTA owns block_n key rows and walks Q blocks of block_m rows, on
    ``warps`` warps arranged per gemm: atom_sdp_m of them along M for S = Q.K^T and dP = dO.V^T, atom_dkv_n along
    N for dK/dV, atom_dq_m along M for dQ (the rest along the other mode)."""

    block_m: int
    block_n: int
    warps: int
    atom_sdp_m: int
    atom_dkv_n: int
    atom_dq_m: int


@dataclass(frozen=True)
class Sm90Tile:
    """``flashcute::sm90::KernelTraits``: kBlockM / 64 consumer warpgroups and one producer warpgroup, kStages
    K/V stages. skip_unchanged_rescale / rescale_outside_turn: mainloop options (csrc/sm90/mainloop.h)."""

    block_m: int
    block_n: int
    stages: int = 2
    softmax_parts: int = 4
    skip_unchanged_rescale: bool = False
    rescale_outside_turn: bool = True


@dataclass(frozen=True)
class Sm90BwdTile:
    """``flashcute::sm90::BwdKernelTraits``: two consumer warpgroups; a CTA owns block_n key rows and walks Q/dO
    blocks of block_m rows through ``stages``-deep TMA pipelines.

    keys_along_m (head dims <= 128): S^T = K.Q^T with one 64-key slab per warpgroup (block_n = 128), P^T and dS^T
    the register A operands of dV and dK; the dQ gemm's warpgroups split block_m over atom_dq_m of them and the
    head dim over the rest, and dQ goes through shared memory to bulk reductions. Otherwise
    (``BwdKernelTraitsQueriesAlongM``, head dims 192 and 256, whose dK and dV for 128 keys would not fit in
    registers): S = Q.K^T with the keys split over the warpgroups, P and dS through shared memory, dV^T and dK^T
    with the head dim along M (atom_dkv_m warpgroups along it, the rest along the keys), and dQ added from
    registers."""

    block_m: int
    block_n: int = 128
    stages: int = 2
    atom_dq_m: int = 1
    keys_along_m: bool = True
    atom_dkv_m: int = 1


@dataclass(frozen=True)
class Kernel:
    op: str
    arch: str
    head_dim: int
    # sm80 (and every backward and decode kernel): "all" (one tile; causal is a template flag inside). sm90 forward:
    # "noncausal", "causal", or "noncausal-longk" (taken when seqlen_k >= LONG_SEQLEN_K_MIN).
    variant: str
    tile: Sm80Tile | Sm80DecodeTile | Sm80BwdTile | Sm90Tile | Sm90BwdTile
    why: str  # one line
    decision: str  # its anchor in benchmarks/notes.md, where the measurements are

    @property
    def name(self) -> str:
        return f"{self.op}_{self.arch}_hdim{self.head_dim}_{self.variant}"

    @property
    def notes_link(self) -> str:
        return f"benchmarks/notes.md#{self.decision}"


SM90_VARIANTS = ("noncausal", "causal", "noncausal-longk")
LONG_SEQLEN_K_MIN = 4096  # seqlen_k from which a head dim's "noncausal-longk" tile (where it has one) runs
# Up to this many query rows the fixed-length forward (auto or sm80) runs on the decode kernel, whose 16- and 64-row
# tiles and split keys fill the GPU where the forward's one CTA per 128 query rows would not.
DECODE_MAX_SEQLEN_Q = 16

KERNELS: tuple[Kernel, ...] = (
    # ---- SM80 forward: FlashAttention-2's Ampere tiles except where the tile sweep measured better.
    Kernel("fwd", "sm80", 64, "all", Sm80Tile(128, 64, 4, softmax_parts_noncausal=1),
           "128x128 spills 352-464 B/thread; one reduction chain is faster non-causal", "d-sm80-hdim64-tile"),
    Kernel("fwd", "sm80", 96, "all", Sm80Tile(128, 64, 4), "FlashAttention-2's tile", "d-sm80-fa2-tiles"),
    Kernel("fwd", "sm80", 128, "all", Sm80Tile(128, 64, 4), "FlashAttention-2's tile", "d-sm80-fa2-tiles"),
    Kernel("fwd", "sm80", 192, "all", Sm80Tile(128, 64, 8), "FlashAttention-2's tile", "d-sm80-fa2-tiles"),
    Kernel("fwd", "sm80", 256, "all", Sm80Tile(64, 64, 4), "more CTAs where the grid is short: +10% at 1k",
           "d-sm80-hdim256-tile"),
    # ---- SM90 forward: FlashAttention-3's tiles as the start, then measured per (head dim, variant).
    Kernel("fwd", "sm90", 64, "noncausal", Sm90Tile(192, 128, skip_unchanged_rescale=True),
           "three consumer warpgroups: 128x128 lost 2-7% from 4k", "d-sm90-hdim64-noncausal-192-rows"),
    Kernel("fwd", "sm90", 64, "causal",
           Sm90Tile(128, 128, softmax_parts=1, skip_unchanged_rescale=True, rescale_outside_turn=False),
           "128-row Q blocks pair evenly in the causal scheduler (196 vs 141 TFLOP/s at 512)",
           "d-sm90-hdim64-causal-128-rows"),
    Kernel("fwd", "sm90", 96, "noncausal", Sm90Tile(128, 128), "O rescale outside the ping-pong turn +2%",
           "d-sm90-rescale-outside-turn"),
    Kernel("fwd", "sm90", 96, "causal", Sm90Tile(128, 128), "O rescale outside the ping-pong turn +2%",
           "d-sm90-rescale-outside-turn"),
    Kernel("fwd", "sm90", 128, "noncausal", Sm90Tile(128, 128),
           "O keeps its own buffer: 128x176 (O over V) was 5-9% slower at 512-1k", "d-sm90-hdim128-tile"),
    Kernel("fwd", "sm90", 128, "causal", Sm90Tile(128, 128), "O rescale outside the ping-pong turn +1%",
           "d-sm90-rescale-outside-turn"),
    Kernel("fwd", "sm90", 128, "noncausal-longk", Sm90Tile(128, 160, rescale_outside_turn=False),
           "fewer K/V blocks per tile pay under the power cap: +1/+2/+4% at 4k/8k/16k keys",
           "d-sm90-long-seqlen-k-tile"),
    Kernel("fwd", "sm90", 192, "noncausal", Sm90Tile(128, 112), "O rescale outside the ping-pong turn +0.7%",
           "d-sm90-rescale-outside-turn"),
    Kernel("fwd", "sm90", 192, "causal", Sm90Tile(128, 112, rescale_outside_turn=False),
           "O rescale inside the turn: outside measured -0.3%", "d-sm90-rescale-outside-turn-off"),
    Kernel("fwd", "sm90", 256, "noncausal", Sm90Tile(128, 80, rescale_outside_turn=False),
           "O rescale inside the turn: outside measured -1 to 0%", "d-sm90-rescale-outside-turn-off"),
    Kernel("fwd", "sm90", 256, "causal", Sm90Tile(128, 80), "O rescale outside the ping-pong turn +1%",
           "d-sm90-rescale-outside-turn"),
    # ---- SM80 backward: FlashAttention-2's tiles for GPUs with >= 208 KiB of shared memory per block (H100/H200;
    # A100's 163 KiB fits head dims <= 192; the kernel says so where it does not fit).
    Kernel("bwd", "sm80", 64, "all", Sm80BwdTile(128, 128, 8, 2, 4, 4), "FlashAttention-2's tile",
           "d-sm80-bwd-fa2-tiles"),
    Kernel("bwd", "sm80", 96, "all", Sm80BwdTile(64, 128, 8, 2, 4, 4), "FlashAttention-2's tile",
           "d-sm80-bwd-fa2-tiles"),
    Kernel("bwd", "sm80", 128, "all", Sm80BwdTile(64, 128, 8, 2, 4, 2), "FlashAttention-2's tile",
           "d-sm80-bwd-fa2-tiles"),
    Kernel("bwd", "sm80", 192, "all", Sm80BwdTile(64, 64, 8, 4, 2, 2), "FlashAttention-2's tile",
           "d-sm80-bwd-fa2-tiles"),
    Kernel("bwd", "sm80", 256, "all", Sm80BwdTile(64, 64, 8, 4, 2, 2), "FlashAttention-2's tile",
           "d-sm80-bwd-fa2-tiles"),
    # ---- SM80 decode (split-KV forward; sm80/decode_kernel.h): 64 query rows, FlashAttention-2's split-KV tiles
    # except hdim 64's 256-key blocks, which spill here; up to 16 rows, the warps split the keys instead.
    Kernel("decode", "sm80", 64, "all", Sm80DecodeTile(64, 128, 4, key_split_block_n=256),
           "256-key blocks spill 76-176 B/thread on 64 rows, not on the key-split tile's 16", "d-sm80-decode-tiles"),
    Kernel("decode", "sm80", 96, "all", Sm80DecodeTile(64, 128, 4), "FlashAttention-2's split-KV tile",
           "d-sm80-decode-tiles"),
    Kernel("decode", "sm80", 128, "all", Sm80DecodeTile(64, 128, 4), "FlashAttention-2's split-KV tile",
           "d-sm80-decode-tiles"),
    Kernel("decode", "sm80", 192, "all", Sm80DecodeTile(64, 64, 4), "FlashAttention-2's split-KV tile",
           "d-sm80-decode-tiles"),
    Kernel("decode", "sm80", 256, "all", Sm80DecodeTile(64, 64, 4), "FlashAttention-2's split-KV tile",
           "d-sm80-decode-tiles"),
    # ---- SM90 backward: up to hdim 128 keys along the wgmma M mode (S^T = K.Q^T), so P^T and dS^T feed the dV/dK
    # gemms from registers (FlashAttention-3's tiles); at 192 and 256 queries along M, P and dS through shared memory.
    Kernel("bwd", "sm90", 64, "all", Sm90BwdTile(128, atom_dq_m=2), "FlashAttention-3's tile", "d-sm90-bwd-tiles"),
    Kernel("bwd", "sm90", 96, "all", Sm90BwdTile(64), "FlashAttention-3's tile", "d-sm90-bwd-tiles"),
    Kernel("bwd", "sm90", 128, "all", Sm90BwdTile(64), "FlashAttention-3's causal tile", "d-sm90-bwd-tiles"),
    Kernel("bwd", "sm90", 192, "all", Sm90BwdTile(64, 64, stages=3, keys_along_m=False, atom_dkv_m=1),
           "queries along M: 192 x 64 dK^T and dV^T fit beside dQ; three Q/dO stages (deterministic: three parked "
           "dQ blocks)", "d-sm90-bwd-192-three-stages"),
    Kernel("bwd", "sm90", 256, "all", Sm90BwdTile(64, 64, keys_along_m=False, atom_dkv_m=2),
           "queries along M: 256 x 64 dK^T and dV^T fit beside dQ", "d-sm90-bwd-queries-along-m"),
)


def kernels(op: str | None = None, arch: str | None = None) -> tuple[Kernel, ...]:
    """The rows of one op and/or arch, in table order."""
    return tuple(k for k in KERNELS if op in (None, k.op) and arch in (None, k.arch))


def head_dims(op: str = "fwd", arch: str | None = None) -> tuple[int, ...]:
    """The instantiated head dims (sorted); smaller head dims run on the next one up."""
    return tuple(sorted({k.head_dim for k in kernels(op, arch)}))


def find(op: str, arch: str, head_dim: int, variant: str) -> Kernel:
    """The row for (op, arch, head_dim, variant); ValueError naming what exists otherwise."""
    for k in KERNELS:
        if (k.op, k.arch, k.head_dim, k.variant) == (op, arch, head_dim, variant):
            return k
    have = ", ".join(k.name for k in kernels(op, arch))
    raise ValueError(f"no {op} {arch} kernel for head_dim {head_dim}, variant {variant!r}; the table has: {have}")


def family(op: str, arch: str) -> str:
    """A kernel family's name, as FLASHCUTE_KERNELS and the built kernels' names spell it: "bwd_sm90"."""
    return f"{op}_{arch}"


def families() -> tuple[str, ...]:
    """Every (op, arch) that has kernels, in OPS then ARCHS order."""
    return tuple(family(op, arch) for op in OPS for arch in ARCHS if kernels(op, arch))


def translation_units(dtypes=DTYPES, head_dims_=None, archs=ARCHS, families_=None) -> list[tuple[str, str, str, int]]:
    """(op, arch, dtype, head_dim) of every generated .cu file, restricted to the given dtypes/head dims/archs and
    kernel families (None: all)."""
    units = sorted({(k.op, k.arch, k.head_dim) for k in KERNELS if k.arch in archs
                    and (head_dims_ is None or k.head_dim in head_dims_)
                    and (families_ is None or family(k.op, k.arch) in families_)},
                   key=lambda u: (OPS.index(u[0]), ARCHS.index(u[1]), u[2]))
    return [(op, arch, dtype, d) for op, arch, d in units for dtype in DTYPES if dtype in dtypes]


def unit_filename(op: str, arch: str, dtype: str, head_dim: int) -> str:
    return f"{op}_{arch}_{dtype}_hdim{head_dim}.cu"
