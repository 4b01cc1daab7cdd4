"""`ppctl data prepare --tokenizer tokenizer.json` against the reference implementation, Hugging Face
`tokenizers`: GPT-2, RoBERTa, Llama 3 and Qwen2 style byte-level BPE tokenizers (and one with every
Split behaviour), each trained here with the
library's own BpeTrainer (no downloads), their ids compared through the dataset megatron-core reads; and
the tokenizer.json files ppctl refuses (exit 2 naming the file and the field).

Usage: test_hf_bpe.py GROUP PPCTL   (GROUP: ids | bad_input)
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_prepare  # noqa: E402  (run, read_megatron, write_jsonl, expect_bad, sidecar)

test_prepare.PPCTL = sys.argv[2] if len(sys.argv) > 2 else "build/app/ppctl"
run, read_megatron, write_jsonl, expect_bad = (test_prepare.run, test_prepare.read_megatron,
                                               test_prepare.write_jsonl, test_prepare.expect_bad)

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")

CODE = '''def square(x: int) -> int:
    """Return x ** 2."""
    return x * x  # 4 spaces, then 2


if __name__ == "__main__":
\tprint([square(n) for n in range(10)], {"a": 1_000_000})
'''

# Several scripts, code, runs of spaces and newlines, digits, contractions, special tokens in the text.
TRAIN = [
    "The quick brown fox jumps over the lazy dog. I'm sure they'll say it's fine; we've DONE it.",
    "Grüße aus Köln: naïve café, crème brûlée. Ça va? Très bien.",
    "日本語のテキストも少し。東京、大阪。数据并行与流水线并行。한국어 텍스트입니다.",
    "مرحبا بالعالم، هذا نص عربي قصير للاختبار.",
    "नमस्ते दुनिया, यह हिंदी का एक छोटा पाठ है।",
    "Emoji: 🙂 👋🏽 👨‍👩‍👧 ❤️ 🚀🚀🚀 and symbols ∑ π ≈ 3.14159",
    "Numbers 0 7 42 1234567890 3.14 1,000,000 2026-12-05 0x1F",
    CODE,
    "Spaces:     five, then\ttab,\n\n\nthree newlines,   \n  trailing   ",
] * 20

DOCS = [
    "Hello world! The quick brown fox.",
    "",
    "I'm here, you'll see; THEY'RE there — it's 12345 or 3.14159.",
    "日本語のテキスト。中文文本，数据并行。한국어",
    "مرحبا بالعالم، هذا نص عربي.",
    "नमस्ते दुनिया, यह हिंदी पाठ है।",
    "👋🏽 🙂🙂 👨‍👩‍👧 ❤️ 🚀 unseen: Ωμέγα ψ ℕ ﷺ 𝔘𝔫𝔦",
    CODE,
    "a     b\n\n\n\nc\t\t d   \n   ",
    "   leading spaces and trailing newline\n",
    "<|endoftext|>starts with a special token, then<|endoftext|> again <|endoftext|>",
    "template tokens <|eot_id|> inside <|begin_of_text|>and <|end_of_text|>",
    "added words: [[ppctl]] and <mask>   and  <mask> then",
    "decomposed: e\u0301 cafe\u0301 A\u030a (NFC composes them for Qwen2)",
    "digits 000111222333444555666777888999 and 1 22 333 4444",
    "\n",
    " ",
    "spaces Oniguruma's \\s knows: a\u3000b\u00a0c\u2028d\x85e\u205ff; and one it does not: a\u180eb \u180e\u180e x\x1cy",
    "x" * 3000 + " " * 2000 + "y",
]


def train(kind, folder):
    """A tokenizer.json of `kind` trained on TRAIN by tokenizers' BpeTrainer; returns (path, Tokenizer)."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from tokenizers import processors, trainers
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    if kind == "gpt2":
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        specials = ["<|endoftext|>"]
    elif kind == "gpt2_prefix":  # RoBERTa's choices: a space before each piece, <s> text </s>
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
        specials = ["<s>", "</s>", "<|endoftext|>"]
    elif kind == "llama3":
        tok = Tokenizer(models.BPE(ignore_merges=True))
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]
    elif kind == "splits":  # every Split behaviour, inverted, a literal pattern; ByteLevel's own regex after
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(r"[\r\n]+"), behavior="merged_with_previous"),
            pre_tokenizers.Split(Regex(r"\p{P}"), behavior="merged_with_next"),
            pre_tokenizers.Split(Regex(r"\p{N}"), behavior="contiguous"),
            pre_tokenizers.Split(Regex(r"\p{Lo}+"), behavior="isolated", invert=True),
            pre_tokenizers.Split("\t", behavior="removed"),
            pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)])
        specials = ["<|endoftext|>"]
    else:  # qwen2: NFC, and no initial alphabet (bytes never seen are dropped, as tokenizers drops them)
        tok = Tokenizer(models.BPE())
        tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
        alphabet = []
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=700, min_frequency=2, special_tokens=specials,
                                  initial_alphabet=alphabet, show_progress=False)
    tok.train_from_iterator(TRAIN, trainer)
    if kind == "gpt2_prefix":
        tok.post_processor = processors.RobertaProcessing(("</s>", tok.token_to_id("</s>")),
                                                          ("<s>", tok.token_to_id("<s>")))
        tok.add_special_tokens([AddedToken("<mask>", lstrip=True, rstrip=True, special=True)])
    elif kind == "llama3":
        bos = "<|begin_of_text|>"
        tok.post_processor = processors.Sequence([
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos} $B",
                                          special_tokens=[(bos, tok.token_to_id(bos))])])
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.add_tokens([AddedToken("[[ppctl]]", normalized=True)])
    path = os.path.join(folder, kind, "tokenizer.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tok.save(path)
    return path, Tokenizer.from_file(path)


def legacy_merges(path):
    """The same tokenizer.json with merges spelled "a b" (tokenizers before 0.20)."""
    with open(path, encoding="utf-8") as f:
        j = json.load(f)
    assert isinstance(j["model"]["merges"][0], list), "tokenizers 0.23 writes merges as pairs"
    j["model"]["merges"] = [" ".join(m) for m in j["model"]["merges"]]
    out = path.replace("tokenizer.json", "legacy.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump(j, f, ensure_ascii=False)
    return out


def group_ids(tmp):
    from tokenizers import Tokenizer
    jsonl = os.path.join(tmp, "docs.jsonl")
    write_jsonl(jsonl, DOCS)
    for kind in ("gpt2", "gpt2_prefix", "llama3", "qwen2", "splits"):
        path, tok = train(kind, tmp)
        expected = [tok.encode(d).ids for d in DOCS]
        vocab = tok.get_vocab_size(with_added_tokens=True)
        for name, file in (("pairs", path), ("legacy", legacy_merges(path))):
            assert Tokenizer.from_file(file).encode_batch(DOCS) is not None
            prefix = os.path.join(tmp, f"{kind}-{name}")
            run(["data", "prepare", "--tokenizer", file, "--input", jsonl, "--output", prefix])
            got, dtype = read_megatron(prefix)
            assert dtype.__name__ == "uint16", dtype
            for doc, g, e in zip(DOCS, got, expected):
                assert g == e, f"{kind} ({name} merges): ids differ for {doc[:60]!r}\nppctl:      {g}\ntokenizers: {e}"
            side = test_prepare.sidecar(prefix)
            assert side["tokenizer"] == "hf-bpe" and side["vocab_size"] == vocab, (side, vocab)
            assert side["model"] == os.path.abspath(file), side
        # --append-eod: tokenizers' encoding plus the end-of-document id, read back by megatron-core.
        eod = tok.token_to_id("<|end_of_text|>" if kind == "llama3" else "<|endoftext|>")
        prefix = os.path.join(tmp, f"{kind}-eod")
        run(["data", "prepare", "--tokenizer", os.path.dirname(path), "--input", jsonl, "--output", prefix,
             "--append-eod", str(eod)])
        assert read_megatron(prefix)[0] == [e + [eod] if e else [] for e in expected], kind
        print(f"{kind}: {sum(map(len, expected))} ids of {len(DOCS)} documents equal tokenizers' (pairs and "
              f"\"a b\" merges), vocabulary {vocab}")
    # The fuzz seeds tokenizers loads: hand-written files with a sparse vocabulary (bytes it lacks are
    # dropped), a literal Split with invert and MergedWithNext, lstrip/rstrip tokens, RobertaProcessing.
    seeds = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz", "hf_tokenizer")
    for name in ("gpt2.json", "llama3.json"):
        expected = [Tokenizer.from_file(os.path.join(seeds, name)).encode(d).ids for d in DOCS]
        prefix = os.path.join(tmp, "seed-" + name)
        run(["data", "prepare", "--tokenizer", os.path.join(seeds, name), "--input", jsonl, "--output", prefix])
        assert read_megatron(prefix)[0] == expected, name
    print("fuzz seeds gpt2.json, llama3.json: ids equal tokenizers'")
    # The eos id from the tokenizer_config.json beside tokenizer.json (as transformers saves it).
    folder = os.path.join(tmp, "llama3")
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"eos_token": {"content": "<|eot_id|>"}, "bos_token": "<|begin_of_text|>"}, f)
    eot = Tokenizer.from_file(os.path.join(folder, "tokenizer.json")).token_to_id("<|eot_id|>")
    prefix = os.path.join(tmp, "llama3-config-eos")
    run(["data", "prepare", "--tokenizer", folder, "--input", jsonl, "--output", prefix, "--append-eod"])
    got = read_megatron(prefix)[0]
    assert all(g[-1] == eot for g in got if g), got
    assert test_prepare.sidecar(prefix)["eod_id"] == eot
    # A vocabulary larger than model.vocab_size is refused where the dataset meets the spec.
    vocab = test_prepare.sidecar(prefix)["vocab_size"]
    spec = os.path.join(tmp, "job.yaml")
    with open(spec, "w") as f:
        f.write(f"""model: {{vocab_size: {vocab - 1}, layers: 2, hidden: 32, heads: 4, seq_len: 16}}
pipeline: {{stages: 2, schedule: 1f1b, microbatches: 2, micro_batch_size: 2}}
data: {{format: megatron, path: llama3-config-eos}}
train: {{steps: 2}}
""")
    p = subprocess.run([test_prepare.PPCTL, "plan", spec], capture_output=True, text=True)
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert "model.vocab_size" in p.stderr and "llama3-config-eos.tokenizer.json" in p.stderr, p.stderr
    assert f"set model.vocab_size: {vocab} or more" in p.stderr, p.stderr
    print(f"eos from tokenizer_config.json; model.vocab_size {vocab - 1} < {vocab} refused by plan")


