"""`ppctl data prepare --input-format chat` against transformers: for every real chat template in
../shared/chat-templates/ and generated conversations, the ids megatron-core reads from PREFIX.bin/.idx equal
`apply_chat_template(messages, tokenize=True)`, the loss masks it reads from PREFIX.loss_mask.bin/.idx equal
`return_assistant_tokens_mask` where the template has {% generation %} blocks (smollm3), and for every template
the masked tokens decode to exactly each assistant turn's text and its end-of-turn token (found here from the
rendered text, independently of ppctl's rule). Also the bad input of the chat path (exit 2 naming file and
line, nothing written).

Usage: test_chat.py GROUP PPCTL   (GROUP: oracle | bad_input; bad_input also stops runs with SIGINT, SIGTERM
and SIGHUP, chat and plain: nothing left behind, and a later run removes a dead run's temporaries)
"""
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_prepare  # noqa: E402  (run, expect_bad)

test_prepare.PPCTL = sys.argv[2] if len(sys.argv) > 2 else "build/app/ppctl"
run, expect_bad = test_prepare.run, test_prepare.expect_bad

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEMPLATES = os.path.join(ROOT, "..", "shared", "chat-templates")
DATE = "2026-01-31"

# Every special token the twelve templates write, added to each test tokenizer as a special added token.
SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
            "<|eom_id|>", "<|python_tag|>", "<|im_start|>", "<|im_end|>", "<|endoftext|>", "[INST]", "[/INST]",
            "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_CALLS]", "[TOOL_RESULTS]", "[/TOOL_RESULTS]", "<s>",
            "</s>", "<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>", "<|user|>", "<|assistant|>", "<|end|>",
            "<|system|>", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>",
            "<think>", "</think>", "<tool_call>", "</tool_call>"]

# template file: (bos_token, eos_token, end-of-turn marker, texts allowed between the generation prompt and the
# content in a masked turn, whether it takes a system message)
TABLE = {
    "llama-3.1-instruct": ("<|begin_of_text|>", "<|eot_id|>", "<|eot_id|>", [""], True),
    "llama-3.2-instruct": ("<|begin_of_text|>", "<|eot_id|>", "<|eot_id|>", [""], True),
    "llama-3.3-instruct": ("<|begin_of_text|>", "<|eot_id|>", "<|eot_id|>", [""], True),
    "qwen2.5-instruct": (None, "<|im_end|>", "<|im_end|>", [""], True),
    "qwen3": (None, "<|im_end|>", "<|im_end|>", ["", "<think>\n\n</think>\n\n"], True),
    "mistral-7b-instruct-v0.3": ("<s>", "</s>", "</s>", ["", " "], True),
    "mistral-nemo-instruct": ("<s>", "</s>", "</s>", ["", " "], True),
    "gemma-2-it": ("<bos>", "<eos>", "<end_of_turn>", [""], False),
    "phi-3.5-mini-instruct": ("<s>", "<|endoftext|>", "<|end|>", [""], True),
    "deepseek-r1-distill-qwen": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜end▁of▁sentence｜>", [""],
                                 True),
    "smollm2-instruct": ("<|im_start|>", "<|im_end|>", "<|im_end|>", [""], True),
    "smollm3": (None, "<|im_end|>", "<|im_end|>", [""], True),
}

WORDS = ("the model learns to answer questions about pipelines stages ranks and microbatches; "
         "Grüße aus Köln, naïve café. 日本語のテキスト。数据并行。 Привет мир! مرحبا 🙂 🚀 x = 3.14159 "
         "def f(x):\n    return x * 2\n\nfirst line\nsecond line").split(" ")
TRAIN = [" ".join(WORDS[i:] + WORDS[:i]) for i in range(len(WORDS))] * 5


