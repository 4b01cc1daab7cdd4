#!/usr/bin/env bash
# End-to-end tests of the ppctl command line, as a user runs it. Usage: cli_test.sh CASE PPCTL_BINARY
# Cases: see the case statement below (plan_example, bad_spec, train_tiny, ...). Exits non-zero on failure.
set -uo pipefail
CASE="$1"
PPCTL="$2"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/ppctl_cli_${CASE}_XXXXXX")"
trap 'pkill -KILL -f "$WORK/" 2>/dev/null; rm -rf "$WORK"' EXIT

fail() { echo "FAIL [$CASE]: $*" >&2; [ -f "$WORK/out" ] && sed 's/^/  | /' "$WORK/out" >&2; exit 1; }

# A tiny job on generated text; $1 = stages, $2 = steps, $3 = extra YAML lines.
tiny_job() {
  for i in $(seq 1 300); do echo "line $i: pack my box with five dozen liquor jugs"; done > "$WORK/corpus.txt"
  cat > "$WORK/job.yaml" <<YAML
model: {layers: 4, hidden: 32, heads: 4, seq_len: 32, dropout: 0.0}
pipeline: {stages: $1, schedule: 1f1b, microbatches: 4, micro_batch_size: 4}
data: {path: corpus.txt}
optimizer: {lr: 0.003}
train: {steps: $2, seed: 1, log_interval: 5}
runtime: {comm_timeout_s: 30}
$3
YAML
}

# No process of this test may be left (workers carry the job path in their command line).
no_leftovers() {
  sleep 0.2
  if pgrep -f "$WORK/job.yaml" >/dev/null; then
    pgrep -af "$WORK/job.yaml" >&2
    fail "processes left behind"
  fi
}

pid_of_rank() {  # $1 = rank: the worker process whose environment has RANK=$1
  for pid in $(pgrep -f "worker $WORK/job.yaml"); do
    if tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | grep -qx "RANK=$1"; then echo "$pid"; return; fi
  done
}

# Starts a long training of $WORK/job.yaml in the background ($launcher) and waits for its first step.
start_long_training() {
  "$PPCTL" train "$WORK/job.yaml" > "$WORK/out" 2>&1 &
  launcher=$!
  wait_for_line "step 1/" 120
}

wait_for_line() {  # $1 = pattern in $WORK/out, $2 = seconds
  for _ in $(seq 1 $(($2 * 10))); do grep -q "$1" "$WORK/out" && return 0; sleep 0.1; done
  fail "no line matching '$1' within $2 s"
}