def group_bad_input(tmp):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers, normalizers
    out = os.path.join(tmp, "out")
    os.mkdir(out)
    good = os.path.join(tmp, "good.jsonl")
    write_jsonl(good, ["fine text"] * 3)
    path, _ = train("gpt2", tmp)
    with open(path, encoding="utf-8") as f:
        base = json.load(f)

    def bad(name, edit, *needles):
        j = json.loads(json.dumps(base))
        edit(j)
        file = os.path.join(tmp, name)
        with open(file, "w", encoding="utf-8") as f:
            json.dump(j, f)
        expect_bad(["--tokenizer", file, "--input", good, "--output", os.path.join(out, "ds")], name, *needles,
                   folder=out)

    # Models other than BPE, saved by tokenizers itself.
    for model, trainer in ((models.WordPiece(unk_token="[UNK]"), trainers.WordPieceTrainer),
                           (models.Unigram(), trainers.UnigramTrainer),
                           (models.WordLevel(unk_token="[UNK]"), trainers.WordLevelTrainer)):
        tok = Tokenizer(model)
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
        tok.train_from_iterator(TRAIN, trainer(vocab_size=200, special_tokens=["[UNK]"], show_progress=False))
        name = type(model).__name__
        file = os.path.join(tmp, f"{name}.json")
        tok.save(file)
        expect_bad(["--tokenizer", file, "--input", good, "--output", os.path.join(out, "ds")],
                   f"{name}.json", "model.type", name, "not supported", folder=out)
    # Merges naming tokens that are not in the vocabulary; a merge that is not a pair.
    bad("unknown_merge.json", lambda j: j["model"]["merges"].insert(3, ["Ġzzqx", "t"]), "model.merges[3]",
        "Ġzzqx", "not in model.vocab")
    bad("unknown_merged.json", lambda j: j["model"]["merges"].insert(0, ["q", "q"]), "model.merges[0]",
        "the merged token", "qq")
    bad("bad_merge.json", lambda j: j["model"]["merges"].insert(5, "a b c"), "model.merges[5]", "one space")
    # Normalizers and pre-tokenizers it does not implement; a Split pattern PCRE2 cannot compile.
    bad("lowercase.json", lambda j: j.update(normalizer={"type": "Lowercase"}), "normalizer.type", "Lowercase")
    bad("whitespace.json", lambda j: j.update(pre_tokenizer={"type": "Whitespace"}), "pre_tokenizer.type",
        "Whitespace")
    bad("no_byte_level.json", lambda j: j.update(pre_tokenizer={"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "Isolated", "invert": False}]}),
        "pre_tokenizer.pretokenizers[0]", "no ByteLevel step last")
    bad("bad_regex.json", lambda j: j.update(pre_tokenizer={"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "(\\p{L}+"}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]}),
        "pre_tokenizer.pretokenizers[0].pattern", "does not compile with PCRE2")
    bad("added_id.json", lambda j: j["added_tokens"][0].update(id=j["added_tokens"][0]["id"] + 5),
        "added_tokens[0].id", "tokenizers gives it id")
    bad("dropout.json", lambda j: j["model"].update(dropout=0.1), "model.dropout")
    bad("byte_fallback.json", lambda j: j["model"].update(byte_fallback=True), "model.byte_fallback")
    bad("bad_id.json", lambda j: j["model"]["vocab"].update(x=-4), "model.vocab.x", "not a token id")
    # Two strings of model.vocab with one id: refused naming both strings, the id and the file.
    dup_id = base["model"]["vocab"]["a"]
    bad("duplicate_id.json", lambda j: j["model"]["vocab"].update(zzdup=dup_id), "model.vocab.zzdup",
        f"id {dup_id} is also the id of a", "two tokens cannot share an id")
    # truncation and padding: tokenizers 0.23 loads null or an object of its TruncationParams / PaddingParams
    # shape and refuses everything else; so does ppctl (every field of each kind: wrong type, unknown value,
    # missing, negative). What tokenizers itself saved after enable_truncation/enable_padding is read.
    from tokenizers import Tokenizer as _Tok
    saved = _Tok.from_file(path)
    saved.enable_truncation(128)
    saved.enable_padding()
    shaped = json.loads(saved.to_str())
    trunc, pad = shaped["truncation"], shaped["padding"]
    ok_file = os.path.join(tmp, "trunc_pad_ok.json")
    saved.save(ok_file)
    run(["data", "prepare", "--tokenizer", ok_file, "--input", good, "--output", os.path.join(out, "ok")])
    for name, value in (("truncation", trunc), ("padding", pad)):
        for i, wrong in enumerate((5, "x", True, [], {})):
            bad(f"{name}_{i}.json", lambda j, n=name, w=wrong: j.update({n: w}), name)
        for field in value:
            if field in ("direction",) and name == "truncation" or field == "pad_to_multiple_of":
                continue  # optional in tokenizers too
            bad(f"{name}_no_{field}.json", lambda j, n=name, f=field: j.update({n: {k: v for k, v in value.items()
                                                                                if k != f}}),
                f"{name}.{field}", "missing")
            wrong = -1 if isinstance(value[field], int) else "zz"
            if field == "pad_token":
                wrong = 7
            bad(f"{name}_bad_{field}.json", lambda j, n=name, f=field, w=wrong: j.update({n: dict(value, **{f: w})}),
                f"{name}.{field}")
    bad("padding_fixed.json", lambda j: j.update(padding=dict(pad, strategy={"Fixed": -3})), "padding.strategy.Fixed")
    for name, value in (("truncation", trunc), ("padding", pad)):  # tokenizers agrees: it refuses each of them
        for wrong in (5, "x", {}, dict(value, direction="zz")):
            j = json.loads(json.dumps(base))
            j[name] = wrong
            try:
                _Tok.from_str(json.dumps(j))
            except Exception:
                continue
            raise AssertionError(f"tokenizers loads {name}={wrong!r}: the test's premise is wrong")
    # A pre-tokenizer regex that backtracks catastrophically on a document: exit 2 naming the tokenizer file,
    # the field, the input file and the document (not exit 1 without them).
    slow = os.path.join(tmp, "backtracking.json")
    j = json.loads(json.dumps(base))
    j["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "(a|aa)+$"}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]}
    with open(slow, "w", encoding="utf-8") as f:
        json.dump(j, f)
    evil = os.path.join(tmp, "evil.jsonl")
    write_jsonl(evil, ["fine", "a" * 5000 + "!"])
    expect_bad(["--tokenizer", slow, "--input", evil, "--output", os.path.join(out, "ds")], "backtracking.json",
               "pre_tokenizer.pretokenizers[0]", "evil.jsonl", "document 2", "PCRE2", folder=out)
    # Values from the file are echoed escaped: an escape sequence in a type is shown, never sent.
    bad("escape.json", lambda j: j["model"].update(type="\x1b]0;pwned\x07"), "model.type", "\\x1b]0;pwned\\x07")
    # Not JSON; missing; --model beside a tokenizer.json; text that is not UTF-8.
    junk = os.path.join(tmp, "junk.json")
    with open(junk, "w") as f:
        f.write("{ not json")
    expect_bad(["--tokenizer", junk, "--input", good, "--output", os.path.join(out, "ds")], "junk.json",
               "not JSON", folder=out)
    # The parser's reason is shown whole (escaped), not cut as a long value would be: a name that is not
    # UTF-8 says so, and its bytes reach the terminal as escapes.
    not_utf8 = os.path.join(tmp, "not_utf8.json")
    with open(not_utf8, "wb") as f:
        f.write(b'{"model": {"type": "BPE", "vocab": {"<\xff\x1b[31m>": 0}}}')
    err = expect_bad(["--tokenizer", not_utf8, "--input", good, "--output", os.path.join(out, "ds")],
                     "not_utf8.json", "not JSON", "ill-formed UTF-8", "\\xff", folder=out)
    assert "\x1b" not in err and "\ufffd" not in err, repr(err)  # run() decodes a raw invalid byte as U+FFFD
    expect_bad(["--tokenizer", os.path.join(tmp, "nothing.json"), "--input", good, "--output",
                os.path.join(out, "ds")], "nothing.json", "no such file", folder=out)
    expect_bad(["--tokenizer", path, "--model", path, "--input", good, "--output", os.path.join(out, "ds")],
               "--model", "needs no model", folder=out)
    expect_bad(["--tokenizer", path, "--input", good, "--output", os.path.join(out, "ds"), "--append-eod"],
               "tokenizer.json", "names no end-of-sequence token", "tokenizer_config.json", folder=out)
    latin1 = os.path.join(tmp, "latin1.txt")
    with open(latin1, "wb") as f:
        f.write("caf\u00e9".encode("latin-1"))
    expect_bad(["--tokenizer", path, "--input", latin1, "--output", os.path.join(out, "ds")], "latin1.txt",
               "document 1", "not valid UTF-8 at byte 3", folder=out)
    print("bad input: WordPiece, Unigram, WordLevel, unknown merges, normalizers, pre-tokenizers, regexes, "
          "options, ids, non-UTF-8 text: each exits 2 naming the file and field")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="ppctl-hf-bpe-") as folder:
        globals()["group_" + sys.argv[1]](folder)
