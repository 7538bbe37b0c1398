"""Registers per thread and spill bytes of every shipped kernel, as ``ptxas -v`` reports them.

SM80: measured, since ptxas's register allocation cannot be predicted. Regenerate after csrc changes with

    python csrc/tools/ptxas_report.py [-j JOBS]

(it compiles every instantiation for every target its arch runs on with ``-Xptxas -v`` and prints MEASURED), and
check the log of one compile (CI) with ``python csrc/tools/ptxas_report.py --check LOG``.

SM90: the registers are derived, not stored: ``__launch_bounds__(kNumThreads, 1)`` fixes the launch count at
65536 / kNumThreads in steps of 8 (``Sm90Config.launch_regs``), ptxas reports that count (the check holds it
to it), and setmaxnreg then moves registers from the producer to the consumers (``producer_regs`` /
``consumer_regs``). Only their spills are measured. The same holds for the SM90 backward kernel (one row per
head dim, a non-causal and a causal kernel each); its pre- and postprocess kernels are not recorded.
"""

import re

from .. import kernel_configs, kernel_table

MEASURED_WITH = ("CUDA 13.0, CUTLASS 4.2.0, csrc at a84fd5e (SM80 rows; SM90 forward rows at bc3d0ca, the fixed-length "
                 "instantiations; SM90 backward rows at 04423ea, hdim 192 at 0f6830c, hdims 64, 128 and 256 "
                 "re-checked at 12c56f5, hdims 64, 96 and 128 at 27de79f and again "
                 "with the dQ warp's loop per mode, s50)")

