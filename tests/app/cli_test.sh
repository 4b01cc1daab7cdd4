#!/usr/bin/env bash
# End-to-end tests of the ppctl command line, as a user runs it. Usage: cli_test.sh CASE PPCTL_BINARY
# Cases: see the case statement below (plan_example, bad_spec, train_tiny, ...). Exits non-zero on failure.
set -uo pipefail
CASE="$1"
PPCTL="$2"
PPCTL_TORCH="$(dirname "$PPCTL")/ppctl-torch"  # every command but plan runs there (ppctl execs it)
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/ppctl_cli_${CASE}_XXXXXX")"
trap 'pkill -KILL -f "$WORK/" 2>/dev/null; rm -rf "$WORK"' EXIT
cd "$WORK" || exit 1  # `ppctl train` makes runs/<job>-<time>Z/ in the working directory: keep it in $WORK

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

# Runs "$@" as an ordinary user would read files: root's file-permission override (CAP_DAC_OVERRIDE,
# CAP_DAC_READ_SEARCH) dropped, so a mode-000 file cannot be read by it either.
without_root_reads() {
  if [ "$(id -u)" -eq 0 ]; then setpriv --bounding-set=-dac_override,-dac_read_search "$@"; else "$@"; fi
}

# Token datasets without numpy: $1 = PREFIX of a Megatron uint16 dataset of $2 tokens (ids k*7 mod $3) in
# documents of 50 tokens; $4 (optional) = a flat int32 token file of the same ids.
token_data() {
  python3 - "$@" <<'PY'
import struct, sys
prefix, tokens, vocab = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ids = [(k * 7) % vocab for k in range(tokens)]
open(prefix + ".bin", "wb").write(struct.pack(f"<{tokens}H", *ids))
lengths = [min(50, tokens - s) for s in range(0, tokens, 50)]
pointers, at = [], 0
for n in lengths:
    pointers.append(at)
    at += 2 * n
idx = b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, len(lengths), len(lengths) + 1)
idx += struct.pack(f"<{len(lengths)}i", *lengths) + struct.pack(f"<{len(lengths)}q", *pointers)
idx += struct.pack(f"<{len(lengths) + 1}q", *range(len(lengths) + 1))
open(prefix + ".idx", "wb").write(idx)
if len(sys.argv) > 4:
    open(sys.argv[4], "wb").write(struct.pack(f"<{tokens}i", *ids))
PY
}

