"""The split-KV decode kernel's plan for one decoding step (csrc/sm80/decode_kernel.h, decode_launch.h): which of
its two tiles serves the rows of a (batch, K/V head), how those rows pack the query heads of a GQA group, how each
sequence's keys are cut into splits and K/V blocks, how many CTAs an SM holds and with how much shared memory, and
what the grid reads.

The rules are plain functions over integers, a mirror of csrc/sm80/decode_plan.h (tests/test_decode_plan.py asks
csrc/tools/print_decode_plans.cpp the same questions and compares); the tiles are flashcute.kernel_configs' decode
configurations, which tests/test_kernel_layouts.py holds equal to the C++ traits."""

import json
import math
from pathlib import Path

from .. import kernel_configs
from .occupancy import DEVICES, H200

LAYOUTS = ("contiguous", "paged", "paged-tma")
LONG_SHARE_KEYS = 4096  # kLongShareKeys
MAX_SPLITS = 128        # kMaxSplits
FAST_MEMORY_GBPS_PER_SM = 30  # kFastMemoryGBpsPerSm
PAGED_TMA_ROWS = 64     # paged_tma.h kPagedTmaRows: a box's rows, so pages of a multiple of them take TMA


# ---- decode_plan.h -----------------------------------------------------------------------------------------------

def ctas_per_sm(layout, keys_per_cta):
    """decode_ctas_per_sm: split-KV CTAs an SM holds, by how K/V is read and the keys each CTA streams."""
    return 2 if layout == "paged" or keys_per_cta < LONG_SHARE_KEYS else 1


def fast_memory(dram_gbps, num_sms):
    """decode_fast_memory: whether the device's DRAM feeds each SM faster than the H100's plans keep up with."""
    return dram_gbps > FAST_MEMORY_GBPS_PER_SM * num_sms


def residency_layout(layout, key_split_tile, fast):
    """residency_layout: the layout whose residency a kernel plans for (the 64-row tile's TMA pages as cp.async's,
    two per SM, with fast memory)."""
    return "paged" if layout == "paged-tma" and not key_split_tile and fast else layout


def two_stage_launch(layout, key_split_tile, resident, fast):
    """decode_two_stage_launch: the key-split tile with two K/V stages where its CTAs run alone on their SMs with
    fast memory, except over cp.async pages."""
    return layout != "paged" and key_split_tile and resident == 1 and fast


