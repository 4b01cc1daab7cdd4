#!/usr/bin/env bash
# End-to-end tests of `ppctl plan` and `ppctl verify` as a user runs them: the plan's tables and trace,
# cost options, schedules (zb-auto, a custom CSV), stage layouts and per-layer costs, and the oracle.
# Usage: cli_plan.sh CASE PPCTL_BINARY (exits non-zero on failure). Helpers: tests/app/cli_lib.sh.
# shellcheck source=cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh" "$@"

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
    python3 "$ROOT/tests/support/trace_nesting.py" "$WORK/trace.json" || fail "slices of the plan's trace do not nest"
    ;;
  plan_svg)
    # The timeline as SVG: the simulated step of the example (well-formed, one box per action), and a measured
    # step of a traced run (--svg-from), with clear refusals for a folder without a trace or an untraced step.
    "$PPCTL" plan "$ROOT/configs/example.yaml" --svg "$WORK/plan.svg" > "$WORK/out" 2>&1 || fail "plan --svg exited $?"
    grep -q "timeline drawn to $WORK/plan.svg" "$WORK/out" || fail "plan does not say where the picture went"
    tiny_job 2 3 "observe: {trace_steps: 3}"
    "$PPCTL" train "$WORK/job.yaml" --run-dir "$WORK/run" > "$WORK/train.out" 2>&1 || fail "train exited $?"
    "$PPCTL" plan "$WORK/job.yaml" --svg "$WORK/measured.svg" --svg-from "$WORK/run" > "$WORK/out" 2>&1 \
      || fail "plan --svg-from exited $?"
    "$PPCTL" plan "$WORK/job.yaml" --svg "$WORK/step1.svg" --svg-from "$WORK/run" --svg-step 1 > "$WORK/out" 2>&1 \
      || fail "plan --svg-step 1 exited $?"
    python3 - "$WORK" <<'PY' || fail "the SVG timelines are not what was planned and traced"
import re, sys, xml.etree.ElementTree as ET
work = sys.argv[1]
ns = "{http://www.w3.org/2000/svg}"
def boxes(name):
    root = ET.parse(f"{work}/{name}").getroot()  # well-formed XML, or this raises
    titles = [t.text for t in root.iter(ns + "title")]
    return root, [t for t in titles if re.match(r"^[0-9]+[FBIW][0-9]+ ", t)]
root, plan = boxes("plan.svg")
assert len(plan) == 4 * 8 * 2, len(plan)  # F and B per stage and microbatch
assert "simulated step 33.00 ms" in ET.tostring(root, encoding="unicode")
for name, step in (("measured.svg", 3), ("step1.svg", 1)):
    root, measured = boxes(name)
    text = ET.tostring(root, encoding="unicode")
    assert f"step {step} measured" in text, (name, text[:300])
    assert len(measured) == 2 * 4 * 2, (name, len(measured))  # 2 stages x 4 microbatches x F, B
PY
    "$PPCTL" plan "$WORK/job.yaml" --svg "$WORK/x.svg" --svg-from "$WORK" > "$WORK/out" 2>&1
    [ $? -eq 2 ] || fail "--svg-from a folder without trace.json did not exit 2"
    grep -q "no trace.json in it" "$WORK/out" || fail "no reason for the refused --svg-from"
    "$PPCTL" plan "$WORK/job.yaml" --svg "$WORK/x.svg" --svg-from "$WORK/run" --svg-step 9 > "$WORK/out" 2>&1
    [ $? -eq 2 ] || fail "an untraced --svg-step did not exit 2"
    grep -q "step 9 is not traced (the trace holds steps 1, 2, 3;" "$WORK/out" || fail "no list of the traced steps"
    [ ! -e "$WORK/x.svg" ] || fail "a refused --svg wrote a file"
    # Each bad --svg / --svg-from / --svg-step is refused before anything is written, naming it and a fix; the
    # spec, the trace read and the --trace file are never overwritten.
    cp "$WORK/run/trace.json" "$WORK/trace.before"
    mkfifo "$WORK/fifo.svg"
    head -c 2000 "$WORK/run/trace.json" > "$WORK/cut.json"; mkdir -p "$WORK/cut"; cp "$WORK/cut.json" "$WORK/cut/trace.json"
    while IFS='|' read -r args needle; do
      # shellcheck disable=SC2086  # $args: several words
      eval "\"\$PPCTL\" plan \"\$WORK/job.yaml\" $args" > "$WORK/out" 2>&1; rc=$?
      [ "$rc" -eq 2 ] || fail "plan $args: exit $rc, expected 2"
      needle="${needle//\$WORK/$WORK}"
      grep -qF -- "$needle" "$WORK/out" || { cat "$WORK/out" >&2; fail "plan $args: no '$needle'"; }
    done <<'CASES'
