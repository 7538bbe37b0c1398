"""The drawings: the problem's tiling (and a packed batch's), the shared-memory layouts' bank maps, the predicted bank conflicts, one
ldmatrix/stmatrix phase, the MMA thread-value layouts, and one thread's path through a K/V block. Each is
written as PNG and SVG; matplotlib is imported only when something is drawn."""

import numpy as np

from ..layout import Int, Layout, _, banks, composition, size, to_str, upcast
from ..layout.draw import draw_bank_map, draw_mma, draw_tv
from ..layout.tensor import elem_less_mask, local_tile, make_identity_tensor
from .problem import ceil_div
from .smem import copy_tv, mma_tv, smem_stage, tv_coords


def _save(fig, out_dir, stem):
    paths = []
    for ext in ("png", "svg"):
        path = out_dir / f"{stem}.{ext}"
        fig.savefig(path, dpi=110 if ext == "png" else None, bbox_inches="tight")
        paths.append(path)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return paths


def _tiles(extent, block, head_dim):
    """[(first row, valid rows)] of the tiles ``local_tile(m, (block, head_dim), (_, 0))`` cuts an
    (extent, head_dim) tensor into; the last may be ragged (its coordinates fail ``elem_less``)."""
    tiled = local_tile(make_identity_tensor((extent, head_dim)), (Int(block), Int(head_dim)), (_, 0))
    out = []
    for i in range(int(size(tiled, 2))):
        tile = tiled(_, _, i)
        valid = elem_less_mask(tile, (extent, head_dim)).reshape(head_dim, block)[0]
        out.append((int(tile.offset[0]), int(valid.sum())))
    return out


def draw_tiling(cfg, problem, out_dir):
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    sq, sk, d = problem["seqlen_q"], problem["seqlen_k"], cfg.head_dim
    panels = (("Q", sq, cfg.block_m, "local_tile(mQ, (kBlockM, kHeadDim), (m, 0)): one per CTA, kept in smem"),
              ("K", sk, cfg.block_n, "local_tile(mK, (kBlockN, kHeadDim), (_, 0)): every CTA walks all of them"),
              ("V", sk, cfg.block_n, "same tiles as K, loaded one step behind"),
              ("O", sq, cfg.block_m, "written once per CTA through smem (Q's buffer)"))
    width = max(ceil_div(s, b) * b for _, s, b, _ in panels)
    fig, axes = plt.subplots(4, 1, figsize=(13, 6.4), sharex=True)
    for ax, (name, extent, block, note) in zip(axes, panels):
        tiles = _tiles(extent, block, d)
        for i, (start, valid) in enumerate(tiles):
            color = "#9ecae1" if i % 2 == 0 else "#c6dbef"
            ax.add_patch(Rectangle((start, 0), valid, d, facecolor=color, edgecolor="#3182bd", lw=0.6))
            if valid < block:
                ax.add_patch(Rectangle((start + valid, 0), block - valid, d, facecolor="white",
                                       edgecolor="#de2d26", hatch="///", lw=0.8))
                ax.text(start + block / 2, d / 2, f"{valid}/{block}\nrows valid", ha="center", va="center",
                        fontsize=7, color="#a50f15", fontweight="bold")
            elif len(tiles) <= 40 or i % 4 == 0:
                ax.text(start + valid / 2, d / 2, str(i), ha="center", va="center", fontsize=6)
        last_start, last_valid = tiles[-1]
        ragged = (f"; last tile rows {last_start}..{last_start + last_valid - 1} ({last_valid} of {block})"
                  if last_valid < block else "")
        ax.set_title(f"{name}: {extent} x {d} -> {len(tiles)} tiles of {block} rows{ragged}.  {note}",
                     fontsize=8, loc="left")
        ax.set_xlim(0, width)
        ax.set_ylim(0, d)
        ax.set_yticks([0, d])
        ax.set_ylabel("head dim", fontsize=7)
    axes[-1].set_xlabel("sequence position (rows); hatched: outside the tensor (cp.async zero-fills, "
                        "stores are predicated off)", fontsize=8)
    fig.suptitle(f"{cfg.arch} {cfg.dtype} hdim{d}: tiling of the problem (one batch, one head)", fontsize=10)
    fig.tight_layout()
    return _save(fig, out_dir, "tiling")


