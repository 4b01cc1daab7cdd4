"""Packed chat training against Hugging Face transformers: a chat dataset (token ids and loss masks written by
megatron-core's IndexedDatasetBuilder, the layout `ppctl data prepare --input-format chat` writes) trained one
step by ppctl, whose windows pack several conversations each, gives the loss and every gradient of the per-token
mean over the conversations' targets computed by transformers one conversation at a time (each on its own,
positions from 0, plain causal attention): relative 1e-5. At 1, 2 and 4 stages (1F1B, m 8), dp 2 x 2 stages
(m 4), zbv, and tp 2 x 2 stages. A negative control: the same windows run by transformers with plain causal
attention and running positions (what a packing-unaware trainer computes) differ from the reference by far more
than the tolerance, so a stage that let conversations see each other, or restarted no position, would fail.
`ppctl plan` prints the packing (conversations, windows, efficiency, targets) and, at a seq_len below the longest
conversation, refuses the dataset before any worker starts, naming the conversation (data.overlong: error), or
counts what data.overlong: drop leaves out.
Usage: test_hf_packed.py KIND PPCTL   (KIND: llama, gpt2-tied)
"""
import os
import pathlib
import sys
import tempfile

import numpy
import torch

sys.path.insert(0, os.path.dirname(__file__))
import hf_models  # noqa: E402
from test_hf import run  # noqa: E402  (a command that must exit `expect`, its output shown when not)

SEQ_LEN = 16
TOLERANCE = 1e-5
# Eight conversations longer than half a window (no two share one) and six short ones that fill gaps: whatever
# the packing, 8 windows. The 16-token one fills its window exactly and has no target; one has a single token.
LENGTHS = [16, 12, 11, 10, 10, 9, 9, 9, 6, 5, 4, 3, 2, 1]
WINDOWS = 8


def conversations():
    """(tokens, mask) per conversation: random ids < VOCAB; the mask 0 over a random prompt, then 1 (targets)."""
    g = torch.Generator().manual_seed(7)
    out = []
    for i, n in enumerate(LENGTHS):
        tokens = torch.randint(0, hf_models.VOCAB, (n,), generator=g)
        prompt = int(torch.randint(1, max(n, 2), (1,), generator=g))
        mask = torch.tensor([0] * min(prompt, n) + [1] * max(n - prompt, 0), dtype=torch.uint8)
        if i == 0:
            mask.zero_()  # a window without targets adds nothing (and no NaN)
        out.append((tokens, mask))
    return out


def write_chat_dataset(prefix, convs):
    from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder
    for suffix, index, dtype in (("", 0, numpy.uint16), (".loss_mask", 1, numpy.uint8)):
        builder = IndexedDatasetBuilder(f"{prefix}{suffix}.bin", dtype=dtype)
        for conv in convs:
            builder.add_item(conv[index].to(torch.int64))
            builder.end_document()
        builder.finalize(f"{prefix}{suffix}.idx")


def reference(model, convs):
    """Loss and gradients of sum over conversations of the masked token losses / the number of targets: each
    conversation alone (its own positions from 0, causal attention)."""
    model.zero_grad(set_to_none=True)
    targets = sum(int(mask[1:].sum()) for _, mask in convs)
    total = torch.zeros((), dtype=torch.float64)
    for tokens, mask in convs:
        if len(tokens) < 2:
            continue
        logits = model(input_ids=tokens[None]).logits[0]
        losses = torch.nn.functional.cross_entropy(logits[:-1], tokens[1:], reduction="none")
        loss = (losses * mask[1:].float()).sum() / targets
        loss.backward()
        total += loss.detach().double()
    return total.item(), {name: p.grad.clone() for name, p in model.named_parameters()}