--svg "$WORK/job.yaml"|the picture is SVG, but the name ends in '.yaml'
--svg "$WORK/pic.png"|(fix: name it $WORK/pic.svg)
--svg "$WORK/run/trace.svg" --trace "$WORK/run/trace.svg"|is the --trace file
--svg "$WORK/x.svg" --svg-from ""|the run directory is empty
--svg "$WORK/x.svg" --svg-from "$WORK/none"|no such folder
--svg "$WORK/x.svg" --svg-from "$WORK/run/trace.json"|a file, not a run directory (fix: give the folder holding it: --svg-from $WORK/run)
--svg "$WORK/x.svg" --svg-from "$WORK/cut"|not valid JSON, truncated or corrupt
--svg "$WORK/x.svg" --svg-from "$WORK/run" --svg-step 1e3|--svg-step
--svg "$WORK"|is a folder (fix: name a file, e.g. $WORK/plan.svg)
--svg "$WORK/fifo.svg"|is a device, FIFO or socket, which writing the file would replace
CASES
    cmp -s "$WORK/trace.before" "$WORK/run/trace.json" || fail "a refused --svg changed the run's trace"
    [ ! -e "$WORK/x.svg" ] && [ ! -e "$WORK/pic.png" ] || fail "a refused --svg wrote a file"
    head -c 5 "$WORK/job.yaml" | grep -q "model" || fail "the spec was overwritten"
    [ -p "$WORK/fifo.svg" ] || fail "a FIFO given as --svg was replaced"
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
    # Every number option takes plain decimal only: hexadecimal (strtod alone reads 0x5 as 5), inf, a leading
    # space and a control character are refused, exit 2, naming the option and the value (escaped).
    for option in --costs --p2p-latency --defer-penalty --grad-reduce-ms --tp-collective-ms --tp-bandwidth --tflops; do
      for bad in 0x5 inf " 1" $'1\e[31m'; do
        code=0; "$PPCTL" plan "$ROOT/configs/example.yaml" "$option" "$bad" > "$WORK/out" 2>&1 || code=$?
        [ "$code" -eq 2 ] || fail "$option '$bad': exit $code, expected 2"
        grep -q -- "$option" "$WORK/out" && grep -q "must be a number written in decimal" "$WORK/out" \
          || fail "$option '$bad': the message does not name the option and the rule"
        if grep -q $'\e' "$WORK/out"; then fail "$option: a control character reached the terminal raw"; fi
      done
    done
    "$PPCTL" plan "$ROOT/configs/example.yaml" --p2p-latency 2.5e-1 --defer-penalty .5 > "$WORK/out" 2>&1 \
      || fail "plain decimal numbers refused"
    ;;
  plan_tp_comm)
    # The tensor-parallel collectives in the simulated step: the 'tp comm' line says the count and the cost of one;
    # a costlier collective lengthens the step; measured --costs hold them unless --tp-collective-ms is given;
    # --tune ranks with them (a costly one puts tp 1 first); bad values exit 2 naming the option, value and rule.
    step_of() { sed -n 's/^simulated  step \([0-9.]*\) ms.*/\1/p' "$1"; }
    tiny_job 2 1 ""
    sed -i 's/pipeline: {stages: 2,/pipeline: {stages: 2, tensor_parallel: 2,/' "$WORK/job.yaml"
    "$PPCTL" plan "$WORK/job.yaml" > "$WORK/out" 2>&1 || fail "plan exited $?"
    grep -q "^tp comm    tp 2 with sequence parallelism: per block and microbatch F 2 all-gathers + 2 reduce-scatters, B and I 2 all-gathers + 2 reduce-scatters; one all-reduce of a microbatch's activations (4 x 32 x 32 fp32, 16.0 KiB) .* ms (the ring's 2(t-1)/t of its bytes at 450 GB/s, --tp-bandwidth); added to each stage's F, B and I by its count, in units of its forward (F = 1: its FLOPs at 400 TFLOP/s, --tflops)" "$WORK/out" \
      || fail "no tp comm line: $(grep -m1 '^tp comm' "$WORK/out")"
    "$PPCTL" plan "$WORK/job.yaml" --tp-collective-ms 0 > "$WORK/free" 2>&1 || fail "plan --tp-collective-ms 0 exited $?"
    [ "$(step_of "$WORK/free")" = "15.00" ] || fail "free collectives: step $(step_of "$WORK/free"), expected 15.00"
    "$PPCTL" plan "$WORK/job.yaml" --tp-collective-ms 0.001 > "$WORK/costly" 2>&1 || fail "plan --tp-collective-ms exited $?"
    awk -v a="$(step_of "$WORK/free")" -v b="$(step_of "$WORK/costly")" 'BEGIN { exit !(b > a) }' \
      || fail "a costlier collective did not lengthen the step: $(step_of "$WORK/costly")"
    grep -q "(--tp-collective-ms 0.001 at micro_batch_size 4)" "$WORK/costly" || fail "the given cost is not named"
    "$PPCTL" plan "$WORK/job.yaml" --costs 1,2,1,1 > "$WORK/out" 2>&1 || fail "plan --costs exited $?"
    grep -q "not added: measured costs hold the spec's collectives (--tp-collective-ms MS adds them)" "$WORK/out" \
      || fail "measured costs: $(grep -m1 '^tp comm' "$WORK/out")"
    grep -q "simulated  step 15.00 ms" "$WORK/out" || fail "measured costs changed by the tp term"
    sed -i 's/tensor_parallel: 2,/data_parallel: 4,/' "$WORK/job.yaml"
    # At tp 1 the options have nothing to cost: the plan says so rather than drop them silently.
    "$PPCTL" plan "$WORK/job.yaml" --tp-bandwidth 10 > "$WORK/out" 2>&1 || fail "plan --tp-bandwidth at tp 1 exited $?"
    grep -q "^tp comm    none at tensor_parallel 1: --tp-collective-ms, --tp-bandwidth and --tflops cost" "$WORK/out" \
      || fail "tp 1: no note that the tp options do nothing: $(grep -m1 '^tp comm' "$WORK/out")"
    "$PPCTL" plan "$WORK/job.yaml" > "$WORK/out" 2>&1 || fail "plan at tp 1 exited $?"
    grep -q "^tp comm" "$WORK/out" && fail "tp 1 without the options: a tp comm line"
    "$PPCTL" plan "$WORK/job.yaml" --tune > "$WORK/out" 2>&1 || fail "plan --tune exited $?"
    grep -q "^tp comm   at the largest tp searched, tp 4 with sequence parallelism: .*; one all-reduce in units of one block's forward at micro_batch_size 4 (in proportion to it): tp 2 [0-9.e-]*, tp 4 [0-9.e-]*; added to F, B and I by their counts" "$WORK/out" \
      || fail "--tune: no tp comm line: $(grep -m1 '^tp comm' "$WORK/out")"
    "$PPCTL" plan "$WORK/job.yaml" --tune --tp-collective-ms 0 > "$WORK/out" 2>&1 || fail "plan --tune --tp-collective-ms 0 exited $?"
    grep "^ 1\. step" "$WORK/out" | grep -q ", tp [24] x dp [12]$" || fail "free collectives: tp 1 first"
    "$PPCTL" plan "$WORK/job.yaml" --tune --tp-collective-ms 1 > "$WORK/out" 2>&1 || fail "plan --tune --tp-collective-ms 1 exited $?"
    if grep "^ 1\. step" "$WORK/out" | grep -q ", tp [0-9]* x dp"; then fail "a costly collective left tp > 1 first"; fi
    for bad in "--tp-bandwidth 0|--tp-bandwidth: 0 must be at least 0.001" "--tflops -5|--tflops: -5 must be at least 0.001" \
               "--tp-collective-ms -1|--tp-collective-ms: -1 must be at least 0" \
               "--tp-collective-ms 1e300|--tp-collective-ms: 1e300 must be at most 1e+09" \
               "--tp-bandwidth 1e-300|--tp-bandwidth: 1e-300 must be at least 0.001" \
               "--tflops 1e300|--tflops: 1e300 must be at most 1e+06" \
               "--tp-collective-ms 1e400|--tp-collective-ms: value 1e400: out of range (fix: a number of at most 1e+09)" \
               "--p2p-latency 1e300|--p2p-latency: 1e300 must be at most 1e+09" \
               "--grad-reduce-ms 1e300|--grad-reduce-ms: 1e300 must be at most 1e+09"; do
      code=0; "$PPCTL" plan "$WORK/job.yaml" ${bad%%|*} > "$WORK/out" 2>&1 || code=$?
      [ "$code" -eq 2 ] || fail "${bad%%|*}: exit $code, expected 2"
      grep -q -- "${bad#*|}" "$WORK/out" || fail "${bad%%|*}: the message does not name the option, value and rule"
    done
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
  zb_auto)
    # zb-auto: plan says which costs it placed W with and how each rank placed them; a penalty above any
    # step keeps every W right after its I; verify passes (the job's workers build the same program); a B
    # (b) below I + W runs 1F1B's unsplit program.
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
    # An unsplit backward B cheaper than I then W (b): 1F1B's program is chosen (every rank runs 6 x
    # (F + I + W) = 18 ms split, 1F1B 9 x (F + B) = 16.2 ms); plan says so, verify passes, training runs.
    sed -i 's/zb_auto: {i: \[1, 2\]}/zb_auto: {f: 1, i: 1, w: 1, b: 0.8}/' "$WORK/job.yaml"
    "$PPCTL" plan "$WORK/job.yaml" > "$WORK/out" 2>&1 || fail "plan with b exited $?"
    grep -q "^zb-auto: W placed for F 1, I 1, W 1, B 0.8 ms per stage" "$WORK/out" \
      || fail "plan does not show the B cost: $(grep '^zb-auto' "$WORK/out")"
    grep -Eq "^  chosen of [0-9]+ placements simulated: 1F1B \(the backward not split\)" "$WORK/out" \
      || fail "1F1B not chosen with B below I + W: $(grep 'chosen of' "$WORK/out")"
    grep -q "^  no W: every backward runs unsplit (B)" "$WORK/out" || fail "plan does not say the backward is unsplit"
    verify_passes "$WORK/job.yaml" "(loss)"
    timeout 300 "$PPCTL" train "$WORK/job.yaml" > "$WORK/out" 2>&1 || fail "train with b exited $?"
    grep -q "step 1/1 | loss [0-9.]*" "$WORK/out" || fail "no loss line for the zb-auto run with b"
    no_leftovers
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
  *) fail "unknown case" ;;
esac
echo "PASS [$CASE]"
