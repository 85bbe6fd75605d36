#!/usr/bin/env bash
# Timeline analysis, per-step breakdown and CUDA API table on a real DDP trace, beside HTA (issue 13).
# For a machine with 2 NVIDIA GPUs, torch 2.x and (for the comparison) HolisticTraceAnalysis:
#   OUT=/tmp/out bash bench/nvidia_timeline.sh [STEPS]
# Runs `profilectl trace` on a 2-rank torchrun DDP of bench/workloads/transformer_train.py, prints
# the report's timeline, steps and API sections, then bench/hta_compare.py on the ranks' traces.
set -u
PROFILECTL=${PROFILECTL:-python3 tools/profilectl}
read -r -a PCTL <<< "$PROFILECTL"
STEPS=${1:-20}
OUT=${OUT:-/tmp/out}; D=$OUT/timeline; T=$D/traces; mkdir -p "$T"
W=(torchrun --nproc_per_node=2 --standalone bench/workloads/transformer_train.py --steps "$STEPS")

echo "\$ ${PCTL[*]} trace --json --traces-dir $T -- ${W[*]}"
start=$(date +%s.%N)
"${PCTL[@]}" trace --json --traces-dir "$T" -- "${W[@]}" > "$D/trace.json" 2> "$D/trace.stderr"
echo "rc=$? in $(python3 -c "import time; print(round(time.time() - $start, 1))") s"
run=$(python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['run_dir'])" "$D/trace.json")
echo "run: $run"; ls -la "$run/raw"/* | head -20
"${PCTL[@]}" report "$run" > "$D/report.txt" 2>&1; echo "report rc=$?"
COLUMNS=160 "${PCTL[@]}" report "$run" --top 3 | sed -n '/^Timeline/,$p'
"${PCTL[@]}" report "$run" --format json > "$D/summary.json" 2>>"$D/trace.stderr"
"${PCTL[@]}" report "$run" --format html -o "$D/report.html" 2>>"$D/trace.stderr"

# HTA reads every trace in one folder, the rank from each trace's distributedInfo
mkdir -p "$D/hta"
find "$run/raw" -name '*.json' -o -name '*.json.gz' | grep -v status | while read -r f; do cp "$f" "$D/hta/"; done
ls -la "$D/hta"
python3 bench/hta_compare.py --explain "$D/hta" 2>&1 | tee "$D/hta_compare.txt"
rm -rf "$D/hta" "$run/raw"  # keep the bundle small
