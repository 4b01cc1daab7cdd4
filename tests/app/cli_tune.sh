#!/usr/bin/env bash
# End-to-end test of `ppctl plan --tune` (issue 27 item 2), as a user runs it. Usage: cli_tune.sh PPCTL_BINARY
# Checks: two runs print the same; the first configuration's YAML lines, merged into the spec, give the same
# simulated step under plain `ppctl plan --layer-costs` (the costs file scaled to its micro batch size, as the
# tuner states); --memory-gib: every listed peak within it, some ruled out and counted, exit 4 when nothing
# fits; bad --memory-gib values refused with exit 2 naming the option; calibrated on two probe run directories,
# the spec's own configuration predicted at its probe's measured step. Needs PyYAML (the venv's python,
# PPCTL_PYTHON, has it; python3 otherwise); the lines are
# applied by scripts/bench/tuner.py's merged(), as the benchmark applies them.
set -uo pipefail
PPCTL="$1"
PY="${PPCTL_PYTHON:-python3}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/ppctl_cli_tune_XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
cd "$WORK" || exit 1

fail() { echo "FAIL [tune]: $*" >&2; [ -f "$WORK/out" ] && sed 's/^/  | /' "$WORK/out" >&2; exit 1; }

for i in $(seq 1 300); do echo "line $i: pack my box with five dozen liquor jugs"; done > corpus.txt
cat > job.yaml <<'YAML'
model: {layers: 8, hidden: 32, heads: 4, seq_len: 32}
pipeline: {stages: 4, schedule: 1f1b, microbatches: 4, micro_batch_size: 4}
data: {path: corpus.txt}
YAML
cat > costs.json <<'JSON'
{"blocks": [{"forward_ms": 1.0, "backward_ms": 2.0}, {"forward_ms": 1.5, "backward_ms": 3.1},
            {"forward_ms": 1.0, "backward_ms": 2.0}, {"forward_ms": 1.2, "backward_ms": 2.5},
            {"forward_ms": 1.0, "backward_ms": 2.0}, {"forward_ms": 1.0, "backward_ms": 2.2},
            {"forward_ms": 0.9, "backward_ms": 1.9}, {"forward_ms": 1.0, "backward_ms": 2.0}],
 "embedding": {"forward_ms": 0.1, "backward_ms": 0.3}, "head": {"forward_ms": 2.5, "backward_ms": 4.0}}
JSON

# Deterministic: two runs, the same text.
"$PPCTL" plan job.yaml --tune --layer-costs costs.json > out 2>&1 || fail "plan --tune exited $?"
"$PPCTL" plan job.yaml --tune --layer-costs costs.json > again 2>&1 || fail "second plan --tune exited $?"
cmp -s out again || fail "two runs printed different text: $(diff out again | head -5)"
grep -q "^ 1\. step " out || fail "no first configuration listed"
grep -q "^ 5\. step " out || fail "fewer than 5 configurations listed"
grep -q "the spec's own configuration (1f1b, m 4 x mbs 4" out || fail "the spec's own configuration is not ranked"
grep -q "candidates:.*simulated" out || fail "no summary of the candidates"

# The first configuration's lines merged into the spec: plain plan prints the step the tuner printed.
"$PY" - "$ROOT/scripts/bench" out job.yaml costs.json first.yaml first_costs.json <<'PY' || fail "could not apply the first configuration"
import json, sys, yaml
sys.path.insert(0, sys.argv[1])
from tuner import listed_configurations, merged  # what the benchmark applies, the same way
out, spec_path, costs_path, new_spec, new_costs = sys.argv[2:]
*_, block = listed_configurations(open(out).read())[0]
spec = merged(yaml.safe_load(open(spec_path)), block)
yaml.safe_dump(spec, open(new_spec, "w"))
factor = spec["pipeline"]["micro_batch_size"] / 4
costs = json.load(open(costs_path))
def scale(piece):
    return {k: v * factor for k, v in piece.items()}