# (kernel_table row name, dtype, ptxas target, causal) -> (registers, spill store bytes, spill load bytes); the
# registers are None where derived (SM90). One SM80 row compiles into a non-causal and a causal kernel.
MEASURED = {
    ('fwd_sm80_hdim64_all', 'fp16', 'sm_80', False): (252, 0, 0),
    ('fwd_sm80_hdim64_all', 'fp16', 'sm_80', True): (255, 0, 0),
    ('fwd_sm80_hdim64_all', 'fp16', 'sm_90a', False): (253, 0, 0),
    ('fwd_sm80_hdim64_all', 'fp16', 'sm_90a', True): (255, 0, 0),
    ('fwd_sm80_hdim64_all', 'bf16', 'sm_80', False): (252, 0, 0),
    ('fwd_sm80_hdim64_all', 'bf16', 'sm_80', True): (255, 0, 0),
    ('fwd_sm80_hdim64_all', 'bf16', 'sm_90a', False): (253, 0, 0),
    ('fwd_sm80_hdim64_all', 'bf16', 'sm_90a', True): (255, 0, 0),
    ('fwd_sm80_hdim96_all', 'fp16', 'sm_80', False): (255, 128, 192),
    ('fwd_sm80_hdim96_all', 'fp16', 'sm_80', True): (255, 124, 192),
    ('fwd_sm80_hdim96_all', 'fp16', 'sm_90a', False): (255, 28, 48),
    ('fwd_sm80_hdim96_all', 'fp16', 'sm_90a', True): (255, 120, 188),
    ('fwd_sm80_hdim96_all', 'bf16', 'sm_80', False): (255, 128, 192),
    ('fwd_sm80_hdim96_all', 'bf16', 'sm_80', True): (255, 124, 192),
    ('fwd_sm80_hdim96_all', 'bf16', 'sm_90a', False): (255, 28, 48),
    ('fwd_sm80_hdim96_all', 'bf16', 'sm_90a', True): (255, 120, 188),
    ('fwd_sm80_hdim128_all', 'fp16', 'sm_80', False): (255, 264, 360),
    ('fwd_sm80_hdim128_all', 'fp16', 'sm_80', True): (255, 316, 424),
    ('fwd_sm80_hdim128_all', 'fp16', 'sm_90a', False): (255, 268, 340),
    ('fwd_sm80_hdim128_all', 'fp16', 'sm_90a', True): (255, 280, 360),
    ('fwd_sm80_hdim128_all', 'bf16', 'sm_80', False): (255, 264, 360),
    ('fwd_sm80_hdim128_all', 'bf16', 'sm_80', True): (255, 316, 424),
    ('fwd_sm80_hdim128_all', 'bf16', 'sm_90a', False): (255, 268, 340),
    ('fwd_sm80_hdim128_all', 'bf16', 'sm_90a', True): (255, 280, 360),
    ('fwd_sm80_hdim192_all', 'fp16', 'sm_80', False): (253, 0, 0),
    ('fwd_sm80_hdim192_all', 'fp16', 'sm_80', True): (250, 0, 0),
    ('fwd_sm80_hdim192_all', 'fp16', 'sm_90a', False): (255, 0, 0),
    ('fwd_sm80_hdim192_all', 'fp16', 'sm_90a', True): (255, 0, 0),
    ('fwd_sm80_hdim192_all', 'bf16', 'sm_80', False): (253, 0, 0),
    ('fwd_sm80_hdim192_all', 'bf16', 'sm_80', True): (250, 0, 0),
    ('fwd_sm80_hdim192_all', 'bf16', 'sm_90a', False): (255, 0, 0),
    ('fwd_sm80_hdim192_all', 'bf16', 'sm_90a', True): (255, 0, 0),
    ('fwd_sm80_hdim256_all', 'fp16', 'sm_80', False): (255, 0, 0),
    ('fwd_sm80_hdim256_all', 'fp16', 'sm_80', True): (255, 0, 0),
    ('fwd_sm80_hdim256_all', 'fp16', 'sm_90a', False): (255, 0, 0),
    ('fwd_sm80_hdim256_all', 'fp16', 'sm_90a', True): (255, 0, 0),
    ('fwd_sm80_hdim256_all', 'bf16', 'sm_80', False): (255, 0, 0),
    ('fwd_sm80_hdim256_all', 'bf16', 'sm_80', True): (255, 0, 0),
    ('fwd_sm80_hdim256_all', 'bf16', 'sm_90a', False): (255, 0, 0),
    ('fwd_sm80_hdim256_all', 'bf16', 'sm_90a', True): (255, 0, 0),
    ('fwd_sm90_hdim64_noncausal', 'fp16', 'sm_90a', False): (None, 0, 0),
    ('fwd_sm90_hdim64_noncausal', 'bf16', 'sm_90a', False): (None, 0, 0),
    ('fwd_sm90_hdim64_causal', 'fp16', 'sm_90a', True): (None, 0, 0),
    ('fwd_sm90_hdim64_causal', 'bf16', 'sm_90a', True): (None, 0, 0),
    ('fwd_sm90_hdim96_noncausal', 'fp16', 'sm_90a', False): (None, 0, 0),
    ('fwd_sm90_hdim96_noncausal', 'bf16', 'sm_90a', False): (None, 0, 0),
    ('fwd_sm90_hdim96_causal', 'fp16', 'sm_90a', True): (None, 0, 0),
    ('fwd_sm90_hdim96_causal', 'bf16', 'sm_90a', True): (None, 0, 0),
    ('fwd_sm90_hdim128_noncausal', 'fp16', 'sm_90a', False): (None, 0, 0),
    ('fwd_sm90_hdim128_noncausal', 'bf16', 'sm_90a', False): (None, 0, 0),
    ('fwd_sm90_hdim128_causal', 'fp16', 'sm_90a', True): (None, 0, 0),
    ('fwd_sm90_hdim128_causal', 'bf16', 'sm_90a', True): (None, 0, 0),
    ('fwd_sm90_hdim128_noncausal-longk', 'fp16', 'sm_90a', False): (None, 0, 0),
    ('fwd_sm90_hdim128_noncausal-longk', 'bf16', 'sm_90a', False): (None, 0, 0),
    ('fwd_sm90_hdim192_noncausal', 'fp16', 'sm_90a', False): (None, 0, 0),
    ('fwd_sm90_hdim192_noncausal', 'bf16', 'sm_90a', False): (None, 0, 0),
    ('fwd_sm90_hdim192_causal', 'fp16', 'sm_90a', True): (None, 0, 0),
    ('fwd_sm90_hdim192_causal', 'bf16', 'sm_90a', True): (None, 0, 0),
    ('fwd_sm90_hdim256_noncausal', 'fp16', 'sm_90a', False): (None, 0, 0),
    ('fwd_sm90_hdim256_noncausal', 'bf16', 'sm_90a', False): (None, 0, 0),
    ('fwd_sm90_hdim256_causal', 'fp16', 'sm_90a', True): (None, 0, 0),
    ('fwd_sm90_hdim256_causal', 'bf16', 'sm_90a', True): (None, 0, 0),
    ('bwd_sm90_hdim64_all', 'fp16', 'sm_90a', False): (None, 0, 0),
    ('bwd_sm90_hdim64_all', 'fp16', 'sm_90a', True): (None, 0, 0),
    ('bwd_sm90_hdim64_all', 'bf16', 'sm_90a', False): (None, 0, 0),
    ('bwd_sm90_hdim64_all', 'bf16', 'sm_90a', True): (None, 0, 0),
    ('bwd_sm90_hdim96_all', 'fp16', 'sm_90a', False): (None, 0, 0),
    ('bwd_sm90_hdim96_all', 'fp16', 'sm_90a', True): (None, 0, 0),
    ('bwd_sm90_hdim96_all', 'bf16', 'sm_90a', False): (None, 0, 0),
    ('bwd_sm90_hdim96_all', 'bf16', 'sm_90a', True): (None, 0, 0),
    ('bwd_sm90_hdim128_all', 'fp16', 'sm_90a', False): (None, 0, 0),
    ('bwd_sm90_hdim128_all', 'fp16', 'sm_90a', True): (None, 0, 0),
    ('bwd_sm90_hdim128_all', 'bf16', 'sm_90a', False): (None, 0, 0),
    ('bwd_sm90_hdim128_all', 'bf16', 'sm_90a', True): (None, 0, 0),
    ('bwd_sm90_hdim192_all', 'fp16', 'sm_90a', False): (None, 0, 0),
    ('bwd_sm90_hdim192_all', 'fp16', 'sm_90a', True): (None, 0, 0),
    ('bwd_sm90_hdim192_all', 'bf16', 'sm_90a', False): (None, 0, 0),
    ('bwd_sm90_hdim192_all', 'bf16', 'sm_90a', True): (None, 0, 0),
    ('bwd_sm90_hdim256_all', 'fp16', 'sm_90a', False): (None, 0, 0),
    ('bwd_sm90_hdim256_all', 'fp16', 'sm_90a', True): (None, 0, 0),
    ('bwd_sm90_hdim256_all', 'bf16', 'sm_90a', False): (None, 0, 0),
    ('bwd_sm90_hdim256_all', 'bf16', 'sm_90a', True): (None, 0, 0),
}



