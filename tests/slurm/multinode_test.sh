#!/usr/bin/env bash
# A three-node Slurm cluster on one machine, each node a Linux network namespace with its own address on
# a private bridge (plus its own hostname and mount namespace, munged and slurmd; slurmctld on node3),
# all inside the test's own namespaces. It trains dp 2 x pp 2 across node1 and node2 with
# scripts/slurm/cpu.sbatch (Gloo over the nodes' eth0), compares the losses with the same job on one
# node, then kills every process of node2 mid-run and times how the job ends.
#
# Usage: multinode_test.sh PPCTL_BINARY [--measure]
#   --measure  also prints the figures docs/measurements.md records (loss table, time to the end).
# Needs root, unshare, nsenter, ip (iproute2) and the packages scripts/setup.sh installs (munge,
# slurmctld, slurmd, slurm-client). Where namespaces cannot be made it is skipped (exit 77) and says why.
set -uo pipefail

if [ "${1:-}" != "--inside" ]; then
  [ $# -ge 1 ] || { echo "usage: $0 PPCTL_BINARY [--measure]" >&2; exit 2; }
  if [ "$(id -u)" -ne 0 ]; then echo "SKIP [multinode]: needs root (network namespaces, slurmd)"; exit 77; fi
  for tool in unshare nsenter ip munged slurmctld slurmd sbatch scontrol; do
    command -v "$tool" >/dev/null || { echo "FAIL [multinode]: $tool is missing (fix: run scripts/setup.sh)" >&2; exit 1; }
  done
  if ! why=$(unshare --mount --net --uts --propagation private ip link add ppprobe type bridge 2>&1); then
    echo "SKIP [multinode]: cannot create network namespaces and bridges here: $why"
    echo "  (run it where they are allowed: bash $0 PPCTL_BINARY --measure)"
    exit 77
  fi
  # Everything below runs in a private mount and network namespace: the bridge, the hosts file and
  # the nodes vanish with it.
  exec unshare --mount --net --propagation private "$BASH" "$0" --inside "$(realpath "$1")" "${@:2}"
fi

PPCTL="$2"
MEASURE=0
[ "${3:-}" = "--measure" ] && MEASURE=1
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=slurm_conf.sh
source "$ROOT/tests/slurm/slurm_conf.sh"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/ppctl_multinode_XXXXXX")"
chmod 0755 "$WORK"   # munged checks the folders above its socket and key
NODES=(node1 node2 node3)
declare -A HOLDER   # node name -> pid of the process that holds its namespaces

fail() {
  echo "FAIL [multinode]: $*" >&2
  for f in "$WORK"/*.out "$WORK"/node*/slurmd.log "$WORK"/node3/slurmctld.log; do
    [ -f "$f" ] && { echo "--- $f" >&2; tail -n 30 "$f" | sed 's/^/  | /' >&2; }
  done
  exit 1
}

# The pids of every process in `node`'s network namespace.
node_pids() {
  local want pid
  want="$(readlink "/proc/${HOLDER[$1]}/ns/net" 2>/dev/null)" || return 0
  for pid in /proc/[0-9]*; do
    [ "$(readlink "$pid/ns/net" 2>/dev/null)" = "$want" ] && echo "${pid#/proc/}"
  done
}

# Kill every process of `node` (its daemons, job steps and workers), the holder last.
kill_node() {
  local pids
  pids="$(node_pids "$1" | grep -vx "${HOLDER[$1]}")"
  # shellcheck disable=SC2086
  [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
  return 0
}

cleanup() {
  local node
  for node in "${!HOLDER[@]}"; do kill_node "$node"; done
  for node in "${!HOLDER[@]}"; do kill -KILL "${HOLDER[$node]}" 2>/dev/null; done
  rm -rf "$WORK"
}
trap cleanup EXIT

# Runs a command on `node`: in its network, hostname and mount namespaces.
on_node() { local node="$1"; shift; nsenter -t "${HOLDER[$node]}" -n -u -m -- "$@"; }

# --- The network: a bridge in the test's namespace, one veth pair per node, 10.77.0.0/24. ---
ip link set lo up
ip link add ppbr0 type bridge || fail "cannot create the bridge"
ip link set ppbr0 up
{
  echo "127.0.0.1 localhost"
  for i in 1 2 3; do echo "10.77.0.$i node$i"; done
} > "$WORK/hosts"
mount --bind "$WORK/hosts" /etc/hosts || fail "cannot bind-mount the test's hosts file"
mkdir -m 0755 "$WORK/munge"
for i in 1 2 3; do
  node="node$i"
  mkdir -m 0755 -p "$WORK/$node/munge" "$WORK/$node/spool"
  # The holder makes the node's namespaces; each node's munged socket lives at the one path
  # $WORK/munge/socket that slurm.conf names, bound to that node's own folder.
  unshare --net --uts --mount --propagation private \
    sh -c "hostname $node && mount --bind '$WORK/$node/munge' '$WORK/munge' && exec sleep infinity" &
  HOLDER[$node]=$!
  disown "${HOLDER[$node]}"   # killed by cleanup, without the shell's "Killed" report
  for _ in $(seq 1 50); do
    [ "$(readlink /proc/$$/ns/net)" != "$(readlink "/proc/${HOLDER[$node]}/ns/net" 2>/dev/null)" ] \
      && [ "$(on_node "$node" hostname 2>/dev/null)" = "$node" ] && break
    sleep 0.1
  done
  ip link add "v$node" type veth peer name eth0 netns "${HOLDER[$node]}" || fail "cannot create $node's veth pair"
  ip link set "v$node" master ppbr0 up
  on_node "$node" ip addr add "10.77.0.$i/24" dev eth0
  on_node "$node" ip link set eth0 up
  on_node "$node" ip link set lo up
done

# --- munge on every node (one key), slurmctld on node3, slurmd on every node. ---
head -c 1024 /dev/urandom > "$WORK/munge.key"
chmod 0600 "$WORK/munge.key"
for node in "${NODES[@]}"; do
  on_node "$node" munged --socket="$WORK/munge/socket" --key-file="$WORK/munge.key" \
    --log-file="$WORK/$node/munged.log" --pid-file="$WORK/$node/munged.pid" \
    --seed-file="$WORK/$node/munged.seed" || fail "munged did not start on $node"
done
mkdir -p "$WORK/state"
{
  cat <<CONF
ClusterName=ppctlmulti
SlurmctldHost=node3(10.77.0.3)
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$WORK/state
SlurmdSpoolDir=$WORK/%n/spool
SlurmdPidFile=$WORK/%n/slurmd.pid
SlurmdLogFile=$WORK/%n/slurmd.log
SlurmctldPidFile=$WORK/node3/slurmctld.pid
SlurmctldLogFile=$WORK/node3/slurmctld.log
CONF
  slurm_test_conf "$WORK/munge/socket"
  cat <<CONF
NodeName=node1 NodeAddr=10.77.0.1 CPUs=4 State=UNKNOWN
NodeName=node2 NodeAddr=10.77.0.2 CPUs=4 State=UNKNOWN
NodeName=node3 NodeAddr=10.77.0.3 CPUs=4 State=UNKNOWN
PartitionName=test Nodes=node[1-3] Default=YES MaxTime=10 State=UP
CONF
} > "$WORK/slurm.conf"
export SLURM_CONF="$WORK/slurm.conf"
on_node node3 slurmctld -c -f "$SLURM_CONF" || fail "slurmctld did not start on node3"
for node in "${NODES[@]}"; do
  on_node "$node" slurmd -N "$node" -f "$SLURM_CONF" || fail "slurmd did not start on $node"
done
for _ in $(seq 1 150); do
  [ "$(on_node node3 sinfo -h -N -o '%T' 2>/dev/null | grep -cE '^(idle|mixed)')" -eq 3 ] && break
  sleep 0.1
done
[ "$(on_node node3 sinfo -h -N -o '%T' | grep -cE '^(idle|mixed)')" -eq 3 ] \
  || fail "the three nodes did not come up: $(on_node node3 sinfo -N 2>&1)"

# --- The job: dp 2 x pp 2, 4 tasks on node1 and node2 (ranks 0-1 on node1, 2-3 on node2). ---
for i in $(seq 1 300); do echo "line $i: sphinx of black quartz, judge my vow"; done > "$WORK/corpus.txt"
write_spec() {  # STEPS COMM_TIMEOUT_S
  cat <<YAML
model: {layers: 4, hidden: 32, heads: 4, seq_len: 32}
pipeline: {stages: 2, data_parallel: 2, schedule: 1f1b, microbatches: 4, micro_batch_size: 4}
data: {path: $WORK/corpus.txt}
optimizer: {lr: 0.003}
train: {steps: $1, seed: 3, log_interval: 1}
runtime: {device: cpu, comm_timeout_s: $2}
YAML
}
write_spec 10 60 > "$WORK/job.yaml"
submit() {  # OUTPUT SPEC [sbatch options]: submits cpu.sbatch SPEC from node3 (the login node), prints the job id
  on_node node3 env PPCTL="$PPCTL" sbatch --parsable --nodes=2 --ntasks-per-node=2 --cpus-per-task=1 \
    -w node1,node2 --chdir="$WORK" --output="$1" "${@:3}" "$ROOT/scripts/slurm/cpu.sbatch" "$2"
}
job_state() { on_node node3 scontrol show job "$1" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }
job_exit() { on_node node3 scontrol show job "$1" 2>/dev/null | grep -o ' ExitCode=[0-9:]*' | cut -d= -f2; }
wait_job_end() {  # JOB_ID SECONDS: waits until the job left the PENDING/RUNNING/COMPLETING states
  local state
  for _ in $(seq 1 $(($2 * 10))); do
    state="$(job_state "$1")"
    case "$state" in PENDING|RUNNING|CONFIGURING|COMPLETING|"") sleep 0.1 ;; *) return 0 ;; esac
  done
  return 1
}
losses() { grep -o "step [0-9]*/[0-9]* | loss [0-9.]*" "$1" | awk '{print $NF}'; }
# Bytes `node` sent over its eth0 (/proc/net/dev is per network namespace; /sys here is the host's).
tx_bytes() { on_node "$1" sed -n 's/^ *eth0: *//p' /proc/net/dev | awk '{ print $9 }'; }