# A tiny job on a blend of a Megatron dataset and a flat token file (vocabulary 100); $1 = steps, $2 = extra YAML.
blend_job() {
  token_data "$WORK/big" 4000 100
  token_data "$WORK/small" 400 100 "$WORK/small.bin"
  cat > "$WORK/job.yaml" <<YAML
model: {vocab_size: 100, layers: 2, hidden: 32, heads: 4, seq_len: 16, dropout: 0.0}
pipeline: {stages: 2, schedule: 1f1b, microbatches: 4, micro_batch_size: 4}
data:
  eval_fraction: 0.1
  blend: [{weight: 0.7, path: big, format: megatron}, {weight: 0.3, path: small.bin, format: tokens, dtype: int32}]
optimizer: {lr: 0.003}
train: {steps: $1, seed: 1, log_interval: 1}
runtime: {comm_timeout_s: 30}
$2
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

verify_passes() {  # $1 = spec, then parameter names (or "(loss)") that must each have a row
  local spec="$1"; shift
  "$PPCTL" verify "$spec" > "$WORK/out" 2>&1 || fail "verify exited $?"
  grep -q "^PASS: largest difference" "$WORK/out" || fail "no PASS verdict"
  grep -q "((" "$WORK/out" && fail "doubled parentheses in the report: $(grep -F "((" "$WORK/out")"
  for row in "$@"; do
    awk -v row="$row" '$1 == row { found = 1 } END { exit !found }' "$WORK/out" || fail "no row for $row"
  done
  no_leftovers
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

# Waits at most $2 s for the background process $1 and sets rc to its exit status. One still running
# then fails the case at once, with the process tree, instead of hanging until CTest's time limit.
wait_bounded() {
  local _
  for _ in $(seq 1 $(($2 * 10))); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$1" 2>/dev/null; then
    ps -o pid,stat,etime,args --forest -g "$(ps -o sid= -p "$1" | tr -d ' ')" >&2 2>/dev/null
    fail "process $1 ($(tr '\0' ' ' < "/proc/$1/cmdline" 2>/dev/null)) still running $2 s later"
  fi
  wait "$1"
  rc=$?
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

wait_for_line() {  # $1 = pattern in $WORK/out, $2 = seconds
  for _ in $(seq 1 $(($2 * 10))); do grep -q "$1" "$WORK/out" && return 0; sleep 0.1; done
  fail "no line matching '$1' within $2 s"
}

# --- Rendezvous helpers (issue 12 faults 1, 2, 12) ---

free_port() {  # [$1 $2 = range]: a TCP port of 127.0.0.1 that nothing listens on now
  python3 - "${1:-0}" "${2:-0}" <<'PY'
import random, socket, sys
lo, hi = int(sys.argv[1]), int(sys.argv[2])
for _ in range(200):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", random.randint(lo, hi) if hi else 0))
    except OSError:
        continue
    print(s.getsockname()[1])
    break
PY
}

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

# Sourced by another test script (tests/job/signal_test.sh) for the helpers above: its own cases follow there.
[ "${BASH_SOURCE[0]}" != "$0" ] && return 0

case "$CASE" in
  plan_example)
    "$PPCTL" plan "$ROOT/configs/example.yaml" > "$WORK/out" 2>&1 || fail "plan exited $?"
    grep -q "bubble" "$WORK/out" || fail "no bubble line"
    grep -q "^data       text [0-9]* files" "$WORK/out" || fail "no data line naming the text files"
    for r in 0 1 2 3; do grep -q "^rank $r: F0" "$WORK/out" || fail "no action list for rank $r"; done
    grep -q "^rank 0: F0 F1 F2 F3 B0 F4 B1" "$WORK/out" || fail "rank 0 is not 1F1B (3 warmup forwards, then F and B alternate)"
    # The parameters column reconciles with the model line: its sum less the footnoted tied copy ('*').
    total=$(grep -o "vocab [0-9]*: [0-9]* parameters" "$WORK/out" | awk '{print $3}')
    read -r column marked < <(awk '/^ *pp rank/ {t = 1; next} t && NF == 0 {t = 0}
      t && $1 ~ /^[0-9]+$/ {n = $3; marked += sub(/\*$/, "", n); sum += n} END {print sum + 0, marked + 0}' "$WORK/out")
    copy=$(grep -o "the column sums to $column = $total model parameters + [0-9]* copied" "$WORK/out" | awk '{print $(NF-1)}')
    [ -n "$total" ] && [ "$marked" -eq 1 ] && [ -n "$copy" ] && [ $((column - copy)) -eq "$total" ] \
      || fail "parameters column (sum $column, $marked marked, copy '$copy') does not reconcile with the model line ($total)"
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
    signal_rank_and_wait KILL 1
    [ "$rc" -ne 0 ] || fail "launcher exited 0 after a worker was killed"
    [ "$elapsed" -le 15 ] || fail "launcher took ${elapsed} s to notice"
    grep -q "rank 1 was killed by signal 9" "$WORK/out" || fail "the failed rank is not named"
    no_leftovers
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
  eval_metrics)
    # Held-out evaluation every 2 steps: logged, and in metrics.jsonl with the same loss.
    tiny_job 2 4 "eval: {interval: 2, batches: 2}"
    sed -i 's|^data: {path: corpus.txt}|data: {path: corpus.txt, eval_fraction: 0.1}|' "$WORK/job.yaml"
    timeout 300 "$PPCTL" train "$WORK/job.yaml" --run-dir "$WORK/run" > "$WORK/out" 2>&1 || fail "train exited $?"
    for s in 2 4; do grep -q "eval after step $s: loss" "$WORK/out" || fail "no eval line after step $s"; done
    python3 - "$WORK/run/metrics.jsonl" "$WORK/out" <<'PY' || fail "metrics.jsonl lacks the eval lines"
import json, re, sys
evals = [e for e in map(json.loads, open(sys.argv[1])) if e["event"] == "eval"]
logged = {int(s): float(l) for s, l in re.findall(r"eval after step (\d+): loss (\S+)", open(sys.argv[2]).read())}
assert [e["step"] for e in evals] == [2, 4], evals
assert all(abs(e["loss"] - logged[e["step"]]) < 1e-4 and e["batches"] == 2 for e in evals), (evals, logged)
PY
    ;;
  resume_errors)
    tiny_job 2 4 ""
    "$PPCTL" train "$WORK/job.yaml" --resume > "$WORK/out" 2>&1
    [ $? -eq 2 ] || fail "--resume without checkpoint.dir: expected exit code 2"
    grep -q "sets none (fix: add checkpoint: {dir: ...}" "$WORK/out" || fail "no hint to set checkpoint.dir"
    "$PPCTL" train "$WORK/job.yaml" --resume "$WORK/nowhere" > "$WORK/out" 2>&1
    [ $? -eq 2 ] || fail "--resume of a missing folder: expected exit code 2"
    grep -q "no checkpoint at $WORK/nowhere" "$WORK/out" || fail "the missing folder is not named"
    grep -q "starting" "$WORK/out" && fail "workers were started"
    # A checkpoint file that cannot be read: refused as bad input before anything starts (issue 12, fault 6).
    tiny_job 2 2 "checkpoint: {dir: ckpt}"
    timeout 300 "$PPCTL" train "$WORK/job.yaml" > "$WORK/out" 2>&1 || fail "train with checkpoints exited $?"
    shard=$(ls "$WORK"/ckpt/step-*/*.pt | head -1)
    chmod 000 "$shard"
    without_root_reads "$PPCTL" train "$WORK/job.yaml" --resume > "$WORK/out" 2>&1
    rc=$?
    chmod 644 "$shard"
    [ "$rc" -eq 2 ] || fail "--resume with an unreadable $shard: exit code $rc, expected 2"
    grep -qF "$shard cannot be read: Permission denied" "$WORK/out" || fail "the unreadable file is not named"
    grep -q "starting" "$WORK/out" && fail "workers were started"
    no_leftovers
    ;;
  data_errors)
    # Each bad dataset stops `train` and `plan` before any worker starts (exit 2), naming field and file.
    blend_job 2 ""
    check_refused() {  # $1 = what the message must contain
      for cmd in train plan; do
        ${RUN:-} "$PPCTL" $cmd "$WORK/job.yaml" > "$WORK/out" 2>&1  # RUN: a wrapper such as without_root_reads
        rc=$?
        [ "$rc" -eq 2 ] || fail "$cmd: exit code $rc, expected 2 ($1)"
        grep -qF -- "$1" "$WORK/out" || fail "$cmd: no line with '$1'"
        grep -q "starting" "$WORK/out" && fail "$cmd: workers were started"
      done
    }
    mv "$WORK/big.bin" "$WORK/big.moved"
    check_refused "job.yaml:5: data.blend[0].path: $WORK/big.bin: cannot be read"
    mv "$WORK/big.moved" "$WORK/big.bin"
    printf 'XMIDIDX' | dd of="$WORK/big.idx" conv=notrunc status=none
    check_refused "$WORK/big.idx: bad magic"
    token_data "$WORK/big" 4000 100
    head -c 7000 "$WORK/big.bin" > "$WORK/cut" && mv "$WORK/cut" "$WORK/big.bin"
    check_refused "$WORK/big.idx: the index does not match $WORK/big.bin"
    token_data "$WORK/big" 4000 100
    sed -i 's/vocab_size: 100/vocab_size: 90/' "$WORK/job.yaml"
    check_refused "model.vocab_size: $WORK/big.bin: the id 91 at token position 13 (sequence 0, its token 13)"
    sed -i 's/vocab_size: 90/vocab_size: 100/' "$WORK/job.yaml"
    chmod 000 "$WORK/small.bin"  # present but unreadable (issue 12, fault 6)
    RUN=without_root_reads check_refused "job.yaml:5: data.blend[1].path: $WORK/small.bin: cannot be read: Permission denied"
    chmod 644 "$WORK/small.bin"
    rm "$WORK/small.bin"
    check_refused "job.yaml:5: data.blend[1].path: $WORK/small.bin: cannot be read"
    token_data "$WORK/small" 400 100 "$WORK/small.bin"
    sed -i 's/seq_len: 16/seq_len: 700/' "$WORK/job.yaml"
    check_refused "leaving none to train on"
    no_leftovers
    ;;
  blend_resume)
    # A blend trained 6 steps in one go, and 3 + 3 with a checkpoint between: the same losses; epochs logged.
    blend_job 6 "checkpoint: {dir: ckpt, interval: 3}"
    timeout 300 "$PPCTL" train "$WORK/job.yaml" > "$WORK/out" 2>&1 || fail "uninterrupted run exited $?"
    grep -o "step [0-9]*/6 | loss [0-9.]*" "$WORK/out" > "$WORK/whole"
    grep -q "^data       0\.[0-9]* x .*; 0\.[0-9]* x tokens (int32) $WORK/small.bin" "$WORK/out" \
      || fail "the plan's data line does not show the blend's weights and sources"
    grep -q "data: epoch 1 of $WORK/small.bin (tokens, int32) starts at step [0-9]*, training sample" "$WORK/out" \
      || fail "no epoch line for the small dataset"
    grep -q '"counts": \[' "$WORK/ckpt/step-00000003/meta.json" || fail "meta.json has no data position"
    rm -rf "$WORK/ckpt"
    timeout 300 "$PPCTL" train "$WORK/job.yaml" --steps 3 > "$WORK/out" 2>&1 || fail "first half exited $?"
    grep -o "step [0-9]*/3 | loss [0-9.]*" "$WORK/out" | sed 's|/3 |/6 |' > "$WORK/halves"
    timeout 300 "$PPCTL" train "$WORK/job.yaml" --resume > "$WORK/out" 2>&1 || fail "resume exited $?"
    grep -q "resumed from .* after step 3" "$WORK/out" || fail "did not resume after step 3"
    grep -o "step [0-9]*/6 | loss [0-9.]*" "$WORK/out" >> "$WORK/halves"
    [ "$(wc -l < "$WORK/whole")" -eq 6 ] || fail "expected 6 loss lines"
    diff "$WORK/whole" "$WORK/halves" >&2 || fail "resumed losses differ from the uninterrupted run"
    # Another blend weight cannot continue from this checkpoint.
    sed -i 's/weight: 0.7/weight: 0.6/' "$WORK/job.yaml"
    "$PPCTL" train "$WORK/job.yaml" --resume --steps 9 > "$WORK/out" 2>&1
    [ $? -eq 2 ] || fail "resume with other weights: expected exit code 2"
    grep -q "the data sources differ" "$WORK/out" || fail "no data-sources message"
    no_leftovers
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
  interrupt)
    tiny_job 2 100000 ""
    start_long_training
    kill -INT "$launcher"
    wait_bounded "$launcher" 60
    [ "$rc" -eq 130 ] || fail "exit code $rc after SIGINT, expected 130"
    no_leftovers
    ;;
  verify_example)
    # The user-facing oracle on the example job (one step pipelined, one unpipelined).
    verify_passes "$ROOT/configs/example.yaml" block3.fc2.weight "(loss)"
    ;;
  verify_example_llama)
    # The oracle on the Llama example: grouped-query attention, RoPE, SwiGLU over 4 stages.
    verify_passes "$ROOT/configs/example-llama.yaml" block3.down_proj.weight block0.k_proj.weight "(loss)"
    ;;
  verify_bf16_p2p)
    # precision bf16 sends bf16 between stages (p2p_dtype auto): plan says so, and verify passes at its
    # default 1e-5 (the reference rounds to bf16 where the pipeline sends).
    tiny_job 2 1 ""
    sed -i 's/runtime: {comm_timeout_s: 30}/runtime: {comm_timeout_s: 30, precision: bf16}/' "$WORK/job.yaml"
    "$PPCTL" plan "$WORK/job.yaml" > "$WORK/out" 2>&1 || fail "plan exited $?"
    grep -q "^p2p        bf16 between ranks (8.0 KiB per activation or gradient)" "$WORK/out" || fail "plan: no bf16 p2p line"
    verify_passes "$WORK/job.yaml" block3.fc2.weight "(loss)"
    ;;
  plan_bf16_params)
    # runtime.precision bf16-params: the memory table states Megatron-Core's bytes per parameter (18, or
    # 6 + 12/dp with the distributed optimizer); an fp32 job over its device memory is offered bf16-params.
    tiny_job 2 1 ""
    sed -i 's/runtime: {comm_timeout_s: 30}/runtime: {comm_timeout_s: 30, precision: bf16-params}/' "$WORK/job.yaml"
    "$PPCTL" plan "$WORK/job.yaml" > "$WORK/out" 2>&1 || fail "plan exited $?"
    grep -q "precision bf16-params, recompute none; bf16 weights + fp32 gradients + AdamW (fp32 main parameters and moments) = 18 B per parameter;" "$WORK/out" \
      || fail "plan: no 18 B per parameter in the memory header: $(grep -m1 'memory per pp rank' "$WORK/out")"
    sed -i 's/pipeline: {stages: 2,/pipeline: {stages: 2, data_parallel: 8,/; s/optimizer: {lr: 0.003}/optimizer: {lr: 0.003, distributed: true}/' "$WORK/job.yaml"
    "$PPCTL" plan "$WORK/job.yaml" > "$WORK/out" 2>&1 || fail "plan (dp 8, distributed) exited $?"
    grep -q "bf16 weights + fp32 gradients = 6 B per parameter, AdamW (fp32 main parameters and moments) sharded over dp 8: 12/dp = 1.5 B per parameter" "$WORK/out" \
      || fail "plan: no 6 + 12/dp in the memory header: $(grep -m1 'memory per pp rank' "$WORK/out")"
    sed -i 's/precision: bf16-params}/precision: fp32, device_memory_gib: 0.0001}/; s/, distributed: true}/}/' "$WORK/job.yaml"
    "$PPCTL" plan "$WORK/job.yaml" > "$WORK/out" 2>&1 || fail "plan (fp32, 0.0001 GiB) exited $?"
    grep -q "^WARNING: pp ranks 0, 1: estimated .*(fix: optimizer.distributed: true (at most [0-9.]* [KMG]iB per rank, not enough alone), runtime.precision: bf16-params (at most [0-9.]* [KMG]iB per rank, not enough alone), runtime.precision: bf16-params with optimizer.distributed: true (at most " "$WORK/out" \
      || fail "plan: the warning does not offer bf16-params: $(grep WARNING "$WORK/out")"
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
    # --grad-reduce-ms: each stage's REDUCE_GRAD (in --comm's action lists, right after the stage's last B
    # and its send) starts a 5 ms reduction beside the compute; stage 0's ends the step, 33 + 5 ms.
    "$PPCTL" plan "$ROOT/configs/example.yaml" --comm --timeline --grad-reduce-ms 5 --trace "$WORK/trace.json" \
      > "$WORK/out" 2>&1 || fail "plan --grad-reduce-ms exited $?"
    grep -q "^simulated  step 38.00 ms.*gradient reduction 5 ms per stage (from each stage's REDUCE_GRAD)" \
      "$WORK/out" || fail "the step does not include stage 0's reduction"
    grep -q "^rank 0: .* 0B7 0REDUCE_GRAD$" "$WORK/out" || fail "--comm does not show 0REDUCE_GRAD after 0B7"
    grep -q "^rank 3: .* 3B7 3SEND_B7 3REDUCE_GRAD$" "$WORK/out" || fail "--comm: 3REDUCE_GRAD not after 3SEND_B7"
    grep -q "R gradient reduction" "$WORK/out" || fail "the timeline does not show the reductions"
    python3 - "$WORK/trace.json" <<'PY' || fail "the trace has no collectives tracks"
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
names = {e["args"]["name"] for e in events if e.get("name") == "thread_name"}
assert names == {f"rank {r}" for r in range(4)} | {f"rank {r} collectives" for r in range(4)}, names
assert sorted(e["name"] for e in events if e.get("cat") == "REDUCE_GRAD") == [f"{s}REDUCE_GRAD" for s in range(4)]
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
  zb_auto)
    # zb-auto: plan says which costs it placed W with and how each rank placed them; a penalty above any
    # step keeps every W right after its I; verify passes (the job's workers build the same program).
    tiny_job 4 1 ""
    sed -i 's/schedule: 1f1b, microbatches: 4/schedule: zb-auto, microbatches: 6, zb_auto: {f: 1, i: 1, w: 3}/' \
      "$WORK/job.yaml"
    "$PPCTL" plan "$WORK/job.yaml" > "$WORK/out" 2>&1 || fail "plan exited $?"
    grep -q "^zb-auto: W placed for F 1, I 1, W 3 ms per stage, W deferred +0 ms; p2p 0 ms" "$WORK/out" \
      || fail "plan does not say which costs zb-auto used"
    grep -Eq "^  simulated step [0-9.]+ ms; 1f1b [0-9.]+ ms \(-[0-9.]+% against it\); zb-h1" "$WORK/out" \
      || fail "plan does not compare zb-auto with 1f1b and zb-h1"
    grep -Eq "^  W deferred \(not right after its I\) per rank: 0, [1-9]" "$WORK/out" || fail "no W deferred"
    verify_passes "$WORK/job.yaml" "(loss)"
    sed -i 's/w: 3}/w: 3, defer_penalty: 1000}/' "$WORK/job.yaml"
    "$PPCTL" plan "$WORK/job.yaml" > "$WORK/out" 2>&1 || fail "plan with a large penalty exited $?"
    grep -q "^  W deferred (not right after its I) per rank: 0, 0, 0, 0 of 6" "$WORK/out" \
      || fail "a penalty above any step still deferred W: $(grep 'W deferred' "$WORK/out")"
    sed -i 's/zb_auto: {f: 1, i: 1, w: 3, defer_penalty: 1000}/zb_auto: {i: [1, 2]}/' "$WORK/job.yaml"
    code=0; "$PPCTL" plan "$WORK/job.yaml" > "$WORK/out" 2>&1 || code=$?
    [ "$code" -eq 2 ] || fail "2 I costs for 4 stages: exit $code, expected 2"
    grep -q "pipeline.zb_auto.i: value \[1, 2\]: has 2 entries but pipeline.stages is 4" "$WORK/out" \
      || fail "the wrong list length is not named: $(cat "$WORK/out")"
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
  train_observe)
    # The run directory: exact spec text, plan, per-rank logs, metrics.jsonl and a merged trace with one
    # track per rank; the measured bubble next to the planned one, the CPU time per action; no progress
    # redraws off a terminal.
    tiny_job 2 6 ""
    timeout 300 "$PPCTL" train "$WORK/job.yaml" --run-dir "$WORK/run" > "$WORK/out" 2>&1 || fail "train exited $?"
    grep -q "run directory: $WORK/run" "$WORK/out" || fail "the run directory is not printed"
    grep -q "^config ($WORK/job.yaml, as validated):" "$WORK/out" || fail "the config is not printed at start"
    grep -q "^pp rank  *stage  *parameters" "$WORK/out" || fail "the plan table is not printed at start"
    cmp -s "$WORK/job.yaml" "$WORK/run/config.yaml" || fail "config.yaml is not the exact spec text"
    grep -q "^bubble" "$WORK/run/plan.txt" || fail "no plan.txt"
    grep -q "all 2 workers finished" "$WORK/run/launcher.log" || fail "launcher.log incomplete"
    for r in 0 1; do
      grep -q "\[rank $r\] info: stage $r " "$WORK/run/rank$r.log" || fail "rank$r.log lacks the rank's lines"
      grep -Eq "\[rank $r\] .*measured bubble [0-9.]+ \(planned [0-9.]+\)" "$WORK/out" \
        || fail "rank $r: no measured bubble next to the planned one"
      grep -Eq "\[rank $r\] info: CPU time per action of the schedule's thread: F [0-9.]+ ms B [0-9.]+ ms" "$WORK/out" \
        || fail "rank $r: no CPU time per action"
    done
    grep -q "bubble per rank: measured | planned (plan's costs) | simulated (measured costs)" "$WORK/out" \
      || fail "no bubble report"
    grep -Eq "step \(schedule only\): measured [0-9.]+ ms, simulated with the measured costs [0-9.]+ ms" "$WORK/out" \
      || fail "no measured against simulated step time"
    grep -q $'\r' "$WORK/out" && fail "carriage returns in output that is not a terminal"
    ls "$WORK/run"/trace.rank*.json >/dev/null 2>&1 && fail "trace parts left after the merge"
    python3 - "$WORK/run" <<'PY' || fail "metrics.jsonl or trace.json is not what it should be"
