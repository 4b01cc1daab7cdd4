#!/usr/bin/env python3
"""Benchmark: the distributed optimizer (optimizer.distributed) against the plain one at dp x pp on the CPU, in
each precision that changes what a rank keeps (runtime.precision fp32, bf16-params).

For each precision and data-parallel size it runs the same job (same global batch: microbatches =
--global-microbatches / dp) with AdamW's state whole on every replica, sharded over the replicas, and sharded with
the parameter all-gather waited for right after AdamW (runtime.overlap_param_gather false; dp > 1 only), and
prints per mode, for the largest rank: AdamW's state per parameter and the whole training state per parameter
(weights + gradient buffers + AdamW + fp32 main parameters: the workers' `AdamW state on this rank` lines), the
same static bytes from `ppctl plan`'s memory table, the largest max resident set over the ranks (`memory: max
resident set`), the median step time (metrics.jsonl, steps after --warmup), the optimizer step and the forwards'
wait for the parameter all-gather (the workers' timing lines, mean over the ranks: with the all-gather overlapped
the optimizer step only posts it and the wait shows what the schedule did not hide; waited for at once it is all
in the optimizer step), and the first and last logged loss.
Usage:

    scripts/bench/dist_optimizer.py [--dp 1,2,4] [--stages 2] [--precision fp32,bf16-params] [--arch llama]
                                    [--steps 10] [--no-build]
"""
import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

from bench_common import ROOT, add_run_options, build_ppctl, check_run_options, print_machine_line, stage_list

PPCTL = os.path.join(ROOT, "build", "app", "ppctl")


MODES = {"plain": (False, True), "distributed": (True, True), "distributed, gather at once": (True, False)}


def write_spec(folder, args, dp, mode, precision):
    distributed, overlap = MODES[mode]
    spec = os.path.join(folder, "job.yaml")
    llama = ", arch: llama, kv_heads: 2" if args.arch == "llama" else ""
    with open(spec, "w") as out:
        out.write(f"""model: {{layers: {args.layers}, hidden: {args.hidden}, heads: 4, seq_len: 64{llama}}}
pipeline: {{stages: {args.stages[0]}, data_parallel: {dp}, schedule: 1f1b, microbatches: {args.global_microbatches // dp}, micro_batch_size: 2}}
data: {{path: "{args.data}"}}
optimizer: {{lr: 0.001, distributed: {str(distributed).lower()}}}
train: {{steps: {args.warmup + args.steps}, seed: 1, log_interval: 1}}
runtime: {{threads_per_worker: 1, cpu_binding: none, grad_bucket_size: {args.bucket_size}, overlap_param_gather: {str(overlap).lower()}, precision: {precision}}}
observe: {{runs_dir: {os.path.join(folder, 'runs')}, trace_steps: 0}}
""")
    return spec


def planned_static_mib(spec):
    """The largest AdamW cell and the largest weights + gradients + AdamW of `ppctl plan`'s memory table, MiB."""
    out = subprocess.run([PPCTL, "plan", spec], capture_output=True, text=True, check=True).stdout
    header = out.index("pp rank     weights")
    mib = {"B": 1 / 2**20, "KiB": 1 / 1024, "MiB": 1, "GiB": 1024}
    adamw, static = [], []
    for line in out[header:].splitlines()[1:]:
        parts = line.split()
        if not parts or not parts[0].isdigit():
            break
        cells = [float(parts[i]) * mib[parts[i + 1]] for i in (1, 3, 5)]  # weights, gradients, AdamW
        adamw.append(cells[2])
        static.append(sum(cells))
    return max(adamw), max(static)


