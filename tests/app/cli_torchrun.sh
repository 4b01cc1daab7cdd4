#!/usr/bin/env bash
# End-to-end tests of ranks launched by torchrun or srun (or by hand with their variables): the rendezvous
# store and its errors, the listening interfaces, the shared run directory and a lost peer.
# Usage: cli_torchrun.sh CASE PPCTL_BINARY (exits non-zero on failure). Helpers: tests/app/cli_lib.sh.
# shellcheck source=cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh" "$@"

# --- Rendezvous helpers (issue 12 faults 1, 2, 12) ---

hold_port() {  # $1 = port: a program ($holder) that listens there, accepts and never answers
  cat > "$WORK/hold_port.py" <<'PY'
import socket, sys
s = socket.socket()
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(16)
print("listening", flush=True)
held = []
while True:
    held.append(s.accept()[0])
PY
  python3 "$WORK/hold_port.py" "$1" > "$WORK/holder.out" 2>&1 &
  holder=$!
  for _ in $(seq 1 50); do grep -q listening "$WORK/holder.out" && return 0; sleep 0.1; done
  fail "the port holder did not start"
}

timed_rank() {  # $1 = name, then VAR=value...: `ppctl train` under those variables (<= 60 s) into
                # $WORK/NAME.out; sets rc and elapsed (seconds)
  local name="$1" start
  shift
  start=$(date +%s.%N)
  env "$@" timeout 60 "$PPCTL" train "$WORK/job.yaml" > "$WORK/$name.out" 2>&1
  rc=$?
  elapsed=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
}

