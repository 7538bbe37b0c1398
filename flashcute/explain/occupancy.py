"""The device model: per-SM limits, and how many CTAs of a kernel fit on an SM."""

import math
from dataclasses import dataclass

from .. import kernel_configs
from . import ptxas


# Per-SM limits (CUDA programming guide, compute capabilities 8.0 and 9.0).
@dataclass(frozen=True)
class Device:
    name: str
    target: str                  # the ptxas target the kernel is compiled for there (flashcute.explain.ptxas)
    smem_per_sm: int             # bytes
    smem_per_cta_max: int
    smem_reserved_per_cta: int   # the runtime keeps 1 KB per CTA
    num_sms: int                 # A100 (SXM and PCIe), H100 SXM and H200: the decode kernel's split count needs it
    dram_gbps: float = 0.0       # peak DRAM bandwidth (datasheet): the decode kernel's pipelines follow it per SM
    regs_per_sm: int = kernel_configs.REGS_PER_SM
    reg_unit_per_warp: int = 256
    max_threads_per_sm: int = 2048
    max_ctas_per_sm: int = 32


A100 = Device("A100 (sm_80)", "sm_80", 164 * 1024, 163 * 1024, 1024, 108, 2039.0)
H100 = Device("H100 (sm_90a)", "sm_90a", 228 * 1024, 227 * 1024, 1024, 132, 3352.0)
# The H100's SM with HBM3e: the same occupancy everywhere; only the decode kernel's plans differ (its memory).
H200 = Device("H200 (sm_90a)", "sm_90a", 228 * 1024, 227 * 1024, 1024, 132, 4800.0)
# The SM80 kernels also run on H100 and H200 (built for sm_90a there); the SM90 kernels only there.
DEVICES = {"sm80": (A100, H100), "sm90": (H100,)}


def occupancy(device, threads, smem_bytes, registers):
    """(CTAs per SM, the limiting resource(s), {resource: CTAs it allows})."""
    warps = math.ceil(threads / 32)
    regs_per_warp = math.ceil(registers * 32 / device.reg_unit_per_warp) * device.reg_unit_per_warp
    limits = {
        "threads": device.max_threads_per_sm // threads,
        "CTA slots": device.max_ctas_per_sm,
        "shared memory": (device.smem_per_sm // (smem_bytes + device.smem_reserved_per_cta)
                          if smem_bytes <= device.smem_per_cta_max else 0),
        "registers": (device.regs_per_sm // regs_per_warp) // warps,
    }
    ctas = min(limits.values())
    return ctas, " and ".join(k for k, v in limits.items() if v == ctas), limits


def occupancy_numbers(cfg):
    """Registers (flashcute.explain.ptxas) and CTAs per SM on each device the kernel runs on. One SM80
    configuration compiles into a non-causal and a causal kernel: the occupancy is the non-causal one's, the
    causal one's registers come along; an SM90 configuration is one kernel."""
    kernel = ptxas.kernel_of(cfg)
    causal = cfg.arch == "sm90" and cfg.causal
    rows = []
    for device in DEVICES[cfg.arch]:
        regs = ptxas.numbers(kernel, cfg.dtype, device.target, causal)
        if regs is None:
            rows.append({"device": device.name, "registers": None})
            continue
        ctas, limiter, limits = occupancy(device, cfg.n_threads, cfg.smem_bytes, regs[0])
        row = {"device": device.name, "registers": regs[0], "spill_store_bytes": regs[1],
               "spill_load_bytes": regs[2], "registers_per_cta": regs[0] * cfg.n_threads, "ctas_per_sm": ctas,
               "limited_by": limiter, "limits": limits, "warps_per_sm": ctas * cfg.n_threads // 32,
               "occupancy": ctas * cfg.n_threads / device.max_threads_per_sm}
        if cfg.arch == "sm80":
            row["registers_causal"] = (ptxas.numbers(kernel, cfg.dtype, device.target, True) or (None,))[0]
        else:
            row["setmaxnreg"] = {"producer": cfg.producer_regs, "consumers": cfg.consumer_regs}
        rows.append(row)
    return rows
