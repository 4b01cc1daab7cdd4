#!/usr/bin/env bash
# End-to-end test of `ppctl plan --tune` (issue 27 item 2), as a user runs it. Usage: cli_tune.sh PPCTL_BINARY
# Checks: two runs print the same; the first configuration's YAML lines, merged into the spec, give the same
# simulated step under plain `ppctl plan --layer-costs` (the costs file scaled to its micro batch size, as the
# tuner states); --memory-gib: every listed peak within it, some ruled out and counted, exit 4 when nothing
# fits; bad --memory-gib values refused with exit 2 naming the option. Needs PyYAML (the venv's python,
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
_, _, _, block = listed_configurations(open(out).read())[0]
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
echo "PASS [tune]"
