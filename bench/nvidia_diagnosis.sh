#!/usr/bin/env bash
# The known-answer runs of the diagnosis (issue 19) on the device tool's one NVIDIA GPU: each case of
# bench/workloads/diagnosis_cases.py through `profilectl trace`; 2-rank cases run under torchrun over
# gloo with both ranks on the one GPU. Run from a copy of the worktree holding src/, profiling/,
# bench/ and site/ (profilectl's pure-Python dependencies: the device has no registry).
#   OUT=/some/dir bash bench/nvidia_diagnosis.sh [CASE...]   (default: every case)
# Writes $OUT/diagnosis.log (commands, exit codes, reports) and $OUT/runs.tgz (the run directories).
set -u
OUT=${OUT:-/tmp/out}; T=/tmp/diag-traces; rm -rf "$T"; mkdir -p "$T"
LOG=$OUT/diagnosis.log
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:$PWD/site
W=bench/workloads/diagnosis_cases.py
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >>"$LOG" 2>&1
python3 -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)' >>"$LOG" 2>&1
case_run() {  # case_run NAME cmd...
  local name=$1; shift
  echo "=== $name: \$ $*" >>"$LOG"
  local start=$(date +%s%N)
  python3 -m profilectl trace --timeout 150 --traces-dir "$T/$name" -- "$@" >>"$LOG" 2>&1; local rc=$?
  echo "=== $name: rc=$rc wall=$(( ($(date +%s%N) - start) / 1000000 )) ms" >>"$LOG"
  for r in "$T/$name"/*; do [ -f "$r/manifest.json" ] && python3 -m profilectl report "$r" >>"$LOG" 2>&1; done
}
TR="torchrun --nproc_per_node=2 --standalone"
for name in ${*:-launch input item own ddp straggler crash compile}; do
  case $name in
    launch|input) case_run $name python3 $W $name --steps 8 ;;
    item) case_run item python3 $W item --steps 6 ;;
    own) rm -rf own-traces; case_run own python3 $W own --steps 8; cp -r own-traces "$T/own/workload-own-traces" 2>>"$LOG" ;;
    ddp|straggler|crash) case_run $name $TR $W $name --steps 10 ;;
    compile) case_run compile python3 $W compile --steps 6 ;;
  esac
done
du -sh "$T"/* >>"$LOG"
tar czf "$OUT/runs.tgz" -C "$T" .
ls -la "$OUT" >>"$LOG"