import json, sys
run = sys.argv[1]
lines = [json.loads(l) for l in open(f"{run}/metrics.jsonl")]
steps = [l for l in lines if l["event"] == "step"]
assert [l["step"] for l in steps] == list(range(1, 7)), lines
for l in steps:
    for key in ("loss", "lr", "grad_norm", "tokens_per_s", "step_time_s", "tflops", "model_flops", "peak_memory_bytes"):
        assert isinstance(l[key], (int, float)) and l[key] > 0, (key, l)
    assert l["mfu"] is None and l["peak_tflops"] is None, l  # CPU without observe.peak_tflops
end = lines[-1]
assert end["event"] == "end" and len(end["peak_memory_bytes"]) == 2 and min(end["peak_memory_bytes"]) > 0, end
assert end["stages"] == [[0], [1]], end
for key in ("bubble_measured", "bubble_planned", "bubble_simulated"):
    assert len(end[key]) == 2 and all(0 <= b < 1 for b in end[key]), (key, end)
assert all(abs(b - 0.2) < 1e-9 for b in end["bubble_planned"]), end  # 1F1B, p = 2, m = 4: (p-1)/(m+p-1)
assert end["step_ms_measured"] > 0 and end["step_ms_simulated"] > 0, end
events = json.load(open(f"{run}/trace.json"))["traceEvents"]
tracks = {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name"}
# Both ranks hold a tied embedding copy: its sum over the two stages runs on "rank R collectives".
assert tracks == {0: "rank 0", 1: "rank 1", 2: "rank 0 collectives", 3: "rank 1 collectives"}, tracks
slices = [e for e in events if e["ph"] == "X"]
for e in slices:
    for field in ("ph", "ts", "dur", "pid", "tid", "name"):
        assert field in e, (field, e)
    assert e["dur"] >= 0 and e["ts"] >= 0, e
for r in (0, 1):
    computes = [e for e in slices if e["tid"] == r and e["cat"] in ("F", "B")]
    assert len(computes) == 6 * 4 * 2, (r, len(computes))  # steps x microbatches x (F, B)
    assert sum(1 for e in slices if e["tid"] == r and e["cat"] == "step") == 6
    reduces = [e for e in slices if e["tid"] == 2 + r]
    assert [e["name"] for e in reduces] == [f"{r}REDUCE_GRAD"] * 6 and all(e["cat"] == "reduce" for e in reduces), reduces
assert any(e["name"].startswith("wait 1RECV_F") for e in slices)
# The plan's timeline of one step with the measured costs, to open beside trace.json.
simulated = json.load(open(f"{run}/trace.simulated.json"))["traceEvents"]
assert sorted(e["tid"] for e in simulated if e["ph"] == "X") == [0] * 8 + [1] * 8, simulated
PY
    # Without --run-dir: a new folder under observe.runs_dir (relative to the working directory).
    (cd "$WORK" && timeout 300 "$PPCTL" train job.yaml --steps 1 > "$WORK/out" 2>&1) || fail "second train exited $?"
    ls -d "$WORK"/runs/job-*Z >/dev/null 2>&1 || fail "no runs/job-<time>Z folder"
    # A non-empty --run-dir is refused before anything starts.
    "$PPCTL" train "$WORK/job.yaml" --run-dir "$WORK/run" > "$WORK/out" 2>&1 && fail "a non-empty --run-dir was accepted"
    grep -q "not empty" "$WORK/out" || fail "no reason given for refusing --run-dir"
    grep -q "starting" "$WORK/out" && fail "workers were started"
    no_leftovers
    ;;
  train_progress)
    # On a terminal (script(1) gives the job one) the last-stage worker redraws one progress line.
    command -v script >/dev/null || { echo "SKIP [$CASE]: script(1) not installed"; exit 0; }
    tiny_job 2 8 "observe: {peak_tflops: 0.5}"
    SHELL=/bin/bash timeout 300 script -qec "'$PPCTL' train '$WORK/job.yaml' --run-dir '$WORK/run'" /dev/null \
      > "$WORK/out" 2>&1 || fail "train under script exited $?"
    grep -q $'\r\x1b\[Kstep 8/8 | loss [0-9.]* | [0-9]* tok/s | ETA 0:00' "$WORK/out" || fail "no final progress line"
    grep -q $'\r\x1b\[Kstep [1-7]/8 | loss' "$WORK/out" || fail "no intermediate progress line"
    # Every log line first erases whatever the progress line left on the terminal's current line.
    python3 - "$WORK/out" <<'PY' || fail "a log line does not begin by erasing the progress line"
