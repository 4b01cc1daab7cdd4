#!/usr/bin/env python3
"""Benchmark: memory per pipeline rank, the plan's estimate against the executor's counters and the process RSS.

For a small GPT (16 blocks, hidden 64, 4 heads, seq_len 64, vocab 256, micro batch 4, m 8, 4 stages, recompute
none, fp32, one thread per rank) under each schedule family (gpipe, 1f1b, interleaved-1f1b, zb-h1, zbv) it:
- reads `ppctl plan`'s memory table (weights + gradients + AdamW = static, peak, total per pp rank);
- trains a few steps with `ppctl train` (CPU workers) and reads each rank's memory line: the executor's peak
  above the step's start (counting allocator) plus the plan's static bytes (the test memory_estimate_tests
  checks they equal the trainer's 16 B per parameter), and the process's max resident set;
- trains the same job with an empty model (1 block per stage, hidden 8, 1 head, seq_len 8, micro batch 1) for
  the RSS baseline (the process, LibTorch, Gloo, the data loader): RSS growth = RSS - baseline RSS.
It then prints one markdown row per (schedule, rank) with the ratios, and the same for 1f1b with m = 8 and
m = 64 (the middle ranks: the acceptance is that their peak at m = 64 is within 10 % of m = 8).

Usage: scripts/bench/memory.py [--steps 3] [--schedules gpipe,1f1b,...] [--data GLOB] [--no-build]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_common import ROOT, print_machine_line  # noqa: E402

BUILD = os.environ.get("PPCTL_BUILD_DIR", os.path.join(ROOT, "build"))
PPCTL = os.path.join(BUILD, "app", "ppctl")
FAMILIES = ["gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zbv"]
UNITS = {"KiB": 1024.0, "MiB": 1024.0 ** 2, "GiB": 1024.0 ** 3}
MEMORY_LINE = re.compile(r"\[rank (\d+)\] info: memory: max resident set ([\d.]+) MiB; .*?kept for backward up to "
                         r"([\d.]+) MiB; tensors held between actions up to ([\d.]+) MiB, peak ([\d.]+) MiB above "
                         r"the step's start; at most (\d+) send")
MIB = 1024.0 ** 2


def spec_text(schedule, microbatches, steps, data, empty=False):
    """The job: the issue's small GPT, or (empty) a model of one tiny block per stage for the RSS baseline."""
    virtual = 2 if schedule in ("interleaved-1f1b", "zbv") else 1
    if empty:
        model = f"{{vocab_size: 256, layers: {4 * virtual}, hidden: 8, heads: 1, seq_len: 8, dropout: 0.0}}"
        mbs = 1
    else:
        model = "{vocab_size: 256, layers: 16, hidden: 64, heads: 4, seq_len: 64, dropout: 0.0}"
        mbs = 4
    virtual_text = f", virtual_stages: {virtual}" if virtual > 1 else ""
    return (f"model: {model}\n"
            f"pipeline: {{stages: 4, schedule: {schedule}, microbatches: {microbatches}, "
            f"micro_batch_size: {mbs}{virtual_text}}}\n"
            f"data: {{path: [\"{data}\"]}}\n"
            f"train: {{steps: {steps}, seed: 1234, log_interval: 1}}\n"
            f"runtime: {{device: cpu, threads_per_worker: 1}}\n"
            f"observe: {{trace_steps: 0, tensorboard: false}}\n")


def bytes_of(text):
    """'812.5 KiB' -> bytes."""
    value, unit = text.split()
    return float(value) * UNITS[unit]


def plan_memory(spec):
    """Per pp rank from `ppctl plan`'s memory table: {rank: {"static", "peak", "total"}} in bytes."""
    out = subprocess.run([PPCTL, "plan", spec], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"ppctl plan {spec} failed:\n{out.stderr[-2000:]}")
    lines = out.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("memory per pp rank")) + 2
    ranks = {}
    for line in lines[start:]:
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) != 11 or not cells[0].isdigit():
            break
        static = sum(bytes_of(c) for c in cells[1:4])
        ranks[int(cells[0])] = {"static": static, "peak": bytes_of(cells[9]), "total": bytes_of(cells[10])}
    return ranks


def train_memory(spec, run_dir):
    """Per rank from `ppctl train`'s memory lines: {rank: {"rss", "peak"}} in bytes."""
    out = subprocess.run([PPCTL, "train", spec, "--run-dir", run_dir], capture_output=True, text=True)
    log = out.stdout + out.stderr
    if out.returncode != 0:
        sys.exit(f"ppctl train {spec} failed ({out.returncode}):\n{log[-3000:]}")
    ranks = {int(m.group(1)): {"rss": float(m.group(2)) * MIB, "peak": float(m.group(5)) * MIB}
             for m in MEMORY_LINE.finditer(log)}
    if len(ranks) != 4:
        sys.exit(f"ppctl train {spec}: could not read the memory lines:\n{log[-3000:]}")
    return ranks