expect_rendezvous_error() {  # $1 = name (timed_rank), $2 = runtime.comm_timeout_s, then texts its one
                             # error line holds. The process ends within timeout + 10 s, and its wait
                             # (from its "launched by" line to its error line) within timeout + 2 s.
  local name="$1" timeout_s="$2" text waited
  shift 2
  cp "$WORK/$name.out" "$WORK/out"
  [ "$rc" -eq 1 ] || fail "$name: exit code $rc after $elapsed s, expected 1"
  awk -v e="$elapsed" -v t="$timeout_s" 'BEGIN { exit !(e <= t + 10) }' || fail "$name: exited after $elapsed s, more than $timeout_s + 10 s"
  waited=$(awk 'function at(line, p) { split(substr(line, 2, 12), p, ":"); return p[1] * 3600 + p[2] * 60 + p[3] }
                /launched by/ && !a { a = at($0) } / error: / { e = at($0) }
                END { if (a && e) printf "%.1f", e - a }' "$WORK/out")
  [ -n "$waited" ] || fail "$name: no 'launched by' and error lines to time the wait with"
  awk -v w="$waited" -v t="$timeout_s" 'BEGIN { exit !(w <= t + 2) }' || fail "$name: waited $waited s, more than $timeout_s + 2 s"
  grep -qE "frame #|\[c10d\]" "$WORK/out" && fail "$name: c10d's log lines or a C++ backtrace were printed"
  [ "$(grep -c "error:" "$WORK/out")" -eq 1 ] || fail "$name: expected exactly one error line"
  for text in "$@"; do
    grep "error:" "$WORK/out" | grep -qF -- "$text" || fail "$name: the error does not say '$text'"
  done
  echo "$name: exit $rc after $elapsed s (waited $waited s)"
}

listening_sockets() {  # PID...: local addresses (hex, as /proc/net/tcp*) of their listening TCP sockets
  python3 - "$@" <<'PY'
import os, sys
inodes = set()
for pid in sys.argv[1:]:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        continue
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
for table in ("/proc/net/tcp", "/proc/net/tcp6"):
    for line in open(table).read().splitlines()[1:]:
        f = line.split()
        if f[3] == "0A" and f[9] in inodes:
            print(f[1])
PY
}

expect_loopback_only() {  # $1 = store port, then PID...: once the store listens, every listening
                          # socket of these processes is on 127.0.0.1 or ::1
  local port_hex found=""
  port_hex=$(printf '%04X' "$1")
  shift
  for _ in $(seq 1 300); do
    listening_sockets "$@" > "$WORK/listening"
    grep -q ":$port_hex$" "$WORK/listening" && { found=1; break; }
    sleep 0.1
  done
  [ -n "$found" ] || fail "no listening socket on the store's port $1: $(tr '\n' ' ' < "$WORK/listening")"
  grep -vE "^(0100007F|00000000000000000000000001000000):" "$WORK/listening" > "$WORK/exposed" \
    && fail "listening beyond loopback: $(tr '\n' ' ' < "$WORK/exposed")"
  echo "listening sockets: $(tr '\n' ' ' < "$WORK/listening")"
}

case "$CASE" in
  torchrun_env)
    # Four `ppctl train` processes started by hand with torchrun's variables: each is one worker,
    # rank 0 hosts the store; dp = 4 / 2 stages = 2. The local launcher on the same spec with
    # pipeline.data_parallel: 2 must log the same losses.
    tiny_job 2 4 ""
    sed -i 's/log_interval: 5/log_interval: 1/' "$WORK/job.yaml"
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    pids=()
    for r in 0 1 2 3; do
      RANK=$r WORLD_SIZE=4 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
        timeout 300 "$PPCTL" train "$WORK/job.yaml" > "$WORK/rank$r.out" 2>&1 &
      pids+=($!)
    done
    for r in 0 1 2 3; do
      wait "${pids[$r]}" || { cp "$WORK/rank$r.out" "$WORK/out"; fail "rank $r exited $?"; }
    done
    cat "$WORK"/rank*.out > "$WORK/out"
    grep -q "launched by torchrun: rank 0 of 4 (local rank 0), dp 2 x pp 2" "$WORK/rank0.out" || fail "rank 0 does not say how it was launched"
    # pipeline.data_parallel is 0 here: the plan rank 0 prints is made for the dp WORLD_SIZE gives.
    grep -q "dp 2 x pp 2 = 4 ranks" "$WORK/rank0.out" || fail "rank 0's plan is not for dp 2: $(grep -m1 ' x pp ' "$WORK/rank0.out")"
    grep -q "(hosted here)" "$WORK/rank0.out" || fail "rank 0 does not host the store"
    # rank = pp_rank x dp + dp_rank: rank 2 holds the last stage of replica 0 and logs the loss.
    [ "$(grep -c "| loss " "$WORK/rank2.out")" -eq 4 ] || fail "rank 2 logged no 4 loss lines"
    for r in 0 1 3; do grep -q "| loss " "$WORK/rank$r.out" && fail "rank $r logged a loss line"; done
    grep -o "step [0-9]/4 | loss [0-9.]*" "$WORK/rank2.out" > "$WORK/external.loss"
    sed -i 's/micro_batch_size: 4}/micro_batch_size: 4, data_parallel: 2}/' "$WORK/job.yaml"
    timeout 300 "$PPCTL" train "$WORK/job.yaml" > "$WORK/out" 2>&1 || fail "the local launch exited $?"
    grep -q "starting 4 workers" "$WORK/out" || fail "the local launcher did not start dp x pp = 4 workers"
    grep -o "step [0-9]/4 | loss [0-9.]*" "$WORK/out" > "$WORK/local.loss"
    diff "$WORK/external.loss" "$WORK/local.loss" > /dev/null || fail "losses differ: $(paste "$WORK/external.loss" "$WORK/local.loss")"
    no_leftovers
    ;;
  torchrun_run_dir)
    # Issue 13: under torchrun itself (its agent hosts the store on MASTER_PORT) every rank is one worker;
    # rank 0 makes the run directory under runs/ and prints it, every rank writes into it (rank logs,
    # metrics.jsonl from the last stage, its trace part) and rank 0 merges the trace of all 4 ranks.
    [ -n "${PPCTL_PYTHON:-}" ] || fail "PPCTL_PYTHON (the venv's python, with torch) is not set"
    tiny_job 4 3 ""
    sed -i 's/log_interval: 5/log_interval: 1/' "$WORK/job.yaml"
    timeout 300 "$PPCTL_PYTHON" -m torch.distributed.run --standalone --nproc-per-node 4 --no-python \
      "$PPCTL" train "$WORK/job.yaml" > "$WORK/out" 2>&1 || fail "torchrun exited $?"
    grep -q "\[rank 0\] info: launched by torchrun: rank 0 of 4" "$WORK/out" || fail "rank 0 did not run under torchrun"
    grep -q "\[rank 0\] info: run directory: $WORK/runs/job-" "$WORK/out" || fail "rank 0 does not print the run directory"
    grep -q "\[rank 0\] info: trace of 4 ranks written to $WORK/runs/job-.*/trace.json" "$WORK/out" || fail "the trace was not merged"
    python3 "$ROOT/tests/support/check_run_dir.py" "$WORK/runs" --spec "$WORK/job.yaml" --steps 3 --world 4 --pipeline 4 \
      || fail "the run directory is incomplete"
    no_leftovers
    ;;
  run_dir_shared)
    # Issue 13: ranks started by hand with torchrun's variables agree on one run directory even when one
    # starts seconds later (the folder's name holds rank 0's start time); a rank that cannot see it (here:
    # its own mount namespace hides runs/, as a node-local working directory would) warns naming the
    # folder, its host and the fix, and the job still trains; rank 0 names it as missing from the trace.
    tiny_job 3 3 ""
    sed -i 's/comm_timeout_s: 30/comm_timeout_s: 20/' "$WORK/job.yaml"
    start_ranks() {  # $1 = delay (s) of rank 1, $2 = how rank 1 is started (a command prefix, may be empty),
                     # then extra arguments of `ppctl train`; sets rcs (each rank's exit code)
      local port r delay="$1" prefix="$2"
      shift 2
      port=$(free_port)
      pids=()
      for r in 0 1 2; do
        if [ "$r" -eq 1 ]; then
          (sleep "$delay"; RANK=1 WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port exec $prefix timeout 120 "$PPCTL" \
            train "$WORK/job.yaml" "$@") > "$WORK/rank1.out" 2>&1 &
        else
          RANK=$r WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 120 "$PPCTL" train "$WORK/job.yaml" "$@" \
            > "$WORK/rank$r.out" 2>&1 &
        fi
        pids+=($!)
      done
      rcs=()
      for r in 0 1 2; do wait "${pids[$r]}"; rcs+=($?); done
    }
    all_succeed() {
      for r in 0 1 2; do [ "${rcs[$r]}" -eq 0 ] || { cp "$WORK/rank$r.out" "$WORK/out"; fail "rank $r exited ${rcs[$r]}"; }; done
    }
    start_ranks 1.5 ""
    all_succeed
    python3 "$ROOT/tests/support/check_run_dir.py" "$WORK/runs" --spec "$WORK/job.yaml" --steps 3 --world 3 --pipeline 3 \
      || { cat "$WORK"/rank*.out > "$WORK/out"; fail "the late rank did not write into rank 0's run directory"; }
    if [ "$(id -u)" -eq 0 ] && unshare -m true 2>/dev/null; then
      mv "$WORK/runs" "$WORK/runs.first"
      mkdir "$WORK/runs"
      cat > "$WORK/hide_runs.sh" <<SH