def recorded_kernels():
    """The kernel_table rows with figures here: every forward kernel and the SM90 backward's."""
    return kernel_table.kernels("fwd") + kernel_table.kernels("bwd", "sm90")


ROWS = {kernel.name: kernel for kernel in recorded_kernels()}


def kernel_of(cfg):
    """The kernel_table row a kernel_configs configuration was built from."""
    return kernel_table.find("fwd", cfg.arch, cfg.head_dim, "all" if cfg.arch == "sm80" else cfg.variant)


def causal_flags(kernel):
    """The causal template flag of each kernel a table row compiles into."""
    return (False, True) if kernel.variant == "all" else (kernel.variant == "causal",)


def numbers(kernel, dtype, target, causal):
    """(registers, spill store bytes, spill load bytes) of one compiled kernel; None where not recorded."""
    measured = MEASURED.get((kernel.name, dtype, target, causal))
    if measured is None or kernel.arch == "sm80":
        return measured
    return (kernel_configs.config_for(kernel, dtype).launch_regs, *measured[1:])


# ------------------------------------------------------------------------------------------------ ptxas logs
_ENTRY = re.compile(r"Compiling entry function '(\w+)' for '(\w+)'")
_PROPERTIES = re.compile(r"Function properties for (\w+)")
_SPILLS = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
_REGISTERS = re.compile(r"Used (\d+) registers")
_DTYPES = {"6half_t": "fp16", "10bfloat16_t": "bf16"}


