#!/usr/bin/env python3
"""Throughput of `ppctl data prepare` on this machine: bytes and SentencePiece tokenization, text and
JSONL input, MB/s of input (MB = 10^6 bytes), against Python sentencepiece encoding the same documents
in one thread (the reference library, for scale: PyPI's 0.2.x in the venv, and Debian's 0.1.97 binding,
the library version ppctl links, when /usr/bin/python3 has it). Prints a table: wall-time MB/s (ppctl's
own report, without process start), CPU-time MB/s (the process's user + system time, with the ~0.6 s of
CPU that loading LibTorch at start costs), and MB/s of the whole command's wall time.

With `hf` among --tokenizers: `--tokenizer tokenizer.json` (byte-level BPE) against Hugging Face
`tokenizers`' own `encode_batch` in Python on one thread (TOKENIZERS_PARALLELISM=false,
RAYON_NUM_THREADS=1), on the same documents; the tokenizer.json is --hf-tokenizer, or a Llama-3-style one
(its split regex, ignore_merges, a BOS template) that tokenizers' BpeTrainer trains here on the fortunes
with --hf-vocab ids.

The corpus: the fortunes text (Debian's `fortunes`, ~2.6 MB) repeated to --mb MB, one document per
fortune (text split at "%" lines; JSONL one object per fortune). The model: setup's
~/.cache/ppctl/tokenizers/fortunes-4096.model unless --model is given.

Usage: scripts/bench/prepare_throughput.py [--ppctl build/app/ppctl] [--mb 20] [--repeats 3]
           [--tokenizers bytes,sentencepiece,hf] [--hf-tokenizer tokenizer.json] [--hf-vocab 32000]
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
    """(prepare's own seconds, CPU seconds, wall seconds, report) of the fastest of `repeats` runs."""
    import resource
    best = None
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
        # "... from B MB in S s = R MB/s": S is prepare's own time (without process start).
        own = float(out.rsplit(" in ", 1)[1].split(" s ", 1)[0])
        if best is None or own < best[0]:
            best = (own, cpu, wall, out.strip())
    return best


PY_ENCODE = """
import json, sys, time, sentencepiece as spm
docs = json.load(open(sys.argv[2], encoding="utf-8"))
sp = spm.SentencePieceProcessor(model_file=sys.argv[1])
best = None
for _ in range(int(sys.argv[3])):
    wall, cpu = time.perf_counter(), time.process_time()
    for d in docs:
        sp.encode(d)
    r = (time.perf_counter() - wall, time.process_time() - cpu)
    best = r if best is None or r[0] < best[0] else best
print(spm.__version__, best[0], best[1])
"""


PY_HF_ENCODE = """
import json, os, sys, time, tokenizers
docs = json.load(open(sys.argv[2], encoding="utf-8"))
tok = tokenizers.Tokenizer.from_file(sys.argv[1])
best = None
for _ in range(int(sys.argv[3])):
    wall, cpu = time.perf_counter(), time.process_time()
    tok.encode_batch(docs)
    r = (time.perf_counter() - wall, time.process_time() - cpu)
    best = r if best is None or r[0] < best[0] else best
print(tokenizers.__version__, best[0], best[1])
"""

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def train_llama3_style(docs, vocab_size, path):
    """A Llama-3-style byte-level BPE tokenizer.json trained by tokenizers' BpeTrainer on `docs`."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    bos, eos = "<|begin_of_text|>", "<|end_of_text|>"
    tok.train_from_iterator(docs, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[bos, eos],
                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                      show_progress=False))
    tok.post_processor = processors.TemplateProcessing(single=f"{bos} $A", special_tokens=[(bos, tok.token_to_id(bos))])
    tok.save(path)
    return tok.token_to_id(eos)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ppctl", default=os.path.join(os.environ.get("PPCTL_BUILD_DIR", os.path.join(ROOT, "build")),
                                                    "app", "ppctl"))
    ap.add_argument("--model", default=os.path.expanduser("~/.cache/ppctl/tokenizers/fortunes-4096.model"))
    ap.add_argument("--mb", type=float, default=20.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--tokenizers", default="bytes,sentencepiece,hf")
    ap.add_argument("--hf-tokenizer", default=None)
    ap.add_argument("--hf-vocab", type=int, default=32000)
    args = ap.parse_args()
    kinds = args.tokenizers.split(",")

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
        hf = args.hf_tokenizer
        hf_eod = "0"
        if "hf" in kinds and hf is None:
            hf = os.path.join(tmp, "tokenizer.json")
            hf_eod = str(train_llama3_style(base, args.hf_vocab, hf))
        for tokenizer in kinds:
            tok = {"bytes": ["--tokenizer", "bytes"], "sentencepiece": ["--model", args.model],
                   "hf": ["--tokenizer", hf]}[tokenizer]
            for name, source, extra in (("text (%)", text, ["--document-separator", "%"]),
                                        ("jsonl", jsonl, [])):
                own, cpu, wall, report = best_of(args.repeats, [args.ppctl, "data", "prepare", "--input", source,
                                                                "--output", out, "--append-eod", hf_eod if tokenizer == "hf" else "0"] + tok + extra)
                size = os.path.getsize(source)
                rows.append((f"ppctl {tokenizer}", name, size, own, size / 1e6 / own, size / 1e6 / cpu,
                             size / 1e6 / wall))
                print(report, file=sys.stderr)
        docs_file = os.path.join(tmp, "docs.json")
        with open(docs_file, "w", encoding="utf-8") as f:
            json.dump(docs, f)
        size = sum(len(d.encode()) for d in docs)
        if "hf" in kinds:
            env = dict(os.environ, TOKENIZERS_PARALLELISM="false", RAYON_NUM_THREADS="1")
            p = subprocess.run([sys.executable, "-c", PY_HF_ENCODE, hf, docs_file, str(args.repeats)],
                               capture_output=True, text=True, env=env, check=True)
            version, wall, cpu = p.stdout.split()
            rows.append((f"tokenizers {version} 1 thread", "in memory", size, float(wall),
                         size / 1e6 / float(wall), size / 1e6 / float(cpu), float("nan")))
        for python in (sys.executable, "/usr/bin/python3") if "sentencepiece" in kinds else ():
            p = subprocess.run([python, "-c", PY_ENCODE, args.model, docs_file, str(args.repeats)],
                               capture_output=True, text=True)
            if p.returncode != 0:
                print(f"{python}: no sentencepiece ({p.stderr.strip().splitlines()[-1]})", file=sys.stderr)
                continue
            version, wall, cpu = p.stdout.split()
            rows.append((f"python sentencepiece {version}", "in memory", size, float(wall),
                         size / 1e6 / float(wall), size / 1e6 / float(cpu), float("nan")))

    print(f"corpus: {len(docs)} documents ({copies} x fortunes), model {os.path.basename(args.model)}, "
          f"best of {args.repeats}, {os.cpu_count()} cores"
          + (f", tokenizer.json {hf}" if "hf" in kinds else ""))
    print(f"{'tokenizer':<28} {'input':<10} {'MB in':>7} {'s':>6} {'MB/s':>7} {'MB/s CPU':>9} {'MB/s cmd':>9}")
    for r in rows:
        print(f"{r[0]:<28} {r[1]:<10} {r[2] / 1e6:>7.1f} {r[3]:>6.2f} {r[4]:>7.2f} {r[5]:>9.2f} {r[6]:>9.2f}")


if __name__ == "__main__":
    main()
