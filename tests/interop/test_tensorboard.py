"""ppctl's TensorBoard event files read by TensorBoard's own reader (EventAccumulator, PyPI tensorboard).
Usage: test_tensorboard.py PPCTL

One short run (2 stages, 6 steps, evaluation every 2, a checkpoint at step 3 and 6), then:
  - its run directory holds one event file, file_version "brain.Event:2", and every tag holds the
    numbers of metrics.jsonl step for step (as float: TensorBoard keeps scalars as float32);
  - the file cut inside a record (in its length, its checksum, its data or its data checksum) still
    loads, up to the last whole record;
  - resuming (--resume, to step 9) writes a new event file in the new run directory whose steps go on
    from 7, and leaves the first run's file as it was; TensorBoard sees both runs under runs/;
  - a run restarted by train.max_restarts (a worker killed after step 6, checkpoints every 5) writes one event
    file per attempt into the same tb/, and TensorBoard shows every step once, with the numbers of the attempt
    that wrote it last (metrics.attempt1.jsonl up to the checkpoint, metrics.jsonl after it);
  - observe.tensorboard: false writes no event file.
"""
import json
import math
import pathlib
import shutil
import struct
import subprocess
import sys
import tempfile

import os
import re
import signal
import time

import numpy as np
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader
from tensorboard.backend.event_processing.event_multiplexer import EventMultiplexer

PPCTL = sys.argv[1]

# TensorBoard tag -> metrics.jsonl field of a "step" line.
STEP_TAGS = {"train/loss": "loss", "train/lr": "lr", "train/grad_norm": "grad_norm",
             "train/tokens_per_s": "tokens_per_s", "train/step_time_s": "step_time_s",
             "train/tflops": "tflops", "train/mfu": "mfu", "memory/peak_bytes": "peak_memory_bytes"}
# bubble/<kind>/rank<r> -> metrics.jsonl field of the "end" line (a list per rank).
BUBBLE_KINDS = {"measured": "bubble_measured", "planned": "bubble_planned", "simulated": "bubble_simulated"}


def fail(message):
    sys.exit(f"FAIL: {message}")


def run(cmd):
    result = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        fail(f"{' '.join(map(str, cmd))} exited {result.returncode}\n"
             f"stdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-5000:]}")
    return result


def write_job(folder, extra=""):
    corpus = folder / "corpus.txt"
    corpus.write_text("".join(f"line {i}: pack my box with five dozen liquor jugs\n" for i in range(300)))
    spec = folder / "job.yaml"
    spec.write_text(f"""model: {{layers: 4, hidden: 32, heads: 4, seq_len: 32, dropout: 0.0}}
pipeline: {{stages: 2, schedule: 1f1b, microbatches: 4, micro_batch_size: 2}}
data: {{path: {corpus}, eval_fraction: 0.1}}
optimizer: {{lr: 0.003}}
train: {{steps: 9, seed: 1, log_interval: 5}}
eval: {{interval: 2, batches: 1}}
runtime: {{comm_timeout_s: 30}}
observe: {{runs_dir: {folder / 'runs'}, trace_steps: 0, peak_tflops: 1.0}}
{extra}""")
    return spec


def event_files(run_dir):
    return sorted((run_dir / "tb").glob("*tfevents*"))


def load(path):
    accumulator = EventAccumulator(str(path), size_guidance={"scalars": 0})  # 0: keep every event
    accumulator.Reload()
    return accumulator


def f32(value):
    """What TensorBoard holds for a metrics.jsonl number (null: NaN)."""
    return float(np.float32(math.nan if value is None else value))


def expected_scalars(metrics_path):
    """{tag: [(step, value), ...]} from metrics.jsonl, values rounded as TensorBoard keeps them."""
    expected = {}
    for line in map(json.loads, metrics_path.read_text().splitlines()):
        if line["event"] == "step":
            for tag, field in STEP_TAGS.items():
                if field == "mfu" and line["mfu"] is None:
                    continue
                expected.setdefault(tag, []).append((line["step"], f32(line[field])))
        elif line["event"] == "eval":
            expected.setdefault("eval/loss", []).append((line["step"], f32(line["loss"])))
        elif line["event"] == "end" and line["bubble_measured"] is not None:
            for kind, field in BUBBLE_KINDS.items():
                for rank, value in enumerate(line[field]):
                    expected.setdefault(f"bubble/{kind}/rank{rank}", []).append((line["steps"], f32(value)))
    return expected


def actual_scalars(accumulator):
    return {tag: [(e.step, e.value) for e in accumulator.Scalars(tag)] for tag in accumulator.Tags()["scalars"]}


def same(a, b):
    """Scalar lists equal, NaN equal to NaN."""
    return len(a) == len(b) and all(sa == sb and (va == vb or (math.isnan(va) and math.isnan(vb)))
                                    for (sa, va), (sb, vb) in zip(a, b))