# 1. A wrong GLOO_SOCKET_IFNAME is bad input on the node (exit 2), named with the interfaces it has.
job=$(GLOO_SOCKET_IFNAME=nosuch0 submit "$WORK/badif.out" "$WORK/job.yaml") || fail "sbatch refused the job"
wait_job_end "$job" 60 || fail "the job with a wrong GLOO_SOCKET_IFNAME did not end"
[ "$(job_exit "$job")" = "2:0" ] || fail "a wrong GLOO_SOCKET_IFNAME ended with $(job_exit "$job"), not 2"
grep -q "GLOO_SOCKET_IFNAME='nosuch0': this machine has no network interface 'nosuch0' (this machine has: lo, eth0" \
  "$WORK/badif.out" || fail "no clear error for GLOO_SOCKET_IFNAME=nosuch0"
# ... and so is an interface the nodes have without an address (Gloo could not bind to it).
# (A veth pair left down: no address, not even IPv6 link-local.)
for node in node1 node2; do
  on_node "$node" ip link add noaddr0 type veth peer name noaddr1 || fail "cannot add an address-less interface on $node"
done
job=$(GLOO_SOCKET_IFNAME=noaddr0 submit "$WORK/noaddr.out" "$WORK/job.yaml") || fail "sbatch refused the job"
wait_job_end "$job" 60 || fail "the job with an address-less GLOO_SOCKET_IFNAME did not end"
[ "$(job_exit "$job")" = "2:0" ] || fail "an address-less GLOO_SOCKET_IFNAME ended with $(job_exit "$job"), not 2"
grep -q "GLOO_SOCKET_IFNAME='noaddr0': network interface 'noaddr0' has no address (this machine has: lo, eth0" \
  "$WORK/noaddr.out" || fail "no clear error for GLOO_SOCKET_IFNAME=noaddr0"