MEASURED = {}


def measure(schedule, microbatches, args, workdir):
    """Per rank: plan static / peak / total, counters (peak above start), RSS, baseline RSS (each job once)."""
    if (schedule, microbatches) not in MEASURED:
        MEASURED[(schedule, microbatches)] = measure_once(schedule, microbatches, args, workdir)
    return MEASURED[(schedule, microbatches)]


def measure_once(schedule, microbatches, args, workdir):
    """measure's runs of one job."""
    name = f"{schedule}_m{microbatches}"
    spec = os.path.join(workdir, name + ".yaml")
    empty = os.path.join(workdir, name + "_empty.yaml")
    with open(spec, "w") as f:
        f.write(spec_text(schedule, microbatches, args.steps, args.data))
    with open(empty, "w") as f:
        f.write(spec_text(schedule, microbatches, args.steps, args.data, empty=True))
    plan = plan_memory(spec)
    train = train_memory(spec, os.path.join(workdir, "run_" + name))
    base = train_memory(empty, os.path.join(workdir, "run_" + name + "_empty"))
    print(f"# {name}: done", file=sys.stderr, flush=True)
    return {r: {**plan[r], "counted": train[r]["peak"], "rss": train[r]["rss"], "base": base[r]["rss"]}
            for r in sorted(plan)}


def row(label, rank, m):
    """One markdown row: estimate, counters + static, RSS growth, and their ratios (MiB)."""
    counters = m["static"] + m["counted"]
    growth = m["rss"] - m["base"]
    return (f"| {label} | {rank} | {m['total'] / MIB:.2f} | {m['peak'] / MIB:.2f} | {m['counted'] / MIB:.2f} | "
            f"{counters / MIB:.2f} | {m['total'] / counters:.3f} | {m['rss'] / MIB:.1f} | {m['base'] / MIB:.1f} | "
            f"{growth / MIB:.2f} | {growth / counters:.2f} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=3, help="training steps per run (default 3)")
    parser.add_argument("--schedules", default=",".join(FAMILIES), help="comma-separated schedule families")
    parser.add_argument("--data", default="/usr/share/games/fortunes/*.u8", help="text files (glob)")
    parser.add_argument("--no-build", action="store_true", help="use the ppctl already built")
    args = parser.parse_args()
    schedules = args.schedules.split(",")
    if any(s not in FAMILIES for s in schedules):
        parser.error(f"--schedules {args.schedules}: each one of {', '.join(FAMILIES)}")
    if args.steps < 1:
        parser.error(f"--steps {args.steps}: must be at least 1")
    args.data = os.path.abspath(os.path.expanduser(args.data))
    if not args.no_build:
        subprocess.run([os.path.join(ROOT, "scripts", "build.sh"), "--target", "ppctl", "ppctl-torch"], check=True,
                       stdout=subprocess.DEVNULL)
    print_machine_line()
    header = ("| job | pp rank | plan total MiB | plan peak MiB | counted peak above start MiB | static + counted MiB "
              "| plan / counted | RSS MiB | empty-model RSS MiB | RSS growth MiB | growth / counted |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="ppctl_memory_") as workdir:
        print("\nsmall GPT (16 blocks, hidden 64, seq_len 64, micro batch 4), 4 stages, m 8, recompute none, fp32\n")
        print(header)
        for schedule in schedules:
            for rank, m in measure(schedule, 8, args, workdir).items():
                print(row(schedule, rank, m), flush=True)
        print("\n1f1b, m = 8 against m = 64 (the acceptance: a middle rank's peak at m = 64 within 10 % of m = 8)\n")
        print(header)
        by_m = {mb: measure("1f1b", mb, args, workdir) for mb in (8, 64)}
        for mb, ranks in by_m.items():
            for rank, m in ranks.items():
                print(row(f"1f1b m {mb}", rank, m))
        print("\n| pp rank | counted peak m 64 / m 8 | static + counted m 64 / m 8 | RSS growth m 64 / m 8 |\n"
              "|---|---|---|---|")
        for rank in by_m[8]:
            a, b = by_m[8][rank], by_m[64][rank]
            print(f"| {rank} | {b['counted'] / a['counted']:.3f} | "
                  f"{(b['static'] + b['counted']) / (a['static'] + a['counted']):.3f} | "
                  f"{(b['rss'] - b['base']) / (a['rss'] - a['base']):.3f} |")


if __name__ == "__main__":
    main()
