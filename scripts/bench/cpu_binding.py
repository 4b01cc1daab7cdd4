#!/usr/bin/env python3
"""Benchmark: runtime.cpu_binding cores against none, for local workers that fit the machine's CPUs.

Trains the small model (8 blocks, hidden 128, seq_len 128, micro batch 4, 8 microbatches; as
scripts/bench/vs_torch.py's "small") with `ppctl train` for each schedule at 2 stages, one thread per
worker, alternating the two bindings round by round, and prints the median step time and tokens/s over
the steps after the first few (from each run's metrics.jsonl). Usage: scripts/bench/cpu_binding.py
[--rounds N] [--steps N] [--stages P] [--schedules 1f1b,gpipe,zb-h1] (builds ppctl first via
scripts/build.sh).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("PPCTL_BUILD_DIR", os.path.join(ROOT, "build"))
PPCTL = os.path.join(BUILD, "app", "ppctl")
WARMUP_STEPS = 3
DATA = "/usr/share/games/fortunes/*.u8"  # as configs/example.yaml and scripts/bench/vs_torch.py


def spec(folder, schedule, stages, steps, binding):
    text = (
        "model: {layers: 8, hidden: 128, heads: 4, seq_len: 128, dropout: 0.0}\n"
        f"pipeline: {{stages: {stages}, schedule: {schedule}, microbatches: 8, micro_batch_size: 4}}\n"
        f"data: {{path: [{json.dumps(DATA)}]}}\n"
        "optimizer: {lr: 0.001}\n"
        f"train: {{steps: {steps}, seed: 1, log_interval: 1}}\n"
        f"runtime: {{threads_per_worker: 1, cpu_binding: {binding}}}\n"
        "observe: {trace_steps: 0}\n")
    path = os.path.join(folder, f"{schedule}-{binding}.yaml")
    with open(path, "w") as f:
        f.write(text)
    return path


def run(path, run_dir):
    subprocess.run([PPCTL, "train", path, "--run-dir", run_dir], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rows = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
    steps = [r for r in rows if r.get("event") == "step" and r["step"] > WARMUP_STEPS]
    return [r["step_time_s"] for r in steps], [r["tokens_per_s"] for r in steps]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--stages", type=int, default=2)
    parser.add_argument("--schedules", default="1f1b,gpipe,zb-h1", help="comma-separated")
    args = parser.parse_args()
    subprocess.run([os.path.join(ROOT, "scripts", "build.sh"), "--target", "ppctl"], check=True,
                   stdout=subprocess.DEVNULL)
    print(f"load average before: {os.getloadavg()[0]:.2f}; CPUs usable: {len(os.sched_getaffinity(0))}")
    print("| schedule | binding | median step (s) | median tokens/s | runs |")
    print("|---|---|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as folder:
        for schedule in args.schedules.split(","):
            results = {"cores": ([], []), "none": ([], [])}
            for round_no in range(args.rounds):
                order = ("cores", "none") if round_no % 2 == 0 else ("none", "cores")
                for binding in order:
                    run_dir = os.path.join(folder, f"{schedule}-{binding}-{round_no}")
                    times, rates = run(spec(folder, schedule, args.stages, args.steps, binding), run_dir)
                    results[binding][0].extend(times)
                    results[binding][1].extend(rates)
            for binding, (times, rates) in results.items():
                print(f"| {schedule} p{args.stages} | {binding} | {statistics.median(times):.4f} | "
                      f"{statistics.median(rates):,.0f} | {args.rounds} |")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    sys.exit(main())
