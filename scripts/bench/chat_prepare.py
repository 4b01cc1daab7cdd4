#!/usr/bin/env python3
"""Throughput of `ppctl data prepare --input-format chat` (render with the model's chat template, tokenize,
loss masks, write both datasets) against transformers on the same file and template: a fast tokenizer's
`apply_chat_template(messages, tokenize=True)` over the conversations, through `datasets.Dataset.map` when
`datasets` is installed, else a plain loop (one process, one thread: TOKENIZERS_PARALLELISM=false,
RAYON_NUM_THREADS=1). transformers computes ids only (no masks: these templates have no {% generation %}
blocks), ppctl ids and masks, so ppctl does more work per conversation.

The data: --conversations generated conversations (seeded), half with a system message, 1-6 exchanges, turn
lengths drawn log-normally (median ~25 words, long tail to ~1500), words from Debian's fortunes. The tokenizer:
a Llama-3-style byte-level BPE (its split regex) trained here by `tokenizers` on the same words, vocabulary
--vocab, with every template's special tokens. Templates: ../shared/chat-templates/ (--templates).

Prints a table: template, tool, conversations/s, MB/s of JSONL input (MB = 10^6 bytes), seconds (best of
--repeats; ppctl: the whole command, LibTorch loading at start included; transformers: the loop only, after
loading the tokenizer).

Usage: scripts/bench/chat_prepare.py [--ppctl build/app/ppctl] [--conversations 3000] [--repeats 3]
           [--templates qwen2.5-instruct,llama-3.1-instruct,smollm3] [--vocab 8000]
"""
import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "prepare"))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAYON_NUM_THREADS", "1")


def words():
    import glob
    out = []
    for path in sorted(glob.glob("/usr/share/games/fortunes/*.u8"))[:20]:
        with open(path, encoding="utf-8", errors="replace") as f:
            out += f.read().replace("%\n", "").split()
    return out or "the quick brown fox jumps over the lazy dog".split()


def generate(n, vocab_words, seed=1):
    rng = random.Random(seed)

    def turn():
        k = max(1, min(1500, int(math.exp(rng.gauss(math.log(25), 1.0)))))
        return " ".join(rng.choice(vocab_words) for _ in range(k))
    convs = []
    for i in range(n):
        m = [{"role": "system", "content": turn()}] if i % 2 == 0 else []
        for _ in range(rng.randint(1, 6)):
            m += [{"role": "user", "content": turn()}, {"role": "assistant", "content": turn()}]
        convs.append(m)
    return convs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ppctl", default=os.path.join(ROOT, "build", "app", "ppctl"))
    ap.add_argument("--conversations", type=int, default=3000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--templates", default="qwen2.5-instruct,llama-3.1-instruct,smollm3")
    ap.add_argument("--vocab", type=int, default=8000)
    args = ap.parse_args()
    import test_chat
    from test_hf_bpe import LLAMA3_PATTERN
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import AutoTokenizer
    try:
        import datasets
    except ImportError:
        datasets = None
    test_chat.pin_date()
    w = words()
    convs = generate(args.conversations, w)
    with tempfile.TemporaryDirectory(prefix="ppctl-chat-bench-") as tmp:
        tok = Tokenizer(models.BPE(ignore_merges=True))
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        tok.decoder = decoders.ByteLevel()
        lines = [" ".join(w[i:i + 50]) for i in range(0, len(w), 50)]
        tok.train_from_iterator(lines, trainers.BpeTrainer(vocab_size=args.vocab, special_tokens=test_chat.SPECIALS,
                                                           initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                           show_progress=False))
        base = os.path.join(tmp, "base.json")
        tok.save(base)
        jsonl = os.path.join(tmp, "chat.jsonl")
        with open(jsonl, "w", encoding="utf-8") as f:
            for c in convs:
                f.write(json.dumps({"messages": c}, ensure_ascii=False) + "\n")
        mb = os.path.getsize(jsonl) / 1e6
        print(f"{len(convs)} conversations, {mb:.1f} MB of JSONL, {sum(len(c) for c in convs)} messages; "
              f"transformers over {'datasets.map' if datasets else 'a plain loop'}")
        print(f"| template | tool | conversations/s | MB/s | seconds |\n|---|---|---:|---:|---:|")
        for name in args.templates.split(","):
            folder = test_chat.model_folder(tmp, name, base)
            prefix = os.path.join(tmp, name + "-ds")
            best = math.inf
            for _ in range(args.repeats):
                start = time.perf_counter()
                subprocess.run([args.ppctl, "data", "prepare", "--input-format", "chat", "--tokenizer", folder,
                                "--input", jsonl, "--output", prefix, "--chat-date", test_chat.DATE],
                               check=True, capture_output=True)
                best = min(best, time.perf_counter() - start)
            print(f"| {name} | ppctl (ids + masks) | {len(convs) / best:.0f} | {mb / best:.2f} | {best:.2f} |")
            hf = AutoTokenizer.from_pretrained(folder)
            best = math.inf
            for _ in range(args.repeats):
                start = time.perf_counter()
                if datasets:
                    ds = datasets.Dataset.from_list([{"messages": c} for c in convs])
                    ds.map(lambda r: {"input_ids": hf.apply_chat_template(r["messages"], tokenize=True,
                                                                          return_dict=True)["input_ids"]})
                else:
                    for c in convs:
                        hf.apply_chat_template(c, tokenize=True, return_dict=True)
                best = min(best, time.perf_counter() - start)
            print(f"| {name} | transformers (ids) | {len(convs) / best:.0f} | {mb / best:.2f} | {best:.2f} |")


if __name__ == "__main__":
    main()
