#!/usr/bin/env bash
# A real one-node Slurm cluster on this machine (Debian's munged, slurmctld and slurmd, started without
# systemd, every file in a temporary folder, stopped on exit), then `sbatch --wait` of the project's own
# scripts/slurm/cpu.sbatch with 4 tasks (dp = 2 x pp = 2) on a tiny job; checks that it trained.
# Usage: slurm_cluster_test.sh PPCTL_BINARY [SPEC STEPS]: with SPEC (a dp = 2 x pp = 2 job spec with
# absolute data paths) it trains that spec for STEPS steps instead and prints its loss lines. Also (issue 26): a job
# signalled mid-run checkpoints, requeues itself and resumes with equal losses; one requeued before its first
# checkpoint starts from step 1. Needs root (slurmd starts job steps as the job's user;
# skipped, exit 77, otherwise) and the packages scripts/setup.sh installs (munge, slurmctld, slurmd,
# slurm-client).
set -uo pipefail
PPCTL="$(realpath "$1")"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=slurm_conf.sh
source "$ROOT/tests/slurm/slurm_conf.sh"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/ppctl_slurm_XXXXXX")"
chmod 0755 "$WORK"   # munged checks the folders above its socket and key

fail() {
  echo "FAIL [slurm]: $*" >&2
  for f in "$WORK"/job.out "$WORK"/slurmctld.log "$WORK"/slurmd.log "$WORK"/munged.log; do
    [ -f "$f" ] && { echo "--- $f" >&2; tail -n 40 "$f" | sed 's/^/  | /' >&2; }
  done
  exit 1
}

# Stop exactly the daemons started here (by their pid files), then remove the folder.
cleanup() {
  for name in slurmd slurmctld munged; do
    [ -f "$WORK/$name.pid" ] && kill "$(cat "$WORK/$name.pid")" 2>/dev/null
  done
  sleep 0.3
  for name in slurmd slurmctld munged; do
    [ -f "$WORK/$name.pid" ] && kill -KILL "$(cat "$WORK/$name.pid")" 2>/dev/null
  done
  rm -rf "$WORK"
}
trap cleanup EXIT

# slurmd must run as root to start job steps; elsewhere the test is skipped (CTest: exit code 77).
if [ "$(id -u)" -ne 0 ]; then echo "SKIP [slurm]: needs root (slurmd starts the job steps)"; exit 77; fi
for tool in munged slurmctld slurmd sbatch scontrol; do
  command -v "$tool" >/dev/null || fail "$tool is missing (fix: run scripts/setup.sh)"
done

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# munge: socket folder 0755, key 0600.
mkdir -m 0755 "$WORK/munge"
head -c 1024 /dev/urandom > "$WORK/munge.key"
chmod 0600 "$WORK/munge.key"
munged --socket="$WORK/munge/socket" --key-file="$WORK/munge.key" --log-file="$WORK/munged.log" \
  --pid-file="$WORK/munged.pid" --seed-file="$WORK/munged.seed" || fail "munged did not start"

mkdir -p "$WORK/state" "$WORK/spool"
# The job's one node is this machine, named localhost (so MASTER_ADDR, its first host, resolves), on
# 127.0.0.1. It declares 8 CPUs whatever the machine has (config_overrides); EnforcePartLimits=ALL makes
# an oversize job fail at once instead of pending forever.
{
  cat <<CONF
ClusterName=ppctltest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
StateSaveLocation=$WORK/state
SlurmdSpoolDir=$WORK/spool
SlurmctldPidFile=$WORK/slurmctld.pid
SlurmdPidFile=$WORK/slurmd.pid
SlurmctldLogFile=$WORK/slurmctld.log
SlurmdLogFile=$WORK/slurmd.log
CONF
  slurm_test_conf "$WORK/munge/socket"
  cat <<CONF
NodeName=localhost NodeAddr=127.0.0.1 CPUs=8 State=UNKNOWN
PartitionName=test Nodes=localhost Default=YES MaxTime=10 State=UP
CONF
} > "$WORK/slurm.conf"
export SLURM_CONF="$WORK/slurm.conf"

slurmctld -c -f "$SLURM_CONF" || fail "slurmctld did not start"
slurmd -N localhost -f "$SLURM_CONF" || fail "slurmd did not start"
for _ in $(seq 1 100); do
  sinfo -h -o '%T' 2>/dev/null | grep -qE '^(idle|mixed)' && break
  sleep 0.1
done
sinfo -h -o '%T' | grep -qE '^(idle|mixed)' || fail "the node did not come up: $(sinfo 2>&1)"

