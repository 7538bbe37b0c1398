"""Pictures of layouts, thread-value maps, tilings and shared-memory banks (PNG or SVG, matplotlib Agg).

matplotlib is imported on the first drawing, so ``import flashcute.layout`` stays numpy-only.
Every ``draw_*`` function computes the data it shows first (returned as ``Drawing.grids``, numpy
arrays such as each cell's offset, thread, value or bank) and renders it only if a path is given:
the format follows the suffix (``.png`` or ``.svg``). Nothing here touches pyplot's global state.

    >>> draw_layout(Layout(((Int(2), Int(2)), Int(4))), "layout.png")
    >>> draw_mma(make_tiled_mma(mma_atom("SM80_16x8x16_F32BF16BF16F32_TN")), "mma.svg")

The TV pictures follow CuTe's ``print_latex``: a cell is labelled by the first (thread, value) that
maps to it; an MMA shows C at the bottom right, A to its left and B above it (transposed, K down);
a copy shows the source tile left of the destination tile.
"""

import colorsys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .atoms import MMAAtom
from .banks import BANK_BYTES, NUM_BANKS
from .int_tuple import Int, flatten, idx2crd, wrap
from .layout import Layout, cosize, is_layout, rank, shape, size
from .printing import to_str
from .tensor import elem_less_mask, local_tile, make_identity_tensor
from .tiled import TiledCopy, TiledMMA, make_tiled_mma

__all__ = [
    "Drawing", "layout_grid", "tv_grid", "draw_layout", "draw_memory", "draw_tv", "draw_mma",
    "draw_copy", "draw_tiling", "draw_flash_loop", "draw_bank_map", "thread_color", "bank_color",
]

_FORMATS = (".png", ".svg")
_MAX_LABELLED_CELLS = 12000    # beyond this, cells are coloured but not labelled