def identify(mangled):
    """(kernel_table row, dtype, causal) of a kernel from its mangled name, or None for anything else. The
    template arguments read: the element type, then kHeadDim, first among the integer literals; the causal
    flag is SM80's fwd_kernel<Traits, kCausal, kVarlen> second-last literal (the figures are of the fixed-length
    instantiations: a packed-batch one gives None), SM90's fwd_kernel<KernelTraits<Element, kHeadDim, kCausal,
    kLongSeqlenK>, kVarlen> first boolean, whose second picks the long-seqlen_k tile (and a third set, a packed-batch
    instantiation, gives None); the SM90 backward's bwd_kernel<BwdKernelTraits<Element,
    kHeadDim>, kCausal, kVarlen> (or BwdKernelTraitsQueriesAlongM<...>: either plan of BwdKernelTraitsFor) its first
    boolean (a packed-batch instantiation gives None)."""
    arch = re.match(r"_ZN9flashcute4(sm\d\d)", mangled)  # "4": the namespace is 4 letters
    if "bwd" in mangled and not mangled.startswith("_ZN9flashcute4sm9010bwd_kernel"):
        return None  # the SM80 backward's kernels, and the pre- and postprocess: no figures here
    backward = "bwd" in mangled
    if arch is not None and arch.group(1) == "sm80" and "10fwd_kernel" not in mangled:
        return None  # the decode kernels (split_kv_kernel over the same traits, combine, append) have none either
    dtype = next((d for spelled, d in _DTYPES.items() if f"7cutlass{spelled}" in mangled), None)
    literals = re.findall(r"L([ib])(\d+)E", mangled)
    ints = [int(v) for kind, v in literals if kind == "i"]
    bools = [v == "1" for kind, v in literals if kind == "b"]
    if arch is None or dtype is None or not ints or not bools:
        return None
    arch = arch.group(1)
    if arch == "sm80":
        if len(bools) < 2 or bools[-1]:
            return None
        return kernel_table.find("fwd", arch, ints[0], "all"), dtype, bools[-2]
    if backward:  # bwd_kernel<BwdKernelTraits[QueriesAlongM]<Element, kHeadDim>, kCausal, kVarlen>
        if len(bools) > 1 and bools[1]:
            return None  # the packed-batch instantiation
        return kernel_table.find("bwd", arch, ints[0], "all"), dtype, bools[0]
    causal, long_k, varlen = bools[0], len(bools) > 1 and bools[1], len(bools) > 2 and bools[2]
    if varlen:
        return None
    variant = "causal" if causal else "noncausal-longk" if long_k else "noncausal"
    return kernel_table.find("fwd", arch, ints[0], variant), dtype, causal


def parse_log(text):
    """{(row name, dtype, target, causal): (registers, spill stores, spill loads)} of every flashcute kernel in
    a ``ptxas -v`` log (nvcc -Xptxas -v; several compiles may be concatenated)."""
    found, entry, props = {}, None, None
    for line in text.splitlines():
        if m := _ENTRY.search(line):
            kernel = identify(m.group(1))
            entry = (m.group(1), (kernel[0].name, kernel[1], m.group(2), kernel[2])) if kernel else None
            spills = (0, 0)
        elif m := _PROPERTIES.search(line):
            props = m.group(1)
        elif (m := _SPILLS.search(line)) and entry and props == entry[0]:
            spills = (int(m.group(1)), int(m.group(2)))
        elif (m := _REGISTERS.search(line)) and entry:
            found[entry[1]] = (int(m.group(1)), *spills)
            entry = None
    return found


def expected_keys(found):
    """Every key of the compiles a log covers: all the kernels of each (arch, head dim, dtype, target) seen."""
    keys = set()
    for name, dtype, target, _ in found:
        seen = ROWS[name]
        for kernel in kernel_table.kernels(seen.op, seen.arch):
            if kernel.head_dim == seen.head_dim:
                keys.update((kernel.name, dtype, target, causal) for causal in causal_flags(kernel))
    return keys


def check(found):
    """Where a parsed log differs from MEASURED (SM90 registers: from the launch count), one line each."""
    if not found:
        return ["no flashcute kernel in the log (was it compiled with -Xptxas -v?)"]
    problems = []
    for key in sorted(expected_keys(found) | set(found)):
        name, dtype, target, causal = key
        want, got = numbers(ROWS[name], dtype, target, causal), found.get(key)
        if want != got:
            problems.append(f"{name} {dtype} {target} {'causal' if causal else 'non-causal'}: ptxas {got}, "
                            f"flashcute/explain/ptxas.py {want} (registers, spill stores, spill loads)")
    return problems


def measured_source(found):
    """MEASURED as Python source, rows in kernel_table order: what ptxas_report.py prints to paste above."""
    lines = ["MEASURED = {"]
    for kernel in recorded_kernels():
        for dtype in kernel_table.DTYPES:
            for target in sorted({t for n, d, t, _ in found if (n, d) == (kernel.name, dtype)}):
                for causal in causal_flags(kernel):
                    regs, stores, loads = found[(kernel.name, dtype, target, causal)]
                    regs = regs if kernel.arch == "sm80" else None
                    key = f"({kernel.name!r}, {dtype!r}, {target!r}, {causal})"
                    lines.append(f"    {key}: ({regs}, {stores}, {loads}),")
    return "\n".join(lines + ["}"])
