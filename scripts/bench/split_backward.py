#!/usr/bin/env python3
"""Benchmark: what the split backward costs against a full one, and what zero bubble then gains.

For each stage count it trains the small GPT of vs_torch.py (8 blocks, hidden 128, seq_len 128, micro
batch 4, m 8, one thread per rank) with 1f1b and with zb-h1 (and zbv at p = 2, v = 2), runs of the
schedules interleaved (1f1b, zb-h1, zbv, 1f1b, ...), and reads every rank's two timing lines (wall
time; CPU time of the schedule's thread):
  - per stage: B (1f1b) against I + W (zb-h1), and their ratio (target <= 1.1), in wall time and in CPU
    time of the schedule's thread (the cost without waits for a core, when ranks share cores);
  - per schedule: tokens/s over the timed steps, the measured schedule time per step, and the step that
    `ppctl plan --costs` simulates from that run's own per-stage F, B, I, W costs.
Medians over --repeats runs. Usage: scripts/bench/split_backward.py [--stages 2,4] [--repeats 3]
(builds ppctl first via scripts/build.sh unless --no-build).
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from types import SimpleNamespace

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_common import add_run_options, build_ppctl, check_run_options, print_machine_line, stage_costs  # noqa: E402
from schedules import COST, CPU_COST, CPU_TIMING, SIMULATED, TIMING  # noqa: E402  (ppctl's timing-line parsers)
from vs_torch import MEMORY_LINE, PPCTL, STEP_LINE, Config  # noqa: E402  (the small model's spec, shared)


def run(cfg, workdir, steps, warmup):
    """One ppctl run: tokens/s, schedule ms per step (slowest rank), per-stage costs, simulated ms."""
    spec = cfg.write_spec(workdir, warmup + steps)
    out = subprocess.run([PPCTL, "train", spec], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{cfg.label}: ppctl train failed ({out.returncode}):\n{out.stderr[-3000:]}")
    log = out.stdout + out.stderr
    seconds = [cfg.tokens_per_step / float(m.group(3)) for m in STEP_LINE.finditer(log)][warmup:]
    ranks = {}
    for m in TIMING.finditer(log):
        ranks[int(m.group(1))] = {"schedule_ms": float(m.group(2)),
                                  **{k: float(ms) for k, ms, _ in COST.findall(m.group(4))}}
    for m in CPU_TIMING.finditer(log):
        ranks[int(m.group(1))].update({"cpu " + k: float(ms) for k, ms in CPU_COST.findall(m.group(2))})
    for rank, _, kept in MEMORY_LINE.findall(log):
        ranks[int(rank)]["kept_mib"] = float(kept)
    if len(ranks) != cfg.stages or not seconds or any("kept_mib" not in r for r in ranks.values()):
        sys.exit(f"{cfg.label}: could not read ppctl's timing lines:\n{log[-3000:]}")
    if any({k for k in r if k in ("F", "B", "I", "W")} != {k[4:] for k in r if k.startswith("cpu ")}
           for r in ranks.values()):
        sys.exit(f"{cfg.label}: no CPU time for every action kind (the line 'CPU time per action of the "
                 f"schedule's thread', printed by ppctl since 2026-12-04; is {PPCTL} older?):\n{log[-3000:]}")
    stage_costs_ms = stage_costs([ranks[r] for r in range(cfg.stages)], cfg.stages, cfg.virtual_stages,
                                 cfg.schedule)
    plan = subprocess.run([PPCTL, "plan", spec, "--costs", ",".join(f"{x:.4f}" for x in stage_costs_ms)],
                          capture_output=True, text=True)
    sim = SIMULATED.search(plan.stdout)
    if plan.returncode != 0 or not sim:
        sys.exit(f"ppctl plan --costs failed:\n{plan.stderr}{plan.stdout[-1000:]}")
    return {"tokens_per_s": cfg.tokens_per_step * len(seconds) / sum(seconds),
            "schedule_ms": max(r["schedule_ms"] for r in ranks.values()), "sim_ms": float(sim.group(1)),
            "ranks": ranks}


def median(runs, key):
    return statistics.median(r[key] for r in runs)


def median_cost(runs, rank, kind):
    values = [r["ranks"][rank].get(kind) for r in runs]
    return statistics.median(values) if None not in values else None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_options(parser, steps=8)
    parser.add_argument("--repeats", type=int, default=3, help="runs per schedule (default 3)")
    args = parser.parse_args()
    check_run_options(parser, args)
    if args.repeats < 1:
        parser.error(f"--repeats {args.repeats}: must be at least 1")
    build_ppctl(args)
    print_machine_line()
    options = SimpleNamespace(data=args.data, threads=1)
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for stages in args.stages:
            schedules = [("1f1b", 1), ("zb-h1", 1)] + ([("zbv", 2)] if stages == 2 else [])
            runs = {s: [] for s in schedules}
            for _ in range(args.repeats):
                for schedule, v in schedules:
                    cfg = Config("small", stages, schedule, options)
                    runs[(schedule, v)].append(run(cfg, workdir, args.steps, args.warmup))
            rows.append((stages, runs))

    print("\nper stage (one rank each), median ms per action: B from 1f1b, I and W from zb-h1, wall time and "
          "(cpu) CPU time of the schedule's thread, which leaves out waits for a core; activations kept for "
          "backward at the peak (MiB), 1f1b and zb-h1")
    print(f"{'stages':>6} {'rank':>4} {'F':>7} {'B':>7} {'I':>7} {'W':>7} {'I+W':>7} {'(I+W)/B':>8} "
          f"{'B cpu':>7} {'I+W cpu':>7} {'(I+W)/B cpu':>11} {'kept 1f1b':>9} {'kept zb':>8}")
    for stages, runs in rows:
        full, split = runs[("1f1b", 1)], runs[("zb-h1", 1)]
        for rank in range(stages):
            b, i, w = (median_cost(r, rank, k) for r, k in ((full, "B"), (split, "I"), (split, "W")))
            b_cpu = median_cost(full, rank, "cpu B")
            split_cpu = median_cost(split, rank, "cpu I") + median_cost(split, rank, "cpu W")
            print(f"{stages:>6} {rank:>4} {median_cost(full, rank, 'F'):>7.1f} {b:>7.1f} {i:>7.1f} {w:>7.1f} "
                  f"{i + w:>7.1f} {(i + w) / b:>8.2f} {b_cpu:>7.1f} {split_cpu:>7.1f} {split_cpu / b_cpu:>11.2f} "
                  f"{median_cost(full, rank, 'kept_mib'):>9.1f} {median_cost(split, rank, 'kept_mib'):>8.1f}")
    print("\nper schedule, medians: tokens/s; schedule ms per step (slowest rank) against the simulated step "
          "from the run's own per-stage costs")
    print(f"{'configuration':<16} {'tok/s':>8} {'meas ms':>8} {'sim ms':>8} {'meas/sim':>8}")
    for stages, runs in rows:
        for (schedule, v), rs in runs.items():
            label = f"p{stages} {schedule}" + (f" v{v}" if v > 1 else "")
            print(f"{label:<16} {median(rs, 'tokens_per_s'):>8.0f} {median(rs, 'schedule_ms'):>8.1f} "
                  f"{median(rs, 'sim_ms'):>8.1f} {median(rs, 'schedule_ms') / median(rs, 'sim_ms'):>8.2f}")


if __name__ == "__main__":
    main()
