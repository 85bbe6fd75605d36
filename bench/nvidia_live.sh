#!/usr/bin/env bash
# The job while it runs (issue 37) on 2 NVIDIA GPUs: `profile --live` of DDP under torchrun with one
# rank sleeping 50 ms on the host every step (a known straggler), and the same with identical ranks;
# `profilectl watch` follows the first from beside it. From the repository root, python3 with torch
# and CUDA, no Docker, no network (carry .device-wheels for rich/yaml/dacite where python3 lacks them):
#   OUT=/some/dir bash bench/nvidia_live.sh
# Writes $OUT/live-{slow,same}.log (profilectl's terminal output: the workload's and the live lines),
# $OUT/live-{slow,same}.jsonl (live.jsonl as written), $OUT/watch-slow.log, $OUT/manifest-*.json and
# $OUT/live-summary.txt: at which step the straggler was first named, its lag and step, and the
# per-step cost of the hook's step line (bench/hook_step_cost.py).
set -u
OUT=${OUT:-/tmp/out}; T=/tmp/live-traces; mkdir -p "$OUT" "$T"
LOG=$OUT/live.log
SUMMARY=$OUT/live-summary.txt
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if ls .device-wheels/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device-wheels/*.whl && export PYTHONPATH=/tmp/site
fi
. "$(dirname "$0")/device_preamble.sh"
python3 -c "import pynvml" 2>/dev/null || echo "WARNING: nvidia-ml-py (pynvml) is not importable: no GPU busy or power" | tee -a "$SUMMARY"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee -a "$SUMMARY"
W=(torchrun --nproc_per_node=2 --standalone bench/workloads/transformer_train.py --layers 4 --width 512 --seq 256 --steps 40)

first_named() {  # KIND: the first live.jsonl line that names a straggler, and the last line's verdict
  python3 - "$OUT/live-$1.jsonl" "$1" <<'EOF' | tee -a "$SUMMARY"
import json, sys
path, kind = sys.argv[1], sys.argv[2]
try:
    records = [json.loads(line) for line in open(path)]
except OSError as exc:
    print(f"{kind}: no live.jsonl ({exc})"); raise SystemExit
named = [r for r in records if r["straggler"]]
print(f"{kind}: {len(records)} updates; first named: " + (
    f"rank {named[0]['straggler']['rank']} at step {named[0]['straggler']['named_since_step']} (seen by the poll at "
    f"step {named[0]['common_step']}), lag {named[0]['straggler']['lag_ms']} ms, its step "
    f"{named[0]['straggler']['step_ms']} ms" if named else "nobody"))
last = records[-1] if records else None
if last:
    print(f"{kind}: last update (step {last['common_step']}): {last['verdict']}")
    for r in last["ranks"]:
        print(f"{kind}:   rank {r['rank']}: median step {r['median_step_ms']} ms, lag {r['lag_ms']} ms, GPU {r['gpu']} "
              f"busy {r['gpu_busy_pct']} %, {r['gpu_power_w']} W")
EOF
}

# the straggler: profile --live in the background, `watch` from beside it
echo "\$ tools/profilectl profile --live --traces-dir $T/slow -- ${W[*]} --sleep-rank 1 --sleep-ms 50" >>"$LOG"
start=$(date +%s%N)
tools/profilectl profile --live --traces-dir "$T/slow" -- "${W[@]}" --sleep-rank 1 --sleep-ms 50 >"$OUT/live-slow.log" 2>&1 &
pid=$!
for _ in $(seq 600); do ls -d "$T"/slow/*-profile-* >/dev/null 2>&1 && break; sleep 0.1; done
run=$(ls -d "$T"/slow/*-profile-* 2>/dev/null | head -1)
[ -n "$run" ] && timeout 300 tools/profilectl watch "$run" >"$OUT/watch-slow.log" 2>&1
echo "watch exit: $?" >>"$OUT/watch-slow.log"
wait $pid; rc=$?
ms=$(( ($(date +%s%N) - start) / 1000000 ))
printf 'profile --live, rank 1 sleeps 50 ms: rc=%s wall=%d.%03d s\n' "$rc" $((ms / 1000)) $((ms % 1000)) | tee -a "$LOG" "$SUMMARY"
cp "$run/live.jsonl" "$OUT/live-slow.jsonl" 2>/dev/null; cp "$run/manifest.json" "$OUT/manifest-slow.json" 2>/dev/null
first_named slow

# identical ranks
LOG=$OUT/live-same.log timed "profile --live, identical ranks" tools/profilectl profile --live --traces-dir "$T/same" -- "${W[@]}"
cat "$OUT/live-same.log" >>"$LOG"
run=$(ls -d "$T"/same/*-profile-* 2>/dev/null | head -1)
cp "$run/live.jsonl" "$OUT/live-same.jsonl" 2>/dev/null; cp "$run/manifest.json" "$OUT/manifest-same.json" 2>/dev/null
cat "$OUT/timings.txt" >>"$SUMMARY" 2>/dev/null
first_named same

grep -h "transformer_train: rank" "$OUT/live-slow.log" "$OUT/live-same.log" | tee -a "$SUMMARY"
python3 bench/hook_step_cost.py | tee -a "$SUMMARY"
grep -h "live view:" "$OUT"/manifest-*.json | tee -a "$SUMMARY"
