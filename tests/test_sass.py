"""The machine code of the loaded build (cuobjdump -sass): the Hopper kernels (namespace flashcute::sm90: the SM90
forward and backward, the packed batches' prepasses) run without local memory, and the SM90 forward and backward
kernels run their gemms on wgmma (HGMMA). ptxas's spill report is checked at compile time for one instantiation
(.ci/run against flashcute/explain/ptxas.py); this holds every such kernel of the build that a GPU machine made.
The backward's pre- and postprocess (SM80 templates over sm90::BwdPrePost) are held to it too. One known exception,
outside ptxas.py's table (which records the forward's fixed-length instantiations): the packed causal forward at
hdim 192 keeps a warpgroup's Q descriptor base in 4 bytes of stack, stored once in the prologue and loaded once per
tile (s52); the test fails if that kernel stops using local memory, so the exception cannot outlive the spill.

The parser and the exception's pattern are tested everywhere; the build's own listing needs a GPU (the build) and
cuobjdump (CUDA_HOME/bin or PATH).
"""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

FUNCTION = re.compile(r"^\s*Function : (\S+)\s*$")
LOCAL_MEMORY = re.compile(r"\b(LDL|STL)(\.[\w.]+)?\s")
SM90_NAMESPACE = "_ZN9flashcute4sm90"  # flashcute::sm90::
# The SM90 backward's pre- and postprocess are the SM80 templates over sm90::BwdPrePost.
SM90_PRE_POST = "INS_4sm9010BwdPrePost"
GEMM_KERNELS = ("_ZN9flashcute4sm9010bwd_kernel", "_ZN9flashcute4sm9010fwd_kernel")
# fwd_kernel<KernelTraits<Element, 192, kCausal = true, ...>, kVarlen = true>
KNOWN_LOCAL_MEMORY = re.compile(r"^_ZN9flashcute4sm9010fwd_kernelINS0_12KernelTraitsIN7cutlass\w+?_t"
                                r"ELi192ELb1ELb[01]EEELb1EEE")


def sass_functions(listing: str) -> dict[str, list[str]]:
    """cuobjdump -sass's listing as {mangled function name: its instruction lines}; a name seen under several
    architectures collects all of them."""
    functions, current = {}, None
    for line in listing.splitlines():
        match = FUNCTION.match(line)
        if match:
            current = functions.setdefault(match.group(1), [])
        elif current is not None and "/*" in line:
            current.append(line)
    return functions


def is_sm90_kernel(name: str) -> bool:
    return name.startswith(SM90_NAMESPACE) or SM90_PRE_POST in name


def local_memory_lines(lines: list[str]) -> list[str]:
    return [line.strip() for line in lines if LOCAL_MEMORY.search(line)]


def test_parser_on_a_synthetic_listing():
    listing = """
	code for sm_90a
		Function : _ZN9flashcute4sm9010bwd_kernelINS0_15BwdKernelTraitsIN7cutlass10bfloat16_tELi128EEELb0ELb0EEEvNS0_P
	.headerflags	@"EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                     /* 0x00000a00ff017b82 */
        /*0010*/                   HGMMA.64x64x16.F32.BF16 R24, gdesc[UR4], RZ, !UPT ;  /* 0x0 */
		Function : _ZN9flashcute4sm8022bwd_postprocess_kernelINS_4sm9010BwdPrePostINS2_15BwdKernelTraitsIfLi64EE
        /*0000*/                   STL.64 [R1], R2 ;                          /* 0x0 */
		Function : _ZN9flashcute4sm8010fwd_kernelIfEEvNS_9FwdParamsE
        /*0000*/                   LDL R2, [R1+0x8] ;                         /* 0x0 */
"""
    functions = sass_functions(listing)
    assert len(functions) == 3
    sm90 = [name for name in functions if is_sm90_kernel(name)]
    assert len(sm90) == 2  # the bwd kernel, and the SM80 postprocess template over SM90 traits
    bwd, post = sm90
    assert local_memory_lines(functions[bwd]) == [] and any("HGMMA" in line for line in functions[bwd])
    assert [line.split()[1] for line in local_memory_lines(functions[post])] == ["STL.64"]
    sm80 = next(name for name in functions if not is_sm90_kernel(name))
    assert len(local_memory_lines(functions[sm80])) == 1


def test_the_known_exception_names_only_the_packed_causal_hdim192_forward():
    def fwd(element, head_dim, causal, varlen):
        return (f"_ZN9flashcute4sm9010fwd_kernelINS0_12KernelTraitsIN7cutlass{element}ELi{head_dim}ELb{causal:d}ELb0EEE"
                f"Lb{varlen:d}EEEvNS0_12KernelParamsIT_XT0_EEE")
    assert KNOWN_LOCAL_MEMORY.match(fwd("10bfloat16_t", 192, True, True))
    assert KNOWN_LOCAL_MEMORY.match(fwd("6half_t", 192, True, True))
    for other in (fwd("10bfloat16_t", 192, True, False), fwd("10bfloat16_t", 192, False, True),
                  fwd("10bfloat16_t", 128, True, True), fwd("6half_t", 256, True, True)):
        assert not KNOWN_LOCAL_MEMORY.match(other), other


def cuobjdump() -> str | None:
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    candidate = Path(home) / "bin" / "cuobjdump"
    return str(candidate) if candidate.is_file() else shutil.which("cuobjdump")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (the build)")
def test_built_sm90_kernels_have_no_local_memory_and_use_wgmma():
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the SM90 kernels are built for compute capability 9.x GPUs only")
    tool = cuobjdump()
    if tool is None:
        pytest.skip("cuobjdump not found (CUDA_HOME/bin or PATH)")
    import flashcute

    library = flashcute.load_extension()
    built = set(torch.ops.flashcute.built_kernels())
    listing = subprocess.run([tool, "-sass", str(library.path)], capture_output=True, text=True, check=True).stdout
    functions = {name: lines for name, lines in sass_functions(listing).items() if is_sm90_kernel(name)}
    families = {name.rsplit("_", 2)[0] for name in built}  # e.g. "bwd_sm90"
    for family, mangled in (("fwd_sm90", GEMM_KERNELS[1]), ("bwd_sm90", GEMM_KERNELS[0])):
        if family not in families:
            continue
        gemm_kernels = [name for name in functions if name.startswith(mangled)]
        assert gemm_kernels, f"{library.path} has {family} kernels registered but no {mangled}* function"
        without_wgmma = [name for name in gemm_kernels if not any("HGMMA" in line for line in functions[name])]
        assert not without_wgmma, f"no HGMMA in {without_wgmma}"
    with_local = {name: local_memory_lines(lines)[:3] for name, lines in functions.items()
                  if local_memory_lines(lines)}
    unexpected = {name: lines for name, lines in with_local.items() if not KNOWN_LOCAL_MEMORY.match(name)}
    assert not unexpected, f"SM90 kernels using local memory: {unexpected}"
    known = [name for name in functions if KNOWN_LOCAL_MEMORY.match(name)]
    if known:
        assert any(name in with_local for name in known), \
            f"{known} no longer use local memory: remove KNOWN_LOCAL_MEMORY"
