#!/usr/bin/env bash
# Benchmark: time from starting `ppctl train` to the first step's log line, for a tiny job with
# 1, 2 and 4 stages on CPU. Prints a table (median of N runs each). Usage:
#   scripts/bench/launch_to_first_step.sh [RUNS]      (default 5; builds ppctl first if needed)
# PPCTL=BINARY times that binary instead (not built), e.g. another build's, for a before/after.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${PPCTL_BUILD_DIR:-$ROOT/build}"
RUNS="${1:-5}"
if [ -z "${PPCTL:-}" ]; then
  "$ROOT/scripts/build.sh" --target ppctl
  PPCTL="$BUILD/app/ppctl"
fi
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
for i in $(seq 1 300); do echo "line $i: sphinx of black quartz, judge my vow"; done > "$WORK/corpus.txt"

printf '%-8s %-10s %-28s\n' stages runs "launch -> first step (s)"
for stages in 1 2 4; do
  cat > "$WORK/job.yaml" <<YAML
model: {layers: 4, hidden: 32, heads: 4, seq_len: 32}
pipeline: {stages: $stages, schedule: 1f1b, microbatches: 4, micro_batch_size: 4}
data: {path: corpus.txt}
train: {steps: 2, log_interval: 1}
YAML
  times=()
  for _ in $(seq 1 "$RUNS"); do
    start=$(date +%s.%N)
    first=""
    while IFS= read -r line; do
      if [ -z "$first" ] && [[ "$line" == *"step 1/"* ]]; then first=$(date +%s.%N); fi
    done < <("$PPCTL" train "$WORK/job.yaml" 2>&1)
    [ -n "$first" ] || { echo "no first step logged" >&2; exit 1; }
    times+=("$(awk -v a="$first" -v b="$start" 'BEGIN { print a - b }')")
  done
  median=$(printf '%s\n' "${times[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  printf '%-8s %-10s %-28.3f\n' "$stages" "$RUNS" "$median"
done
