#!/usr/bin/env bash
# Builds the SM90 harness with several instantiations compiled in parallel, then runs it.
#   tests/sm90_harness/build.sh                 # bf16 and fp16, head dims 64 128 256
#   CONFIGS="bf16:128" tests/sm90_harness/build.sh --bench
#   tests/sm90_harness/build.sh --build-only    # build $OUT/sm90_harness, do not run it
# CONFIGS: space-separated dtype:head_dim with dtype bf16 or fp16. Extra arguments go to the harness.
set -euo pipefail
cd "$(dirname "$0")/../.."
CUTLASS=${CUTLASS:-$(${PYTHON:-python3} -c "import cutlass_library, os; print(os.path.dirname(cutlass_library.__file__) + '/source')")}
CONFIGS=${CONFIGS:-"bf16:64 bf16:128 bf16:256 fp16:64 fp16:128 fp16:256"}
OUT=${OUT:-/tmp/sm90_harness_build}
mkdir -p "$OUT"
FLAGS=(-std=c++17 -O3 --use_fast_math -DNDEBUG --expt-relaxed-constexpr -DCUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED
       -gencode=arch=compute_90a,code=sm_90a -Icsrc -I"$CUTLASS/include")

objects=("$OUT/harness.o")
pids=()
nvcc "${FLAGS[@]}" -c tests/sm90_harness/harness.cu -o "$OUT/harness.o" &
pids+=($!)
for config in $CONFIGS; do
  dtype=${config%%:*}
  hdim=${config##*:}
  if [[ $dtype == bf16 ]]; then element=cutlass::bfloat16_t; tag=kBFloat16; else element=cutlass::half_t; tag=kFloat16; fi
  object="$OUT/fwd_sm90_${dtype}_hdim${hdim}.o"
  objects+=("$object")
  nvcc "${FLAGS[@]}" -Xptxas -v -DFC_ELEMENT=$element -DFC_DTYPE=$tag -DFC_HEAD_DIM=$hdim \
    -c tests/sm90_harness/instantiate.cu -o "$object" 2> "$object.ptxas.log" &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
if [[ $status != 0 ]]; then cat "$OUT"/*.ptxas.log >&2; exit 1; fi
grep -h -A2 "Compiling entry" "$OUT"/*.ptxas.log | grep -v "^--" || true
nvcc "${FLAGS[@]}" "${objects[@]}" -o "$OUT/sm90_harness"
if [[ ${1:-} == --build-only ]]; then exit 0; fi
"$OUT/sm90_harness" "$@"