#!/bin/bash
mount -t tmpfs tmpfs "$WORK/runs" && exec "\$@"
SH
      chmod +x "$WORK/hide_runs.sh"
      start_ranks 0 "unshare -m $WORK/hide_runs.sh"
      all_succeed
      cp "$WORK/rank1.out" "$WORK/out"
      grep -q "warning: rank 1 on $(hostname) cannot see the run directory $WORK/runs/job-.* that rank 0 made" "$WORK/out" \
        || fail "rank 1 does not warn that it cannot see the folder, naming it and its host"
      grep -q "fix: start the job from a folder on a file system every node shares, or set observe.runs_dir or --run-dir" \
        "$WORK/out" || fail "rank 1's warning gives no fix"
      cp "$WORK/rank0.out" "$WORK/out"
      grep -q "without rank(s) 1: they left no trace part" "$WORK/out" || fail "rank 0 does not name rank 1 as missing"
      python3 "$ROOT/tests/support/check_run_dir.py" "$WORK/runs" --spec "$WORK/job.yaml" --steps 3 --world 3 \
        --pipeline 3 --without-rank 1 || fail "the run directory without rank 1 is not as expected"
    else
      echo "SKIP [$CASE] the hidden-folder part: needs root and unshare -m"
    fi
    # --run-dir is honoured (rank 0's; the folder and its parents are made) ...
    start_ranks 0 "" --run-dir "$WORK/named/run"
    all_succeed
    python3 "$ROOT/tests/support/check_run_dir.py" "$WORK/named" --spec "$WORK/job.yaml" --steps 3 --world 3 --pipeline 3 \
      || fail "the run directory named by --run-dir is incomplete"
    # ... and when rank 0 cannot make it, every rank exits 2 with rank 0's reason, nothing started.
    start_ranks 0 "" --run-dir "$WORK/corpus.txt"
    for r in 0 1 2; do
      cp "$WORK/rank$r.out" "$WORK/out"
      [ "${rcs[$r]}" -eq 2 ] || fail "rank $r: exit code ${rcs[$r]} for an unusable --run-dir, expected 2"
      grep -q "error: .*--run-dir $WORK/corpus.txt: exists and is not a folder" "$WORK/out" || fail "rank $r does not give rank 0's reason"
      grep -q "nothing was started" "$WORK/out" || fail "rank $r does not say nothing was started"
    done
    grep -q "error: rank 0 could not make the run directory: --run-dir" "$WORK/rank2.out" || fail "rank 2 does not say rank 0 failed"
    no_leftovers
    ;;
  rendezvous_timeout)
    # Issue 12 fault 1: rank 1 of a torchrun-style job whose rank 0 never starts exits within the
    # timeout (c10d alone retries to 2 x timeout + a random delay), once, without backtraces,
    # saying what it waited for, where, that rank 0 hosts the store, and the fix.
    tiny_job 2 2 ""
    sed -i 's/comm_timeout_s: 30/comm_timeout_s: 4/' "$WORK/job.yaml"
    port=$(free_port)
    timed_rank rank1 RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port"
    expect_rendezvous_error rank1 4 "rendezvous store at 127.0.0.1:$port within 4 s" \
      "rank 0 hosts the store" "MASTER_PORT"
    no_leftovers
    ;;
  rendezvous_port_taken)
    # Issue 12 fault 2, on Slurm's default port 20000 + SLURM_JOB_ID mod 20000: (a) a program that
    # accepts and never answers holds it; (b) another ppctl job's store does (job ids 20000 apart).
    # Every rank exits in time naming the port and MASTER_PORT; nobody joins the other job's store.
    tiny_job 2 2 ""
    sed 's/comm_timeout_s: 30/comm_timeout_s: 20/' "$WORK/job.yaml" > "$WORK/job_a.yaml"
    sed -i 's/comm_timeout_s: 30/comm_timeout_s: 4/' "$WORK/job.yaml"
    port=$(free_port 20000 39999)
    job=$((port - 20000))
    slurm_task() {  # $1 = SLURM_PROCID, $2 = SLURM_JOB_ID: the variables srun sets, one word each
      echo "SLURM_PROCID=$1 SLURM_NTASKS=2 SLURM_LOCALID=$1 SLURM_STEP_ID=0 SLURM_JOB_ID=$2 SLURM_JOB_NODELIST=localhost MASTER_ADDR=127.0.0.1"
    }
    hold_port "$port"
    # shellcheck disable=SC2046
    timed_rank held1 $(slurm_task 1 "$job")
    expect_rendezvous_error held1 4 "127.0.0.1:$port" "another program holds port $port" "MASTER_PORT"
    # shellcheck disable=SC2046
    timed_rank held0 $(slurm_task 0 "$job")
    expect_rendezvous_error held0 4 "on 127.0.0.1:$port: port $port is already in use" "MASTER_PORT"
    kill "$holder"; wait "$holder" 2>/dev/null
    # shellcheck disable=SC2046
    env $(slurm_task 0 "$job") "$PPCTL" train "$WORK/job_a.yaml" > "$WORK/job_a0.out" 2>&1 &
    job_a0=$!
    expect_loopback_only "$port" "$job_a0"
    # shellcheck disable=SC2046
    timed_rank other1 $(slurm_task 1 $((job + 20000)))
    expect_rendezvous_error other1 4 "refusing the rendezvous store at 127.0.0.1:$port: it belongs to another job" "MASTER_PORT"
    # shellcheck disable=SC2046
    timed_rank other0 $(slurm_task 0 $((job + 20000)))
    expect_rendezvous_error other0 4 "port $port is already in use" "MASTER_PORT"
    # The store's own job is unharmed: its rank 1 joins and the job trains.
    # shellcheck disable=SC2046
    env $(slurm_task 1 "$job") timeout 120 "$PPCTL" train "$WORK/job_a.yaml" > "$WORK/job_a1.out" 2>&1 \
      || { cp "$WORK/job_a1.out" "$WORK/out"; fail "rank 1 of the store's own job exited $?"; }
    wait "$job_a0" || { cp "$WORK/job_a0.out" "$WORK/out"; fail "rank 0 of the store's own job exited $?"; }
    no_leftovers
    ;;
  rendezvous_missing_rank)
    # Issue 12 F6: ranks 0 and 2 of 4 started, 1 and 3 never: both end within the timeout, once each, naming
    # the missing ranks (compressed) and the fix, without c10d's store keys or backtraces. Exit code 1: a
    # rank may only be late (not bad input; a retry can succeed).
    tiny_job 4 2 ""
    sed -i 's/comm_timeout_s: 30/comm_timeout_s: 5/' "$WORK/job.yaml"
    port=$(free_port)
    # Rank 2 starts 2 s after rank 0, so rank 0 (the store's host) gives up first and closes the store.
    (sleep 2; RANK=2 WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" exec timeout 60 "$PPCTL" train \
      "$WORK/job.yaml") > "$WORK/rank2.out" 2>&1 &
    rank2=$!
    timed_rank rank0 RANK=0 WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port"
    expect_rendezvous_error rank0 5 "ranks 1, 3 never joined the rendezvous within runtime.comm_timeout_s = 5 s" \
      "start every rank" "WORLD_SIZE"
    grep -q "keys:" "$WORK/out" && fail "c10d's store keys are printed"
    wait_bounded "$rank2" 30
    cp "$WORK/rank2.out" "$WORK/out"
    [ "$rc" -eq 1 ] || fail "rank 2: exit code $rc"
    # Rank 2 sees the store close when rank 0 gives up (or, on a slow machine, times out itself): one
    # error line naming the missing ranks and the fix, and no c10d backtrace.
    [ "$(grep -c "error:" "$WORK/out")" -eq 1 ] || fail "rank 2: not exactly one error line"
    grep "error:" "$WORK/out" | grep -qE "ranks 1, 3 (never joined|had not joined by then)" \
      || fail "rank 2 does not name the missing ranks"
    grep "error:" "$WORK/out" | grep -q "fix: start every rank" || fail "rank 2 gives no fix"
    grep -q "frame #" "$WORK/out" && fail "rank 2 printed a c10d backtrace"
    grep "error:" "$WORK/out" >&2
    no_leftovers
    ;;
  store_interfaces)
    # Issue 12 fault 12: the local launcher's store (and the workers) listen on loopback only; under
    # torchrun-style variables with MASTER_ADDR=127.0.0.1, rank 0's store does too.
    tiny_job 2 100000 ""
    start_long_training
    port=$(grep -o "rendezvous store on 127.0.0.1:[0-9]*" "$WORK/out" | grep -o "[0-9]*$")
    # shellcheck disable=SC2046
    expect_loopback_only "$port" "$launcher" $(pgrep -P "$launcher")
    kill -INT "$launcher"; wait_bounded "$launcher" 60
    port=$(free_port)
    RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" "$PPCTL" train "$WORK/job.yaml" > "$WORK/out" 2>&1 &
    rank0=$!
    expect_loopback_only "$port" "$rank0"
    kill "$rank0"; wait "$rank0" 2>/dev/null
    no_leftovers
    ;;
  master_addr_env)
    # Issue 12 F7: MASTER_ADDR=0.0.0.0 on rank 0 warns once that the store is exposed on every interface;
    # an unresolvable MASTER_ADDR is bad input (exit 2) naming the variable, the value and the fix.
    tiny_job 2 2 ""
    sed -i 's/comm_timeout_s: 30/comm_timeout_s: 2/' "$WORK/job.yaml"
    port=$(free_port)
    timed_rank wildcard RANK=0 WORLD_SIZE=2 MASTER_ADDR=0.0.0.0 MASTER_PORT="$port"
    cp "$WORK/wildcard.out" "$WORK/out"
    [ "$(grep -c "MASTER_ADDR '0.0.0.0' is the wildcard address" "$WORK/out")" -eq 1 ] || fail "no single wildcard warning"
    grep "wildcard address" "$WORK/out" | grep -q "every interface.*no authentication.*fix: set MASTER_ADDR" \
      || fail "the warning does not say what is exposed and the fix"
    timed_rank unresolvable RANK=0 WORLD_SIZE=2 MASTER_ADDR=no-such-host.invalid MASTER_PORT="$port"
    cp "$WORK/unresolvable.out" "$WORK/out"
    [ "$rc" -eq 2 ] || fail "unresolvable MASTER_ADDR: exit code $rc, expected 2"
    grep -q "error: .*MASTER_ADDR 'no-such-host.invalid' does not resolve.*(fix: set MASTER_ADDR" "$WORK/out" \
      || fail "the error does not name MASTER_ADDR, its value and the fix"
    no_leftovers
    ;;
  peer_lost)
    # Issue 13: a rank of a dp 2 x pp 2 torchrun-style job (with train.max_restarts) SIGKILLed mid-run. Its
    # pipeline peer (rank 1: stage 0 of replica 1, group rank 0) ends at once, naming itself and the lost
    # rank by their global ranks, with the host; every survivor exits non-zero, nothing is left.
    tiny_job 2 100000 ""
    sed -i 's/^pipeline: {stages: 2,/pipeline: {stages: 2, data_parallel: 2,/; s/log_interval: 5}/log_interval: 1, max_restarts: 2}/' \
      "$WORK/job.yaml"
    port=$(free_port)
    pids=()
    for r in 0 1 2 3; do
      RANK=$r WORLD_SIZE=4 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
        timeout 120 "$PPCTL" train "$WORK/job.yaml" > "$WORK/rank$r.out" 2>&1 &
      pids+=($!)
    done
    for _ in $(seq 1 1200); do grep -q "step 2/" "$WORK"/rank*.out && break; sleep 0.1; done
    grep -q "step 2/" "$WORK"/rank*.out || fail "no step 2 within 120 s: $(tail -n 3 "$WORK"/rank*.out)"
    victim=$(pgrep -P "${pids[3]}")  # ppctl itself, the child of rank 3's `timeout`
    [ -n "$victim" ] || fail "no process of rank 3"
    kill -KILL "$victim"
    for r in 0 1 2; do
      wait_bounded "${pids[$r]}" 40
      [ "$rc" -ne 0 ] || fail "rank $r exited 0 after rank 3 was killed"
    done
    wait "${pids[3]}" 2>/dev/null
    # In a receive from rank 3, or in a collective of the pipeline group {1, 3} or of the tied embedding's
    # group {0, 1, 2, 3} (the first and last stage of both replicas), whichever it was in.
    grep -qE "\[rank 1\] error: rank 1: .*(peer: rank 3 on $(hostname)|in group '[^']*' \(ranks (1, 3|0-3) on $(hostname)\))" \
      "$WORK/rank1.out" || fail "rank 1 does not name itself, rank 3 and its host: $(grep error: "$WORK/rank1.out")"
    grep -q "peer rank" "$WORK"/rank*.out && fail "a message names a peer by its group rank"
    # train.max_restarts does nothing under torchrun: rank 0 says so, once.
    grep -q "train.max_restarts 2 has no effect under torchrun" "$WORK/rank0.out" \
      || fail "rank 0 does not warn that train.max_restarts has no effect"
    [ "$(cat "$WORK"/rank*.out | grep -c "train.max_restarts 2 has no effect")" -eq 1 ] || fail "the warning is not given once"
    no_leftovers
    ;;
  damaged_shard)
    # A tp 2 x pp 2 checkpoint with one byte of a shard file altered (its size kept), resumed by four ranks
    # started with torchrun's variables: each rank checks only the files it reads, so one rank finds it. Every
    # rank stops before step 3 (none waits on a peer that left): the one that read it names the file, the others
    # say another rank could not load its part. Exit 2 everywhere (bad input), nothing left running.
    tiny_job 2 2 "checkpoint: {dir: ckpt}"
    sed -i 's/^pipeline: {stages: 2,/pipeline: {stages: 2, tensor_parallel: 2,/' "$WORK/job.yaml"
    (cd "$WORK" && timeout 300 "$PPCTL" train job.yaml > "$WORK/first.out" 2>&1) || { cp "$WORK/first.out" "$WORK/out"; fail "the first run exited $?"; }
    shard="$WORK/ckpt/step-00000002/block3.tp1-of-2.pt"
    [ -f "$shard" ] || fail "no shard file $shard: $(ls "$WORK/ckpt/step-00000002")"
    python3 - "$shard" <<'PY'