import re, sys
data = open(sys.argv[1], "rb").read().decode("utf-8", "replace")
starts = [m.start() for m in re.finditer(r"\[\d\d:\d\d:\d\d\.\d{3}\] \[", data)]
assert len(starts) > 10, len(starts)
assert all(data[:s].endswith("\r\x1b[K") for s in starts)
# ... and is written whole: processes sharing the terminal do not interleave pieces of lines.
line = re.compile(r"\[\d\d:\d\d:\d\d\.\d{3}\] \[(ppctl|rank \d+)\] (\x1b\[[0-9;]*m)?(info|warning|error)(\x1b\[m)?: [^\x1b\r]+\r?\n")
assert all(line.match(data, s) for s in starts), [data[s:s + 120] for s in starts if not line.match(data, s)]
PY
    [ "$(grep -c '"event": *"step"' "$WORK/run/metrics.jsonl")" -eq 8 ] || fail "metrics.jsonl does not have 8 steps"
    # With observe.peak_tflops the step lines and metrics.jsonl carry the MFU: TFLOP/s over the peak.
    grep -aEq "step 8/8 \| loss .* \| [0-9.e-]+ TFLOP/s \| MFU [0-9.]+%" "$WORK/out" || fail "no MFU on the step line"
    python3 - "$WORK/run/metrics.jsonl" <<'PY' || fail "no MFU in metrics.jsonl"