def check_run(run_dir, first_step, last_step):
    """The run's one event file holds metrics.jsonl's numbers; returns its path."""
    files = event_files(run_dir)
    if len(files) != 1:
        fail(f"{run_dir}/tb holds {[f.name for f in files]}, expected one event file")
    first_event = next(iter(LegacyEventFileLoader(str(files[0])).Load()))
    if first_event.file_version != "brain.Event:2":
        fail(f"{files[0]}: the first record's file_version is {first_event.file_version!r}")
    accumulator = load(files[0])
    if accumulator.file_version != 2.0:  # the number after "brain.Event:"
        fail(f"{files[0]}: TensorBoard reads file version {accumulator.file_version!r}")
    expected = expected_scalars(run_dir / "metrics.jsonl")
    actual = actual_scalars(accumulator)
    if sorted(actual) != sorted(expected):
        fail(f"{files[0]}: tags {sorted(actual)}, metrics.jsonl gives {sorted(expected)}")
    for tag in expected:
        if not same(actual[tag], expected[tag]):
            fail(f"{files[0]}: {tag} holds {actual[tag]}, metrics.jsonl {expected[tag]}")
    steps = [step for step, _ in actual["train/loss"]]
    if steps != list(range(first_step, last_step + 1)):
        fail(f"{files[0]}: train/loss at steps {steps}, expected {first_step}..{last_step}")
    for tag in ("train/mfu", "eval/loss", "bubble/measured/rank1", "bubble/planned/rank0"):
        if tag not in actual:
            fail(f"{files[0]}: no {tag}")
    print(f"{run_dir.name}: {len(actual)} tags equal metrics.jsonl at steps {first_step}..{last_step}")
    return files[0]


def worker_pid(spec, rank):
    """The pid of the `ppctl worker SPEC` process whose environment has RANK=rank, or None."""
    for entry in os.listdir("/proc"):
        try:
            cmdline = open(f"/proc/{entry}/cmdline", "rb").read().split(b"\0")
            environ = open(f"/proc/{entry}/environ", "rb").read().split(b"\0")
        except (OSError, ValueError):
            continue
        if b"worker" in cmdline and str(spec).encode() in cmdline and f"RANK={rank}".encode() in environ:
            return int(entry)
    return None


