#!/usr/bin/env bash
# benchmarks/fa3_bwd/build.sh HOPPER OUT [CUTLASS_INCLUDE]: OUT/libfa3bwd.so, FlashAttention-3's SM90 backward at bf16
# head dims 64 and 128 behind driver.cu's C entry point, for bench_fa3_bwd.py. HOPPER: the hopper/ folder of a
# Dao-AILab/flash-attention checkout (measured at 0251105a); it is copied to OUT/hopper and its dispatch cut to the
# fixed-length, MHA, non-deterministic kernels (two per head dim, not eight). CUTLASS_INCLUDE: flashcute's by
# default. Needs nvcc for sm_90a; about 80 s on two cores.
set -euo pipefail
hopper=$1; out=$2
here=$(cd "$(dirname "$0")" && pwd)
inc=${3:-$(python3 -c "from flashcute._build import find_cutlass_include as f; print(f())")}
mkdir -p "$out"; rm -rf "$out/hopper"; cp -r "$hopper" "$out/hopper"
python3 - "$out/hopper/flash_bwd_launch_template.h" <<'PY'
import sys
path = sys.argv[1]; text = open(path).read()
head = "void run_mha_bwd_dispatch(Flash_bwd_params &params, cudaStream_t stream) {"
start = text.index(head); end = text.index("\n}\n", start) + 3
call = ("    run_flash_bwd<Arch, kHeadDim, kBlockM, kBlockN, T, Is_causal, Is_local, Has_softcap, false, false, false, "
        "Stages_dO, Stages_dS_or_QSm80, SdP_swapAB, dKV_swapAB, dQ_swapAB, NumMmaWarpGroups, AtomLayoutMSdP, "
        "AtomLayoutNdKV, AtomLayoutMdQ, V_in_regs>(params, stream);")
open(path, "w").write(text[:start] + head + "\n" + call + "\n}\n" + text[end:])
PY
flags=(-O3 -std=c++17 --use_fast_math --expt-relaxed-constexpr --expt-extended-lambda -DNDEBUG
       -DCUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED -DCUTLASS_ENABLE_GDC_FOR_SM90 -DCUTLASS_DEBUG_TRACE_LEVEL=0
       -DFLASHATTENTION_DISABLE_LOCAL -DFLASHATTENTION_DISABLE_SOFTCAP -DFLASHATTENTION_DISABLE_VARLEN
       -DFLASHATTENTION_DISABLE_SM8x -DFLASHATTENTION_DISABLE_CLUSTER -DFLASHATTENTION_DISABLE_PAGEDKV
       -gencode=arch=compute_90a,code=sm_90a -Xcompiler -fPIC -I"$out/hopper" -I"$inc")
units=("$out/hopper/instantiations/flash_bwd_hdim64_bf16_sm90.cu" "$out/hopper/instantiations/flash_bwd_hdim128_bf16_sm90.cu"
       "$here/driver.cu")
pids=()
for unit in "${units[@]}"; do nvcc "${flags[@]}" -c "$unit" -o "$out/$(basename "$unit" .cu).o" & pids+=($!); done
for pid in "${pids[@]}"; do wait "$pid"; done
nvcc -shared -o "$out/libfa3bwd.so" "$out"/*.o
echo "built $out/libfa3bwd.so"