import json, sys
steps = [json.loads(l) for l in open(sys.argv[1]) if '"step"' in l]
assert all(abs(s["mfu"] - s["tflops"] / 0.5) < 1e-12 and s["peak_tflops"] == 0.5 for s in steps), steps[0]
PY
    no_leftovers
    ;;
  trace_after_failure)
    # A rank killed after the traced steps: the launcher still merges the parts the ranks left.
    tiny_job 3 100000 "observe: {trace_steps: 2}"
    "$PPCTL" train "$WORK/job.yaml" --run-dir "$WORK/run" > "$WORK/out" 2>&1 &
    launcher=$!
    wait_for_line "step 5/" 120
    victim=$(pid_of_rank 1)
    [ -n "$victim" ] || fail "no worker with RANK=1"
    kill -KILL "$victim"
    wait_bounded "$launcher" 120
    [ "$rc" -ne 0 ] || fail "launcher exited 0 after a worker was killed"
    grep -q "trace of 3 ranks written to $WORK/run/trace.json" "$WORK/out" || fail "the trace was not merged"
    python3 - "$WORK/run/trace.json" <<'PY' || fail "the merged trace is incomplete"
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
assert {e["tid"] for e in events if e["ph"] == "X" and e["cat"] != "reduce"} == {0, 1, 2}
assert {e["args"]["step"] for e in events if e["ph"] == "X"} == {1, 2}
PY
    no_leftovers
    ;;
  no_driver_dependency)
    # The binary must start where no GPU driver is installed: libcuda must not be a load-time need
    # (of ppctl-torch, which links LibTorch; ppctl itself links none: case light_front).
    ldd "$PPCTL_TORCH" > "$WORK/out" 2>&1 || fail "ldd failed"
    grep -q "libtorch_cuda.so" "$WORK/out" || fail "the CUDA/NCCL path is not linked"
    grep -q "libcuda.so" "$WORK/out" && fail "libcuda.so is a load-time dependency"
    grep -q "not found" "$WORK/out" && fail "a shared library is not found"
    "$PPCTL" --version > "$WORK/out" 2>&1 || fail "ppctl --version failed"
    ;;
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
  tied_bitwise)
    # Tied embeddings, dp = 2 x pp = 2: after 6 steps the first stage's embedding and the last stage's
    # copy are bitwise equal on both replicas (each rank logs a hash of its copy's bytes at the end).
    tiny_job 2 6 ""
    sed -i 's/micro_batch_size: 4}/micro_batch_size: 4, data_parallel: 2}/; s/log_interval: 5/log_interval: 1/' "$WORK/job.yaml"
    timeout 300 "$PPCTL" train "$WORK/job.yaml" > "$WORK/out" 2>&1 || fail "train exited $?"
    grep -o "\[rank [0-9]\] info: tied embedding on stage [0-9]: fnv1a64 [0-9a-f]*" "$WORK/out" | sort > "$WORK/hashes"
    [ "$(wc -l < "$WORK/hashes")" -eq 4 ] || fail "expected 4 tied-embedding hashes (2 stages x 2 replicas): $(cat "$WORK/hashes")"
    [ "$(awk '{print $NF}' "$WORK/hashes" | sort -u | wc -l)" -eq 1 ] || fail "the copies differ: $(cat "$WORK/hashes")"
    # Over several steps the pipelined copies train as the one shared weight of a single stage: the
    # same losses (to 1e-3; sums in another order differ in the last bits).
    grep -o "step [0-9]/6 | loss [0-9.]*" "$WORK/out" | awk '{print $NF}' > "$WORK/pipelined.loss"
    sed -i 's/stages: 2, schedule/stages: 1, schedule/' "$WORK/job.yaml"
    timeout 300 "$PPCTL" train "$WORK/job.yaml" > "$WORK/out" 2>&1 || fail "one-stage train exited $?"
    grep -o "step [0-9]/6 | loss [0-9.]*" "$WORK/out" | awk '{print $NF}' > "$WORK/single.loss"
    [ "$(wc -l < "$WORK/single.loss")" -eq 6 ] || fail "expected 6 loss lines"
    paste "$WORK/pipelined.loss" "$WORK/single.loss" | awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-3) bad = 1 } END { exit bad }' \
      || fail "pipelined and one-stage losses differ: $(paste "$WORK/pipelined.loss" "$WORK/single.loss" | tr '\n' ';')"
    sed -i 's/stages: 1, schedule/stages: 2, schedule/' "$WORK/job.yaml"
    # Untied, the two weights are different parameters: no copies to log.
    sed -i 's/^model: {layers: 4,/model: {tie_embeddings: false, layers: 4,/' "$WORK/job.yaml"
    timeout 300 "$PPCTL" train "$WORK/job.yaml" --steps 2 > "$WORK/out" 2>&1 || fail "untied train exited $?"
    grep -q "tied embedding on stage" "$WORK/out" && fail "untied job logged tied copies"
    no_leftovers
    ;;
  bad_launch_env)
    tiny_job 2 2 ""
    RANK=0 "$PPCTL" train "$WORK/job.yaml" > "$WORK/out" 2>&1
    rc=$?
    [ "$rc" -eq 2 ] || fail "RANK without WORLD_SIZE: exit code $rc, expected 2"
    grep -q "WORLD_SIZE is not set" "$WORK/out" || fail "the missing variable is not named"
    # --local ignores the variables and spawns the workers itself.
    RANK=0 timeout 120 "$PPCTL" train --local "$WORK/job.yaml" > "$WORK/out" 2>&1 || fail "train --local exited $?"
    grep -q "starting 2 workers" "$WORK/out" || fail "train --local did not spawn 2 workers"
    SLURM_PROCID=4 SLURM_NTASKS=4 SLURM_STEP_ID=0 SLURM_JOB_ID=7 SLURM_JOB_NODELIST=localhost "$PPCTL" train "$WORK/job.yaml" > "$WORK/out" 2>&1
    rc=$?
    [ "$rc" -eq 2 ] || fail "SLURM_PROCID >= SLURM_NTASKS: exit code $rc, expected 2"
    grep -q "SLURM_PROCID='4' must be an integer in \[0, 3\]" "$WORK/out" || fail "SLURM_PROCID is not named"
    RANK=0 WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=1 timeout 20 "$PPCTL" train "$WORK/job.yaml" > "$WORK/out" 2>&1
    rc=$?
    [ "$rc" -eq 2 ] || fail "WORLD_SIZE=3 with 2 stages: exit code $rc, expected 2"
    grep -q "WORLD_SIZE=3 is not a multiple of pipeline.stages = 2" "$WORK/out" || fail "no clear message for WORLD_SIZE"
    sed -i 's/hidden: 32/hiden: 32/' "$WORK/job.yaml"
    RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=1 timeout 20 "$PPCTL" train "$WORK/job.yaml" > "$WORK/out" 2>&1
    rc=$?
    [ "$rc" -eq 2 ] || fail "a bad spec under torchrun variables: exit code $rc, expected 2"
    grep -q "model.hiden: unknown key" "$WORK/out" || fail "the spec is not validated in the worker"
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
  resume_schedule)
    # Issue 12 fault 4: a cosine run over 4 steps resumed with more steps would restart its decay. Refused
    # before anything starts, naming train.steps; the same horizon still resumes.
    tiny_job 2 4 "checkpoint: {dir: ckpt, interval: 2}"
    sed -i 's/lr: 0.003}/lr: 0.003, lr_schedule: cosine, min_lr: 0.0003}/' "$WORK/job.yaml"
    timeout 300 "$PPCTL" train "$WORK/job.yaml" > "$WORK/out" 2>&1 || fail "the first run exited $?"
    "$PPCTL" train "$WORK/job.yaml" --resume --steps 8 > "$WORK/out" 2>&1
    rc=$?
    [ "$rc" -eq 2 ] || fail "resume with --steps 8: exit code $rc, expected 2"
    grep -qF "train.steps is 4 in the checkpoint" "$WORK/out" || fail "train.steps is not named"
    grep -qF "fix: resume with train.steps: 4" "$WORK/out" || fail "no fix given"
    grep -q "starting" "$WORK/out" && fail "workers were started"
    timeout 300 "$PPCTL" train "$WORK/job.yaml" --resume "$WORK/ckpt/step-00000002" > "$WORK/out" 2>&1 \
      || fail "resume with the same horizon exited $?"
    grep -q "resumed from .* after step 2" "$WORK/out" || fail "did not resume after step 2"
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
  disk_full)
    # Issue 12 F5: the run directory's disk fills up mid-run (a 2 MiB tmpfs in a private mount namespace).
    [ "$(id -u)" -eq 0 ] && unshare -m true 2>/dev/null \
      || { echo "SKIP [$CASE]: needs root and unshare -m to mount a small tmpfs"; exit 0; }
    unshare -m bash "$ROOT/tests/app/cli_test.sh" disk_full_in_namespace "$PPCTL" || exit 1
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
  override_refused)
    # Issue 12 F3, F7: a command-line --steps goes through the spec's validation (locally and as a torchrun
    # worker); integers take one spelling; a late error (observe.runs_dir) carries the spec's FILE:LINE.
    tiny_job 2 10 "observe: {runs_dir: $WORK/runs}"
    sed -i 's/lr: 0.003}/lr: 0.003, lr_schedule: cosine, warmup_steps: 5}/' "$WORK/job.yaml"
    refused() {  # $1 = what the message must contain; the rest: the environment and arguments of ppctl train
      local want=$1; shift
      env "$@" > "$WORK/out" 2>&1
      rc=$?
      [ "$rc" -eq 2 ] || fail "$*: exit code $rc, expected 2"
      grep -qF -- "$want" "$WORK/out" || fail "$*: no line with '$want': $(cat "$WORK/out")"
      grep -q "nothing was started" "$WORK/out" || fail "$*: does not say nothing was started"
      grep -q "starting" "$WORK/out" && fail "$*: workers were started"
      [ ! -e "$WORK/runs" ] || fail "$*: a run directory was made"
    }
    rule="job.yaml:4: optimizer.warmup_steps: value 5: must be below the step count (--steps 4) for lr_schedule cosine"
    refused "$rule" "$PPCTL" train "$WORK/job.yaml" --steps 4
    grep -qF "pass --steps 6 or more" "$WORK/out" || fail "no fix naming --steps"
    refused "$rule" RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT="$(free_port)" \
      "$PPCTL" train "$WORK/job.yaml" --steps 4
    # --steps takes the spec's one integer spelling: CLI11 alone read 010 as octal 8 and took 0x3 and +3.
    for value in 010 0x3 +3 " 3" 3.0 abc 0 -1 1000000001; do
      "$PPCTL" train "$WORK/job.yaml" --steps "$value" > "$WORK/out" 2>&1
      rc=$?
      [ "$rc" -eq 2 ] || fail "--steps '$value': exit code $rc, expected 2"
      grep -F -- "--steps: value $value: must be " "$WORK/out" \
        | grep -qE "must be (an integer written in plain decimal digits|in \[1, 1000000000\])" \
        || fail "--steps '$value': no message naming the value and the rule"
      [ ! -e "$WORK/runs" ] || fail "--steps '$value': a run directory was made"
    done
    "$PPCTL" train "$WORK/job.yaml" --steps 010 > "$WORK/out" 2>&1
    grep -qF "(fix: write 10)" "$WORK/out" || fail "--steps 010: the fix does not say write 10"
    sed -i 's/log_interval: 5}/log_interval: 5, max_restarts: +3}/' "$WORK/job.yaml"
    refused "job.yaml:5: train.max_restarts: value +3: must be an integer written in plain decimal digits" \
      "$PPCTL" train "$WORK/job.yaml"
    sed -i 's/, max_restarts: +3//; s|runs_dir: .*}|runs_dir: '"$WORK"'/corpus.txt/runs}|' "$WORK/job.yaml"
    refused "job.yaml:7: observe.runs_dir: value $WORK/corpus.txt/runs: cannot create the folder" \
      "$PPCTL" train "$WORK/job.yaml"
    no_leftovers
    ;;
  layout_split)
    # Issue 13: an uneven pipeline.layers_per_stage and balance: auto (a 4096-token head weighs ~10 blocks,
    # so auto leaves the last stage one block): plan marks the split in use, verify passes for both
    # (pipelined gradients equal unpipelined), and a checkpoint of one split resumes under the other.
    tiny_job 3 4 "checkpoint: {dir: ckpt, interval: 2}"
    sed -i 's/^model: {layers: 4,/model: {vocab_size: 4096, layers: 6,/; s/^pipeline: {stages: 3,/pipeline: {stages: 3, layers_per_stage: [1, 3, 2],/' \
      "$WORK/job.yaml"
    "$PPCTL" plan "$WORK/job.yaml" > "$WORK/plan" 2>&1 || fail "plan exited $?"
    grep -q "^ *layers_per_stage *\[1, 3, 2\] .*<- in use" "$WORK/plan" || fail "plan does not show the explicit split in use"
    grep -q "blocks 1-3$" "$WORK/plan" || fail "stage 1 does not hold blocks 1-3"
    verify_passes "$WORK/job.yaml" block3.fc2.weight "(loss)"
    timeout 300 "$PPCTL" train "$WORK/job.yaml" > "$WORK/out" 2>&1 || fail "train with [1, 3, 2] exited $?"
    sed -i 's/layers_per_stage: \[1, 3, 2\],/balance: auto,/' "$WORK/job.yaml"
    "$PPCTL" plan "$WORK/job.yaml" > "$WORK/plan" 2>&1 || fail "plan exited $?"
    grep -q "^ *balance auto *\[[23], [23], 1\] .*<- in use" "$WORK/plan" || fail "balance auto does not leave the head's stage 1 block"
    verify_passes "$WORK/job.yaml" block5.fc2.weight "(loss)"
    timeout 300 "$PPCTL" train "$WORK/job.yaml" --resume "$WORK/ckpt/step-00000002" > "$WORK/out" 2>&1 \
      || fail "resume under balance auto exited $?"
    grep -q "resumed from .* after step 2" "$WORK/out" || fail "did not resume after step 2"
    # plan --balance shows auto without the spec saying it; the two exclude each other in a spec.
    sed -i 's/balance: auto,/layers_per_stage: [2, 2, 2],/' "$WORK/job.yaml"
    "$PPCTL" plan "$WORK/job.yaml" --balance > "$WORK/plan" 2>&1 || fail "plan --balance exited $?"
    grep -q "^ *balance auto .*<- in use" "$WORK/plan" || fail "plan --balance does not use balance auto"
    grep -qF "pipeline.layers_per_stage [2, 2, 2] is set aside" "$WORK/plan" \
      || fail "plan --balance does not say that the spec's split is set aside"
    sed -i 's/layers_per_stage: \[2, 2, 2\],/balance: auto, layers_per_stage: [2, 2, 2],/' "$WORK/job.yaml"
    "$PPCTL" plan "$WORK/job.yaml" > "$WORK/plan" 2>&1
    rc=$?
    [ "$rc" -eq 2 ] || fail "balance auto with layers_per_stage: exit code $rc, expected 2"
    grep -qF "excludes pipeline.balance auto" "$WORK/plan" || fail "the exclusion is not named"
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
  light_front)
    # Issue 13: ppctl links no LibTorch (nor anything that loads it) and plans by itself; every other
    # command, --help and --version run in ppctl-torch beside it, exec'ed in the same process.
    ldd "$PPCTL" > "$WORK/out" 2>&1 || fail "ldd failed"
    grep -Eq "libtorch|libc10|libcuda|libnccl" "$WORK/out" && fail "ppctl loads LibTorch or CUDA"
    grep -q "not found" "$WORK/out" && fail "a shared library is not found"
    LD_DEBUG=files "$PPCTL" plan "$ROOT/configs/example.yaml" > /dev/null 2> "$WORK/out" || fail "plan exited $?"
    grep -Eq "file=[^ ]*(libtorch|libc10)" "$WORK/out" && fail "ppctl plan loaded LibTorch"
    grep -q "file=[^ ]*libstdc++" "$WORK/out" || fail "LD_DEBUG=files shows no library loads: the check cannot see"
    # The same plan, bytes for bytes, from both executables: good specs, options and bad input alike.
    tiny_job 2 5 ""
    cp "$WORK/job.yaml" "$WORK/bad.yaml"
    sed -i 's/hidden: 32/hiden: 32/' "$WORK/bad.yaml"
    for args in "$ROOT/configs/example.yaml --comm --timeline --costs 1,2,1,1,2,3,1,2,1,2,1,1,1,2,1,1" \
                "$WORK/job.yaml --balance --p2p-latency 0.5" "$WORK/bad.yaml" "$WORK/none.yaml" \
                "$WORK/job.yaml --costs 1,2,3" "--help"; do
      # shellcheck disable=SC2086  # $args: several words
      "$PPCTL" plan $args > "$WORK/light" 2>&1; light_rc=$?
      # shellcheck disable=SC2086
      (exec -a "$PPCTL" "$PPCTL_TORCH" plan $args) > "$WORK/torch" 2>&1; torch_rc=$?
      [ "$light_rc" -eq "$torch_rc" ] || fail "plan $args: exit code $light_rc, ppctl-torch's $torch_rc"
      cmp -s "$WORK/light" "$WORK/torch" || { diff "$WORK/light" "$WORK/torch" >&2; fail "plan $args: output differs from ppctl-torch's"; }
    done
    "$PPCTL" plan "$WORK/bad.yaml" > "$WORK/out" 2>&1
    [ $? -eq 2 ] && grep -q "model.hiden: unknown key" "$WORK/out" || fail "bad spec: not exit 2 naming the key"
    # --help and --version come from ppctl-torch: every command listed, as before.
    "$PPCTL" --help > "$WORK/out" 2>&1 || fail "--help exited $?"
    for cmd in plan train verify export data; do grep -q "^  $cmd  " "$WORK/out" || fail "--help does not list $cmd"; done
    grep -q "^Usage: $PPCTL \[OPTIONS\] SUBCOMMAND" "$WORK/out" || fail "--help does not name ppctl as typed"
    [ "$("$PPCTL" --version)" = "ppctl 0.1.0" ] || fail "--version"
    "$PPCTL" train > "$WORK/out" 2>&1; rc=$?
    [ "$rc" -eq 2 ] && grep -q "spec is required" "$WORK/out" || fail "train without a spec: exit code $rc"
    # train runs in ppctl-torch in the same process (signals reach it; SIGTERM ends it as before).
    tiny_job 2 100000 ""
    "$PPCTL" train "$WORK/job.yaml" > "$WORK/out" 2>&1 &
    launcher=$!
    for _ in $(seq 1 100); do [ "$(readlink "/proc/$launcher/exe")" = "$(readlink -f "$PPCTL_TORCH")" ] && break; sleep 0.1; done
    [ "$(readlink "/proc/$launcher/exe")" = "$(readlink -f "$PPCTL_TORCH")" ] || fail "pid $launcher did not become ppctl-torch"
    wait_for_line "step 1/" 120
    for pid in $(pgrep -f "worker $WORK/job.yaml"); do
      [ "$(readlink "/proc/$pid/exe")" = "$(readlink -f "$PPCTL_TORCH")" ] || fail "worker $pid does not run ppctl-torch"
    done
    kill -TERM "$launcher"
    wait_bounded "$launcher" 60
    [ "$rc" -eq 143 ] || fail "SIGTERM: exit code $rc, expected 143"
    no_leftovers
    # Without ppctl-torch beside it (or not executable), ppctl names the path and the fix; plan still works.
    mkdir "$WORK/alone"
    cp "$PPCTL" "$WORK/alone/ppctl"
    "$WORK/alone/ppctl" plan "$WORK/job.yaml" > "$WORK/out" 2>&1 || fail "plan without ppctl-torch exited $?"
    "$WORK/alone/ppctl" train "$WORK/job.yaml" > "$WORK/out" 2>&1; rc=$?
    [ "$rc" -eq 1 ] || fail "train without ppctl-torch: exit code $rc, expected 1"
    grep -qF "cannot run \`ppctl train\`: $WORK/alone/ppctl-torch is missing" "$WORK/out" || fail "the missing path is not named"
    grep -qF "fix: rebuild with scripts/build.sh" "$WORK/out" || fail "no fix for a missing ppctl-torch"
    touch "$WORK/alone/ppctl-torch"
    "$WORK/alone/ppctl" --version > "$WORK/out" 2>&1; rc=$?
    [ "$rc" -eq 1 ] && grep -qF "$WORK/alone/ppctl-torch is not executable" "$WORK/out" || fail "not executable: exit code $rc"
    ;;
  layer_costs)
    # Issue 13: per-layer costs from a previous run's trace (plan --layer-costs RUN_DIR) and from a costs file.
    # The costs plan reports are the trace's medians; with a 4096-token head the split they balance leaves
    # the last stage fewer blocks than uniform; bad sources are refused (exit 2) naming what to fix.
    tiny_job 3 4 "observe: {trace_steps: 4, tensorboard: false}"
    sed -i 's/^model: {layers: 4,/model: {vocab_size: 4096, layers: 6,/' "$WORK/job.yaml"
    timeout 300 "$PPCTL" train "$WORK/job.yaml" --run-dir "$WORK/run" > "$WORK/out" 2>&1 || fail "train exited $?"
    "$PPCTL" plan "$WORK/job.yaml" --layer-costs "$WORK/run" > "$WORK/plan" 2>&1 || { cp "$WORK/plan" "$WORK/out"; fail "plan exited $?"; }
    cp "$WORK/plan" "$WORK/out"
    grep -q "^split *uniform *\[2, 2, 2\] *simulated step [0-9.]* ms, .*memory per rank .*<- in use" "$WORK/plan" || fail "no uniform row in ms with memory"
    grep -q "costs from run directory $WORK/run (trace.json steps 2-4" "$WORK/plan" || fail "the source of the costs is not named"
    python3 - "$WORK/run/trace.json" "$WORK/plan" <<'PY' || fail "the reported costs do not match the trace"