def restart_once(folder):
    """Runs the job, kills the worker of rank 1 once metrics.jsonl holds step 6 (checkpoints every 5 steps) and
    lets train.max_restarts resume it. Returns (run directory, event files, the step resumed after, the steps of
    the first attempt's event file)."""
    folder.mkdir(parents=True)
    spec = write_job(folder, "checkpoint: {dir: " + str(folder / "ckpt") + ", interval: 5}")
    spec.write_text(spec.read_text().replace("steps: 9,", "steps: 30,").replace(
        "log_interval: 5}", "log_interval: 1, max_restarts: 1, restart_backoff_s: 0}"))
    run_dir = folder / "run"
    launcher = subprocess.Popen([PPCTL, "train", str(spec), "--run-dir", str(run_dir)], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
    try:
        metrics = run_dir / "metrics.jsonl"
        deadline = time.monotonic() + 120
        while not (metrics.exists() and '"step":6' in metrics.read_text().replace(" ", "")):
            if time.monotonic() > deadline or launcher.poll() is not None:
                fail("the first attempt did not reach step 6")
            time.sleep(0.05)
        pid = worker_pid(spec, 1)
        if pid is None:
            fail("no worker with RANK=1")
        os.kill(pid, signal.SIGKILL)
        output, _ = launcher.communicate(timeout=240)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    resumed = re.search(r"resumed from \S+ after step (\d+)", output)
    if launcher.returncode != 0 or "restart 1 of 1" not in output or not resumed:
        fail(f"the restarted run exited {launcher.returncode} or did not resume:\n{output[-4000:]}")
    files = event_files(run_dir)
    if len(files) != 2:
        fail(f"{run_dir}/tb holds {[f.name for f in files]}, expected one event file per attempt")
    first_steps = {e.step for e in LegacyEventFileLoader(str(files[0])).Load() if e.HasField("summary")}
    return run_dir, files, int(resumed.group(1)), first_steps


def check_restart(folder):
    """A worker killed after step 6 (checkpoints every 5 steps): each attempt's event file in tb/, every step
    shown once with the numbers of the last attempt that wrote it. The case needs the first attempt to have
    logged steps after the checkpoint the restart resumed from; when the kill came too late for that (a loaded
    machine ran on to the next checkpoint first), it is tried again, up to 3 times."""
    for attempt in range(1, 4):
        run_dir, files, resumed_after, first_steps = restart_once(folder / f"try{attempt}")
        if max(first_steps) > resumed_after:
            break
        print(f"try {attempt}: the first attempt's event file ends at step {max(first_steps)}, the checkpoint the "
              f"restart resumed from: nothing written twice, trying again")
    else:
        fail(f"the first attempt's event file holds steps {sorted(first_steps)}: nothing after the checkpoint of "
             f"step {resumed_after}, which the restart resumed from, in 3 tries")
    # Per tag and step, the value of the last attempt that wrote the step.
    expected = {}
    for path in (run_dir / "metrics.attempt1.jsonl", run_dir / "metrics.jsonl"):
        for tag, points in expected_scalars(path).items():
            expected.setdefault(tag, {}).update(dict(points))
    actual = actual_scalars(load(run_dir / "tb"))
    if sorted(actual) != sorted(expected):
        fail(f"restarted run: tags {sorted(actual)}, metrics give {sorted(expected)}")
    for tag, points in expected.items():
        if not same(actual[tag], sorted(points.items())):
            fail(f"restarted run: {tag} holds {actual[tag]}, expected each step once: {sorted(points.items())}")
    print(f"restarted run: {len(files)} event files; TensorBoard shows steps 1..{actual['train/loss'][-1][0]} once "
          f"each (the first attempt wrote up to {max(first_steps)}, the second resumed after {resumed_after})")


def record_offsets(data):
    """Start offset and data length of each TFRecord in `data`."""
    records, at = [], 0
    while at < len(data):
        (length,) = struct.unpack_from("<Q", data, at)
        records.append((at, length))
        at += length + 16
    if at != len(data):
        fail("the event file does not end at a record's end")
    return records


def check_cut(path, folder):
    """A copy cut inside record k loads records 0..k-1, for several k and places in the record."""
    data = path.read_bytes()
    records = record_offsets(data)
    events = list(LegacyEventFileLoader(str(path)).Load())  # record k = events[k], as written
    if len(events) != len(records):
        fail(f"{path}: {len(records)} records but TensorBoard reads {len(events)} events")
    for k in (1, len(records) // 2, len(records) - 1):
        start, length = records[k]
        for where, cut in (("length", start + 3), ("length checksum", start + 10),
                           ("data", start + 12 + length // 2), ("data checksum", start + 12 + length + 2)):
            cut_dir = folder / f"cut-{k}-{where.replace(' ', '-')}"
            cut_dir.mkdir()
            cut_file = cut_dir / path.name
            cut_file.write_bytes(data[:cut])
            expected = {}
            for event in events[1:k]:
                for value in event.summary.value:
                    expected.setdefault(value.tag, []).append((event.step, value.simple_value))
            actual = actual_scalars(load(cut_file))
            if sorted(actual) != sorted(expected) or not all(same(actual[t], expected[t]) for t in expected):
                fail(f"cut inside record {k} ({where}): TensorBoard loads {actual}, expected {expected}")
    print(f"cut files load up to the last whole record ({len(records)} records, 12 cuts)")


def main():
    with tempfile.TemporaryDirectory(prefix="ppctl_tensorboard_") as tmp:
        folder = pathlib.Path(tmp)
        spec = write_job(folder, "checkpoint: {dir: " + str(folder / "ckpt") + ", interval: 3}")
        run([PPCTL, "train", spec, "--steps", 6])
        (first,) = sorted((folder / "runs").iterdir())
        first_file = check_run(first, 1, 6)
        first_bytes = first_file.read_bytes()
        check_cut(first_file, folder)

        result = run([PPCTL, "train", spec, "--resume"])
        if "resumed from" not in result.stderr + result.stdout:
            fail("the second run did not resume")
        runs = sorted((folder / "runs").iterdir())
        if len(runs) != 2:
            fail(f"runs/ holds {[r.name for r in runs]}, expected two run directories")
        second = next(r for r in runs if r != first)
        second_file = check_run(second, 7, 9)
        if second_file.name == first_file.name or first_file.read_bytes() != first_bytes:
            fail("resuming changed the first run's event file or reused its name")
        multiplexer = EventMultiplexer(size_guidance={"scalars": 0}).AddRunsFromDirectory(str(folder / "runs"))
        multiplexer.Reload()
        seen = {run_name: [e.step for e in multiplexer.Scalars(run_name, "train/loss")]
                for run_name in multiplexer.Runs()}
        if sorted(seen.values()) != [[1, 2, 3, 4, 5, 6], [7, 8, 9]]:
            fail(f"tensorboard --logdir runs would show {seen}")
        print(f"resumed run: a new event file, steps 7..9; --logdir runs shows {len(seen)} runs")

        check_restart(folder / "restart")

        off = write_job(folder, "")
        off.write_text(off.read_text().replace("peak_tflops: 1.0}", "peak_tflops: 1.0, tensorboard: false}"))
        run([PPCTL, "train", off, "--steps", 1, "--run-dir", folder / "off"])
        if (folder / "off" / "tb").exists() or not (folder / "off" / "metrics.jsonl").exists():
            fail("observe.tensorboard: false still wrote event files (or no metrics.jsonl)")
        print("observe.tensorboard: false: no event file")
    print("PASS")


if __name__ == "__main__":
    main()
