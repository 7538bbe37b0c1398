#!/usr/bin/env bash
# Builds and runs the SM80 tile sweep: each line of variants.inc compiled in parallel, then linked.
#   benchmarks/sm80_tile_sweep/build.sh        (GENCODE defaults to sm_90a for the H200)
set -euo pipefail
cd "$(dirname "$0")/../.."
CUTLASS=${CUTLASS:-$(${PYTHON:-python3} -c "import cutlass_library, os; print(os.path.dirname(cutlass_library.__file__) + '/source/include')")}
BUILD=${BUILD:-/tmp/sm80_tile_sweep}
GENCODE=${GENCODE:--gencode=arch=compute_90a,code=sm_90a}
FLAGS=(-std=c++17 -O3 --use_fast_math -DNDEBUG --expt-relaxed-constexpr "$GENCODE" -Icsrc -I"$CUTLASS"
       -Ibenchmarks/sm80_tile_sweep)
mkdir -p "$BUILD"
objects=("$BUILD/main.o")
nvcc "${FLAGS[@]}" -c benchmarks/sm80_tile_sweep/sweep.cu -o "$BUILD/main.o" &
while read -r line; do
  read -r d m n w <<<"$(echo "$line" | tr -dc '0-9,' | tr ',' ' ')"
  object="$BUILD/v_${d}_${m}_${n}_${w}.o"
  objects+=("$object")
  nvcc "${FLAGS[@]}" -Xptxas -v -DVARIANT_HEAD_DIM=$d -DVARIANT_BLOCK_M=$m -DVARIANT_BLOCK_N=$n -DVARIANT_WARPS=$w \
    -c benchmarks/sm80_tile_sweep/sweep.cu -o "$object" 2>"$object.log" &
done < benchmarks/sm80_tile_sweep/variants.inc
wait
for f in "$BUILD"/v_*.log; do echo "$(basename "$f" .o.log): $(grep -h -E "spill|Used" "$f" | tr -s " " | tr "\n" " ")"; done
nvcc "${FLAGS[@]}" "${objects[@]}" -o "$BUILD/sweep"
"$BUILD/sweep"
