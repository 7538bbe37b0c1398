#!/usr/bin/env bash
# Shared-memory bank conflicts of the SM80 forward kernel: Nsight Compute's measurement beside
# flashcute.explain's prediction (flashcute.layout.banks applied to the kernel's own TiledCopy layouts).
#
#   bash benchmarks/ncu_bank_conflicts.sh [BATCH HEADS SEQLEN HDIM DTYPE]     (default: 1 16 2048 128 bf16)
#
# Needs a CUDA GPU, ncu on PATH (or NCU=/path/to/ncu) and permission to read GPU performance counters.
# One non-causal flashcute forward with backend="sm80" is profiled (--clock-control none); the extension is
# built and warmed up first, outside the profiler. The report and both tables are left in $OUT_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
BATCH=${1:-1} HEADS=${2:-16} SEQLEN=${3:-2048} HDIM=${4:-128} DTYPE=${5:-bf16}
NCU=${NCU:-ncu}
OUT_DIR=${OUT_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/flashcute-ncu.XXXXXX")}
mkdir -p "$OUT_DIR"
command -v "$NCU" >/dev/null || { echo "ncu not found: put Nsight Compute on PATH or set NCU=/path/to/ncu" >&2; exit 1; }

cat >"$OUT_DIR/forward.py" <<PY
import sys
import torch
import flashcute

dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}["$DTYPE"]
q, k, v = (torch.randn($BATCH, $SEQLEN, $HEADS, $HDIM, device="cuda", dtype=dtype) for _ in range(3))
out = flashcute.flash_attn_func(q, k, v, backend="sm80")
torch.cuda.synchronize()
print("forward ok", tuple(out.shape), file=sys.stderr)
PY

echo "== warm-up (builds the extension if needed)"
python "$OUT_DIR/forward.py"

# The metrics wanted; keep those this ncu/GPU knows (names differ across ncu versions).
wanted=(
  smsp__sass_inst_executed_op_shared_ld.sum
  smsp__sass_inst_executed_op_shared_st.sum
  smsp__sass_inst_executed_op_ldsm.sum
  smsp__sass_inst_executed_op_ldgsts.sum
  l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum
  l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum
  l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ldsm.sum
  l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ldgsts.sum
  l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum
  l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum
  l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ldsm.sum
  l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ldgsts.sum
  l1tex__data_pipe_lsu_wavefronts_mem_shared.sum
  l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum
)
known=$("$NCU" --query-metrics 2>/dev/null | awk '{print $1}' || true)
metrics=()
for m in "${wanted[@]}"; do
  if [ -z "$known" ] || grep -qx "${m%.*}" <<<"$known"; then metrics+=("$m"); else echo "(this ncu has no $m)"; fi
done
metric_list=$(IFS=,; echo "${metrics[*]}")

echo "== ncu on the first fwd_kernel launch"
"$NCU" --clock-control none --target-processes all -k regex:fwd_kernel -c 1 --metrics "$metric_list" \
  -f -o "$OUT_DIR/report" python "$OUT_DIR/forward.py"
"$NCU" -i "$OUT_DIR/report.ncu-rep" --csv --page raw --print-units base >"$OUT_DIR/measured.csv"

echo "== prediction (python -m flashcute.explain, no GPU involved)"
python -m flashcute.explain --arch sm80 --dtype "$DTYPE" --hdim "$HDIM" --seqlen "$SEQLEN" --batch "$BATCH" \
  --heads "$HEADS" -o "$OUT_DIR/explain" >/dev/null

python - "$OUT_DIR/measured.csv" "$OUT_DIR/explain/summary.json" <<'PY' | tee "$OUT_DIR/comparison.txt"
import csv, json, sys

rows = list(csv.reader(open(sys.argv[1])))
header = rows[0]
data = [r for r in rows[1:] if len(r) == len(header) and any(c.strip() for c in r)]
values = data[-1]   # the one profiled launch (earlier rows are units when ncu prints them)
measured = {}
for name, value in zip(header, values):
    try:
        measured[name] = float(value.replace(",", ""))
    except ValueError:
        pass
kernel = values[header.index("Kernel Name")] if "Kernel Name" in header else "?"
pred = json.load(open(sys.argv[2]))["predicted_ncu"]
zero = {"instructions": 0, "wavefronts": 0, "conflicts": 0}
ldsm, lds, sts, ldgsts = (pred.get(k, zero) for k in ("LDSM", "LDS", "STS", "LDGSTS"))
lines = [
    ("smsp__sass_inst_executed_op_shared_ld.sum", lds["instructions"] + ldsm["instructions"], "LDS + LDSM"),
    ("smsp__sass_inst_executed_op_shared_ld.sum", lds["instructions"], "LDS only (if ncu counts LDSM apart)"),
    ("smsp__sass_inst_executed_op_ldsm.sum", ldsm["instructions"], "LDSM"),
    ("smsp__sass_inst_executed_op_shared_st.sum", sts["instructions"], "STS"),
    ("smsp__sass_inst_executed_op_ldgsts.sum", ldgsts["instructions"], "LDGSTS (cp.async)"),
    ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum", lds["wavefronts"] + ldsm["wavefronts"], "LDS + LDSM"),
    ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ldsm.sum", ldsm["wavefronts"], "LDSM"),
    ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum", sts["wavefronts"], "STS"),
    ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ldgsts.sum", ldgsts["wavefronts"], "LDGSTS"),
    ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", lds["conflicts"] + ldsm["conflicts"], "LDS + LDSM"),
    ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ldsm.sum", ldsm["conflicts"], "LDSM"),
    ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum", sts["conflicts"], "STS"),
    ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ldgsts.sum", ldgsts["conflicts"], "LDGSTS"),
    ("l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
     sum(p["wavefronts"] for p in (lds, ldsm, sts, ldgsts)), "all shared accesses"),
    ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
     sum(p["conflicts"] for p in (lds, ldsm, sts, ldgsts)), "all shared accesses"),
]
print(f"kernel: {kernel}")
print(f"{'metric':<62} {'measured':>14} {'predicted':>14}  predicted from")
for metric, predicted, what in lines:
    m = measured.get(metric)
    shown = "n/a" if m is None else f"{m:,.0f}"
    print(f"{metric:<62} {shown:>14} {predicted:>14,}  {what}")
PY
echo "== files in $OUT_DIR (report.ncu-rep, measured.csv, comparison.txt, explain/)"
