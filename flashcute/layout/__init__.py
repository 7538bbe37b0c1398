"""flashcute.layout: a pure-Python mirror of C++ CuTe's layout algebra (numpy only, no torch, no GPU).

    >>> from flashcute.layout import Layout, Int, _, composition, print_layout
    >>> L = Layout((Int(4), (2, Int(4))), (Int(2), (Int(1), 8)))
    >>> print(L)                      # exactly what C++ cute::print prints
    (_4,(2,_4)):(_2,(_1,8))

Plain ints are dynamic, ``Int(n)`` is static (printed ``_n``), as in C++.
"""

from .int_tuple import (
    Int, Underscore, _, ScaledBasis, ArithTuple, E, LayoutLeft, LayoutRight,
    is_int, is_tuple, is_static, is_constant, has_underscore,
    product, product_each, product_like, inner_product, ceil_div, round_up, shape_div, elem_scale,
    congruent, weakly_congruent, compatible, evenly_divides, wrap, unwrap,
    prefix_product, suffix_product, crd2idx, idx2crd, crd2crd, compact_major, compact_col_major,
    compact_row_major, compact_order, slice_, dice, make_basis_like, repeat_like, zip2_by,
    lex_less, colex_less, elem_less,
)
from .layout import (
    Layout, make_layout, make_ordered_layout, make_layout_like, make_fragment_like,
    make_identity_layout, is_layout,
    size, cosize, coshape, coprofile, rank, depth, shape, stride, get, mode, layout, take, select,
    flatten, unflatten,
    flatten_layout, unflatten_layout, append, prepend, replace, group, slice_layout, dice_layout,
    slice_and_offset, domain_offset, coalesce, filter_zeros, filter, composition, complement,
    right_inverse, left_inverse, max_common_layout, max_common_vector, nullspace, zip_layout,
    tile_unzip, logical_divide, zipped_divide, tiled_divide, flat_divide, logical_product,
    zipped_product, tiled_product, flat_product, blocked_product, raked_product, tile_to_shape,
    upcast, downcast, recast, max_alignment,
    ComposedLayout, make_composed_layout, get_swizzle_portion, get_nonswizzle_portion,
    as_position_independent_swizzle_layout,
)
from .printing import to_str, print_layout, layout_table, parse_layout, parse_int_tuple
from .swizzle import Swizzle, make_swizzle, MixedBits, SmemPtrFlag
from .tensor import (
    Tensor, make_tensor, make_identity_tensor, make_coord_tensor, local_tile, local_partition,
    inner_partition, outer_partition, elem_less_mask,
)

# --- layout-viz: atoms, TiledMMA/TiledCopy, bank-conflict model, pictures (owned by layout-viz) ---
from .atoms import (
    MMAAtom, CopyAtom, mma_atom, copy_atom, mma_atom_names, copy_op_names, sm80_swizzle_atom, gmma_smem_atom,
)
from .tiled import (
    TiledMMA, ThrMMA, make_tiled_mma, partition_shape_A, partition_shape_B, partition_shape_C,
    partition_fragment_C, TiledCopy, ThrCopy, make_tiled_copy, make_layout_tv, make_tiled_copy_A,
    make_tiled_copy_B, make_tiled_copy_C, make_tiled_copy_C_atom, make_tiled_copy_S, make_tiled_copy_D,
)
from .banks import BankReport, access_report, matrix_report, copy_report, traversal_report, layout_addresses
from .draw import (
    draw_layout, draw_memory, draw_tv, draw_mma, draw_copy, draw_tiling, draw_flash_loop, draw_bank_map,
)
# --- end layout-viz ---