def sentence(rng, lo=1, hi=25):
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def conversations(rng, with_system, n=24):
    """n conversations: 1-4 exchanges, with and without a system message (where the template takes one),
    unicode, code, newlines; a few with white space around an answer; one with an empty answer."""
    out = []
    for k in range(n):
        messages = []
        if with_system and k % 2 == 0:
            messages.append({"role": "system", "content": sentence(rng, 3, 12)})
        for t in range(rng.randint(1, 4)):
            messages.append({"role": "user", "content": sentence(rng)})
            answer = sentence(rng, 1, 40)
            if k % 7 == 3:
                answer = "  " + answer + "\n"
            messages.append({"role": "assistant", "content": answer})
        out.append(messages)
    out[-1] = [{"role": "user", "content": "Say nothing."}, {"role": "assistant", "content": "OK."}]
    return out


def make_tokenizer(folder):
    """A small byte-level BPE (Llama 3's split pattern) trained here, the specials added as special tokens and a
    post-processor that adds <|begin_of_text|> (as Llama 3's does: apply_chat_template must not use it)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from test_hf_bpe import LLAMA3_PATTERN
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, min_frequency=2, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(TRAIN, trainer)
    bos = "<|begin_of_text|>"
    tok.post_processor = processors.TemplateProcessing(single=f"{bos} $A", special_tokens=[(bos, tok.token_to_id(bos))])
    os.makedirs(folder, exist_ok=True)
    tok.save(os.path.join(folder, "tokenizer.json"))
    return os.path.join(folder, "tokenizer.json")


def model_folder(tmp, name, tokenizer_json, template=None):
    bos, eos = TABLE[name][:2] if name in TABLE else ("<s>", "</s>")
    folder = os.path.join(tmp, name)
    os.makedirs(folder, exist_ok=True)
    with open(tokenizer_json, encoding="utf-8") as f:
        text = f.read()
    with open(os.path.join(folder, "tokenizer.json"), "w", encoding="utf-8") as f:
        f.write(text)
    if template is None:
        with open(os.path.join(TEMPLATES, name + ".jinja"), encoding="utf-8") as f:
            template = f.read()
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": eos}
    if bos:
        config["bos_token"] = {"content": bos, "special": True, "__type": "AddedToken"} if "llama" in name else bos
    if template is not False:
        config["chat_template"] = template
    with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False)
    return folder


def read_dataset(prefix):
    from megatron.core.datasets.indexed_dataset import IndexedDataset
    ids = IndexedDataset(prefix, multimodal=False, mmap=True)
    masks = IndexedDataset(prefix + ".loss_mask", multimodal=False, mmap=True)
    assert masks.index.dtype.__name__ == "uint8", masks.index.dtype
    assert list(ids.sequence_lengths) == list(masks.sequence_lengths)
    assert list(masks.document_indices) == list(range(len(masks) + 1))
    return [ids[i].tolist() for i in range(len(ids))], [masks[i].tolist() for i in range(len(masks))]


def pin_date():
    """transformers' strftime_now calls datetime.now() of its module: pinned to DATE (as --chat-date pins ppctl)."""
    import transformers.utils.chat_template_utils as ctu

    class Pinned(datetime):
        @classmethod
        def now(cls, tz=None):
            return cls.strptime(DATE + " 12:00", "%Y-%m-%d %H:%M")
    ctu.datetime = Pinned


def expected_runs(tok, name, messages, ids):
    """The masked text of each assistant turn, found in the decoded ids: the turn's content (as written or
    stripped) ending in the template's end-of-turn marker, after one of the allowed leads."""
    marker, leads = TABLE[name][2], TABLE[name][3]
    return [(m["content"], marker, leads) for m in messages if m["role"] == "assistant"]


def runs_of(ids, mask):
    runs, cur = [], []
    for i, m in zip(ids, mask):
        if m:
            cur.append(i)
        elif cur:
            runs.append(cur)
            cur = []
    if cur:
        runs.append(cur)
    return runs


