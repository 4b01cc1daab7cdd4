#!/usr/bin/env bash
# End-to-end tests of a job that fails or is stopped under the local launcher: a killed or frozen worker,
# SIGINT, kills during checkpoints, restarts (train.max_restarts) and a full disk.
# Usage: cli_faults.sh CASE PPCTL_BINARY (exits non-zero on failure). Helpers: tests/app/cli_lib.sh.
# shellcheck source=cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh" "$@"

# Sends signal $1 to the worker of rank $2 of the running $launcher, then waits for the launcher:
# sets rc (its exit code) and elapsed (seconds from the signal to its end).
signal_rank_and_wait() {
  local victim
  victim=$(pid_of_rank "$2")
  [ -n "$victim" ] || fail "no worker with RANK=$2"
  kill "-$1" "$victim"
  local start
  start=$(date +%s)
  wait_bounded "$launcher" 120
  elapsed=$(( $(date +%s) - start ))
}

# Waits (at most 10 s) until the background process $1 has become ppctl itself. Before its exec,
# a signal can reach the shell's child, or `env` with SIGINT still ignored, and be lost. ppctl execs
# ppctl-torch (same pid) for every command but plan: either is ppctl.
wait_for_exec() {
  local target torch _
  target=$(readlink -f "$PPCTL")
  torch=$(readlink -f "$PPCTL_TORCH")
  for _ in $(seq 1 100); do
    case "$(readlink "/proc/$1/exe" 2>/dev/null)" in "$target"|"$torch") return 0 ;; esac
    sleep 0.1
  done
  fail "process $1 did not start $PPCTL within 10 s"
}

