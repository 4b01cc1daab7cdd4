#!/usr/bin/env python3
"""Benchmark: every schedule on the example model, simulated against measured.

For each configuration it trains a few steps with `ppctl train` (real worker processes), reads each
rank's timing line (mean schedule time per step, mean F/B/I/W cost, measured bubble), feeds the mean
per-action costs to `ppctl plan --costs` and prints simulated and measured step time and bubble side by
side. Usage: scripts/bench/schedules.py [--steps N] (builds ppctl first via scripts/build.sh).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import zb_auto_mapping  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("PPCTL_BUILD_DIR", os.path.join(ROOT, "build"))
PPCTL = os.path.join(BUILD, "app", "ppctl")

# (label, ranks p, schedule, virtual stages v); the example model has 4 blocks, so v = 2 runs on p = 2.
CONFIGS = [
    ("gpipe p4", 4, "gpipe", 1),
    ("1f1b p4", 4, "1f1b", 1),
    ("zb-h1 p4", 4, "zb-h1", 1),
    ("zb-auto p4", 4, "zb-auto", 1),  # after 1f1b and zb-h1 p4: its costs come from those rows and a probe
    ("gpipe p2", 2, "gpipe", 1),
    ("1f1b p2", 2, "1f1b", 1),
    ("zb-h1 p2", 2, "zb-h1", 1),
    ("zb-auto p2", 2, "zb-auto", 1),
    ("interleaved-1f1b p2 v2", 2, "interleaved-1f1b", 2),
    ("zbv p2 v2", 2, "zbv", 2),
]

TIMING = re.compile(r"\[rank (\d+)\] info: timing over \d+ steps: schedule ([\d.]+) ms per step, "
                    r"compute ([\d.]+) ms \(([^)]*)\), receive waits ([\d.]+) ms, measured bubble ([-\d.]+)")
COST = re.compile(r"([FBIW]) ([\d.]+) ms x(\d+)")
# The line after TIMING: each kind's mean CPU time on the schedule's thread (no waits for a core).
CPU_TIMING = re.compile(r"\[rank (\d+)\] info: CPU time per action of the schedule's thread:((?: [FBIW] [\d.]+ ms)+)")
CPU_COST = re.compile(r"([FBIW]) ([\d.]+) ms")
SIMULATED = re.compile(r"simulated\s+step ([\d.]+) ms, bubble ([\d.]+)")


def spec_for(base, ranks, schedule, v, zb_auto=""):
    text = open(base).read()
    text = re.sub(r"(?m)^  stages: \d+", f"  stages: {ranks}", text)
    extra = f"\n  zb_auto: {zb_auto}" if zb_auto else ""
    text = re.sub(r"(?m)^  schedule: \S+", f"  schedule: {schedule}\n  virtual_stages: {v}{extra}", text)
    return text


def run(label, ranks, schedule, v, steps, workdir, zb_auto=""):
    """Trains `steps` steps; returns simulated step and bubble, measured step and mean bubble, the mean costs
    (text for --costs) and each rank's mean cost per kind (a dict per rank)."""
    spec = os.path.join(workdir, label.replace(" ", "_") + ".yaml")
    with open(spec, "w") as f:
        f.write(spec_for(os.path.join(ROOT, "configs", "example.yaml"), ranks, schedule, v, zb_auto))
    out = subprocess.run([PPCTL, "train", spec, "--steps", str(steps)], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{label}: ppctl train failed ({out.returncode}):\n{out.stderr[-2000:]}")
    ranks_seen = {}
    for m in TIMING.finditer(out.stderr):
        costs = {k: float(ms) for k, ms, _ in COST.findall(m.group(4))}
        ranks_seen[int(m.group(1))] = (float(m.group(2)), float(m.group(6)), costs)
    if len(ranks_seen) != ranks:
        sys.exit(f"{label}: expected {ranks} timing lines, got {len(ranks_seen)}")
    step = max(t[0] for t in ranks_seen.values())
    bubble = sum(t[1] for t in ranks_seen.values()) / ranks
    # Mean cost per kind over ranks; stages differ (embedding, head), the plan takes one value.
    mean = {k: sum(t[2].get(k, 0.0) for t in ranks_seen.values()) / ranks for k in "FBIW"}
    if mean["B"] == 0.0:
        mean["B"] = mean["I"] + mean["W"]
    if mean["I"] == 0.0:
        mean["I"] = mean["W"] = mean["B"] / 2
    costs = ",".join(f"{mean[k]:.3f}" for k in "FBIW")
    plan = subprocess.run([PPCTL, "plan", spec, "--costs", costs], capture_output=True, text=True)
    sim = SIMULATED.search(plan.stdout)
    if plan.returncode != 0 or not sim:
        sys.exit(f"{label}: ppctl plan failed:\n{plan.stderr}{plan.stdout[-1000:]}")
    per_rank = [ranks_seen[r][2] for r in range(ranks)]
    return float(sim.group(1)), float(sim.group(2)), step, bubble, costs, per_rank


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=12)
    args = parser.parse_args()
    subprocess.run([os.path.join(ROOT, "scripts", "build.sh"), "--target", "ppctl"], check=True,
                   stdout=subprocess.DEVNULL)
    print(f"{'configuration':<24} {'sim step ms':>11} {'meas step ms':>12} {'ratio':>6} "
          f"{'sim bubble':>10} {'meas bubble':>11}   costs F,B,I,W ms (measured means)")
    zb_h1_costs = {}  # p -> the zb-h1 row's per-rank costs (its W deferred)
    one_f_one_b_costs = {}  # p -> the 1f1b row's per-rank costs (its B unsplit: zb-auto's b)
    with tempfile.TemporaryDirectory() as workdir:
        for label, ranks, schedule, v in CONFIGS:
            zb_auto = ""
            if schedule == "zb-auto":
                kept = run(f"{label} probe", ranks, schedule, v, args.steps, workdir, "{defer_penalty: 1000000}")[5]
                zb_auto = zb_auto_mapping(kept, zb_h1_costs[ranks], one_f_one_b_costs.get(ranks))
                print(f"  {label}: pipeline.zb_auto {zb_auto}", flush=True)
            sim_step, sim_bubble, step, bubble, costs, per_rank = run(label, ranks, schedule, v, args.steps, workdir,
                                                                      zb_auto)
            if schedule == "zb-h1":
                zb_h1_costs[ranks] = per_rank
            if schedule == "1f1b":
                one_f_one_b_costs[ranks] = per_rank
            print(f"{label:<24} {sim_step:>11.1f} {step:>12.1f} {step / sim_step:>6.2f} "
                  f"{sim_bubble:>10.3f} {bubble:>11.3f}   {costs}", flush=True)


if __name__ == "__main__":
    main()