costs = {"blocks": [scale(b) for b in costs["blocks"]], "embedding": scale(costs["embedding"]), "head": scale(costs["head"])}
json.dump(costs, open(new_costs, "w"))
PY
want="$("$PY" -c 'import re,sys; print(re.search(r"^ 1\. step ([0-9.]+),", open("out").read(), re.M).group(1))')"
"$PPCTL" plan first.yaml --layer-costs first_costs.json > plain 2>&1 || { cp plain out; fail "plain plan of the first configuration exited $?"; }
grep -q "^simulated  step $want ms" plain || { cp plain out; fail "plain plan does not print step $want ms"; }

# --memory-gib just below the smallest peak listed without a limit: every listed peak within it, some counted out.
cat > peaks.py <<'PY'
import re
UNITS = {"KiB": 2.0 ** -20, "MiB": 2.0 ** -10, "GiB": 1.0}
def peaks(path):
    """The peak per rank of every listed configuration, GiB."""
    found = re.findall(r"^ *[0-9]+\. step .* peak ([0-9.]+) (KiB|MiB|GiB) per rank", open(path).read(), re.M)
    return [float(x) * UNITS[unit] for x, unit in found]
PY
limit="$("$PY" -c 'import peaks; print("%.6f" % (min(peaks.peaks("out")) * 0.999))')"
"$PPCTL" plan job.yaml --tune --layer-costs costs.json --memory-gib "$limit" > out 2>&1
code=$?
if [ "$code" -eq 0 ]; then
  "$PY" - "$limit" <<'PY' || fail "a listed peak is above --memory-gib $limit"
import sys, peaks
listed = peaks.peaks("out")
assert listed and all(p <= float(sys.argv[1]) * 1.001 for p in listed), listed  # printed with 2 decimals
PY
  grep -Eq "^ +[0-9]+  does not fit .* GiB per rank" out || fail "the configurations over --memory-gib $limit are not counted"
elif [ "$code" -eq 4 ]; then
  grep -q "no configuration fits" out || fail "exit 4 without saying that nothing fits"
else
  fail "plan --tune --memory-gib $limit exited $code"
fi

# A limit nothing fits: exit 4, said clearly.
"$PPCTL" plan job.yaml --tune --memory-gib 0.000001 > out 2>&1
code=$?
[ "$code" -eq 4 ] || fail "a limit nothing fits exited $code, not 4"
grep -q "no configuration fits" out || fail "a limit nothing fits is not said"

# Bad values: exit 2, naming the option (0x5 is hexadecimal, which strtod alone would take as 5).
for bad in 0 -1 nan abc 0x5 " 2" 1e999; do
  "$PPCTL" plan job.yaml --tune --memory-gib "$bad" > out 2>&1
  code=$?
  [ "$code" -eq 2 ] || fail "--memory-gib $bad exited $code, not 2"
  grep -q -- "--memory-gib" out || fail "--memory-gib $bad: the message does not name the option"
done
# --memory-gib means nothing without --tune.
"$PPCTL" plan job.yaml --memory-gib 10 > out 2>&1
[ $? -eq 2 ] || fail "--memory-gib without --tune was accepted"

# One probe: the proportional model, said to ignore fixed per-action costs, with how to give a second.
"$PPCTL" plan job.yaml --tune --layer-costs costs.json > out 2>&1 || fail "plan --tune with one probe exited $?"
grep -q "taken as proportional to it: this ignores each action's fixed cost" out || fail "one probe: the model's limit is not said"
grep -q "give --layer-costs twice" out || fail "one probe: how to give a second probe is not said"

# Two probes (costs files at micro_batch_size 1 and 4, a fixed part per action): the affine fit, said; the
# first configuration's lines under plain plan with the fitted times at its micro batch size (a + c x mbs,
# or the probe's own times at a probed size) print the step the tuner printed.
"$PY" - costs.json costs_mbs1.json <<'PY' || fail "could not write the second probe"
import json, sys
costs = json.load(open(sys.argv[1]))
def at_one(piece):  # a fixed 0.5 ms per action plus a quarter of the per-sequence part at mbs 4
    return {k: 0.5 + (v - 0.5) / 4 for k, v in piece.items()}
json.dump({"blocks": [at_one(b) for b in costs["blocks"]], "embedding": at_one(costs["embedding"]),
           "head": at_one(costs["head"]), "micro_batch_size": 1}, open(sys.argv[2], "w"))
