#!/usr/bin/env python3
"""Benchmark: stage splits measured with `ppctl train` on CPU: uniform, balance auto (FLOP costs) and the
split `ppctl plan --layer-costs RUN_DIR` balances from a previous run's measured costs.

A GPT-2 with a large vocabulary (its LM head weighs ~10 blocks) over 4 stages, 1F1B. First a traced probe
run with the uniform split (observe.trace_steps = --steps); `ppctl plan --layer-costs PROBE` then gives the
per-layer costs fitted to its trace and the split balancing them ("balance costs"). Each split is then
trained --repeats times (alternating, untraced) and the table prints its blocks per stage, its simulated
step under the FLOP costs (block forwards) and under the probe's measured costs (ms), and the measured mean
step time over the steps after the first (metrics.jsonl's step_time_s).
Usage: scripts/bench/balance.py [--steps N] [--repeats R] [--hidden H] [--layers L] [--vocab V]
(expects build/app/ppctl, or $PPCTL_BUILD_DIR/app/ppctl).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("PPCTL_BUILD_DIR", os.path.join(ROOT, "build"))
PPCTL = os.path.join(BUILD, "app", "ppctl")

SPEC = """model: {{vocab_size: {vocab}, layers: {layers}, hidden: {hidden}, heads: 4, seq_len: 64, dropout: 0.0}}
pipeline: {{stages: 4, schedule: 1f1b, microbatches: 8, micro_batch_size: 2, {split}}}
data: {{path: /usr/share/games/fortunes/*.u8}}
train: {{steps: {steps}, seed: 1, log_interval: 1}}
runtime: {{threads_per_worker: 1}}
observe: {{trace_steps: {trace}, tensorboard: false}}
"""
# A row of plan's split section: name, split, simulated step, slowest stage, memory, in use.
ROW = re.compile(r"^\s*(?:split\s+)?(uniform|balance auto|balance costs|layers_per_stage)\s+(\[[\d, ]+\])\s+"
                 r"simulated step ([\d.]+)(?: ms)?, slowest stage (?:F|F\+B) ([\d.]+)(?: ms)?, "
                 r"memory per rank ([^<\n]*?)(\s+<- in use)?$", re.M)


def plan_rows(*args):
    text = subprocess.run([PPCTL, "plan", *args], capture_output=True, text=True, check=True).stdout
    return {name: (split, float(step), memory.strip()) for name, split, step, _, memory, _ in ROW.findall(text)}, text


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--vocab", type=int, default=32000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        def spec(name, split, trace=0):
            path = os.path.join(work, f"{name}.yaml")
            with open(path, "w") as f:
                f.write(SPEC.format(vocab=args.vocab, layers=args.layers, hidden=args.hidden, split=split,
                                    steps=args.steps, trace=trace))
            return path

        def train(path, run_dir):
            subprocess.run([PPCTL, "train", path, "--run-dir", run_dir], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            with open(os.path.join(run_dir, "metrics.jsonl")) as f:
                rows = [json.loads(line) for line in f if line.strip()]
            return statistics.mean([r["step_time_s"] for r in rows if "step_time_s" in r][1:])  # first warms up

        probe_spec = spec("probe", "balance: uniform", trace=args.steps)
        probe = os.path.join(work, "probe")
        train(probe_spec, probe)
        flop, _ = plan_rows(probe_spec)
        measured, text = plan_rows(probe_spec, "--layer-costs", probe)
        costs_line = next(l.strip() for l in text.splitlines() if "(costs from run directory" in l)
        splits = {"uniform": "balance: uniform", "auto (FLOP costs)": "balance: auto",
                  "balance costs (probe's trace)": f"layers_per_stage: {measured['balance costs'][0]}"}
        rows = {"uniform": "uniform", "auto (FLOP costs)": "balance auto",
                "balance costs (probe's trace)": "balance costs"}
        times = {name: [] for name in splits}
        for repeat in range(args.repeats):
            for i, (name, split) in enumerate(splits.items()):
                times[name].append(train(spec(f"split{i}", split), os.path.join(work, f"run-{i}-{repeat}")))
        print(f"vocab {args.vocab}, hidden {args.hidden}, {args.layers} layers, 4 stages, 1f1b, m 8 x 2 x 64 tokens; "
              f"{args.steps} steps (first dropped) x {args.repeats} runs; load average {os.getloadavg()[0]:.1f}")
        print(costs_line.replace(work, "TMP"))
        print("| split chosen by | split | simulated step (block F, FLOP costs) | simulated step ms (probe's costs) "
              "| memory per rank | measured step s (mean) | runs |")
        print("|---|---|---|---|---|---|---|")
        for name, row in rows.items():
            split, simulated_ms, memory = measured[row]
            flop_step = next((step for s, step, _ in flop.values() if s == split), None)
            if flop_step is None:  # a split neither uniform nor auto: plan a spec that gives it explicitly
                flop_step = plan_rows(spec("explicit", f"layers_per_stage: {split}"))[0]["layers_per_stage"][1]
            runs = ", ".join(f"{t:.3f}" for t in times[name])
            print(f"| {name} | {split} | {flop_step:.1f} | {simulated_ms:.1f} | {memory} | "
                  f"{statistics.mean(times[name]):.3f} | {runs} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