case "$CASE" in
  worker_failure)
    tiny_job 3 100000 ""
    start_long_training
    signal_rank_and_wait KILL 1
    [ "$rc" -ne 0 ] || fail "launcher exited 0 after a worker was killed"
    [ "$elapsed" -le 15 ] || fail "launcher took ${elapsed} s to notice"
    grep -q "rank 1 was killed by signal 9" "$WORK/out" || fail "the failed rank is not named"
    no_leftovers
    ;;
  interrupt)
    tiny_job 2 100000 ""
    start_long_training
    kill -INT "$launcher"
    wait_bounded "$launcher" 60
    [ "$rc" -eq 130 ] || fail "exit code $rc after SIGINT, expected 130"
    no_leftovers
    ;;
  interrupt_early)
    # SIGINT at several moments of the first second: never a run directory without config.yaml and
    # plan.txt, never a temporary file left, and an "interrupted" line whenever anything was written.
    tiny_job 2 100000 ""
    for delay in 0.0 0.05 0.1 0.15 0.2 0.3 0.4 0.6 1.0 2.0; do
      run="$WORK/run_$delay"
      # A non-interactive shell starts background commands with SIGINT ignored; a terminal's Ctrl-C
      # finds the default action, as ppctl does after `env --default-signal=INT`. The delay counts
      # from ppctl's exec: a SIGINT to `env` before it resets the action would be discarded.
      env --default-signal=INT "$PPCTL" train "$WORK/job.yaml" --run-dir "$run" > "$WORK/out" 2>&1 &
      launcher=$!
      wait_for_exec "$launcher"
      sleep "$delay"
      kill -INT "$launcher"
      wait_bounded "$launcher" 60
      [ "$rc" -eq 130 ] || fail "SIGINT after $delay s: exit code $rc, expected 130"
      if [ -e "$run" ]; then
        ! ls -A "$run" | grep -q '\.tmp' || fail "SIGINT after $delay s: temporary file left: $(ls -A "$run")"
        [ -f "$run/config.yaml" ] && [ -f "$run/plan.txt" ] \
          || fail "SIGINT after $delay s: run directory holds only: $(ls -A "$run")"
        grep -q "interrupted" "$run/launcher.log" || fail "SIGINT after $delay s: no interrupted line in launcher.log"
        grep -q "interrupted" "$WORK/out" || fail "SIGINT after $delay s: no interrupted line"
        echo "SIGINT after $delay s: run directory complete, interrupted" >&2
      else
        echo "SIGINT after $delay s: nothing written ($(grep -c interrupted "$WORK/out") interrupted line)" >&2
      fi
      no_leftovers
    done
    ;;
  stall_blame)
    # Each rank of a 4-stage job stopped in turn (SIGSTOP, a frozen process): the final line blames
    # that rank and the action it was last seen in, not the rank whose receive timed out.
    tiny_job 4 100000 ""
    sed -i "s/comm_timeout_s: 30/comm_timeout_s: 5/" "$WORK/job.yaml"
    for rank in 0 1 2 3; do
      start_long_training
      signal_rank_and_wait STOP "$rank"
      [ "$rc" -ne 0 ] || fail "rank $rank stopped: launcher exited 0"
      [ "$elapsed" -le 15 ] || fail "rank $rank stopped: the job took ${elapsed} s to end"
      last=$(tail -n 1 "$WORK/out")
      echo "rank $rank stopped: ended after ${elapsed} s: $last" >&2
      echo "$last" | grep -q "training failed: rank $rank stopped making progress: no progress report for [0-9.]* s; last seen in step [0-9]*, [a-z]" \
        || fail "rank $rank stopped, but the final line does not blame it: $last"
      no_leftovers
    done
    ;;
  checkpoint_kill)
    # The whole job SIGKILLed at random moments while it checkpoints every step (so a kill often
    # lands inside a save): each time `latest` names a complete checkpoint and --resume goes on.
    tiny_job 2 100000 "checkpoint: {dir: ckpt, interval: 1, keep: 2}"
    for round in 1 2 3; do
      # The background job truncates out only once it starts: without this, wait_for_line could see
      # the previous round's lines and the kill could land before this round has begun.
      rm -f "$WORK/out"
      "$PPCTL" train "$WORK/job.yaml" $([ "$round" -gt 1 ] && echo --resume) > "$WORK/out" 2>&1 &
      launcher=$!
      wait_for_line "checkpoint of step" 120
      sleep "0.$(( RANDOM % 10 ))$(( RANDOM % 10 ))"
      kill -KILL "$launcher"  # the workers die with it (PDEATHSIG)
      wait "$launcher" 2>/dev/null
      no_leftovers
      latest="$WORK/ckpt/$(cat "$WORK/ckpt/latest")"
      [ -f "$latest/meta.json" ] || fail "round $round: latest names $latest, which is not complete"
      step=$(grep -o '"step": [0-9]*' "$latest/meta.json" | grep -o '[0-9]*$')
      echo "round $round: killed; latest complete checkpoint is step $step" >&2
      [ "$round" -eq 1 ] || grep -q "resumed from" "$WORK/out" || fail "round $round did not resume"
    done
    timeout 300 "$PPCTL" train "$WORK/job.yaml" --resume --steps $((step + 3)) > "$WORK/out" 2>&1 \
      || fail "the final resume exited $?"
    grep -q "resumed from .*step-0*$step after step $step" "$WORK/out" || fail "did not resume after step $step"
    grep -q "step $((step + 3))/$((step + 3)) | loss" "$WORK/out" || fail "no step $((step + 3))"
    ls "$WORK/ckpt" | grep -q partial && fail "a .partial folder was left behind"
    no_leftovers
    ;;
  restart_kill)
    # A random worker SIGKILLed at a random step, twice, with train.max_restarts 3: the job restarts
    # from its latest checkpoint and every step's loss equals an uninterrupted run's, exactly.
    tiny_job 3 400 "checkpoint: {dir: ckpt, interval: 5, keep: 2}"
    sed -i 's/log_interval: 5}/log_interval: 1, max_restarts: 3, restart_backoff_s: 0.2}/; s/comm_timeout_s: 30/comm_timeout_s: 10/' "$WORK/job.yaml"
    timeout 300 "$PPCTL" train "$WORK/job.yaml" --run-dir "$WORK/ref" > "$WORK/ref.out" 2>&1 \
      || fail "the uninterrupted run exited $?"
    rm -rf "$WORK/ckpt"
    "$PPCTL" train "$WORK/job.yaml" --run-dir "$WORK/run" > "$WORK/out" 2>&1 &
    launcher=$!
    from=1
    step=$(( 6 + RANDOM % 30 ))
    for kill_no in 1 2; do
      for _ in $(seq 1 1200); do tail -n "+$from" "$WORK/out" | grep -q "step $step/" && break; sleep 0.1; done
      tail -n "+$from" "$WORK/out" | grep -q "step $step/" || fail "kill $kill_no: no step $step"
      rank=$(( RANDOM % 3 ))
      victim=$(pid_of_rank "$rank")
      [ -n "$victim" ] || fail "kill $kill_no: no worker with RANK=$rank"
      kill -KILL "$victim"
      echo "kill $kill_no: rank $rank at step $step" >&2
      wait_for_line "restart $kill_no of 3" 60
      from=$(wc -l < "$WORK/out")
      step=$(( step + 10 + RANDOM % 30 ))
    done
    wait_bounded "$launcher" 300
    [ "$rc" -eq 0 ] || fail "the restarted job exited $rc"
    grep -q "restart 3 of 3" "$WORK/out" && fail "restarted a third time"
    [ "$(grep -c "resumed from" "$WORK/out")" -ge 2 ] || fail "the restarts did not resume from a checkpoint"
    grep "restart [12] of 3" "$WORK/out" >&2
    python3 - "$WORK/ref/metrics.jsonl" "$WORK/run" <<'PY' || fail "losses differ from the uninterrupted run"
