"""docs/fine-tuning.md's "Example: a chat model end to end" run as written, in a fresh folder, and checked.

The section's sh blocks run in order under `bash -euo pipefail` (with the python block saved as chat.py and run
after them), in a temporary folder holding what a fresh clone holds for them (configs/chat/, scripts/examples/),
with ppctl on PATH and PPCTL_VENV naming the venv that runs this test. Then:
  - `ppctl plan` printed 2 stages x dp 2 and a packing line counting every conversation of the file, with
    targets a share of the tokens strictly between 0 and 100 % (the loss is masked);
  - `ppctl train` ran 4 ranks and every step of the spec; the loss of the last steps is well below that of the
    first, and the held-out loss was logged;
  - the prepared ids of every conversation equal apply_chat_template(tokenize=True) of the exported tokenizer,
    and the masked tokens decode to exactly the assistant answers, each with its <|im_end|>;
  - transformers' AutoTokenizer and AutoModelForCausalLM load the export; its chat template renders the ChatML
    text; generate returns new tokens; the doc's python snippet prints the prompt and an answer.
Usage: test_chat_example.py PPCTL
"""
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE.parent / "docs"))
sys.path.insert(0, str(HERE.parent / "prepare"))
import run_docs  # noqa: E402  (blocks(): the fenced blocks of a Markdown file)
import test_prepare  # noqa: E402  (read_megatron(): megatron-core's reading of a prepared dataset)

DOC = REPO / "docs" / "fine-tuning.md"
HEADING = "### Example: a chat model end to end"
CONVERSATIONS = REPO / "configs" / "chat" / "conversations.jsonl"
EXAMPLE = "runs/chat-example"  # where the walk-through writes, relative to the clone's root


def section_blocks():
    """The sh and python blocks of the example's section, in order."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    if HEADING not in lines:
        sys.exit(f"FAIL: {DOC} has no heading '{HEADING}' (fix: this test runs that section; rename both together)")
    start = lines.index(HEADING) + 1
    end = next((i + 1 for i in range(start, len(lines)) if re.match(r"^#{1,3} ", lines[i])), len(lines) + 1)
    chosen = [b for b in run_docs.blocks(DOC) if start < b.line < end and b.lang in ("sh", "python")]
    shell = [b.text for b in chosen if b.lang == "sh"]
    python = [b.text for b in chosen if b.lang == "python"]
    assert shell and len(python) == 1, f"{DOC}:{start}: expected sh blocks and one python block, got {chosen}"
    return shell, python[0]


def conversations():
    """Each line of the conversations file as a list of messages (prompt and completion as two turns)."""
    out = []
    for line in CONVERSATIONS.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if "messages" in record:
            out.append(record["messages"])
        else:
            out.append([{"role": "user", "content": record["prompt"]},
                        {"role": "assistant", "content": record["completion"]}])
    return out


def run_walkthrough(tmp, ppctl):
    """Runs the section's commands in `tmp` as a user would; returns their output and the seconds they took."""
    for part in ("configs/chat", "scripts/examples"):
        shutil.copytree(REPO / part, tmp / part)
    shell, python = section_blocks()
    (tmp / "chat.py").write_text(python)
    script = "\n".join(shell) + '\n"$PY" chat.py\n'
    env = dict(os.environ, PPCTL_VENV=sys.prefix, PATH=f"{ppctl.parent}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    began = time.monotonic()
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp, env=env, stdin=subprocess.DEVNULL,
                            capture_output=True, text=True, timeout=800)
    seconds = time.monotonic() - began
    print(result.stdout)
    print(result.stderr[-4000:], file=sys.stderr)
    if result.returncode != 0:
        sys.exit(f"FAIL: the walk-through of {DOC} exited {result.returncode}:\n{script}")
    print(f"walk-through: {seconds:.0f} s end to end")
    return result.stdout, seconds


def check_plan(output, count):
    pipeline = re.search(r"^pipeline +2 stages on 2 pipeline ranks .*x dp 2 = global batch", output, re.M)
    assert pipeline, f"no 'pipeline' line with 2 stages and dp 2 in:\n{output}"
    packing = re.search(r"^packing +\S+: (\d+) conversation\(s\) in (\d+) window\(s\) of (\d+) \(efficiency "
                        r"([\d.]+)%.*targets ([\d.]+)% of the tokens\), (\d+) held out in (\d+) window", output, re.M)
    assert packing, f"no 'packing' line with held-out conversations in:\n{output}"
    trained, windows, _, efficiency, targets, held_out, _ = packing.groups()
    assert int(trained) + int(held_out) == count, f"{packing.group(0)}: not the {count} conversations of the file"
    assert int(held_out) > 0 and int(windows) < int(trained), packing.group(0)  # several conversations per window
    assert 0 < float(targets) < 100 and 0 < float(efficiency) <= 100, packing.group(0)
    print(packing.group(0))


