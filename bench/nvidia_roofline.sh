#!/usr/bin/env bash
# What we ran on the device tool's NVIDIA GPU to check the roofline (issue 22; docs/validation.md):
# bench/workloads/roofline_kernels.py (a memory-bound add, a compute-bound bf16 GEMM, a latency-bound
# tiny kernel) under Nsight Compute's own roofline sections and under `profilectl counters --set
# roofline`, the same launches, ncu's default clock control (base) in both. Run from a folder that
# holds src/, profiling/, bench/ and wheels/ (rich, dacite, PyYAML for Python 3.12):
#   OUT=/some/dir bash bench/nvidia_roofline.sh
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG=$OUT/roofline.log
python3 -c "import rich, yaml, dacite" 2>/dev/null || {
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site wheels/*.whl && export PYTHONPATH=/tmp/site; }
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD/src PYTHONUNBUFFERED=1
W=bench/workloads/roofline_kernels.py
. "$(dirname "$0")/device_preamble.sh"  # timed LABEL cmd...: command, output, rc and wall time into the log
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv; ncu --version; python3 -c "import torch; print(torch.__version__)"; } >"$OUT/device.txt" 2>&1
timed bare python3 $W
# 1. Nsight Compute's own answer: speed of light, the FP32/FP64 roofline, the tensor-core roofline,
#    launch statistics and occupancy; raw page: one row per launch, every metric the sections use.
timed ncu-sections ncu --target-processes all --section SpeedOfLight --section SpeedOfLight_RooflineChart \
  --section SpeedOfLight_HierarchicalTensorRooflineChart --section LaunchStats --section Occupancy \
  --csv --page raw --log-file "$OUT/ncu_sections_raw.csv" python3 $W
# 2. profilectl's roofline set, the same launches
timed profilectl-roofline python3 -m profilectl counters --set roofline --traces-dir /tmp/rt-all -- python3 $W
cp /tmp/rt-all/*/raw/ncu_metrics.csv "$OUT/roofline_ncu_metrics.csv" 2>>"$LOG"
cp /tmp/rt-all/*/summary.json "$OUT/roofline_summary.json" 2>>"$LOG"
# 3. bounded: one GEMM launch only (what a roofline of one kernel costs)
timed profilectl-bounded python3 -m profilectl counters --set roofline --kernel 'gemm|nvjet|xmma' --launch-count 1 \
  --traces-dir /tmp/rt-one -- python3 $W
cp /tmp/rt-one/*/raw/ncu_metrics.csv "$OUT/roofline_bounded_ncu_metrics.csv" 2>>"$LOG"
python3 -m profilectl counters --set roofline --kernel 'gemm' --launch-count 1 --dry-run -- python3 $W >>"$LOG" 2>&1
ls -la /tmp/rt-all/*/ /tmp/rt-one/*/ >>"$LOG" 2>&1
# 4. the roofline section and chart from the stored summary (what a report shows)
python3 - /tmp/rt-all/*/summary.json "$OUT/roofline.html" >>"$LOG" 2>&1 <<'PY'
import sys
from pathlib import Path
from profilectl.read.summary import Summary
from profilectl.report.sections.roofline import roofline_section
from profilectl.report.roofline_chart import roofline_html
section = roofline_section(Summary.read(Path(sys.argv[1])))
for finding in section.findings:
    print(finding.sentence)
Path(sys.argv[2]).write_text(roofline_html(section))
PY
