"""Command line: print and draw layouts, MMA/copy thread-value maps, tilings and bank reports.

    python -m flashcute.layout "(4,(2,4)):(2,(1,8))" -o layout.png          # a layout (C++ print form)
    python -m flashcute.layout "(4,8):(8,1)" --memory -o memory.svg          # logical -> linear memory
    python -m flashcute.layout mma SM80_16x8x16_F32BF16BF16F32_TN --threads 4,1,1 --permutation 64,16,16 -o mma.png
    python -m flashcute.layout copy SM75_U32x4_LDSM_N --type half_t --mma SM80_16x8x16_F32BF16BF16F32_TN \\
        --threads 4,1,1 --permutation 64,16,16 --operand A -o ldmatrix.png
    python -m flashcute.layout banks "Sw<3,3,3> o _0 o (_64,_64):(_64,_1)" --bytes 2 \\
        --copy SM75_U32x4_LDSM_N --mma SM80_16x8x16_F32BF16BF16F32_TN --threads 4,1,1 --permutation 64,16,16 --operand A
    python -m flashcute.layout banks "(_32,_8):(_9,_1)" --bytes 4 --bits 32 --order col -o banks.png
    python -m flashcute.layout tiling 2000 64 --tile 128 64 -o tiling.png
    python -m flashcute.layout flash --seqlen-q 2000 --seqlen-k 2000 --head-dim 64 --block 128 64 --causal -o loop.png

Without ``-o`` only the text is printed; ``--svg`` also writes an SVG next to a PNG output.
Malformed input ends with a one-line error and exit status 2.
"""

import argparse
import sys
from pathlib import Path

from . import (
    Int, Layout, copy_atom, copy_report, draw_bank_map, draw_copy, draw_flash_loop, draw_layout, draw_memory,
    draw_mma, draw_tiling, layout_table, make_tiled_copy, make_tiled_copy_A, make_tiled_copy_B,
    make_tiled_copy_C, make_tiled_mma, mma_atom, parse_layout, rank, traversal_report,
)

COMMANDS = {
    "mma": "Print and draw a TiledMMA: its thread layout and the TV layouts of A, B and C.",
    "copy": "Print and draw a TiledCopy: make_tiled_copy(--thr, --val) or make_tiled_copy_A/B/C of an --mma.",
    "banks": "Shared-memory bank conflicts of a layout: a warp sweep, or a TiledCopy's instructions (--copy).",
    "tiling": "How a (rows, cols) tensor divides into tiles, ragged edge included.",
    "flash": "FlashAttention's loop of one Q block over the K/V blocks, causal masking included.",
}


class CliError(ValueError):
    pass


def _ints(text, what, count=None):
    try:   # "4,1,1" or "64x16x16"
        values = [int(v) for v in text.replace("x", ",").split(",")]
    except ValueError:
        raise CliError(f"{what}: expected comma-separated integers, got {text!r}") from None
    if count is not None and len(values) != count or not values or any(v <= 0 for v in values):
        raise CliError(f"{what}: expected {count or 'some'} positive integers, got {text!r}")
    return values


def _layout(text, what="layout"):
    try:
        return parse_layout(text)
    except (ValueError, TypeError) as e:
        raise CliError(f"{what}: cannot parse {text!r} as a CuTe layout ({e})") from None


def _thread_layout(text):
    """'4,1,1' (static column-major) or a layout such as '(_2,_2,_1):(_2,_1,_0)'."""
    if ":" in text or "(" in text:
        return _layout(text, "--threads")
    return Layout(tuple(Int(v) for v in _ints(text, "--threads")))


def _permutation(text):
    if text is None:
        return None
    return tuple(Int(v) for v in _ints(text, "--permutation"))


def _add_output(p):
    p.add_argument("-o", "--output", help="picture to write (.png or .svg)")
    p.add_argument("--svg", action="store_true", help="with a .png output, also write the .svg")


def _add_mma_tiling(p):
    p.add_argument("--threads", default="1,1,1",
                   help="layout of the atoms over (M,N,K): '4,1,1' (4 atoms along M) or a layout (default: 1,1,1)")
    p.add_argument("--permutation", metavar="M,N,K",
                   help="the TiledMMA's tile sizes, e.g. 64,16,16 (default: the atom's size times --threads)")


