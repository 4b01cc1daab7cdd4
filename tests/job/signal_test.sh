#!/usr/bin/env bash
# End-to-end tests of stopping on a signal (train.on_signal) and `--resume auto`, as a user or a cluster
# does it. Usage: signal_test.sh CASE PPCTL_BINARY. Helpers (tiny_job, wait_bounded, ...) come from
# tests/app/cli_lib.sh.
# shellcheck source=../app/cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../app/cli_lib.sh" "$@"

# The step of the checkpoint checkpoint.dir's latest names ($1 = checkpoint.dir); fails when it is incomplete.
latest_step() {
  local latest
  latest="$1/$(cat "$1/latest")"
  [ -f "$latest/meta.json" ] || fail "latest names $latest, which is not complete"
  grep -o '"step": [0-9]*' "$latest/meta.json" | grep -o '[0-9]*$'
}

# Every step's loss of the run directories $2... equals the uninterrupted run's ($1, a run directory), and
# together they hold every step of it once.
same_losses() {
  python3 - "$@" <<'PY' || fail "the losses differ from the uninterrupted run's"
import json, sys
def losses(run):
    return {r["step"]: r["loss"] for r in map(json.loads, open(run + "/metrics.jsonl")) if r["event"] == "step"}
ref, seen = losses(sys.argv[1]), {}
for run in sys.argv[2:]:
    for step, loss in losses(run).items():
        assert step not in seen, f"step {step} twice"
        seen[step] = loss
bad = [(s, seen.get(s), l) for s, l in ref.items() if seen.get(s) != l]
print(f"{len(seen)} steps over {len(sys.argv) - 2} runs, {len(bad)} differ from the uninterrupted run", file=sys.stderr)
assert not bad and len(seen) == len(ref), bad[:5]
PY
}

# Starts ranks 0 and 1 of $WORK/job.yaml as torchrun would (RANK, WORLD_SIZE, MASTER_*): pids (their pids),
# their output in $WORK/rank0.out and rank1.out.
start_torchrun_ranks() {
  local port r
  port=$(free_port)
  pids=()
  for r in 0 1; do
    RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$PPCTL" train "$WORK/job.yaml" \
      > "$WORK/rank$r.out" 2>&1 &
    pids+=($!)
  done
}

