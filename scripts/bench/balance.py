#!/usr/bin/env python3
"""Benchmark: pipeline.balance auto against the uniform split, measured with `ppctl train` on CPU.

A GPT-2 with a large vocabulary (its LM head weighs ~10 blocks) over 4 stages, 1F1B. For each split it
prints the split `ppctl plan` chooses, the simulated step (in block forwards) and the measured mean step
time over the steps after the first (metrics.jsonl's step_time_s), alternating the splits --repeats
times. Usage: scripts/bench/balance.py [--steps N] [--repeats R] [--hidden H] [--layers L]
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
pipeline: {{stages: 4, schedule: 1f1b, microbatches: 8, micro_batch_size: 2, balance: {balance}}}
data: {{path: /usr/share/games/fortunes/*.u8}}
train: {{steps: {steps}, seed: 1, log_interval: 1}}
runtime: {{threads_per_worker: 1}}
observe: {{trace_steps: 0, tensorboard: false}}
"""
SPLIT = re.compile(r"^\s*(?:split\s+)?(uniform|balance auto)\s+(\[[\d, ]+\])\s+simulated step ([\d.]+), "
                   r"slowest stage F ([\d.]+)(\s+<- in use)?", re.M)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--vocab", type=int, default=32000)
    args = parser.parse_args()
    times = {"uniform": [], "auto": []}
    shown = {}
    with tempfile.TemporaryDirectory() as work:
        for repeat in range(args.repeats):
            for balance in ("uniform", "auto"):
                spec = os.path.join(work, f"{balance}.yaml")
                with open(spec, "w") as f:
                    f.write(SPEC.format(vocab=args.vocab, layers=args.layers, hidden=args.hidden,
                                        balance=balance, steps=args.steps))
                if balance not in shown:
                    plan = subprocess.run([PPCTL, "plan", spec], capture_output=True, text=True, check=True).stdout
                    for name, split, simulated, slowest, used in SPLIT.findall(plan):
                        if used:
                            shown[balance] = (split, float(simulated), float(slowest))
                run_dir = os.path.join(work, f"run-{balance}-{repeat}")
                subprocess.run([PPCTL, "train", spec, "--run-dir", run_dir], check=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                with open(os.path.join(run_dir, "metrics.jsonl")) as f:
                    rows = [json.loads(line) for line in f if line.strip()]
                steps = [r["step_time_s"] for r in rows if "step_time_s" in r][1:]  # the first warms up
                times[balance].append(statistics.mean(steps))
    print(f"vocab {args.vocab}, hidden {args.hidden}, {args.layers} layers, 4 stages, 1f1b, m 8 x 2 x 64 tokens; "
          f"{args.steps} steps (first dropped) x {args.repeats} runs")
    print(f"| balance | split | simulated step (block F) | slowest stage (block F) | measured step s (mean of runs) | runs |")
    print("|---|---|---|---|---|---|")
    for balance in ("uniform", "auto"):
        split, simulated, slowest = shown[balance]
        runs = ", ".join(f"{t:.3f}" for t in times[balance])
        print(f"| {balance} | {split} | {simulated:.1f} | {slowest:.2f} | {statistics.mean(times[balance]):.3f} | {runs} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