def run(args, dp, mode, precision):
    with tempfile.TemporaryDirectory(prefix="ppctl_dist_optimizer_") as folder:
        spec = write_spec(folder, args, dp, mode, precision)
        out = subprocess.run([PPCTL, "train", spec], capture_output=True, text=True)
        text = out.stdout + out.stderr
        if out.returncode != 0:
            sys.exit(f"dp {dp} {mode}: ppctl train exited {out.returncode}:\n{text[-3000:]}")
        state = [tuple(int(x) for x in groups) for groups in re.findall(
            r"AdamW state on this rank: (\d+) bytes for (\d+) parameters[^;\n]*; weights (\d+) bytes, "
            r"gradient buffers (\d+) bytes, fp32 main parameters (\d+) bytes", text)]
        rss = [float(x) for x in re.findall(r"memory: max resident set ([\d.]+) MiB", text)]
        gather = [(float(a), float(b)) for a, b in re.findall(
            r"optimizer step ([\d.]+) ms, forwards waited ([\d.]+) ms for the parameter all-gather", text)]
        losses = [float(x) for x in re.findall(r"step \d+/\d+ \| loss (\S+)", text)]
        ranks = dp * args.stages[0]
        if len(state) != ranks or len(rss) != ranks or len(gather) != ranks or not losses:
            sys.exit(f"dp {dp} {mode}: expected a state, a memory and a timing line per rank and logged losses")
        run_dir = glob.glob(os.path.join(folder, "runs", "*"))[0]
        steps = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
        times = [s["step_time_s"] for s in steps if s.get("event") == "step" and s["step"] > args.warmup]
        largest = max(state, key=lambda s: s[0] + s[2] + s[3] + s[4])  # AdamW, parameters, weights, gradients, mains
        adamw, parameters, weights, gradients, mains = largest
        planned_adamw, planned_static = planned_static_mib(spec)
        return {"bytes": adamw + mains, "per_parameter": (adamw + mains) / parameters,
                "static": weights + gradients + adamw + mains,
                "static_per_parameter": (weights + gradients + adamw + mains) / parameters,
                "planned": planned_adamw, "planned_static": planned_static,
                "rss": max(rss), "step_ms": statistics.median(times) * 1e3, "first": losses[0], "last": losses[-1],
                "optimizer_ms": statistics.mean(g[0] for g in gather),
                "gather_wait_ms": statistics.mean(g[1] for g in gather)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_options(parser, steps=10)
    parser.set_defaults(stages=[2])
    parser.add_argument("--dp", type=stage_list, default=[1, 2, 4], help="data-parallel sizes (default 1,2,4)")
    parser.add_argument("--global-microbatches", type=int, default=16,
                        help="microbatches of the global batch, split over the replicas (default 16)")
    parser.add_argument("--layers", type=int, default=8, help="blocks (default 8)")
    parser.add_argument("--hidden", type=int, default=256, help="hidden size (default 256)")
    parser.add_argument("--bucket-size", type=int, default=200000, help="parameters per gradient bucket (default 200000)")
    parser.add_argument("--precision", type=lambda text: text.split(","), default=["fp32", "bf16-params"],
                        help="runtime.precision values (default fp32,bf16-params)")
    parser.add_argument("--arch", choices=["gpt2", "llama"], default="gpt2", help="model.arch (default gpt2)")
    args = parser.parse_args()
    check_run_options(parser, args, min_stages=1)  # --stages 1: data parallelism alone
    bad = [d for d in args.dp if d < 1 or args.global_microbatches % d != 0]
    if bad or len(args.stages) != 1:
        parser.error(f"--dp {bad}: each at least 1 and dividing --global-microbatches; one --stages value")
    build_ppctl(args)
    print_machine_line()
    print(f"{args.arch}, pp {args.stages[0]}, 1f1b, {args.global_microbatches} microbatches of 2 x 64 tokens per step "
          f"over the replicas, {args.layers} blocks of hidden {args.hidden} "
          f"({'tied embeddings' if args.arch == 'gpt2' else 'untied head, 2 key/value heads'}), buckets of "
          f"{args.bucket_size} parameters; median step over {args.steps} steps after {args.warmup}; the largest rank "
          f"of each run. AdamW (+ fp32 mains): the optimizer's state; static: weights + gradient buffers + AdamW + "
          f"fp32 main parameters")
    print("| precision | dp | optimizer | AdamW (+ mains) MiB (B/param) | plan's AdamW MiB | static MiB (B/param) "
          "| plan's static MiB | max RSS MiB | step ms | optimizer ms | all-gather wait ms | loss first / last |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for precision in args.precision:
        for dp in args.dp:
            for mode in MODES:
                if dp == 1 and mode != "plain":
                    continue  # nothing to shard: the same run
                r = run(args, dp, mode, precision)
                print(f"| {precision} | {dp} | {mode} | {r['bytes'] / 2**20:.2f} ({r['per_parameter']:.2f}) "
                      f"| {r['planned']:.2f} | {r['static'] / 2**20:.2f} ({r['static_per_parameter']:.2f}) "
                      f"| {r['planned_static']:.2f} | {r['rss']:.1f} | {r['step_ms']:.1f} | {r['optimizer_ms']:.1f} "
                      f"| {r['gather_wait_ms']:.2f} "
                      f"| {r['first']:.6f} / {r['last']:.6f} |", flush=True)


if __name__ == "__main__":
    main()