def _add_mma(p, required):
    p.add_argument("--mma", required=required, metavar="ATOM", help="MMA atom, e.g. SM80_16x8x16_F32BF16BF16F32_TN")
    _add_mma_tiling(p)


def _outputs(args):
    if not args.output:
        return []
    out = Path(args.output)
    if out.suffix.lower() not in (".png", ".svg"):
        raise CliError(f"-o: the picture must end in .png or .svg, got {args.output!r}")
    return [out] + ([out.with_suffix(".svg")] if args.svg and out.suffix.lower() == ".png" else [])


def _draw(args, fn, *fn_args, **kwargs):
    for path in _outputs(args):
        fn(*fn_args, path=path, **kwargs)
        print(f"wrote {path}")


def _tiled_mma(args):
    return make_tiled_mma(mma_atom(args.mma), _thread_layout(args.threads), _permutation(args.permutation))


def _tiled_copy(args):
    atom = copy_atom(args.copy, args.type)
    if args.thr:
        return make_tiled_copy(atom, _layout(args.thr, "--thr"), _layout(args.val, "--val") if args.val else None)
    if not args.mma:
        raise CliError("a copy needs either --thr [--val] or --mma ... --operand A|B|C")
    maker = {"A": make_tiled_copy_A, "B": make_tiled_copy_B, "C": make_tiled_copy_C}[args.operand]
    return maker(atom, _tiled_mma(args))


def _add_copy(p, required):
    p.add_argument("--type", default="half_t", help="value type of the copy atom (half_t, bfloat16_t, float, ...)")
    p.add_argument("--thr", help="make_tiled_copy thread layout, e.g. '(_16,_8):(_8,_1)'")
    p.add_argument("--val", help="make_tiled_copy value layout, e.g. '(_1,_8):(_0,_1)'")
    p.add_argument("--operand", choices="ABC", default="A", help="with --mma: make_tiled_copy_A/B/C")
    _add_mma(p, required=False)


def cmd_layout(args):
    layout = _layout(args.layout)
    if int(rank(layout)) == 2:
        print(layout_table(layout), end="")   # C++'s print_layout: the layout, then its table
    else:
        print(layout)
    if args.memory:
        _draw(args, draw_memory, layout)
    else:
        _draw(args, draw_layout, layout, color=args.color)


def cmd_mma(args):
    mma = _tiled_mma(args)
    print(mma)
    for name, tv in (("LayoutA_TV", mma.get_layoutA_TV()), ("LayoutB_TV", mma.get_layoutB_TV()),
                     ("LayoutC_TV", mma.get_layoutC_TV())):
        print(f"{name}: {tv}")
    _draw(args, draw_mma, mma)


def cmd_copy(args):
    copy = _tiled_copy(args)
    print(copy)
    print(f"LayoutS_TV: {copy.get_layoutS_TV()}")
    print(f"LayoutD_TV: {copy.get_layoutD_TV()}")
    _draw(args, draw_copy, copy)


def cmd_banks(args):
    smem = _layout(args.layout, "shared-memory layout")
    if args.copy:
        report = copy_report(_tiled_copy(args), smem, args.side)
    else:
        report = traversal_report(smem, args.bytes, args.bits, args.order)
    print(f"shared memory {smem}, {args.bytes}-byte elements")
    print(report)
    first = report.addresses[0]
    offsets = smem.offsets() * args.bytes
    # outline the elements the first instruction starts at
    index = {int(o): i for i, o in enumerate(offsets)}
    highlight = sorted(index[int(a)] for a in first if a >= 0 and int(a) in index)
    wave, ideal, _extra = report.total()
    title = (f"banks of {smem} ({args.bytes}-byte elements); outlined: instruction 0\n"
             f"{report.access}: {wave} wavefronts for {ideal} ideal, worst {int(report.degree.max())}-way")
    _draw(args, draw_bank_map, smem, args.bytes, highlight=highlight, title=title)


def cmd_tiling(args):
    tm, tn = args.tile
    print(f"({args.rows}, {args.cols}) in ({tm}, {tn}) tiles: {-(-args.rows // tm)} x {-(-args.cols // tn)}")
    _draw(args, draw_tiling, (args.rows, args.cols), (tm, tn))


