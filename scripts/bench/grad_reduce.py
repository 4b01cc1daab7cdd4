#!/usr/bin/env python3
"""Benchmark: the data-parallel gradient reduction as REDUCE_GRAD actions inside the schedule against the
reduction after the schedule (runtime.overlap_grad_reduce true / false), at dp x pp on the CPU.

For each schedule family it runs the same job in both modes and prints the median step time (metrics.jsonl,
steps after --warmup), the mean wait for the reduction after the schedule's last action, and from the
trace how much of each reduction ran before its rank's schedule ended (the `reduce` slices on the "rank R
collectives" tracks against the rank's `wait gradient reduction`), i.e. hidden under the rank's remaining
backward work and its pipeline drain. Usage:

    scripts/bench/grad_reduce.py [--schedules 1f1b,zbv] [--dp 2] [--stages 2] [--steps 20] [--no-build]
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile

from bench_common import ROOT, add_run_options, build_ppctl, check_run_options, print_machine_line

FAMILIES = {"gpipe": "gpipe", "1f1b": "1f1b", "zb-h1": "zb-h1",
            "interleaved-1f1b": "interleaved-1f1b, virtual_stages: 2", "zbv": "zbv, virtual_stages: 2"}


def write_spec(folder, args, schedule, overlap):
    spec = os.path.join(folder, "job.yaml")
    with open(spec, "w") as out:
        out.write(f"""model: {{layers: {args.layers}, hidden: {args.hidden}, heads: 4, seq_len: 64}}
pipeline: {{stages: {args.stages[0]}, data_parallel: {args.dp}, schedule: {FAMILIES[schedule]}, microbatches: {args.microbatches}, micro_batch_size: 2}}
data: {{path: "{args.data}"}}
train: {{steps: {args.warmup + args.steps}, seed: 1, log_interval: 1000}}
runtime: {{threads_per_worker: 1, cpu_binding: none, overlap_grad_reduce: {str(overlap).lower()}, grad_bucket_size: {args.bucket_size}}}
observe: {{runs_dir: {os.path.join(folder, 'runs')}, trace_steps: {args.warmup + args.steps}}}
""")
    return spec


def hidden_of(trace, first_step):
    """Fraction of the reduce slices' time (steps after first_step) that passed before their rank's schedule
    ended (the start of its `wait gradient reduction`): the part hidden under the rank's remaining work and
    its pipeline drain, which the reduction after the schedule would have added to the step."""
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    ranks = {e["tid"] for e in events if e.get("cat") in ("F", "B", "I", "W")}
    world = max(ranks) + 1 if ranks else 0
    schedule_end = {(e["tid"], e["args"]["step"]): e["ts"] for e in events if e.get("name") == "wait gradient reduction"}
    total = hidden = 0.0
    for e in events:
        step = e["args"].get("step", 0)
        if e.get("cat") != "reduce" or step <= first_step or (e["tid"] - world, step) not in schedule_end:
            continue
        end = schedule_end[(e["tid"] - world, step)]
        total += e["dur"]
        hidden += max(0.0, min(e["ts"] + e["dur"], end) - e["ts"])
    return hidden / total if total > 0 else float("nan")


def run(args, schedule, overlap):
    with tempfile.TemporaryDirectory(prefix="ppctl_grad_reduce_") as folder:
        spec = write_spec(folder, args, schedule, overlap)
        out = subprocess.run([os.path.join(ROOT, "build", "app", "ppctl"), "train", spec], capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"{schedule} overlap={overlap}: ppctl train exited {out.returncode}:\n{out.stdout[-3000:]}{out.stderr[-3000:]}")
        run_dir = glob.glob(os.path.join(folder, "runs", "*"))[0]
        steps = [json.loads(l) for l in open(os.path.join(run_dir, "metrics.jsonl"))]
        times = [s["step_time_s"] for s in steps if s.get("event") == "step" and s["step"] > args.warmup]
        fraction = hidden_of(json.load(open(os.path.join(run_dir, "trace.json"))), args.warmup)
        waits = [e["dur"] for e in json.load(open(os.path.join(run_dir, "trace.json")))["traceEvents"]
                 if e.get("name") == "wait gradient reduction" and e["args"].get("step", 0) > args.warmup]
        return statistics.median(times) * 1e3, (statistics.mean(waits) / 1e3 if waits else 0.0), fraction


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_options(parser, steps=20)
    parser.set_defaults(stages=[2])
    parser.add_argument("--schedules", default=",".join(FAMILIES), help="comma-separated families (default all five)")
    parser.add_argument("--dp", type=int, default=2, help="data-parallel size (default 2)")
    parser.add_argument("--microbatches", type=int, default=8, help="microbatches per step (default 8)")
    parser.add_argument("--layers", type=int, default=8, help="blocks (default 8)")
    parser.add_argument("--hidden", type=int, default=256, help="hidden size (default 256)")
    parser.add_argument("--bucket-size", type=int, default=200000, help="parameters per gradient bucket (default 200000)")
    args = parser.parse_args()
    check_run_options(parser, args)
    schedules = args.schedules.split(",")
    unknown = [s for s in schedules if s not in FAMILIES]
    if unknown or args.dp < 2 or len(args.stages) != 1:
        parser.error(f"--schedules from {', '.join(FAMILIES)}; --dp at least 2; one --stages value")
    build_ppctl(args)
    print_machine_line()
    print(f"dp {args.dp} x pp {args.stages[0]}, m {args.microbatches}, {args.layers} blocks of hidden {args.hidden}, "
          f"buckets of {args.bucket_size} parameters; median step over {args.steps} steps after {args.warmup}")
    print("| schedule | step ms, after the schedule | step ms, REDUCE_GRAD | ratio | reduction wait ms (after / in) "
          "| reduction hidden before the schedule's end (in) |")
    print("|---|---|---|---|---|---|")
    for schedule in schedules:
        after, after_wait, _ = run(args, schedule, False)
        inside, inside_wait, fraction = run(args, schedule, True)
        print(f"| {schedule} | {after:.1f} | {inside:.1f} | {inside / after:.3f} | {after_wait:.2f} / {inside_wait:.2f} "
              f"| {100 * fraction:.0f}% |", flush=True)


if __name__ == "__main__":
    main()
