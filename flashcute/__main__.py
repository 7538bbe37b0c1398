"""`python -m flashcute`: the main job.

On a machine with an NVIDIA GPU (sm_80+): build (first use) and load the kernels, check an attention against a
float64 reference beside PyTorch's own error in the same precision, and measure its TFLOP/s per backend.
Without a GPU: say so, and show the kernel's shared-memory layout through flashcute.layout instead.
"""

import argparse
import sys

import flashcute
from flashcute import kernel_table


def main(argv=None) -> int:
    argparse.ArgumentParser(
        prog="python -m flashcute",
        description="flashcute's main job. With an NVIDIA GPU (sm_80+): build (on first use) and load the kernels, "
        "check an attention against a float64 reference beside PyTorch's own error in the same precision, and "
        "print each backend's TFLOP/s. Without one: show a kernel's shared-memory layouts through flashcute.layout.",
        epilog="See also: python -m flashcute.explain --help (a kernel's layouts, bank conflicts and numbers, drawn) "
        "and python -m flashcute.layout --help (the layout algebra).",
    ).parse_args(argv)
    print(f"flashcute {flashcute.__version__}")
    try:
        import torch
    except ImportError:
        print("PyTorch is not installed, so the attention kernels cannot run here (pip install torch).")
        return show_layouts()
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda or 'none (CPU-only build)'}")
    if not torch.cuda.is_available():
        why = "this PyTorch has no CUDA support" if torch.version.cuda is None else "no CUDA device is visible"
        print(f"No GPU here ({why}): flashcute's attention kernels need an NVIDIA GPU of compute capability 8.0+.")
        return show_layouts()
    return check_and_time(torch)


def show_layouts() -> int:
    """Print the SM80 kernel's tiles and swizzled shared-memory layouts (bf16, head dim 128)."""
    try:
        from flashcute.kernel_configs import get_config
        from flashcute.layout import Int, Layout, Swizzle, composition, print_layout
    except ImportError as error:
        print(f"flashcute.layout is not available either ({error}).")
        return 0
    config = get_config("sm80", "bf16", 128)
    print()
    print(f"What flashcute.layout can show here: the SM80 kernel for bf16, head dim 128 works on {config.block_m}x"
          f"{config.block_n} tiles with {config.n_warps} warps and {config.smem_bytes // 1024} KiB of shared memory:")
    print(f"  shared-memory atom  {config.smem_layout_atom}")
    print(f"  Q tile in smem      {config.smem_layout_q}")
    print(f"  K/V tile in smem    {config.smem_layout_kv}")
    print("The swizzle in 16-byte chunks (8 bf16 each): entry (r, c) is the smem chunk holding chunk c of row r.")
    print("Each row permutes its chunks differently, so the 8 rows of one column (what one ldmatrix phase reads)")
    print("land in 8 different bank groups and cover all 32 banks without a conflict:")
    print_layout(composition(Swizzle(3, 0, 3), Layout((Int(8), Int(8)), (Int(8), Int(1)))))
    return 0


def check_and_time(torch) -> int:
    device = torch.cuda.get_device_properties(0)
    print(f"GPU: {device.name} (sm_{device.major}{device.minor}, {device.multi_processor_count} SMs)")
    try:
        library = flashcute.load_extension()
    except flashcute.FlashcuteUnavailable as error:
        print(f"cannot load flashcute's kernels: {error}")
        return 1
    how = "built now" if library.built_now else "cached" if library.kind == "jit" else "installed"
    print(f"extension: {library.kind.upper()} ({how}) {library.path}, loaded in {library.load_seconds:.2f} s")

    config = library.config
    backends = [arch for arch in ("sm80", "sm90")
                if arch in config.kernel_archs and (arch == "sm80" or device.major == 9)
                and kernel_table.family("fwd", arch) in config.families]
    if not backends:
        print(f"this build has no forward kernel for this GPU (FLASHCUTE_KERNELS={','.join(config.families)})")
        return 1
    dtype = torch.bfloat16 if "bf16" in library.config.dtypes else torch.float16
    head_dim = 128 if 128 in library.config.head_dims else library.config.head_dims[-1]
    ok = True
    for causal in (False, True):
        ok &= check_accuracy(torch, dtype, head_dim, causal, backends)
    for causal in (False, True):
        for backend in backends:
            time_forward(torch, dtype, head_dim, causal, backend)
    print("check passed" if ok else "CHECK FAILED")
    return 0 if ok else 1


def check_accuracy(torch, dtype, head_dim, causal, backends) -> bool:
    batch, seqlen, heads = 2, 1000, 8
    q, k, v = (torch.randn(batch, seqlen, heads, head_dim, device="cuda", dtype=dtype) for _ in range(3))
    as_bhsd = [t.transpose(1, 2) for t in (q, k, v)]
    reference = torch.nn.functional.scaled_dot_product_attention(*(t.double() for t in as_bhsd), is_causal=causal)
    torch_low = torch.nn.functional.scaled_dot_product_attention(*as_bhsd, is_causal=causal)
    torch_error = (torch_low.double() - reference).abs().max().item()
    ok = True
    for backend in backends:
        out = flashcute.flash_attn_func(q, k, v, causal=causal, backend=backend).transpose(1, 2)
        error = (out.double() - reference).abs().max().item()
        passed = error <= 2 * torch_error + 1e-3 and not out.isnan().any().item()
        ok &= passed
        print(
            f"check {str(dtype)[6:]} b={batch} s={seqlen} h={heads} d={head_dim} causal={causal} {backend}: "
            f"max|out - float64 ref| = {error:.2e} (PyTorch's own: {torch_error:.2e}) {'ok' if passed else 'FAIL'}"
        )
    return ok


def time_forward(torch, dtype, head_dim, causal, backend) -> None:
    seqlen, heads = 4096, 2048 // head_dim
    batch = 16384 // seqlen
    q, k, v = (torch.randn(batch, seqlen, heads, head_dim, device="cuda", dtype=dtype) for _ in range(3))
    run = lambda: flashcute.flash_attn_func(q, k, v, causal=causal, backend=backend)  # noqa: E731
    for _ in range(3):
        run()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    repeats = 20
    start.record()
    for _ in range(repeats):
        run()
    end.record()
    torch.cuda.synchronize()
    seconds = start.elapsed_time(end) / 1e3 / repeats
    flops = 4 * batch * heads * seqlen * seqlen * head_dim / (2 if causal else 1)
    print(
        f"speed {str(dtype)[6:]} b={batch} s={seqlen} h={heads} d={head_dim} causal={causal} {backend}: "
        f"{seconds * 1e3:.3f} ms, {flops / seconds / 1e12:.0f} TFLOP/s"
    )


if __name__ == "__main__":
    sys.exit(main())
