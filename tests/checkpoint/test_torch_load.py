"""A ppctl checkpoint's unit files read by PyTorch's own torch.load, as docs/operations.md tells users to.
Usage: test_torch_load.py PPCTL

One short run (2 stages, 3 steps, a checkpoint at the end), then each unit file is loaded with torch.load's
default weights_only=True, allowing the one global LibTorch's pickler writes
(torch.jit._pickle.restore_type_tag). Every parameter of the unit has its weight and both AdamW moments with
the model's shapes, finite values, exp_avg_sq >= 0 and the step count; the units together hold every
parameter of the model once; meta.json records the step. Then the same run at pipeline.tensor_parallel 2: its
shard files, loaded by torch.load and joined with torch.cat as docs/tensor-parallel.md describes the split
(column-parallel by rows, qkv per q, k and v part; row-parallel by columns; the rest in the replicated file), give
the tp 1 run's weights (within float rounding: the two runs add in other orders).
"""
import json
import pathlib
import subprocess
import sys
import tempfile

import torch
import torch.jit._pickle

PPCTL = str(pathlib.Path(sys.argv[1]).resolve())
HIDDEN, LAYERS, VOCAB, SEQ, STEPS = 32, 2, 256, 16, 3


def fail(message):
    sys.exit(f"FAIL: {message}")


def load(path):
    with torch.serialization.safe_globals([torch.jit._pickle.restore_type_tag]):
        return torch.load(path)  # weights_only=True, torch 2.6 and later's default


def train(folder, tensor_parallel):
    """Trains the job at `tensor_parallel` in folder/tpN; returns its final checkpoint folder."""
    work = folder / f"tp{tensor_parallel}"
    work.mkdir()
    (work / "corpus.txt").write_text("".join(f"line {i}: sphinx of black quartz, judge my vow\n" for i in range(200)))
    spec = work / "job.yaml"
    spec.write_text(f"""model: {{layers: {LAYERS}, hidden: {HIDDEN}, heads: 4, seq_len: {SEQ}}}
pipeline: {{stages: 2, microbatches: 2, micro_batch_size: 1, tensor_parallel: {tensor_parallel}}}
data: {{path: corpus.txt}}
train: {{steps: {STEPS}}}
checkpoint: {{dir: ckpt}}
runtime: {{threads_per_worker: 1, comm_timeout_s: 60}}
observe: {{runs_dir: runs}}
""")
    result = subprocess.run([PPCTL, "train", str(spec)], capture_output=True, text=True, timeout=300, cwd=work)
    if result.returncode != 0:
        fail(f"ppctl train (tp {tensor_parallel}) exited {result.returncode}:\n{result.stdout[-2000:]}"
             f"{result.stderr[-3000:]}")
    return work / "ckpt" / f"step-{STEPS:08d}"


def joined(step, unit, name, meta):
    """Parameter `name` of `unit` from a tp 2 checkpoint's files, whole: the replicated file's, or the two shards
    joined (column-parallel and the vocabulary by rows, qkv part by part, row-parallel weights by columns)."""
    replicated = load(step / f"{unit}.replicated.pt")
    if f"param/{name}" in replicated:
        return replicated[f"param/{name}"]
    shards = [load(step / f"{unit}.tp{r}-of-{meta['tensor_parallel']}.pt")[f"param/{name}"] for r in range(2)]
    module, leaf = name.split(".")[-2:]
    if module in ("proj", "fc2") and leaf == "weight":
        return torch.cat(shards, dim=1)
    if module == "qkv":  # each shard holds its heads' rows of q, then of k, then of v
        parts = [shard.chunk(3, dim=0) for shard in shards]
        return torch.cat([torch.cat([p[i] for p in parts], dim=0) for i in range(3)], dim=0)
    return torch.cat(shards, dim=0)


def check_tensor_parallel(folder, whole_step):
    step = train(folder, 2)
    meta = json.loads((step / "meta.json").read_text())
    if meta.get("tensor_parallel") != 2:
        fail(f"tp 2 meta.json records tensor_parallel {meta.get('tensor_parallel')}")
    compared = 0
    for unit_file in sorted(whole_step.glob("*.pt")):
        unit = unit_file.stem
        for key, whole in load(unit_file).items():
            if not key.startswith("param/"):
                continue
            name = key.split("/", 1)[1]
            value = joined(step, unit, name, meta)
            if value.shape != whole.shape:
                fail(f"tp 2 {unit}: {name} joins to {tuple(value.shape)}, the tp 1 run's is {tuple(whole.shape)}")
            if not torch.allclose(value, whole, rtol=1e-4, atol=1e-5):
                fail(f"tp 2 {unit}: {name} differs from the tp 1 run's by {(value - whole).abs().max().item():.3g}")
            compared += 1
    print(f"ok: tp 2 shard files joined by torch.load and torch.cat equal the tp 1 weights ({compared} parameters)")


def main():
    with tempfile.TemporaryDirectory(prefix="ppctl_torch_load_") as tmp:
        folder = pathlib.Path(tmp)
        step = train(folder, 1)
        meta = json.loads((step / "meta.json").read_text())
        if meta.get("step") != STEPS:
            fail(f"meta.json records step {meta.get('step')}, expected {STEPS}")
        units = sorted(step.glob("*.pt"))
        if [u.name for u in units] != sorted(["embedding.pt", "block0.pt", "block1.pt", "head.pt"]):
            fail(f"unexpected unit files {[u.name for u in units]}")
        shapes = {"tok_embed.weight": (VOCAB, HIDDEN), "pos_embed.weight": (SEQ, HIDDEN)}
        for b in range(LAYERS):
            shapes.update({f"block{b}.fc1.weight": (4 * HIDDEN, HIDDEN), f"block{b}.fc2.weight": (HIDDEN, 4 * HIDDEN),
                           f"block{b}.ln1.weight": (HIDDEN,), f"block{b}.qkv.weight": (3 * HIDDEN, HIDDEN)})
        seen = set()
        for unit in units:
            state = load(unit)
            if not isinstance(state, dict) or not state:
                fail(f"{unit.name}: not a non-empty dict")
            names = {key.split("/", 1)[1] for key in state if key.startswith("param/")}
            for name in names:
                weight, m, v = state[f"param/{name}"], state[f"exp_avg/{name}"], state[f"exp_avg_sq/{name}"]
                if name in seen:
                    fail(f"{name} in two units")
                seen.add(name)
                if weight.shape != m.shape or weight.shape != v.shape:
                    fail(f"{unit.name}: {name}: shapes {weight.shape}, {m.shape}, {v.shape}")
                if name in shapes and tuple(weight.shape) != shapes[name]:
                    fail(f"{unit.name}: {name} has shape {tuple(weight.shape)}, the model's is {shapes[name]}")
                for tensor in (weight, m, v):
                    if tensor.dtype != torch.float32 or not torch.isfinite(tensor).all():
                        fail(f"{unit.name}: {name}: {tensor.dtype} or not finite")
                if (v < 0).any():
                    fail(f"{unit.name}: {name}: exp_avg_sq below 0")
                if int(state[f"step/{name}"]) != STEPS:
                    fail(f"{unit.name}: {name}: step {state[f'step/{name}']}, expected {STEPS}")
        missing = [name for name in shapes if name not in seen]
        if missing:
            fail(f"parameters in no unit: {missing}")
        print(f"ok: {len(units)} units, {len(seen)} parameters with their AdamW state, loaded with weights_only=True")
        check_tensor_parallel(folder, step)


if __name__ == "__main__":
    main()
