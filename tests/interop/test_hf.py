"""ppctl against Hugging Face transformers: import (model.init_from), export (ppctl export --hf) and the
bad inputs of both. Usage: test_hf.py CASE PPCTL PPCTL_LOGITS, CASE one of
  parity-gpt2-tied, parity-gpt2-untied, parity-llama: the model loaded at 1, 2 and 4 stages (1f1b), at 2
      under zb-h1 and zbv (the split backward), and at tensor parallel 2 x 2 stages (1f1b, zbv); the loss and
      every parameter's gradient of step 1 equal transformers' forward and backward (fp32, relative 1e-5);
  export-gpt2, export-llama: a few training steps from the HF folder, `ppctl export` (one file and
      sharded), transformers loads the result and its logits equal ppctl's (relative 1e-5);
  bad-inputs: missing tensor, wrong shape, unsupported architecture, truncated file, index naming a
      missing shard, a written field disagreeing with config.json: each exits 2 naming tensor and file;
  model-folder: issue 25's "done when": a tiny Qwen2.5-style folder with a byte-level BPE tokenizer trained
      here by `tokenizers` and saved by transformers; `data prepare --tokenizer` on text; 2 stages from it;
      `ppctl export`; AutoTokenizer and AutoModelForCausalLM load the export, their ids equal ppctl's
      prepared ones, logits equal ppctl's (relative 1e-5), generate runs. Then the source's vocabulary
      changed: the export copies no tokenizer file and says so.
"""
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import torch
import safetensors.torch

sys.path.insert(0, os.path.dirname(__file__))
import hf_models  # noqa: E402

SEQ_LEN = 16
SEQUENCES = 4  # the global batch: every sequence of the data file, so its order does not matter
TOLERANCE = 1e-5
# What transformers' tokenizers and generation read from a model folder, which an export copies from the
# folder it started from (written here apart from lib/interop/hf_source_files.cpp).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                   "vocab.json", "merges.txt", "tokenizer.model", "chat_template.jinja", "generation_config.json")


def write_data(folder):
    """Random bytes: exactly SEQUENCES windows of SEQ_LEN + 1 bytes (stride SEQ_LEN)."""
    g = torch.Generator().manual_seed(1)
    data = torch.randint(0, 256, (SEQUENCES * SEQ_LEN + 1,), generator=g, dtype=torch.uint8)
    path = folder / "data.bin"
    path.write_bytes(bytes(data.tolist()))
    windows = [data[k * SEQ_LEN: k * SEQ_LEN + SEQ_LEN + 1].long() for k in range(SEQUENCES)]
    batch = torch.stack(windows)
    return path, batch[:, :-1], batch[:, 1:]


def write_spec(folder, name, init_from, data, stages, extra="", schedule="1f1b", tensor_parallel=1):
    spec = folder / f"{name}.yaml"
    spec.write_text(f"""model:
  init_from: {init_from}
  seq_len: {SEQ_LEN}
pipeline:
  stages: {stages}
  tensor_parallel: {tensor_parallel}
  schedule: {schedule}
  microbatches: {SEQUENCES}
  micro_batch_size: 1
data:
  path: {data}
optimizer:
  weight_decay: 0.0
train:
  steps: 1
observe:
  runs_dir: {folder / 'runs'}
{extra}""")
    return spec


def run(cmd, expect=0):
    result = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=300)
    if result.returncode != expect:
        sys.exit(f"FAIL: {' '.join(map(str, cmd))} exited {result.returncode}, expected {expect}\n"
                 f"stdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-5000:]}")
    return result


relative = hf_models.relative


def hf_loss_and_grads(model, tokens, targets):
    model.zero_grad(set_to_none=True)
    logits = model(input_ids=tokens).logits
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
    loss.backward()
    return loss.item(), {name: p.grad for name, p in model.named_parameters()}