def varlen_walk(lengths, block_m, block_n, causal):
    """The SM90 forward's walk of a packed batch (csrc/sm90/varlen_schedule.h, tile_scheduler.h) for one head:
    [(sequence, m_block, position in the walk)], the sequences by K/V blocks, most first (ties in batch order;
    the kernel's counting sort leaves them in any order), each one's Q blocks in its units' order (causal: the
    pair m = last - p, then p)."""
    order = sorted(range(len(lengths)), key=lambda b: -ceil_div(lengths[b], block_n))
    walk = []
    for b in order:
        blocks = ceil_div(lengths[b], block_m)
        if not causal:
            walk += [(b, m) for m in range(blocks)]
            continue
        for p in range(ceil_div(blocks, 2)):
            walk += [(b, blocks - 1 - p)] + ([(b, p)] if p < blocks - 1 - p else [])
    return [(b, m, i) for i, (b, m) in enumerate(walk)]


def draw_varlen_tiling(cfg, lengths, out_dir):
    """A packed batch (sequences of ``lengths`` query and key rows, one head) cut into the kernel's Q tiles: each
    sequence's tiles start at its first row; the rows of a ragged last tile past the sequence's end are never
    read from or written to the next sequence. SM90: the tensor maps index a sequence at its end row e and the
    tile's rows at r = max_seqlen - length + row, so rows past the end fall at r >= max_seqlen (out of bounds:
    zero-filled loads, clipped stores); the number on a tile is its position in the longest-first walk. SM80:
    loads and stores predicated on the sequence's length."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    block_m, max_len = cfg.block_m, max(lengths)
    starts = [sum(lengths[:b]) for b in range(len(lengths))]
    total = sum(lengths)
    walk = {(b, m): i for b, m, i in varlen_walk(lengths, block_m, cfg.block_n, cfg.arch == "sm90" and cfg.causal)}
    fig, (ax, ax_map) = plt.subplots(2, 1, figsize=(13, 4.8), gridspec_kw={"height_ratios": [1, 1.3]})
    colors = ("#9ecae1", "#a1d99b", "#fdd0a2", "#dadaeb", "#fcbba1")
    for b, (start, length) in enumerate(zip(starts, lengths)):
        color = colors[b % len(colors)]
        ax.add_patch(Rectangle((start, 0), max(length, 0), 1, facecolor=color, edgecolor="#555555", lw=0.6))
        ax.text(start + length / 2, 0.5, f"seq {b}: {length}", ha="center", va="center", fontsize=7)
        for m in range(ceil_div(length, block_m)):
            row0 = start + m * block_m
            valid = min(block_m, length - m * block_m)
            ax_map.add_patch(Rectangle((row0, b), valid, 0.8, facecolor=color, edgecolor="#3182bd", lw=0.6))
            if valid < block_m:
                ax_map.add_patch(Rectangle((row0 + valid, b), block_m - valid, 0.8, facecolor="white",
                                           edgecolor="#de2d26", hatch="///", lw=0.8))
            label = f"#{walk[(b, m)]}" if cfg.arch == "sm90" else f"m{m}"
            ax_map.text(row0 + valid / 2, b + 0.4, label, ha="center", va="center", fontsize=6)
        if cfg.arch == "sm90":
            end = start + length
            ax_map.text(total + block_m * 1.1, b + 0.4, f"e = {end}, r = {max_len - length} + row", fontsize=6,
                        va="center")
    ax.set_xlim(0, total + 3 * block_m)
    ax.set_ylim(0, 1)
    ax.set_yticks([])
    ax.set_title(f"packed rows: {len(lengths)} sequences, {total} rows (cu_seqlens "
                 f"{[0] + [sum(lengths[:b + 1]) for b in range(len(lengths))]})", fontsize=8, loc="left")
    ax_map.set_xlim(0, total + 3 * block_m)
    ax_map.set_ylim(len(lengths), 0)
    ax_map.set_yticks([b + 0.4 for b in range(len(lengths))])
    ax_map.set_yticklabels([f"seq {b}" for b in range(len(lengths))], fontsize=7)
    if cfg.arch == "sm90":
        how = (f"tensor map (max_seqlen {max_len}, d, heads, total + 1) at e = the sequence's end row: rows at "
               f"r >= {max_len} (hatched) are out of bounds, zero-filled on load, clipped on store; #k: the "
               f"longest-first walk (one head)")
    else:
        how = "hatched: past the sequence's end (cp.async zero-fills, stores predicated off); one CTA per tile"
    ax_map.set_title(f"Q tiles of {block_m} rows per sequence. {how}", fontsize=8, loc="left")
    ax_map.set_xlabel("packed row", fontsize=8)
    fig.suptitle(f"{cfg.arch} {cfg.dtype} hdim{cfg.head_dim}: a packed (varlen) batch", fontsize=10)
    fig.tight_layout()
    return _save(fig, out_dir, "varlen_tiling")


def _save_drawing(drawing, out_dir, stem):
    """Write a flashcute.layout.draw picture as PNG and SVG."""
    paths = [out_dir / f"{stem}.png", out_dir / f"{stem}.svg"]
    for path in paths:
        drawing.figure.savefig(path, dpi=110, bbox_inches="tight")
    return paths


SMEM_PICTURE_ROWS = 16  # the SM80 swizzles repeat every 8 rows: 16 rows show the pattern twice


def smem_pictures(cfg):
    """(name, layout, note) of each distinct shared-memory layout of the kernel."""
    if cfg.arch == "sm80":
        return (("SmemLayoutQ", cfg.smem_layout_q, " (= SmemLayoutO: O is staged in Q's buffer)"),
                ("SmemLayoutKV", cfg.smem_layout_kv, " (K and V)"),
                ("SmemLayoutVt", cfg.smem_layout_vt, " (V read as V^T)"))
    return (("SmemLayoutQ", cfg.smem_layout_q, " (SmemLayoutO's 64-row slabs repeat these atoms)"),
            ("SmemLayoutK", cfg.smem_layout_k, f" (= SmemLayoutV; stage 0 of {cfg.stages})"),
            ("SmemLayoutVt", cfg.smem_layout_vt, f" (V read as V^T; stage 0 of {cfg.stages})"))


def draw_chunk_banks(name, layout, element_bytes, what, out_dir, max_rows=SMEM_PICTURE_ROWS, also=""):
    """One shared-memory layout (stage 0) in 16-byte chunks (the unit the swizzle permutes): the first bank of
    every chunk, its first max_rows rows (None: all), as smem_<name>."""
    chunks = upcast(smem_stage(layout), 16 // element_bytes)
    total = int(size(chunks, 0))
    rows = total if max_rows is None else min(total, max_rows)
    shown = composition(chunks, (Layout(Int(rows)), Layout(size(chunks, 1))))
    title = (f"{name}{also} = {layout}\nfirst bank of each 16-byte chunk; {what}"
             + (f"; rows 0-{rows - 1} of {total}" if rows < total else ""))
    return _save_drawing(draw_bank_map(shown, 16, title=title), out_dir, f"smem_{name}")


def draw_smem_layouts(cfg, out_dir):
    """Each shared-memory layout of the kernel, from the mirror's layout itself (draw_chunk_banks)."""
    files = []
    for name, layout, also in smem_pictures(cfg):
        transposed = name == "SmemLayoutVt"
        what = ("rows: head dim in 16-byte chunks, columns: key positions" if transposed else
                "rows: sequence positions, columns: 16-byte chunks of the head dim")
        files += draw_chunk_banks(name, layout, cfg.element_bytes, what, out_dir,
                                  max_rows=None if transposed else SMEM_PICTURE_ROWS, also=also)
    return files


