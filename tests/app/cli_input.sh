#!/usr/bin/env bash
# End-to-end tests of bad input on the ppctl command line: each spec, dataset, checkpoint, option or
# launch variable that is wrong is refused (exit 2) before anything starts, naming what and the fix.
# Usage: cli_input.sh CASE PPCTL_BINARY (exits non-zero on failure). Helpers: tests/app/cli_lib.sh.
# shellcheck source=cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh" "$@"

# Runs "$@" as an ordinary user would read files: root's file-permission override (CAP_DAC_OVERRIDE,
# CAP_DAC_READ_SEARCH) dropped, so a mode-000 file cannot be read by it either.
without_root_reads() {
  if [ "$(id -u)" -eq 0 ]; then setpriv --bounding-set=-dac_override,-dac_read_search "$@"; else "$@"; fi
}

case "$CASE" in
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
  bad_master_addr)
    # The launcher hosts the store: an address of another machine fails at once (192.0.2.1 is reserved
    # for documentation; only bind(2) is tried, nothing is sent; no name lookup either).
    tiny_job 2 5 "runtime: {master_addr: 192.0.2.1}"
    sed -i 's/^runtime: {comm_timeout_s: 30}$//' "$WORK/job.yaml"
    timeout 20 "$PPCTL" train "$WORK/job.yaml" > "$WORK/out" 2>&1 && fail "train succeeded"
    grep -q "runtime.master_addr '192.0.2.1' is not an address of this machine" "$WORK/out" || fail "no clear message"
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
    # Tensor parallel 2: the world is t x dp x pp, and a tp group must sit on one node: refused before any rendezvous
    # (MASTER_PORT 1 would fail otherwise).
    sed -i 's/stages: 2,/stages: 2, tensor_parallel: 2,/' "$WORK/job.yaml"
    grep -q "tensor_parallel: 2" "$WORK/job.yaml" || fail "the spec did not take tensor_parallel"
    RANK=0 WORLD_SIZE=6 MASTER_ADDR=127.0.0.1 MASTER_PORT=1 timeout 20 "$PPCTL" train "$WORK/job.yaml" > "$WORK/out" 2>&1
    rc=$?
    [ "$rc" -eq 2 ] || fail "WORLD_SIZE=6 at tp 2 x pp 2: exit code $rc, expected 2"
    grep -q "WORLD_SIZE=6 is not a multiple of pipeline.tensor_parallel x pipeline.stages = 2 x 2 = 4" "$WORK/out" ||
      fail "no clear message for WORLD_SIZE at tp 2"
    RANK=0 WORLD_SIZE=4 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=1 timeout 20 "$PPCTL" train "$WORK/job.yaml" \
      > "$WORK/out" 2>&1
    rc=$?
    [ "$rc" -eq 2 ] || fail "tp 2 over 1 worker per node (torchrun): exit code $rc, expected 2"
    grep -q "pipeline.tensor_parallel = 2 but LOCAL_WORLD_SIZE=1 puts 1 worker on a node" "$WORK/out" ||
      fail "the workers per node are not named (torchrun)"
    SLURM_PROCID=0 SLURM_NTASKS=4 SLURM_STEP_ID=0 SLURM_JOB_ID=7 SLURM_JOB_NODELIST=localhost \
      SLURM_STEP_TASKS_PER_NODE="3,1" "$PPCTL" train "$WORK/job.yaml" > "$WORK/out" 2>&1
    rc=$?
    [ "$rc" -eq 2 ] || fail "tp 2 over nodes of 3 and 1 tasks (Slurm): exit code $rc, expected 2"
    grep -q "pipeline.tensor_parallel = 2 but SLURM_STEP_TASKS_PER_NODE=3,1 puts 1 worker on a node" "$WORK/out" ||
      fail "the tasks per node are not named (Slurm)"
    sed -i 's/hidden: 32/hiden: 32/' "$WORK/job.yaml"
    RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=1 timeout 20 "$PPCTL" train "$WORK/job.yaml" > "$WORK/out" 2>&1
    rc=$?
    [ "$rc" -eq 2 ] || fail "a bad spec under torchrun variables: exit code $rc, expected 2"
    grep -q "model.hiden: unknown key" "$WORK/out" || fail "the spec is not validated in the worker"
    no_leftovers
    ;;
  *) fail "unknown case" ;;
esac
echo "PASS [$CASE]"
