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
#   Every step runs with `--resume auto`: this run's latest checkpoint in checkpoint.dir, or step 1 when there
#   is none yet (a job preempted before its first checkpoint starts afresh; another run's checkpoint is
#   refused, exit 2).
#   Signals: the scripts ask for `--signal=USR1@120` (task level: slurmd sends SIGUSR1 to every task of the
#   step at once, 120 s before the time limit, with no batch shell in between whose traps bash runs only
#   between commands). The ranks agree on the next step boundary, write a checkpoint there and exit 75
#   (train.on_signal); the script then requeues the job (`scontrol requeue`, needs `--requeue`), which
#   resumes with --resume auto. A USR1 or USR2 sent to the batch shell only (`scancel --batch --signal=USR1`,
#   or `--signal=B:USR1@...`) is passed on to the step's tasks (scancel --signal). SIGTERM (scancel, a
#   preemption, `scontrol requeue`, the time limit) reaches every task from Slurm itself: the ranks
#   checkpoint at the next step within KillWait; the batch shell waits for them instead of dying first.
#   Restarts (Slurm's counterpart of train.max_restarts, which only the local launcher applies): a failed
#   step runs again up to PPCTL_MAX_RESTARTS times (default 0), PPCTL_RESTART_BACKOFF_S apart (default 10);
#   exit code 2 (bad input) is final, 75 (stopped on a signal with a checkpoint) requeues.
#   A lost node (power, kernel panic, cut link): ppctl's ranks on the other nodes end within
#   runtime.comm_timeout_s, naming the ranks and the node they lost, but srun still waits for the lost
#   node's tasks until Slurm declares the node down (SlurmdTimeout, 300 s by default), then requeues the
#   job if it was submitted with --requeue. PPCTL_STEP_GRACE_S=N ends the step instead N seconds after
#   the first task failed: the job fails at once, and Slurm does not requeue it for the lost node.
#   A step's exit code is its first failed task's (srun's own is the largest of all tasks').

# One srun: "$@" are srun's arguments. Returns the exit code of the first task that failed, as srun
# reports it ("srun: error: NODE: tasks 0-1: Exited with exit code 2"): srun's own exit code is the
# largest of all tasks', and the tasks it ended because of that failure exit 143, so a bad-input exit 2
# (final, never restarted) would read as a retryable 143. Else srun's exit code. With PPCTL_STEP_GRACE_S=N
# the step is ended N seconds after that report if srun still waits (a lost node's tasks).
ppctl_run_step() {
  local failed waited=0 pid rc
  failed="$(mktemp)"
  srun "$@" 2> >(while IFS= read -r line; do
    printf '%s\n' "$line" >&2
    case "$line" in "srun: error: "*"Exited with exit code "*) [ -s "$failed" ] || echo "${line##* }" > "$failed" ;; esac
  done) &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    if [ -n "${PPCTL_STEP_GRACE_S:-}" ] && [ -s "$failed" ] && [ $((waited += 1)) -gt "$PPCTL_STEP_GRACE_S" ]; then
      echo "ppctl: a task failed (exit code $(head -n 1 "$failed")) $PPCTL_STEP_GRACE_S s ago and srun still waits for tasks that do not answer (a lost node?): ending the step (PPCTL_STEP_GRACE_S)" >&2
      kill -KILL "$pid" 2>/dev/null
      break
    fi
    sleep 1
  done
  rc=0
  wait "$pid" 2>/dev/null || rc=$?
  sleep 0.1  # the last lines through the reader
  [ "$rc" -ne 0 ] && [ -s "$failed" ] && rc="$(head -n 1 "$failed")"
  rm -f "$failed"
  return "$rc"
}

# The batch shell's signals (see above): USR1/USR2 passed on to the step's tasks, TERM noted (the tasks have it).
ppctl_pass_on() {
  echo "ppctl: the batch shell got SIG$1: passing it on to the tasks of job $SLURM_JOB_ID (they checkpoint at the next step)"
  scancel --signal="$1" "$SLURM_JOB_ID" || echo "ppctl: scancel --signal=$1 failed" >&2
}

ppctl_train_steps() {
  local srun_options=() rc attempt
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do srun_options+=("$1"); shift; done
  shift
  MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"
  MASTER_PORT="$((20000 + SLURM_JOB_ID % 20000))"
  export MASTER_ADDR MASTER_PORT
  echo "ppctl: job $SLURM_JOB_ID (restart ${SLURM_RESTART_COUNT:-0}), $SLURM_NTASKS tasks on $SLURM_JOB_NUM_NODES node(s), store on $MASTER_ADDR:$MASTER_PORT"
  trap 'ppctl_pass_on USR1' USR1
  trap 'ppctl_pass_on USR2' USR2
  trap 'echo "ppctl: the batch shell got SIGTERM: waiting for the tasks, which got it too, to checkpoint"' TERM
  # srun does not inherit sbatch's --cpus-per-task since Slurm 22.05: pass it on.
  [ -n "${SLURM_CPUS_PER_TASK:-}" ] && srun_options+=(--cpus-per-task="$SLURM_CPUS_PER_TASK")
  for ((attempt = 0; ; attempt++)); do
    rc=0
    ppctl_run_step --kill-on-bad-exit=1 "${srun_options[@]}" "${PPCTL:-ppctl}" train "$@" --resume auto || rc=$?
    if [ "$rc" -eq 75 ]; then
      echo "ppctl: the tasks stopped on a signal with a checkpoint (exit code 75): requeueing job $SLURM_JOB_ID, which resumes it"
      scontrol requeue "$SLURM_JOB_ID" \
        || echo "ppctl: scontrol requeue $SLURM_JOB_ID failed (fix: submit with --requeue, or submit again: --resume auto continues)" >&2
      exit 75
    fi
    if [ "$rc" -eq 0 ] || [ "$rc" -eq 2 ] || [ "$attempt" -ge "${PPCTL_MAX_RESTARTS:-0}" ]; then exit "$rc"; fi
    echo "ppctl: the job step failed (exit code $rc): restart $((attempt + 1)) of $PPCTL_MAX_RESTARTS from the latest checkpoint"
    sleep "${PPCTL_RESTART_BACKOFF_S:-10}"
  done
}

