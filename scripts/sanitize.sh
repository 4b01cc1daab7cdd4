#!/usr/bin/env bash
# Builds ppctl's test programs (or ppctl itself, for jobs) with a sanitizer and runs them; any report fails the run.
# One mode per run (--thread --jobs is one mode); options before test names. $PPCTL_SANITIZE_JOBS: parallel build
# jobs (default 2).
#   scripts/sanitize.sh [TEST_EXECUTABLE...]            AddressSanitizer + UndefinedBehaviorSanitizer (gcc) into
#                                                       build/sanitize (or $PPCTL_SANITIZE_BUILD_DIR); default: all
#                                                       torch-free test programs, listed below
#   scripts/sanitize.sh --torch [TEST_EXECUTABLE...]    the same build over the test programs that link LibTorch (our
#                                                       code instrumented, the pip wheel's LibTorch not; the ppctl
#                                                       executables they run are instrumented too)
#   scripts/sanitize.sh --jobs                          multi-process `ppctl train` runs with every worker instrumented:
#                                                       2 stages in each schedule family and dp 2 x pp 2 with the
#                                                       distributed optimizer, each checkpointed and resumed
#   scripts/sanitize.sh --thread --jobs                 the same runs under ThreadSanitizer (the workers' progress
#                                                       thread, signal handling, the executor polling c10d's work)
#   scripts/sanitize.sh --thread [TEST_EXECUTABLE...]   ThreadSanitizer into build/tsan (or $PPCTL_TSAN_BUILD_DIR);
#                                                       default: the programs of the code with threads (the launcher's
#                                                       supervision and signal handling, the progress board's thread)
#   scripts/sanitize.sh --self-test                     both builds must report a planted use-after-free and a planted
#                                                       data race (tests/sanitize/planted.cpp); exits 0 when they do
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

MODE=address
JOBS=0
USAGE="usage: scripts/sanitize.sh [--torch | --jobs | --thread [--jobs] | --self-test] [TEST_EXECUTABLE...]"
usage() {
  echo "scripts/sanitize.sh: $1 ($USAGE; the modes are described at the top of scripts/sanitize.sh)" >&2
  exit 2
}
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    --thread|--torch|--self-test)
      [ "$MODE" = address ] || usage "$1 and --$MODE are two modes; run them one after the other"
      MODE="${1#--}"; shift ;;
    --jobs) JOBS=1; shift ;;
    -*) usage "unknown option '$1'" ;;
    *) break ;;
  esac
done
for arg in "$@"; do
  case "$arg" in -*) usage "options come before test names: '$arg' follows one" ;; esac
