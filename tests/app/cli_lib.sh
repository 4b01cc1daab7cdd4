#!/usr/bin/env bash
# Shared setup and helpers of the end-to-end tests of the ppctl command line (tests/app/cli_*.sh,
# tests/job/signal_test.sh): each sources this file with its own arguments, CASE PPCTL_BINARY, and gets CASE,
# PPCTL, PPCTL_TORCH, ROOT, a fresh working folder WORK (removed at exit) and the helpers below.
# shellcheck disable=SC2034  # PPCTL_TORCH, ROOT, launcher, rc ...: set here for the scripts that source this file
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

pid_of_rank() {  # $1 = rank: the worker process whose environment has RANK=$1
  for pid in $(pgrep -f "worker $WORK/job.yaml"); do
    if tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | grep -qx "RANK=$1"; then echo "$pid"; return; fi
  done
}

# Starts a long training of $WORK/job.yaml in the background ($launcher) and waits for its first step. The
# background job truncates out only once it runs: without the rm, a previous run's "step 1/" could be taken for
# this one's, and a signal sent then would reach ppctl before it has started (exit 128 + N, not 75).
start_long_training() {
  rm -f "$WORK/out"
  "$PPCTL" train "$WORK/job.yaml" > "$WORK/out" 2>&1 &
  launcher=$!
  wait_for_line "step 1/" 120
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

wait_for_line() {  # $1 = pattern in $WORK/out, $2 = seconds
  for _ in $(seq 1 $(($2 * 10))); do grep -q "$1" "$WORK/out" && return 0; sleep 0.1; done
  fail "no line matching '$1' within $2 s"
}

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

