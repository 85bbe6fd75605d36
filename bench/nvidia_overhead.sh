#!/usr/bin/env bash
# Profiling cost of `trace` on one NVIDIA GPU (issue 38): bench/overhead.py with bare, the default
# window, a window after warm-up (--steps 3:6) and every step, interleaved, medians of $ROUNDS rounds.
# From the repository root, python3 with torch and CUDA, no Docker, no network (carry .device-wheels
# for rich/yaml/dacite/msgspec/isal where python3 lacks them):
#   OUT=/some/dir ROUNDS=3 bash bench/nvidia_overhead.sh
# Writes $OUT/overhead.log (every round's figures and the table) and $OUT/overhead.json.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG=$OUT/overhead.log
export PYTHONUNBUFFERED=1
if ls .device-wheels/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device-wheels/*.whl && export PYTHONPATH=/tmp/site
fi
. "$(dirname "$0")/device_preamble.sh"
{ nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
  python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"
  uptime; } | tee -a "$LOG"
timed overhead python3 bench/overhead.py --rounds "${ROUNDS:-3}" --json "$OUT/overhead.json" \
  --mode "trace=::trace" --mode "trace --steps 3:6=::trace --steps 3:6" --mode "trace --steps all=::trace --steps all"
tail -8 "$LOG"
