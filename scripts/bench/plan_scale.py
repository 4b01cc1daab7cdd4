#!/usr/bin/env python3
"""Benchmark: `ppctl plan` at cluster scale (issue 13): dp 16 x pp 64 = 1,024 ranks, interleaved-1f1b with
v = 2 (128 stages of one block) and 256 microbatches. Runs the binary REPEATS times (process start,
library loading and printing included; output to /dev/null), and prints the min and median wall
time and the largest max resident set, next to a trivial `ppctl --version`-like baseline (`ppctl plan
--help`: the binary's start and exit without planning). Target: < 1 s. `ppctl` plans without LibTorch; the
same plan from ppctl-torch (which loads LibTorch, as `ppctl` did before issue 13 part 5) is the last row, for a
before/after under the same machine load.
Usage: scripts/bench/plan_scale.py [--repeats 5] [--no-build]   (PPCTL_BUILD_DIR overrides build/)"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("PPCTL_BUILD_DIR", ROOT / "build"))

SPEC = """model: {layers: 128, hidden: 8192, heads: 64, seq_len: 2048, vocab_size: 50304}
pipeline: {stages: 64, data_parallel: 16, schedule: interleaved-1f1b, virtual_stages: 2, microbatches: 256,
           micro_batch_size: 1}
data: {path: corpus.txt}
runtime: {device: cuda, precision: bf16, device_memory_gib: 80}
train: {recompute: full}
"""


def timed(args):
    """Wall seconds of one run of `args` (stdout discarded) and its max resident set in MiB."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return seconds, max(before, after) / 1024.0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-build", action="store_true")
    options = parser.parse_args()
    if not options.no_build:
        subprocess.run([str(ROOT / "scripts/build.sh"), "--target", "ppctl"], check=True, stdout=sys.stderr)
    binary = str(BUILD / "app/ppctl")
    torch_binary = str(BUILD / "app/ppctl-torch")
    with tempfile.TemporaryDirectory(prefix="ppctl_plan_scale_") as folder:
        folder = Path(folder)
        (folder / "corpus.txt").write_text("pack my box with five dozen liquor jugs\n" * 200_000)
        spec = folder / "job.yaml"
        spec.write_text(SPEC)
        print("| command | runs | min s | median s | max RSS MiB (all runs) |")
        print("|---|---:|---:|---:|---:|")
        for name, args in (("ppctl plan --help (start + exit)", [binary, "plan", "--help"]),
                           ("ppctl plan (dp 16 x pp 64, v 2, m 256)", [binary, "plan", str(spec)]),
                           ("ppctl-torch plan (the same, LibTorch loaded)", [torch_binary, "plan", str(spec)])):
            runs = [timed(args) for _ in range(options.repeats)]
            seconds = [s for s, _ in runs]
            print(f"| {name} | {len(runs)} | {min(seconds):.3f} | {statistics.median(seconds):.3f} | "
                  f"{max(r for _, r in runs):.0f} |")


if __name__ == "__main__":
    main()
