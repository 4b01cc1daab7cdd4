#!/usr/bin/env python3
"""Benchmark: `ppctl plan --tune` against measurement (issue 27 item 3), CPU over Gloo.

For each job (a model of vs_torch.py's MODELS at a stage count p; default JOBS: tiny p2, small p2, small p4,
llama-small p2, llama-small p4, each 1f1b with vs_torch.py's microbatching: m 8 x micro_batch_size 4):
  1. a probe run of the job as written (`--probe-steps` steps, traced) gives the per-layer costs, and a second
     probe at micro_batch_size 1 (m = the job's m x micro_batch_size; 2 when the job's is 1) the costs at
     another size, so that the tuner fits each time as a fixed part plus a part per sequence
     (`--one-probe`: the first only, the proportional model);
  2. `ppctl plan JOB --tune --layer-costs PROBE_RUN_DIR [--layer-costs PROBE2_RUN_DIR] --defer-penalty D` lists
     the top configurations
     (D = --defer-share x the probe's mean W per stage: a W deferred from its I costs that much more on CPUs,
     docs/benchmarks.md);
     The tuner calibrates its steps on the probes' measured steps (its `calibrated` line): the predicted step
     is that, the simulated step the schedule alone;
  3. each listed configuration (its YAML lines merged into the job's spec) trains `--warmup` + `--steps` steps,
     `--repeats` times, alternating; the measured step is the mean wall time of the steps after the warmup
     (tokens per step / the logged tok/s), the median over the repeats.
Prints one row per configuration: job, rank of choice, YAML lines, simulated and predicted step ms, measured step ms, error
%, and per job whether the first choice was the measured fastest; then the summary line against the issue's
goals (first choice = measured fastest in >= 4 of 5 jobs; every predicted step within 10% of measured).
`--quick`: one job (tiny p2), the top 2, 1 warmup + 2 steps, 1 repeat: proves the script works (not a
measurement). Python standard library and PyYAML: run it with the venv's python, which has PyYAML
(`"$(scripts/setup.sh)" scripts/bench/tuner.py`: setup prints it); builds ppctl first via scripts/build.sh unless
--no-build.
Usage: scripts/bench/tuner.py [--quick] [--jobs tiny:2,small:4] [--top 5] [--steps 20] [--warmup 3]
       [--repeats 2] [--probe-steps 6] [--defer-share 0.2] [--one-probe] [--data GLOB] [--no-build]
"""
import argparse
import glob
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_common import ROOT, build_ppctl, print_machine_line  # noqa: E402
from schedules import COST, TIMING  # noqa: E402  (the per-rank timing lines of `ppctl train`)
from vs_torch import LLAMA_KEYS, MODELS, OPTIMIZER, SEED, STEP_LINE  # noqa: E402

BUILD = os.environ.get("PPCTL_BUILD_DIR", os.path.join(ROOT, "build"))
PPCTL = os.path.join(BUILD, "app", "ppctl")
JOBS = [("tiny", 2), ("small", 2), ("small", 4), ("llama-small", 2), ("llama-small", 4)]
LISTED = re.compile(r"^ *(\d+)\. step ([\d.]+)(?:, predicted ([\d.]+))?, bubble ([\d.]+), peak (.*) per rank "
                    r"\(pp rank \d+\)  (.*)$")


def job_spec(model, stages, data, threads):
    """The job as written (1f1b, vs_torch.py's model and microbatching), as a dict."""
    s = MODELS[model]
    spec = {"model": {"vocab_size": 256, "layers": s["layers"], "hidden": s["hidden"], "heads": s["heads"],
                      "seq_len": s["seq_len"], "dropout": 0.0, "tie_embeddings": False,
                      **{k: s[k] for k in LLAMA_KEYS if k in s}},
            "pipeline": {"stages": stages, "schedule": "1f1b", "microbatches": s["microbatches"],
                         "micro_batch_size": s["micro_batch_size"]},
            "data": {"path": [data]},
            "optimizer": dict(OPTIMIZER),
            "train": {"steps": 1, "seed": SEED, "log_interval": 1},
            "runtime": {"device": "cpu", "threads_per_worker": threads},
            "observe": {"tensorboard": False}}
    return spec


def write(path, spec):
    with open(path, "w") as f:
        yaml.safe_dump(spec, f, sort_keys=False)
    return path