# The tiny job: dp = 2 x pp = 2.
for i in $(seq 1 300); do echo "line $i: sphinx of black quartz, judge my vow"; done > "$WORK/corpus.txt"
cat > "$WORK/job.yaml" <<YAML
model: {layers: 4, hidden: 32, heads: 4, seq_len: 32}
pipeline: {stages: 2, data_parallel: 2, schedule: 1f1b, microbatches: 4, micro_batch_size: 4}
data: {path: corpus.txt}
optimizer: {lr: 0.003}
train: {steps: 10, seed: 3, log_interval: 1}
runtime: {device: cpu, comm_timeout_s: 60}
YAML

if [ $# -ge 3 ]; then  # a given spec (e.g. the example at dp 2 x pp 2) instead of the tiny job
  cp "$2" "$WORK/job.yaml"
  cd "$WORK"
  PPCTL="$PPCTL" timeout 1800 sbatch --wait --nodes=1 --ntasks=4 --cpus-per-task=1 \
    --output="$WORK/job.out" "$ROOT/scripts/slurm/cpu.sbatch" "$WORK/job.yaml" --steps "$3" \
    > "$WORK/sbatch.out" 2>&1 || fail "sbatch --wait exited $?: $(cat "$WORK/sbatch.out")"
  grep "launched by slurm\|| loss \|eval after" "$WORK/job.out"
  grep -q "step $3/$3 | loss" "$WORK/job.out" || fail "no loss line for step $3"
  echo "PASS [slurm]: $2 trained for $3 steps with 4 Slurm tasks"
  exit 0
fi

# The resource line `ppctl plan` prints for this spec must be what the test submits with.
"$PPCTL" plan "$WORK/job.yaml" > "$WORK/plan.out" 2>&1 || fail "plan failed: $(cat "$WORK/plan.out")"
grep -q -- "--nodes=1 --ntasks=4 --cpus-per-task=1" "$WORK/plan.out" \
  || fail "plan does not print the 4-task resource line: $(grep -i slurm "$WORK/plan.out")"

cd "$WORK"
PPCTL="$PPCTL" timeout 300 sbatch --wait --nodes=1 --ntasks=4 --cpus-per-task=1 \
  --output="$WORK/job.out" "$ROOT/scripts/slurm/cpu.sbatch" "$WORK/job.yaml" > "$WORK/sbatch.out" 2>&1
rc=$?
[ "$rc" -eq 0 ] || fail "sbatch --wait exited $rc: $(cat "$WORK/sbatch.out")"
grep -q "launched by slurm: rank 0 of 4 (local rank 0), dp 2 x pp 2" "$WORK/job.out" || fail "rank 0 did not run as a Slurm task"
grep -q "launched by slurm: rank 3 of 4" "$WORK/job.out" || fail "rank 3 did not run"
[ "$(grep -c "| loss " "$WORK/job.out")" -eq 10 ] || fail "expected 10 loss lines (one per step)"
first=$(grep -o "step 1/10 | loss [0-9.]*" "$WORK/job.out" | awk '{print $NF}')
last=$(grep -o "step 10/10 | loss [0-9.]*" "$WORK/job.out" | awk '{print $NF}')
awk -v a="$first" -v b="$last" 'BEGIN { exit !(a > 4.0 && b < a - 0.5) }' || fail "loss did not fall: $first -> $last"

# An allocation larger than the partition fails at once instead of pending forever.
PPCTL="$PPCTL" timeout 30 sbatch --wait --nodes=1 --ntasks=16 --cpus-per-task=1 \
  --output="$WORK/big.out" "$ROOT/scripts/slurm/cpu.sbatch" "$WORK/job.yaml" > "$WORK/sbatch.out" 2>&1 \
  && fail "a 16-task job on an 8-CPU node was accepted"

# Issue 13: the srun job left one run directory under the submit folder's runs/ (rank 0 made it and
# printed it; every task wrote its rank log, the last stage metrics.jsonl, replica 0 the trace parts
# that rank 0 merged).
grep -q "\[rank 0\] info: run directory: $WORK/runs/job-" "$WORK/job.out" || fail "rank 0 did not print the run directory"
python3 "$ROOT/tests/support/check_run_dir.py" "$WORK/runs" --spec "$WORK/job.yaml" --steps 10 --world 4 --pipeline 2 \
  || fail "the Slurm job's run directory is incomplete"

# Issue 26: a job signalled mid-run (SIGUSR1 to the batch shell, as --signal=B:USR1 would) checkpoints at the
# next step, exits 75, requeues itself and resumes (--resume auto); its losses equal an uninterrupted run's.
# The scripts are submitted from a folder whose path has spaces.
mkdir "$WORK/dir with spaces"
cp "$ROOT"/scripts/slurm/* "$WORK/dir with spaces/"
sed -e 's/steps: 10,/steps: 40,/' -e 's/log_interval: 1}/log_interval: 1}\ncheckpoint: {dir: ckpt}\nobserve: {runs_dir: reqruns}/' \
  "$WORK/job.yaml" > "$WORK/req.yaml"
timeout 300 "$PPCTL" train "$WORK/req.yaml" --local --run-dir "$WORK/ref" > "$WORK/ref.out" 2>&1 || fail "the uninterrupted run failed"
rm -rf "$WORK/ckpt"
id=$(PPCTL="$PPCTL" sbatch --parsable --nodes=1 --ntasks=4 --cpus-per-task=1 --output="$WORK/job.out" \
  "$WORK/dir with spaces/cpu.sbatch" "$WORK/req.yaml") || fail "sbatch failed"
for _ in $(seq 1 1200); do grep -q "step 5/40" "$WORK/job.out" 2>/dev/null && break; sleep 0.1; done
scancel --batch --signal=USR1 "$id" || fail "scancel --batch --signal=USR1 failed"
# A requeued batch job waits out a begin-time delay (about two minutes here) before it may start again: the
# test lets it start at once.
for _ in $(seq 1 600); do scontrol show job "$id" | grep -q "JobState=PENDING" && break; sleep 0.1; done
scontrol update JobId="$id" StartTime=now || true
for _ in $(seq 1 2400); do scontrol show job "$id" | grep -q "JobState=COMPLETED" && break; sleep 0.1; done
scontrol show job "$id" | grep -q "JobState=COMPLETED" || fail "the signalled job did not complete: $(scontrol show job "$id" | grep -o 'JobState=[A-Z]* .*Restarts=[0-9]*')"
grep -q "stopped after step [0-9]* of 40 on SIGUSR1 (received by another rank)\|stopped after step [0-9]* of 40 on SIGUSR1: checkpoint" "$WORK/job.out" || fail "no checkpoint at the signal"
grep -q "requeueing job $id" "$WORK/job.out" || fail "the job did not requeue itself"
grep -q "resumed from $WORK/ckpt/step-" "$WORK/job.out" || fail "the requeued job did not resume"
python3 - "$WORK/ref" "$WORK"/reqruns/* <<'PY' || fail "the requeued job's losses differ from the uninterrupted run's"
import json, sys
def losses(run):
    return {r["step"]: r["loss"] for r in map(json.loads, open(run + "/metrics.jsonl")) if r["event"] == "step"}
ref, seen = losses(sys.argv[1]), {}
for run in sys.argv[2:]:
    seen.update(losses(run))
assert len(sys.argv) == 4 and seen == ref, (len(sys.argv), sorted(set(ref.items()) ^ set(seen.items()))[:4])
PY
echo "PASS [slurm]: a job signalled at step 5 checkpointed, requeued itself and resumed with equal losses"

# A job preempted before its first checkpoint (`scontrol requeue` while its tasks still start: here a wrapper
# that sleeps on the first attempt) starts from step 1 on requeue.
rm -rf "$WORK/ckpt" "$WORK/reqruns"
cat > "$WORK/slow_ppctl" <<SH
#!/bin/bash
[ "\${SLURM_RESTART_COUNT:-0}" -eq 0 ] && sleep 30
exec "$PPCTL" "\$@"
SH
chmod +x "$WORK/slow_ppctl"
sed -i 's/steps: 40,/steps: 4,/' "$WORK/req.yaml"
id=$(PPCTL="$WORK/slow_ppctl" sbatch --parsable --nodes=1 --ntasks=4 --cpus-per-task=1 --output="$WORK/fresh.out" \
  "$WORK/dir with spaces/cpu.sbatch" "$WORK/req.yaml") || fail "sbatch failed"
for _ in $(seq 1 600); do grep -q "store on" "$WORK/fresh.out" 2>/dev/null && break; sleep 0.1; done
sleep 1
scontrol requeue "$id" || fail "scontrol requeue failed"
for _ in $(seq 1 600); do scontrol show job "$id" | grep -q "JobState=PENDING" && break; sleep 0.1; done
scontrol update JobId="$id" StartTime=now || true
for _ in $(seq 1 2400); do scontrol show job "$id" | grep -q "JobState=COMPLETED" && break; sleep 0.1; done
scontrol show job "$id" | grep -q "JobState=COMPLETED" || { cp "$WORK/fresh.out" "$WORK/job.out"; fail "the job preempted early did not complete"; }
grep -q "no checkpoint in $WORK/ckpt yet: starting from step 1" "$WORK/fresh.out" || { cp "$WORK/fresh.out" "$WORK/job.out"; fail "the requeued job did not start afresh"; }
grep -q "step 4/4 | loss" "$WORK/fresh.out" || { cp "$WORK/fresh.out" "$WORK/job.out"; fail "the requeued job did not train"; }
echo "PASS [slurm]: a job requeued before its first checkpoint started from step 1"
echo "PASS [slurm]: loss $first -> $last over 10 steps with 4 Slurm tasks (dp 2 x pp 2)"