import json, re, statistics, sys
events = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X" and e.get("cat") in ("F", "B")]
first = min(e["args"]["step"] for e in events) + 1
median = {(s, k): statistics.median(e["dur"] / 1000 for e in events
                                    if e["args"]["stage"] == s and e["cat"] == k and e["args"]["step"] >= first)
          for s in range(3) for k in "FB"}
plan = open(sys.argv[2]).read()
line = re.search(r"measured per stage of that run: (.*); fitted: (.*)\)", plan)
measured = [tuple(map(float, re.findall(r"[FB] ([0-9.e+-]+)", part))) for part in line.group(1).split("|")]
fitted = [tuple(map(float, re.findall(r"[FB] ([0-9.e+-]+)", part))) for part in line.group(2).split("|")]
close = lambda a, b: abs(a - b) <= 0.006 * abs(b) + 1e-3
for s in range(3):
    assert close(measured[s][0], median[(s, "F")]) and close(measured[s][1], median[(s, "B")]), (s, measured, median)
# Three stages: the middle one gives the block, the end stages' excess the embedding and the head, so the
# fitted stage sums give back the measured ones (but where an excess came out negative and was floored).
block = re.search(r"ms per microbatch: block F ([0-9.e+-]+) B ([0-9.e+-]+)", plan)
assert close(float(block.group(1)), median[(1, "F")] / 2) and close(float(block.group(2)), median[(1, "B")] / 2), block.group(0)
head = re.search(r"final norm \+ LM head \+ loss F ([0-9.e+-]+) B ([0-9.e+-]+)", plan)
assert close(float(head.group(1)), median[(2, "F")] - median[(1, "F")]), (head.group(0), median)
for s in (1, 2):
    assert close(fitted[s][0], measured[s][0]), (fitted, measured)
