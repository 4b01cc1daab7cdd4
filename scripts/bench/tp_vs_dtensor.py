#!/usr/bin/env python3
"""Benchmark: ppctl's tensor parallelism against PyTorch's own (DTensor) on the same model, CPU over Gloo.

Part `speed`: a Llama-style decoder (4 blocks, hidden --hidden (256), 4 heads, 2 key/value heads, SwiGLU
of 4 x hidden, RMSNorm, RoPE, seq_len 128, vocab 256, untied head, no dropout, fp32), micro batch 4 x
--microbatches (4), one thread per rank, at tp 2 with every pipeline stage count of --stages (default
1,2: tp 2 alone on 2 ranks, and tp 2 x pp 2 on 4 ranks under --schedule, default 1f1b), each with
sequence parallelism on and off (--sequence-parallel, default true,false). ppctl runs `ppctl train SPEC
--run-dir DIR` with pipeline.tensor_parallel 2 and pipeline.sequence_parallel; the peer is
scripts/bench/torch_tp_worker.py: transformers' LlamaDecoderLayer under torch.distributed.tensor.parallel
with torchtitan's parallelize_llama plan (ColwiseParallel on q, k, v, gate and up, RowwiseParallel on the
output projection and down, SequenceParallel on the norms when sequence parallelism is on, a
vocabulary-parallel embedding and loss_parallel's cross-entropy), on a 2-D DeviceMesh (pp x tp) with
torch.distributed.pipelining's PipelineStage and the same schedule class when pp > 1. For every row it
alternates runs of the two engines (ppctl, torch, ppctl, torch, ... `--repeats` times each) and prints
medians over the repeats of the timed steps (the first `--warmup` steps of every run excluded):
  * tokens/s of each and their ratio ppctl / torch (goal: >= 1.0 on every row), and the range of the
    per-pair ratios (each ppctl run against the torch run right after it);
  * mean step time, CPU time per timed step of each engine's whole process tree (/proc), and the peak
    resident set of the largest rank.
ppctl's step times come from its run directory's metrics.jsonl (step_time_s; train.log_interval 1).

Part `memory`: ppctl alone, one pipeline stage, a GPT-2 of 4 blocks, hidden 256, 8 heads, seq_len 128,
micro batch 4 x 4 microbatches, at tp 1, 2, 4 (--memory-tp), sequence parallelism off and (t > 1) on:
`ppctl plan`'s memory estimate for the stage's largest tp rank (total = weights + gradients + AdamW +
peak) against what the run measured on each tp rank: the worker's own count of its weights, gradient
buffers and AdamW state (its `AdamW state on this rank` line) plus the executor's peak above the step's
start (its `memory:` line), and the process's max resident set. The plan models sequence parallelism (the
residual stream, norms, dropout masks and stage boundaries on seq_len / t positions), so the "within 10 %" goal
holds on every row.

Python standard library only (the peer runs with the venv's python: --python, $PPCTL_PYTHON, or what
scripts/setup.sh prints); builds ppctl first via scripts/build.sh unless --no-build. docs/benchmarks.md
describes the rows and what differs between the engines.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_common import ROOT, add_run_options, build_ppctl, check_run_options, print_machine_line  # noqa: E402
from memory import MEMORY_LINE as MEMORY_DETAIL, MIB, plan_memory  # noqa: E402
from vs_torch import (OPTIMIZER, PPCTL, SEED, MEMORY_LINE, RunFailed, median_of, pair_range,  # noqa: E402
                      ppctl_step, run_streaming, timed_throughput, torch_step)

WORKER = os.path.join(HERE, "torch_tp_worker.py")
TP = 2  # the speed rows' tensor-parallel size
SCHEDULES = ("gpipe", "1f1b")  # the pipeline schedules both engines run on the tp x pp rows
MEMORY_MODEL = {"layers": 4, "hidden": 256, "heads": 8, "seq_len": 128, "micro_batch_size": 4, "microbatches": 4}
HOLDS = re.compile(r"(?m)^\s+(\d+)\s+(\d+)\s+\d+.*\bblocks (\d+)-(\d+)")  # `ppctl plan`'s stage table
STATIC = re.compile(r"\[rank (\d+)\] info: AdamW state on this rank: (\d+) bytes .*?; weights (\d+) bytes, "
                    r"gradient buffers (\d+) bytes, fp32 main parameters (\d+) bytes")


def boolean_list(text):
    """--sequence-parallel "true,false" -> [True, False]."""
    words = {"true": True, "false": False}
    values = text.split(",")
    if not values or any(v not in words for v in values) or len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(f"{text!r}: give true, false or true,false")
    return [words[v] for v in values]


class Row:
    """One speed row: tp 2 x pp `stages`, sequence parallelism on or off."""

    def __init__(self, stages, sequence_parallel, args):
        self.stages, self.sp, self.args = stages, sequence_parallel, args
        h = args.hidden
        self.model = {"arch": "llama", "layers": 4, "hidden": h, "heads": 4, "kv_heads": 2, "ffn_hidden": 4 * h,
                      "seq_len": 128, "vocab_size": 256}
        self.label = f"tp{TP} pp{stages} sp {'on' if sequence_parallel else 'off'}"
        self.ranks = TP * stages
        self.tokens_per_step = args.microbatches * args.micro_batch_size * self.model["seq_len"]

    def spec_text(self, steps):
        m = self.model
        return (f"model: {{arch: llama, vocab_size: 256, layers: {m['layers']}, hidden: {m['hidden']}, "
                f"heads: {m['heads']}, kv_heads: {m['kv_heads']}, ffn_hidden: {m['ffn_hidden']}, "
                f"seq_len: {m['seq_len']}, dropout: 0.0, tie_embeddings: false}}\n"
                f"pipeline: {{stages: {self.stages}, schedule: {self.args.schedule}, tensor_parallel: {TP}, "
                f"sequence_parallel: {'true' if self.sp else 'false'}, microbatches: {self.args.microbatches}, "
                f"micro_batch_size: {self.args.micro_batch_size}}}\n"
                f"data: {{path: [{json.dumps(self.args.data)}]}}\n"
                f"optimizer: {{lr: {OPTIMIZER['lr']}, betas: {OPTIMIZER['betas']}, eps: {OPTIMIZER['eps']}, "
                f"weight_decay: {OPTIMIZER['weight_decay']}}}\n"
                f"train: {{steps: {steps}, seed: {SEED}, log_interval: 1}}\n"
                f"runtime: {{device: cpu, threads_per_worker: 1}}\n"
                f"observe: {{trace_steps: 0, tensorboard: false}}\n")

    def torch_config(self, blocks, steps):
        return {"threads": 1, "seed": SEED, "steps": steps, "warmup": self.args.warmup, "model": self.model,
                "pipeline": {"stages": self.stages, "tensor_parallel": TP, "sequence_parallel": self.sp,
                             "schedule": self.args.schedule, "microbatches": self.args.microbatches,
                             "micro_batch_size": self.args.micro_batch_size},
                "blocks": blocks, "optimizer": OPTIMIZER, "data": [self.args.data]}


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def plan_blocks(spec):
    """The blocks [begin, end) of every stage, in stage order, from `ppctl plan`'s stage table."""
    plan = subprocess.run([PPCTL, "plan", spec], capture_output=True, text=True)
    if plan.returncode != 0:
        raise RunFailed("ppctl plan refused the spec: " + (plan.stderr.strip() or plan.stdout.strip()))
    rows = sorted({(int(stage), int(b), int(e) + 1) for _, stage, b, e in HOLDS.findall(plan.stdout)})
    return [[b, e] for _, b, e in rows]


