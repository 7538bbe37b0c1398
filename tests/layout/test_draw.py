"""Pictures: valid PNG/SVG files, and the data they show (offsets, threads, banks, tiles) is right."""

import xml.etree.ElementTree as ET

import numpy as np
import pytest

from flashcute.layout import (
    Int, Layout, LayoutRight, copy_atom, draw_bank_map, draw_copy, draw_flash_loop, draw_layout, draw_memory,
    draw_mma, draw_tiling, draw_tv, make_tiled_copy_A, make_tiled_mma, mma_atom, parse_layout, sm80_swizzle_atom,
)
from flashcute.layout.draw import kv_block_range, layout_grid, tv_grid


def _valid_png(path):
    data = path.read_bytes()
    return data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000


def _valid_svg(path):
    root = ET.parse(path).getroot()
    return root.tag.endswith("svg") and len(list(root.iter())) > 10


def test_layout_picture_and_offsets(tmp_path):
    layout = parse_layout("(4,(2,4)):(2,(1,8))")
    d = draw_layout(layout, tmp_path / "l.png")
    assert _valid_png(d.path)
    grid = d.grids["offset"]
    assert grid.shape == (4, 8)
    assert [[layout(i, j) for j in range(8)] for i in range(4)] == grid.tolist()
    assert _valid_svg(draw_layout(layout, tmp_path / "l.svg", color="bw8").path)


def test_rank1_is_a_column_and_swizzles_draw():
    assert layout_grid(Layout(Int(8), Int(2))).tolist() == [[0], [2], [4], [6], [8], [10], [12], [14]]
    sw = sm80_swizzle_atom(64, 16, 8)
    grid = layout_grid(sw)
    assert grid.shape == (8, 64) and sorted(grid.reshape(-1).tolist()) == list(range(512))


def test_memory_view_maps_offsets_back_to_coordinates(tmp_path):
    layout = Layout((Int(4), Int(8)))                       # column-major
    d = draw_memory(layout, tmp_path / "m.png")
    assert _valid_png(d.path)
    assert d.grids["memory_row"][:6].tolist() == [0, 1, 2, 3, 0, 1]
    assert d.grids["memory_col"][:6].tolist() == [0, 0, 0, 0, 1, 1]
    holes = draw_memory(Layout((Int(2), Int(2)), (Int(1), Int(4)))).grids   # offsets 0,1,4,5
    assert holes["memory_hits"].tolist() == [1, 1, 0, 0, 1, 1]
    alias = draw_memory(Layout((Int(2), Int(2)), (Int(0), Int(1)))).grids   # broadcast rows
    assert alias["memory_hits"].tolist() == [2, 2]


