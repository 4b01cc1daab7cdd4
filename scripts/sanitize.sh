#!/usr/bin/env bash
# Builds the torch-free libraries' unit tests with AddressSanitizer + UndefinedBehaviorSanitizer (gcc)
# into build/sanitize (or $PPCTL_SANITIZE_BUILD_DIR) and runs them; any report fails the run.
#   scripts/sanitize.sh [TEST_EXECUTABLE...]   (default: all torch-free ones, listed below)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${PPCTL_SANITIZE_BUILD_DIR:-$ROOT/build/sanitize}"
PYTHON="$("$ROOT/scripts/setup.sh")"
# The test executables of tests/CMakeLists.txt that link no LibTorch.
TESTS=(core_tests config_tests hf_config_tests plan_tests comm_env_tests schedule_tests data_tests
  launch_tests observe_tests interop_tests checkpoint_meta_tests resume_tests prepare_tests)
if [ $# -gt 0 ]; then TESTS=("$@"); fi

FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g1"
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPPCTL_PYTHON="$PYTHON" \
    -DCMAKE_CXX_FLAGS="$FLAGS" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
    -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >&2
fi
cmake --build "$BUILD" -j "${PPCTL_SANITIZE_JOBS:-2}" --target "${TESTS[@]}" >&2

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
failed=()
for t in "${TESTS[@]}"; do
  start=$(date +%s.%N)
  if (cd "$BUILD/tests" && "./$t" --reporter compact > "$BUILD/$t.sanitize.log" 2>&1); then
    printf 'sanitize %-22s passed  %6.1f s\n' "$t" "$(awk "BEGIN {print $(date +%s.%N) - $start}")"
  else
    printf 'sanitize %-22s FAILED  (log: %s)\n' "$t" "$BUILD/$t.sanitize.log"
    grep -E "ERROR: AddressSanitizer|runtime error|SUMMARY|FAILED" "$BUILD/$t.sanitize.log" | head -20 >&2 || true
    failed+=("$t")
  fi
done
[ ${#failed[@]} -eq 0 ] || { echo "sanitize: failed: ${failed[*]}" >&2; exit 1; }