PY
"$PPCTL" plan job.yaml --tune --layer-costs costs.json --layer-costs costs_mbs1.json > out 2>&1 || fail "two probes exited $?"
"$PPCTL" plan job.yaml --tune --layer-costs costs_mbs1.json --layer-costs costs.json > again 2>&1 || fail "two probes swapped exited $?"
sed 's/costs_mbs1.json (micro_batch_size 1) and costs file costs.json (micro_batch_size 4)/X/; s/costs.json (micro_batch_size 4) and costs file costs_mbs1.json (micro_batch_size 1)/X/' out > out.n
sed 's/costs_mbs1.json (micro_batch_size 1) and costs file costs.json (micro_batch_size 4)/X/; s/costs.json (micro_batch_size 4) and costs file costs_mbs1.json (micro_batch_size 1)/X/' again > again.n
cmp -s out.n again.n || fail "the probes' order changed the result: $(diff out.n again.n | head -5)"
grep -q "fitted as a + c x micro_batch_size through the probes at micro_batch_size 1 and 4" out || fail "two probes: the fit is not said"
grep -q "^ 1\. step " out || fail "two probes: no configuration listed"
grep -Eq "^ +[0-9]+  micro_batch_size outside 1-8 \(the probed 1-4, with a margin of x2" out || fail "two probes: mbs 16 not ruled out"
if grep -q "x mbs 16," out; then fail "two probes: a candidate at mbs 16 (beyond the margin) was listed"; fi
"$PY" - "$ROOT/scripts/bench" out job.yaml costs.json costs_mbs1.json first.yaml first_costs.json <<'PY' || fail "could not apply the first configuration (two probes)"
import json, sys, yaml
sys.path.insert(0, sys.argv[1])
from tuner import listed_configurations, merged
out, spec_path, at4, at1, new_spec, new_costs = sys.argv[2:]
*_, block = listed_configurations(open(out).read())[0]
spec = merged(yaml.safe_load(open(spec_path)), block)
yaml.safe_dump(spec, open(new_spec, "w"))
b = spec["pipeline"]["micro_batch_size"]
hi, lo = json.load(open(at4)), json.load(open(at1))
def fit(h, l):  # the tuner's fit: c = (t4 - t1) / 3, a = t1 - c; a probe's own times at its size
    if b in (1, 4):
        return dict(l if b == 1 else h)
    out = {}
    for k in h:
        c = (h[k] - l[k]) / 3
        out[k] = (l[k] - c * 1) + c * b
    return out
json.dump({"blocks": [fit(h, l) for h, l in zip(hi["blocks"], lo["blocks"])], "embedding": fit(hi["embedding"], lo["embedding"]),
           "head": fit(hi["head"], lo["head"])}, open(new_costs, "w"))
PY
want="$("$PY" -c 'import re,sys; print(re.search(r"^ 1\. step ([0-9.]+),", open("out").read(), re.M).group(1))')"
"$PPCTL" plan first.yaml --layer-costs first_costs.json > plain 2>&1 || { cp plain out; fail "plain plan of the first configuration (two probes) exited $?"; }
grep -q "^simulated  step $want ms" plain || { cp plain out; fail "two probes: plain plan does not print step $want ms"; }

# Bad probe pairs: exit 2 with the rule named.
"$PPCTL" plan job.yaml --tune --layer-costs costs.json --layer-costs costs.json > out 2>&1
[ $? -eq 2 ] || fail "two probes at one micro batch size were accepted"
grep -q "two different positive micro batch sizes" out || fail "two probes at one size: the rule is not said"
"$PY" -c 'import json; c = json.load(open("costs.json")); c["blocks"].pop(); c["micro_batch_size"] = 1; json.dump(c, open("seven.json", "w"))'
"$PPCTL" plan job.yaml --tune --layer-costs costs.json --layer-costs seven.json > out 2>&1
[ $? -eq 2 ] || fail "a probe of another layer count was accepted"
grep -q "seven.json: blocks: 7 entries, but model.layers is 8" out || fail "a probe of another layer count: not named"
"$PPCTL" plan job.yaml --tune --layer-costs costs.json --layer-costs costs_mbs1.json --layer-costs costs.json > out 2>&1
[ $? -eq 2 ] || fail "three --layer-costs were accepted"
grep -q -- "--layer-costs given 3 times" out || fail "three --layer-costs: not said"
"$PPCTL" plan job.yaml --layer-costs costs.json --layer-costs costs_mbs1.json > out 2>&1
[ $? -eq 2 ] || fail "two --layer-costs without --tune were accepted"
"$PPCTL" plan job.yaml --layer-costs costs_mbs1.json > out 2>&1
[ $? -eq 2 ] || fail "a costs file at another micro batch size was accepted by plain plan"
grep -q "micro_batch_size 1, but the spec's pipeline.micro_batch_size is 4" out || fail "plain plan: the costs file's size is not named"