case "$CASE" in
  plan_example)
    "$PPCTL" plan "$ROOT/configs/example.yaml" > "$WORK/out" 2>&1 || fail "plan exited $?"
    grep -q "bubble" "$WORK/out" || fail "no bubble line"
    for r in 0 1 2 3; do grep -q "^rank $r: F0" "$WORK/out" || fail "no action list for rank $r"; done
    grep -q "^rank 0: F0 F1 F2 F3 B0 F4 B1" "$WORK/out" || fail "rank 0 is not 1F1B (3 warmup forwards, then F and B alternate)"
    ;;
  bad_spec)
    tiny_job 2 5 ""
    sed -i 's/hidden: 32/hiden: 32/; s/microbatches: 4/microbatches: four/' "$WORK/job.yaml"
    "$PPCTL" train "$WORK/job.yaml" > "$WORK/out" 2>&1
    rc=$?
    [ "$rc" -eq 2 ] || fail "exit code $rc, expected 2"
    grep -q "job.yaml:1: model.hiden: unknown key.*did you mean 'hidden'" "$WORK/out" || fail "no did-you-mean line"
    grep -q "job.yaml:2: pipeline.microbatches: value \"\?four\"\?:.*integer" "$WORK/out" || fail "no type error line"
    grep -q "starting" "$WORK/out" && fail "workers were started"
    no_leftovers
    ;;
  train_tiny)
    tiny_job 2 30 ""
    timeout 300 "$PPCTL" train "$WORK/job.yaml" > "$WORK/out" 2>&1 || fail "train exited $?"
    first=$(grep -o "step 1/30 | loss [0-9.]*" "$WORK/out" | awk '{print $NF}')
    last=$(grep -o "step 30/30 | loss [0-9.]*" "$WORK/out" | awk '{print $NF}')
    [ -n "$first" ] && [ -n "$last" ] || fail "no loss lines for steps 1 and 30"
    awk -v a="$first" -v b="$last" 'BEGIN { exit !(a > 5.0 && b < a - 1.0) }' \
      || fail "loss did not fall enough: $first -> $last"
    [ "$(grep -c "| loss " "$WORK/out")" -eq 7 ] || fail "expected 7 loss lines (steps 1,5,...,30), one per interval"
    no_leftovers
    ;;
  worker_failure)
    tiny_job 3 100000 ""
    start_long_training
    victim=$(pid_of_rank 1)
    [ -n "$victim" ] || fail "no worker with RANK=1"
    kill -KILL "$victim"
    start=$(date +%s)
    wait "$launcher"
    rc=$?
    elapsed=$(( $(date +%s) - start ))
    [ "$rc" -ne 0 ] || fail "launcher exited 0 after a worker was killed"
    [ "$elapsed" -le 15 ] || fail "launcher took ${elapsed} s to notice"
    grep -q "rank 1 was killed by signal 9" "$WORK/out" || fail "the failed rank is not named"
    no_leftovers
    ;;
  interrupt)
    tiny_job 2 100000 ""
    start_long_training
    kill -INT "$launcher"
    wait "$launcher"
    rc=$?
    [ "$rc" -eq 130 ] || fail "exit code $rc after SIGINT, expected 130"
    no_leftovers
    ;;
  verify_example)
    # The user-facing oracle on the example job (one step pipelined, one unpipelined).
    "$PPCTL" verify "$ROOT/configs/example.yaml" > "$WORK/out" 2>&1 || fail "verify exited $?"
    grep -q "^PASS: largest difference" "$WORK/out" || fail "no PASS verdict"
    grep -q "^block3.fc2.weight " "$WORK/out" || fail "no row for block3.fc2.weight"
    grep -q "^(loss) " "$WORK/out" || fail "no row for the loss"
    no_leftovers
    ;;
  plan_trace)
    # The simulated timeline as a Chrome trace: valid JSON, one named track per rank.
    "$PPCTL" plan "$ROOT/configs/example.yaml" --timeline --trace "$WORK/trace.json" > "$WORK/out" 2>&1 \
      || fail "plan exited $?"
    for r in 0 1 2 3; do grep -q "^rank  *$r |" "$WORK/out" || fail "no timeline line for rank $r"; done
    python3 - "$WORK/trace.json" <<'PY' || fail "the trace is not what Perfetto expects"
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
names = {e["args"]["name"] for e in events if e.get("name") == "thread_name"}
assert names == {f"rank {r}" for r in range(4)}, names
assert sum(1 for e in events if e.get("ph") == "X") == 4 * 8 * 2  # F and B per stage and microbatch
PY
    ;;
  plan_stage_costs)
    # --costs per stage: 4 equal groups simulate the same step as one group; a count that is not
    # 4 or 4 per stage is refused with exit code 2.
    "$PPCTL" plan "$ROOT/configs/example.yaml" --costs 1,2,1,1 > "$WORK/one" 2>&1 || fail "plan exited $?"
    "$PPCTL" plan "$ROOT/configs/example.yaml" --costs 1,2,1,1,1,2,1,1,1,2,1,1,1,2,1,1 > "$WORK/out" 2>&1 \
      || fail "plan with per-stage costs exited $?"
    grep -q "simulated  step 33.00 ms.*4 per-stage costs" "$WORK/out" || fail "per-stage costs not simulated"
    grep -q "simulated  step 33.00 ms" "$WORK/one" || fail "uniform costs changed"
    code=0; "$PPCTL" plan "$ROOT/configs/example.yaml" --costs 1,2,1,1,1,2,1,1 > "$WORK/out" 2>&1 || code=$?
    [ "$code" -eq 2 ] || fail "2 stages' costs for 4 stages: exit $code, expected 2"
    code=0; "$PPCTL" plan "$ROOT/configs/example.yaml" --costs 1,2,1,1,1 > "$WORK/out" 2>&1 || code=$?
    [ "$code" -eq 2 ] || fail "5 cost values: exit $code, expected 2"
    ;;
  custom_schedule)
    # A hand-written CSV (saved with a UTF-8 byte order mark, as some editors do) runs and meets the
    # oracle; the workers get the CSV text the launcher validated.
    tiny_job 2 5 ""
    sed -i 's/schedule: 1f1b/schedule: custom, schedule_file: sched.csv/; s/microbatches: 4/microbatches: 2/' "$WORK/job.yaml"
    printf '\xEF\xBB\xBF# 1F1B, p = 2, m = 2\n0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n' > "$WORK/sched.csv"
    "$PPCTL" verify "$WORK/job.yaml" > "$WORK/out" 2>&1 || fail "verify exited $?"
    grep -q "^PASS" "$WORK/out" || fail "no PASS verdict"
    # A V-shaped file (4 stages on 2 ranks) with virtual_stages left at 1: the fix names the key.
    printf '0F0,3F0,3B0,0B0\n1F0,2F0,2B0,1B0\n' > "$WORK/sched.csv"
    sed -i 's/microbatches: 2/microbatches: 1/' "$WORK/job.yaml"
    "$PPCTL" plan "$WORK/job.yaml" > "$WORK/out" 2>&1
    rc=$?
    [ "$rc" -eq 2 ] || fail "exit code $rc for a file that does not match the spec, expected 2"
    grep -q "set pipeline.virtual_stages: 2 to match the file" "$WORK/out" || fail "the fix is not named"
    ;;
  bad_master_addr)
    # The launcher hosts the store: an address of another machine fails at once (192.0.2.1 is reserved
    # for documentation; only bind(2) is tried, nothing is sent; no name lookup either).
    tiny_job 2 5 "runtime: {master_addr: 192.0.2.1}"
    sed -i 's/^runtime: {comm_timeout_s: 30}$//' "$WORK/job.yaml"
    timeout 20 "$PPCTL" train "$WORK/job.yaml" > "$WORK/out" 2>&1 && fail "train succeeded"
    grep -q "runtime.master_addr '192.0.2.1' is not an address of this machine" "$WORK/out" || fail "no clear message"
    no_leftovers
    ;;
  no_driver_dependency)
    # The binary must start where no GPU driver is installed: libcuda must not be a load-time need.
    ldd "$PPCTL" > "$WORK/out" 2>&1 || fail "ldd failed"
    grep -q "libtorch_cuda.so" "$WORK/out" || fail "the CUDA/NCCL path is not linked"
    grep -q "libcuda.so" "$WORK/out" && fail "libcuda.so is a load-time dependency"
    grep -q "not found" "$WORK/out" && fail "a shared library is not found"
    "$PPCTL" --version > "$WORK/out" 2>&1 || fail "ppctl --version failed"
    ;;
  *) fail "unknown case" ;;
esac
echo "PASS [$CASE]"