def group_oracle(tmp):
    from transformers import AutoTokenizer
    rng = random.Random(7)
    pin_date()
    tokenizer_json = make_tokenizer(os.path.join(tmp, "base"))
    names = sorted(n[:-len(".jinja")] for n in os.listdir(TEMPLATES) if n.endswith(".jinja"))
    assert set(names) == set(TABLE), (names, sorted(TABLE))
    total = 0
    for name in names:
        folder = model_folder(tmp, name, tokenizer_json)
        convs = conversations(rng, TABLE[name][4])
        jsonl = os.path.join(tmp, name + ".jsonl")
        with open(jsonl, "w", encoding="utf-8") as f:
            for k, c in enumerate(convs):
                if k == 1 and len(c) == 2 and c[0]["role"] == "user":  # the prompt/completion forms
                    f.write(json.dumps({"prompt": c[0]["content"], "completion": c[1]["content"]}, ensure_ascii=False))
                elif k == 5 and c[0]["role"] == "user":
                    f.write(json.dumps({"prompt": c[:-1], "completion": c[-1:]}, ensure_ascii=False))
                else:
                    f.write(json.dumps({"messages": c, "id": k}, ensure_ascii=False))
                f.write("\n\n" if k == 3 else "\n")  # a blank line is skipped
        prefix = os.path.join(tmp, name + "-ds")
        out, _ = run(["data", "prepare", "--input-format", "chat", "--tokenizer", folder, "--input", jsonl,
                      "--output", prefix, "--chat-date", DATE])
        assert f"{len(convs)} conversations" in out, out
        got_ids, got_masks = read_dataset(prefix)
        tok = AutoTokenizer.from_pretrained(folder)
        kwargs = {}
        targets = 0
        for k, (messages, ids, mask) in enumerate(zip(convs, got_ids, got_masks)):
            want = tok.apply_chat_template(messages, tokenize=True, return_dict=True, **kwargs)["input_ids"]
            assert ids == list(want), (f"{name} conversation {k}: ids differ from apply_chat_template's\n"
                                       f"{tok.decode(ids)!r}\n{tok.decode(want)!r}")
            if name == "smollm3":
                out_mask = tok.apply_chat_template(messages, tokenize=True, return_dict=True,
                                                   return_assistant_tokens_mask=True, **kwargs)["assistant_masks"]
                assert mask == list(out_mask), (name, k, mask, out_mask)
            runs = [tok.decode(r, skip_special_tokens=False) for r in runs_of(ids, mask)]
            turns = expected_runs(tok, name, messages, ids)
            if name != "smollm3":
                assert len(runs) == len(turns), (name, k, runs, turns)
                for text, (content, marker, leads) in zip(runs, turns):
                    assert any(text in (lead + content + marker, lead + content.strip() + marker) for lead in leads), (
                        f"{name} conversation {k}: masked text {text!r} is not the turn {content!r} + {marker!r}")
            else:  # smollm3's blocks (equal to transformers' above) hold its whole turn: the header
                # "<|im_start|>assistant\n", the content, <|im_end|> and the newline after it
                assert len(runs) == len(turns), (name, k, runs, turns)
                for text, (content, marker, _) in zip(runs, turns):
                    assert text.startswith("<|im_start|>assistant\n") and (content + marker in text or
                                                                         content.strip() + marker in text), (text, content)
            targets += sum(mask)
        side = test_prepare.sidecar(prefix)
        assert side["version"] == 1 and side["chat"]["train_on"] == "assistant" and side["chat"]["date"] == DATE, side
        assert side["chat"]["conversations"] == len(convs) and side["chat"]["target_tokens"] == targets, side
        assert side["chat"]["template"] == os.path.abspath(os.path.join(folder, "tokenizer_config.json")), side
        total += len(convs)
        print(f"{name}: {len(convs)} conversations, ids equal apply_chat_template's, {targets} targets = the "
              f"assistant turns + {TABLE[name][2]}")
    # --train-on all: every token; a .jinja given with --chat-template; gemma-2 refuses a system message.
    prefix = os.path.join(tmp, "all")
    jsonl = os.path.join(tmp, "qwen2.5-instruct.jsonl")
    run(["data", "prepare", "--input-format", "chat", "--tokenizer", os.path.join(tmp, "base"), "--input", jsonl,
         "--output", prefix, "--train-on", "all", "--chat-template",
         os.path.join(TEMPLATES, "qwen2.5-instruct.jinja")])
    ids, masks = read_dataset(prefix)
    assert ids == read_dataset(os.path.join(tmp, "qwen2.5-instruct-ds"))[0]
    assert all(all(m) for m in masks) and test_prepare.sidecar(prefix)["chat"]["train_on"] == "all"
    assert test_prepare.sidecar(prefix)["chat"]["loss_mask"] == os.path.abspath(prefix + ".loss_mask")
    # A line's "tools" (TRL's column) reaches the template as apply_chat_template(messages, tools=...) passes it.
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "The weather of a city",
                                               "parameters": {"type": "object", "properties": {
                                                   "city": {"type": "string"}}, "required": ["city"]}}}]
    for name in ("qwen2.5-instruct", "llama-3.1-instruct"):
        folder = os.path.join(tmp, name)
        convs = conversations(rng, True, n=4)
        jsonl = os.path.join(tmp, name + "-tools.jsonl")
        with open(jsonl, "w", encoding="utf-8") as f:
            f.write("".join(json.dumps({"messages": c, "tools": tools}, ensure_ascii=False) + "\n" for c in convs))
        prefix = os.path.join(tmp, name + "-tools")
        run(["data", "prepare", "--input-format", "chat", "--tokenizer", folder, "--input", jsonl, "--output",
             prefix, "--chat-date", DATE])
        tok = AutoTokenizer.from_pretrained(folder)
        for messages, ids in zip(convs, read_dataset(prefix)[0]):
            want = tok.apply_chat_template(messages, tools=tools, tokenize=True, return_dict=True)["input_ids"]
            assert ids == list(want) and "get_weather" in tok.decode(ids), (name, tok.decode(ids), tok.decode(want))
    print(f"oracle: {len(names)} templates x >= 24 conversations ({total}) equal transformers; --train-on all; "
          f"a line's tools equal apply_chat_template(tools=...)")


