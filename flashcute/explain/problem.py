"""The problem's numbers: grid, FLOPs, global-memory bytes, and the whole-kernel shared-memory counts Nsight
Compute should measure."""


def ceil_div(a, b):
    return -(-a // b)


def tile_numbers(cfg):
    """Work of one K/V block of one CTA: S = Q.K^T and O += P.V, against the K and V tiles it loads."""
    flops = 2 * (2 * cfg.block_m * cfg.block_n * cfg.head_dim)
    kv_bytes = 2 * cfg.block_n * cfg.head_dim * cfg.element_bytes
    return {"flops": flops, "gmem_bytes": kv_bytes, "arithmetic_intensity": flops / kv_bytes}


def problem_numbers(cfg, batch, heads, seqlen_q, seqlen_k):
    """Grid, FLOPs and global-memory bytes of a non-causal forward (every CTA re-reads all of K and V)."""
    m_blocks, n_blocks = ceil_div(seqlen_q, cfg.block_m), ceil_div(seqlen_k, cfg.block_n)
    ctas = m_blocks * heads * batch
    d, eb = cfg.head_dim, cfg.element_bytes
    useful = 4 * batch * heads * seqlen_q * seqlen_k * d
    executed = 4 * ctas * n_blocks * cfg.block_m * cfg.block_n * d
    # ragged rows are zero-filled by cp.async, so only valid rows cross the memory bus
    gmem = batch * heads * (2 * seqlen_q * d * eb + m_blocks * 2 * seqlen_k * d * eb + 4 * seqlen_q)
    return {
        "batch": batch, "heads": heads, "seqlen_q": seqlen_q, "seqlen_k": seqlen_k,
        "q_tiles": m_blocks, "kv_tiles": n_blocks, "ctas": ctas,
        "q_last_tile_rows": seqlen_q - (m_blocks - 1) * cfg.block_m,
        "kv_last_tile_rows": seqlen_k - (n_blocks - 1) * cfg.block_n,
        "flops_useful": useful, "flops_executed": executed, "gmem_bytes": gmem,
        "arithmetic_intensity": useful / gmem,
    }


# ncu counts each instruction class under its own metrics
_INSTRUCTION_CLASS = {"ldmatrix": "LDSM", "stmatrix": "STSM", "ld.shared": "LDS", "st.shared": "STS",
                      "cp.async": "LDGSTS"}


def predicted_counts(reports, problem):
    """Whole-kernel shared-memory instructions, wavefronts and bank conflicts by SASS class, as Nsight
    Compute counts them, for a non-causal launch (every CTA walks all K/V blocks)."""
    totals = {}
    for r in reports:
        cls = _INSTRUCTION_CLASS[r.instruction.split()[0].split(".x")[0]]
        times = problem["kv_tiles"] if r.access.when == "per K/V block" else 1
        wave, ideal, extra = r.swizzled.total()
        t = totals.setdefault(cls, {"instructions": 0, "wavefronts": 0, "ideal_wavefronts": 0, "conflicts": 0})
        for key, value in (("instructions", r.swizzled.instructions), ("wavefronts", wave),
                           ("ideal_wavefronts", ideal), ("conflicts", extra)):
            t[key] += value * times * problem["ctas"]
    return totals

