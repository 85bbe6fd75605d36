#!/usr/bin/env bash
# What the trace already knows (issue 37), checked on real NVIDIA GPUs: run from the checkout's root
# on a machine with 2 GPUs, PyTorch, Nsight Compute (ncu) and the carried wheels in .device-wheels/:
#   OUT=/some/dir bash bench/nvidia_trace_knows.sh
# 1. operators on the roofline from shapes: bf16 GEMMs of known shapes traced with `trace --shapes`,
#    and the same launches under `counters --set roofline` (ncu, clocks left to the GPU): FLOP per
#    launch and FLOP/s from the shapes within 10 % of Nsight Compute's; a transformer training run
#    with shapes, its operator roofline in HTML;
# 2. memory: `trace --memory` of a small training run, the replayed peak against
#    torch.cuda.max_memory_allocated(); the same run made to run out of memory, the failed
#    allocation named with what was alive;
# 3. collectives: known sizes over NCCL on 2 GPUs (and over gloo), each call's size against what
#    the script sent, and the rank made to sleep named the last to arrive.
# Prints one `CHECK name: PASS|FAIL figures` line per comparison (bench/knows_check.py) and keeps
# $OUT/knows.log (every command and its output), $OUT/timings.txt, $OUT/*.html (the reports, charts
# included) and $OUT/runs.tgz (the run directories). Every command is bounded by `timeout`: the
# whole script stays under 8 minutes.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG=$OUT/knows.log
T=/tmp/knows-traces; rm -rf "$T"; mkdir -p "$T"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -c "import dacite, msgspec" 2>/dev/null || {
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device-wheels/*.whl && export PYTHONPATH=/tmp/site; }
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD/src
. "$(dirname "$0")/device_preamble.sh"  # timed LABEL cmd...: command, output, rc and wall time into the log
{ nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv; ncu --version | tail -1
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"; } | tee "$OUT/device.txt" >>"$LOG" 2>&1
W=bench/workloads
PC="python3 -m profilectl"  # each run under its own timeout below: 435 s in all at most, the checks ~30 s
CHECK="python3 bench/knows_check.py"
run_of() { ls -d "$T/$1"/*-trace-* "$T/$1"/*-counters-* 2>/dev/null | head -1; }

# 1. GEMMs from shapes against Nsight Compute on the same launches
timed "trace --shapes, GEMMs" timeout 45 $PC trace --shapes --no-sample --traces-dir "$T/gemm" -- python3 $W/knows_gemms.py
timed "counters --set roofline, the same GEMMs" timeout 120 $PC counters --set roofline --clock-control none --no-sample \
  --kernel 'gemm|nvjet|xmma|cutlass|sm90|sm80' --traces-dir "$T/ncu" -- python3 $W/knows_gemms.py
grep -h "KNOWS_GEMM" "$(run_of gemm)/stdout.log" > "$OUT/gemm.txt" 2>>"$LOG"
$CHECK gemm "$(run_of gemm)" "$(run_of ncu)" "$OUT/gemm.txt" 2>>"$LOG" | tee -a "$LOG"
# a transformer training run with shapes: its operators on the roofline (the HTML chart)
timed "trace --shapes, transformer" timeout 75 $PC trace --shapes --steps 3:6 --no-sample --traces-dir "$T/transformer" -- \
  python3 $W/transformer_train.py --layers 6 --width 1024 --seq 512 --batch 8 --steps 8
$CHECK html "$(run_of transformer)" "$OUT/transformer.html" 2>>"$LOG" | tee -a "$LOG"
timeout 30 $PC report "$(run_of transformer)" >>"$LOG" 2>&1

# 2. memory: the peak, then a run that runs out of memory
timed "trace --memory" timeout 45 $PC trace --memory --no-sample --traces-dir "$T/memory" -- python3 $W/knows_memory.py
$CHECK memory "$(run_of memory)" "$(run_of memory)/stdout.log" 2>>"$LOG" | tee -a "$LOG"
$CHECK html "$(run_of memory)" "$OUT/memory.html" 2>>"$LOG" | tee -a "$LOG"
timed "trace --memory, out of memory" timeout 45 $PC trace --memory --no-sample --traces-dir "$T/oom" -- python3 $W/knows_memory.py --oom
$CHECK oom "$(run_of oom)" "$(run_of oom)/stdout.log" 2>>"$LOG" | tee -a "$LOG"
$CHECK html "$(run_of oom)" "$OUT/oom.html" 2>>"$LOG" | tee -a "$LOG"
ls -la "$(run_of memory)/raw" "$(run_of oom)/raw" >>"$LOG" 2>&1

# 3. collectives over NCCL on 2 GPUs, and over gloo
timed "trace, NCCL collectives on 2 GPUs" timeout 60 $PC trace --no-sample --traces-dir "$T/nccl" -- \
  torchrun --nproc_per_node=2 --standalone $W/knows_collectives.py
$CHECK collectives "$(run_of nccl)" "$(run_of nccl)/stdout.log" 2>>"$LOG" | tee -a "$LOG"
$CHECK html "$(run_of nccl)" "$OUT/nccl.html" 2>>"$LOG" | tee -a "$LOG"
timed "trace, gloo collectives on CPU" timeout 45 $PC trace --no-sample --backend torch --traces-dir "$T/gloo" -- \
  torchrun --nproc_per_node=2 --standalone $W/knows_collectives.py --backend gloo --rounds 3
$CHECK collectives "$(run_of gloo)" "$(run_of gloo)/stdout.log" 2>>"$LOG" | tee -a "$LOG"

# the NCCL inspector plugin beside the trace, where one is given (NCCL_INSPECTOR_PLUGIN=/path/to/
# libnccl-profiler-inspector.so, built from NCCL's ext-profiler/inspector): its busbw in the report's table
if [ -n "${NCCL_INSPECTOR_PLUGIN:-}" ] && [ -f "$NCCL_INSPECTOR_PLUGIN" ]; then
  timed "trace, NCCL collectives with the inspector" timeout 60 $PC trace --no-sample --traces-dir "$T/inspector" \
    --env "NCCL_PROFILER_PLUGIN=$NCCL_INSPECTOR_PLUGIN" --env NCCL_INSPECTOR_ENABLE=1 \
    --env NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS=500 -- \
    torchrun --nproc_per_node=2 --standalone $W/knows_collectives.py
  ls -R "$(run_of inspector)/raw" >>"$LOG" 2>&1
  timeout 30 $PC report "$(run_of inspector)" 2>&1 | grep -A12 "NCCL/RCCL inspector" | tee -a "$LOG"
fi

tar -C "$T" -czf "$OUT/runs.tgz" . 2>>"$LOG"
echo "--- summary"; grep -h "^CHECK" "$LOG" | sort | uniq -c | sed 's/^ *1 //'; cat "$OUT/timings.txt"
