#!/usr/bin/env python3
"""GPU benchmark (NOT RUN YET: no GPU machine so far): ppctl at pp = 1 against an eager PyTorch loop.

A GPT of about 350M parameters (28 blocks, hidden 1024, 16 heads, seq_len 1024, byte vocabulary) in
bf16 on one CUDA device. In one invocation it alternates `ppctl train` (one stage, `--microbatches`
microbatches of `--micro-batch-size` sequences, gradient accumulation) and
scripts/bench/eager_gpt_worker.py (the same model, batch, accumulation and AdamW in a plain PyTorch
loop), `--repeats` times each, and prints the medians of tokens/s and MFU of both and their ratio.

MFU = tokens/s x model FLOPs per token / peak FLOP/s. FLOPs per token: Megatron-LM's count
(Narayanan et al. 2021, arXiv 2104.04473, eq. 3, without recomputation) divided by the tokens of the
batch: 72 L h^2 (1 + s / (6 h) + V / (12 h L)). Peak: `--peak-tflops`, or a table of known devices.

ppctl's bf16 is the spec field `runtime.precision: bf16` (on main since commit c72dc59: autocast to
bf16, fp32 master weights, gradients and AdamW state, fp32 activations between stages; a ppctl without
it rejects the spec as an unknown key, and this script says so). `--precision fp32` runs both engines
in fp32. The eager loop's bf16 is the same autocast by default; `--bf16-mode params` puts the
parameters themselves in bf16 instead. Python standard library only.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from vs_torch import (OPTIMIZER, PPCTL, ROOT, SEED, STEP_LINE, median_of, ppctl_step, run_streaming,  # noqa: E402
                      timed_throughput, torch_step)

WORKER = os.path.join(HERE, "eager_gpt_worker.py")
MODEL = {"layers": 28, "hidden": 1024, "heads": 16, "seq_len": 1024, "vocab_size": 256}
# Dense bf16 peak FLOP/s (vendor data sheets, no sparsity), by a substring of the device name.
PEAK_TFLOPS = {"H200": 989.4, "H100": 989.4, "A100": 312.0, "L40S": 362.0, "L4": 121.0, "A10": 125.0}


def parameters(m):
    h, layers = m["hidden"], m["layers"]
    block = 12 * h * h + 13 * h  # qkv, proj, fc1, fc2 with biases; two LayerNorms
    return m["vocab_size"] * h + m["seq_len"] * h + layers * block + 2 * h + h * m["vocab_size"]


def flops_per_token(m):
    h, layers, s, v = m["hidden"], m["layers"], m["seq_len"], m["vocab_size"]
    return 72 * layers * h * h * (1 + s / (6 * h) + v / (12 * h * layers))


def device_peak_tflops(python, override):
    if override:
        return override, "--peak-tflops"
    name = subprocess.run([python, "-c", "import torch; print(torch.cuda.get_device_name(0))"],
                          capture_output=True, text=True).stdout.strip()
    for key, tflops in PEAK_TFLOPS.items():
        if key in name:
            return tflops, name
    raise SystemExit(f"unknown device {name!r}: give --peak-tflops")


def spec_text(args, steps):
    precision = f", precision: {args.precision}" if args.precision != "fp32" else ""
    return (f"model: {{vocab_size: 256, layers: {MODEL['layers']}, hidden: {MODEL['hidden']}, "
            f"heads: {MODEL['heads']}, seq_len: {MODEL['seq_len']}, dropout: 0.0}}\n"
            f"pipeline: {{stages: 1, schedule: 1f1b, microbatches: {args.microbatches}, "
            f"micro_batch_size: {args.micro_batch_size}}}\n"
            f"data: {{path: [{json.dumps(args.data)}]}}\n"
            f"optimizer: {{lr: {OPTIMIZER['lr']}, betas: {OPTIMIZER['betas']}, eps: {OPTIMIZER['eps']}, "
            f"weight_decay: {OPTIMIZER['weight_decay']}}}\n"
            f"train: {{steps: {steps}, seed: {SEED}, log_interval: 1}}\n"
            f"runtime: {{device: cuda{precision}}}\n")


def run_ppctl(args, workdir, tokens_per_step):
    steps = args.warmup + args.steps
    spec = os.path.join(workdir, "gpu.yaml")
    with open(spec, "w") as f:
        f.write(spec_text(args, steps))
    code, out, _, _ = run_streaming([PPCTL, "train", spec], ppctl_step, args.warmup, steps)
    if code != 0:
        hint = "\n(ppctl has no runtime.precision yet? try --precision fp32)" if "precision" in out else ""
        raise SystemExit(f"ppctl train failed ({code}):\n{out[-3000:]}{hint}")
    seconds = [tokens_per_step / float(m.group(3)) for m in STEP_LINE.finditer(out)]
    return {"tokens_per_s": timed_throughput(seconds, tokens_per_step, args.warmup)}


def run_eager(args, workdir, python, tokens_per_step):
    steps = args.warmup + args.steps
    path = os.path.join(workdir, "eager.json")
    with open(path, "w") as f:
        json.dump({"threads": 1, "seed": SEED, "steps": steps, "device": "cuda", "model": MODEL,
                   "pipeline": {"microbatches": args.microbatches, "micro_batch_size": args.micro_batch_size},
                   "precision": args.precision, "bf16_mode": args.bf16_mode, "optimizer": OPTIMIZER,
                   "data": [args.data]}, f)
    code, out, _, _ = run_streaming([python, WORKER, "--config", path], torch_step, args.warmup, steps)
    records = [json.loads(line[6:]) for line in out.splitlines() if line.startswith("BENCH ")]
    seconds = [r["seconds"] for r in records if "step" in r]
    if code != 0 or len(seconds) != steps:
        raise SystemExit(f"eager loop failed ({code}):\n{out[-3000:]}")
    return {"tokens_per_s": timed_throughput(seconds, tokens_per_step, args.warmup),
            "peak_device_mib": records[-1]["peak_device_mib"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
    parser.add_argument("--bf16-mode", choices=["autocast", "params"], default="autocast",
                        help="the eager loop's bf16: autocast (fp32 weights) or bf16 parameters")
    parser.add_argument("--micro-batch-size", type=int, default=8)
    parser.add_argument("--microbatches", type=int, default=4)
    parser.add_argument("--steps", type=int, default=20, help="timed steps per run (default 20)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps at the start of each run (default 3)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per engine (default 3)")
    parser.add_argument("--peak-tflops", type=float, help="the device's dense peak, TFLOP/s (default: by name)")
    parser.add_argument("--data", default="/usr/share/games/fortunes/*.u8", help="text files (glob)")
    args = parser.parse_args()

    subprocess.run([os.path.join(ROOT, "scripts", "build.sh"), "--target", "ppctl"], check=True,
                   stdout=subprocess.DEVNULL)
    python = subprocess.run([os.path.join(ROOT, "scripts", "setup.sh")], capture_output=True, text=True,
                            check=True).stdout.strip()
    peak, device = device_peak_tflops(python, args.peak_tflops)
    tokens_per_step = args.microbatches * args.micro_batch_size * MODEL["seq_len"]
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {device}, peak {peak} TFLOP/s; "
          f"GPT {parameters(MODEL) / 1e6:.0f}M parameters, {flops_per_token(MODEL) / 1e9:.2f} GFLOP per token; "
          f"{args.precision}; {tokens_per_step} tokens per step", flush=True)
    runs = ([], [])
    with tempfile.TemporaryDirectory() as workdir:
        for _ in range(args.repeats):
            runs[0].append(run_ppctl(args, workdir, tokens_per_step))
            runs[1].append(run_eager(args, workdir, python, tokens_per_step))
    mfu = [median_of(r, "tokens_per_s") * flops_per_token(MODEL) / (peak * 1e12) for r in runs]
    print(f"\nmedian of {args.repeats} runs per engine, {args.steps} timed steps after {args.warmup} warm-up steps")
    print(f"{'engine':<8} {'tok/s':>9} {'MFU':>6}")
    for name, r, u in (("ppctl", runs[0], mfu[0]), ("eager", runs[1], mfu[1])):
        print(f"{name:<8} {median_of(r, 'tokens_per_s'):>9.0f} {u:>6.3f}")
    print(f"ratio ppctl / eager: {mfu[0] / mfu[1]:.2f}; eager peak device memory "
          f"{median_of(runs[1], 'peak_device_mib'):.0f} MiB")


if __name__ == "__main__":
    main()