def train(spec_path, steps, warmup, tokens_per_step, run_dir=None):
    """Runs `ppctl train`; returns (per-rank timing dicts, mean seconds of the steps after `warmup`)."""
    command = [PPCTL, "train", spec_path] + (["--run-dir", run_dir] if run_dir else [])
    proc = subprocess.run(command, capture_output=True, text=True)
    out = proc.stdout + proc.stderr
    seconds = [tokens_per_step / float(m.group(3)) for m in STEP_LINE.finditer(out)]
    if proc.returncode != 0 or len(seconds) != steps:
        raise SystemExit(f"tuner: `{' '.join(command)}` failed ({proc.returncode}):\n{out[-3000:]}")
    timing = {int(m.group(1)): {k: float(ms) for k, ms, _ in COST.findall(m.group(4))} for m in TIMING.finditer(out)}
    return timing, statistics.mean(seconds[warmup:])


def listed_configurations(text):
    """The tuner's listed configurations: (rank, predicted step ms, simulated step ms, description, YAML lines);
    the predicted step is the calibrated one where the tuner printed it, else the simulated step."""
    out, lines = [], text.splitlines()
    for i, line in enumerate(lines):
        m = LISTED.match(line)
        if not m:
            continue
        block = []
        for follow in lines[i + 1:]:
            if not follow.startswith("      "):
                break
            block.append(follow[6:])
        predicted = m.group(3) or m.group(2)  # calibrated on the probes' measured steps, else the simulated step
        out.append((int(m.group(1)), float(predicted), float(m.group(2)), m.group(6), block))
    return out


def merged(spec, block):
    """`spec` (a dict) with the tuner's YAML lines applied: each `section: {...}` merged, `# remove:` keys dropped."""
    spec = yaml.safe_load(yaml.safe_dump(spec))
    for line in block:
        if line.startswith("# remove: "):
            for path in line[len("# remove: "):].split(", "):
                section, key = path.split(".", 1)
                spec.get(section, {}).pop(key, None)
            continue
        for section, values in yaml.safe_load(line).items():
            spec.setdefault(section, {}).update(values)
    return spec


def second_probe_size(microbatches, micro_batch_size):
    """The second probe's micro batch size: 1, or 2 when the job's is 1; None when the batch allows no other."""
    batch = microbatches * micro_batch_size
    if micro_batch_size != 1:
        return 1
    return 2 if batch % 2 == 0 else None