import glob, json, sys
def losses(path):
    return {r["step"]: r["loss"] for r in map(json.loads, open(path)) if r.get("event") == "step" and r.get("loss") is not None}
ref = losses(sys.argv[1])
files = sorted(glob.glob(sys.argv[2] + "/metrics.attempt*.jsonl")) + [sys.argv[2] + "/metrics.jsonl"]
assert len(files) == 3, files
seen, bad = set(), []
for f in files:
    for step, loss in losses(f).items():
        seen.add(step)
        if loss != ref[step]: bad.append((f, step, loss, ref[step]))
final = losses(files[-1])
print(f"{len(seen)} steps over {len(files)} attempts; final loss {final.get(400)} (uninterrupted {ref.get(400)}); {len(bad)} differ", file=sys.stderr)
assert not bad, bad[:5]
assert seen == set(ref) and 400 in final, "steps missing"
PY
    no_leftovers
    ;;
  restart_give_up)
    # train.max_restarts 1 and two failures: the launcher gives up, exits non-zero, names the last cause.
    tiny_job 2 100000 ""
    sed -i 's/log_interval: 5}/log_interval: 1, max_restarts: 1, restart_backoff_s: 0}/' "$WORK/job.yaml"
    start_long_training
    kill -KILL "$(pid_of_rank 1)"
    wait_for_line "restart 1 of 1" 60
    from=$(wc -l < "$WORK/out")
    for _ in $(seq 1 1200); do tail -n "+$from" "$WORK/out" | grep -q "step 1/" && break; sleep 0.1; done
    kill -KILL "$(pid_of_rank 0)"
    wait_bounded "$launcher" 120
    [ "$rc" -eq 137 ] || fail "exit code $rc after giving up, expected 137 (the last cause's)"
    tail -n 1 "$WORK/out" | grep -q "training failed: gave up after 1 restart (train.max_restarts); last cause: rank 0 was killed by signal 9" \
      || fail "the final line does not give up naming the last cause: $(tail -n 1 "$WORK/out")"
    no_leftovers
    ;;
  restart_bad_input)
    # Issue 12 F2: bad input that restarted workers find (the checkpoint to resume from truncated during
    # the restart backoff; the data file moved away) exits 2 at once, is not restarted again, and the
    # final line names the rank and the cause (file and rule).
    tiny_job 2 100000 "checkpoint: {dir: ckpt, interval: 2, keep: 2}"
    sed -i 's/log_interval: 5}/log_interval: 1, max_restarts: 3, restart_backoff_s: 2}/; s/comm_timeout_s: 30/comm_timeout_s: 10/' "$WORK/job.yaml"
    for damage in checkpoint data; do
      rm -rf "$WORK/ckpt"
      start_long_training
      wait_for_line "step 5/" 120
      kill -KILL "$(pid_of_rank 1)"
      wait_for_line "restart 1 of 3" 60
      if [ "$damage" = checkpoint ]; then
        ckpt=$(grep -o "from checkpoint [^ ]*" "$WORK/out" | head -n 1 | awk '{print $3}')
        [ -f "$ckpt/block0.pt" ] || fail "no checkpoint named in the restart line"
        truncate -s 10 "$ckpt/block0.pt"
        expect="$ckpt/block0.pt has 10 bytes where meta.json records"
      else
        mv "$WORK/corpus.txt" "$WORK/corpus.moved"
        expect="corpus.txt"
      fi
      wait_bounded "$launcher" 60
      [ "$damage" = data ] && mv "$WORK/corpus.moved" "$WORK/corpus.txt"
      [ "$rc" -eq 2 ] || fail "$damage: exit code $rc, expected 2"
      grep -q "restart 2 of 3" "$WORK/out" && fail "$damage: restarted after bad input"
      last=$(tail -n 1 "$WORK/out")
      echo "$damage: $last" >&2
      echo "$last" | grep -qE "training failed: rank [01] (exited with code 2|failed): " || fail "$damage: the final line names no rank and exit code 2"
      echo "$last" | grep -qF -- "$expect" || fail "$damage: the final line does not carry the cause ($expect)"
      no_leftovers
    done
    ;;
  disk_full)
    # Issue 12 F5: the run directory's disk fills up mid-run (a 2 MiB tmpfs in a private mount namespace).
    [ "$(id -u)" -eq 0 ] && unshare -m true 2>/dev/null \
      || { echo "SKIP [$CASE]: needs root and unshare -m to mount a small tmpfs"; exit 0; }
    unshare -m bash "$ROOT/tests/app/cli_faults.sh" disk_full_in_namespace "$PPCTL" || exit 1
    ;;
  disk_full_in_namespace)
    trap 'pkill -KILL -f "$WORK/" 2>/dev/null; umount "$WORK/disk" 2>/dev/null; rm -rf "$WORK"' EXIT
    mkdir "$WORK/disk" && mount -t tmpfs -o size=2m tmpfs "$WORK/disk" || fail "cannot mount a tmpfs"
    tiny_job 2 100000 ""
    sed -i 's/log_interval: 5}/log_interval: 1}/' "$WORK/job.yaml"
    "$PPCTL" train "$WORK/job.yaml" --run-dir "$WORK/disk/run" > "$WORK/out" 2>&1 &
    launcher=$!
    wait_for_line "step 3/" 120
    dd if=/dev/zero of="$WORK/disk/fill" bs=4k status=none 2>/dev/null
    wait_bounded "$launcher" 120
    [ "$rc" -eq 1 ] || fail "exit code $rc after the disk filled up, expected 1"
    grep -q "LOG ERROR" "$WORK/out" && fail "spdlog's raw error line was printed"
    grep -o "\[[a-z0-9 ]*\] warning: cannot write to a log file" "$WORK/out" | sort | uniq -d | grep -q . \
      && fail "a log-file failure was reported more than once by one process"
    python3 - "$WORK/disk/run/metrics.jsonl" <<'PY' || fail "metrics.jsonl holds a line cut short"
import json, sys
data = open(sys.argv[1]).read()
assert data == "" or data.endswith("\n"), repr(data[-80:])
for line in data.splitlines():
    json.loads(line)
PY
    last=$(tail -n 1 "$WORK/out")
    echo "$last" >&2
    echo "$last" | grep -qE "training failed: rank 1 (exited with code 1|failed): cannot write the (metrics file|TensorBoard event file) $WORK/disk/run/[^ ]*: No space left on device" \
      || fail "the final line does not blame rank 1 (the writer) with the file and the reason"
    echo "$last" | grep -qF "fix: free space on the file system holding $WORK/disk/run" || fail "no fix in the final line"
    ;;
  *) fail "unknown case" ;;
esac
echo "PASS [$CASE]"