def check_training(tmp):
    runs = sorted((tmp / EXAMPLE / "runs").glob("*/metrics.jsonl"))
    assert len(runs) == 1, f"expected one run directory under {EXAMPLE}/runs, got {runs}"
    run_dir = runs[0].parent
    logs = {f"rank{r}.log": run_dir / f"rank{r}.log" for r in range(4)}
    missing = [name for name, path in logs.items() if not path.is_file()]
    assert not missing, f"{run_dir}: no {missing}: not 4 ranks"
    assert "(chat, packed)" in logs["rank0.log"].read_text(), f"{logs['rank0.log']}: the data were not read as chat"
    records = [json.loads(line) for line in runs[0].read_text().splitlines()]
    steps = [r for r in records if r.get("event") == "step"]
    evals = [r for r in records if r.get("event") == "eval"]
    spec_steps = int(re.search(r"^  steps: (\d+)", (tmp / "configs/chat/sft.yaml").read_text(), re.M).group(1))
    assert [r["step"] for r in steps] == list(range(1, spec_steps + 1)), [r["step"] for r in steps]
    first = sum(r["loss"] for r in steps[:3]) / 3
    last = sum(r["loss"] for r in steps[-3:]) / 3
    assert last < 0.6 * first, f"the loss did not fall: first 3 steps {first:.3f}, last 3 {last:.3f}"
    assert evals and all(r["loss"] is not None for r in evals), evals
    print(f"train: {len(steps)} steps at pp 2 x dp 2, loss {steps[0]['loss']:.3f} at step 1 -> "
          f"{steps[-1]['loss']:.3f} at step {steps[-1]['step']}; held-out loss "
          + ", ".join(f"{r['loss']:.3f} (step {r['step']})" for r in evals))


def check_export(tmp, convs):
    import torch
    import transformers
    out = tmp / EXAMPLE / "export"
    tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    model = transformers.AutoModelForCausalLM.from_pretrained(out)
    assert type(model).__name__ == "LlamaForCausalLM", type(model).__name__
    # The prepared ids are the exported tokenizer's rendering; the masked tokens are the answers.
    ids, _ = test_prepare.read_megatron(str(tmp / EXAMPLE / "data" / "chat"))
    masks, _ = test_prepare.read_megatron(str(tmp / EXAMPLE / "data" / "chat.loss_mask"))
    assert len(ids) == len(convs), (len(ids), len(convs))
    for number, (messages, got, mask) in enumerate(zip(convs, ids, masks), 1):
        expected = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True)["input_ids"]
        assert got == expected, f"conversation {number}: ppctl's ids differ from apply_chat_template\n{got}\n{expected}"
        targets = tokenizer.decode([t for t, k in zip(got, mask) if k])
        answers = "".join(m["content"] + "<|im_end|>" for m in messages if m["role"] == "assistant")
        assert targets == answers, f"conversation {number}: the masked tokens are {targets!r}, not {answers!r}"
    print(f"data: the ids of all {len(convs)} conversations equal apply_chat_template(tokenize=True); "
          "the targets are exactly the answers and their <|im_end|>")
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2 + 3?"}]
    rendered = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert rendered == ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n"
                        "<|im_start|>assistant\n"), rendered
    inputs = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    with torch.no_grad():
        generated = model.generate(**inputs, max_new_tokens=20, do_sample=False)
    new = generated[0, inputs["input_ids"].shape[1]:]
    assert len(new) > 0, generated
    print(f"export: AutoTokenizer and AutoModelForCausalLM load it; generate: {tokenizer.decode(new)!r}")


def main():
    ppctl = pathlib.Path(sys.argv[1]).resolve()
    convs = conversations()
    with tempfile.TemporaryDirectory(prefix="ppctl-chat-example-") as folder:
        tmp = pathlib.Path(folder)
        output, _ = run_walkthrough(tmp, ppctl)
        check_plan(output, len(convs))
        check_training(tmp)
        check_export(tmp, convs)
        answer = output[output.rindex("<|im_start|>assistant\n"):]
        assert len(answer.strip().splitlines()) >= 2, f"the snippet printed no answer after its prompt:\n{output}"
    print("PASS")


if __name__ == "__main__":
    main()