case "$CASE" in
  signal_checkpoint)
    # SIGUSR1 to the local launcher mid-run: the workers agree on the next step, write a checkpoint there,
    # finish the run directory and ppctl exits 75; --resume auto then goes on, and every loss equals an
    # uninterrupted run's.
    tiny_job 2 40 "checkpoint: {dir: ckpt}"
    sed -i 's/log_interval: 5/log_interval: 1/' "$WORK/job.yaml"
    timeout 300 "$PPCTL" train "$WORK/job.yaml" --run-dir "$WORK/ref" > "$WORK/out" 2>&1 || fail "the uninterrupted run exited $?"
    rm -rf "$WORK/ckpt" "$WORK/out"  # out: the uninterrupted run's step lines are not this run's (start_long_training)
    "$PPCTL" train "$WORK/job.yaml" --run-dir "$WORK/first/run" > "$WORK/out" 2>&1 &
    launcher=$!
    wait_for_line "step 3/" 120
    start=$(date +%s%N)
    kill -USR1 "$launcher"
    wait_bounded "$launcher" 120
    echo "signal to exit: $(( ($(date +%s%N) - start) / 1000000 )) ms" >&2
    [ "$rc" -eq 75 ] || fail "exit code $rc after SIGUSR1, expected 75"
    grep -q "interrupted (SIGUSR1): asking 2 workers to stop at the next step boundary" "$WORK/out" \
      || fail "the launcher does not say what it got and does"
    grep -q "\[rank 1\] warning: got SIGUSR1 (forwarded by the launcher): the job stops at the next step" "$WORK/out" \
      || fail "a worker does not say what it got"
    step=$(latest_step "$WORK/ckpt")
    grep -q "stopped after step $step of 40 on SIGUSR1: checkpoint step $step" "$WORK/out" || fail "no line for the stop at step $step"
    grep -q "training stopped: interrupted (SIGUSR1): all 2 workers stopped, with a checkpoint (exit code 75" "$WORK/out" \
      || fail "no final line"
    [ "$step" -ge 3 ] && [ "$step" -lt 40 ] || fail "stopped at step $step"
    python3 "$ROOT/tests/support/check_run_dir.py" "$WORK/first" --spec "$WORK/job.yaml" --steps "$step" --world 2 \
      --pipeline 2 --local --stopped-by SIGUSR1 || fail "the stopped run's directory is not finished"
    no_leftovers
    timeout 300 "$PPCTL" train "$WORK/job.yaml" --resume auto --run-dir "$WORK/second/run" > "$WORK/out" 2>&1 \
      || fail "--resume auto exited $?"
    grep -q "resumed from $WORK/ckpt/step-0*$step after step $step" "$WORK/out" || fail "did not resume after step $step"
    python3 "$ROOT/tests/support/check_run_dir.py" "$WORK/second" --spec "$WORK/job.yaml" --first-step $((step + 1)) \
      --steps 40 --world 2 --pipeline 2 --local || fail "the resumed run's directory is not finished"
    same_losses "$WORK/ref" "$WORK/first/run" "$WORK/second/run"
    no_leftovers
    ;;
  signal_twice)
    # A second Ctrl-C once every rank has finished its stop (checkpoint complete, its report published) but
    # has not exited yet (that takes 0.35-0.55 s): the job still ends as stopped with a checkpoint, exit 75,
    # not "training failed" with 130. Landing after they exited would give 75 too; what must not be is 130.
    tiny_job 2 100000 "checkpoint: {dir: ckpt}"
    sed -i 's/log_interval: 5/log_interval: 1/' "$WORK/job.yaml"
    "$PPCTL" train "$WORK/job.yaml" --run-dir "$WORK/run" > "$WORK/out" 2>&1 &
    launcher=$!
    wait_for_line "step 3/" 120
    kill -INT "$launcher"
    for _ in $(seq 1 1200); do
      [ "$(grep -c "stop complete: exiting with code 75" "$WORK/out")" -ge 2 ] && break
      sleep 0.01
    done
    kill -INT "$launcher" 2>/dev/null || true
    wait_bounded "$launcher" 120
    [ "$rc" -eq 75 ] || { cat "$WORK/out" >&2; fail "exit code $rc after a second SIGINT that came after the stop, expected 75"; }
    grep -q "training failed" "$WORK/out" && fail "the stopped job is reported as failed"
    grep -q "training stopped: interrupted (SIGINT): all 2 workers stopped, with a checkpoint (exit code 75" "$WORK/out" \
      || fail "no final line for the stop"
    latest_step "$WORK/ckpt" > /dev/null
    no_leftovers
    ;;
  signal_torchrun)
    # torchrun-style ranks (RANK, WORLD_SIZE, MASTER_*), each sent SIGTERM as torchrun's agent does: both exit 75
    # after a checkpoint at the same step, rank 0 finishes the run directory; --resume auto goes on from it.
    tiny_job 2 100000 "checkpoint: {dir: ckpt}"
    sed -i 's/log_interval: 5/log_interval: 1/' "$WORK/job.yaml"
    start_torchrun_ranks
    for _ in $(seq 1 1200); do grep -q "step 3/" "$WORK/rank1.out" && break; sleep 0.1; done
    kill -TERM "${pids[@]}"
    for r in 0 1; do
      wait_bounded "${pids[$r]}" 120
      cp "$WORK/rank$r.out" "$WORK/out"
      [ "$rc" -eq 75 ] || fail "rank $r exited $rc after SIGTERM, expected 75"
      grep -q "\[rank $r\] warning: got SIGTERM: the job stops at the next step boundary" "$WORK/out" \
        || fail "rank $r does not say what it got"
    done
    step=$(latest_step "$WORK/ckpt")
    python3 "$ROOT/tests/support/check_run_dir.py" "$WORK/runs" --spec "$WORK/job.yaml" --steps "$step" --world 2 \
      --pipeline 2 --stopped-by SIGTERM || fail "the run directory is not finished"
    port=$(free_port)
    for r in 0 1; do
      RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 120 "$PPCTL" train \
        "$WORK/job.yaml" --resume auto --steps $((step + 2)) > "$WORK/rank$r.out" 2>&1 &
      pids[$r]=$!
    done
    for r in 0 1; do
      wait "${pids[$r]}" || { cp "$WORK/rank$r.out" "$WORK/out"; fail "rank $r of the resumed job exited $?"; }
    done
    grep -q "step $((step + 2))/$((step + 2)) | loss" "$WORK/rank1.out" || fail "the resumed job did not train on"
    no_leftovers
    ;;
  signal_torchrun_agent)
    # Under torchrun's own agent (the venv's torch.distributed.run --standalone, 2 workers, each in a session of
    # its own): the job trains the local launcher's losses. SIGTERM to the agent mid-run: it sends SIGTERM to every
    # worker's process group, both ranks stop at one step boundary with a checkpoint and exit 75, rank 0 finishes
    # the run directory, and the agent (its workers gone) exits 1, a failure in torchrun's terms. SIGUSR1, which
    # the agent does not handle by default, reaches the workers with the agent's --signals-to-handle. SIGTERM to
    # the agent and to every rank at once (as Slurm signals every process of a step): each rank takes the agent's
    # copy as the same signal, not a second one. Each rerun with --resume auto goes on, and every loss equals the
    # uninterrupted run's.
    [ -n "${PPCTL_PYTHON:-}" ] || fail "PPCTL_PYTHON (the venv's python, with torch) is not set"
    tiny_job 2 40 "checkpoint: {dir: ckpt}"
    sed -i 's/log_interval: 5/log_interval: 1/' "$WORK/job.yaml"
    # A worker: ppctl train with its exit code kept in rc.RANK (the agent reports none when it shuts down). The
    # agent signals the worker's process group; this shell's trap only lets it wait for ppctl.
    cat > "$WORK/worker.sh" <<SH
