#!/usr/bin/env bash
# End-to-end tests of `ppctl train` under the local launcher: losses, evaluation, blends and resuming,
# the run directory (metrics, logs, merged trace), the progress line and tied embeddings.
# Usage: cli_train.sh CASE PPCTL_BINARY (exits non-zero on failure). Helpers: tests/app/cli_lib.sh.
# shellcheck source=cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh" "$@"

case "$CASE" in
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
    python3 "$ROOT/tests/support/trace_nesting.py" "$WORK/run/trace.json" "$WORK/run/trace.simulated.json" \
      || fail "slices do not nest in the traces as Perfetto reads them"
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
  dp_records)
    # dp 2 x pp 2: only replica 0 writes metrics and traces. Its records say so and use the global ranks the
    # rank logs use (replica 0's pipeline is global ranks 0 and 2): the end record's peak_memory_bytes has a
    # `ranks` list, the trace's tracks and the SVG rows are named by global rank.
    tiny_job 2 3 "observe: {trace_steps: 3}"
    sed -i 's/micro_batch_size: 4}/micro_batch_size: 4, data_parallel: 2}/' "$WORK/job.yaml"
    timeout 300 "$PPCTL" train "$WORK/job.yaml" --run-dir "$WORK/run" > "$WORK/out" 2>&1 || fail "train exited $?"
    grep -q "trace of replica 0's 2 pipeline ranks (the 2 replicas run the same schedule)" "$WORK/out" \
      || fail "the trace line does not say whose ranks it holds"
    grep -q "\[rank 2\] info: peak memory of replica 0's pipeline, global ranks 0, 2" "$WORK/out" \
      || fail "the peak memory line does not name the global ranks"
    "$PPCTL" plan "$WORK/job.yaml" --svg "$WORK/dp.svg" --svg-from "$WORK/run" > /dev/null 2>&1 || fail "plan --svg-from exited $?"
    python3 - "$WORK" <<'PY' || fail "the records do not name the global ranks"
import json, sys
work = sys.argv[1]
end = [json.loads(l) for l in open(f"{work}/run/metrics.jsonl")][-1]
assert end["event"] == "end" and end["ranks"] == [0, 2] and len(end["peak_memory_bytes"]) == 2, end
events = json.load(open(f"{work}/run/trace.json"))["traceEvents"]
names = {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name"}
assert names[0] == "rank 0 (pipeline rank 0 of replica 0)" and names[1] == "rank 2 (pipeline rank 1 of replica 0)", names
svg = open(f"{work}/dp.svg").read()
assert "rank 2 (pipeline rank 1 of replica 0)" in svg, svg[:500]
for rank in (0, 1, 2, 3):  # every worker's log, by global rank
    assert f"[rank {rank}] info: " in open(f"{work}/out").read(), rank
PY
    no_leftovers
    ;;
  checkpoint_dir_reused)
    # A fresh start into a checkpoint.dir that holds an earlier run's checkpoints is warned about, naming the
    # latest and the fixes; --resume auto (continuing it) is not.
    tiny_job 2 2 "checkpoint: {dir: ckpt}"
    timeout 300 "$PPCTL" train "$WORK/job.yaml" > "$WORK/out" 2>&1 || fail "first train exited $?"
    grep -q "already holds checkpoints" "$WORK/out" && fail "warned on an empty checkpoint.dir"
    timeout 300 "$PPCTL" train "$WORK/job.yaml" > "$WORK/out" 2>&1 || fail "second train exited $?"
    grep -q "checkpoint.dir $WORK/ckpt already holds checkpoints of an earlier run (latest: step-0*2); this run starts at step 1" \
      "$WORK/out" || { cat "$WORK/out" >&2; fail "no warning for a fresh start into a used checkpoint.dir"; }
    timeout 300 "$PPCTL" train "$WORK/job.yaml" --resume auto --steps 3 > "$WORK/out" 2>&1 || fail "--resume auto exited $?"
    grep -q "already holds checkpoints" "$WORK/out" && fail "warned when continuing with --resume auto"
    no_leftovers
    ;;
  *) fail "unknown case" ;;
esac
echo "PASS [$CASE]"
