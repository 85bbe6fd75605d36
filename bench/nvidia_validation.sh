#!/usr/bin/env bash
# What we ran on the device tool's NVIDIA machine to validate the NVIDIA paths for real (see
# docs/validation.md). Writes everything under $OUT/validation and tars it to $OUT/validation.tgz.
#   OUT=/some/dir bash bench/nvidia_validation.sh
set -u
OUT=${OUT:-/tmp/out}; V=$OUT/validation; T=$V/traces; mkdir -p "$V/fixtures" "$T"
run() { echo "\$ $*" | tee -a "$V/commands.log"; "$@" >>"$V/commands.log" 2>&1; echo "rc=$?" | tee -a "$V/commands.log"; }

python3 -c "import rich, yaml" 2>/dev/null || python3 -m pip install -q --no-index --find-links .device-wheels rich pyyaml
date -u > "$V/date.txt"
nvidia-smi --query-gpu=index,name,memory.total,compute_cap --format=csv,noheader,nounits > "$V/fixtures/nvidia-smi-query.txt" 2>&1
nvidia-smi > "$V/fixtures/nvidia-smi.txt" 2>&1
ncu --version > "$V/fixtures/ncu-version.txt" 2>&1
(nsys --version || echo "nsys: not found") > "$V/fixtures/nsys-version.txt" 2>&1
cat /proc/driver/nvidia/params > "$V/fixtures/proc-driver-nvidia-params.txt" 2>&1
cat /proc/self/status > "$V/fixtures/proc-self-status.txt"
ls /proc/driver/nvidia/gpus/ > /dev/null 2>&1 && cat /proc/driver/nvidia/gpus/*/information > "$V/fixtures/proc-driver-nvidia-gpu-information.txt" 2>&1
python3 -c "import torch, sys; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0), sys.version.split()[0])" > "$V/fixtures/torch.txt" 2>&1
ncu --query-metrics > "$V/fixtures/ncu-query-metrics.txt" 2>&1

run tools/profilectl env-check
tools/profilectl env-check --json > "$V/env-check.json" 2>&1
run tools/profilectl env-check --deep --json
run python3 bench/envcheck_speed.py --runs 10
run tools/profilectl profile --traces-dir "$T"
run tools/profilectl trace --traces-dir "$T"
run tools/profilectl counters --traces-dir "$T"
for set in extended compute_bound memory_bound communication instruction_mix; do
  run tools/profilectl counters --set $set --traces-dir "$T" -- python3 profiling/workloads/matmul.py --size 512 --iters 2
done
run tools/profilectl counters --set basic --traces-dir "$T" -- python3 -c "import sys; sys.exit(3)"
run tools/profilectl trace --timeout 3 --traces-dir "$T" -- python3 profiling/workloads/matmul.py --seconds 30
run python3 bench/overhead.py --size 4096 --iters 50 --rounds 5 --services profile,trace
python3 -c "import polars" 2>/dev/null && echo "polars present" >> "$V/commands.log" || echo "polars absent: csv-module readers" >> "$V/commands.log"
# Reading the real outputs back: report in every format, compare ncu vs torch kernel names, ls.
run tools/profilectl ls "$T"
for r in "$T"/*; do run tools/profilectl report "$r" --top 5; done
first_counters=$(ls -d "$T"/*-counters-* | head -1); first_trace=$(ls -d "$T"/*-trace-* | head -1)
run tools/profilectl report "$first_trace" --format html -o "$V/trace-report.html"
run tools/profilectl report "$first_counters/raw/ncu_metrics.csv" --format md
run tools/profilectl compare "$first_trace" "$first_counters"
# Unprivileged: the same ncu run as a non-root user, to see ERR_NVGPUCTRPERM (or not) for real.
NCU=$(command -v ncu); PY=$(command -v python3)
id nobody >/dev/null 2>&1 && run su -s /bin/bash nobody -c "cd /tmp && $NCU --metrics sm__warps_launched.sum $PY -c 'import torch; torch.ones(8, device=\"cuda\").sum().item()'"
find "$T" -name '*.json' -size +8M -delete  # keep the bundle small; tables and manifests stay
tar -C "$OUT" -czf "$OUT/validation.tgz" validation && rm -rf "$V"
