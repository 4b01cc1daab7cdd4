#!/usr/bin/env bash
# Runs the libFuzzer targets of tests/fuzz (built by scripts/fuzz_build.sh into build/fuzz).
#   scripts/fuzz.sh [--runs N | --seconds S] [TARGET...]
# --runs N: at least N executions per target (default 100000: the long run, docs/measurements.md);
# --seconds S: S seconds per target (the test suite's short run); both: whichever comes first. Each target starts from its seed
# corpus tests/fuzz/TARGET/ (spec_yaml: and configs/*.yaml; tests/fuzz/TARGET/ also holds every crash input found so far, the regression set);
# new inputs go to a temporary folder, removed at the end. A crash leaves its input in
# build/fuzz/findings/TARGET/ and makes the script exit 1. Prints one line per target.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${PPCTL_FUZZ_BUILD_DIR:-$ROOT/build/fuzz}"
RUNS=()
SECONDS_LIMIT=()
TARGETS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) RUNS=(-runs="$2"); shift 2 ;;
    --seconds) SECONDS_LIMIT=(-max_total_time="$2"); shift 2 ;;
    -*) echo "fuzz.sh: unknown option $1 (use --runs N or --seconds S)" >&2; exit 2 ;;
    *) TARGETS+=("$1"); shift ;;
  esac
done
if [ ${#RUNS[@]} -eq 0 ] && [ ${#SECONDS_LIMIT[@]} -eq 0 ]; then RUNS=(-runs=100000); fi
if [ ${#TARGETS[@]} -eq 0 ]; then
  TARGETS=(spec_yaml schedule_csv checkpoint_meta megatron_index id_scan_cache hf_tokenizer safetensors hf_config
           chat_reader)
fi

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
status=0
for target in "${TARGETS[@]}"; do
  binary="$BUILD/fuzz_$target"
  if [ ! -x "$binary" ]; then
    echo "fuzz.sh: $binary is missing (fix: run scripts/fuzz_build.sh, which needs the Debian packages clang" \
         "and libclang-rt-14-dev that scripts/setup.sh installs)" >&2
    exit 1
  fi
  mkdir -p "$WORK/$target" "$BUILD/findings/$target"
  if [ "$target" = spec_yaml ]; then cp "$ROOT"/configs/*.yaml "$WORK/$target/"; fi  # the examples are seeds too
  start=$(date +%s.%N)
  # -max_len 4096: seeds are under 2 KB; -timeout: one input over 10 s is a finding (a hang).
  if "$binary" "${RUNS[@]}" "${SECONDS_LIMIT[@]}" -max_len=4096 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="$BUILD/findings/$target/" "$WORK/$target" "$ROOT/tests/fuzz/$target" \
       > "$WORK/$target.log" 2>&1; then
    result="0 crashes"
  else
    result="CRASH (input in $BUILD/findings/$target/)"
    status=1
    tail -40 "$WORK/$target.log" >&2
  fi
  seconds=$(awk "BEGIN {print $(date +%s.%N) - $start}")
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$WORK/$target.log" | tail -1)
  printf 'fuzz %-16s %10s executions %7.1f s  %s\n' "$target" "${runs:-?}" "$seconds" "$result"
done
exit $status