def step_seconds(run_dir):
    """step_time_s of every step of metrics.jsonl, in order."""
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        records = [json.loads(line) for line in f if line.strip()]
    return [r["step_time_s"] for r in sorted((r for r in records if r.get("event") == "step"),
                                             key=lambda r: r["step"])]


def run_ppctl(row, workdir, index):
    steps = row.args.warmup + row.args.steps
    name = row.label.replace(" ", "_")
    spec = write(os.path.join(workdir, name + ".yaml"), row.spec_text(steps))
    run_dir = os.path.join(workdir, f"{name}_run{index}")
    code, out, _, cpu = run_streaming([PPCTL, "train", spec, "--run-dir", run_dir], ppctl_step, row.args.warmup,
                                      steps)
    if code != 0:
        raise RunFailed(f"ppctl train failed ({code}):\n{out[-3000:]}")
    seconds = step_seconds(run_dir)
    rss = {int(r): float(mib) for r, mib, _ in MEMORY_LINE.findall(out)}
    if len(seconds) != steps or len(rss) != row.ranks or cpu is None:
        raise RunFailed(f"could not read ppctl's metrics.jsonl or log:\n{out[-3000:]}")
    return {"tokens_per_s": timed_throughput(seconds, row.tokens_per_step, row.args.warmup),
            "step_ms": 1000.0 * statistics.mean(seconds[row.args.warmup:]), "cpu_ms": 1000.0 * cpu / row.args.steps,
            "rss_mib": max(rss.values())}