def group_bad_input(tmp):
    from test_prepare import write_jsonl  # noqa: F401
    out = os.path.join(tmp, "out")
    os.mkdir(out)
    prefix = os.path.join(out, "ds")
    tokenizer_json = make_tokenizer(os.path.join(tmp, "base"))
    qwen = model_folder(tmp, "qwen2.5-instruct", tokenizer_json)
    good = [{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}] * 30
    args = ["data", "prepare", "--input-format", "chat", "--tokenizer", qwen, "--output", prefix]

    def bad(line, *needles, folder=qwen, extra=()):
        path = os.path.join(tmp, "bad.jsonl")
        with open(path, "w", encoding="utf-8") as f:
            f.write("".join(json.dumps(g) + "\n" for g in good) + line + "\n")
        a = list(args[2:])
        a[a.index("--tokenizer") + 1] = folder
        return expect_bad(a + ["--input", path] + list(extra), *needles, folder=out)

    bad('{"messages": [', "bad.jsonl:31:", "not JSON")
    bad('[2E615, {"messages": []}]', "bad.jsonl:31:", "does not fit a double", "1.8e308")  # a fuzz finding
    bad('["a"]', "bad.jsonl:31:", "not an object")
    bad('{"text": "plain"}', "bad.jsonl:31:", 'no "messages" and no "prompt"')
    bad('{"messages": [{"role": "robot", "content": "x"}]}', "bad.jsonl:31:", "messages[0].role", "robot",
        "system, user, assistant or tool")
    bad('{"messages": [{"role": "user", "content": 5}]}', "bad.jsonl:31:", "messages[0].content", "not a string")
    bad('{"messages": [{"role": "user"}]}', "bad.jsonl:31:", 'no "content"')
    bad('{"messages": []}', "bad.jsonl:31:", "empty conversation")
    bad('{"messages": "hi"}', "bad.jsonl:31:", "not a list of messages")
    bad('{"prompt": "a"}', "bad.jsonl:31:", '"prompt" without "completion"')
    bad('{"prompt": "a", "completion": [{"role": "assistant", "content": "b"}]}', "bad.jsonl:31:", "both strings",
        '"prompt" is a string and "completion" an array')
    bad('{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}], "tools": "x"}',
        "bad.jsonl:31:", "tools: a string, not a list of tool schemas")
    # Nesting: a message's extra key (it is copied into the template's context), a top-level key, deeper than
    # the engine's depth limit; parsing stops at the limit, so even a million levels neither overflow the stack
    # when copied nor when destroyed. 200 levels (the line's object counted) are prepared.
    def nested(depth, top=False):
        deep = "[" * depth + "]" * depth
        user = '{"role": "user", "content": "q"' + ("" if top else ', "extra": ' + deep) + "}"
        return ('{"messages": [' + user + ', {"role": "assistant", "content": "a"}]' + (', "x": ' + deep if top else "")
                + "}")
    for depth, top in ((30_000, False), (1_000_000, False), (1_000_000, True), (198, False)):
        bad(nested(depth, top), "bad.jsonl:31:", "deeper than the limit of 200 levels", "flatten")
    deep_ok = os.path.join(tmp, "deep-ok.jsonl")
    with open(deep_ok, "w", encoding="utf-8") as f:
        f.write(nested(197) + "\n")
    run(args + ["--input", deep_ok])
    # Bytes that are not UTF-8: the byte, and re-encoding as the fix.
    latin = os.path.join(tmp, "latin.jsonl")
    head = b'{"messages": [{"role": "user", "content": "caf'
    with open(latin, "wb") as f:
        f.write(b"\n" + head + b'\xe9"}, {"role": "assistant", "content": "a"}]}\n')
    err = expect_bad(args[2:] + ["--input", latin], "latin.jsonl:2:", f"byte {len(head) + 1} of the line is not UTF-8",
                     "re-encode the file as UTF-8", folder=out)
    assert "one JSON object per line" not in err, err
    bad('{"messages": [{"role": "user", "content": "a"}], "prompt": "b", "completion": "c"}', "bad.jsonl:31:",
        "both")
    bad('{"messages": [{"role": "user", "content": "only a question"}]}', "bad.jsonl:31:",
        "without an assistant message", "--train-on all")
    # gemma-2 raises on a system message: its message, the template file and the line.
    gemma = model_folder(tmp, "gemma-2-it", tokenizer_json)
    bad('{"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}, '
        '{"role": "assistant", "content": "a"}]}', "bad.jsonl:31:", "System role not supported",
        "gemma-2-it/tokenizer_config.json", "as the template's message asks", folder=gemma)
    # Each kind of render failure gets its own fix: a limit, a field the conversation lacks, 64-bit overflow,
    # a type error in the template.
    for name, source, needles in (
            ("deep-macro", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
             ["max_depth", "too large for the template engine's limits"]),
            ("big-output", "{% for i in range(100000) %}{{ messages[0].content * 1000 }}{% endfor %}",
             ["max_output_bytes", "too large for the template engine's limits"]),
            ("needs-field", "{% for m in messages %}{{ m.name.upper() }}{% endfor %}",
             ["lacks a field the template reads", "'name'"]),
            ("overflow", "{{ 9223372036854775807 + messages | length }}", ["does not fit 64 bits"]),
            ("type-error", "{{ messages[0].content + 1 }}", ["check the template"])):
        err = bad("", "bad.jsonl:1:", *needles, folder=model_folder(tmp, name, tokenizer_json, source))
        assert "as the template's message asks" not in err, err
    # A template that loops without end or grows without bound: the engine's limits stop it.
    loop = model_folder(tmp, "loop", tokenizer_json,
                        "{% for i in range(100000000) %}{% for j in range(100000000) %}x{% endfor %}{% endfor %}")
    err = bad("", "bad.jsonl:1:", "max_steps", "too large for the template engine's limits", folder=loop)
    assert "loop/tokenizer_config.json" in err, err
    # No chat template: the message says how to pass one.
    none = model_folder(tmp, "none", tokenizer_json, template=False)
    bad("", "none/tokenizer_config.json", "no chat template", "--chat-template", folder=none)
    # A folder without any template file: --chat-template's, and --tokenizer's.
    empty_dir = os.path.join(tmp, "emptydir")
    os.mkdir(empty_dir)
    err = bad("", "--chat-template", "emptydir", "holds neither chat_template.jinja nor tokenizer_config.json",
              extra=["--chat-template", empty_dir])
    assert "no such file" not in err, err
    bare = os.path.join(tmp, "bare")
    os.mkdir(bare)
    with open(os.path.join(bare, "tokenizer.json"), "w", encoding="utf-8") as f, open(tokenizer_json) as g:
        f.write(g.read())
    bad("", "the folder of --tokenizer", "bare", "holds neither chat_template.jinja nor tokenizer_config.json",
        "--chat-template", folder=bare)
    # A template the engine cannot parse; a missing --chat-template; a template the mask rule cannot place.
    broken = model_folder(tmp, "broken", tokenizer_json, "{% for m in messages %}{{ m.content }")
    bad("", "broken/tokenizer_config.json", folder=broken)
    bad("", "no-such.jinja", "no such file", extra=["--chat-template", os.path.join(tmp, "no-such.jinja")])
    plain = model_folder(tmp, "plain", tokenizer_json, "{% for m in messages %}{{ m.role }}: {{ m.content }}\n"
                                                       "{% endfor %}")
    err = bad("", "bad.jsonl:1: messages[1] (assistant)", "plain/tokenizer_config.json", "--train-on all",
              "the render ends there", folder=plain)
    assert "line 1:" not in err and "goes on with )" not in err, err
    err = bad("", "bad.jsonl:1: messages[1] (assistant)", 'the render goes on with "!")',
              folder=model_folder(tmp, "bang", tokenizer_json, "{% for m in messages %}{{ m.content }}!{% endfor %}"))
    # Mask placement renders the conversation up to each assistant turn: more turns than the limit are refused
    # (quadratic time); the limit itself is prepared.
    def turns(n):
        return json.dumps({"messages": [{"role": r, "content": f"{r} {k}"} for k in range(n)
                                        for r in ("user", "assistant")]})
    bad(turns(1025), "bad.jsonl:31:", "1025 assistant messages", "limit of 1024", "split the conversation")
    many = os.path.join(tmp, "many.jsonl")
    with open(many, "w", encoding="utf-8") as f:
        f.write(turns(1024) + "\n")
    started = time.time()
    run(args + ["--input", many])
    assert time.time() - started < 60, time.time() - started
    # Input without a conversation: the files are named.
    for name, text in (("empty.jsonl", ""), ("blank.jsonl", "\n  \n\t\n")):
        path = os.path.join(tmp, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        expect_bad(args[2:] + ["--input", path], name, "no conversation", "only blank lines", folder=out)
    path = os.path.join(tmp, "ok.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(json.dumps(g) + "\n" for g in good))
    run(["data", "prepare", "--input-format", "chat", "--tokenizer", plain, "--input", path, "--output",
         os.path.join(tmp, "plain-all"), "--train-on", "all"])
    # Options that cannot work with chat data.
    base = ["--input-format", "chat", "--input", path, "--output", prefix]
    expect_bad(base + ["--tokenizer", "bytes"], "--input-format chat needs --tokenizer PATH", folder=out)
    expect_bad(base + ["--tokenizer", qwen, "--append-eod"], "--append-eod", folder=out)
    expect_bad(base + ["--tokenizer", qwen, "--chat-date", "2026-02-30"], "--chat-date", folder=out)
    expect_bad(base + ["--tokenizer", qwen, "--chat-date", "31.01.2026"], "--chat-date", "YYYY-MM-DD", folder=out)
    expect_bad(base + ["--tokenizer", qwen, "--chat-context", "[1]"], "--chat-context", "not an object", folder=out)
    expect_bad(base + ["--tokenizer", qwen, "--chat-context", "{x"], "--chat-context", "not JSON", folder=out)
    for key in ("messages", "add_generation_prompt"):
        expect_bad(base + ["--tokenizer", qwen, "--chat-context", json.dumps({key: []})], "--chat-context",
                   f'"{key}" is set by ppctl', folder=out)
    expect_bad(base + ["--tokenizer", qwen, "--chat-context", '{"x": ' + "[" * 300 + "]" * 300 + "}"],
               "--chat-context", "deeper than the limit of 200 levels", folder=out)
    expect_bad(base + ["--tokenizer", qwen, "--document-separator", "%"], "--document-separator", folder=out)
    expect_bad(base + ["--tokenizer", qwen, "--json-key", "body"], "--json-key", folder=out)
    interrupts(tmp, qwen, good)
    print("bad input: malformed lines, forms, roles, contents, no assistant, raising/looping/missing/broken "
          "templates, unmaskable template, options: each exits 2 naming file and line, nothing written")


def interrupt(args, folder, sig):
    """Starts ppctl data prepare, sends `sig` once its temporaries exist, and checks it stops with 128 + sig,
    saying so, with no temporary left."""
    p = subprocess.Popen([test_prepare.PPCTL, "data", "prepare"] + args, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not any(".tmp." in n for n in os.listdir(folder)):
        assert p.poll() is None and time.time() < deadline, ("ended before its temporaries appeared", p.returncode)
        time.sleep(0.002)
    time.sleep(0.2)
    p.send_signal(sig)
    _, err = p.communicate(timeout=120)
    name = signal.Signals(sig).name
    assert p.returncode == 128 + sig, (name, p.returncode, err)
    assert f"interrupted ({name}) at " in err and "temporary files were removed" in err, err
    assert not os.listdir(folder), os.listdir(folder)


def interrupts(tmp, model, good):
    """SIGINT, SIGTERM, SIGHUP stop chat and plain runs (the same writer) with nothing left behind; a run
    removes the temporaries a dead run left on its prefix, and keeps those of a running process."""
    folder = os.path.join(tmp, "interrupted")
    os.mkdir(folder)
    chats = os.path.join(tmp, "many-chats.jsonl")
    with open(chats, "w", encoding="utf-8") as f:
        f.write("".join(json.dumps(good[0]) + "\n" for _ in range(400_000)))
    texts = os.path.join(tmp, "many-texts.jsonl")
    with open(texts, "w", encoding="utf-8") as f:
        f.write("".join(json.dumps({"text": "the model learns to answer questions %d" % k}) + "\n"
                        for k in range(400_000)))
    prefix = os.path.join(folder, "ds")
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        interrupt(["--input-format", "chat", "--tokenizer", model, "--input", chats, "--output", prefix], folder, sig)
    interrupt(["--input-format", "jsonl", "--tokenizer", model, "--input", texts, "--output", prefix], folder,
              signal.SIGINT)
    dead, alive = 999_999_999, os.getpid()  # above any pid_max; this test's own process
    stale = [f"ds.bin.tmp.{dead}", f"ds.loss_mask.bin.tmp.{dead}", f"ds.idx.tmp.{dead}", f"ds.tokenizer.json.tmp.{dead}"]
    kept = [f"ds.bin.tmp.{alive}", f"ds.other.tmp.{dead}", f"dsx.bin.tmp.{dead}", f"ds.bin.tmp.{dead}x"]
    for n in stale + kept:
        open(os.path.join(folder, n), "w").close()
    path = os.path.join(tmp, "ok-chats.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(good[0]) + "\n")
    _, err = run(["data", "prepare", "--input-format", "chat", "--tokenizer", model, "--input", path, "--output", prefix])
    left = set(os.listdir(folder))
    assert not left & set(stale) and set(kept) <= left, sorted(left)
    for n in stale:
        assert n in err and "no longer running" in err, (n, err)
    print("interrupts: SIGINT, SIGTERM, SIGHUP stop chat and plain runs with nothing left; a dead run's "
          "temporaries are removed by the next run")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="ppctl-chat-") as folder:
        globals()["group_" + sys.argv[1]](folder)