def draw_mma_tv(cfg, out_dir):
    """The TiledMMA thread-value layouts as CuTe's print_latex draws them. SM90: all of TiledMmaS (its C
    pattern is also O's, 16 columns at a time) and the A operand of TiledMmaO (P, from registers)."""
    head = f"{cfg.arch} {cfg.dtype} hdim{cfg.head_dim}"
    if cfg.arch == "sm80":
        slices = f" (one of {cfg.key_slices} key slices)" if cfg.key_slices > 1 else ""
        title = (f"TiledMma of {head}: {cfg.mma_op}, {cfg.warps_m} warps along M{slices}, tile "
                 f"{to_str(cfg.tiled_mma.tile_shape)}\nA = Q (M x K) left, B = K (N x K, drawn K x N) top, "
                 f"C = S (M x N); cell: thread T and value V (the same layouts serve O = P.V)")
        return _save_drawing(draw_mma(cfg.tiled_mma, title=title), out_dir, "mma_tv")
    s, o = cfg.tiled_mma_s, cfg.tiled_mma_o
    title_s = (f"TiledMmaS of {head}: {s.atom.name}, {cfg.n_mma_warpgroups} consumer warpgroups along M, tile "
               f"{to_str(s.tile_shape)}\nA = Q and B = K are read from shared memory through descriptors (each "
               f"warpgroup thread is listed for its whole slab); C = S in registers")
    m, k = int(o.tile_shape[0]), int(o.tile_shape[2])
    title_o = (f"TiledMmaO of {head}: {o.atom.name}; its A operand, P ({m} x {k} per k-step), comes from "
               f"registers:\nthe S accumulator regrouped and converted to 16 bits; cell: consumer thread T, value V")
    return (_save_drawing(draw_mma(s, title=title_s), out_dir, "mma_tv_S")
            + _save_drawing(draw_tv(o.get_layoutA_TV(), (m, k), title=title_o), out_dir, "mma_tv_O_A"))


