#!/usr/bin/env bash
# Issue 5's acceptance run: the example job with recomputation, clipping, warmup + cosine, eval and
# checkpoints every 100 steps, trained (a) uninterrupted, (b) SIGKILLed at a random step and resumed
# with the same 4 stages, (c) killed and resumed with 2 stages. Prints each run's logged losses side
# by side (every 25th step and every eval). Usage: scripts/bench/resume_example.sh [PPCTL_BINARY]   (about 8 minutes on 2 cores)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PPCTL="${1:-$ROOT/build/app/ppctl}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/ppctl_resume_XXXXXX")"
trap 'pkill -KILL -f "$WORK/" 2>/dev/null || true' EXIT

# $1 = name, $2 = stages: the example plus the issue's training-step features.
spec() {
  mkdir -p "$WORK/$1"
  sed -e "s/^  stages: 4/  stages: $2/" -e 's/^  log_interval: 25/  log_interval: 1\n  recompute: full/' \
      -e 's/^  weight_decay: 0.1/  weight_decay: 0.1\n  lr_schedule: cosine\n  warmup_steps: 30\n  min_lr: 0.0002\n  clip_grad_norm: 1.0/' \
      -e 's|^  path: \(.*\)|  path: \1\n  eval_fraction: 0.02|' \
      -e '/^checkpoint:/,/^$/d' "$ROOT/configs/example.yaml" > "$WORK/$1/job.yaml"
  printf 'eval: {interval: 100, batches: 4}\ncheckpoint: {dir: ckpt, interval: 100, keep: 3}\n' >> "$WORK/$1/job.yaml"
}

# $1 = name: train in the background, SIGKILL the whole job at a random step in (110, 290).
train_and_kill() {
  local kill_at=$((110 + RANDOM % 180))
  "$PPCTL" train "$WORK/$1/job.yaml" > "$WORK/$1/first.log" 2>&1 &
  local launcher=$!
  until grep -q "step $kill_at/300" "$WORK/$1/first.log" 2>/dev/null; do
    kill -0 "$launcher" 2>/dev/null || { echo "run $1 ended before step $kill_at" >&2; exit 1; }
    sleep 0.05
  done
  kill -KILL "$launcher"
  wait "$launcher" 2>/dev/null || true
  echo "$1: killed at step $kill_at; latest checkpoint: $(cat "$WORK/$1/ckpt/latest")" >&2
}

spec whole 4
spec same 4
spec regroup 4
"$PPCTL" train "$WORK/whole/job.yaml" > "$WORK/whole/run.log" 2>&1
train_and_kill same
"$PPCTL" train "$WORK/same/job.yaml" --resume > "$WORK/same/run.log" 2>&1
train_and_kill regroup
sed -i 's/^  stages: 4/  stages: 2/' "$WORK/regroup/job.yaml"
"$PPCTL" train "$WORK/regroup/job.yaml" --resume > "$WORK/regroup/run.log" 2>&1

echo "| logged line | uninterrupted (4 stages) | killed, resumed at 4 stages | killed, resumed at 2 stages |"
echo "|---|---|---|---|"
grep -o "step [0-9]*[05]0/300 | loss [0-9.]*\|step [0-9]*[27]5/300 | loss [0-9.]*\|eval after step [0-9]*: loss [0-9.]*" "$WORK/whole/run.log" |
  while read -r line; do
    key="${line% [0-9.]*}"
    value="${line##* }"
    same=$(grep -o "$key [0-9.]*" "$WORK/same/run.log" | head -1 | awk '{print $NF}' || true)
    regroup=$(grep -o "$key [0-9.]*" "$WORK/regroup/run.log" | head -1 | awk '{print $NF}' || true)
    echo "| ${key%| loss} | $value | ${same:--} | ${regroup:--} |"
  done
for run in whole same regroup; do
  grep "memory: max resident" "$WORK/$run/run.log" | sed "s/^/$run: /" >&2
done
echo "logs: $WORK" >&2