def case_parity(kind, ppctl, tmp):
    hf_dir = tmp / "hf"
    hf_models.save(kind, hf_dir)
    reference = hf_models.load(hf_dir)
    reference.train()
    data, tokens, targets = write_data(tmp)
    hf_loss, hf_grads = hf_loss_and_grads(reference, tokens, targets)
    names = hf_models.ppctl_to_hf(kind, reference.config.num_hidden_layers)
    worst = 0.0
    # 1F1B at 1, 2 and 4 stages; the split backward (I and W apart) of zb-h1 and zbv at 2; tensor parallel 2 x 2
    # stages (each rank reads its shards of the folder's tensors; the dumps hold whole gradients).
    for stages, schedule, tp in ((1, "1f1b", 1), (2, "1f1b", 1), (4, "1f1b", 1), (2, "zb-h1", 1), (2, "zbv", 1),
                                 (2, "1f1b", 2), (2, "zbv", 2)):
        stages_name = f"{stages}" if tp == 1 else f"{stages} (tp {tp})"
        spec = write_spec(tmp, f"p{stages}-t{tp}-{schedule}", hf_dir, data, stages, schedule=schedule,
                          tensor_parallel=tp)
        plan = run([ppctl, "plan", spec]).stdout
        assert str(hf_dir) in plan, f"plan does not name the folder:\n{plan}"
        dump = tmp / f"dump{stages}-t{tp}-{schedule}"
        dump.mkdir()
        run([ppctl, "train", spec, "--dump-gradients", dump, "--run-dir", tmp / f"run{stages}-t{tp}-{schedule}"])
        loss, grads = hf_models.read_gradient_dump(dump)
        assert abs(loss - hf_loss) <= TOLERANCE * abs(hf_loss), f"{schedule} at {stages_name} stages: loss {loss} vs HF {hf_loss}"
        expected = {n for n in names if n != "lm_head.weight"}
        assert expected <= set(grads), f"{schedule} at {stages_name} stages: missing gradients {expected - set(grads)}"
        for name, grad in grads.items():
            hf_name, theirs = hf_models.hf_gradient(name, names, hf_grads, SEQ_LEN)
            assert grad.shape == theirs.shape, f"{name}: shape {grad.shape} vs HF {theirs.shape}"
            r = relative(grad, theirs)
            worst = max(worst, r)
            assert r <= TOLERANCE, f"{schedule} at {stages_name} stages: gradient of {name} ({hf_name}) differs, relative {r:.2e}"
        print(f"{kind}: {schedule} at {stages_name} stage(s): loss {loss:.6f} (HF {hf_loss:.6f}), {len(grads)} gradients equal")
    print(f"{kind}: worst relative gradient difference {worst:.2e}")


def ppctl_logits(tool, checkpoint, tokens, tmp):
    text = tmp / "tokens.txt"
    text.write_text("\n".join(" ".join(str(int(t)) for t in row) for row in tokens) + "\n")
    out = tmp / "logits.safetensors"
    run([tool, checkpoint, text, out])
    return safetensors.torch.load_file(str(out))["logits"]