# 2. Across the nodes, Gloo bound to eth0 (GLOO_SOCKET_IFNAME) and the rendezvous host from the node list;
#    one run directory on the folder the nodes share, with every rank's part.
rm -rf "$WORK/runs"
before=$(tx_bytes node2)
job=$(GLOO_SOCKET_IFNAME=eth0 submit "$WORK/multi.out" "$WORK/job.yaml") || fail "sbatch refused the job"
wait_job_end "$job" 240 || fail "the two-node job did not end in 240 s"
[ "$(job_exit "$job")" = "0:0" ] || fail "the two-node job ended with $(job_exit "$job")"
grep -q "store on node1:" "$WORK/multi.out" || fail "the store was not put on node1 (the node list's first host)"
for r in 0 1 2 3; do
  grep -q "launched by slurm: rank $r of 4" "$WORK/multi.out" || fail "rank $r did not run"
done
sent=$(( $(tx_bytes node2) - before ))
[ "$sent" -gt 100000 ] || fail "node2 sent only $sent bytes over eth0"
[ "$(losses "$WORK/multi.out" | wc -l)" -eq 10 ] || fail "expected 10 loss lines"
python3 "$ROOT/tests/support/check_run_dir.py" "$WORK/runs" --spec "$WORK/job.yaml" --steps 10 --world 4 --pipeline 2 \
  || fail "the two-node job's run directory is incomplete"

