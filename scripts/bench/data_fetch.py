#!/usr/bin/env python3
"""Benchmark of the token data path (issue 10): per-step cost of fetching samples against the step time,
and worker resident memory with a 2 GB dataset against a 2 MB one. Prints a table.

For each dataset (Megatron indexed, uint16; the 2 GB one is a sparse file: its ids are 0) it
  1. runs bench/data_fetch: Dataset::sample for STEPS global batches of the job, microseconds per step;
  2. runs `ppctl train` of the job (2 stages, CPU) and reads each worker's step time ("timing over N
     steps: schedule X ms per step") and max resident set ("memory: max resident set X MiB").
Targets: fetch < 1% of the step; max RSS with 2 GB within 10 MB of that with 2 MB.
Usage: scripts/bench/data_fetch.py [--steps 20] [--no-build]   (PPCTL_BUILD_DIR overrides build/)"""
import argparse
import os
import re
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("PPCTL_BUILD_DIR", ROOT / "build"))
DOC_TOKENS = 1 << 20  # tokens per document of the generated datasets


def write_dataset(prefix: Path, total_bytes: int):
    """A uint16 Megatron dataset of total_bytes in the .bin; the 2 GB one sparse (ftruncate: zeros)."""
    tokens = total_bytes // 2
    with open(f"{prefix}.bin", "wb") as f:
        if total_bytes > (64 << 20):
            f.truncate(total_bytes)
        else:
            f.write(struct.pack(f"<{tokens}H", *((k * 7919) % 1000 for k in range(tokens))))
    lengths = [min(DOC_TOKENS, tokens - s) for s in range(0, tokens, DOC_TOKENS)]
    pointers, at = [], 0
    for n in lengths:
        pointers.append(at)
        at += 2 * n
    s = len(lengths)
    idx = b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, s, s + 1)
    idx += struct.pack(f"<{s}i", *lengths) + struct.pack(f"<{s}q", *pointers) + struct.pack(f"<{s + 1}q", *range(s + 1))
    Path(f"{prefix}.idx").write_bytes(idx)


def job(folder: Path, prefix: Path, steps: int) -> Path:
    spec = folder / f"{prefix.name}.yaml"
    spec.write_text(f"""model: {{vocab_size: 1000, layers: 4, hidden: 128, heads: 4, seq_len: 128, dropout: 0.0}}
pipeline: {{stages: 2, schedule: 1f1b, microbatches: 8, micro_batch_size: 4}}
data: {{format: megatron, path: {prefix}, eval_fraction: 0.01}}
train: {{steps: {steps}, seed: 1, log_interval: 1000}}
observe: {{trace_steps: 0, runs_dir: {folder}/runs}}
""")
    return spec


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--no-build", action="store_true")
    args = parser.parse_args()
    if not args.no_build:
        subprocess.run([ROOT / "scripts/build.sh", "--target", "ppctl", "--target", "data_fetch"], check=True,
                       stdout=subprocess.DEVNULL)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name, size in (("2MB", 2 << 20), ("2GB", 2 << 30)):
            prefix = folder / f"ds_{name}"
            write_dataset(prefix, size)
            spec = job(folder, prefix, args.steps)
            fetch = subprocess.run([BUILD / "bench/data_fetch", spec, "200"], check=True, capture_output=True,
                                   text=True).stdout.split()
            fetch_us = float(fetch[1])
            out = subprocess.run([BUILD / "app/ppctl", "train", spec], capture_output=True, text=True)
            if out.returncode != 0:
                sys.exit(f"train on {name} failed:\n{out.stdout}\n{out.stderr}")
            log = out.stdout + out.stderr
            step_ms = [float(x) for x in re.findall(r"schedule ([0-9.]+) ms per step", log)]
            rss = [float(x) for x in re.findall(r"max resident set ([0-9.]+) MiB", log)]
            rows.append((name, fetch_us, max(step_ms), rss, int(fetch[5]), int(fetch[7])))
    print(f"{'dataset':8} {'fetch/step (us)':>16} {'step (ms)':>10} {'fetch share':>12} "
          f"{'worker max RSS (MiB)':>24} {'bench RssAnon/RssFile (KiB)':>28}")
    for name, fetch_us, step_ms, rss, anon, file_kib in rows:
        print(f"{name:8} {fetch_us:16.1f} {step_ms:10.2f} {fetch_us / 1000 / step_ms:12.4%} "
              f"{' / '.join(f'{r:.1f}' for r in rss):>24} {f'{anon} / {file_kib}':>28}")
    delta = max(rows[1][3]) - max(rows[0][3])
    print(f"max worker RSS, 2GB - 2MB: {delta:+.1f} MiB (target: within 10 MB); "
          f"fetch share of the step: {max(r[1] / 1000 / r[2] for r in rows):.4%} (target: < 1%)")


if __name__ == "__main__":
    main()