def cmd_flash(args):
    bm, bn = args.block
    outputs = _outputs(args)
    for i, path in enumerate(outputs or [None]):
        drawing = draw_flash_loop(args.seqlen_q, args.seqlen_k, args.head_dim, bm, bn, m_block=args.m_block,
                                  causal=args.causal, path=path)
        if i == 0:
            grids = drawing.grids
            visited = int((grids["iteration"] >= 0).sum())
            print(f"Q block {args.m_block} visits {visited} of {len(grids['iteration'])} K/V blocks "
                  f"(from block {visited - 1} down to 0), {int(grids['masked'].sum())} of them masked")
        if path is not None:
            print(f"wrote {path}")


def _parser(command):
    if command is None:
        p = argparse.ArgumentParser(prog="python -m flashcute.layout",
                                    description="Print and draw a CuTe layout. Other commands: " + ", ".join(COMMANDS),
                                    epilog=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
        p.add_argument("layout", help="a layout as C++ prints it, e.g. '(4,(2,4)):(2,(1,8))'")
        p.add_argument("--memory", action="store_true", help="draw the logical-to-linear memory view")
        p.add_argument("--color", choices=("offset", "bw8"), default="offset",
                       help="colour cells by offset (blue to red), or grey by offset mod 8 as CuTe's TikzColor_BWx8 "
                            "(default: offset)")
        _add_output(p)
        p.set_defaults(run=cmd_layout)
        return p
    p = argparse.ArgumentParser(prog=f"python -m flashcute.layout {command}", description=COMMANDS[command])
    if command == "mma":
        p.add_argument("mma", metavar="ATOM", help="MMA atom, e.g. SM80_16x8x16_F32BF16BF16F32_TN")
        _add_mma_tiling(p)
        p.set_defaults(run=cmd_mma)
    elif command == "copy":
        p.add_argument("copy", metavar="ATOM", help="copy operation, e.g. SM75_U32x4_LDSM_N")
        _add_copy(p, required=False)
        p.set_defaults(run=cmd_copy)
    elif command == "banks":
        p.add_argument("layout", help="shared-memory layout, e.g. 'Sw<3,3,3> o _0 o (_64,_64):(_64,_1)'")
        p.add_argument("--bytes", type=int, required=True, help="element size in bytes")
        p.add_argument("--bits", type=int, default=32, choices=(32, 64, 128), help="access width (sweep mode)")
        p.add_argument("--order", choices=("col", "row"), default="col", help="sweep order (sweep mode)")
        p.add_argument("--copy", metavar="ATOM", help="report a TiledCopy's instructions instead of a sweep")
        p.add_argument("--side", choices="SD", help="which side of the copy is shared memory")
        _add_copy(p, required=False)
        p.set_defaults(run=cmd_banks)
    elif command == "tiling":
        p.add_argument("rows", type=int, help="rows of the tensor, e.g. the sequence length")
        p.add_argument("cols", type=int, help="columns of the tensor, e.g. the head dimension")
        p.add_argument("--tile", type=int, nargs=2, required=True, metavar=("BM", "BN"),
                       help="tile extents (local_tile's tiler); the last tiles may be ragged")
        p.set_defaults(run=cmd_tiling)
    elif command == "flash":
        p.add_argument("--seqlen-q", type=int, required=True, help="query sequence length")
        p.add_argument("--seqlen-k", type=int, required=True, help="key/value sequence length")
        p.add_argument("--head-dim", type=int, default=64, help="head dimension (default: 64)")
        p.add_argument("--block", type=int, nargs=2, default=(128, 64), metavar=("BM", "BN"),
                       help="rows of a Q block and of a K/V block (default: 128 64)")
        p.add_argument("--m-block", type=int, default=0, help="which Q block's loop to draw (default: 0)")
        p.add_argument("--causal", action="store_true", help="causal masking (bottom-right aligned)")
        p.set_defaults(run=cmd_flash)
    _add_output(p)
    return p


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv[0] if argv and argv[0] in COMMANDS else None
    args = _parser(command).parse_args(argv[1:] if command else argv)
    try:
        _outputs(args)   # a bad output path fails before any work
        args.run(args)
    except (ValueError, TypeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