def run_job(model, stages, args, workdir):
    """Probe, tune, time the listed configurations. Returns the rows of the job."""
    label = f"{model} p{stages}"
    base = job_spec(model, stages, args.data, args.threads)
    s = MODELS[model]
    tokens_per_step = s["microbatches"] * s["micro_batch_size"] * s["seq_len"]
    probe = dict(base, train=dict(base["train"], steps=args.probe_steps))
    probe_dir = os.path.join(workdir, f"{model}_p{stages}_probe")
    spec_path = write(os.path.join(workdir, f"{model}_p{stages}.yaml"), probe)
    timing, _ = train(spec_path, args.probe_steps, 1, tokens_per_step, probe_dir)
    w = [timing[r].get("B", 0.0) / 2 for r in sorted(timing)]  # a split backward's W: half of B (plan's model)
    defer = args.defer_share * statistics.mean(w) if w else 0.0
    command = [PPCTL, "plan", spec_path, "--tune", "--layer-costs", probe_dir, "--defer-penalty", f"{defer:.4f}"]
    probes = f"probe {probe_dir}"
    mbs2 = None if args.one_probe else second_probe_size(s["microbatches"], s["micro_batch_size"])
    if mbs2 is not None:
        batch = s["microbatches"] * s["micro_batch_size"]
        probe2 = dict(probe, pipeline=dict(probe["pipeline"], microbatches=batch // mbs2, micro_batch_size=mbs2))
        probe2_dir = os.path.join(workdir, f"{model}_p{stages}_probe_mbs{mbs2}")
        spec2_path = write(os.path.join(workdir, f"{model}_p{stages}_mbs{mbs2}.yaml"), probe2)
        train(spec2_path, args.probe_steps, 1, tokens_per_step, probe2_dir)
        command += ["--layer-costs", probe2_dir]
        probes = f"probes {probe_dir} (mbs {s['micro_batch_size']}) and {probe2_dir} (mbs {mbs2})"
    plan = subprocess.run(command, capture_output=True, text=True)
    if plan.returncode != 0:
        raise SystemExit(f"tuner: `{' '.join(command)}` failed ({plan.returncode}):\n{plan.stdout}{plan.stderr}")
    listed = listed_configurations(plan.stdout)[: args.top]
    if not listed:
        raise SystemExit(f"tuner: no configuration listed by `{' '.join(command)}`:\n{plan.stdout}")
    print(f"  {label}: {probes}, defer penalty {defer:.3f} ms; {len(listed)} configurations", flush=True)
    measured = {rank: [] for rank, _, _, _, _ in listed}
    steps = args.warmup + args.steps
    for repeat in range(args.repeats):
        for rank, _, _, _, block in listed:
            spec = merged(base, block)
            spec["train"]["steps"] = steps
            spec.setdefault("observe", {})["trace_steps"] = 0
            path = write(os.path.join(workdir, f"{model}_p{stages}_{rank}.yaml"), spec)
            measured[rank].append(1000.0 * train(path, steps, args.warmup, tokens_per_step)[1])
    rows = []
    for rank, predicted, simulated, description, block in listed:
        ms = statistics.median(measured[rank])
        rows.append({"job": label, "rank": rank, "description": description, "lines": block, "predicted": predicted,
                     "simulated": simulated, "measured": ms, "error": 100.0 * (predicted - ms) / ms})
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke run: tiny p2, top 2, 1 + 2 steps, 1 repeat")
    parser.add_argument("--jobs", help="comma-separated MODEL:P (default: " +
                        ",".join(f"{m}:{p}" for m, p in JOBS) + ")")
    parser.add_argument("--top", type=int, default=5, help="configurations timed per job (default 5)")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per run (default 20)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps at the start of each run (default 3)")
    parser.add_argument("--repeats", type=int, default=2, help="runs per configuration, alternating (default 2)")
    parser.add_argument("--probe-steps", type=int, default=6, help="steps of the probe run (default 6)")
    parser.add_argument("--defer-share", type=float, default=0.2,
                        help="a deferred W's extra cost as a share of W (default 0.2, docs/benchmarks.md)")
    parser.add_argument("--one-probe", action="store_true",
                        help="one probe only: the tuner's proportional model (the earlier benchmark)")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads per rank (default 1)")
    parser.add_argument("--data", default="/usr/share/games/fortunes/*.u8", help="text files (glob)")
    parser.add_argument("--no-build", action="store_true", help="use the ppctl already built")
    args = parser.parse_args()
    jobs = JOBS
    if args.jobs:
        try:
            jobs = [(m, int(p)) for m, p in (item.split(":") for item in args.jobs.split(","))]
        except ValueError:
            parser.error(f"--jobs {args.jobs}: give MODEL:P pairs, e.g. tiny:2,small:4")
        unknown = [m for m, _ in jobs if m not in MODELS]
        if unknown or any(p < 2 for _, p in jobs):
            parser.error(f"--jobs {args.jobs}: models from {', '.join(MODELS)}, P at least 2")
    if args.quick:
        jobs, args.top, args.steps, args.warmup, args.repeats, args.probe_steps = [("tiny", 2)], 2, 2, 1, 1, 3
    for option, value, least in (("--top", args.top, 1), ("--steps", args.steps, 1), ("--warmup", args.warmup, 1),
                                 ("--repeats", args.repeats, 1), ("--probe-steps", args.probe_steps, 2),
                                 ("--threads", args.threads, 1)):
        if value < least:
            parser.error(f"{option} {value}: must be at least {least}")
    if not 0.0 <= args.defer_share <= 10.0:
        parser.error(f"--defer-share {args.defer_share}: must be in [0, 10]")
    args.data = os.path.abspath(os.path.expanduser(args.data))
    if not glob.glob(args.data):
        parser.error(f"--data {args.data}: no file matches (give text files; quote a glob)")
    build_ppctl(args)
    print_machine_line()
    start = time.monotonic()
    rows = []
    with tempfile.TemporaryDirectory(prefix="ppctl_tuner_") as workdir:
        for model, stages in jobs:
            rows += run_job(model, stages, args, workdir)
    print("\n| job | rank | configuration (YAML lines) | simulated ms | predicted ms | measured ms | error % "
          "| first = fastest |")
    print("|---|---:|---|---:|---:|---:|---:|---|")
    hits, within, jobs_done = 0, 0, []
    for job in dict.fromkeys(r["job"] for r in rows):
        mine = [r for r in rows if r["job"] == job]
        fastest = min(mine, key=lambda r: r["measured"])
        first_is_fastest = fastest["rank"] == 1
        hits += first_is_fastest
        jobs_done.append(job)
        for r in mine:
            within += abs(r["error"]) <= 10.0
            lines = "<br>".join(r["lines"]).replace("|", "\\|")
            verdict = ("yes" if first_is_fastest else f"no (fastest: rank {fastest['rank']})") if r["rank"] == 1 else ""
            print(f"| {job} | {r['rank']} | {r['description']}: `{lines}` | {r['simulated']:.2f} | {r['predicted']:.2f} | "
                  f"{r['measured']:.2f} | {r['error']:+.1f} | {verdict} |")
    print(f"\nsummary: first choice = measured fastest in {hits} of {len(jobs_done)} jobs (goal: >= 4 of 5); "
          f"predicted within 10% of measured for {within} of {len(rows)} configurations (goal: all); "
          f"{time.monotonic() - start:.0f} s")


if __name__ == "__main__":
    main()
