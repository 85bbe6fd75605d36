#!/usr/bin/env bash
# What we ran on the device tool's 2-GPU NVIDIA machine for the multi-rank and bounded-profiling
# work and the Nsight Compute facts it relies on (see docs/validation.md). Carries .device-wheels
# (dacite). Writes $OUT/multirank.log and small result files. Two parts, each under the device
# tool's 10-minute command limit:
#   OUT=/some/dir bash bench/nvidia_multirank.sh facts   # ncu facts, one GPU: bare vs bounded
#   OUT=/some/dir bash bench/nvidia_multirank.sh ddp     # clock control, two GPUs: DDP
set -u
OUT=${OUT:-/tmp/out}; T=/tmp/mr-traces; mkdir -p "$T"
LOG=$OUT/multirank.log
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device-wheels/*.whl && export PYTHONPATH=/tmp/site
. "$(dirname "$0")/device_preamble.sh"  # timed LABEL cmd...: command, output, rc and wall time into the log
PART=${1:-facts}
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader >>"$LOG"
W="bench/workloads/transformer_train.py"
if [ "$PART" = facts ]; then
ncu --version >>"$LOG"
# ncu facts: kernel-name filters, launch windows, log-file placeholders, profile-from-start, NVTX
ncu --help > "$OUT/ncu-help.txt" 2>&1
SMALL="--layers 2 --width 256 --vocab 4096 --seq 128 --steps 4"
# A regular expression with a negative lookahead: which kernels does ncu keep?
ncu --metrics gpu__time_duration.sum --csv --kernel-name 'regex:^(?!.*(?:elementwise)).*' --launch-count 40 \
  python3 $W $SMALL > "$OUT/ncu-lookahead.csv" 2>>"$LOG"
echo "lookahead kept kernels containing 'elementwise': $(grep -c elementwise "$OUT/ncu-lookahead.csv")" >>"$LOG"
echo "lookahead kept kernels in all: $(grep -c gpu__time_duration "$OUT/ncu-lookahead.csv")" >>"$LOG"
# --log-file placeholders per process
ncu --metrics gpu__time_duration.sum --csv --launch-count 2 --log-file /tmp/ncu-%p.csv python3 $W $SMALL >>"$LOG" 2>&1
echo "log-file %p gave: $(ls /tmp/ncu-*.csv 2>&1)" >>"$LOG"
RANK_TEST=7 ncu --metrics gpu__time_duration.sum --csv --launch-count 2 --log-file '/tmp/ncuq-%q{RANK_TEST}.csv' python3 $W $SMALL >>"$LOG" 2>&1
echo "log-file %q{RANK_TEST} gave: $(ls /tmp/ncuq-*.csv 2>&1)" >>"$LOG"

# One GPU: the 20-step training loop of a ~135 M-parameter transformer, bare and bounded.
timed "bare 20 steps (1 GPU)" python3 $W --steps 20
timed "trace (torch.profiler, 1 GPU)" tools/profilectl trace --traces-dir "$T" -- python3 $W --steps 20
timed "counters --launch-count 200 (1 GPU)" tools/profilectl counters --launch-count 200 --traces-dir "$T" -- python3 $W --steps 20
timed "counters --steps 10:11 --kernel gemm (1 GPU)" tools/profilectl counters --steps 10:11 --kernel gemm --traces-dir "$T" -- python3 $W --steps 20
for r in "$T"/*-counters-*; do tools/profilectl report "$r" --top 3 >>"$LOG" 2>&1; done
else
# Clock control: the same kernels' durations under ncu (base / none) against the trace
timed "counters clock base (matmul)" tools/profilectl counters --traces-dir "$T/clock" -- python3 profiling/workloads/matmul.py --size 4096 --iters 5
timed "counters clock none (matmul)" tools/profilectl counters --clock-control none --traces-dir "$T/clock" -- python3 profiling/workloads/matmul.py --size 4096 --iters 5
timed "trace (matmul)" tools/profilectl trace --traces-dir "$T/clock" -- python3 profiling/workloads/matmul.py --size 4096 --iters 5
for r in "$T"/clock/*; do tools/profilectl report "$r" --format json > "$OUT/clock-$(basename "$r" | cut -d- -f2).json" 2>>"$LOG"; done

# Two GPUs: DDP under torchrun (NCCL)
timed "counters --steps 10:11 --launch-count 100 (1 GPU)" tools/profilectl counters --steps 10:11 --launch-count 100 --traces-dir "$T" -- python3 $W --steps 20
timed "bare DDP 2 ranks" torchrun --nproc_per_node=2 --standalone $W --steps 20
timed "trace DDP 2 ranks" tools/profilectl trace --traces-dir "$T/ddp" -- torchrun --nproc_per_node=2 --standalone $W --steps 20
timed "counters DDP --steps 10:11 --launch-count 100 (NCCL left out)" tools/profilectl counters --steps 10:11 --launch-count 100 --timeout 400 --traces-dir "$T/ddp" -- torchrun --nproc_per_node=2 --standalone $W --steps 20
for r in "$T"/ddp/* "$T"/*-counters-*; do tools/profilectl report "$r" --top 5 >>"$LOG" 2>&1; done
first=$(ls -d "$T"/ddp/*-trace-* | head -1)
tools/profilectl report "$first" --format json > "$OUT/ddp-trace-summary.json" 2>>"$LOG"
ls -la "$first/raw" >>"$LOG"
fi
cat "$OUT/timings.txt"
