"""`ppctl data prepare` against the reference implementations: Python sentencepiece for the ids,
megatron-core's IndexedDataset for the written files, Python bytes for --tokenizer bytes; and every bad
input of the command (exit 2, a message naming the file, nothing left behind).

Usage: test_prepare.py GROUP PPCTL   (GROUP: sentencepiece | megatron | bad_input | progress | train)
"""
import json
import os
import pty
import select
import shutil
import subprocess
import sys
import tempfile

PPCTL = sys.argv[2] if len(sys.argv) > 2 else "build/app/ppctl"

# Documents with non-ASCII text (accents, CJK, emoji), repeated words, an empty one.
DOCS = [
    "Grüße aus Köln: naïve café, crème brûlée.",
    "",
    "日本語のテキストも少し。東京、大阪。",
    "Emoji 🙂 and symbols ∑ π ≈ 3.14159; tabs\tand\nnewlines.",
    "The quick brown fox jumps over the lazy dog. " * 5,
    "A line with trailing spaces   ",
]


def run(args, expect_rc=0):
    """Runs ppctl with `args`; returns (stdout, stderr); fails unless it exits with `expect_rc`."""
    p = subprocess.run([PPCTL] + args, capture_output=True, text=True, errors="replace")
    if p.returncode != expect_rc:
        raise AssertionError(f"ppctl {' '.join(args)}: exit {p.returncode}, expected {expect_rc}\n"
                             f"stdout: {p.stdout}\nstderr: {p.stderr}")
    return p.stdout, p.stderr