def case_export(kind, ppctl, tool, tmp):
    hf_dir = tmp / "hf"
    original = hf_models.save(kind, hf_dir)
    data, tokens, _ = write_data(tmp)
    spec = write_spec(tmp, "train", hf_dir, data, 2,
                      f"checkpoint:\n  dir: {tmp / 'ckpt'}\n  interval: 3\n")
    run([ppctl, "train", spec, "--steps", "3", "--run-dir", tmp / "run"])
    checkpoint = tmp / "ckpt"
    ours = ppctl_logits(tool, checkpoint, tokens, tmp)
    with torch.no_grad():
        before = original(input_ids=tokens).logits
    assert relative(ours, before) > 1e-4, "training did not change the model"
    for name, extra in [("single", []), ("sharded", ["--max-shard-size", "20KB"])]:
        out = tmp / f"export-{name}"
        result = run([ppctl, "export", checkpoint, "--hf", out] + extra)
        print(result.stdout.strip())
        files = sorted(p.name for p in out.iterdir())
        if name == "sharded":
            assert "model.safetensors.index.json" in files and len([f for f in files if f.startswith("model-")]) > 1, files
            index = json.loads((out / "model.safetensors.index.json").read_text())
            assert set(index["weight_map"].values()) == {f for f in files if f.startswith("model-")}
        else:
            copied = [f for f in TOKENIZER_FILES if (hf_dir / f).exists()]
            assert "generation_config.json" in copied, copied  # save_pretrained writes it
            assert files == sorted(["config.json", "model.safetensors"] + copied), files
            for name in copied:
                assert (out / name).read_bytes() == (hf_dir / name).read_bytes(), name
        config = json.loads((out / "config.json").read_text())
        source = json.loads((hf_dir / "config.json").read_text())
        for key in ("bos_token_id", "eos_token_id"):
            assert config[key] == source.get(key), (key, config[key], source.get(key))
        if "max_position_embeddings" in source:  # the llama family keeps its context; GPT-2 cuts wpe
            assert config["max_position_embeddings"] == source["max_position_embeddings"], config
        model = hf_models.load(out)
        model.eval()
        with torch.no_grad():
            theirs = model(input_ids=tokens).logits
        r = relative(theirs, ours)
        assert r <= TOLERANCE, f"{name}: transformers' logits of the export differ from ppctl's: relative {r:.2e}"
        print(f"{kind}: export ({name}, {len(files)} files): transformers' logits equal ppctl's, relative {r:.2e}")
    # The folder appears whole or not at all: an existing non-empty one is refused, nothing is left behind.
    refused = run([ppctl, "export", checkpoint, "--hf", tmp / "export-single"], expect=2)
    assert "exists and is not an empty folder" in refused.stderr, refused.stderr
    assert not [p for p in tmp.iterdir() if ".tmp." in p.name], list(tmp.iterdir())
    # Every spelling of an output folder: a trailing separator, `.` (an empty current folder), and the
    # refusals of an empty path and of a folder under a file, each a clear exit 2.
    run([ppctl, "export", checkpoint, "--hf", f"{tmp / 'export-slash'}/"])
    assert (tmp / "export-slash" / "config.json").exists()
    (tmp / "export-dot").mkdir()
    subprocess.run([str(ppctl), "export", str(checkpoint), "--hf", "."], cwd=tmp / "export-dot", check=True,
                   capture_output=True, timeout=300)
    assert (tmp / "export-dot" / "config.json").exists()
    assert "output folder is empty" in run([ppctl, "export", checkpoint, "--hf", ""], expect=2).stderr
    (tmp / "a-file").write_text("x")
    refused = run([ppctl, "export", checkpoint, "--hf", tmp / "a-file" / "sub"], expect=2)
    assert "a-file" in refused.stderr, refused.stderr
    # An export is itself a valid model.init_from.
    spec2 = write_spec(tmp, "again", tmp / "export-sharded", data, 2)
    run([ppctl, "plan", spec2])