print("measured", measured, "fitted", fitted)
PY
    split=$(sed -n 's/^ *balance costs *\(\[[0-9, ]*\]\).*/\1/p' "$WORK/plan")
    case "$split" in "[2, 3, 1]"|"[3, 2, 1]") ;; *) fail "balance costs split '$split': the head's stage should keep 1 block" ;; esac
    grep -qF "to train with it, set pipeline.layers_per_stage: $split" "$WORK/plan" || fail "no layers_per_stage line to train with"
    "$PPCTL" plan "$WORK/job.yaml" --balance --layer-costs "$WORK/run" > "$WORK/plan" 2>&1 || fail "plan --balance --layer-costs exited $?"
    grep -q "^ *balance costs .*<- in use" "$WORK/plan" || fail "plan --balance --layer-costs does not lay out with the costs"
    grep -q "blocks 5-5 + final norm, LM head, loss$" "$WORK/plan" || fail "the last stage does not hold one block"
    # A costs file: the same rows; a bad one names file, field, value, rule and fix.
    echo '{"block": {"forward_ms": 1, "backward_ms": 2}, "embedding": {"forward_ms": 0, "backward_ms": 0}, "head": {"forward_ms": 0, "backward_ms": 0}}' > "$WORK/costs.json"
    "$PPCTL" plan "$WORK/job.yaml" --balance --layer-costs "$WORK/costs.json" > "$WORK/plan" 2>&1 || fail "plan with a costs file exited $?"
    grep -q "^ *balance costs *\[2, 2, 2\] .*<- in use" "$WORK/plan" || fail "equal blocks without embedding and head do not keep the uniform split"
    grep -qF "costs from costs file $WORK/costs.json" "$WORK/plan" || fail "the costs file is not named"
    expect_refusal() {  # $1 = text of the error; then the plan arguments
      local text="$1"
      shift
      "$PPCTL" plan "$@" > "$WORK/out" 2>&1
      rc=$?
      [ "$rc" -eq 2 ] || fail "plan $*: exit code $rc, expected 2"
      grep -qF -- "$text" "$WORK/out" || fail "plan $*: the error does not say '$text'"
    }
    echo '{"block": {"forward_ms": -1, "backward_ms": 2}, "embedding": {"forward_ms": 0, "backward_ms": 0}}' > "$WORK/bad.json"
    expect_refusal "$WORK/bad.json: block.forward_ms: value -1: must be finite and >= 0" "$WORK/job.yaml" --layer-costs "$WORK/bad.json"
    grep -qF "$WORK/bad.json: head: missing" "$WORK/out" || fail "not every problem of the costs file is listed"
    expect_refusal "excludes" "$WORK/job.yaml" --layer-costs "$WORK/costs.json" --costs 1,2,1,1
    sed 's/vocab_size: 4096/vocab_size: 512/' "$WORK/job.yaml" > "$WORK/other.yaml"
    expect_refusal "ran another model: model.vocab_size 4096 there, 512 here" "$WORK/other.yaml" --layer-costs "$WORK/run"
    sed -i 's/trace_steps: 4/trace_steps: 0/' "$WORK/job.yaml"
    timeout 300 "$PPCTL" train "$WORK/job.yaml" --steps 1 --run-dir "$WORK/untraced" > "$WORK/out" 2>&1 || fail "untraced train exited $?"
    expect_refusal "run directory $WORK/untraced has no trace.json: its observe.trace_steps is 0" "$WORK/job.yaml" --layer-costs "$WORK/untraced"
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
  spec_size)
    # Issue 26 item 4: a spec over 1 MiB is refused before parsing by plan (ppctl and ppctl-torch), train (local
    # and torchrun-style) and verify alike, naming the file, its size, the limit and a fix; one of several
    # hundred KiB (over the 128 KiB one environment string may hold, which the spec text once went in) plans
    # and trains: the workers read the validated text from the run directory.
    tiny_job 2 2 ""
    python3 - "$WORK/job.yaml" "$WORK/big.yaml" <<'PY'