def draw_bank_conflicts(cfg, reports, out_dir, kernel=None):
    """Wavefronts per warp instruction of each report, swizzled and not; kernel: the title's name of the kernel
    (default "<arch> <dtype> hdim<d>")."""
    import matplotlib.pyplot as plt

    names = [f"{r.access.name}\n{r.instruction} ({r.access.when})" for r in reports]
    sw = np.array([r.swizzled.wavefronts.mean() for r in reports])
    un = np.array([r.unswizzled.wavefronts.mean() for r in reports])
    ideal = np.array([r.swizzled.ideal.mean() for r in reports])
    y = np.arange(len(reports))
    fig, ax = plt.subplots(figsize=(10, 0.62 * len(reports) + 1.4))
    ax.barh(y - 0.2, sw, 0.38, color="#31a354", label="shipped swizzle")
    ax.barh(y + 0.2, un, 0.38, color="#de2d26", label="same layout without the swizzle")
    for i, r in enumerate(reports):
        for value, offset, rep in ((sw[i], -0.2, r.swizzled), (un[i], 0.2, r.unswizzled)):
            degree = int(rep.degree.max())
            tag = "conflict-free" if degree == 1 else f"{degree}-way conflict"
            ax.text(value + 0.3, i + offset, f"{value:g} ({tag})", va="center", fontsize=7)
        ax.plot([ideal[i]] * 2, [i - 0.42, i + 0.42], color="black", lw=1)
    ax.set_yticks(y, names, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, max(un.max(), sw.max()) * 1.35)
    ax.set_xlabel("shared-memory wavefronts per warp instruction (black tick: conflict-free ideal)", fontsize=8)
    ax.legend(fontsize=8, loc="lower right")
    kernel = kernel or f"{cfg.arch} {cfg.dtype} hdim{cfg.head_dim}"
    ax.set_title(f"{kernel}: predicted bank conflicts of every shared-memory instruction", fontsize=9)
    fig.tight_layout()
    return _save(fig, out_dir, "bank_conflicts")