done
if [ "$JOBS" -eq 1 ] && { [ "$MODE" = torch ] || [ "$MODE" = self-test ] || [ $# -gt 0 ]; }; then
  usage "--jobs runs its own jobs: it takes --thread or nothing else"
fi
[ "$MODE" != self-test ] || [ $# -eq 0 ] || usage "--self-test runs its planted faults only: it takes no test names"

# The test executables of tests/CMakeLists.txt that link no LibTorch, and those that do (train_tests runs ppctl jobs:
# those build too).
FREE_TESTS=(core_tests echo_tests config_tests hf_config_tests plan_tests comm_env_tests schedule_tests data_tests
  launch_tests observe_tests interop_tests checkpoint_meta_tests resume_tests prepare_tests timeline_svg_tests tune_tests)
TORCH_TESTS=(progress_board_tests tensorboard_tests split_backward_tests memory_estimate_tests grad_buffers_tests
  worker_handover_tests model_tests executor_tests local_job_tests shard_read_tests train_tests)

for name in "$@"; do  # any test program of tests/CMakeLists.txt, in either build
  [[ " ${FREE_TESTS[*]} ${TORCH_TESTS[*]} " == *" $name "* ]] ||
    usage "'$name' is not a test program; they are: ${FREE_TESTS[*]} ${TORCH_TESTS[*]}"
done

PYTHON="$("$ROOT/scripts/setup.sh")"

# Configures (once) and builds `targets` in a sanitizer build folder: $1 = folder, $2 = -fsanitize= list.
build() {
  local dir="$1" sanitizers="$2"; shift 2
  if [ ! -f "$dir/CMakeCache.txt" ]; then
    # -O1: the sanitizers' own advice; with them the torch-linked sources compile much faster than at -O3.
    cmake -S "$ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" \
      -DPPCTL_PYTHON="$PYTHON" \
      -DCMAKE_CXX_FLAGS="-fsanitize=$sanitizers -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g1" \
      -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=$sanitizers" -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >&2
  fi
  cmake --build "$dir" -j "${PPCTL_SANITIZE_JOBS:-2}" --target "$@" >&2
}

ASAN_BUILD="${PPCTL_SANITIZE_BUILD_DIR:-$ROOT/build/sanitize}"
TSAN_BUILD="${PPCTL_TSAN_BUILD_DIR:-$ROOT/build/tsan}"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# The TSan suppressions (LibTorch's uninstrumented reference counting) are named and justified in that file.
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$ROOT/scripts/tsan_suppressions.txt"

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

if [ "$JOBS" -eq 1 ]; then
  if [ "$MODE" = thread ]; then JOB_BUILD="$TSAN_BUILD" JOB_SANITIZERS=thread; else
    MODE=address JOB_BUILD="$ASAN_BUILD" JOB_SANITIZERS=address,undefined; fi
  build "$JOB_BUILD" "$JOB_SANITIZERS" ppctl ppctl-torch
  WORK="$(mktemp -d "${TMPDIR:-/tmp}/ppctl_sanitize_jobs_XXXXXX")"
  trap 'rm -rf "$WORK"' EXIT
  for i in $(seq 1 400); do echo "line $i: pack my box with five dozen liquor jugs"; done > "$WORK/corpus.txt"
  failed=()
  # $1 = name, $2 = pipeline and optimizer YAML, $3 = more runtime fields: 3 steps with a checkpoint, then resumed
  # to 5; both runs must exit 0 with no sanitizer report from any process.
  job() {
    local name="$1" dir="$WORK/$1" start; start=$(date +%s.%N)
    mkdir -p "$dir"
    cat > "$dir/job.yaml" <<YAML
model: {layers: 4, hidden: 32, heads: 4, seq_len: 32, dropout: 0.1}
$2
data: {path: $WORK/corpus.txt}
train: {steps: 3, seed: 1, log_interval: 1}
checkpoint: {dir: $dir/checkpoints, interval: 3}
runtime: {comm_timeout_s: 120${3:-}}
YAML
    if (cd "$dir" && "$JOB_BUILD/app/ppctl" train job.yaml > run.log 2>&1 &&
        "$JOB_BUILD/app/ppctl" train job.yaml --steps 5 --resume >> run.log 2>&1) &&
       ! grep -qE "Sanitizer|runtime error" "$dir/run.log" && grep -q "resumed from" "$dir/run.log"; then
      printf 'sanitize %-7s job %-28s passed  %6.1f s\n' "$MODE" "$name" \
        "$(awk "BEGIN {print $(date +%s.%N) - $start}")"
    else
      printf 'sanitize %-7s job %-28s FAILED\n' "$MODE" "$name"
      grep -E "ERROR: AddressSanitizer|WARNING: ThreadSanitizer|runtime error|SUMMARY|error" "$dir/run.log" \
        | head -20 >&2 || true
      cp "$dir/run.log" "$JOB_BUILD/jobs-$name.sanitize.log"
      failed+=("$name")
    fi
  }
  for schedule in gpipe 1f1b interleaved-1f1b zb-h1 zbv; do
    job "pp2-$schedule" "pipeline: {stages: 2, schedule: $schedule, microbatches: 4, micro_batch_size: 2}"
  done
  job "dp2-pp2-distributed" "pipeline: {stages: 2, data_parallel: 2, schedule: 1f1b, microbatches: 4, micro_batch_size: 2}
optimizer: {lr: 0.003, distributed: true}"
  job "dp2-pp2-distributed-bf16p" "pipeline: {stages: 2, data_parallel: 2, schedule: interleaved-1f1b, microbatches: 4, micro_batch_size: 2}
optimizer: {lr: 0.003, distributed: true}" ", precision: bf16-params"
  [ ${#failed[@]} -eq 0 ] || { echo "sanitize: failed: ${failed[*]} (logs: $JOB_BUILD/jobs-*.sanitize.log)" >&2; exit 1; }
  exit 0
fi

if [ "$MODE" = thread ]; then
  BUILD="$TSAN_BUILD"
  # The launcher's supervision loop, its signal scopes and the test's signalling threads; the progress board's
  # publisher thread against the training thread's cursor (LibTorch's TCPStore under it is not instrumented).
  TESTS=(launch_tests progress_board_tests)
  SANITIZERS=thread
elif [ "$MODE" = torch ]; then
  BUILD="$ASAN_BUILD"
  TESTS=("${TORCH_TESTS[@]}")
  SANITIZERS=address,undefined
else
  BUILD="$ASAN_BUILD"
  TESTS=("${FREE_TESTS[@]}")
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
