#!/usr/bin/env python3
"""Packing efficiency of chat datasets: the share of window positions that hold a conversation's token, for
ppctl's best-fit decreasing packing (read from `ppctl plan`'s `packing` line, so the number is the trainer's own)
against one conversation per window padded to seq_len (what training without packing does) and a greedy
sequential packing (conversations in file order, a window closed when the next one does not fit: torchtune's
PackedDataset with split_across_pack=False).

The data: --conversations conversations whose token lengths are drawn log-normally (median --median, sigma
--sigma, at least 8 tokens), the spread of SFT sets such as multi-turn assistant data (most conversations a few
hundred tokens, a tail of long ones); ids random, the last 60% of each conversation a target. Written as a chat
dataset (PREFIX.bin/.idx and PREFIX.loss_mask.bin/.idx) by megatron-core's IndexedDatasetBuilder. Conversations
longer than seq_len are dropped (data.overlong: drop) by every method alike.

Prints a table per seq_len: method, windows, efficiency, target share, and the time `ppctl plan` took (its
packing included).

Usage: scripts/bench/packing_efficiency.py [--ppctl build/app/ppctl] [--conversations 20000] [--median 350]
           [--sigma 0.9] [--seq-lens 1024,2048,4096]
"""
import argparse
import math
import pathlib
import random
import re
import subprocess
import sys
import tempfile
import time

import numpy
import torch


def lengths_of(count, median, sigma, seed=1):
    rng = random.Random(seed)
    return [max(8, int(rng.lognormvariate(math.log(median), sigma))) for _ in range(count)]


def write_dataset(prefix, lengths):
    from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder
    rng = numpy.random.default_rng(2)
    tokens = IndexedDatasetBuilder(f"{prefix}.bin", dtype=numpy.uint16)
    masks = IndexedDatasetBuilder(f"{prefix}.loss_mask.bin", dtype=numpy.uint8)
    for n in lengths:
        tokens.add_item(torch.from_numpy(rng.integers(0, 1000, n, dtype=numpy.int64)))
        tokens.end_document()
        prompt = int(0.4 * n)
        masks.add_item(torch.tensor([0] * prompt + [1] * (n - prompt), dtype=torch.int64))
        masks.end_document()
    tokens.finalize(f"{prefix}.idx")
    masks.finalize(f"{prefix}.loss_mask.idx")


def greedy_sequential(lengths, seq_len):
    windows, free = 0, 0
    for n in lengths:
        if n > free:
            windows += 1
            free = seq_len
        free -= n
    return windows


def ppctl_packing(ppctl, folder, prefix, seq_len):
    spec = folder / f"plan-{seq_len}.yaml"
    spec.write_text(f"model: {{vocab_size: 1000, layers: 2, hidden: 64, heads: 4, seq_len: {seq_len}}}\n"
                    f"data: {{format: megatron, path: {prefix}, overlong: drop}}\n"
                    f"pipeline: {{stages: 2, microbatches: 4}}\n")
    start = time.perf_counter()
    result = subprocess.run([ppctl, "plan", str(spec)], capture_output=True, text=True, timeout=1800)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"ppctl plan failed:\n{result.stderr}")
    line = next(l for l in result.stdout.splitlines() if l.startswith("packing"))
    windows = int(re.search(r"in (\d+) window", line).group(1))
    efficiency = float(re.search(r"efficiency ([\d.]+)%", line).group(1))
    targets = float(re.search(r"targets ([\d.]+)%", line).group(1))
    return windows, efficiency, targets, seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ppctl", default="build/app/ppctl")
    parser.add_argument("--conversations", type=int, default=20000)
    parser.add_argument("--median", type=float, default=350)
    parser.add_argument("--sigma", type=float, default=0.9)
    parser.add_argument("--seq-lens", default="1024,2048,4096")
    args = parser.parse_args()
    lengths = lengths_of(args.conversations, args.median, args.sigma)
    ordered = sorted(lengths)
    print(f"{args.conversations} conversations: median {ordered[len(ordered) // 2]}, p90 "
          f"{ordered[int(0.9 * len(ordered))]}, p99 {ordered[int(0.99 * len(ordered))]}, max {ordered[-1]} tokens")
    with tempfile.TemporaryDirectory(prefix="ppctl_packing_bench_") as name:
        folder = pathlib.Path(name)
        prefix = folder / "chat"
        write_dataset(prefix, lengths)
        print(f"| seq_len | method | windows | efficiency | targets | plan s |")
        print(f"|---:|---|---:|---:|---:|---:|")
        for seq_len in (int(s) for s in args.seq_lens.split(",")):
            kept = [n for n in lengths if n <= seq_len]
            tokens = sum(kept)
            windows, efficiency, targets, seconds = ppctl_packing(args.ppctl, folder, prefix, seq_len)
            print(f"| {seq_len} | ppctl best-fit decreasing | {windows} | {efficiency:.1f}% | {targets:.1f}% | "
                  f"{seconds:.2f} |")
            greedy = greedy_sequential(kept, seq_len)
            print(f"| {seq_len} | greedy in file order | {greedy} | {100.0 * tokens / (greedy * seq_len):.1f}% | | |")
            print(f"| {seq_len} | one per window, padded | {len(kept)} | {100.0 * tokens / (len(kept) * seq_len):.1f}% "
                  f"| | |")
            if len(kept) < len(lengths):
                print(f"| {seq_len} | (dropped: longer than seq_len) | {len(lengths) - len(kept)} | | | |")


if __name__ == "__main__":
    main()
