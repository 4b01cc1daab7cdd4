#!/usr/bin/env python3
"""The eager PyTorch training loop that scripts/bench/gpu_vs_eager.py compares ppctl with at pp = 1.

One process, one device: the whole GPT of torch_pipelining_worker.py (the match of lib/model/gpt2.cpp),
gradient accumulation over the microbatches with the loss scaled by 1/m (as ppctl), AdamW with
ppctl's parameter groups (PyTorch's default implementation for the device: foreach on CUDA), random
byte windows of the same text. Precision: fp32, or bf16 either under autocast (fp32 weights and
optimizer, bf16 matmuls) or with the parameters themselves in bf16 (`--bf16-mode params`).
Prints `BENCH ` JSON lines: one per step (loss, wall time since the previous step ended, after a
device synchronize), one at the end (peak device memory). Usage (normally via gpu_vs_eager.py):
  python eager_gpt_worker.py --config job.json
"""
import contextlib
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# First: it silences torch's warning about a missing NumPy before importing torch.
from torch_pipelining_worker import (ByteWindows, Stage, cross_entropy, emit, make_optimizer,  # noqa: E402
                                     init_worker, start_worker)
import torch  # noqa: E402


def main():
    cfg, _ = start_worker(__doc__, "gpu_vs_eager.py")
    init_worker(cfg)
    device = torch.device(cfg["device"])
    model, pipe = cfg["model"], cfg["pipeline"]
    module = Stage(model, 0, model["layers"], first=True, last=True).to(device)
    bf16 = cfg["precision"] == "bf16"
    if bf16 and cfg["bf16_mode"] == "params":
        module.to(torch.bfloat16)
    module.train()
    optimizer = make_optimizer(module, cfg["optimizer"])
    data = ByteWindows(cfg["data"], model["seq_len"], cfg["seed"])
    m, b = pipe["microbatches"], pipe["micro_batch_size"]
    autocast = (lambda: torch.autocast(device.type, dtype=torch.bfloat16)) if bf16 and cfg["bf16_mode"] == "autocast" \
        else contextlib.nullcontext

    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    previous_end = time.perf_counter()
    for step in range(cfg["steps"]):
        optimizer.zero_grad(set_to_none=True)
        tokens, targets = (t.to(device, non_blocking=True) for t in data.batch(m * b))
        total = torch.zeros((), device=device)
        for j in range(m):
            with autocast():
                logits = module(tokens[j * b:(j + 1) * b])
            loss = cross_entropy(logits.float(), targets[j * b:(j + 1) * b])
            (loss / m).backward()
            total += loss.detach()
        optimizer.step()
        loss_value = float(total) / m  # synchronises, as ppctl's per-step loss does
        sync()
        now = time.perf_counter()
        emit({"step": step + 1, "loss": loss_value, "seconds": now - previous_end})
        previous_end = now
    peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else 0
    emit({"rank": 0, "peak_device_mib": peak / 2**20})


if __name__ == "__main__":
    main()