def test_mma_picture_threads_follow_ptx(tmp_path):
    d = draw_mma(mma_atom("SM80_16x8x16_F32BF16BF16F32_TN"), tmp_path / "mma.png")
    assert _valid_png(d.path)
    c_thr, c_val = d.grids["C_thread"], d.grids["C_value"]
    # mma.sync m16n8: thread t holds C(t/4, 2*(t%4)+{0,1}) and C(t/4+8, ...)
    for t in range(32):
        assert c_thr[t // 4, 2 * (t % 4)] == t and c_val[t // 4, 2 * (t % 4)] == 0
        assert c_thr[t // 4 + 8, 2 * (t % 4) + 1] == t and c_val[t // 4 + 8, 2 * (t % 4) + 1] == 3
    assert d.grids["A_thread"].shape == (16, 16) and d.grids["B_thread"].shape == (8, 16)
    assert (d.grids["A_thread"] >= 0).all() and (d.grids["B_thread"] >= 0).all()


def test_tv_grid_keeps_the_first_owner():
    # two threads own every element (stride 0 in the thread mode): thread 0 labels all cells
    thr, val = tv_grid(Layout((Int(2), Int(4)), (Int(0), Int(1))), (4, 1))
    assert thr.reshape(-1).tolist() == [0, 0, 0, 0] and val.reshape(-1).tolist() == [0, 1, 2, 3]
    thr, _val = tv_grid(Layout((Int(2), Int(2)), (Int(1), Int(2))), (2, 4))
    assert (thr[:, 2:] == -1).all()                           # cells nobody owns stay empty
    with pytest.raises(ValueError):
        tv_grid(Layout((Int(2), Int(4))), (2, 2))             # reaches outside the tile


def test_copy_picture(tmp_path):
    mma = make_tiled_mma(mma_atom("SM80_16x8x16_F32BF16BF16F32_TN"))
    d = draw_copy(make_tiled_copy_A(copy_atom("SM75_U32x2_LDSM_N", "half_t"), mma), tmp_path / "c.svg")
    assert _valid_svg(d.path)
    # ldmatrix source: thread r (< 16) names row r of the 16x16 A tile
    s_thr = d.grids["S_thread"]
    assert [s_thr[r, 0] for r in range(16)] == list(range(16))
    assert set(np.unique(d.grids["D_thread"]).tolist()) == set(range(32))


def test_tv_picture(tmp_path):
    gmma = make_tiled_mma(mma_atom("SM90_64x8x16_F32F16F16_SS"))
    d = draw_tv(gmma.get_layoutC_TV(), (64, 8), tmp_path / "tv.png")
    assert _valid_png(d.path)
    assert d.grids["thread"][16, 0] == 32                     # warp 1 starts at row 16


def test_tiling_of_seqlen_2000(tmp_path):
    d = draw_tiling((2000, 64), (128, 64), tmp_path / "t.png")
    assert _valid_png(d.path)
    assert d.grids["tile"].shape == (16, 1)
    assert d.grids["valid_rows"][:, 0].tolist() == [128] * 15 + [80]
    assert d.grids["origin_row"][:, 0].tolist() == [128 * i for i in range(16)]
    assert _valid_svg(draw_tiling((100, 70), (32, 32), tmp_path / "t.svg").path)
    ragged = draw_tiling((100, 70), (32, 32)).grids
    assert ragged["valid_rows"][-1].tolist() == [4, 4, 4] and ragged["valid_cols"][:, -1].tolist() == [6] * 4


def test_flash_loop_follows_the_kernel_order(tmp_path):
    d = draw_flash_loop(2000, 2000, 64, 128, 64, m_block=5, causal=True, path=tmp_path / "f.png")
    assert _valid_png(d.path)
    n_max, n_unmasked = kv_block_range(2000, 2000, 128, 64, 5, causal=True)
    assert (n_max, n_unmasked) == (12, 10)                     # rows 640..767 see keys < 768
    it = d.grids["iteration"]
    assert it[:12].tolist() == list(range(11, -1, -1)) and (it[12:] == -1).all()
    assert d.grids["masked"].tolist() == [False] * 10 + [True] * 2 + [False] * 20
    full = draw_flash_loop(1000, 1000, 64, 128, 128, m_block=0).grids
    assert full["masked"].tolist() == [False] * 7 + [True]      # only the ragged last key block


def test_bank_map(tmp_path):
    layout = Layout((Int(8), Int(64)), LayoutRight)
    d = draw_bank_map(layout, 2, tmp_path / "b.png", highlight=range(8))
    assert _valid_png(d.path)
    assert d.grids["bank"][:, 0].tolist() == [0] * 8            # every row starts in bank 0: 8-way column
    assert d.grids["bank"][0, :4].tolist() == [0, 0, 1, 1]
    sw = draw_bank_map(sm80_swizzle_atom(64, 16, 8), 2).grids["bank"]
    assert sorted(sw[:, 0].tolist()) == [0, 4, 8, 12, 16, 20, 24, 28]


@pytest.mark.parametrize("call", [
    lambda p: draw_layout(Layout((Int(2), Int(2), Int(2))), p / "x.png"),     # rank 3
    lambda p: draw_layout(Layout((Int(2), Int(2))), p / "x.jpg"),             # unsupported format
    lambda p: draw_tiling((0, 64), (128, 64), p / "x.png"),
    lambda p: draw_flash_loop(100, 100, 64, 64, 64, m_block=5, path=p / "x.png"),
    lambda p: draw_bank_map(Layout((Int(4), Int(4))), 0, p / "x.png"),
    lambda p: draw_bank_map(Layout((Int(4), Int(4))), 2, p / "x.png", highlight=[16]),
])
def test_bad_input_raises_value_error(tmp_path, call):
    with pytest.raises(ValueError):
        call(tmp_path)
    assert not list(tmp_path.iterdir())


def test_non_layouts_are_type_errors():
    with pytest.raises(TypeError):
        draw_layout("(4,8):(8,1)")
    with pytest.raises(TypeError):
        draw_mma("SM80_16x8x16_F32BF16BF16F32_TN")
