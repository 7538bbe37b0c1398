"""The FlashAttention tiling loop: a Q block stays put while the kernel walks the K/V blocks.

The order and the masked blocks follow csrc/common/block_range.h and csrc/sm80/kernel.h: blocks
n_block_max-1 down to 0, masking only the ones holding the causal diagonal or the ragged end.

    python examples/layout/flash_loop.py [OUT_DIR]    (default: a new temporary folder)
"""

from flashcute.layout.draw import draw_flash_loop, kv_block_range

from _output import output_dir  # examples/layout/_output.py: a script's folder is on sys.path


def main(out):
    cases = [
        ("flash_loop", dict(seqlen_q=2000, seqlen_k=2000, head_dim=64, block_m=128, block_n=64, m_block=5)),
        ("flash_loop_causal", dict(seqlen_q=2000, seqlen_k=2000, head_dim=64, block_m=128, block_n=64, m_block=5,
                                   causal=True)),
        ("flash_loop_causal_sq_lt_sk", dict(seqlen_q=1000, seqlen_k=2000, head_dim=128, block_m=128, block_n=128,
                                            m_block=2, causal=True)),
    ]
    for name, kw in cases:
        n_max, n_unmasked = kv_block_range(kw["seqlen_q"], kw["seqlen_k"], kw["block_m"], kw["block_n"],
                                           kw["m_block"], kw.get("causal", False))
        print(f"{name}: Q block {kw['m_block']} visits K/V blocks {n_max - 1}..0, "
              f"{n_max - n_unmasked} of them masked")
        for ext in ("png", "svg"):
            draw_flash_loop(**kw, path=out / f"{name}.{ext}")
    print(f"pictures in {out}")


if __name__ == "__main__":
    main(output_dir(__doc__))
