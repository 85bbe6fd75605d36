#!/usr/bin/env bash
# Stragglers on real NCCL (issue 32): DDP of the transformer under torchrun on 2 or 4 GPUs, traced
# with profilectl over steady steps, with identical ranks and with one rank sleeping on the host
# each step (a known straggler); bare runs beside them for the profiler's own cost per rank.
#   OUT=/some/dir bash bench/nvidia_stragglers.sh NGPUS
# Writes $OUT/stragglers.log, $OUT/timings.txt, report-*.json and the traces as traces-*.tgz.
set -u
OUT=${OUT:-/tmp/out}; T=/tmp/st-traces; mkdir -p "$T"
LOG=$OUT/stragglers.log
N=${1:-2}
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device-wheels/*.whl && export PYTHONPATH=/tmp/site
. "$(dirname "$0")/device_preamble.sh"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader >>"$LOG"
W="bench/workloads/transformer_train.py"
SMALL="--layers 4 --width 512 --seq 256 --steps 30"
SLOW=$((N - 1))
timed "bare DDP $N ranks, identical" torchrun --nproc_per_node=$N --standalone $W $SMALL
timed "bare DDP $N ranks, rank $SLOW sleeps 50 ms" torchrun --nproc_per_node=$N --standalone $W $SMALL --sleep-rank $SLOW --sleep-ms 50
timed "trace DDP $N ranks, identical, steps 5:25" tools/profilectl trace --steps 5:25 --no-sample --traces-dir "$T/same" -- torchrun --nproc_per_node=$N --standalone $W $SMALL
timed "trace DDP $N ranks, rank $SLOW sleeps 50 ms, steps 5:25" tools/profilectl trace --steps 5:25 --no-sample --traces-dir "$T/slow" -- torchrun --nproc_per_node=$N --standalone $W $SMALL --sleep-rank $SLOW --sleep-ms 50
for kind in same slow; do
  run=$(ls -d "$T/$kind"/*-trace-* | head -1)
  tools/profilectl report "$run" --format json > "$OUT/report-$kind-$N.json" 2>>"$LOG"
  tools/profilectl report "$run" >>"$LOG" 2>&1
  tar -C "$run" -czf "$OUT/traces-$kind-$N.tgz" raw
done
grep -h "rank .* step" "$LOG" | sort | uniq >>"$OUT/timings.txt"
cat "$OUT/timings.txt"