# The same job on one machine (the local launcher, over loopback): the same losses up to float rounding.
(cd "$WORK" && timeout 240 "$PPCTL" train "$WORK/job.yaml" > "$WORK/local.out" 2>&1) \
  || fail "the one-node run failed"
paste <(losses "$WORK/multi.out") <(losses "$WORK/local.out") > "$WORK/losses.tsv"
[ "$(wc -l < "$WORK/losses.tsv")" -eq 10 ] || fail "the one-node run logged $(losses "$WORK/local.out" | wc -l) losses"
awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-4 * $2) bad = 1 } END { exit bad }' "$WORK/losses.tsv" \
  || fail "two-node and one-node losses differ: $(tr '\n\t' '; ' < "$WORK/losses.tsv")"

# 3. node2 lost as in a power failure: its link cut first (no connection is closed in order), then
#    every process of it killed. The ranks on node1 end within comm_timeout_s + 10 s naming the ranks
#    and node lost, the job ends non-zero as soon (cpu.sbatch with PPCTL_STEP_GRACE_S; without it srun
#    waits for Slurm to declare node2 down, after SlurmdTimeout), and nothing of the job is left on node1.
COMM_TIMEOUT_S=20
GRACE_S=2
write_spec 100000 "$COMM_TIMEOUT_S" > "$WORK/long.yaml"
job=$(PPCTL_STEP_GRACE_S=$GRACE_S submit "$WORK/kill.out" "$WORK/long.yaml" --no-requeue) \
  || fail "sbatch refused the long job"
