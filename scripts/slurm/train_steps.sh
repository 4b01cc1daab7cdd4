# The job steps of `ppctl train` inside an sbatch script, with restarts; sourced by cpu.sbatch and
# gpu.sbatch, not run by itself.
#
# ppctl_train_steps SRUN_OPTION... -- SPEC [ppctl train options]
#   Puts the rendezvous store on the first host of the job's node list (MASTER_ADDR; the port,
#   MASTER_PORT, derived from the job id as ppctl does itself when it is unset, so that concurrent jobs
#   rarely collide), then
#   runs `srun --kill-on-bad-exit=1 SRUN_OPTION... $PPCTL train SPEC ...` (--kill-on-bad-exit: one
#   failed rank ends the step instead of leaving the others waiting) and exits the script with its
#   exit code.
#   Restarts (Slurm's counterpart of train.max_restarts, which only the local launcher applies): a failed
#   step runs again with --resume (the latest checkpoint in checkpoint.dir) up to PPCTL_MAX_RESTARTS
#   times (default 0), PPCTL_RESTART_BACKOFF_S apart (default 10); exit code 2 (bad input) is final. A
#   job Slurm requeued (sbatch --requeue, after a node failure or preemption) resumes the same way.
#   A lost node (power, kernel panic, cut link): ppctl's ranks on the other nodes end within
#   runtime.comm_timeout_s, naming the ranks and the node they lost, but srun still waits for the lost
#   node's tasks until Slurm declares the node down (SlurmdTimeout, 300 s by default), then requeues the
#   job if it was submitted with --requeue. PPCTL_STEP_GRACE_S=N ends the step instead N seconds after
#   the first task failed: the job fails at once, and Slurm does not requeue it for the lost node.

# One srun, with PPCTL_STEP_GRACE_S applied: "$@" are srun's arguments; returns srun's exit code, or the
# failed task's when the step was ended after the grace period.
ppctl_run_step() {
  if [ -z "${PPCTL_STEP_GRACE_S:-}" ]; then srun "$@"; return; fi
  local failed waited=0 pid code
  failed="$(mktemp)"
  # srun's own report of the first failed task ("srun: error: NODE: tasks 0-1: Exited with exit code 1").
  srun "$@" 2> >(while IFS= read -r line; do
    printf '%s\n' "$line" >&2
    case "$line" in "srun: error: "*"Exited with exit code "*) [ -s "$failed" ] || echo "${line##* }" > "$failed" ;; esac
  done) &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    if [ -s "$failed" ] && [ $((waited += 1)) -gt "$PPCTL_STEP_GRACE_S" ]; then
      code="$(head -n 1 "$failed")"
      echo "ppctl: a task failed (exit code $code) $PPCTL_STEP_GRACE_S s ago and srun still waits for tasks that do not answer (a lost node?): ending the step (PPCTL_STEP_GRACE_S)" >&2
      kill -KILL "$pid" 2>/dev/null
      wait "$pid" 2>/dev/null
      rm -f "$failed"
      return "$code"
    fi
    sleep 1
  done
  rm -f "$failed"
  wait "$pid"
}

ppctl_train_steps() {
  local srun_options=() resume=() rc attempt
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do srun_options+=("$1"); shift; done
  shift
  MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"
  MASTER_PORT="$((20000 + SLURM_JOB_ID % 20000))"
  export MASTER_ADDR MASTER_PORT
  echo "ppctl: job $SLURM_JOB_ID, $SLURM_NTASKS tasks on $SLURM_JOB_NUM_NODES node(s), store on $MASTER_ADDR:$MASTER_PORT"
  [ "${SLURM_RESTART_COUNT:-0}" -gt 0 ] && resume=(--resume)
  for ((attempt = 0; ; attempt++)); do
    rc=0
    ppctl_run_step --kill-on-bad-exit=1 "${srun_options[@]}" "${PPCTL:-ppctl}" train "$@" "${resume[@]}" || rc=$?
    if [ "$rc" -eq 0 ] || [ "$rc" -eq 2 ] || [ "$attempt" -ge "${PPCTL_MAX_RESTARTS:-0}" ]; then exit "$rc"; fi
    echo "ppctl: the job step failed (exit code $rc): restart $((attempt + 1)) of $PPCTL_MAX_RESTARTS from the latest checkpoint"
    sleep "${PPCTL_RESTART_BACKOFF_S:-10}"
    resume=(--resume)
  done
}