#!/usr/bin/env bash
trap : TERM INT HUP USR1 USR2
"$PPCTL" train "$WORK/job.yaml" "\$@"
echo \$? > "$WORK/rc.\$RANK"
SH
    chmod +x "$WORK/worker.sh"
    agent=("$PPCTL_PYTHON" -m torch.distributed.run --standalone --nproc-per-node 2)
    worker=(--no-python "$WORK/worker.sh")
    timeout 300 "$PPCTL" train "$WORK/job.yaml" --run-dir "$WORK/local/run" > "$WORK/out" 2>&1 \
      || fail "the local launcher's run exited $?"
    rm -rf "$WORK/ckpt"
    timeout 300 "${agent[@]}" "${worker[@]}" --run-dir "$WORK/ref/run" > "$WORK/out" 2>&1 || fail "the uninterrupted run under torchrun exited $?"
    grep -q "\[rank 0\] info: launched by torchrun: rank 0 of 2" "$WORK/out" || fail "rank 0 did not run under torchrun"
    same_losses "$WORK/local/run" "$WORK/ref/run"
    rm -rf "$WORK/ckpt"
    step=0 runs=()
    stop_agent() {  # $1 = signal, $2 = agent (to it alone) or all (to it and the ranks), then options of the agent
      local sig=$1 whom="the agent" first=$((step + 1)) r
      [ "$2" = all ] && whom="the agent and the ranks"
      shift 2
      runs+=("$WORK/stop${#runs[@]}/run")
      rm -f "$WORK"/rc.* "$WORK/out"  # out: the last run's step lines are not this one's (start_long_training)
      "${agent[@]}" "$@" "${worker[@]}" --resume auto --run-dir "${runs[-1]}" > "$WORK/out" 2>&1 &
      local pid=$!
      wait_for_line "step $((step + 3))/" 120
      # shellcheck disable=SC2046  # the ranks' pids
      kill "-$sig" "$pid" $([ "$whom" != "the agent" ] && pgrep -f "$WORK/job.yaml")
      wait_bounded "$pid" 120
      echo "SIG$sig to $whom: the agent exited $rc; workers: $(cat "$WORK"/rc.* | tr '\n' ' ')" >&2
      [ "$rc" -eq 1 ] || fail "SIG$sig to $whom: the agent exited $rc, expected 1 (torchrun reports a failure)"
      grep -q "SignalException: Process $pid got signal: $(kill -l "$sig")$" "$WORK/out" \
        || fail "SIG$sig to $whom: the agent does not end with the traceback README.md shows"
      [ "$(grep -c "Sending process [0-9]* closing signal SIG$sig" "$WORK/out")" -eq 2 ] \
        || fail "SIG$sig to $whom: the agent does not say it sent it to its 2 workers"
      for r in 0 1; do
        [ "$(cat "$WORK/rc.$r" 2>/dev/null)" = 75 ] \
          || fail "SIG$sig to $whom: rank $r exited '$(cat "$WORK/rc.$r" 2>/dev/null)', expected 75"
        grep -q "\[rank $r\] warning: got SIG$sig: the job stops at the next step boundary" "$WORK/out" \
          || fail "SIG$sig to $whom: rank $r does not say what it got"
      done
      grep -q "got SIG$sig again" "$WORK/out" && fail "SIG$sig to $whom: a rank took the agent's copy for a second signal"
      [ "$step" -eq 0 ] || grep -q "resumed from $WORK/ckpt/step-0*$step after step $step" "$WORK/out" \
        || fail "SIG$sig to $whom: did not resume after step $step"
      step=$(latest_step "$WORK/ckpt")
      grep -q "stopped after step $step of 40 on SIG$sig: checkpoint step $step" "$WORK/out" \
        || fail "SIG$sig to $whom: no line for the stop at step $step"
      python3 "$ROOT/tests/support/check_run_dir.py" "$(dirname "${runs[-1]}")" --spec "$WORK/job.yaml" --first-step "$first" \
        --steps "$step" --world 2 --pipeline 2 --stopped-by "SIG$sig" || fail "SIG$sig to $whom: the run directory is not finished"
      no_leftovers
    }
    stop_agent TERM agent
    stop_agent USR1 agent --signals-to-handle SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1
    stop_agent TERM all
    timeout 300 "${agent[@]}" "${worker[@]}" --resume auto --run-dir "$WORK/last/run" > "$WORK/out" 2>&1 \
      || fail "the last resume exited $?"
    grep -q "resumed from $WORK/ckpt/step-0*$step after step $step" "$WORK/out" || fail "did not resume after step $step"
    same_losses "$WORK/ref/run" "${runs[@]}" "$WORK/last/run"
    no_leftovers
    ;;
  signal_kinds)
    # SIGHUP, SIGUSR2, SIGINT and SIGTERM checkpoint too (none ends ppctl silently); a second signal ends the job at
    # once, and `latest` stays complete; train.on_signal: stop writes none (exit 128 + signal); a bad value is refused.
    tiny_job 2 100000 "checkpoint: {dir: ckpt, interval: 4}"
    sed -i 's/log_interval: 5/log_interval: 1/' "$WORK/job.yaml"
    for sig in HUP USR2 INT TERM; do
      start_long_training
      kill "-$sig" "$launcher"
      wait_bounded "$launcher" 120
      [ "$rc" -eq 75 ] || fail "SIG$sig: exit code $rc, expected 75"
      grep -q "got SIG$sig (forwarded by the launcher)" "$WORK/out" || fail "SIG$sig: the workers do not name it"
      latest_step "$WORK/ckpt" > /dev/null
      no_leftovers
    done
    start_long_training
    wait_for_line "checkpoint of step" 120
    kill -USR1 "$launcher"
    sleep 0.05
    kill -TERM "$launcher"
    wait_bounded "$launcher" 60
    [ "$rc" -eq 75 ] || [ "$rc" -eq 138 ] || fail "SIGUSR1 then SIGTERM: exit code $rc, expected 138 (or 75)"
    step=$(latest_step "$WORK/ckpt")
    echo "SIGUSR1 then SIGTERM: exit code $rc, latest complete at step $step" >&2
    no_leftovers
    rm -rf "$WORK/ckpt"
    sed -i 's/log_interval: 1/log_interval: 1, on_signal: stop/; s/, interval: 4//' "$WORK/job.yaml"
    start_long_training
    kill -USR1 "$launcher"
    wait_bounded "$launcher" 120
    [ "$rc" -eq 138 ] || fail "train.on_signal stop: exit code $rc, expected 138"
    grep -q "without a checkpoint (train.on_signal: stop)" "$WORK/out" || fail "train.on_signal stop: no line saying so"
    [ ! -e "$WORK/ckpt/latest" ] || fail "train.on_signal stop wrote a checkpoint"
    no_leftovers
    sed -i 's/on_signal: stop/on_signal: save/' "$WORK/job.yaml"
    "$PPCTL" plan "$WORK/job.yaml" > "$WORK/out" 2>&1; rc=$?
    [ "$rc" -eq 2 ] || fail "train.on_signal save: exit code $rc, expected 2"
    grep -q "train.on_signal" "$WORK/out" && grep -q "checkpoint" "$WORK/out" || fail "the bad value's message does not name the field and the values"
    ;;
  signal_at_start)
    # A signal in the first moments, while ppctl-torch is still loading LibTorch, is held until ppctl's handlers
    # take it: the local launcher and torchrun-style ranks each say what they got and exit 128 + N, never by the
    # default action without a word (before the fix: exit 138 / 143 and an empty output).
    tiny_job 2 100000 "checkpoint: {dir: ckpt}"
    for sig in USR1 TERM HUP; do
      "$PPCTL" train "$WORK/job.yaml" > "$WORK/out" 2>&1 &
      launcher=$!
      sleep 0.05
      kill "-$sig" "$launcher"
      wait_bounded "$launcher" 120
      [ "$rc" -eq $((128 + $(kill -l "$sig"))) ] || fail "SIG$sig at start: exit code $rc, expected 128 + SIG$sig"
      grep -q "interrupted (SIG$sig)" "$WORK/out" || fail "SIG$sig at start: the launcher says not what it got"
      no_leftovers
    done
    start_torchrun_ranks
    sleep 0.05
    kill -TERM "${pids[@]}"
    for r in 0 1; do
      wait_bounded "${pids[$r]}" 120
      cp "$WORK/rank$r.out" "$WORK/out"
      [ "$rc" -eq 143 ] || [ "$rc" -eq 75 ] || fail "rank $r: exit code $rc after an early SIGTERM, expected 143"
      grep -q "\[rank $r\] warning: got SIGTERM" "$WORK/out" || fail "rank $r says not what it got"
    done
    no_leftovers
    ;;
  signal_closed_output)
    # The reader of ppctl's output goes away first (\`ppctl train ... | tee log\` when an ssh session drops: tee
    # ends on the hangup too): the run goes on with its logs in the run directory, and the SIGHUP then stops it
    # at a step boundary with a checkpoint, exit 75. Before the fix the next log line killed launcher and workers
    # by SIGPIPE (exit 141, no checkpoint, the run directory unfinished).
    tiny_job 2 100000 "checkpoint: {dir: ckpt}"
    sed -i 's/log_interval: 5/log_interval: 1/' "$WORK/job.yaml"
    mkfifo "$WORK/pipe"
    head -c 2000 "$WORK/pipe" > /dev/null &
    reader=$!
    "$PPCTL" train "$WORK/job.yaml" --run-dir "$WORK/run" > "$WORK/pipe" 2>&1 &
    launcher=$!
    wait "$reader"  # the pipe has no reader from now on
    for _ in $(seq 1 1200); do grep -q '"step":5,' "$WORK/run/metrics.jsonl" 2>/dev/null && break; sleep 0.1; done
    grep -q '"step":5,' "$WORK/run/metrics.jsonl" || fail "the run did not reach step 5 after its output closed"
    kill -HUP "$launcher"
    wait_bounded "$launcher" 120
    [ "$rc" -eq 75 ] || fail "SIGHUP after the output closed: exit code $rc, expected 75"
    step=$(latest_step "$WORK/ckpt")
    grep -q "training stopped: interrupted (SIGHUP): all 2 workers stopped, with a checkpoint" "$WORK/run/launcher.log" \
      || fail "launcher.log has no final line"
    echo "output closed, then SIGHUP: exit 75, checkpoint of step $step" >&2
    no_leftovers
    ;;
  resume_auto)
    # --resume auto: a fresh start without a checkpoint; this run's latest checkpoint after; another run's (another
    # spec, another Slurm job) refused with exit 2 saying how to go on; the same Slurm job (a requeue) accepted.
    tiny_job 2 4 "checkpoint: {dir: ckpt}"
    timeout 300 "$PPCTL" train "$WORK/job.yaml" --resume auto > "$WORK/out" 2>&1 || fail "a first --resume auto exited $?"
    grep -q "no checkpoint in $WORK/ckpt yet: starting from step 1" "$WORK/out" || fail "no fresh-start line"
    timeout 300 "$PPCTL" train "$WORK/job.yaml" --resume auto --steps 6 > "$WORK/out" 2>&1 || fail "resume exited $?"
    grep -q "resumed from $WORK/ckpt/step-0*4 after step 4" "$WORK/out" || fail "did not resume this run's checkpoint"
    sed -i 's/dropout: 0.0/dropout: 0.1/' "$WORK/job.yaml"
    "$PPCTL" train "$WORK/job.yaml" --resume auto --steps 8 > "$WORK/out" 2>&1; rc=$?
    [ "$rc" -eq 2 ] || fail "another run's checkpoint: exit code $rc, expected 2"
    grep -q "is not this run's: it was written by a run with spec hash [0-9a-f]* (this spec: [0-9a-f]*)" "$WORK/out" \
      || fail "no message saying whose checkpoint it is"
    grep -q "fix: to continue it anyway pass --resume $WORK/ckpt; to start this run afresh set checkpoint.dir" "$WORK/out" \
      || fail "the message says not how to go on"
    SLURM_JOB_ID=41 timeout 300 "$PPCTL" train "$WORK/job.yaml" --resume --steps 8 > "$WORK/out" 2>&1 \
      || fail "an explicit --resume exited $?"
    sed -i 's/dropout: 0.1/dropout: 0.0/' "$WORK/job.yaml"
    SLURM_JOB_ID=42 "$PPCTL" train "$WORK/job.yaml" --resume auto --steps 10 > "$WORK/out" 2>&1; rc=$?
    [ "$rc" -eq 2 ] && grep -q "in Slurm job 41 (this job: 42)" "$WORK/out" || fail "another Slurm job's checkpoint: exit code $rc"
    SLURM_JOB_ID=41 timeout 300 "$PPCTL" train "$WORK/job.yaml" --resume auto --steps 10 > "$WORK/out" 2>&1 \
      || fail "the same Slurm job's checkpoint (a requeue): exit code $?"
    grep -q "resumed from $WORK/ckpt/step-0*8 after step 8" "$WORK/out" || fail "the requeued job did not resume"
    # Requeued after its last checkpoint (train.steps reached): nothing to train, exit 0 (a requeue loop ends), and
    # nothing is written; under torchrun-style variables too (each rank decides alike, no rendezvous).
    before="$(find "$WORK" -newer "$WORK/job.yaml" | sort)"
    for env in "" "RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=1"; do
      env SLURM_JOB_ID=41 $env timeout 60 "$PPCTL" train "$WORK/job.yaml" --resume auto --steps 10 > "$WORK/out" 2>&1 \
        || fail "a complete run resumed with --resume auto ($env): exit code $?, expected 0"
      grep -q "this run is complete: its latest checkpoint, .*step-0*10, is at step 10 and train.steps (or --steps) is 10; nothing to train, nothing started" "$WORK/out" \
        || fail "a complete run: no line saying so ($env)"
    done
    [ "$(find "$WORK" -newer "$WORK/job.yaml" -not -name out | sort)" = "$(echo "$before" | grep -v '/out$')" ] \
      || fail "a complete run's --resume auto wrote something"
    # Given a folder, the same checkpoint is still refused: there is nothing to train.
    "$PPCTL" train "$WORK/job.yaml" --resume "$WORK/ckpt" --steps 10 > "$WORK/out" 2>&1; rc=$?
    [ "$rc" -eq 2 ] && grep -q "nothing is left to train" "$WORK/out" || fail "an explicit --resume of a complete run: exit $rc"
    no_leftovers
    ;;
  *)
    echo "unknown case: $CASE" >&2
    exit 2
    ;;
esac
echo "PASS [$CASE]"