for _ in $(seq 1 1200); do grep -q "step 3/" "$WORK/kill.out" 2>/dev/null && break; sleep 0.1; done
grep -q "step 3/" "$WORK/kill.out" || fail "the long job did not reach step 3"
# The processes left on `node` whose executable matches $2 (a pattern: ppctl and ppctl-torch, or */srun).
left_on() {
  local pid
  for pid in $(node_pids "$1"); do
    # shellcheck disable=SC2254
    case "$(readlink "/proc/$pid/exe" 2>/dev/null)" in $2) echo "$pid" ;; esac
  done
}
workers="$(dirname "$PPCTL")/ppctl*"  # ppctl execs ppctl-torch beside it
[ -n "$(left_on node1 "$workers")" ] && [ -n "$(left_on node2 "$workers")" ] && [ -n "$(left_on node1 "*/srun")" ] \
  || fail "no ppctl workers on node1 and node2, or no srun on node1, before the loss: the checks below would see nothing"
killed_at=$(date +%s.%N)
ip link set vnode2 down
kill_node node2
since_kill() { awk -v a="$killed_at" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
workers_took="" srun_took="" job_took=""
for _ in $(seq 1 $(( (COMM_TIMEOUT_S + 60) * 10 ))); do
  [ -z "$workers_took" ] && [ -z "$(left_on node1 "$workers")" ] && workers_took=$(since_kill)
  [ -z "$srun_took" ] && [ -z "$(left_on node1 '*/srun')" ] && srun_took=$(since_kill)
  case "$(job_state "$job")" in PENDING|RUNNING|CONFIGURING) ;; *) [ -z "$job_took" ] && job_took=$(since_kill) ;; esac
  [ -n "$workers_took" ] && [ -n "$srun_took" ] && [ -n "$job_took" ] && break
  sleep 0.1
done
limit=$((COMM_TIMEOUT_S + 10))
late=$((COMM_TIMEOUT_S + 60))
[ -n "$workers_took" ] || fail "ppctl workers still run on node1 $late s after node2 was lost"
[ -n "$srun_took" ] || fail "srun still runs on node1 $late s after node2 was lost"
[ -n "$job_took" ] || fail "the job still runs $late s after node2 was lost: $(job_state "$job")"
for t in "$workers_took" "$srun_took" "$job_took"; do
  awk -v t="$t" -v limit="$limit" 'BEGIN { exit !(t <= limit) }' \
    || fail "the job took $t s to end after node2 was lost (limit: comm_timeout_s + 10 = $limit s)"
done
exit_code="$(job_exit "$job")"
[ "$exit_code" != "0:0" ] || fail "the job ended with exit code 0 after node2 was lost"
# Where the link was cut decides which wait times out first: a receive from a pipeline peer names it
# ("peer: rank 2 on node2"), a collective names its group ("ranks 1, 3 on node1, node2"; the tied
# embedding's sum over the first and last stage of both replicas: "ranks 0-3 on node1, node2").
grep -Eq "peer: rank [23] on node2|\(ranks [01], [23] on node1, node2\)|\(ranks 0-3 on node1, node2\)" "$WORK/kill.out" \
  || fail "no rank on node1 named the lost ranks (2, 3) and node2"
echo "PASS [multinode]: dp 2 x pp 2 over node1 and node2 (Gloo over eth0, $sent bytes from node2), losses equal to one node; node2 lost: ppctl gone from node1 after $workers_took s, srun after $srun_took s, the job ended after $job_took s (exit code $exit_code)"

if [ "$MEASURE" -eq 1 ]; then
  echo "step | loss, two nodes | loss, one node"
  awk '{ printf "%d | %s | %s\n", NR, $1, $2 }' "$WORK/losses.tsv"
  echo "node2 lost (link cut, processes killed), comm_timeout_s $COMM_TIMEOUT_S, PPCTL_STEP_GRACE_S $GRACE_S:"
  echo "  ppctl workers gone from node1 after $workers_took s, srun after $srun_took s; job state $(job_state "$job") after $job_took s, exit code $exit_code"
  echo "--- what the job printed after the kill:"
  grep -v "| loss " "$WORK/kill.out" | tail -n 12
fi
