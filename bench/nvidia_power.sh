#!/usr/bin/env bash
# GPU power, energy and memory of a short training run on an NVIDIA machine (issue 13), and what the
# sampling costs: the same runs with --no-sample. For an H100/H200 with torch 2.x and nvidia-ml-py,
# no Docker; profilectl from a checkout (or installed: PROFILECTL=profilectl):
#   PROFILECTL="python3 tools/profilectl" OUT=/tmp/out bash bench/nvidia_power.sh [STEPS]
# Prints, per service and mode: status, wall time, timing/step medians, the power summary (source,
# samples, interval, average and peak W, energy J by counter and by trapezoid, peak memory), and
# nvidia-smi's own 100 ms readings taken during the sampled profile run as an independent check.
# Then bench/sampler_overhead.py (CPU per sweep, workload slowdown, beside nvidia-smi -lms 100).
# Everything lands in $OUT/power/ (summary.txt, the runs' JSON, the run folders without raw/).
set -u
PROFILECTL=${PROFILECTL:-python3 tools/profilectl}
read -r -a PCTL <<< "$PROFILECTL"
STEPS=${1:-60}
OUT=${OUT:-/tmp/out}; P=$OUT/power; T=$P/traces; mkdir -p "$T"
WORKLOAD=(python3 bench/workloads/transformer_train.py --steps "$STEPS")

python3 -c "import pynvml" 2>/dev/null || echo "WARNING: nvidia-ml-py (pynvml) is not importable: nothing will be sampled"
nvidia-smi --query-gpu=index,name,driver_version,power.limit,memory.total --format=csv | tee "$P/gpus.txt"

for service in profile trace; do
  for mode in sample no-sample; do
    args=(--json --traces-dir "$T/$service-$mode")
    [ "$mode" = no-sample ] && args+=(--no-sample)
    [ "$service" = profile ] && args+=(--repeat 3 --warmup 1)
    smi=""
    if [ "$service" = profile ] && [ "$mode" = sample ]; then  # an independent reading of the same run
      nvidia-smi --query-gpu=timestamp,index,power.draw,memory.used --format=csv,noheader,nounits -lms 100 \
        > "$P/nvidia-smi-during-profile.csv" 2>/dev/null & smi=$!
    fi
    echo "\$ ${PCTL[*]} $service ${args[*]} -- ${WORKLOAD[*]}"
    "${PCTL[@]}" "$service" "${args[@]}" -- "${WORKLOAD[@]}" > "$P/$service-$mode.json" 2> "$P/$service-$mode.stderr"
    echo "rc=$?"
    [ -n "$smi" ] && kill "$smi" 2>/dev/null && wait "$smi" 2>/dev/null
  done
done

python3 - "$P" <<'EOF' | tee "$P/summary.txt"
import json, statistics, sys
from pathlib import Path
P = Path(sys.argv[1])
def load(name):
    try:
        return json.loads((P / f"{name}.json").read_text())
    except (OSError, ValueError) as exc:
        return {"status": f"unreadable ({exc})", "manifest": {}, "summary": {}}
for service in ("profile", "trace"):
    runs = {mode: load(f"{service}-{mode}") for mode in ("sample", "no-sample")}
    for mode, r in runs.items():
        s, m = r.get("summary") or {}, r.get("manifest") or {}
        timing, steps = s.get("timing") or {}, s.get("step_time") or {}
        print(f"{service} {mode}: {r.get('status')} in {m.get('wall_seconds')} s; timing median "
              f"{timing.get('median_s')} s; steady step median {steps.get('median_s')} s; GPU time "
              f"{(s.get('totals') or {}).get('gpu_time_ns')} ns")
        p = s.get("power")
        if p:
            print(f"  power: {p['source']} ({p['power_reading']}), {p['samples']} samples every "
                  f"{p['interval_s'] * 1e3:.1f} ms over {p['duration_s']:.2f} s")
            print(f"  average {p['avg_power_w']:.1f} W, peak {p['peak_power_w']:.1f} W, energy {p['energy_j']:.1f} J "
                  f"({p['energy_method']}; trapezoid {p['trapezoid_energy_j']:.1f} J), peak memory "
                  f"{p['peak_memory_bytes'] / 2**30:.2f} GiB")
        for note in m.get("notes", []):
            if "power sampling" in note:
                print(f"  note: {note}")
    on, off = ((runs[k].get("manifest") or {}).get("wall_seconds") for k in ("sample", "no-sample"))
    if on and off:
        print(f"  sampling overhead ({service}, wall time of the whole run): {on:.2f} s vs {off:.2f} s "
              f"({100 * (on - off) / off:+.1f} %)")
    medians = [((runs[k].get("summary") or {}).get("timing") or {}).get("median_s") for k in ("sample", "no-sample")]
    if all(medians):
        print(f"  sampling overhead ({service}, timing median): {medians[0]:.3f} s vs {medians[1]:.3f} s "
              f"({100 * (medians[0] - medians[1]) / medians[1]:+.1f} %)")
smi = P / "nvidia-smi-during-profile.csv"
rows = [line.split(",") for line in smi.read_text().splitlines() if line.count(",") == 3] if smi.exists() else []
if rows:
    watts = [float(r[2]) for r in rows if r[2].strip() not in ("", "[N/A]")]
    memory = [float(r[3]) for r in rows if r[3].strip() not in ("", "[N/A]")]
    print(f"nvidia-smi during the sampled profile run: {len(rows)} readings, power mean {statistics.fmean(watts):.1f} W "
          f"(all GPUs' readings pooled), max {max(watts):.1f} W; memory max {max(memory) / 1024:.2f} GiB")
EOF

python3 bench/sampler_overhead.py --seconds "${SAMPLER_SECONDS:-10}" --rounds "${SAMPLER_ROUNDS:-5}" 2>&1 | tee "$P/sampler_overhead.txt"
find "$T" -type d -name raw -prune -exec rm -rf {} +  # keep the bundle small: manifests, summaries, telemetry.csv
tar -C "$OUT" -czf "$OUT/power.tgz" power && echo "bundle: $OUT/power.tgz"