# Calibrated on two probe runs (run directories with metrics.jsonl): the fit is printed with each probe's
# measured step (metrics.jsonl's median) and simulated step, every listed configuration has a predicted step, and
# the spec's own configuration (the first probe's) is predicted at that probe's measured step (or, when the probes
# disagree and the per-action part is clamped, at its simulated step plus their mean difference).
cat > probe.yaml <<'YAML'
model: {layers: 4, hidden: 32, heads: 4, seq_len: 32}
pipeline: {stages: 2, schedule: 1f1b, microbatches: 2, micro_batch_size: 4}
data: {path: corpus.txt}
train: {steps: 5}
observe: {trace_steps: 4, tensorboard: false}
YAML
sed 's/microbatches: 2, micro_batch_size: 4/microbatches: 8, micro_batch_size: 1/' probe.yaml > probe1.yaml
"$PPCTL" train probe.yaml --run-dir run4 > out 2>&1 || fail "the probe run at mbs 4 exited $?"
"$PPCTL" train probe1.yaml --run-dir run1 > out 2>&1 || fail "the probe run at mbs 1 exited $?"
"$PPCTL" plan probe.yaml --tune --layer-costs run4 --layer-costs run1 > out 2>&1 || fail "plan --tune on two runs exited $?"
grep -q "^calibrated predicted step = simulated step .* (run4 (mbs 4, 4 compute actions on the busiest rank): measured [0-9.]*, simulated [0-9.]*; run1 (mbs 1, 16 compute" out \
  || fail "two runs: the calibration is not printed with both probes"
grep -q "^top 5 by predicted step (ms)" out || fail "two runs: not ranked by the predicted step"
[ "$(grep -c '^ [1-5]\. step [0-9.]*, predicted [0-9.]*, bubble' out)" = 5 ] || fail "two runs: a listed step has no prediction"
"$PY" - run4/metrics.jsonl run1/metrics.jsonl out <<'PY' || fail "two runs: the calibration does not follow from the probes' measured steps"
import json, re, statistics, sys
def median_ms(path):  # steps >= 2, as the tuner takes them
    steps = [json.loads(line) for line in open(path) if line.strip()]
    return statistics.median(1000 * r["step_time_s"] for r in steps if r.get("event") == "step" and r["step"] >= 2)
text = open(sys.argv[3]).read()
probes = {name: (float(m), float(s)) for name, m, s in re.findall(
    r"(run[41]) \(mbs [14], [0-9]+ compute actions on the busiest rank\): measured ([0-9.]+), simulated ([0-9.]+)", text)}
assert set(probes) == {"run4", "run1"}, probes
for name, path in (("run4", sys.argv[1]), ("run1", sys.argv[2])):
    assert abs(probes[name][0] - median_ms(path)) <= 0.006, (name, probes[name], median_ms(path))
own_sim, own = map(float, re.search(
    r"^the spec's own configuration \(1f1b, m 2 x mbs 4, recompute none\): step ([0-9.]+), predicted ([0-9.]+),",
    text, re.M).groups())
if "  clamped the probe with more actions" in text:  # the probes disagreed (noise): the mean of measured - simulated
    want = own_sim + statistics.mean(m - s for m, s in probes.values())
else:  # the fit goes through both probes: the spec's own configuration (probe run4's) at its measured step
    want = probes["run4"][0]
assert abs(own - want) <= 0.02, (own, want, probes)
PY
echo "PASS [tune]"
