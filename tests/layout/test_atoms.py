"""MMA and copy atoms: coverage properties of their TV layouts and clear errors.

(Their printed layouts are compared with C++ CuTe in test_tiled_oracle.py.)
"""

import numpy as np
import pytest

from flashcute.layout import Int, Layout, cosize, size
from flashcute.layout.atoms import copy_atom, copy_op_names, mma_atom, mma_atom_names


def _covers_once(layout_tv, n):
    """Every index of an n-element tile is reached by exactly one (thread, value)."""
    idx = np.sort(layout_tv.offsets())
    return idx.size == n and np.array_equal(idx, np.arange(n))


@pytest.mark.parametrize("name", mma_atom_names())
def test_mma_atom_layouts_cover_their_tiles(name):
    atom = mma_atom(name)
    m, n, k = (int(s) for s in atom.shape_mnk)
    assert int(size(atom.thr_id)) == int(size(atom.layout_c_tv, 0))
    assert _covers_once(atom.layout_c_tv, m * n)
    for tv, rows, from_smem in ((atom.layout_a_tv, m, atom.a_from_smem), (atom.layout_b_tv, n, atom.b_from_smem)):
        if from_smem:
            # a descriptor operand: every thread of the warpgroup names the whole tile
            assert int(tv.stride[0]) == 0 and _covers_once(Layout(tv.shape[1], tv.stride[1]), rows * k)
        else:
            assert _covers_once(tv, rows * k)


def test_sm80_16x8x16_thread0_holds_rows_0_and_8():
    atom = mma_atom("SM80_16x8x16_F32BF16BF16F32_TN")
    # thread 0 of mma.sync.m16n8k16 holds A(0,0..1), A(8,0..1), A(0,8..9), A(8,8..9) and C(0,0..1), C(8,0..1)
    a = [atom.layout_a_tv(0, v) for v in range(8)]
    assert [(i % 16, i // 16) for i in a] == [(0, 0), (0, 1), (8, 0), (8, 1), (0, 8), (0, 9), (8, 8), (8, 9)]
    c = [atom.layout_c_tv(0, v) for v in range(4)]
    assert [(i % 16, i // 16) for i in c] == [(0, 0), (0, 1), (8, 0), (8, 1)]


def test_gmma_names_with_template_arguments_and_every_n():
    atom = mma_atom("SM90_64x24x16_F32BF16BF16_RS<GMMA::Major::K,GMMA::Major::K>")
    assert atom.name == "SM90_64x24x16_F32BF16BF16_RS" and int(atom.shape_mnk[1]) == 24
    assert not atom.a_from_smem and atom.b_from_smem
    assert str(atom.layout_c_tv) == "((_4,_8,_4),(_2,_2,_3)):((_128,_1,_16),(_64,_8,_512))"


@pytest.mark.parametrize("bad", ["SM80_16x8x32_F32BF16BF16F32_TN", "SM90_64x12x16_F32F16F16_SS",
                                 "SM90_64x264x16_F32F16F16_SS", "", "mma"])
def test_unknown_mma_atoms_are_rejected(bad):
    with pytest.raises(ValueError):
        mma_atom(bad)


def test_mma_atom_needs_a_name():
    with pytest.raises(TypeError):
        mma_atom(16)


@pytest.mark.parametrize("op", [o for o in copy_op_names() if "<" not in o])
def test_copy_atoms_recast_to_16_bit_values(op):
    atom = copy_atom(op, "half_t")
    for lay in (atom.val_layout_src, atom.val_layout_dst, atom.val_layout_ref):
        assert int(size(lay, 0)) == int(size(atom.thr_id))
    # source and destination move the same values (ldmatrix.x1/x2 sources repeat rows: compare cosize)
    assert int(cosize(atom.val_layout_src)) == int(cosize(atom.val_layout_dst))


def test_ldmatrix_x4_source_rows_and_destination_registers():
    atom = copy_atom("SM75_U32x4_LDSM_N", "half_t")
    assert str(atom.val_layout_src) == "(_32,_8):(_8,_1)"          # each thread names one 16-byte row
    assert str(atom.val_layout_dst) == "(_32,(_2,_4)):(_2,(_1,_64))"
    assert atom.num_val_src == atom.num_val_dst == 8


def test_single_thread_copies_move_their_width():
    assert copy_atom("SM80_CP_ASYNC_CACHEGLOBAL<uint128_t>", "bfloat16_t").num_val_src == 8
    assert copy_atom("UniversalCopy<uint64_t>", "float").num_val_src == 2
    assert copy_atom("UniversalCopy<uint32_t>", 16).value_type == "uint16_t"
    assert copy_atom("DefaultCopy", "half_t").num_val_src == 1


def test_copy_atom_rejects_what_cpp_rejects(oracle):
    # Copy_Atom<SM75_U32x4_LDSM_N, uint64_t> fails CuTe's static assert; so must the mirror
    ok, _err = oracle.compiles("Copy_Atom<SM75_U32x4_LDSM_N, uint64_t> a; print(a);")
    assert not ok
    with pytest.raises(ValueError, match="not valid|cannot be recast"):
        copy_atom("SM75_U32x4_LDSM_N", "uint64_t")


@pytest.mark.parametrize("op, vt", [("SM75_U32x4_LDSM", "half_t"), ("UniversalCopy<float16>", "half_t"),
                                    ("SM75_U32x4_LDSM_N", "fp16"), ("SM75_U32x4_LDSM_N", 0)])
def test_copy_atom_bad_names_and_types(op, vt):
    with pytest.raises(ValueError):
        copy_atom(op, vt)


def test_atom_text_matches_cpp_print_format():
    text = str(copy_atom("SM90_U32x4_STSM_N", "half_t"))
    assert text.splitlines()[0] == "Copy_Atom" and text.splitlines()[-1] == "  ValueType:    16b"
    text = str(mma_atom("SM80_16x8x8_F32F16F16F32_TN"))
    assert "  Shape_MNK:  (_16,_8,_8)" in text.splitlines()
    assert Int(32) == size(mma_atom("SM80_16x8x8_F32F16F16F32_TN").thr_id)