def run_torch(row, workdir, blocks):
    steps = row.args.warmup + row.args.steps
    path = write(os.path.join(workdir, row.label.replace(" ", "_") + ".json"),
                 json.dumps(row.torch_config(blocks, steps)))
    code, out, _, cpu = run_streaming([row.args.python, WORKER, "--config", path, f"--nprocs={row.ranks}"],
                                      torch_step, row.args.warmup, steps)
    records = [json.loads(line[6:]) for line in out.splitlines() if line.startswith("BENCH ")]
    seconds = [r["seconds"] for r in records if "step" in r]
    rss = {r["rank"]: r["max_rss_mib"] for r in records if "rank" in r}
    if code != 0 or len(seconds) != steps or len(rss) != row.ranks or cpu is None:
        raise RunFailed(f"the DTensor peer failed ({code}):\n{out[-3000:]}")
    return {"tokens_per_s": timed_throughput(seconds, row.tokens_per_step, row.args.warmup),
            "step_ms": 1000.0 * statistics.mean(seconds[row.args.warmup:]), "cpu_ms": 1000.0 * cpu / row.args.steps,
            "rss_mib": max(rss.values())}


def speed(args, workdir):
    """The speed rows; returns {label: (ppctl runs, torch runs)} and the labels that failed."""
    results, failed = {}, []
    for stages in args.stages:
        for sp in args.sequence_parallel:
            row = Row(stages, sp, args)
            runs = ([], [])
            try:
                blocks = plan_blocks(write(os.path.join(workdir, "layout.yaml"), row.spec_text(1)))
                if len(blocks) != stages:
                    raise RunFailed(f"cannot read the stage layout from `ppctl plan` ({blocks})")
                for i in range(args.repeats):
                    runs[0].append(run_ppctl(row, workdir, i))
                    runs[1].append(run_torch(row, workdir, blocks))
            except RunFailed as failure:
                print(f"  {row.label}: FAILED, skipped: {failure}", flush=True)
                failed.append(row.label)
                continue
            results[row.label] = runs
            print(f"  {row.label}: ppctl " + "/".join(f"{r['tokens_per_s']:.0f}" for r in runs[0]) + " tok/s, torch "
                  + "/".join(f"{r['tokens_per_s']:.0f}" for r in runs[1]) + " tok/s", flush=True)
    return results, failed


def print_speed(results, args):
    print(f"\nthroughput: median of {args.repeats} runs per engine, {args.steps} timed steps each after {args.warmup} "
          f"warm-up steps, 1 thread per rank; Llama 4 blocks, hidden {args.hidden}, 4 heads (2 kv), ffn "
          f"{4 * args.hidden}, seq_len 128, micro batch {args.micro_batch_size} x {args.microbatches} microbatches"
          f"{', ' + args.schedule + ' where pp > 1' if any(s > 1 for s in args.stages) else ''}")
    print(f"{'row':<16} {'ppctl tok/s':>11} {'torch tok/s':>11} {'ratio':>6} {'pairs':>9} {'step ms':>15} "
          f"{'CPU ms/step':>15} {'max RSS MiB':>13}")
    for label, (p, t) in results.items():
        ratio = median_of(p, "tokens_per_s") / median_of(t, "tokens_per_s")
        print(f"{label:<16} {median_of(p, 'tokens_per_s'):>11.0f} {median_of(t, 'tokens_per_s'):>11.0f} {ratio:>6.2f} "
              f"{pair_range(p, t):>9} {median_of(p, 'step_ms'):>7.1f}/{median_of(t, 'step_ms'):<7.1f} "
              f"{median_of(p, 'cpu_ms'):>7.0f}/{median_of(t, 'cpu_ms'):<7.0f} "
              f"{median_of(p, 'rss_mib'):>6.0f}/{median_of(t, 'rss_mib'):<6.0f}")
    print("(step ms, CPU ms/step and max RSS: ppctl/torch)")