import sys
spec = [line for line in open(sys.argv[1]) if not line.startswith("data:")]
spec += ["data:\n", "  path:\n"] + [f"    - corpus.txt  # entry {i}\n" for i in range(2000)]  # under the 10,000 limit
spec += [f"# {i:5d} " + "x" * 90 + "\n" for i in range(3500)]
open(sys.argv[2], "w").write("".join(spec))
PY
    size=$(stat -c %s "$WORK/big.yaml")
    [ "$size" -gt $((128 * 1024)) ] && [ "$size" -lt $((1024 * 1024)) ] || fail "big.yaml is $size bytes, not between 128 KiB and 1 MiB"
    "$PPCTL" plan "$WORK/big.yaml" > "$WORK/out" 2>&1 || fail "plan of a $size-byte spec exited $?"
    timeout 300 "$PPCTL" train "$WORK/big.yaml" > "$WORK/out" 2>&1 || fail "train of a $size-byte spec exited $?"
    grep -q "training finished" "$WORK/out" || fail "no 'training finished'"
    run=$(sed -n 's/.*run directory: //p' "$WORK/out" | tail -1)
    cmp -s "$WORK/big.yaml" "$run/config.yaml" || fail "the run directory's config.yaml is not the spec as written"
    grep -q "^\[\.\.\. [0-9]* more bytes of the spec: config.yaml in the run directory holds all of it\]$" "$WORK/out" \
      || fail "the spec echoed at start is not cut"
    [ "$(wc -c < "$WORK/out")" -lt $((size / 2)) ] || fail "the start echoes the whole spec ($(wc -c < "$WORK/out") bytes of output)"
    no_leftovers
    # Torchrun-style: every rank reads and validates the spec itself, then runs that text.
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    for r in 0 1; do
      RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 300 "$PPCTL" train "$WORK/big.yaml" --steps 1 \
        > "$WORK/rank$r.out" 2>&1 &
      pids[r]=$!
    done
    for r in 0 1; do wait "${pids[$r]}" || { cp "$WORK/rank$r.out" "$WORK/out"; fail "torchrun-style rank $r exited $?"; }; done
    # Over 1 MiB: the same refusal from every command that reads a spec.
    { cat "$WORK/big.yaml"; python3 -c 'print(("# " + "y" * 98 + "\n") * 17000, end="")'; } > "$WORK/huge.yaml"
    size=$(stat -c %s "$WORK/huge.yaml")
    [ "$size" -gt $((2 * 1024 * 1024)) ] || fail "huge.yaml is only $size bytes"
    want="error: $WORK/huge.yaml: the spec is $size bytes ($(awk -v s="$size" 'BEGIN { printf "%.1f", s / 1048576 }') MiB), over the limit of 1048576 bytes (1 MiB) that ppctl reads (fix: keep long lists out of the spec"
    runs_before=$(ls "$WORK/runs" | wc -l)
    for command in "$PPCTL plan" "$PPCTL_TORCH plan" "$PPCTL train" "$PPCTL verify" "env RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port $PPCTL train"; do
      # shellcheck disable=SC2086  # $command: several words
      timeout 60 $command "$WORK/huge.yaml" > "$WORK/out" 2>&1
      rc=$?
      [ "$rc" -eq 2 ] || fail "$command of a $size-byte spec: exit code $rc, expected 2"
      grep -qF "$want" "$WORK/out" || fail "$command does not name the file, its size, the limit and a fix"
    done
    [ "$(ls "$WORK/runs" | wc -l)" -eq "$runs_before" ] || fail "a refused spec made a run directory"
    # A list over its limit: refused by plan and train alike, naming the field, the count and the limit.
    python3 - "$WORK/job.yaml" "$WORK/list.yaml" 10001 <<'PY'
import sys
spec = [line for line in open(sys.argv[1]) if not line.startswith("data:")]
open(sys.argv[2], "w").write("".join(spec) + "data: {path: [" + ", ".join(["corpus.txt"] * int(sys.argv[3])) + "]}\n")
PY
    for command in "$PPCTL plan" "$PPCTL train"; do
      # shellcheck disable=SC2086
      $command "$WORK/list.yaml" > "$WORK/out" 2>&1
      rc=$?
      [ "$rc" -eq 2 ] || fail "$command of a 10,001-entry data.path: exit code $rc, expected 2"
      grep -q "list.yaml:[0-9]*: data.path: a list of 10001 entries, more than the 10000 that ppctl reads (fix: " "$WORK/out" \
        || fail "$command does not name data.path, its length and the limit"
    done
    no_leftovers
    ;;
  shared_install)
    # Issue 26 item 5: a build run by a user other than the one who built it. As root, a non-root user
    # (ppctl-nonroot, added with useradd when missing) runs `ppctl --version` and a short job from a folder it
    # owns: (a) with the build's venv readable by every user, the job trains; (b) with the venv behind a folder
    # that user cannot open (as the default venv in root's 0700 home is), the light ppctl names that folder and
    # the fix instead of the loader's bare exit 127, and `ppctl plan` (no LibTorch) still works. The venv is
    # neither copied (GBs) nor chmod'ed: in a private mount namespace a fresh folder of mode 0755 (a) or 0700
    # (b) is put over the first folder on its path the user cannot open (else over the venv's parent), with
    # the venv's side of it bound back in, so the path the build recorded (RUNPATH) stays.
    [ "$(id -u)" -eq 0 ] || { echo "SKIP [$CASE]: needs root (useradd, a mount namespace); run the test as root" >&2; exit 77; }
    library="${PPCTL_TEST_TORCH_LIBRARY:-}"
    [ -f "$library" ] || fail "PPCTL_TEST_TORCH_LIBRARY ('$library') names no file (CTest sets it to the build's libtorch)"
    user=ppctl-nonroot
    id -u "$user" > /dev/null 2>&1 || useradd --system --user-group --no-create-home --shell /usr/sbin/nologin "$user" \
      || fail "useradd $user failed"
    uid=$(id -u "$user"); gid=$(id -g "$user")
    as_user() { setpriv --reuid="$uid" --regid="$gid" --clear-groups env -i PATH=/usr/bin:/bin HOME="$WORK/home" "$@"; }
    chmod 0711 "$WORK"
    mkdir "$WORK/home" "$WORK/stage"
    tiny_job 2 2 ""
    cp "$WORK/job.yaml" "$WORK/corpus.txt" "$WORK/home/"
    chown -R "$uid:$gid" "$WORK/home"
    cd "$WORK/home" || fail "cd $WORK/home"
    as_user test -x "$PPCTL" || fail "$user cannot run $PPCTL: a folder on its path is closed to other users"
    # The first folder on the library's path the user cannot open; the venv (the folder with pyvenv.cfg).
    blocked="" path=""
    IFS=/ read -ra parts <<< "${library%/*}"
    for part in "${parts[@]}"; do
      [ -n "$part" ] || continue
      path="$path/$part"
      as_user test -x "$path" || { blocked="$path"; break; }
    done
    venv="${library%/*}"
    while [ "$venv" != "/" ] && [ ! -f "$venv/pyvenv.cfg" ]; do venv=$(dirname "$venv"); done
    [ "$venv" != "/" ] || venv=$(dirname "${library%/*}")
    cover="${blocked:-$(dirname "$venv")}"
    keep="${library#"$cover"/}"; keep="${keep%%/*}"  # the entry of $cover on the way to the library
    with_cover() {  # $1 = mode of the folder over $cover; the rest: a command run as $user in the namespace
      local mode=$1; shift
      unshare --mount --propagation private bash -c '
        cover=$1 keep=$2 stage=$3 mode=$4; shift 4
        mount --bind "$cover/$keep" "$stage" && mount -t tmpfs -o "mode=$mode,size=1m" ppctl-test "$cover" \
          && mkdir "$cover/$keep" && mount --bind "$stage" "$cover/$keep" || exit 99
        exec "$@"' _ "$cover" "$keep" "$WORK/stage" "$mode" \
        setpriv --reuid="$uid" --regid="$gid" --clear-groups env -i PATH=/usr/bin:/bin HOME="$WORK/home" "$@"
    }
    # (a) A venv every user can read.
    with_cover 0755 "$PPCTL" --version > "$WORK/out" 2>&1 || fail "ppctl --version as $user, venv readable: exit $?"
    grep -q "^ppctl [0-9]" "$WORK/out" || fail "no version line"
    with_cover 0755 timeout 120 "$PPCTL" train job.yaml > "$WORK/out" 2>&1 || fail "train as $user, venv readable: exit $?"
    grep -q "training finished" "$WORK/out" || fail "no 'training finished'"
    [ "$(stat -c %U "$(sed -n 's/.*run directory: //p' "$WORK/out" | tail -1)")" = "$user" ] || fail "the run directory is not $user's"
    # (b) The venv behind a folder of mode 0700 that the user cannot open: named, with the fix.
    libdir="${library%/*}"
    want="ppctl-torch loads LibTorch from $libdir (the virtual env this ppctl was built with), and user $user (uid $uid) cannot read it: $cover is not open (searchable) by it (mode 0700, owner root) (fix: install the virtual env where every user can read it"
    for command in "--version" "train job.yaml"; do
      # shellcheck disable=SC2086  # $command: several words
      with_cover 0700 "$PPCTL" $command > "$WORK/out" 2>&1
      rc=$?
      [ "$rc" -eq 1 ] || fail "ppctl $command with the venv closed to $user: exit $rc, expected 1 (127 is the loader's)"
      grep -qF "error: cannot run \`ppctl ${command%% *}\`: $want" "$WORK/out" || fail "ppctl $command does not name $cover and the fix"
    done
    with_cover 0700 "$PPCTL" plan job.yaml > "$WORK/out" 2>&1 || fail "ppctl plan needs no LibTorch, yet exited $?"
    # The real layout, when a folder on the way is closed to the user (root's home for the default venv).
    if [ -n "$blocked" ]; then
      as_user "$PPCTL" --version > "$WORK/out" 2>&1
      rc=$?
      [ "$rc" -eq 1 ] && grep -qF "error: cannot run \`ppctl --version\`: ppctl-torch loads LibTorch from $libdir" "$WORK/out" \
        || fail "the build's own venv, closed to $user at $blocked: exit $rc without the message"
    fi
    cd "$ROOT" || true
    ;;
  *) fail "unknown case" ;;
esac
echo "PASS [$CASE]"
