#!/usr/bin/env python3
"""Throughput of `ppctl data prepare` on this machine: bytes and SentencePiece tokenization, text and
JSONL input, MB/s of input (MB = 10^6 bytes), against Python sentencepiece encoding the same documents
in one thread (the reference library, for scale). Prints a table.

The corpus: the fortunes text (Debian's `fortunes`, ~2.6 MB) repeated to --mb MB, one document per
fortune (text split at "%" lines; JSONL one object per fortune). The model: setup's
~/.cache/ppctl/tokenizers/fortunes-4096.model unless --model is given.

Usage: scripts/bench/prepare_throughput.py [--ppctl build/app/ppctl] [--mb 20] [--repeats 3]
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def fortunes():
    docs = []
    for path in sorted(glob.glob("/usr/share/games/fortunes/*.u8")):
        with open(path, encoding="utf-8", errors="replace") as f:
            doc = ""
            for line in f:
                if line.rstrip("\r\n") == "%":
                    if doc:
                        docs.append(doc)
                    doc = ""
                else:
                    doc += line
            if doc:
                docs.append(doc)
    return docs


def best_of(repeats, command):
    """Wall seconds of the fastest of `repeats` runs of `command` (its own report parsed too)."""
    best = None
    for _ in range(repeats):
        start = time.perf_counter()
        out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        wall = time.perf_counter() - start
        # "... from B MB in S s = R MB/s": S is prepare's own time (without process start).
        own = float(out.rsplit(" in ", 1)[1].split(" s ", 1)[0])
        if best is None or own < best[0]:
            best = (own, wall, out.strip())
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ppctl", default=os.path.join(os.environ.get("PPCTL_BUILD_DIR", os.path.join(ROOT, "build")),
                                                    "app", "ppctl"))
    ap.add_argument("--model", default=os.path.expanduser("~/.cache/ppctl/tokenizers/fortunes-4096.model"))
    ap.add_argument("--mb", type=float, default=20.0)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    base = fortunes()
    base_bytes = sum(len(d.encode()) for d in base)
    copies = max(1, round(args.mb * 1e6 / base_bytes))
    docs = base * copies
    with tempfile.TemporaryDirectory(prefix="ppctl-bench-prepare-") as tmp:
        text = os.path.join(tmp, "corpus.txt")
        with open(text, "w", encoding="utf-8") as f:
            f.write("".join(d + "%\n" for d in docs))
        jsonl = os.path.join(tmp, "corpus.jsonl")
        with open(jsonl, "w", encoding="utf-8") as f:
            f.write("".join(json.dumps({"text": d}) + "\n" for d in docs))
        out = os.path.join(tmp, "out")
        rows = []
        for tokenizer in ("bytes", "sentencepiece"):
            tok = ["--tokenizer", "bytes"] if tokenizer == "bytes" else ["--model", args.model]
            for name, source, extra in (("text (%)", text, ["--document-separator", "%"]),
                                        ("jsonl", jsonl, [])):
                own, wall, report = best_of(args.repeats, [args.ppctl, "data", "prepare", "--input", source,
                                                           "--output", out, "--append-eod", "0"] + tok + extra)
                size = os.path.getsize(source)
                rows.append((f"ppctl {tokenizer}", name, size, own, size / 1e6 / own, size / 1e6 / wall))
                print(report, file=sys.stderr)
        import sentencepiece as spm
        sp = spm.SentencePieceProcessor(model_file=args.model)
        size = sum(len(d.encode()) for d in docs)
        best = None
        for _ in range(args.repeats):
            start = time.perf_counter()
            for d in docs:
                sp.encode(d)
            seconds = time.perf_counter() - start
            best = seconds if best is None else min(best, seconds)
        rows.append(("python sentencepiece encode", "in memory", size, best, size / 1e6 / best, float("nan")))

    print(f"corpus: {len(docs)} documents ({copies} x fortunes), model {os.path.basename(args.model)}, "
          f"best of {args.repeats}, {os.cpu_count()} cores")
    print(f"{'tokenizer':<28} {'input':<10} {'MB in':>8} {'s':>7} {'MB/s':>8} {'MB/s incl. start':>17}")
    for r in rows:
        print(f"{r[0]:<28} {r[1]:<10} {r[2] / 1e6:>8.1f} {r[3]:>7.2f} {r[4]:>8.2f} {r[5]:>17.2f}")


if __name__ == "__main__":
    main()
