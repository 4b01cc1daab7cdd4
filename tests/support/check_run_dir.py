#!/usr/bin/env python3
"""Checks a run directory of a job started by torchrun or Slurm (rank 0 made it, every rank wrote into it).

Usage: check_run_dir.py RUNS_DIR --spec FILE --steps N --world W --pipeline P [--without-rank R]...
                        [--local] [--first-step F] [--stopped-by SIGNAL]
RUNS_DIR must hold exactly one run directory. Checked: config.yaml is the spec's exact text, plan.txt, one
rank<R>.log per rank (none for --without-rank) holding that rank's lines, no launcher.log (with --local, the local
launcher's: one), metrics.jsonl with one step line per step F..N (F = 1 unless given: a resumed run) and an end
line (with --stopped-by, one saying the run stopped early on SIGNAL after step N with a checkpoint), and trace.json
(none when F is past the spec's observe.trace_steps: a resumed run traces only steps up to it) with events of every pipeline rank 0..P-1 (but those without a part) whose slices nest on every track
(trace_nesting.py), no trace parts left. Prints the folder;
exits 1 naming the first thing wrong.
"""
import argparse
import json
import os
import re
import sys

from trace_nesting import nesting_problems


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("runs_dir")
    parser.add_argument("--spec", required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--pipeline", type=int, required=True)
    parser.add_argument("--without-rank", type=int, action="append", default=[])
    parser.add_argument("--local", action="store_true")
    parser.add_argument("--first-step", type=int, default=1)
    parser.add_argument("--stopped-by")
    args = parser.parse_args()

    def fail(why):
        print(f"check_run_dir: {why}", file=sys.stderr)
        sys.exit(1)

    runs = sorted(os.listdir(args.runs_dir)) if os.path.isdir(args.runs_dir) else []
    if len(runs) != 1:
        fail(f"{args.runs_dir} holds {len(runs)} run directories, expected 1: {runs}")
    run = os.path.join(args.runs_dir, runs[0])
    files = set(os.listdir(run))
    if open(os.path.join(run, "config.yaml")).read() != open(args.spec).read():
        fail("config.yaml is not the exact spec text")
    if "plan.txt" not in files or "bubble" not in open(os.path.join(run, "plan.txt")).read():
        fail("no plan.txt with the plan")
    if args.local and "launcher.log" not in files:
        fail("no launcher.log from the local launcher")
    if not args.local and "launcher.log" in files:
        fail("launcher.log written: there is no launcher under torchrun or Slurm")
    for rank in range(args.world):
        name = f"rank{rank}.log"
        if rank in args.without_rank:
            if name in files:
                fail(f"{name} written by a rank that cannot see the folder")
            continue
        if name not in files:
            fail(f"no {name} in {sorted(files)}")
        if f"[rank {rank}] info: " not in open(os.path.join(run, name)).read():
            fail(f"{name} lacks the rank's log lines")
    lines = [json.loads(line) for line in open(os.path.join(run, "metrics.jsonl"))]
    steps = [line["step"] for line in lines if line["event"] == "step"]
    if steps != list(range(args.first_step, args.steps + 1)):
        fail(f"metrics.jsonl has steps {steps}, expected {args.first_step}..{args.steps}")
    if lines[-1]["event"] != "end" or len(lines[-1]["peak_memory_bytes"]) != args.pipeline:
        fail(f"metrics.jsonl does not end with an end line for {args.pipeline} ranks: {lines[-1]}")
    if args.stopped_by is not None:
        end = lines[-1]
        if (end.get("stopped_by"), end.get("checkpointed"), end.get("steps")) != (args.stopped_by, True, args.steps):
            fail(f"the end line does not say the run stopped on {args.stopped_by} after step {args.steps} with a "
                 f"checkpoint: {end}")
    leftovers = sorted(f for f in files if f.startswith("trace.rank"))
    if leftovers:
        fail(f"trace parts left after the merge: {leftovers}")
    # observe.trace_steps (default 20) counts from step 1: a run resumed past it traces nothing.
    found = re.search(r"trace_steps:\s*(\d+)", open(args.spec).read())
    if args.first_step > (int(found.group(1)) if found else 20):
        if os.path.exists(os.path.join(run, "trace.json")):
            fail(f"trace.json written by a run that started at step {args.first_step}, past observe.trace_steps")
        print(run)
        return
    events = json.load(open(os.path.join(run, "trace.json")))["traceEvents"]
    # A rank's schedule is on track R; its gradient reductions (category "reduce") on track
    # pipeline + R, "rank R collectives".
    traced = {e["tid"] for e in events if e["ph"] == "X" and e.get("cat") != "reduce"}
    expected = set(range(args.pipeline)) - set(args.without_rank)
    if traced != expected:
        fail(f"trace.json has events of ranks {sorted(traced)}, expected {sorted(expected)}")
    # On every track (a rank's schedule, its collectives) slices nest exactly as Perfetto reads them
    # (trace_nesting.py: whole nanoseconds by its truncation).
    problems = nesting_problems(events)
    if problems:
        track, text = problems[0]
        fail(f"trace.json track {track[1]}: {text} ({len(problems)} slices do not nest)")
    reduced = {e["tid"] for e in events if e["ph"] == "X" and e.get("cat") == "reduce"}
    if not reduced <= {args.pipeline + r for r in expected}:
        fail(f"trace.json has gradient reductions on tracks {sorted(reduced)}, expected a subset of "
             f"{sorted(args.pipeline + r for r in expected)}")
    print(run)


if __name__ == "__main__":
    main()
