#!/usr/bin/env bash
# Nsight Compute's output as users keep it (issue 34): `ncu --csv ... > out.csv` (ncu's ==PROF== lines
# and the program's own prints land among the CSV), the details page of a --section run (display
# names with units, several launches per kernel: what aggregation over launches meets), the raw page
# of the same run, and the report itself (.ncu-rep, read back through `ncu --import`). The workload:
# bench/workloads/roofline_kernels.py (a memory-bound add, a compute-bound bf16 GEMM, a latency-bound
# tiny kernel, each launched twice) with a print of its own. Run from a folder that holds src/,
# profiling/ and bench/ on an NVIDIA machine with PyTorch and ncu:
#   OUT=/some/dir bash bench/nvidia_ncu_redirect.sh
# then, on any machine: profilectl report $OUT/details.csv (and raw.csv, profile.ncu-rep where ncu is).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG=$OUT/ncu_redirect.log
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD/src PYTHONUNBUFFERED=1
W=bench/workloads/roofline_kernels.py
. "$(dirname "$0")/device_preamble.sh"  # timed LABEL cmd...: command, output, rc and wall time into the log
{ nvidia-smi --query-gpu=name,driver_version --format=csv; ncu --version; python3 -c "import torch; print(torch.__version__)"; } >"$OUT/device.txt" 2>&1
SECTIONS=(--section SpeedOfLight --section SpeedOfLight_RooflineChart --section LaunchStats --section Occupancy)
# 1. the details page, redirected as users do: no --log-file, ncu's stdout (and the program's) into the file
echo "\$ ncu --target-processes all ${SECTIONS[*]} --csv python3 -c '...' > $OUT/details.csv" >>"$LOG"
ncu --target-processes all "${SECTIONS[@]}" --csv \
  python3 -c "print('workload: starting'); import runpy, sys; sys.argv=['$W']; runpy.run_path('$W', run_name='__main__'); print('workload: done')" \
  >"$OUT/details.csv" 2>>"$LOG"; echo "details: rc=$?" >>"$OUT/timings.txt"
# 2. the raw page of the same run, redirected too; and the --metrics raw page profilectl's roofline reads
ncu --target-processes all "${SECTIONS[@]}" --csv --page raw python3 $W >"$OUT/raw.csv" 2>>"$LOG"
echo "raw: rc=$?" >>"$OUT/timings.txt"
# 3. the report, and its raw page through --import (what profilectl runs for a .ncu-rep)
timed report ncu --target-processes all "${SECTIONS[@]}" --export "$OUT/profile" --force-overwrite python3 $W
timed import ncu --import "$OUT/profile.ncu-rep" --csv --page raw
ncu --import "$OUT/profile.ncu-rep" --csv --page raw >"$OUT/imported_raw.csv" 2>>"$LOG"
# 4. what profilectl makes of each
for f in details.csv raw.csv profile.ncu-rep; do
  timed "profilectl-$f" python3 -m profilectl report "$OUT/$f"
  python3 -m profilectl report "$OUT/$f" --format json >"$OUT/report_${f%%.*}.json" 2>>"$LOG"
done
head -c 600 "$OUT/details.csv" >>"$LOG"; grep -c '^==' "$OUT/details.csv" >>"$LOG"