def best_fit_decreasing(lengths, capacity):
    """The packing ppctl documents (data/packing.hpp), written again here for the negative control."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    windows = []  # [free, [documents]]
    for i in order:
        fits = [w for w in windows if w[0] >= lengths[i]]
        if fits:
            best = min(fits, key=lambda w: w[0])
        else:
            best = [capacity, []]
            windows.append(best)
        best[0] -= lengths[i]
        best[1].append(i)
    return [w[1] for w in windows]


def unaware_loss(model, convs):
    """The packed windows with plain causal attention over the window and positions 0 .. SEQ_LEN - 1."""
    targets = sum(int(mask[1:].sum()) for _, mask in convs)
    total = 0.0
    with torch.no_grad():
        for docs in best_fit_decreasing([len(c[0]) for c in convs], SEQ_LEN):
            tokens = torch.cat([convs[d][0] for d in docs])
            weights = torch.cat([torch.cat([convs[d][1][1:].float(), torch.zeros(1)]) for d in docs])
            logits = model(input_ids=tokens[None]).logits[0]
            losses = torch.nn.functional.cross_entropy(logits[:-1], tokens[1:], reduction="none")
            total += float((losses * weights[:-1]).sum()) / targets
    return total


def check_plan(ppctl, tmp, hf_dir, prefix, convs):
    """The plan's packing line; the overlong refusal before anything starts; data.overlong: drop counted."""
    def spec(name, seq_len, overlong):
        path = tmp / f"plan-{name}.yaml"
        path.write_text(f"model: {{init_from: {hf_dir}, seq_len: {seq_len}}}\n"
                        f"data: {{format: megatron, path: {prefix}, overlong: {overlong}}}\n"
                        f"pipeline: {{stages: 2, microbatches: 4}}\n")
        return path
    tokens = sum(len(t) for t, _ in convs)
    targets = sum(int(m[1:].sum()) for _, m in convs)
    out = run([ppctl, "plan", spec("fits", SEQ_LEN, "error")]).stdout
    line = next((l for l in out.splitlines() if l.startswith("packing")), None)
    assert line is not None, f"no packing line in the plan:\n{out}"
    efficiency = 100.0 * tokens / (WINDOWS * SEQ_LEN)
    share = 100.0 * targets / tokens
    for needle in (f"{len(convs)} conversation(s) in {WINDOWS} window(s) of {SEQ_LEN}", f"efficiency {efficiency:.1f}%",
                   f"targets {share:.1f}% of the tokens"):
        assert needle in line, f"the packing line lacks {needle!r}: {line}"
    refused = run([ppctl, "plan", spec("overlong", 12, "error")], expect=2).stderr
    longer = sum(1 for n in LENGTHS if n > 12)
    for needle in ("conversation 1 (1-based", "16 tokens, more than model.seq_len 12",
                   f"{longer} of {len(convs)} conversations", "data.overlong: drop"):
        assert needle in refused, f"the overlong refusal lacks {needle!r}:\n{refused}"
    dropped = run([ppctl, "plan", spec("drop", 12, "drop")]).stdout
    assert f"{longer} longer than seq_len dropped (data.overlong: drop)" in dropped, dropped
    assert f"{len(convs) - longer} conversation(s) in" in dropped, f"the dropped ones are counted as packed:\n{dropped}"
    # Masks all 0: nothing to learn, refused before anything starts.
    silent = tmp / "silent"
    write_chat_dataset(silent, [(t, torch.zeros_like(m)) for t, m in convs])
    text = spec("silent", SEQ_LEN, "error").read_text().replace(str(prefix), str(silent))
    (tmp / "plan-silent.yaml").write_text(text)
    refused = run([ppctl, "plan", tmp / "plan-silent.yaml"], expect=2).stderr
    assert "hold no target token" in refused, refused
    # Half a chat dataset (the masks' index gone): refused, never trained as plain data.
    pathlib.Path(f"{silent}.loss_mask.idx").unlink()
    refused = run([ppctl, "plan", tmp / "plan-silent.yaml"], expect=2).stderr
    assert "silent.loss_mask.idx is missing" in refused and "is a chat dataset" in refused, refused
    print(f"plan: {line.strip()}; seq_len 12 refused naming conversation 1; drop counts {longer}; masks all 0 and "
          f"masks without their index refused")


def main():
    kind, ppctl = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory(prefix="ppctl_hf_packed_") as tmp_name:
        tmp = pathlib.Path(tmp_name)
        hf_dir = tmp / "hf"
        hf_models.save(kind, hf_dir)
        model = hf_models.load(hf_dir)
        model.train()
        convs = conversations()
        prefix = tmp / "chat"
        write_chat_dataset(prefix, convs)
        assert len(best_fit_decreasing(LENGTHS, SEQ_LEN)) == WINDOWS
        hf_loss, hf_grads = reference(model, convs)
        control = unaware_loss(model, convs)
        gap = abs(control - hf_loss) / abs(hf_loss)
        assert gap > 100 * TOLERANCE, f"the negative control does not discriminate: {control} vs {hf_loss}"
        print(f"{kind}: negative control (plain causal mask, running positions): loss {control:.6f} vs "
              f"{hf_loss:.6f}, relative {gap:.2e}")
        check_plan(ppctl, tmp, hf_dir, prefix, convs)
        names = hf_models.ppctl_to_hf(kind, model.config.num_hidden_layers)
        worst = 0.0
        for stages, schedule, dp, tp in ((1, "1f1b", 1, 1), (2, "1f1b", 1, 1), (4, "1f1b", 1, 1), (2, "1f1b", 2, 1),
                                         (2, "zbv", 1, 1), (2, "1f1b", 1, 2)):
            label = f"{schedule} pp {stages} dp {dp} tp {tp}"
            spec = tmp / f"{stages}-{schedule}-{dp}-{tp}.yaml"
            spec.write_text(f"""model:
  init_from: {hf_dir}
  seq_len: {SEQ_LEN}
pipeline:
  stages: {stages}
  schedule: {schedule}
  data_parallel: {dp}
  tensor_parallel: {tp}
  microbatches: {WINDOWS // dp}
  micro_batch_size: 1
data:
  format: megatron
  path: {prefix}
optimizer:
  weight_decay: 0.0
train:
  steps: 1
observe:
  runs_dir: {tmp / 'runs'}
""")
            dump = tmp / f"dump-{stages}-{schedule}-{dp}-{tp}"
            dump.mkdir()
            run_dir = tmp / f"run-{stages}-{schedule}-{dp}-{tp}"
            run([ppctl, "train", spec, "--dump-gradients", dump, "--run-dir", run_dir])
            assert "packing " in (run_dir / "plan.txt").read_text(), "the run's plan.txt lacks the packing line"
            loss, grads = hf_models.read_gradient_dump(dump)
            assert abs(loss - hf_loss) <= TOLERANCE * abs(hf_loss), f"{label}: loss {loss} vs HF {hf_loss}"
            for name, grad in grads.items():
                hf_name, theirs = hf_models.hf_gradient(name, names, hf_grads, SEQ_LEN)
                r = hf_models.relative(grad, theirs)
                worst = max(worst, r)
                assert r <= TOLERANCE, f"{label}: gradient of {name} ({hf_name}) differs, relative {r:.2e}"
            print(f"{kind}: {label}: loss {loss:.6f} (HF {hf_loss:.6f}), {len(grads)} gradients equal")
        print(f"{kind}: worst relative gradient difference {worst:.2e}")


if __name__ == "__main__":
    main()