def draw_bank_phase(cfg, report, out_dir):
    """The 8 rows of the first 8x8 matrix of one ldmatrix/stmatrix: which banks each row's 16 bytes hit."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 3.2))
    for ax, (title, rep) in zip(axes, (("shipped swizzle", report.swizzled), ("no swizzle", report.unswizzled))):
        rows = rep.addresses[0, :8]
        grid = np.full((8, banks.NUM_BANKS), np.nan)
        for r, addr in enumerate(rows):
            for w in range(4):
                grid[r, banks.bank_of(addr + 4 * w)] = r
        ax.imshow(grid, cmap="tab10", vmin=0, vmax=9, aspect="auto")
        for r, addr in enumerate(rows):
            ax.text(-0.7, r, f"T{r}: byte {addr}", ha="right", va="center", fontsize=7)
        waves = int(rep.phase_wavefronts[0, 0])
        ax.set_title(f"{title}: {waves} wavefront{'s' if waves > 1 else ''} for this 8x8 matrix"
                     + ("" if waves == 1 else f" ({waves}-way conflict)"), fontsize=9)
        ax.set_xticks(range(0, 32, 4), [f"{b}" for b in range(0, 32, 4)], fontsize=7)
        ax.set_xticks(np.arange(-0.5, 32, 1), minor=True)
        ax.grid(which="minor", axis="x", color="#dddddd", lw=0.5)
        ax.set_yticks([])
        ax.set_xlabel("bank", fontsize=8)
    fig.suptitle(f"{report.access.name} ({report.instruction}), warp 0, first instruction, matrix 0: "
                 f"each thread names one 16-byte row", fontsize=9)
    fig.tight_layout()
    return _save(fig, out_dir, "bank_phase")


def path_threads(cfg):
    """(threads that run the MMAs, threads per group drawn as context): SM80 all its threads in warps,
    SM90 the consumer warpgroups (MMA thread index = threadIdx.x - 128)."""
    return (cfg.n_threads, 32) if cfg.arch == "sm80" else (cfg.n_mma_threads, 128)


def thread_path(cfg, thread):
    """What ``thread`` touches in one K/V block: [(panel title, (rows, cols), named, held, group, note)].

    ``named``: shared memory the thread addresses or reads (cp.async destinations, ldmatrix/stmatrix rows,
    wgmma descriptor operands); ``held``: elements in its registers (MMA fragments); ``group``: what its
    warp (SM80) or warpgroup (SM90) as a whole names or holds there.
    """
    n_threads, group_size = path_threads(cfg)
    if not 0 <= thread < n_threads:
        raise ValueError(f"thread must be in [0, {n_threads}), got {thread}")
    bm, bn, d = cfg.block_m, cfg.block_n, cfg.head_dim
    group = slice(thread - thread % group_size, thread - thread % group_size + group_size)

    def masks(shape, coords):
        mine, ours = np.zeros(shape, dtype=bool), np.zeros(shape, dtype=bool)
        row, col = coords
        mine[row[thread].ravel(), col[thread].ravel()] = True
        ours[row[group].ravel(), col[group].ravel()] = True
        return mine, ours

    def copied(copy, side, shape):
        tv, tiler, _, _ = copy_tv(cfg, copy, side)
        return masks(shape, tv_coords(tv, tiler, shape))

    def fragment(operand, shape, tiler_modes, mma="tiled_mma"):
        tv, tile_mnk = mma_tv(cfg, operand, mma)
        return masks(shape, tv_coords(tv, tuple(tile_mnk[i] for i in tiler_modes), shape))

    def panel(title, shape, named, held, note):
        nothing = (np.zeros(shape, dtype=bool),) * 2
        named, held = named or nothing, held or nothing
        return title, shape, named[0], held[0], named[1] | held[1], note

    if cfg.arch == "sm90":
        return [
            panel("1. Q in smem: A of S = Q.K^T (wgmma descriptor)", (bm, d),
                  fragment("A", (bm, d), (0, 2), "tiled_mma_s"), None, "its warpgroup's 64-row slab"),
            panel("2. K in smem: B of S = Q.K^T (wgmma descriptor)", (bn, d),
                  fragment("B", (bn, d), (1, 2), "tiled_mma_s"), None, "every warpgroup reads all of K"),
            panel("3. S = Q.K^T accumulator", (bm, bn), None, fragment("C", (bm, bn), (0, 1), "tiled_mma_s"),
                  "masked, softmaxed, regrouped into P: the register A operand of P.V"),
            panel("4. V^T in smem: B of O += P.V (wgmma descriptor)", (d, bn),
                  fragment("B", (d, bn), (1, 2), "tiled_mma_o"), None, "every warpgroup reads all of V"),
            panel("5. O accumulator", (bm, d), None, fragment("C", (bm, d), (0, 1), "tiled_mma_o"),
                  "rescaled every block"),
            panel("6. O -> smem: stmatrix (epilogue)", (bm, d), copied("smem_tiled_copy_o", "D", (bm, d)),
                  None, "rows whose 16-byte addresses it supplies; then one TMA store"),
        ]
    return [
        panel("1. K (and V) tile: cp.async gmem->smem", (bn, d),
              copied("gmem_tiled_copy_qkv", "D", (bn, d)), None, "16-byte chunks this thread copies"),
        panel("2. Q in smem: ldmatrix -> tSrQ", (bm, d),
              copied("smem_tiled_copy_q", "S", (bm, d)), fragment("A", (bm, d), (0, 2)),
              "A operand of S = Q.K^T"),
        panel("3. K in smem: ldmatrix -> tSrK", (bn, d),
              copied("smem_tiled_copy_k", "S", (bn, d)), fragment("B", (bn, d), (1, 2)),
              "B operand of S = Q.K^T"),
        panel("4. S = Q.K^T accumulator (then P, in place)", (bm, bn),
              None, fragment("C", (bm, bn), (0, 1)), "masked, softmaxed, reused as the A operand of P.V"),
        panel("5. V^T in smem: ldmatrix.trans -> tOrVt", (d, bn),
              copied("smem_tiled_copy_v", "S", (d, bn)), fragment("B", (d, bn), (1, 2)),
              "B operand of O += P.V"),
        panel("6. O accumulator", (bm, d), None, fragment("C", (bm, d), (0, 1)), "rescaled every block"),
    ]


def draw_thread_path(cfg, thread, out_dir):
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    panels = thread_path(cfg, thread)
    colors = ["#ffffff", "#e5e5e5", "#fd8d3c", "#3182bd", "#756bb1"]
    fig, axes = plt.subplots(2, 3, figsize=(14, 8.6))
    for ax, (title, shape, named, held, group, note) in zip(axes.ravel(), panels):
        grid = np.where(named | held, named.astype(int) + 2 * held.astype(int) + 1, group.astype(int))
        ax.imshow(grid, cmap=ListedColormap(colors), vmin=0, vmax=4, interpolation="nearest")
        counts = []
        if named.any():
            counts.append(f"addresses/reads {int(named.sum())} elements")
        if held.any():
            counts.append(f"holds {int(held.sum())} values")
        ax.set_title(f"{title}\n{shape[0]} x {shape[1]}: {', '.join(counts)}\n{note}", fontsize=8)
        ax.tick_params(labelsize=6)
    group_size = path_threads(cfg)[1]
    unit = "warp" if group_size == 32 else "warpgroup"
    named_label = ("its addresses (cp.async / ldmatrix rows)" if cfg.arch == "sm80" else
                   "shared memory it reads (wgmma) or addresses (stmatrix rows)")
    fig.legend(handles=[Patch(color=colors[2], label=named_label),
                        Patch(color=colors[3], label="its registers (MMA fragment)"),
                        Patch(color=colors[4], label="both"),
                        Patch(facecolor=colors[1], edgecolor="#999999", label=f"the rest of its {unit}'s share")],
               loc="lower center", ncol=4, fontsize=8)
    who = (f"thread {thread} (warp {thread // 32})" if cfg.arch == "sm80" else
           f"consumer thread {thread} (warpgroup {thread // 128} of the consumers, threadIdx.x {thread + 128})")
    fig.suptitle(f"{cfg.arch} {cfg.dtype} hdim{cfg.head_dim}: {who} through one K/V block "
                 f"(rows down, columns across)", fontsize=10)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return _save(fig, out_dir, "thread_path")



PICTURES = ("tiling", "smem", "bank_conflicts", "bank_phase", "mma_tv", "thread_path", "varlen_tiling")
VARLEN_EXAMPLE = (300, 0, 700, 129, 40)  # the lengths varlen_tiling draws unless given others


def draw_pictures(cfg, names, problem, reports, thread, out_dir, lengths=VARLEN_EXAMPLE, varlen_cfg=None):
    """Draw the named PICTURES (in that order); returns the files written. varlen_tiling draws ``lengths`` with
    ``varlen_cfg`` (the packed-batch kernel's configuration; default ``cfg``)."""
    drawers = {
        "tiling": lambda: draw_tiling(cfg, problem, out_dir),
        "varlen_tiling": lambda: draw_varlen_tiling(varlen_cfg or cfg, lengths, out_dir),
        "smem": lambda: draw_smem_layouts(cfg, out_dir),
        "bank_conflicts": lambda: draw_bank_conflicts(cfg, reports, out_dir),
        "bank_phase": lambda: draw_bank_phase(cfg, next(r for r in reports if "matrix" in r.instruction), out_dir),
        "mma_tv": lambda: draw_mma_tv(cfg, out_dir),
        "thread_path": lambda: draw_thread_path(cfg, thread, out_dir),
    }
    return [path for name in PICTURES if name in names for path in drawers[name]()]