def split_ctas_per_sm(layout, n_blocks, block_n, num_splits):
    """split_kv_ctas_per_sm: with num_splits splits of n_blocks blocks of block_n keys."""
    return ctas_per_sm(layout, (n_blocks + num_splits - 1) // num_splits * block_n)


def kv_stages(traits_smem_bytes, kv_buffer_bytes):
    """decode_kv_stages: two K/V stages where they fit in 80 KiB, else one K and one V buffer."""
    return 2 if traits_smem_bytes + 2 * kv_buffer_bytes <= 80 * 1024 else 1


def kernel_smem_bytes(traits_smem_bytes, kv_buffer_bytes, block_n, layout, two_stages=False):
    """split_kv_kernel_smem_bytes: the mainloop's Q and K/V stages (two where two_stages), a paged cache's row
    offsets, TMA's barriers."""
    stages = 2 if two_stages else kv_stages(traits_smem_bytes, kv_buffer_bytes)
    mainloop = traits_smem_bytes + (stages - 1) * 2 * kv_buffer_bytes
    return mainloop + (0 if layout == "contiguous" else 2 * 2 * block_n * 8) + (16 if layout == "paged-tma" else 0)


def launch_smem_bytes(smem_per_sm, kernel_bytes, resident):
    """split_kv_smem_bytes: what a CTA uses, and more than 1 / (resident + 1) of the SM, so no more fit."""
    return max(kernel_bytes, smem_per_sm // (resident + 1) + 128)


def choose_num_splits(ctas, n_blocks, num_sms, resident, split_cap=MAX_SPLITS, split_thin_tails=False):
    """choose_num_splits: none where the CTAs fill most of a wave (with split_thin_tails, and the last wave is at
    least 0.9 full); else the fewest splits (up to split_cap) whose last wave is at least 0.95 of the best fill, among
    counts that change the blocks per split."""
    slots = resident * num_sms

    def wave_fill(s):
        waves = float(ctas * s) / float(slots)
        return waves / math.ceil(waves)

    if ctas <= 0 or n_blocks <= 1 or (ctas * 5 >= slots * 4 and (not split_thin_tails or wave_fill(1) >= 0.9)):
        return 1
    max_splits = min(split_cap, slots, n_blocks)

    def distinct(s):
        return s == 1 or -(-n_blocks // s) != -(-n_blocks // (s - 1))

    best = max(wave_fill(s) for s in range(1, max_splits + 1) if distinct(s))
    return next((s for s in range(1, max_splits + 1) if distinct(s) and wave_fill(s) >= 0.95 * best), 1)


def plan_num_splits(ctas, n_blocks, block_n, layout, num_sms):
    """plan_num_splits: the split count at the residency it leads to (re-planned once if splitting changed it); long
    shares alone on their SMs in a grid with a thin last wave split too, into shares of at least 2048 keys, or into up
    to four in a grid just past one wave."""
    unsplit = split_ctas_per_sm(layout, n_blocks, block_n, 1)
    thin_tail = unsplit == 1
    just_past_a_wave = num_sms < ctas and ctas * 4 < num_sms * 5
    cap = max(4 if just_past_a_wave else 1, n_blocks * block_n // (LONG_SHARE_KEYS // 2)) if thin_tail else MAX_SPLITS
    splits = choose_num_splits(ctas, n_blocks, num_sms, unsplit, cap, thin_tail)
    resident = split_ctas_per_sm(layout, n_blocks, block_n, splits)
    return splits if resident == unsplit else choose_num_splits(ctas, n_blocks, num_sms, resident, cap, thin_tail)


WAVES_AS_SHARES_MAX = 3  # kWavesAsSharesMax
WAVES_AS_SHARES_IDLE_PARTS = 16  # kWavesAsSharesIdleParts


def waves_as_shares(ctas, lanes, resident, num_sms):
    """plan_waves_as_shares: whether a grid the split count leaves whole runs as one wave of equal shares instead
    (long shares alone on their SMs, more than one wave and at most three, the last one leaving at least 1/16 of the
    grid's slots idle)."""
    slots = -(-ctas // num_sms) * num_sms
    return (resident == 1 and lanes <= num_sms and num_sms < ctas <= WAVES_AS_SHARES_MAX * num_sms
            and (slots - ctas) * WAVES_AS_SHARES_IDLE_PARTS >= slots)


def split_shares(blocks, lanes, block_n, layout, num_sms):
    """plan_split_shares: the equal shares per lane (a Q block of a grouped head) of all sequences' blocks, one wave
    of one CTA per SM, where those shares are long; 0 where they would be short (the plan then splits uniformly)."""
    return num_sms // lanes if ctas_per_sm(layout, blocks * lanes * block_n // num_sms) == 1 else 0


def shares_ctas_per_sm(layout, blocks, shares, block_n):
    """shares_ctas_per_sm: CTAs per SM of a grid whose lanes take `shares` shares of `blocks` blocks."""
    return ctas_per_sm(layout, -(-blocks // shares) * block_n)


def appends_in_split_kv(key_split_tile, m_blocks, seqlen_new, seqlen_q, grid_ctas, ctas_per_sm, num_sms):
    """appends_in_split_kv: whether the split-KV kernel copies a decoding step's new K/V rows itself (the key-split
    tile, one Q block per (batch, K/V head), no more new rows than queries, a grid of at most two waves) rather than
    after an append kernel."""
    return (key_split_tile and m_blocks == 1 and 0 < seqlen_new <= seqlen_q
            and grid_ctas <= 2 * ctas_per_sm * num_sms)


# ---- one problem -------------------------------------------------------------------------------------------------

def decode_tiles(dtype, head_dim):
    """(64-row tile, key-split tile): the decode kernel's two configurations for (dtype, head_dim)."""
    kernel = kernel_configs.shipped_kernel("decode", "sm80", dtype, head_dim, "the decode kernel")
    return kernel_configs.config_for(kernel, dtype), kernel_configs.config_for(kernel, dtype, key_split=True)


def kv_layout(device, page_size, head_dim, cfg):
    """How the kernel reads K/V on the device (decode_launch.h with_split_kv_kernel, PagedTmaCopies::can_run): by
    TMA on Hopper where pages are whole boxes and every box reaches a column below head_dim (the pools' strides
    assumed TMA-addressable), else by cp.async."""
    if page_size is None:
        return "contiguous"
    hopper = device.target == "sm_90a"
    boxes_fit = page_size % PAGED_TMA_ROWS == 0 and head_dim > cfg.head_dim - cfg.block_k_smem
    return "paged-tma" if hopper and boxes_fit else "paged"


def decode_plan(dtype, head_dim, batch, heads_q, heads_kv, seqlen_q, seqlen_k, page_size=None, device=None,
                seqlen_new=0):
    """The plan of one decoding step on one device (flashcute.explain.DEVICES or H200, default H100), as a JSON-able
    dict: the tile, the row packing, the split count, residency, shared memory, the grid and the bytes; with
    seqlen_new new K/V rows per sequence (appended in place: seqlen_k counts them), which kernel writes them."""
    device = device or DEVICES["sm80"][-1]
    for name, value, low in (("batch", batch, 1), ("heads_q", heads_q, 1), ("heads_kv", heads_kv, 1),
                             ("seqlen_q", seqlen_q, 1), ("seqlen_k", seqlen_k, 0), ("seqlen_new", seqlen_new, 0)):
        if not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    if heads_q % heads_kv:
        raise ValueError(f"heads_q must be a multiple of heads_kv, got {heads_q} and {heads_kv}")
    if page_size is not None and (not isinstance(page_size, int) or page_size < 1):
        raise ValueError(f"page_size must be a positive integer or None, got {page_size!r}")
    rows_tile, key_split_tile = decode_tiles(dtype, head_dim)
    group = heads_q // heads_kv
    rows = seqlen_q * group
    cfg = key_split_tile if rows <= key_split_tile.block_m else rows_tile
    layout = kv_layout(device, page_size, head_dim, cfg)
    fast = fast_memory(device.dram_gbps, device.num_sms)
    residency = residency_layout(layout, cfg is key_split_tile, fast)
    m_blocks = -(-rows // cfg.block_m)
    n_blocks = -(-seqlen_k // cfg.block_n)
    lanes = m_blocks * heads_kv
    ctas = lanes * batch
    splits = plan_num_splits(ctas, n_blocks, cfg.block_n, residency, device.num_sms)
    # decode_launch.h SplitKVKernel::plan: waves of long unsplit CTAs run as one wave of equal shares (split in two).
    unsplit_resident = split_ctas_per_sm(residency, n_blocks, cfg.block_n, 1)
    waves_to_shares = (cfg is key_split_tile and splits == 1 and n_blocks > 1
                       and waves_as_shares(ctas, lanes, unsplit_resident, device.num_sms))
    splits = 2 if waves_to_shares else splits
    # decode_launch.h SplitKVKernel::plan: equal shares across sequences on the key-split tile, where they are long.
    equal_shares = (split_shares(batch * n_blocks, lanes, cfg.block_n, residency, device.num_sms)
                    if cfg is key_split_tile and splits > 1 else 0)
    equal = equal_shares > 0
    shares = equal_shares if equal else batch * splits
    resident = shares_ctas_per_sm(residency, batch * n_blocks, shares, cfg.block_n)
    kv_buffer = cfg.smem_kv_elems * cfg.element_bytes
    two_stages = two_stage_launch(layout, cfg is key_split_tile, resident, fast)
    used = kernel_smem_bytes(cfg.smem_bytes, kv_buffer, cfg.block_n, layout, two_stages)
    blocks_per_split = -(-n_blocks // splits) if n_blocks else 0
    blocks_per_share = -(-(batch * n_blocks) // shares)
    grid_ctas = lanes * shares
    out_rows = batch * heads_q * seqlen_q
    element = cfg.element_bytes
    return {
        "device": device.name, "dtype": dtype, "head_dim": head_dim, "batch": batch, "heads_q": heads_q,
        "heads_kv": heads_kv, "seqlen_q": seqlen_q, "seqlen_k": seqlen_k, "page_size": page_size,
        "tile": {"name": "key-split" if cfg is key_split_tile else "64-row", "block_m": cfg.block_m,
                 "block_n": cfg.block_n, "warps": cfg.n_warps, "key_slices": cfg.key_slices,
                 "keys_per_slice": cfg.block_n // cfg.key_slices,
                 "kv_stages": 2 if two_stages else kv_stages(cfg.smem_bytes, kv_buffer)},
        "group": group, "rows_per_kv_head": rows, "q_blocks": m_blocks,
        "row_packing": [{"row": r, "query": r // group, "head": r % group} for r in range(min(rows, cfg.block_m))],
        "layout": layout, "fast_memory": fast, "two_stage_launch": two_stages, "kv_blocks": n_blocks,
        "ctas_unsplit": ctas, "num_splits": splits, "waves_as_shares": waves_to_shares,
        "blocks_per_split": blocks_per_split, "keys_per_split": blocks_per_split * cfg.block_n,
        "lanes": lanes, "equal_shares": equal, "shares_per_lane": shares, "blocks_per_share": blocks_per_share,
        "ctas_per_sm": resident, "unsplit_ctas_per_sm": unsplit_resident,
        "unsplit_waves": ctas / (unsplit_resident * device.num_sms), "smem_used_bytes": used,
        "smem_launch_bytes": launch_smem_bytes(device.smem_per_sm, used, resident),
        "grid": [grid_ctas] if equal else [m_blocks * splits, heads_kv, batch], "grid_ctas": grid_ctas,
        "slots": resident * device.num_sms,
        "waves": grid_ctas / (resident * device.num_sms),
        "combine": splits > 1,
        "seqlen_new": seqlen_new,
        "append": None if seqlen_new == 0 else
        "split-kv" if appends_in_split_kv(cfg is key_split_tile, m_blocks, seqlen_new, seqlen_q, grid_ctas, resident,
                                          device.num_sms) else "append kernel",
        "workspace_bytes": lanes * (batch + shares - 1) * cfg.block_m * (cfg.head_dim + 1) * 4 if splits > 1 else 0,
        "kv_bytes": 2 * batch * heads_kv * seqlen_k * head_dim * element,
        "q_o_bytes": 2 * out_rows * head_dim * element,
    }


def _bytes(n):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} B"


def _split_reason(p):
    """Why plan_num_splits chose the count: the unsplit grid's waves against the rule's bars."""
    waves, resident = p["unsplit_waves"], p["unsplit_ctas_per_sm"]
    fill = waves / math.ceil(waves) if waves else 0
    unsplit = (f"Unsplit, {p['ctas_unsplit']} CTAs at {resident} per SM would fill {waves:.2f} waves "
               f"({fill:.0%} of their slots)")
    if p["waves_as_shares"]:
        return (f"{unsplit}: each CTA streams its whole sequence alone on its SM, so the grid runs as one wave of "
                f"equal shares instead, each CTA walking several sequences.")
    if p["num_splits"] == 1:
        if p["kv_blocks"] <= 1:
            return f"{unsplit}; {p['kv_blocks']} K/V block(s): nothing to split."
        return f"{unsplit}: no split the rule allows fills them better."
    if resident == 1 and waves >= 0.8:
        return (f"{unsplit}: each CTA streams its whole sequence alone on its SM, so a grid below 90% is split too, "
                f"into shares of at least {LONG_SHARE_KEYS // 2} keys (up to four per sequence just past one wave).")
    return (f"{unsplit}: less than 0.8 of a wave, so the keys split: the fewest splits whose waves are within 0.95 "
            f"of the best fill.")


def decode_text(p):
    t = p["tile"]
    paged = "" if p["page_size"] is None else f", pages of {p['page_size']} rows"
    queries = "1 query" if p["seqlen_q"] == 1 else f"{p['seqlen_q']} queries"
    lines = [f"flashcute decode {p['dtype']} hdim{p['head_dim']} on {p['device']}: batch {p['batch']}, "
             f"{p['heads_q']} query / {p['heads_kv']} K/V heads, {queries} against {p['seqlen_k']} cached keys{paged}",
             ""]
    lines.append(f"Rows: each (batch, K/V head) holds seqlen_q x group = {p['seqlen_q']} x {p['group']} = "
                 f"{p['rows_per_kv_head']} query rows, so each K/V byte is read once for its whole group; row r is "
                 f"query r / {p['group']} of head (K/V head x {p['group']}) + r % {p['group']}.")
    if t["name"] == "key-split":
        used = "" if p["rows_per_kv_head"] == t["block_m"] else f" ({p['rows_per_kv_head']} of them hold queries)"
        lines.append(f"Tile: the key-split tile, {t['block_m']} rows{used} x {t['block_n']}-key blocks on "
                     f"{t['warps']} warps: each warp takes {t['keys_per_slice']} keys of every block (its key slice) "
                     f"with its own softmax state, merged through shared memory at the end.")
    else:
        lines.append(f"Tile: the 64-row tile, {t['block_m']} rows x {t['block_n']}-key blocks on {t['warps']} warps "
                     f"stacked along the rows ({t['block_m'] // t['warps']} each); {p['q_blocks']} Q block(s) per "
                     f"(batch, K/V head).")
    lines.append(f"K/V: {p['layout']}"
                 + {"contiguous": "",
                    "paged": " (cp.async gathers through the block table, offsets a block ahead in shared memory)",
                    "paged-tma": f" (one TMA box of {PAGED_TMA_ROWS} rows per lane of warp 0, pages looked up a block "
                                 f"ahead; the first, ragged block by cp.async)"}[p["layout"]]
                 + f"; {t['kv_stages']} K/V stage(s).")
    if p["fast_memory"]:
        lines.append(f"Fast memory ({p['device']}: over {FAST_MEMORY_GBPS_PER_SM} GB/s of DRAM per SM): "
                     + ("two K/V stages, since each CTA runs alone on its SM." if p["two_stage_launch"] else
                        "two CTAs per SM for TMA pages, as for cp.async ones." if p["layout"] == "paged-tma"
                        and t["name"] == "64-row" else "the H100's plan."))
    lines += ["", f"Split: {p['kv_blocks']} K/V blocks per sequence; {p['ctas_unsplit']} CTAs before splitting; "
                  f"{p['num_splits']} split(s) of {p['blocks_per_split']} blocks ({p['keys_per_split']} keys) each.",
              _split_reason(p)]
    if p["equal_shares"]:
        lines.append(f"Equal shares: each of the {p['lanes']} lanes (a Q block of a K/V head) takes "
                     f"{p['shares_per_lane']} shares of the batch's {p['batch']} x {p['kv_blocks']} blocks, one "
                     f"sequence after another, {p['blocks_per_share']} blocks "
                     f"({p['blocks_per_share'] * t['block_n']} keys) each; a share may end in one sequence and go on "
                     f"in the next. The lanes of a share run side by side and read each cache row at about the same "
                     f"time; one CTA per SM, one wave, in place of the {p['num_splits']} splits per sequence.")
    lines += [f"Grid ({' x '.join(map(str, p['grid']))}) = {p['grid_ctas']} CTAs at {p['ctas_per_sm']} per SM: "
              f"{p['waves']:.2f} waves.",
              f"Shared memory: {p['smem_used_bytes']} B used, launched with {p['smem_launch_bytes']} B so that "
              + ("each CTA runs alone on its SM." if p["ctas_per_sm"] == 1 else
                 f"an SM holds at most {p['ctas_per_sm']} of them.")]
    if p["combine"]:
        lines.append(f"Combine: each share writes float32 partial O and LSE per sequence it holds "
                     f"({_bytes(p['workspace_bytes'])} of workspace); a second kernel merges a row's, one warp per "
                     f"output row.")
    else:
        lines.append("One split: the split-KV kernel writes O and LSE itself; no combine kernel runs.")
    if p["append"] == "split-kv":
        lines.append(f"Append: each CTA writes the new rows ({p['seqlen_new']} per sequence) among its keys into the "
                     f"cache before it loads them; no append kernel runs.")
    elif p["append"]:
        why = ("the 64-row tile" if t["name"] != "key-split" else
               "more new rows than queries" if p["seqlen_new"] > p["seqlen_q"] else
               "more than one Q block" if p["q_blocks"] > 1 else "a grid of more than two waves")
        lines.append(f"Append: an append kernel writes the new rows ({p['seqlen_new']} per sequence) first ({why}; "
                     f"in the split-KV kernel each CTA would wait for its copy before its loads).")
    lines += ["", f"Reads {_bytes(p['kv_bytes'])} of K and V and moves {_bytes(p['q_o_bytes'])} of Q and O: the step "
                  f"is bound by memory; at the device's copy bandwidth B it takes at least (K/V + Q/O bytes) / B."]
    return "\n".join(lines) + "\n"


MAX_WAVES_DRAWN = 12


def draw_decode_plan(p, out_dir, stem):
    """Three panels: the grid's CTAs over the SMs' slots wave by wave (a thin last wave leaves SMs idle), one
    sequence's keys cut into splits (and K/V blocks), or with equal shares the batch's keys cut into them, and one Q
    block's rows (the GQA group packed) with, on the key-split tile, the key slice each warp takes of a block."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    from .draw import _save

    t = p["tile"]
    fig, (ax_waves, ax_keys, ax_rows) = plt.subplots(3, 1, figsize=(13, 7.5),
                                                     gridspec_kw={"height_ratios": (3, 1, 1.4)})
    slots, waves = p["slots"], math.ceil(p["waves"])
    drawn = list(range(min(waves, MAX_WAVES_DRAWN - 1))) + ([waves - 1] if waves >= MAX_WAVES_DRAWN else [])
    for row, wave in enumerate(drawn):
        busy = min(slots, p["grid_ctas"] - wave * slots)
        ax_waves.add_patch(Rectangle((0, row), busy, 0.8, facecolor="#3182bd" if busy == slots else "#fd8d3c"))
        ax_waves.add_patch(Rectangle((busy, row), slots - busy, 0.8, facecolor="white", edgecolor="#bbbbbb",
                                     hatch="///", lw=0.5))
        ax_waves.text(slots + 2, row + 0.4, f"wave {wave + 1}: {busy} of {slots}", va="center", fontsize=7)
    ax_waves.set_xlim(0, slots * 1.18)
    ax_waves.set_ylim(max(len(drawn), 1), 0)
    ax_waves.set_yticks([])
    ax_waves.set_xlabel(f"CTA slots: {p['ctas_per_sm']} per SM x SMs")
    ax_waves.set_title(f"{p['dtype']} hdim{p['head_dim']} on {p['device']}: grid ({' x '.join(map(str, p['grid']))}) "
                       f"= {p['grid_ctas']} CTAs, {p['waves']:.2f} waves"
                       + (f" (waves {MAX_WAVES_DRAWN} to {waves - 1} not drawn)" if waves > MAX_WAVES_DRAWN else ""),
                       fontsize=9)

    colors = plt.get_cmap("tab20").colors
    if p["equal_shares"]:
        # The batch's blocks one sequence after another, cut into the shares every lane takes (KVShares::start).
        blocks, shares = p["batch"] * p["kv_blocks"], p["shares_per_lane"]
        keys = blocks * t["block_n"]
        for share in range(shares):
            start, end = share * blocks // shares * t["block_n"], (share + 1) * blocks // shares * t["block_n"]
            ax_keys.add_patch(Rectangle((start, 0), end - start, 1, facecolor=colors[share % 20], edgecolor="black",
                                        lw=0.5))
            if shares <= 32:
                ax_keys.text((start + end) / 2, 0.5, str(share), ha="center", va="center", fontsize=6)
        if p["batch"] <= 128:
            for b in range(1, p["batch"]):
                ax_keys.axvline(b * p["kv_blocks"] * t["block_n"], color="black", lw=1.2)
        ax_keys.set_xlabel(f"the batch's keys, one sequence after another (black: where a sequence ends): "
                           f"{shares} equal shares, each one CTA per lane, may cross sequences")
    else:
        keys = max(p["seqlen_k"], 1)
        for split in range(p["num_splits"]):
            start = split * p["keys_per_split"]
            width = min(p["keys_per_split"], p["seqlen_k"] - start)
            if width > 0:
                ax_keys.add_patch(Rectangle((start, 0), width, 1, facecolor=colors[split % 20], edgecolor="black",
                                            lw=0.5))
                if p["num_splits"] <= 32:
                    ax_keys.text(start + width / 2, 0.5, str(split), ha="center", va="center", fontsize=6)
        if p["kv_blocks"] <= 128:
            for block in range(1, p["kv_blocks"]):
                ax_keys.axvline(block * t["block_n"], color="white", lw=0.4)
        ax_keys.set_xlabel(f"keys of one sequence: {p['num_splits']} split(s) of {p['blocks_per_split']} blocks of "
                           f"{t['block_n']} keys; each split is one CTA per (Q block, K/V head, batch)"
                           + ("" if p["page_size"] is None else f"; {p['layout']} pages of {p['page_size']} rows"))
    ax_keys.set_xlim(0, keys)
    ax_keys.set_yticks([])

    group = p["group"]
    for row in range(t["block_m"]):
        used = row < p["rows_per_kv_head"]
        ax_rows.add_patch(Rectangle((row, 0), 1, 1, facecolor=colors[(row % group) % 20] if used else "white",
                                    edgecolor="#888888", lw=0.4, hatch=None if used else "///"))
        if used and t["block_m"] <= 32:
            ax_rows.text(row + 0.5, 0.5, f"q{row // group}\nh{row % group}", ha="center", va="center", fontsize=5)
    if t["key_slices"] > 1:
        scale = t["block_m"] / t["block_n"]  # one block's keys drawn beside the rows, to the rows' width
        for warp in range(t["key_slices"]):
            x = t["block_m"] + 2 + warp * t["keys_per_slice"] * scale
            ax_rows.add_patch(Rectangle((x, 0), t["keys_per_slice"] * scale, 1, facecolor=colors[(2 * warp + 1) % 20],
                                        edgecolor="black", lw=0.5))
            ax_rows.text(x + t["keys_per_slice"] * scale / 2, 0.5, f"warp {warp}\n{t['keys_per_slice']} keys",
                         ha="center", va="center", fontsize=6)
        ax_rows.set_xlim(0, 2 * t["block_m"] + 2)
    else:
        ax_rows.set_xlim(0, t["block_m"])
    ax_rows.set_xticks([])
    ax_rows.set_yticks([])
    ax_rows.set_xlabel(f"one Q block: {t['block_m']} rows, row r = query r / {group} of head r % {group} of the "
                       f"K/V head's group" + ("; right: one K/V block's keys, one slice per warp"
                                              if t["key_slices"] > 1 else f"; {t['warps']} warps of "
                                              f"{t['block_m'] // t['warps']} rows"))
    fig.tight_layout()
    return _save(fig, Path(out_dir), stem)


def explain_decode(dtype, head_dim, out_dir, batch, heads_q, heads_kv, seqlen_q, seqlen_k, page_size=None,
                   pictures=True, seqlen_new=0):
    """Write decode.txt and decode.json (the plan on every device flashcute.explain models, and on the H200, whose
    faster memory changes some plans) and, with pictures, a decode_plan_<target> drawing per device into out_dir
    (decode_plan_sm90a_h200 for the H200); returns {"plans": [...], "files": [...]}."""
    devices = (*DEVICES["sm80"], H200)
    plans = [decode_plan(dtype, head_dim, batch, heads_q, heads_kv, seqlen_q, seqlen_k, page_size, device, seqlen_new)
             for device in devices]
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    text, data = out_dir / "decode.txt", out_dir / "decode.json"
    text.write_text("\n".join(decode_text(p) for p in plans))
    data.write_text(json.dumps(plans, indent=1))
    files = [str(text), str(data)]
    if pictures:
        for device, plan in zip(devices, plans):
            stem = f"decode_plan_{device.target.replace('sm_', 'sm')}" + ("_h200" if device is H200 else "")
            files += [str(f) for f in draw_decode_plan(plan, out_dir, stem)]
    return {"plans": plans, "files": files}