def memory_spec(tp, sp, steps, data):
    m = MEMORY_MODEL
    return (f"model: {{vocab_size: 256, layers: {m['layers']}, hidden: {m['hidden']}, heads: {m['heads']}, "
            f"seq_len: {m['seq_len']}, dropout: 0.0}}\n"
            f"pipeline: {{stages: 1, tensor_parallel: {tp}, sequence_parallel: {'true' if sp else 'false'}, "
            f"microbatches: {m['microbatches']}, micro_batch_size: {m['micro_batch_size']}}}\n"
            f"data: {{path: [{json.dumps(data)}]}}\n"
            f"train: {{steps: {steps}, seed: {SEED}, log_interval: 1}}\n"
            f"runtime: {{device: cpu, threads_per_worker: 1}}\n"
            f"observe: {{trace_steps: 0, tensorboard: false}}\n")


def memory(args, workdir):
    """The memory rows: [(tp, sp, plan {static, peak, total}, {tp rank: measured})], bytes."""
    rows = []
    for tp in args.memory_tp:
        for sp in ([False, True] if tp > 1 else [False]):
            name = f"memory_tp{tp}_sp{int(sp)}"
            spec = write(os.path.join(workdir, name + ".yaml"), memory_spec(tp, sp, args.warmup + 2, args.data))
            plan = plan_memory(spec)[0]
            out = subprocess.run([PPCTL, "train", spec, "--run-dir", os.path.join(workdir, name)],
                                 capture_output=True, text=True)
            log = out.stdout + out.stderr
            static = {int(r): sum(map(int, rest)) for r, *rest in STATIC.findall(log)}
            ranks = {int(m.group(1)): {"rss": float(m.group(2)) * MIB, "peak": float(m.group(5)) * MIB}
                     for m in MEMORY_DETAIL.finditer(log)}
            if out.returncode != 0 or len(ranks) != tp or sorted(static) != sorted(ranks):
                raise SystemExit(f"tp_vs_dtensor: ppctl train {spec} failed ({out.returncode}) or its memory lines "
                                 f"could not be read:\n{log[-3000:]}")
            measured = {r: {"static": static[r], "peak": ranks[r]["peak"], "total": static[r] + ranks[r]["peak"],
                            "rss": ranks[r]["rss"]} for r in sorted(ranks)}
            rows.append((tp, sp, plan, measured))
            print(f"  memory tp {tp} sequence_parallel {str(sp).lower()}: done", flush=True)
    return rows