def case_model_folder(ppctl, tool, tmp):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "prepare"))
    import test_hf_bpe  # noqa: E402  (the Qwen2-style tokenizer.json trained by tokenizers' BpeTrainer)
    import test_prepare  # noqa: E402  (megatron-core's reading of the prepared dataset)
    import transformers
    # The folder: a Qwen2-style tokenizer (NFC, Qwen2's split regex, byte-level BPE, 700 tokens) saved as
    # transformers saves one, and a tied Qwen2 whose vocabulary is padded past it, as Qwen2.5's is.
    source = tmp / "qwen2"
    _, tok = test_hf_bpe.train("qwen2", tmp)
    bos, eos = tok.token_to_id("<|endoftext|>"), tok.token_to_id("<|im_end|>")
    transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>",
                                         eos_token="<|im_end|>").save_pretrained(source)
    vocab = 768
    assert tok.get_vocab_size() <= vocab
    original = hf_models.save("qwen2-tied", source, config_args=dict(vocab_size=vocab, bos_token_id=bos, eos_token_id=eos,
                                                          max_position_embeddings=64))
    # Its text prepared by ppctl with that tokenizer (the end-of-document id from tokenizer_config.json).
    docs = test_hf_bpe.TRAIN[:9] * 3
    jsonl = tmp / "docs.jsonl"
    test_prepare.write_jsonl(str(jsonl), docs)
    run([ppctl, "data", "prepare", "--tokenizer", source / "tokenizer.json", "--input", jsonl, "--output",
         tmp / "corpus", "--append-eod"])
    prepared, _ = test_prepare.read_megatron(str(tmp / "corpus"))
    # Two stages, a few steps from the folder.
    spec = tmp / "train.yaml"
    spec.write_text(f"""model:
  init_from: {source}
  seq_len: {SEQ_LEN}
pipeline: {{stages: 2, microbatches: 4, micro_batch_size: 1}}
data: {{format: megatron, path: {tmp / 'corpus'}}}
train: {{steps: 3}}
checkpoint: {{dir: {tmp / 'ckpt'}, interval: 3}}
observe: {{runs_dir: {tmp / 'runs'}}}
""")
    run([ppctl, "train", spec, "--run-dir", tmp / "run"])
    out = tmp / "export"
    result = run([ppctl, "export", tmp / "ckpt", "--hf", out])
    print(result.stdout.strip())
    files = sorted(p.name for p in out.iterdir())
    assert files == ["config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                     "tokenizer_config.json"], files
    assert "tokenizer.json" in result.stdout and "export:" not in result.stderr, (result.stdout, result.stderr)
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["Qwen2ForCausalLM"] and config["vocab_size"] == vocab, config
    assert (config["bos_token_id"], config["eos_token_id"]) == (bos, eos), config
    assert config["max_position_embeddings"] == 64, config
    # transformers loads the folder with its tokenizer: the same ids as ppctl's prepared data.
    tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    assert (tokenizer.bos_token_id, tokenizer.eos_token_id) == (bos, eos)
    for doc, ids in zip(docs, prepared):
        assert tokenizer(doc).input_ids + [eos] == ids, doc[:40]
    model = hf_models.load(out)
    model.eval()
    tokens = torch.tensor([ids[:SEQ_LEN] for ids in prepared[:2]])
    ours = ppctl_logits(tool, tmp / "ckpt", tokens, tmp)
    with torch.no_grad():
        theirs = model(input_ids=tokens).logits
    r = relative(theirs, ours)
    assert r <= TOLERANCE, f"transformers' logits of the export differ from ppctl's: relative {r:.2e}"
    with torch.no_grad():
        assert relative(ours, original(input_ids=tokens).logits) > 1e-4, "training did not change the model"
    prompt = tokenizer(docs[0][:30], return_tensors="pt")
    generated = model.generate(**prompt, max_new_tokens=4, do_sample=False)
    assert generated.shape[1] == prompt.input_ids.shape[1] + 4 or generated[0, -1].item() == eos, generated
    print(f"qwen2 folder: {len(prepared)} documents' ids equal AutoTokenizer's, logits relative {r:.2e}, "
          f"generate: {tokenizer.decode(generated[0])!r}")
    # The folder now holds a model with another vocabulary: its tokenizer files no longer fit the checkpoint.
    changed = json.loads((source / "config.json").read_text())
    changed["vocab_size"] = 1024
    (source / "config.json").write_text(json.dumps(changed))
    out = tmp / "export-changed"
    result = run([ppctl, "export", tmp / "ckpt", "--hf", out])
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors"]
    for needle in ("vocab_size 1024 but the model has vocab_size 768", "the vocabulary changed",
                   "generation_config.json", "tokenizer.json", str(source / "config.json")):
        assert needle in result.stderr, f"'{needle}' not in:\n{result.stderr}"
    print(result.stderr.strip())
    config = json.loads((out / "config.json").read_text())
    assert config["bos_token_id"] is None and config["eos_token_id"] is None, config
    assert relative(hf_models.load(out)(input_ids=tokens).logits.detach(), ours) <= TOLERANCE
    print("vocabulary changed: no tokenizer files copied, the log says why, bos/eos null")


def expect_refused(ppctl, spec, *needles, command="plan"):
    result = run([ppctl, command, spec] + (["--run-dir", spec.parent / "r"] if command == "train" else []), expect=2)
    for needle in needles:
        assert str(needle) in result.stderr, f"{spec.name}: '{needle}' not in:\n{result.stderr}"
    assert "Traceback" not in result.stderr
    print(f"bad input {spec.stem}: exit 2, names {', '.join(map(str, needles))}")


def case_bad_inputs(ppctl, tmp):
    good = tmp / "good"
    hf_models.save("gpt2-untied", good)
    data, _, _ = write_data(tmp)
    weights = safetensors.torch.load_file(str(good / "model.safetensors"))

    def variant(name):
        folder = tmp / name
        shutil.copytree(good, folder)
        return folder

    missing = variant("missing")
    w = dict(weights)
    del w["transformer.h.1.ln_1.weight"]
    safetensors.torch.save_file(w, str(missing / "model.safetensors"), metadata={"format": "pt"})
    expect_refused(ppctl, write_spec(tmp, "missing", missing, data, 2), "transformer.h.1.ln_1.weight",
                   missing / "model.safetensors", "missing tensor")

    shape = variant("shape")
    w = dict(weights)
    w["transformer.h.0.mlp.c_fc.weight"] = w["transformer.h.0.mlp.c_fc.weight"].t().contiguous()
    safetensors.torch.save_file(w, str(shape / "model.safetensors"), metadata={"format": "pt"})
    spec = write_spec(tmp, "shape", shape, data, 2)
    for command in ("plan", "train"):  # train: refused before any worker starts
        expect_refused(ppctl, spec, "transformer.h.0.mlp.c_fc.weight", shape / "model.safetensors",
                       "[128, 32]", "[32, 128]", command=command)

    arch = variant("arch")
    config = json.loads((arch / "config.json").read_text())
    config["architectures"] = ["BertForMaskedLM"]
    config["model_type"] = "bert"
    (arch / "config.json").write_text(json.dumps(config))
    expect_refused(ppctl, write_spec(tmp, "arch", arch, data, 2), "BertForMaskedLM", arch / "config.json")

    truncated = variant("truncated")
    target = truncated / "model.safetensors"
    target.write_bytes(target.read_bytes()[:-100])
    expect_refused(ppctl, write_spec(tmp, "truncated", truncated, data, 2), target, "truncated")

    sharded = tmp / "sharded"
    hf_models.save("gpt2-untied", sharded, max_shard_size="40KB")
    index = json.loads((sharded / "model.safetensors.index.json").read_text())
    shard = sorted(set(index["weight_map"].values()))[1]
    (sharded / shard).unlink()
    expect_refused(ppctl, write_spec(tmp, "shard", sharded, data, 2), shard,
                   sharded / "model.safetensors.index.json", "missing")

    conflict = tmp / "conflict.yaml"
    conflict.write_text(write_spec(tmp, "c0", good, data, 2).read_text().replace(
        "model:\n", "model:\n  hidden: 64\n"))
    expect_refused(ppctl, conflict, "model.hidden", "value 64", "n_embd = 32", good / "config.json")
    longer = tmp / "longer.yaml"
    longer.write_text(write_spec(tmp, "c1", good, data, 2).read_text().replace(
        f"seq_len: {SEQ_LEN}", "seq_len: 64"))
    expect_refused(ppctl, longer, "model.seq_len", "n_positions = 32")

    # A folder and a data file named with an escape sequence (model folders and datasets come from strangers):
    # plan's weights and data lines and the workers' "loaded from" line show it escaped, never raw.
    evil = tmp / "m\x1b[31m"
    shutil.copytree(good, evil)
    evil_data = tmp / "d\x1b[31m.bin"
    shutil.copy(data, evil_data)
    spec = write_spec(tmp, "evil", "@INIT@", "@DATA@", 2)
    spec.write_text(spec.read_text().replace("@INIT@", f'"{tmp}/m\\e[31m"').replace("@DATA@", f'"{tmp}/d\\e[31m.bin"'))
    result = run([ppctl, "train", spec, "--run-dir", tmp / "evil_run"])
    output = result.stdout + result.stderr
    for needle in ("weights    from Hugging Face folder " + str(tmp) + "/m\\x1b[31m",
                   "data       text " + str(tmp) + "/d\\x1b[31m.bin", "loaded from " + str(tmp) + "/m\\x1b[31m"):
        assert needle in output, f"'{needle}' not in:\n{output}"
    assert "\x1b[31m" not in output, output
    print("names with an escape sequence: shown escaped in plan lines and logs")


def main():
    case, ppctl, tool = sys.argv[1], pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix=f"ppctl-hf-{case}-") as folder:
        tmp = pathlib.Path(folder)
        if case.startswith("parity-"):
            for kind in case[len("parity-"):].split("+"):  # several kinds in one test: one Python start
                sub = tmp / kind
                sub.mkdir()
                case_parity(kind, ppctl, sub)
        elif case.startswith("export-"):
            for kind in case[len("export-"):].split("+"):
                sub = tmp / kind
                sub.mkdir()
                case_export({"gpt2": "gpt2-untied"}.get(kind, kind), ppctl, tool, sub)
        elif case == "bad-inputs":
            case_bad_inputs(ppctl, tmp)
        elif case == "model-folder":
            case_model_folder(ppctl, tool, tmp)
        else:
            sys.exit(f"unknown case {case}")
    print("PASS")


if __name__ == "__main__":
    main()
