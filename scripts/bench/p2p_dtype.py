#!/usr/bin/env python3
"""Benchmark: bytes between stages and step time with fp32 against bf16 point-to-point (runtime.p2p_dtype).

Under runtime.precision bf16 it trains the small model of scripts/bench/vs_torch.py (8 blocks, hidden 128,
seq_len 128, micro batch 4, m 8, 1F1B, one thread per rank) at each stage count twice per round, once with
`p2p_dtype: fp32` and once with `p2p_dtype: bf16`, alternating the two (ABAB...) so that a change in the
machine's load hits both alike. From each run it reads every rank's timing line (schedule time per step
without the optimizer, bytes sent per step) and the step lines (wall time per step after the warm-up), and
prints the medians over the rounds as a table.

Usage: scripts/bench/p2p_dtype.py [--stages 2,4] [--rounds 3] [--steps 10] [--warmup 2] [--no-build]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_common import ROOT, add_run_options, build_ppctl, check_run_options  # noqa: E402

BUILD = os.environ.get("PPCTL_BUILD_DIR", os.path.join(ROOT, "build"))
PPCTL = os.path.join(BUILD, "app", "ppctl")

STEP_LINE = re.compile(r"\[rank \d+\] info: step (\d+)/\d+ \|.* \| step ([\d.]+) s")
TIMING = re.compile(r"\[rank (\d+)\] info: timing over \d+ steps: schedule ([\d.]+) ms per step,"
                    r".*p2p sent ([\d.]+) KiB per step")


def spec_text(stages, p2p_dtype, steps, data):
    return (f"model: {{vocab_size: 256, layers: 8, hidden: 128, heads: 4, seq_len: 128, dropout: 0.0}}\n"
            f"pipeline: {{stages: {stages}, schedule: 1f1b, microbatches: 8, micro_batch_size: 4}}\n"
            f"data: {{path: [\"{data}\"]}}\n"
            f"train: {{steps: {steps}, seed: 1234, log_interval: 1}}\n"
            f"runtime: {{device: cpu, threads_per_worker: 1, precision: bf16, p2p_dtype: {p2p_dtype}}}\n"
            f"observe: {{trace_steps: 0, tensorboard: false}}\n")


def run(stages, p2p_dtype, round_index, args, workdir):
    """One training run: (median wall step ms after the warm-up, slowest rank's schedule ms, KiB sent
    per step summed over ranks)."""
    steps = args.warmup + args.steps
    name = f"p{stages}_{p2p_dtype}_{round_index}"
    spec = os.path.join(workdir, name + ".yaml")
    with open(spec, "w") as f:
        f.write(spec_text(stages, p2p_dtype, steps, args.data))
    out = subprocess.run([PPCTL, "train", spec, "--run-dir", os.path.join(workdir, "run_" + name)],
                         capture_output=True, text=True)
    log = out.stdout + out.stderr
    if out.returncode != 0:
        sys.exit(f"p{stages} {p2p_dtype}: ppctl train failed ({out.returncode}):\n{log[-3000:]}")
    step_s = {int(m.group(1)): float(m.group(2)) for m in STEP_LINE.finditer(log)}
    timing = {int(m.group(1)): (float(m.group(2)), float(m.group(3))) for m in TIMING.finditer(log)}
    if len(step_s) != steps or len(timing) != stages:
        sys.exit(f"p{stages} {p2p_dtype}: could not read ppctl's log:\n{log[-3000:]}")
    timed = [step_s[s] for s in range(args.warmup + 1, steps + 1)]
    return (1000.0 * statistics.median(timed), max(t[0] for t in timing.values()),
            sum(t[1] for t in timing.values()))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_options(parser, steps=10)
    parser.add_argument("--rounds", type=int, default=3, help="runs per variant, interleaved (default 3)")
    args = parser.parse_args()
    check_run_options(parser, args)
    if args.rounds < 1:
        parser.error(f"--rounds {args.rounds}: must be at least 1")
    build_ppctl(args)
    variants = ["fp32", "bf16"]
    results = {}  # (stages, dtype) -> list of runs
    with tempfile.TemporaryDirectory(prefix="ppctl_p2p_dtype_") as workdir:
        for stages in args.stages:
            for r in range(args.rounds):
                for dtype in variants if r % 2 == 0 else reversed(variants):  # ABBA...: neither always first
                    results.setdefault((stages, dtype), []).append(run(stages, dtype, r, args, workdir))
                    print(f"# p{stages} {dtype} round {r + 1}: {results[(stages, dtype)][-1]}", file=sys.stderr)
    print(f"precision bf16, small model (8 blocks, hidden 128, seq_len 128, micro batch 4, m 8), 1f1b, "
          f"medians of {args.rounds} interleaved runs x {args.steps} timed steps\n")
    print("| stages | p2p dtype | KiB sent per step (all ranks) | schedule ms per step | step ms | step vs fp32 "
          "| step ms of each run |")
    print("|---|---|---|---|---|---|---|")
    for stages in args.stages:
        base = statistics.median(run[0] for run in results[(stages, "fp32")])
        for dtype in variants:
            runs = results[(stages, dtype)]
            step = statistics.median(run[0] for run in runs)
            print(f"| {stages} | {dtype} | {statistics.median(run[2] for run in runs):.1f} | "
                  f"{statistics.median(run[1] for run in runs):.1f} | {step:.1f} | {step / base:.3f} | "
                  f"{', '.join(f'{run[0]:.0f}' for run in runs)} |")


if __name__ == "__main__":
    main()
