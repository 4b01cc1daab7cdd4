#!/usr/bin/env bash
# Builds ppctl's torch-free unit tests with a sanitizer and runs them; any report fails the run.
#   scripts/sanitize.sh [TEST_EXECUTABLE...]            AddressSanitizer + UndefinedBehaviorSanitizer (gcc) into
#                                                       build/sanitize (or $PPCTL_SANITIZE_BUILD_DIR); default: all
#                                                       torch-free test programs, listed below
#   scripts/sanitize.sh --thread [TEST_EXECUTABLE...]   ThreadSanitizer into build/tsan (or $PPCTL_TSAN_BUILD_DIR);
#                                                       default: the programs of the code with threads (the launcher's
#                                                       supervision and signal handling)
#   scripts/sanitize.sh --self-test                     both builds must report a planted use-after-free and a planted
#                                                       data race (tests/sanitize/planted.cpp); exits 0 when they do
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="$("$ROOT/scripts/setup.sh")"

MODE=address
case "${1:-}" in
  --thread) MODE=thread; shift ;;
  --self-test) MODE=self-test; shift ;;
esac

# Configures (once) and builds `targets` in a sanitizer build folder: $1 = folder, $2 = -fsanitize= list.
build() {
  local dir="$1" sanitizers="$2"; shift 2
  if [ ! -f "$dir/CMakeCache.txt" ]; then
    cmake -S "$ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPPCTL_PYTHON="$PYTHON" \
      -DCMAKE_CXX_FLAGS="-fsanitize=$sanitizers -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g1" \
      -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=$sanitizers" -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >&2
  fi
  cmake --build "$dir" -j "${PPCTL_SANITIZE_JOBS:-2}" --target "$@" >&2
}

ASAN_BUILD="${PPCTL_SANITIZE_BUILD_DIR:-$ROOT/build/sanitize}"
TSAN_BUILD="${PPCTL_TSAN_BUILD_DIR:-$ROOT/build/tsan}"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"

if [ "$MODE" = self-test ]; then
  build "$ASAN_BUILD" address,undefined sanitizer_planted
  build "$TSAN_BUILD" thread sanitizer_planted
  ok=1
  # $1 = build, $2 = fault, $3 = what the report must say
  expect_report() {
    local out
    if out=$("$1/tests/sanitizer_planted" "$2" 2>&1); then
      echo "sanitize self-test: the planted $2 ran clean in $1: the build does not catch it" >&2; ok=0
    elif ! grep -q "$3" <<<"$out"; then
      echo "sanitize self-test: the planted $2 failed without '$3' in $1:" >&2; echo "$out" | head -20 >&2; ok=0
    else
      echo "sanitize self-test: planted $2 reported ($3)"
    fi
  }
  expect_report "$ASAN_BUILD" use-after-free "heap-use-after-free"
  expect_report "$TSAN_BUILD" data-race "ThreadSanitizer: data race"
  [ "$ok" -eq 1 ] || exit 1
  exit 0
fi

if [ "$MODE" = thread ]; then
  BUILD="$TSAN_BUILD"
  TESTS=(launch_tests)  # the launcher's supervision loop, its signal scopes and the test's signalling threads
  SANITIZERS=thread
else
  BUILD="$ASAN_BUILD"
  # The test executables of tests/CMakeLists.txt that link no LibTorch.
  TESTS=(core_tests config_tests hf_config_tests plan_tests comm_env_tests schedule_tests data_tests
    launch_tests observe_tests interop_tests checkpoint_meta_tests resume_tests prepare_tests)
  SANITIZERS=address,undefined
fi
if [ $# -gt 0 ]; then TESTS=("$@"); fi
build "$BUILD" "$SANITIZERS" "${TESTS[@]}"

failed=()
for t in "${TESTS[@]}"; do
  start=$(date +%s.%N)
  if (cd "$BUILD/tests" && "./$t" --reporter compact > "$BUILD/$t.sanitize.log" 2>&1); then
    printf 'sanitize %-7s %-22s passed  %6.1f s\n' "$MODE" "$t" "$(awk "BEGIN {print $(date +%s.%N) - $start}")"
  else
    printf 'sanitize %-7s %-22s FAILED  (log: %s)\n' "$MODE" "$t" "$BUILD/$t.sanitize.log"
    grep -E "ERROR: AddressSanitizer|WARNING: ThreadSanitizer|runtime error|SUMMARY|FAILED" "$BUILD/$t.sanitize.log" \
      | head -20 >&2 || true
    failed+=("$t")
  fi
done
[ ${#failed[@]} -eq 0 ] || { echo "sanitize: failed: ${failed[*]}" >&2; exit 1; }