import sys
data = bytearray(open(sys.argv[1], "rb").read())
data[len(data) // 2] ^= 0xFF
open(sys.argv[1], "wb").write(bytes(data))
PY
    sed -i 's/steps: 2,/steps: 4,/' "$WORK/job.yaml"
    port=$(free_port)
    pids=()
    for r in 0 1 2 3; do
      (cd "$WORK" && RANK=$r WORLD_SIZE=4 LOCAL_RANK=$r LOCAL_WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port"         exec timeout 120 "$PPCTL" train job.yaml --resume ckpt > "$WORK/rank$r.out" 2>&1) &
      pids+=($!)
    done
    for r in 0 1 2 3; do
      wait_bounded "${pids[$r]}" 60
      [ "$rc" -eq 2 ] || { cat "$WORK"/rank*.out > "$WORK/out"; fail "rank $r exited $rc, expected 2"; }
    done
    cat "$WORK"/rank*.out > "$WORK/out"
    # Rank 3 holds tp rank 1 of stage 1 (rank = pp x 2 + tp): the one that reads block3.tp1-of-2.pt.
    grep -q "\[rank 3\] error: .*block3.tp1-of-2.pt.*checksum" "$WORK/rank3.out" \
      || fail "rank 3 does not name the altered file: $(grep error: "$WORK/rank3.out")"
    for r in 0 1 2; do
      grep -q "\[rank $r\] error: .*1 other rank(s) of the job could not load their part of this checkpoint" \
        "$WORK/rank$r.out" || fail "rank $r does not say another rank failed: $(grep error: "$WORK/rank$r.out")"
    done
    grep -q "Connection closed by peer\|step 3/4" "$WORK/out" && fail "a rank went on into step 3"
    no_leftovers
    ;;
  gloo_interface)
    # Issue 13: GLOO_SOCKET_IFNAME under the local launcher: a name the machine lacks is bad input before any
    # worker starts (said once); lo trains quietly; another interface with an address trains, with a warning
    # that the workers' sockets leave loopback.
    tiny_job 2 2 ""
    GLOO_SOCKET_IFNAME=nosuch0 timeout 120 "$PPCTL" train "$WORK/job.yaml" > "$WORK/out" 2>&1
    rc=$?
    [ "$rc" -eq 2 ] || fail "GLOO_SOCKET_IFNAME=nosuch0: exit code $rc, expected 2"
    [ "$(grep -c "GLOO_SOCKET_IFNAME='nosuch0': this machine has no network interface 'nosuch0'" "$WORK/out")" -eq 1 ] \
      || fail "the bad interface is not named exactly once: $(grep -c nosuch0 "$WORK/out")"
    grep -q "started 2 workers" "$WORK/out" && fail "workers were started with a bad GLOO_SOCKET_IFNAME"
    GLOO_SOCKET_IFNAME=lo timeout 300 "$PPCTL" train "$WORK/job.yaml" > "$WORK/out" 2>&1 || fail "GLOO_SOCKET_IFNAME=lo: exit code $?"
    grep -q "Gloo sockets listen on" "$WORK/out" && fail "a warning for lo"
    other=$(ip -o -4 addr show 2>/dev/null | awk '$2 != "lo" { print $2; exit }')
    if [ -n "$other" ]; then
      GLOO_SOCKET_IFNAME="$other" timeout 300 "$PPCTL" train "$WORK/job.yaml" > "$WORK/out" 2>&1 \
        || fail "GLOO_SOCKET_IFNAME=$other: exit code $?"
      grep -q "GLOO_SOCKET_IFNAME=$other: the workers' Gloo sockets listen on $other's address" "$WORK/out" \
        || fail "no warning that the sockets leave loopback"
    else
      echo "no interface but lo has an IPv4 address here: the warning case is not run" >&2
    fi
    no_leftovers
    ;;
  *) fail "unknown case" ;;
esac
echo "PASS [$CASE]"
