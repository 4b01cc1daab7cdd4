#!/usr/bin/env python3
"""Benchmark: importing a Hugging Face model (model.init_from) per rank, against reading the whole file.

Makes a GPT-2 of about 325 MB of fp32 safetensors with transformers (n_embd 768, 8 layers, vocab
32000; --layers/--vocab change it), then for each stage count runs `ppctl train` for one step with
model.init_from and reads, from every rank's log, its import time and peak resident set before and
after the import (interop::load_hf_weights logs both). The baseline reading the whole file is ppctl
with 1 stage (every tensor). The RSS columns are the process's high-water mark (getrusage), which Linux
carries over fork and exec from the launcher, so the increase (after - before) is what the import costs. Prints one table; run with the venv's python (scripts/setup.sh prints it).
Usage: scripts/bench/hf_import.py [--stages 1 2 4] [--repeats 3] [--no-build]
"""
import argparse
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
LINE = re.compile(r"\[rank (\d+)\].*stage (\d+) \(tp rank \d+ of \d+\): (\d+) parameter tensors loaded from .*, "
                  r"([\d.]+) MiB read of their whole tensors' [\d.]+ MiB, in "
                  r"([\d.]+) s; peak RSS ([\d.]+) MiB before, ([\d.]+) MiB after")


def make_model(folder, layers, vocab):
    import torch
    import transformers
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=vocab, n_positions=1024, n_embd=768, n_layer=layers, n_head=12,
                                     tie_word_embeddings=False)
    transformers.GPT2LMHeadModel(config).save_pretrained(folder, safe_serialization=True)
    return sum(f.stat().st_size for f in pathlib.Path(folder).glob("*.safetensors"))


def run_ppctl(ppctl, folder, stages, work):
    data = work / "data.txt"
    data.write_bytes(bytes(range(256)) * 8)
    spec = work / f"import{stages}.yaml"
    spec.write_text(f"model:\n  init_from: {folder}\n  seq_len: 32\n"
                    f"pipeline:\n  stages: {stages}\n  microbatches: {max(stages, 1)}\n"
                    f"data:\n  path: {data}\ntrain:\n  steps: 1\nobserve:\n  runs_dir: {work / 'runs'}\n")
    run_dir = work / f"run{stages}-{time.time_ns()}"
    result = subprocess.run([ppctl, "train", spec, "--run-dir", run_dir], capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(result.stderr[-4000:])
    rows = {}
    for match in LINE.finditer(result.stderr):
        rank, stage, tensors, mib, seconds, before, after = match.groups()
        rows[int(rank)] = (int(stage), int(tensors), float(mib), float(seconds), float(before), float(after))
    assert len(rows) == stages, result.stderr[-3000:]
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stages", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--no-build", action="store_true")
    args = parser.parse_args()
    build = pathlib.Path(os.environ.get("PPCTL_BUILD_DIR", ROOT / "build"))
    if not args.no_build:
        subprocess.run([ROOT / "scripts/build.sh", "--target", "ppctl"], check=True)
    ppctl = build / "app" / "ppctl"
    make_model.vocab = args.vocab
    with tempfile.TemporaryDirectory(prefix="ppctl-hf-bench-") as tmp:
        work = pathlib.Path(tmp)
        folder = work / "gpt2"
        size = make_model(folder, args.layers, args.vocab)
        print(f"model: GPT-2, n_embd 768, {args.layers} layers, vocab {args.vocab}: {size / 1e6:.1f} MB of fp32 "
              f"safetensors; medians of {args.repeats} runs; RSS = peak resident set of the process")
        print(f"{'reader':<28} {'rank':>4} {'tensors':>7} {'MiB read':>9} {'import s':>9} "
              f"{'RSS before MiB':>15} {'RSS after MiB':>14}")
        for stages in args.stages:
            results = [run_ppctl(ppctl, folder, stages, work) for _ in range(args.repeats)]
            for rank in sorted(results[0]):
                stage, tensors, mib = results[0][rank][:3]
                med = [statistics.median(r[rank][k] for r in results) for k in (3, 4, 5)]
                label = f"ppctl {stages} stage(s)" + (" (whole)" if stages == 1 else "")
                print(f"{label:<28} {rank:>4} {tensors:>7} {mib:>9.1f} {med[0]:>9.3f} {med[1]:>15.1f} {med[2]:>14.1f}")


if __name__ == "__main__":
    main()
