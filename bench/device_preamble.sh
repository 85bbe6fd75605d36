#!/usr/bin/env bash
# Sourced by the bench/nvidia_*.sh device scripts after they set OUT and LOG; defines
#   timed LABEL CMD...   run CMD with its command line and output appended to $LOG, and its exit
#                        code and wall time as "LABEL: rc=N wall=S.mmm s" into $LOG and $OUT/timings.txt
# Run on its own (or with --help) it only says this.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  sed -n '2,6s/^# \{0,1\}//p' "$0"
  exit 0
fi
timed() {
  local label=$1; shift
  echo "\$ $*" >>"$LOG"
  local start=$(date +%s%N)
  "$@" >>"$LOG" 2>&1; local rc=$?
  local ms=$(( ($(date +%s%N) - start) / 1000000 ))
  printf '%s: rc=%s wall=%d.%03d s\n' "$label" "$rc" $((ms / 1000)) $((ms % 1000)) | tee -a "$LOG" >>"$OUT/timings.txt"
}