def write_jsonl(path, docs, key="text"):
    with open(path, "w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps({key: d, "id": len(d)}, ensure_ascii=False) + "\n")


def read_megatron(prefix):
    """The documents of an indexed dataset as megatron-core reads them (lists of ints) and its dtype."""
    from megatron.core.datasets.indexed_dataset import IndexedDataset
    ds = IndexedDataset(prefix, multimodal=False, mmap=True)
    # One sequence per document: the document index is 0..S.
    assert list(ds.document_indices) == list(range(len(ds) + 1)), ds.document_indices
    return [ds[i].tolist() for i in range(len(ds))], ds.index.dtype


def sidecar(prefix):
    with open(prefix + ".tokenizer.json", encoding="utf-8") as f:
        return json.load(f)


def check_sidecar(prefix, docs, tokenizer, vocab_size, eod_id, model=None):
    s = sidecar(prefix)
    assert s["format"] == "ppctl-tokenizer" and s["version"] == 1, s
    assert s["tokenizer"] == tokenizer and s["vocab_size"] == vocab_size and s["eod_id"] == eod_id, s
    assert s["model"] == (os.path.abspath(model) if model else None), s
    assert s["documents"] == len(docs) and s["tokens"] == sum(map(len, docs)), s
    assert s["max_token_id"] == max(max(d) for d in docs if d), s


def no_leftovers(folder, allowed=()):
    left = sorted(set(os.listdir(folder)) - set(allowed))
    assert not [n for n in left if ".tmp." in n], f"temporary files left behind: {left}"
    return left


def split_at(text, separator):
    """Python's own reading of --document-separator: lines equal to `separator` end documents (and are
    dropped); empty documents are dropped."""
    pieces, doc = [], ""
    for line in text.splitlines(keepends=True):
        if line.rstrip("\n").rstrip("\r") == separator:
            pieces.append(doc)
            doc = ""
        else:
            doc += line
    return [p for p in pieces + [doc] if p]


def train_spm(folder, name, text_lines, vocab_size):
    """A tiny unigram model trained by Python sentencepiece (byte fallback off, default ids:
    unk 0, bos 1, eos 2)."""
    import sentencepiece as spm
    spm.SentencePieceTrainer.train(sentence_iterator=iter(text_lines), model_prefix=os.path.join(folder, name),
                                   vocab_size=vocab_size, model_type="unigram", character_coverage=1.0,
                                   num_threads=1, minloglevel=2, hard_vocab_limit=False)
    return os.path.join(folder, name + ".model")


def corpus_lines():
    lines = []
    for d in DOCS:
        lines += [line for line in d.split("\n") if line.strip()]
    lines += ["Über den Wolken muss die Freiheit wohl grenzenlos sein.", "Ça va? Très bien, merci.",
              "Пример русского текста.", "Ελληνικά γράμματα.", "数据并行与流水线并行。"] * 3
    return lines


def group_sentencepiece(tmp):
    import sentencepiece as spm
    models = {"python": train_spm(tmp, "py", corpus_lines(), 150)}
    if shutil.which("spm_train"):  # Debian's trainer (the one setup uses) too
        with open(os.path.join(tmp, "corpus.txt"), "w", encoding="utf-8") as f:
            f.write("\n".join(corpus_lines()) + "\n")
        subprocess.run(["spm_train", f"--input={tmp}/corpus.txt", f"--model_prefix={tmp}/deb",
                        "--vocab_size=150", "--character_coverage=1.0", "--hard_vocab_limit=false",
                        "--minloglevel=2"], check=True, capture_output=True)
        models["spm_train"] = os.path.join(tmp, "deb.model")
    jsonl = os.path.join(tmp, "docs.jsonl")
    write_jsonl(jsonl, DOCS)
    for trainer, model in models.items():
        sp = spm.SentencePieceProcessor(model_file=model)
        expected = [sp.encode(d) for d in DOCS]
        prefix = os.path.join(tmp, f"sp-{trainer}")
        out, _ = run(["data", "prepare", "--input", jsonl, "--model", model, "--output", prefix])
        assert "MB/s" in out and f"{len(DOCS)} documents" in out, out
        got, dtype = read_megatron(prefix)
        assert dtype.__name__ == "uint16", dtype
        assert got == expected, f"{trainer}: ppctl ids differ from Python sentencepiece's\n{got}\n{expected}"
        check_sidecar(prefix, expected, "sentencepiece", sp.get_piece_size(), None, model)
        # --append-eod: the model's eos id after every non-empty document (Megatron's rule).
        run(["data", "prepare", "--input", jsonl, "--model", model, "--output", prefix, "--append-eod"])
        got, _ = read_megatron(prefix)
        with_eod = [e + [sp.eos_id()] if e else [] for e in expected]
        assert got == with_eod, (trainer, got, with_eod)
        check_sidecar(prefix, with_eod, "sentencepiece", sp.get_piece_size(), sp.eos_id(), model)
        no_leftovers(tmp)
        print(f"sentencepiece ({trainer}): {sum(map(len, expected))} ids equal Python sentencepiece's")
    # A SentencePiece model given as --tokenizer (Llama 2's tokenizer.model, under any name), or a model folder
    # holding only one: pointed to --model with its path, nothing written.
    folder = os.path.join(tmp, "llama2-style")
    os.mkdir(folder)
    shutil.copy(models["python"], os.path.join(folder, "tokenizer.model"))
    renamed = os.path.join(tmp, "tok.bin")
    shutil.copy(models["python"], renamed)
    out_dir = os.path.join(tmp, "out")
    os.mkdir(out_dir)
    for given, model in ((os.path.join(folder, "tokenizer.model"), os.path.join(folder, "tokenizer.model")),
                         (renamed, renamed), (folder, os.path.join(folder, "tokenizer.model"))):
        expect_bad(["--tokenizer", given, "--input", jsonl, "--output", os.path.join(out_dir, "ds")],
                   "SentencePiece model", f"--model {model}", folder=out_dir)
    # --model given the folder: pointed to the file inside it.
    expect_bad(["--model", folder, "--input", jsonl, "--output", os.path.join(out_dir, "ds")], "a folder",
               f"--model {os.path.join(folder, 'tokenizer.model')}", folder=out_dir)
    # A tokenizer.json that starts with a newline (as 0x0a does a SentencePiece model) is still read as JSON.
    spaced = os.path.join(tmp, "spaced.json")
    with open(spaced, "w") as f:
        f.write("\n  {\"model\": 7}\n")
    err = expect_bad(["--tokenizer", spaced, "--input", jsonl, "--output", os.path.join(out_dir, "ds")], "spaced.json",
                     folder=out_dir)
    assert "SentencePiece" not in err, err
    # Setup's model (vocabulary 4096, Debian's spm_train) on a real fortune file, when setup made it.
    model = os.path.expanduser("~/.cache/ppctl/tokenizers/fortunes-4096.model")
    source = "/usr/share/games/fortunes/fortunes.u8"
    if os.path.exists(model) and os.path.exists(source):
        sp = spm.SentencePieceProcessor(model_file=model)
        with open(source, encoding="utf-8") as f:
            expected = [sp.encode(p) for p in split_at(f.read(), "%")]
        prefix = os.path.join(tmp, "fortunes")
        run(["data", "prepare", "--input", source, "--model", model, "--document-separator", "%",
             "--output", prefix])
        got = read_megatron(prefix)[0]
        assert len(got) == len(expected)
        # Unigram segmentation is a Viterbi search; where two segmentations score exactly the same
        # ("!!!!!" = "!!!" "!!" or "!!" "!!!") Debian's library 0.1.97, which ppctl links, and PyPI's 0.2.3
        # break the tie differently. There the ids must still spell the same text with the same score.
        ties = 0
        for g, e in zip(got, expected):
            if g != e:
                ties += 1
                assert sp.decode(g) == sp.decode(e), (g, e)
                assert abs(sum(map(sp.get_score, g)) - sum(map(sp.get_score, e))) < 1e-3, (g, e)
        assert ties <= len(expected) // 20, f"{ties} of {len(expected)} documents differ"
        print(f"sentencepiece (setup's fortunes-4096): {len(expected)} fortunes, {ties} equal-score ties")
        # Debian's own Python binding (the same library version as ppctl's), when installed: exactly equal.
        probe = subprocess.run(["/usr/bin/python3", "-c", "import json, sys, sentencepiece as s; "
                                "p = s.SentencePieceProcessor(model_file=sys.argv[1]); "
                                "print(json.dumps([p.encode(d) for d in json.load(sys.stdin)]))", model],
                               input=json.dumps(split_at(open(source, encoding="utf-8").read(), "%")),
                               capture_output=True, text=True)
        if probe.returncode == 0:
            assert json.loads(probe.stdout) == got, "ppctl ids differ from Debian's sentencepiece binding"
            print("sentencepiece (setup's fortunes-4096): equal to Debian's python3-sentencepiece, tie for tie")


def group_megatron(tmp):
    jsonl = os.path.join(tmp, "docs.jsonl")
    write_jsonl(jsonl, DOCS, key="content")
    as_bytes = [list(d.encode("utf-8")) for d in DOCS]
    # uint16: bytes, JSONL with another key, an empty document.
    prefix = os.path.join(tmp, "bytes16")
    run(["data", "prepare", "--tokenizer", "bytes", "--input", jsonl, "--json-key", "content",
         "--output", prefix])
    got, dtype = read_megatron(prefix)
    assert dtype.__name__ == "uint16" and got == as_bytes, (dtype, got)
    assert os.path.getsize(prefix + ".bin") == 2 * sum(map(len, as_bytes))
    check_sidecar(prefix, as_bytes, "bytes", 256, None)
    # int32: an end-of-document id past 65499 makes the vocabulary need int32 (Megatron's optimal_dtype).
    prefix = os.path.join(tmp, "bytes32")
    run(["data", "prepare", "--tokenizer", "bytes", "--input", jsonl, "--json-key", "content",
         "--output", prefix, "--append-eod", "70000"])
    got, dtype = read_megatron(prefix)
    expected = [b + [70000] if b else [] for b in as_bytes]
    assert dtype.__name__ == "int32" and got == expected, (dtype, got)
    check_sidecar(prefix, expected, "bytes", 70001, 70000)
    # 65499 is the last id of a uint16 vocabulary (65500 ids); 65500 needs int32.
    for eod, want in ((65498, "uint16"), (65499, "int32")):
        run(["data", "prepare", "--tokenizer", "bytes", "--input", jsonl, "--json-key", "content",
             "--output", prefix, "--append-eod", str(eod)])
        assert read_megatron(prefix)[1].__name__ == want, (eod, want)
    # Text input: each file one document; or split at separator lines.
    texts = ["first file\nüber zwei Zeilen\n", "second file, no newline at the end",
             "A fortune.\n%\nAnother one,\non two lines.\n%\n%\nLast.\n"]
    files = []
    for i, t in enumerate(texts):
        files.append(os.path.join(tmp, f"t{i}.txt"))
        with open(files[-1], "w", encoding="utf-8") as f:
            f.write(t)
    prefix = os.path.join(tmp, "text")
    run(["data", "prepare", "--tokenizer", "bytes", "--input", *files, "--output", prefix])
    assert read_megatron(prefix)[0] == [list(t.encode()) for t in texts]
    run(["data", "prepare", "--tokenizer", "bytes", "--input", *files, "--output", prefix,
         "--document-separator", "%"])
    pieces = [p for t in texts for p in split_at(t, "%")]
    assert len(pieces) == 5, pieces
    assert read_megatron(prefix)[0] == [list(p.encode()) for p in pieces]
    # Paragraphs: --document-separator '' splits at empty lines.
    with open(files[0], "w", encoding="utf-8") as f:
        f.write("para one\nstill one\n\npara two\n\n\npara three")
    run(["data", "prepare", "--tokenizer", "bytes", "--input", files[0], "--output", prefix,
         "--document-separator", ""])
    assert read_megatron(prefix)[0] == [list(b"para one\nstill one\n"), list(b"para two\n"), list(b"para three")]
    left = no_leftovers(tmp)
    assert "text.bin" in left and "text.idx" in left and "text.tokenizer.json" in left, left
    print("megatron: uint16 and int32 datasets, JSONL and text input read back by IndexedDataset")


def expect_bad(args, *needles, folder=None):
    """ppctl exits 2 naming every needle, and `folder` holds no new file afterwards."""
    before = set(os.listdir(folder)) if folder else set()
    _, err = run(["data", "prepare"] + args, expect_rc=2)
    for n in needles:
        assert n in err, f"{args}: {n!r} not in the message:\n{err}"
    if folder:
        assert set(os.listdir(folder)) == before, (args, sorted(set(os.listdir(folder)) - before))
    return err


def group_bad_input(tmp):
    out = os.path.join(tmp, "out")
    os.mkdir(out)
    prefix = os.path.join(out, "ds")
    good = os.path.join(tmp, "good.jsonl")
    write_jsonl(good, ["fine"] * 3)
    bytes_args = ["--tokenizer", "bytes", "--output", prefix]
    # Missing and unreadable inputs.
    expect_bad(bytes_args + ["--input", good, os.path.join(tmp, "missing.txt")], "missing.txt", "no such file",
               folder=out)
    expect_bad(bytes_args + ["--input", tmp], tmp, "not a regular file", folder=out)
    unreadable = os.path.join(tmp, "secret.txt")
    with open(unreadable, "w") as f:
        f.write("text")
    os.chmod(unreadable, 0)
    # root reads any file whatever its mode: there a file whose read(2) fails stands in.
    expect_bad(bytes_args + ["--input", unreadable if os.geteuid() != 0 else "/proc/self/mem"],
               "cannot read", folder=out)
    # JSONL: a line that is not JSON, one that is not an object, one without the key; after good lines
    # (so the writer has begun: its temporaries must go too).
    bad = os.path.join(tmp, "bad.jsonl")
    for line, needles in (('{"text": "unterminated', ["bad.jsonl:41:", "not JSON"]),
                          ('["a", "list"]', ["bad.jsonl:41:", "not an object"]),
                          ('{"body": "no text key"}', ["bad.jsonl:41:", 'no field "text"', "--json-key"]),
                          ('{"text": 12}', ["bad.jsonl:41:", "not a string"]),
                          ('{"text": "x", "n": 2E615}', ["bad.jsonl:41:", "does not fit a double", "1.8e308"])):
        with open(bad, "w") as f:
            f.write(''.join(json.dumps({"text": "x" * 1000}) + "\n" for _ in range(40)) + line + "\n")
        expect_bad(bytes_args + ["--input", good, bad], *needles, folder=out)
    # --input-format jsonl forces JSONL on any name: a plain text file then fails at its first line.
    plain = os.path.join(tmp, "plain.txt")
    with open(plain, "w") as f:
        f.write("just text\n")
    expect_bad(bytes_args + ["--input", plain, "--input-format", "jsonl"], "plain.txt:1:", "not JSON",
               "--input-format text", folder=out)
    # SentencePiece models: missing, unreadable, not a model (random bytes; the .vocab text file).
    sp_args = ["--input", good, "--output", prefix]
    expect_bad(sp_args + ["--model", os.path.join(tmp, "none.model")], "none.model", "no such file", folder=out)
    expect_bad(sp_args + ["--model", "/proc/self/mem"], "/proc/self/mem", "cannot read", folder=out)
    junk = os.path.join(tmp, "junk.model")
    with open(junk, "wb") as f:
        f.write(os.urandom(4096))
    expect_bad(sp_args + ["--model", junk], "junk.model", "not a valid SentencePiece model", folder=out)
    vocab = os.path.join(tmp, "m.vocab")
    with open(vocab, "w") as f:
        f.write("<unk>\t0\n<s>\t0\n</s>\t0\n▁a\t-1.5\n")
    expect_bad(sp_args + ["--model", vocab], "m.vocab", "not a valid SentencePiece model", folder=out)
    expect_bad(sp_args, "needs --model", folder=out)
    # Output: a folder that does not exist; a folder in place of a prefix.
    expect_bad(["--tokenizer", "bytes", "--input", good, "--output", os.path.join(tmp, "nope", "ds")],
               "nope", "does not exist", folder=tmp)
    expect_bad(["--tokenizer", "bytes", "--input", good, "--output", out], "a folder", folder=out)
    # --append-eod without an id where the tokenizer has none; documents that hold no token.
    expect_bad(bytes_args + ["--input", good, "--append-eod"], "no end-of-sequence id", folder=out)
    empty = os.path.join(tmp, "empty.jsonl")
    write_jsonl(empty, ["", ""])
    expect_bad(bytes_args + ["--input", empty], "empty.jsonl: the 2 document(s) hold no token", folder=out)
    # Input without any document (an empty file, blank lines only): the files are named.
    for name, text in (("none.jsonl", ""), ("blank.jsonl", "\n \n\t\n")):
        with open(os.path.join(tmp, name), "w") as f:
            f.write(text)
        expect_bad(bytes_args + ["--input", os.path.join(tmp, name)], name, "no document", "only blank lines",
                   folder=out)
    # Bytes that are not UTF-8: the byte of the line, and re-encoding as the fix.
    latin = os.path.join(tmp, "latin.jsonl")
    with open(latin, "wb") as f:
        f.write(b'{"text": "ok"}\n{"text": "caf\xe9"}\n')
    err = expect_bad(bytes_args + ["--input", latin], "latin.jsonl:2:", "byte 14 of the line is not UTF-8",
                     "re-encode the file as UTF-8", folder=out)
    assert "one JSON object per line" not in err, err
    # A line nested a million levels deep in a key that is not read: parsed and freed without recursion.
    deep = os.path.join(tmp, "deep.jsonl")
    with open(deep, "w") as f:
        f.write('{"text": "fine", "x": ' + "[" * 1_000_000 + "]" * 1_000_000 + "}\n")
    run(["data", "prepare", "--tokenizer", "bytes", "--input", deep, "--output", os.path.join(tmp, "deep")])
    # Paths, keys and lines from the input are echoed escaped (control characters, invalid UTF-8): a file
    # name or a JSONL line from a stranger's dataset cannot retitle or recolour the terminal.
    evil = "x\x1b]0;pwned\x07"
    shown = "x\\x1b]0;pwned\\x07"
    for args, needles in (
            (bytes_args + ["--input", os.path.join(tmp, evil + ".txt")], [shown, "no such file"]),
            (["--tokenizer", "bytes", "--input", good, "--output", os.path.join(tmp, evil, "ds")],
             [shown, "does not exist"]),
            (bytes_args + ["--input", good, "--json-key", evil], [shown, "no field"]),
            (sp_args + ["--model", os.path.join(tmp, evil + ".model")], [shown, "no such file"])):
        err = expect_bad(args, *needles, folder=out)
        assert "\x1b" not in err and "\x07" not in err and "\ufffd" not in err, repr(err)
    evil_line = os.path.join(tmp, "evil_line.jsonl")
    with open(evil_line, "wb") as f:
        f.write(b'{"text": \x1b[31m red\n')
    err = expect_bad(bytes_args + ["--input", evil_line], "evil_line.jsonl:1:", "not JSON", folder=out)
    assert "\x1b" not in err and "\ufffd" not in err, repr(err)  # run() decodes a raw invalid byte as U+FFFD
    with open(evil_line, "wb") as f:
        f.write(b'{"text": "\xff\x1b[31m red\n')
    err = expect_bad(bytes_args + ["--input", evil_line], "evil_line.jsonl:1:", "not UTF-8", folder=out)
    assert "\x1b" not in err and "\ufffd" not in err, repr(err)
    # An existing dataset stays as it was when a new run fails.
    run(["data", "prepare"] + bytes_args + ["--input", good])
    before = {n: open(os.path.join(out, n), "rb").read() for n in os.listdir(out)}
    expect_bad(bytes_args + ["--input", good, bad], "bad.jsonl:41:")
    assert {n: open(os.path.join(out, n), "rb").read() for n in os.listdir(out)} == before
    print("bad input: every case exits 2, names the file, leaves nothing behind")


def group_progress(tmp):
    src = os.path.join(tmp, "big.jsonl")
    write_jsonl(src, ["some text " * 50] * 2000)
    prefix = os.path.join(tmp, "p")
    # On a pipe: no carriage return, just the report on stdout.
    out, err = run(["data", "prepare", "--tokenizer", "bytes", "--input", src, "--output", prefix])
    assert "\r" not in err and "\r" not in out, repr(err)
    assert "2000 documents" in out and "MB/s" in out, out
    # On a terminal (stderr a pty): the line redrawn in place with an ETA.
    master, slave = pty.openpty()
    p = subprocess.Popen([PPCTL, "data", "prepare", "--tokenizer", "bytes", "--input", src, "--output", prefix],
                         stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], 30)
        if not ready:
            break
        try:
            data = os.read(master, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    p.wait(timeout=30)
    os.close(master)
    text = b"".join(chunks).decode()
    assert p.returncode == 0, text
    assert "\r\x1b[K" in text and "ETA" in text and "MB/s" in text and "docs" in text, repr(text)
    assert text.count("\r\x1b[K") >= 1 and text.endswith("\n"), repr(text)  # the last draw ends the line
    print("progress: plain on a pipe, redrawn with an ETA on a terminal")


def group_train(tmp):
    """The flow of the README on a tiny scale: a SentencePiece model, `data prepare`, `train` from the
    indexed dataset (loss logged and falling), and the sidecar's vocabulary enforced by `train`."""
    model = train_spm(tmp, "m", corpus_lines(), 150)
    jsonl = os.path.join(tmp, "docs.jsonl")
    write_jsonl(jsonl, [line for line in corpus_lines() for _ in range(4)])
    prefix = os.path.join(tmp, "corpus")
    run(["data", "prepare", "--model", model, "--input", jsonl, "--append-eod", "--output", prefix])
    vocab = sidecar(prefix)["vocab_size"]

    def job(vocab_size):
        spec = os.path.join(tmp, "job.yaml")
        with open(spec, "w") as f:
            f.write(f"""model: {{vocab_size: {vocab_size}, layers: 2, hidden: 32, heads: 4, seq_len: 16, dropout: 0.0}}
pipeline: {{stages: 2, schedule: 1f1b, microbatches: 2, micro_batch_size: 4}}
data: {{format: megatron, path: corpus}}
optimizer: {{lr: 0.01}}
train: {{steps: 12, seed: 1, log_interval: 1}}
runtime: {{comm_timeout_s: 60}}
""")
        return spec

    _, err = run(["train", job(vocab), "--run-dir", os.path.join(tmp, "run")])
    losses = [float(line.split("| loss ")[1].split()[0]) for line in err.splitlines() if "| loss " in line]
    assert len(losses) == 12, err
    assert abs(losses[0] - __import__("math").log(vocab)) < 0.5 and losses[-1] < losses[0] - 0.5, losses
    _, err = run(["train", job(vocab - 1)], expect_rc=2)
    assert "tokenizer.json" in err and "vocab_size" in err, err
    print(f"train: 12 steps from the prepared dataset, loss {losses[0]:.3f} -> {losses[-1]:.3f}")


if __name__ == "__main__":
    group = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="ppctl-prepare-") as folder:
        globals()["group_" + group](folder)