def print_memory(rows):
    m = MEMORY_MODEL
    print(f"\nmemory per rank, one stage: GPT-2 {m['layers']} blocks, hidden {m['hidden']}, {m['heads']} heads, "
          f"seq_len {m['seq_len']}, micro batch {m['micro_batch_size']} x {m['microbatches']}, fp32, recompute none. "
          "plan: `ppctl plan`'s table for the largest tp rank; measured: weights + gradients + AdamW as the rank "
          "counted them, plus the executor's peak above the step's start; the largest tp rank's (goal: plan within "
          "10 % of measured on every row)")
    print("| t | sequence_parallel | plan static MiB | plan peak MiB | plan total MiB | measured static MiB | "
          "measured peak MiB | measured total MiB | plan / measured | max resident set per tp rank MiB |\n"
          "|---|---|---|---|---|---|---|---|---|---|")
    for tp, sp, plan, measured in rows:
        top = max(measured.values(), key=lambda v: v["total"])
        print(f"| {tp} | {str(sp).lower()} | {plan['static'] / MIB:.2f} | {plan['peak'] / MIB:.2f} | "
              f"{plan['total'] / MIB:.2f} | {top['static'] / MIB:.2f} | {top['peak'] / MIB:.2f} | "
              f"{top['total'] / MIB:.2f} | {plan['total'] / top['total']:.3f} | "
              + "/".join(f"{v['rss'] / MIB:.0f}" for v in measured.values()) + " |")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_options(parser, steps=10)  # --stages (here: pipeline stages of the tp 2 rows), --steps, --warmup, ...
    parser.set_defaults(stages=[1, 2])
    parser._option_string_actions["--stages"].help = ("comma-separated pipeline stage counts of the tp 2 rows "
                                                      "(default 1,2: 2 and 4 ranks)")
    parser.add_argument("--parts", type=lambda s: s.split(","), default=["speed", "memory"],
                        help="speed, memory or both (default speed,memory)")
    parser.add_argument("--sequence-parallel", type=boolean_list, default=[True, False],
                        help="pipeline.sequence_parallel of the speed rows: true, false or both (default true,false)")
    parser.add_argument("--hidden", type=int, default=256, help="hidden size of the speed rows' model (default 256)")
    parser.add_argument("--microbatches", type=int, default=4, help="microbatches per step (default 4)")
    parser.add_argument("--micro-batch-size", type=int, default=4, help="sequences per microbatch (default 4)")
    parser.add_argument("--schedule", choices=SCHEDULES, default="1f1b", help="schedule where pp > 1 (default 1f1b)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per engine and row (default 3)")
    parser.add_argument("--memory-tp", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2, 4],
                        help="tensor-parallel sizes of the memory rows (default 1,2,4)")
    parser.add_argument("--python", default=os.environ.get("PPCTL_PYTHON"),
                        help="python with torch and transformers for the peer (default $PPCTL_PYTHON, else what "
                             "scripts/setup.sh prints)")
    parser.add_argument("--json", help="also write every run's numbers to this file")
    args = parser.parse_args()
    check_run_options(parser, args, min_stages=1)
    if args.warmup < 1:
        parser.error(f"--warmup {args.warmup}: must be at least 1 (the first step includes one-off set-up)")
    if any(p not in ("speed", "memory") for p in args.parts):
        parser.error(f"--parts {','.join(args.parts)}: each of speed, memory")
    for option, value in (("--repeats", args.repeats), ("--microbatches", args.microbatches),
                          ("--micro-batch-size", args.micro_batch_size)):
        if value < 1:
            parser.error(f"{option} {value}: must be at least 1")
    if args.hidden < 8 or args.hidden % 8:
        parser.error(f"--hidden {args.hidden}: must be a multiple of 8 (4 heads, 2 per tp rank, even head size)")
    if any(t < 1 or MEMORY_MODEL["heads"] % t or MEMORY_MODEL["seq_len"] % t for t in args.memory_tp):
        parser.error(f"--memory-tp {args.memory_tp}: each must divide heads {MEMORY_MODEL['heads']} and seq_len "
                     f"{MEMORY_MODEL['seq_len']}")
    if args.no_build and not os.access(PPCTL, os.X_OK):
        parser.error(f"--no-build: no ppctl at {PPCTL} (build it, or set PPCTL_BUILD_DIR to the build folder)")

    build_ppctl(args)
    if "speed" in args.parts and not args.python:
        args.python = subprocess.run([os.path.join(ROOT, "scripts", "setup.sh")], capture_output=True, text=True,
                                     check=True).stdout.strip()
    print_machine_line()
    results, failed, rows = {}, [], []
    with tempfile.TemporaryDirectory(prefix="ppctl_tp_") as workdir:
        if "speed" in args.parts:
            results, failed = speed(args, workdir)
        if "memory" in args.parts:
            rows = memory(args, workdir)
    if results:
        print_speed(results, args)
    if rows:
        print_memory(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "speed": {k: {"ppctl": p, "torch": t} for k, (p, t) in results.items()},
                       "memory": [{"tp": tp, "sequence_parallel": sp, "plan": plan, "measured": measured}
                                  for tp, sp, plan, measured in rows]}, f, indent=1)
    if failed:
        raise SystemExit(f"tp_vs_dtensor: {len(failed)} row(s) failed and are not in the table: {', '.join(failed)}")


if __name__ == "__main__":
    main()