def _new_figure(width, height):
    """A Figure on its own Agg canvas (no pyplot, no global backend switch)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)
    return fig


def _rect(*args, **kwargs):
    from matplotlib.patches import Rectangle

    return Rectangle(*args, **kwargs)


@dataclass
class Drawing:
    """What a picture shows: ``grids`` (numpy arrays, -1 for empty cells) and where it was written."""

    grids: dict = field(default_factory=dict)
    path: Path = None
    figure: object = None     # the matplotlib Figure


# ---------------------------------------------------------------------------------------------
# Colours
# ---------------------------------------------------------------------------------------------

def _pastel(hue, sat=0.42, val=1.0):
    return colorsys.hsv_to_rgb(hue % 1.0, sat, val)


def thread_color(tid):
    """A light colour per thread; consecutive threads get far-apart hues (golden-ratio walk)."""
    tid = int(tid)
    return _pastel(tid * 0.618033988749895, sat=(0.30, 0.45, 0.60)[(tid // 32) % 3])


def bank_color(bank):
    """Banks 0..31 around the colour wheel: equal colours in one access mean one bank."""
    return _pastel(int(bank) / NUM_BANKS, sat=0.55)


def _colors(ids, fn, empty=(1.0, 1.0, 1.0)):
    table = {int(i): fn(i) for i in np.unique(ids) if i >= 0}
    out = np.empty(ids.shape + (3,))
    out[...] = empty
    for i, c in table.items():
        out[ids == i] = c
    return out


# ---------------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------------

def _as_2d(layout, what):
    if not is_layout(layout):
        raise TypeError(f"{what} expects a layout, got {type(layout).__name__}")
    r = int(rank(layout))
    if r > 2:
        raise ValueError(f"{what} draws rank-1 or rank-2 layouts; {to_str(layout)} has rank {r} "
                         f"(group modes first, e.g. with group())")
    return r


def layout_grid(layout):
    """Offsets of a rank-1 (as M x 1, like CuTe) or rank-2 layout as an (M, N) int array."""
    r = _as_2d(layout, "layout_grid")
    m = int(size(layout, 0)) if r == 2 else int(size(layout))
    n = int(size(layout, 1)) if r == 2 else 1
    offsets = layout.offsets()
    if offsets.ndim != 1:
        raise ValueError(f"layout_grid: {to_str(layout)} maps to coordinates, not offsets")
    return offsets.reshape(n, m).T


def _tile_mn(tile_mn):
    t = tuple(tile_mn) if isinstance(tile_mn, (tuple, list)) else (tile_mn,)
    if len(t) == 1:
        t = t + (1,)
    if len(t) != 2:
        raise ValueError(f"tile_mn must be (M, N), got {to_str(tuple(tile_mn))}")
    return int(size(t[0])), int(size(t[1]))


def tv_grid(layout_tv, tile_mn):
    """(thread, value) of each cell of an (M, N) tile: two (M, N) int arrays, -1 where unowned.

    ``layout_tv`` maps (thr, val) to the column-major index of the tile; as in CuTe's
    ``print_latex`` the first (thr, val) in (thr-major) order to reach a cell labels it.
    """
    if not isinstance(layout_tv, Layout) or int(rank(layout_tv)) != 2:
        raise ValueError(f"tv_grid needs a rank-2 (thread, value) layout, got {layout_tv}")
    m, n = _tile_mn(tile_mn)
    nthr, nval = int(size(layout_tv, 0)), int(size(layout_tv, 1))
    idx = layout_tv.offsets().reshape(nval, nthr).T.reshape(-1)   # thr-major, val-minor (C++ loop order)
    if idx.size and (idx.min() < 0 or idx.max() >= m * n):
        raise ValueError(f"TV layout {layout_tv} reaches index {int(idx.max())} outside the {m}x{n} tile")
    first = np.unique(idx, return_index=True)[1]
    thr, val = np.full(m * n, -1), np.full(m * n, -1)
    thr[idx[first]], val[idx[first]] = first // nval, first % nval
    return thr.reshape(n, m).T, val.reshape(n, m).T


# ---------------------------------------------------------------------------------------------
# Rendering helpers
# ---------------------------------------------------------------------------------------------

def _check_path(path):
    if path is None:
        return None
    path = Path(path)
    if path.suffix.lower() not in _FORMATS:
        raise ValueError(f"picture path must end in .png or .svg, got {str(path)!r}")
    return path


def _cell_inches(rows, cols, budget=22.0):
    return float(np.clip(budget / max(rows, cols, 1), 0.06, 0.45))


def _grid_axes(x_range, y_range, cell, title):
    """A figure sized to the data (``cell`` inches per unit), so saving needs no tight bounding box
    (which would render every label twice); the title sits above, in monospace."""
    lines = title.split("\n") if title else []
    data_w, data_h = (x_range[1] - x_range[0]) * cell, (y_range[1] - y_range[0]) * cell
    title_h = 0.2 * len(lines) + (0.1 if lines else 0.0)
    width = max(data_w, max((len(t) for t in lines), default=0) * 0.085 + 0.6, 1.0)
    fig = _new_figure(width, data_h + title_h)
    ax = fig.add_axes(((width - data_w) / 2 / width, 0.0, data_w / width, data_h / (data_h + title_h)))
    ax.set_xlim(*x_range)
    ax.set_ylim(y_range[1], y_range[0])
    ax.axis("off")
    if lines:
        fig.text(0.5, 1 - 0.05 / (data_h + title_h), title, ha="center", va="top", fontsize=10, family="monospace")
    return fig, ax


def _save(drawing, fig, path, tight=False):
    drawing.figure = fig
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110, bbox_inches="tight" if tight else None)
        drawing.path = path
    return drawing


def _paint(ax, x0, y0, colors, labels=None, fontsize=6.0):
    """Cells (rows down, columns right) with top-left corner at (x0, y0), thin grid lines, labels."""
    m, n = colors.shape[:2]
    ax.imshow(colors, extent=(x0, x0 + n, y0 + m, y0), interpolation="nearest", zorder=0)
    ax.hlines(np.arange(y0, y0 + m + 1), x0, x0 + n, colors="0.35", linewidth=0.4, zorder=1)
    ax.vlines(np.arange(x0, x0 + n + 1), y0, y0 + m, colors="0.35", linewidth=0.4, zorder=1)
    if labels is not None and m * n <= _MAX_LABELLED_CELLS:
        for i in range(m):
            for j in range(n):
                if labels[i][j]:
                    ax.text(x0 + j + 0.5, y0 + i + 0.5, labels[i][j], ha="center", va="center",
                            fontsize=fontsize, zorder=2, linespacing=0.9)


def _axis_labels(ax, x0, y0, m, n, fontsize, left=True, top=True, row_text=None, col_text=None):
    step_m = max(1, m // 64)
    step_n = max(1, n // 64)
    if left:
        for i in range(0, m, step_m):
            ax.text(x0 - 0.25, y0 + i + 0.5, row_text(i) if row_text else str(i), ha="right", va="center",
                    fontsize=fontsize, color="0.2")
    if top:
        for j in range(0, n, step_n):
            ax.text(x0 + j + 0.5, y0 - 0.25, col_text(j) if col_text else str(j), ha="center", va="bottom",
                    fontsize=fontsize, color="0.2", rotation=90 if n > 16 and col_text else 0)


def _fontsize(cell):
    return float(np.clip(cell * 22, 3.0, 9.0))


def _hierarchy_lines(ax, x0, y0, m, n, mode_shape_m, mode_shape_n):
    """Thicker lines between the sub-blocks of hierarchical modes: (2,4) rows -> a line every 2 rows."""
    for mode_shape, extent, horizontal in ((mode_shape_m, m, True), (mode_shape_n, n, False)):
        leaves = [int(s) for s in flatten(wrap(mode_shape))]
        step = 1
        for level, s in enumerate(leaves[:-1]):
            step *= s
            if step >= extent:
                break
            cuts = np.arange(step, extent, step)
            lw = 1.0 + 0.9 * level
            if horizontal:
                ax.hlines(y0 + cuts, x0, x0 + n, colors="black", linewidth=lw, zorder=3)
            else:
                ax.vlines(x0 + cuts, y0, y0 + m, colors="black", linewidth=lw, zorder=3)
    ax.add_patch(_rect((x0, y0), n, m, fill=False, linewidth=1.6, zorder=4))


def _mode_coord_text(mode_shape, sep=" "):
    if not isinstance(mode_shape, tuple):
        return None
    return lambda i: f"{i}{sep}{to_str(idx2crd(i, mode_shape))}"


# ---------------------------------------------------------------------------------------------
# Layouts
# ---------------------------------------------------------------------------------------------

def _offset_colors(grid, scheme):
    if scheme == "bw8":   # CuTe's TikzColor_BWx8
        greys = np.array([1.0, 0.6, 0.8, 0.4, 0.9, 0.5, 0.7, 0.3])
        g = greys[grid % 8]
        return np.stack([g, g, g], axis=-1)
    if scheme == "offset":
        top = max(int(grid.max()), 1)
        hue = 0.62 - 0.62 * grid / top           # blue (offset 0) .. red (largest offset)
        return np.array([[_pastel(h, sat=0.45) for h in row] for row in hue])
    raise ValueError(f"color must be 'offset' or 'bw8', got {scheme!r}")


def draw_layout(layout, path=None, title=None, color="offset"):
    """A rank-1/2 layout as a grid of offsets, with its hierarchical modes outlined.

    Row and column headers show the index and, for a hierarchical mode, its coordinate.
    """
    path = _check_path(path)
    grid = layout_grid(layout)
    drawing = Drawing({"offset": grid})
    m, n = grid.shape
    cell = _cell_inches(m + 2, n + 2)
    fs = _fontsize(cell)
    r = int(rank(layout))
    shape_m = shape(layout, 0) if r == 2 else shape(layout)
    shape_n = shape(layout, 1) if r == 2 else Int(1)
    margin = 3.5 if isinstance(shape_m, tuple) else 1.5
    rotated = isinstance(shape_n, tuple) and n > 16     # see _axis_labels
    top = -3.2 if rotated else -1.7 if isinstance(shape_n, tuple) else -1.1
    fig, ax = _grid_axes((-margin, n + 0.3), (top, m + 0.3), cell,
                     title or to_str(layout))
    labels = [[str(v) for v in row] for row in grid]
    _paint(ax, 0, 0, _offset_colors(grid, color), labels, fs)
    _hierarchy_lines(ax, 0, 0, m, n, shape_m, shape_n)
    _axis_labels(ax, 0, 0, m, n, fs, row_text=_mode_coord_text(shape_m),
                 col_text=_mode_coord_text(shape_n, " " if n > 16 else "\n"))
    return _save(drawing, fig, path)


def draw_memory(layout, path=None, title=None, row_width=None):
    """Logical to linear: the (M, N) domain coloured by row, and memory 0..cosize-1 below it,
    each offset labelled with the coordinate stored there ("-" unused, "xK" when K alias)."""
    path = _check_path(path)
    grid = layout_grid(layout)
    m, n = grid.shape
    span = int(cosize(layout)) if isinstance(layout, Layout) else int(grid.max()) + 1
    if grid.min() < 0:
        raise ValueError(f"draw_memory: {to_str(layout)} has negative offsets")
    owner_row = np.full(span, -1)
    owner_col = np.full(span, -1)
    hits = np.bincount(grid.reshape(-1), minlength=span)
    flat_rows = np.repeat(np.arange(m), n)
    flat_cols = np.tile(np.arange(n), m)
    first = np.unique(grid.reshape(-1), return_index=True)
    owner_row[first[0]], owner_col[first[0]] = flat_rows[first[1]], flat_cols[first[1]]
    drawing = Drawing({"offset": grid, "memory_row": owner_row, "memory_col": owner_col, "memory_hits": hits})

    width = int(row_width or min(span, 16 if n < 16 else 32))   # memory wraps independently of N
    mem_rows = -(-span // width)
    pad = mem_rows * width - span
    cell = _cell_inches(m + mem_rows + 4, max(n, width) + 2)
    fs = _fontsize(cell)
    fig, ax = _grid_axes((-1.5, max(n, width) + 0.3), (-1.3, m + mem_rows + 2.3), cell,
                     title or f"{to_str(layout)}: logical (top) -> memory (bottom)")
    row_color = lambda i: _pastel(int(i) * 0.618033988749895, sat=0.45)   # noqa: E731
    _paint(ax, 0, 0, _colors(np.repeat(np.arange(m)[:, None], n, axis=1), row_color),
           [[f"({i},{j})\n{grid[i, j]}" for j in range(n)] for i in range(m)], fs * 0.85)
    _axis_labels(ax, 0, 0, m, n, fs)
    y_mem = m + 2
    mem_ids = np.concatenate([owner_row, np.full(pad, -1)]).reshape(mem_rows, width)
    labels = []
    for k in range(mem_rows * width):
        if k >= span or hits[k] == 0:
            labels.append("-" if k < span else "")
        else:
            text = f"{k}\n({owner_row[k]},{owner_col[k]})"
            labels.append(text + (f" x{hits[k]}" if hits[k] > 1 else ""))
    _paint(ax, 0, y_mem, _colors(mem_ids, row_color), np.array(labels, dtype=object).reshape(mem_rows, width),
           fs * 0.8)
    ax.text(0, y_mem - 0.35, f"memory offsets 0..{span - 1} ({width} per row)", fontsize=fs, va="bottom")
    return _save(drawing, fig, path)


# ---------------------------------------------------------------------------------------------
# Thread-value maps
# ---------------------------------------------------------------------------------------------

def _tv_labels(thr, val):
    return [[f"T{t}\nV{v}" if t >= 0 else "" for t, v in zip(tr, vr)] for tr, vr in zip(thr, val)]


def _tv_block(ax, x0, y0, thr, val, fs, transpose=False):
    if transpose:
        thr, val = thr.T, val.T
    _paint(ax, x0, y0, _colors(thr, thread_color), _tv_labels(thr, val), fs)


def draw_tv(layout_tv, tile_mn, path=None, title=None):
    """One (thread, value) -> (m, n) map over an (M, N) tile, coloured per thread."""
    path = _check_path(path)
    thr, val = tv_grid(layout_tv, tile_mn)
    drawing = Drawing({"thread": thr, "value": val})
    m, n = thr.shape
    cell = _cell_inches(m + 2, n + 2)
    fs = _fontsize(cell) * 0.8
    fig, ax = _grid_axes((-1.5, n + 0.3), (-1.5, m + 0.3), cell, title or f"TV layout {layout_tv}")
    _tv_block(ax, 0, 0, thr, val, fs)
    _axis_labels(ax, 0, 0, m, n, fs)
    return _save(drawing, fig, path)


def draw_mma(mma, path=None, title=None):
    """A TiledMMA (or an MMA atom) as CuTe's print_latex: C (M x N) bottom right, A (M x K) to its
    left, B above C drawn K x N; each cell labelled with its thread and value."""

    if isinstance(mma, MMAAtom):
        mma = make_tiled_mma(mma)
    if not isinstance(mma, TiledMMA):
        raise TypeError(f"draw_mma expects a TiledMMA or an MMAAtom, got {type(mma).__name__}")
    path = _check_path(path)
    mt, nt, kt = (int(s) for s in mma.tile_shape)
    c_thr, c_val = tv_grid(mma.get_layoutC_TV(), (mt, nt))
    a_thr, a_val = tv_grid(mma.get_layoutA_TV(), (mt, kt))
    b_thr, b_val = tv_grid(mma.get_layoutB_TV(), (nt, kt))
    drawing = Drawing({"C_thread": c_thr, "C_value": c_val, "A_thread": a_thr, "A_value": a_val,
                       "B_thread": b_thr, "B_value": b_val})
    rows, cols = kt + 1 + mt, kt + 1 + nt
    cell = _cell_inches(rows + 2, cols + 2, budget=26.0)
    fs = _fontsize(cell) * 0.75
    fig, ax = _grid_axes((-1.5, cols + 0.3), (-1.5, rows + 0.3), cell,
                     title or f"{mma.atom.name}  threads {mma.thr_layout_vmnk}  tile {to_str(mma.tile_shape)}")
    x_c, y_c = kt + 1, kt + 1
    _tv_block(ax, x_c, y_c, c_thr, c_val, fs)                     # C: (m, n)
    _tv_block(ax, 0, y_c, a_thr, a_val, fs)                       # A: (m, k), left of C
    _tv_block(ax, x_c, 0, b_thr, b_val, fs, transpose=True)       # B: (k, n), above C
    _axis_labels(ax, 0, y_c, mt, kt, fs)                          # A: m down, k across
    _axis_labels(ax, x_c, 0, kt, nt, fs)                          # B: k down, n across
    for x, y, w, h in ((x_c, y_c, nt, mt), (0, y_c, kt, mt), (x_c, 0, nt, kt)):
        ax.add_patch(_rect((x, y), w, h, fill=False, linewidth=1.5, zorder=4))
    ax.text(kt / 2, kt / 2, f"A  {mt}x{kt} (M x K), left\nB  {kt}x{nt} (K x N), top\nC  {mt}x{nt} (M x N)",
            ha="center", va="center", fontsize=max(fs * 1.4, 7), linespacing=1.6)
    return _save(drawing, fig, path)


def draw_copy(copy, path=None, title=None):
    """A TiledCopy as CuTe's print_latex: the source TV map left of the destination TV map
    (above it instead when the tile is more than twice as wide as tall)."""

    if not isinstance(copy, TiledCopy):
        raise TypeError(f"draw_copy expects a TiledCopy, got {type(copy).__name__}")
    path = _check_path(path)
    tile = tuple(int(size(t)) for t in copy.tiler_mn)
    m, n = _tile_mn(tile)
    s_thr, s_val = tv_grid(copy.get_layoutS_TV(), (m, n))
    d_thr, d_val = tv_grid(copy.get_layoutD_TV(), (m, n))
    drawing = Drawing({"S_thread": s_thr, "S_value": s_val, "D_thread": d_thr, "D_value": d_val})
    stacked = n > 2 * m
    dx, dy = (0, m + 3) if stacked else (n + 3, 0)          # where the destination tile starts
    cols, rows = n + dx, m + dy
    cell = _cell_inches(rows + 2, cols + 2, budget=26.0)
    fs = _fontsize(cell) * 0.75
    fig, ax = _grid_axes((-1.5, cols + 0.3), (-2.6, rows + 0.3), cell,
                         title or f"{copy.atom.name}<{copy.atom.value_type}>  tiler {to_str(copy.tiler_mn)}")
    caption = dict(ha="center", va="bottom", fontsize=max(fs * 1.3, 7))
    for x, y, thr, val, name in ((0, 0, s_thr, s_val, "source"), (dx, dy, d_thr, d_val, "destination")):
        _tv_block(ax, x, y, thr, val, fs)
        _axis_labels(ax, x, y, m, n, fs)
        ax.text(x + n / 2, y - 1.2, f"{name} (thread, value)", **caption)
    return _save(drawing, fig, path)


# ---------------------------------------------------------------------------------------------
# Tiling of a matrix by local_tile
# ---------------------------------------------------------------------------------------------

def _local_tiles(rows, cols, block_m, block_n):
    """local_tile(identity(rows, cols), (block_m, block_n), (i, j)) for every tile: first coordinate
    and how many of its rows/cols are inside (C++ elem_less predicate) -- the ragged-tile logic."""
    ident = make_identity_tensor((rows, cols))
    tiles = []
    nm, nn = -(-rows // block_m), -(-cols // block_n)
    for i in range(nm):
        for j in range(nn):
            tile = local_tile(ident, (Int(block_m), Int(block_n)), (i, j))
            inside = elem_less_mask(tile, (rows, cols)).reshape(block_n, block_m).T
            origin = tuple(int(c) for c in tile.offset)
            tiles.append((i, j, origin, int(inside.any(axis=1).sum()), int(inside.any(axis=0).sum())))
    return tiles


def draw_tiling(shape_mn, tile_mn, path=None, title=None, names=("row", "col")):
    """How ``local_tile`` cuts an (M, N) matrix into (bM, bN) tiles, the ragged last tile shown
    with its predicated-off part (rows >= M) hatched. E.g. ``draw_tiling((2000, 64), (128, 64))``."""
    path = _check_path(path)
    rows, cols = (int(s) for s in shape_mn)
    bm, bn = (int(s) for s in tile_mn)
    if min(rows, cols, bm, bn) <= 0:
        raise ValueError(f"draw_tiling needs positive sizes, got shape {shape_mn} tile {tile_mn}")
    tiles = _local_tiles(rows, cols, bm, bn)
    nm, nn = -(-rows // bm), -(-cols // bn)
    tile_id = np.array([i * nn + j for i, j, *_rest in tiles]).reshape(nm, nn)
    valid_rows = np.array([vr for *_head, vr, _vc in tiles]).reshape(nm, nn)
    valid_cols = np.array([vc for *_head, vc in tiles]).reshape(nm, nn)
    drawing = Drawing({"tile": tile_id, "valid_rows": valid_rows, "valid_cols": valid_cols,
                       "origin_row": np.array([o[0] for _i, _j, o, *_r in tiles]).reshape(nm, nn),
                       "origin_col": np.array([o[1] for _i, _j, o, *_r in tiles]).reshape(nm, nn)})
    height = float(np.clip(nm * 0.45, 4, 16))
    width = float(np.clip(height * (nn * bn) / (nm * bm) * 3, 4, 14))
    fig = _new_figure(width + 3.5, height + 1)
    ax = fig.add_axes((0.08, 0.04, 0.6, 0.88))
    ax.set_xlim(-0.02 * nn * bn, nn * bn * 1.02)
    ax.set_ylim(nm * bm * 1.01, -0.01 * nm * bm)
    ax.set_xlabel(names[1])
    ax.set_ylabel(names[0])
    for i, j, (r0, c0), vr, vc in tiles:
        face = _pastel((i * nn + j) * 0.618033988749895, sat=0.35)
        ax.add_patch(_rect((c0, r0), bn, bm, facecolor=face, edgecolor="black", linewidth=0.8))
        if vr < bm or vc < bn:
            ax.add_patch(_rect((c0, r0 + vr), bn, bm - vr, facecolor="none", edgecolor="crimson",
                                   hatch="///", linewidth=0.0))
            ax.add_patch(_rect((c0 + vc, r0), bn - vc, bm, facecolor="none", edgecolor="crimson",
                                   hatch="///", linewidth=0.0))
        note = f"tile ({i},{j})  {names[0]}s {r0}..{r0 + bm - 1}"
        if vr < bm:
            note += f"\n{vr} valid, {bm - vr} predicated off"
        ax.text(c0 + bn * nn + bn * 0.1 if j == nn - 1 else c0 + bn / 2, r0 + bm / 2, note,
                fontsize=7, va="center", ha="left" if j == nn - 1 else "center",
                color="crimson" if vr < bm else "black")
    ax.axhline(rows, color="crimson", linewidth=1.5)
    ax.text(0, rows, f" {names[0]} = {rows}", color="crimson", va="bottom", fontsize=8)
    ax.set_title(title or f"local_tile of a ({rows}, {cols}) matrix into ({bm}, {bn}) tiles: "
                 f"{nm} x {nn} tiles, ceil_div({rows}, {bm}) = {nm}", fontsize=9)
    return _save(drawing, fig, path, tight=True)


# ---------------------------------------------------------------------------------------------
# The FlashAttention loop: one Q block, the K/V blocks it walks
# ---------------------------------------------------------------------------------------------

def kv_block_range(seqlen_q, seqlen_k, block_m, block_n, m_block, causal=False, causal_top_left=False):
    """(n_block_max, n_block_unmasked) as csrc/common/block_range.h computes them: blocks
    [0, n_block_max) are visited (last first); [n_block_unmasked, n_block_max) need a mask."""
    n_block_max = -(-seqlen_k // block_n)
    n_block_unmasked = seqlen_k // block_n
    if causal:
        offset = 0 if causal_top_left else seqlen_k - seqlen_q
        first_row = m_block * block_m
        last_row = min((m_block + 1) * block_m, seqlen_q) - 1
        last_end, all_end = last_row + offset + 1, first_row + offset + 1
        n_block_max = min(n_block_max, 0 if last_end <= 0 else -(-last_end // block_n))
        n_block_unmasked = min(n_block_unmasked, 0 if all_end <= 0 else all_end // block_n)
    return n_block_max, min(n_block_unmasked, n_block_max)


def _clip_halfplane(polygon, offset):
    """The part of a polygon (x = key, y = query) with x - y > offset (Sutherland-Hodgman, one edge)."""
    out = []
    for (x0, y0), (x1, y1) in zip(polygon, polygon[1:] + polygon[:1]):
        d0, d1 = x0 - y0 - offset, x1 - y1 - offset
        if d0 > 0:
            out.append((x0, y0))
        if (d0 > 0) != (d1 > 0):
            t = d0 / (d0 - d1)
            out.append((x0 + t * (x1 - x0), y0 + t * (y1 - y0)))
    return out


def draw_flash_loop(seqlen_q, seqlen_k, head_dim, block_m, block_n, m_block=0, causal=False, path=None,
                    title=None):
    """Q block ``m_block`` stays in registers while the kernel walks K/V blocks from the last visited
    one down to block 0 (as csrc/sm80/kernel.h does); S = Q K^T shows each block's iteration number,
    masked blocks hatched and the causal / ragged boundary drawn."""
    path = _check_path(path)
    for name, v in (("seqlen_q", seqlen_q), ("seqlen_k", seqlen_k), ("head_dim", head_dim),
                    ("block_m", block_m), ("block_n", block_n)):
        if int(v) <= 0:
            raise ValueError(f"draw_flash_loop: {name} must be positive, got {v}")
    n_m = -(-seqlen_q // block_m)
    if not 0 <= m_block < n_m:
        raise ValueError(f"m_block must be in [0, {n_m}) for seqlen_q={seqlen_q}, block_m={block_m}, got {m_block}")
    n_n = -(-seqlen_k // block_n)
    n_max, n_unmasked = kv_block_range(seqlen_q, seqlen_k, block_m, block_n, m_block, causal)
    order = np.full(n_n, -1)
    order[:n_max] = np.arange(n_max)[::-1]           # iteration at which block n is visited
    drawing = Drawing({"iteration": order, "masked": (np.arange(n_n) >= n_unmasked) & (order >= 0)})

    fig = _new_figure(13, 7.5)
    gs = fig.add_gridspec(2, 3, width_ratios=[1.2, 4, 1.2], height_ratios=[1.2, 4], wspace=0.25, hspace=0.25)
    ax_k = fig.add_subplot(gs[0, 1])
    ax_q = fig.add_subplot(gs[1, 0])
    ax_s = fig.add_subplot(gs[1, 1])
    ax_v = fig.add_subplot(gs[1, 2])
    r0 = m_block * block_m
    rows_here = min(block_m, seqlen_q - r0)

    fs = float(np.clip(300 / max(n_n, 1), 4, 8))

    def face(it):
        return "0.90" if it < 0 else _pastel(0.55 - 0.5 * it / max(n_max - 1, 1), sat=0.5)

    def kv_blocks(ax, horizontal):
        for b in range(n_n):
            lo, span = b * block_n, min(block_n, seqlen_k - b * block_n)
            xy, w, h = ((lo, 0), span, head_dim) if horizontal else ((0, lo), head_dim, span)
            ax.add_patch(_rect(xy, w, h, facecolor=face(order[b]), edgecolor="black", linewidth=0.5))
            if order[b] >= 0:
                ax.text(xy[0] + w / 2, xy[1] + h / 2, str(order[b]), ha="center", va="center", fontsize=fs)

    # Q: the fixed block highlighted
    ax_q.add_patch(_rect((0, 0), head_dim, seqlen_q, facecolor="0.95", edgecolor="black"))
    ax_q.add_patch(_rect((0, r0), head_dim, rows_here, facecolor=_pastel(0.0, 0.5), edgecolor="crimson",
                             linewidth=1.5))
    ax_q.set_xlim(0, head_dim)
    ax_q.set_ylim(seqlen_q, 0)
    ax_q.set_title(f"Q block {m_block}\n(rows {r0}..{r0 + rows_here - 1})", fontsize=8)
    ax_q.set_ylabel("query position")
    # K^T above S and V to its right: blocks numbered by the iteration that loads them
    kv_blocks(ax_k, True)
    ax_k.set_xlim(0, seqlen_k)
    ax_k.set_ylim(head_dim, 0)
    ax_k.set_title(f"K^T: {n_max} of {n_n} blocks visited; numbers = iteration (the kernel starts at the "
                   f"last block, n_block = {n_max - 1}); grey: never loaded", fontsize=8)
    kv_blocks(ax_v, False)
    ax_v.set_xlim(0, head_dim)
    ax_v.set_ylim(seqlen_k, 0)
    ax_v.set_title("V (same blocks as K)", fontsize=8)
    # S = Q K^T: the whole score matrix faint, this Q block's row of tiles coloured
    ax_s.add_patch(_rect((0, 0), seqlen_k, seqlen_q, facecolor="0.97", edgecolor="black"))
    if causal:
        offset = seqlen_k - seqlen_q
        masked = _clip_halfplane([(0, 0), (seqlen_k, 0), (seqlen_k, seqlen_q), (0, seqlen_q)], offset)
        if masked:   # key j > query i + offset: right of the diagonal
            ax_s.fill(*zip(*masked), color="0.80", zorder=1.5)
        ax_s.plot([max(0, offset), min(seqlen_k, seqlen_q + offset)], [max(0, -offset), min(seqlen_q, seqlen_k - offset)],
                  color="crimson", linewidth=1.2)
        ax_s.text(seqlen_k * 0.98, seqlen_q * 0.04, "causal: key j visible to query i iff j <= i + (sk - sq); grey: masked",
                  color="crimson", fontsize=7, ha="right")
    for b in range(n_n):
        lo, span = b * block_n, min(block_n, seqlen_k - b * block_n)
        it = order[b]
        ax_s.add_patch(_rect((lo, r0), span, rows_here, facecolor=face(it), edgecolor="black", linewidth=0.5,
                                 hatch="xxx" if drawing.grids["masked"][b] else None, zorder=2))
        if it >= 0:
            ax_s.text(lo + span / 2, r0 + rows_here / 2, str(it), ha="center", va="center", fontsize=fs, zorder=3)
    ax_s.set_xlim(0, seqlen_k)
    ax_s.set_ylim(seqlen_q, 0)
    ax_s.set_xlabel("key position")
    ax_s.set_title("S = Q K^T for this Q block; cross-hatched: blocks that need a mask (causal diagonal, ragged end)",
                   fontsize=8)
    fig.suptitle(title or f"FlashAttention loop: seqlen_q={seqlen_q}, seqlen_k={seqlen_k}, d={head_dim}, "
                 f"blocks {block_m}x{block_n}{', causal' if causal else ''}", fontsize=10)
    return _save(drawing, fig, path, tight=True)


# ---------------------------------------------------------------------------------------------
# Shared-memory banks
# ---------------------------------------------------------------------------------------------

def draw_bank_map(layout, elem_bytes, path=None, title=None, highlight=None):
    """Each element of a shared-memory layout coloured and labelled by its bank ((offset * bytes / 4) % 32).

    ``highlight``: linear indices (into the layout's domain) one warp instruction touches, outlined.
    """
    path = _check_path(path)
    if int(elem_bytes) <= 0:
        raise ValueError(f"elem_bytes must be positive, got {elem_bytes}")
    grid = layout_grid(layout)
    banks = (grid * int(elem_bytes) // BANK_BYTES) % NUM_BANKS
    drawing = Drawing({"offset": grid, "bank": banks})
    m, n = grid.shape
    cell = _cell_inches(m + 2, n + 2)
    fs = _fontsize(cell)
    fig, ax = _grid_axes((-1.5, n + 0.3), (-1.3, m + 0.3), cell,
                     title or f"banks of {to_str(layout)}, {int(elem_bytes)}-byte elements")
    _paint(ax, 0, 0, _colors(banks, bank_color), [[str(b) for b in row] for row in banks], fs)
    _axis_labels(ax, 0, 0, m, n, fs)
    if highlight is not None:
        idx = np.asarray(highlight, dtype=np.int64).reshape(-1)
        if idx.size and (idx.min() < 0 or idx.max() >= m * n):
            raise ValueError(f"highlight indices must be in [0, {m * n})")
        for k in idx:
            i, j = int(k) % m, int(k) // m
            ax.add_patch(_rect((j, i), 1, 1, fill=False, edgecolor="black", linewidth=2.0, zorder=5))
        drawing.grids["highlight"] = idx
    return _save(drawing, fig, path)
