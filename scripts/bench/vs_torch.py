#!/usr/bin/env python3
"""Benchmark: ppctl against torch.distributed.pipelining on the same model and pipeline, CPU over Gloo.

Models: GPT-2 style (`tiny`, `small`) and Llama style (`llama-tiny`, `llama-small`: RMSNorm, RoPE,
SwiGLU, grouped-query attention, untied head; the peer builds it from transformers' LlamaDecoderLayer).

Schedules: every family both engines have (SCHEDULES; torch's classes in torch_pipelining_worker.py):
gpipe, 1f1b, interleaved-1f1b and zbv with 2 stages per rank, zb-h1 (torch: ScheduleInterleavedZeroBubble
with one stage per rank, its closest equivalent), and zb-auto (ppctl's W placed from costs; the peer runs
the same class as for zb-h1). zb-auto's costs (pipeline.zb_auto) come from three short probe runs of ppctl
before its rows (zb_auto_costs). A configuration whose model has fewer blocks than stages (p x v) is
skipped with a note.

For every configuration (model x stages x schedule) it alternates runs of the two engines (ppctl,
torch, ppctl, torch, ... `--repeats` times each) and prints medians over the repeats:
  * tokens/s of each (timed steps only: the first `--warmup` steps of every run are excluded) and
    their ratio;
  * ppctl's measured schedule time per step and full step time against the simulator's ideal step
    (`ppctl plan --costs` with the per-stage F, B, I, W costs that run measured);
  * the geometric mean of the ratio over the same-schedule rows, per schedule family and over all;
  * best against best: each engine's fastest schedule for every model and stage count, the ratio and
    its geometric mean;
  * peak resident set per stage (both engines) and bytes kept for backward per stage (ppctl's
    executor count; autograd's saved tensors on the torch side);
  * the range of the per-pair ratios (each ppctl run against the torch run right after it);
  * the 1F1B check: stage-0 activations of 1F1B <= (p/m) x GPipe's + 10% (ppctl's kept bytes);
  * launch to first step: scripts/bench/launch_to_first_step.sh for the tiny model (ppctl's target),
    and the time to the first step of every run of both engines;
  * CPU time per timed step of each engine's whole process tree (launcher and workers, /proc): what
    the work costs, much less sensitive than wall time to other load on the machine.
ppctl runs as `build/app/ppctl train SPEC`; the peer as `scripts/bench/torch_pipelining_worker.py
--nprocs P` (torch.multiprocessing.spawn) with the venv's python (scripts/setup.sh prints it).
docs/benchmarks.md describes every column and what differs between the engines.
Python standard library only; builds ppctl first via scripts/build.sh.
"""
import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("PPCTL_BUILD_DIR", os.path.join(ROOT, "build"))
PPCTL = os.path.join(BUILD, "app", "ppctl")
WORKER = os.path.join(HERE, "torch_pipelining_worker.py")
sys.path.insert(0, HERE)
from bench_common import add_run_options, build_ppctl, check_run_options, print_machine_line, stage_costs, \
    zb_auto_mapping  # noqa: E402
from schedules import COST, SIMULATED, TIMING  # noqa: E402  (the timing-line parsers, shared)

# Models: GPT shape and the pipeline's microbatching. vocab 256 (bytes), no dropout, fp32.
MODELS = {
    "tiny": {"layers": 4, "hidden": 64, "heads": 4, "seq_len": 64, "micro_batch_size": 4, "microbatches": 8},
    "small": {"layers": 8, "hidden": 128, "heads": 4, "seq_len": 128, "micro_batch_size": 4, "microbatches": 8},
    "llama-tiny": {"arch": "llama", "layers": 4, "hidden": 64, "heads": 4, "kv_heads": 2, "ffn_hidden": 256,
                   "seq_len": 64, "micro_batch_size": 4, "microbatches": 8},
    "llama-small": {"arch": "llama", "layers": 8, "hidden": 128, "heads": 4, "kv_heads": 2, "ffn_hidden": 512,
                    "seq_len": 128, "micro_batch_size": 4, "microbatches": 8},
}
LLAMA_KEYS = ("arch", "kv_heads", "ffn_hidden")  # the extra model keys of the llama models
SCHEDULES = ("gpipe", "1f1b", "interleaved-1f1b", "zbv", "zb-h1", "zb-auto")
VIRTUAL_STAGES = {"interleaved-1f1b": 2, "zbv": 2}  # stages per rank; 1 for the others
OPTIMIZER = {"lr": 0.002, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1}
SEED = 1234

STEP_LINE = re.compile(r"\[rank \d+\] info: step (\d+)/\d+ \| loss ([\d.]+) \|.* \| (\d+) tok/s \|")
MEMORY_LINE = re.compile(r"\[rank (\d+)\] info: memory: max resident set ([\d.]+) MiB; "
                         r"recompute \S+: kept for backward up to ([\d.]+) MiB")
HOLDS_LINE = re.compile(r"(?m)^\s+(\d+)\s+(\d+)\s+\d+\*?\s+\d+\s+[\d.]+\s+\d+\s+.*blocks (\d+)-(\d+)")


class RunFailed(Exception):
    """One configuration could not be measured (ppctl refused its spec, or a run failed); the driver
    says why, skips it and goes on with the others."""


class Config:
    """One benchmark configuration: a model, a rank count p (`stages`, ppctl's pipeline.stages) and a
    schedule, with VIRTUAL_STAGES[schedule] stages per rank."""

    def __init__(self, model, stages, schedule, args):
        self.model, self.stages, self.schedule, self.args = model, stages, schedule, args
        self.virtual_stages = VIRTUAL_STAGES.get(schedule, 1)
        self.shape = MODELS[model]
        self.fits = self.shape["layers"] >= stages * self.virtual_stages  # one block per stage at least
        self.label = f"{model} p{stages} {schedule}"
        self.tokens_per_step = self.shape["microbatches"] * self.shape["micro_batch_size"] * self.shape["seq_len"]
        self.zb_auto = ""  # zb-auto: the pipeline.zb_auto mapping's text (zb_auto_costs), written into the spec

    def spec_text(self, steps):
        s = self.shape
        # The peer's LM head is its own weight (untied), in both architectures: so is ppctl's here.
        extra = "".join(f", {k}: {s[k]}" for k in LLAMA_KEYS if k in s) + ", tie_embeddings: false"
        return (f"model: {{vocab_size: 256, layers: {s['layers']}, hidden: {s['hidden']}, heads: {s['heads']}, "
                f"seq_len: {s['seq_len']}, dropout: 0.0{extra}}}\n"
                f"pipeline: {{stages: {self.stages}, schedule: {self.schedule}, "
                f"virtual_stages: {self.virtual_stages}, "
                f"microbatches: {s['microbatches']}, micro_batch_size: {s['micro_batch_size']}"
                f"{', zb_auto: ' + self.zb_auto if self.zb_auto else ''}}}\n"
                f"data: {{path: [{json.dumps(self.args.data)}]}}\n"
                f"optimizer: {{lr: {OPTIMIZER['lr']}, betas: {OPTIMIZER['betas']}, eps: {OPTIMIZER['eps']}, "
                f"weight_decay: {OPTIMIZER['weight_decay']}}}\n"
                f"train: {{steps: {steps}, seed: {SEED}, log_interval: 1}}\n"
                f"runtime: {{device: cpu, threads_per_worker: {self.args.threads}}}\n")

    def write_spec(self, workdir, steps):
        path = os.path.join(workdir, self.label.replace(" ", "_") + ".yaml")
        with open(path, "w") as f:
            f.write(self.spec_text(steps))
        return path

    def torch_config(self, blocks, steps):
        s = self.shape
        return {"threads": self.args.threads, "seed": SEED, "steps": steps, "warmup": self.args.warmup,
                "model": {k: s[k] for k in ("layers", "hidden", "heads", "seq_len") + LLAMA_KEYS if k in s}
                | {"vocab_size": 256},
                "pipeline": {"schedule": self.schedule, "virtual_stages": self.virtual_stages,
                             "microbatches": s["microbatches"],
                             "micro_batch_size": s["micro_batch_size"]},
                "blocks": blocks, "optimizer": OPTIMIZER, "data": [self.args.data]}


def tree_cpu_seconds(root):
    """User + system CPU seconds used so far by process `root` and its descendants (all threads), from
    /proc: the launcher (ppctl, or the spawning python) and its workers."""
    stats = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()  # from field 3 (state) on
            except OSError:
                continue
            stats[int(entry)] = (int(fields[1]), int(fields[11]) + int(fields[12]))  # ppid, utime + stime
    tree, grown = {root}, True
    while grown:
        new = {pid for pid, (ppid, _) in stats.items() if ppid in tree} - tree
        tree |= new
        grown = bool(new)
    return sum(stats[pid][1] for pid in tree if pid in stats) / os.sysconf("SC_CLK_TCK")


def run_streaming(command, step_of, warmup, steps):
    """Runs `command`; `step_of(line)` gives the step a progress line reports (None for other lines).
    Returns (exit code, combined output, seconds from start to the first step's line, CPU seconds of
    the process tree from the end of step `warmup` to the end of step `steps`, or None)."""
    start = time.monotonic()
    first = cpu_start = cpu = None
    lines = []
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        for line in proc.stdout:
            step = step_of(line)
            if step is not None and first is None:
                first = time.monotonic() - start
            if step == warmup:
                cpu_start = tree_cpu_seconds(proc.pid)
            elif step == steps and cpu_start is not None:
                cpu = tree_cpu_seconds(proc.pid) - cpu_start
            lines.append(line)
    return proc.returncode, "".join(lines), first, cpu


def ppctl_step(line):
    m = STEP_LINE.search(line)
    return int(m.group(1)) if m else None


def torch_step(line):
    return json.loads(line[6:]).get("step") if line.startswith("BENCH ") else None


def timed_throughput(step_seconds, tokens_per_step, warmup):
    """tokens/s over the steps after the warm-up ones (step_seconds: wall time of each step, in order)."""
    timed = step_seconds[warmup:]
    if not timed:
        raise SystemExit(f"no timed steps: raise --steps above --warmup ({warmup})")
    return tokens_per_step * len(timed) / sum(timed)


def plan_layout(spec):
    """The blocks [begin, end) of every stage, in stage order, as ppctl's plan splits them."""
    plan = subprocess.run([PPCTL, "plan", spec], capture_output=True, text=True)
    if plan.returncode != 0:
        raise RunFailed("ppctl plan refused the spec: " + (plan.stderr.strip() or plan.stdout.strip()))
    out = plan.stdout
    blocks = [[int(b), int(e) + 1] for _, _, b, e in sorted(HOLDS_LINE.findall(out), key=lambda row: int(row[1]))]
    stages = re.search(r"(?m)^pipeline\s+(\d+) stages", out)
    if not blocks or not stages or len(blocks) != int(stages.group(1)):
        raise SystemExit(f"vs_torch: cannot read the stage layout from `ppctl plan {spec}` (its table changed?):\n{out}")
    return blocks


def simulated_step(spec, cfg, rank_costs):
    """`ppctl plan --costs` with one F,B,I,W group per stage from each rank's mean costs."""
    costs = stage_costs(rank_costs, cfg.stages, cfg.virtual_stages, cfg.schedule)
    plan = subprocess.run([PPCTL, "plan", spec, "--costs", ",".join(f"{x:.4f}" for x in costs)],
                          capture_output=True, text=True)
    sim = SIMULATED.search(plan.stdout)
    if plan.returncode != 0 or not sim:
        raise SystemExit(f"ppctl plan --costs failed:\n{plan.stderr}{plan.stdout[-1000:]}")
    return float(sim.group(1))


def zb_auto_costs(cfg, workdir):
    """pipeline.zb_auto for a zb-auto configuration, as YAML text, from three probe runs of ppctl on its model
    and stages (`--warmup` + 2 steps each): zb-auto with a defer penalty above any step runs every W right
    after its I, which gives each rank's F, I and W; zb-h1 defers the W of ranks 1..p-1, and the difference
    of their W (at least 0) is each of those ranks' defer penalty. Rank 0 never defers under zb-h1: it takes
    the mean penalty of the others as a share of W. With one stage there is nothing to defer (penalty 0).
    1f1b runs the backward unsplit: its B is `b`, so zb-auto can choose 1F1B where B costs less than I + W."""
    means = {}
    for schedule, extra in (("zb-auto", "{defer_penalty: 1000000}"), ("zb-h1", ""), ("1f1b", "")):
        probe = Config(cfg.model, cfg.stages, schedule, cfg.args)
        probe.label = f"{cfg.label} probe {schedule}"
        probe.zb_auto = extra
        steps = cfg.args.warmup + 2
        code, out, _, _ = run_streaming([PPCTL, "train", probe.write_spec(workdir, steps)], ppctl_step,
                                        cfg.args.warmup, steps)
        timing = {int(m.group(1)): {k: float(ms) for k, ms, _ in COST.findall(m.group(4))} for m in TIMING.finditer(out)}
        if code != 0 or len(timing) != cfg.stages:
            raise RunFailed(f"zb-auto's probe run ({schedule}) failed ({code}):\n{out[-3000:]}")
        means[schedule] = [timing[r] for r in range(cfg.stages)]
    return zb_auto_mapping(means["zb-auto"], means["zb-h1"], means["1f1b"])


def run_ppctl(cfg, workdir):
    steps = cfg.args.warmup + cfg.args.steps
    spec = cfg.write_spec(workdir, steps)
    code, out, first, cpu = run_streaming([PPCTL, "train", spec], ppctl_step, cfg.args.warmup, steps)
    if code != 0:
        raise RunFailed(f"ppctl train failed ({code}):\n{out[-3000:]}")
    seconds = [cfg.tokens_per_step / float(m.group(3)) for m in STEP_LINE.finditer(out)]
    timing = {}
    for m in TIMING.finditer(out):
        timing[int(m.group(1))] = {"schedule_ms": float(m.group(2)),
                                   **{k: float(ms) for k, ms, _ in COST.findall(m.group(4))}}
    memory = {int(r): (float(rss), float(kept)) for r, rss, kept in MEMORY_LINE.findall(out)}
    if len(seconds) != steps or len(timing) != cfg.stages or len(memory) != cfg.stages:
        raise RunFailed(f"could not read ppctl's log:\n{out[-3000:]}")
    ranks = range(cfg.stages)
    sim_ms = simulated_step(spec, cfg, [timing[r] for r in ranks])
    schedule_ms = max(timing[r]["schedule_ms"] for r in ranks)
    step_ms = 1000.0 * statistics.mean(seconds[cfg.args.warmup:])
    return {"tokens_per_s": timed_throughput(seconds, cfg.tokens_per_step, cfg.args.warmup),
            "first_step_s": first, "cpu_ms": 1000.0 * cpu / cfg.args.steps, "sim_ms": sim_ms, "schedule_ms": schedule_ms, "step_ms": step_ms,
            "schedule_over_sim": schedule_ms / sim_ms, "step_over_sim": step_ms / sim_ms,
            "costs": [{k: timing[r].get(k, 0.0) for k in "FBIW"} for r in ranks],
            "rss_mib": [memory[r][0] for r in ranks], "activations_mib": [memory[r][1] for r in ranks]}


def run_torch(cfg, workdir, python, blocks, spec):
    """One run of the peer; `spec` is ppctl's spec of the same configuration (for the simulator)."""
    steps = cfg.args.warmup + cfg.args.steps
    path = os.path.join(workdir, cfg.label.replace(" ", "_") + ".json")
    with open(path, "w") as f:
        json.dump(cfg.torch_config(blocks, steps), f)
    command = [python, WORKER, "--config", path, f"--nprocs={cfg.stages}"]
    code, out, first, cpu = run_streaming(command, torch_step, cfg.args.warmup, steps)
    records = [json.loads(line[6:]) for line in out.splitlines() if line.startswith("BENCH ")]
    seconds = [r["seconds"] for r in records if "step" in r]
    ranks = {r["rank"]: r for r in records if "rank" in r}
    if code != 0 or len(seconds) != steps or len(ranks) != cfg.stages:
        raise RunFailed(f"torch.distributed.pipelining run failed ({code}):\n{out[-3000:]}")
    costs = [ranks[r]["compute_ms"] for r in range(cfg.stages)]
    step_ms = 1000.0 * statistics.mean(seconds[cfg.args.warmup:])
    return {"tokens_per_s": timed_throughput(seconds, cfg.tokens_per_step, cfg.args.warmup),
            "first_step_s": first, "cpu_ms": 1000.0 * cpu / cfg.args.steps, "step_ms": step_ms,
            "step_over_sim": step_ms / simulated_step(spec, cfg, costs), "costs": costs,
            "rss_mib": [ranks[r]["max_rss_mib"] for r in range(cfg.stages)],
            "activations_mib": [ranks[r]["saved_for_backward_mib"] for r in range(cfg.stages)]}


def median_of(runs, key):
    """Median over repeats of a number, or element-wise of a list of numbers or of dicts of numbers."""
    values = [r[key] for r in runs]
    if isinstance(values[0], list):
        return [median_of([{"v": v[i]} for v in values], "v") for i in range(len(values[0]))]
    if isinstance(values[0], dict):
        return {k: median_of([{"v": v[k]} for v in values], "v") for k in values[0]}
    return statistics.median(values)


def fmt_list(values, precision=0):
    return "/".join(f"{v:.{precision}f}" for v in values)


def backward_ms(cost):
    """One microbatch's backward on a rank: B, or I + W under a split backward (ms)."""
    return cost["B"] if cost.get("B") else cost.get("I", 0.0) + cost.get("W", 0.0)


def pair_range(ppctl_runs, torch_runs):
    """'lo-hi' of the per-pair ratios: ppctl's run i against torch's run i, which ran right after it (so
    both saw the same phase of a shared machine)."""
    pairs = [p["tokens_per_s"] / t["tokens_per_s"] for p, t in zip(ppctl_runs, torch_runs)]
    return f"{min(pairs):.2f}-{max(pairs):.2f}"


def geometric_mean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))


def ratios(results):
    """{label: ppctl tok/s / torch tok/s} from the medians."""
    return {label: median_of(p, "tokens_per_s") / median_of(t, "tokens_per_s") for label, (p, t) in results.items()}


def print_summary(results, configs):
    """Geometric means of the same-schedule ratios (per family and overall), then each engine's best
    schedule per model and stage count against the other's best, with its geometric mean."""
    ratio = ratios(results)
    print("\nsame schedule, geometric mean of the ratio (ppctl tok/s / torch tok/s; target >= 1.0 on every row)")
    print(f"{'schedule':<18} {'rows':>4} {'geo mean':>8} {'lowest':>7}  lowest row")
    families = [s for s in SCHEDULES if any(c.schedule == s and c.label in ratio for c in configs)]
    for family in families + ["all"]:
        rows = {c.label: ratio[c.label] for c in configs if c.label in ratio and family in (c.schedule, "all")}
        worst = min(rows, key=rows.get)
        print(f"{family:<18} {len(rows):>4} {geometric_mean(rows.values()):>8.2f} {rows[worst]:>7.2f}  {worst}")

    print("\nbest against best: each engine's fastest schedule (median tok/s) per model and stage count; "
          "target geometric mean >= 1.25")
    print(f"{'model, stages':<18} {'ppctl best':>18} {'tok/s':>7} {'torch best':>18} {'tok/s':>7} {'ratio':>6}")
    best_ratios = []
    for model, stages in dict.fromkeys((c.model, c.stages) for c in configs if c.label in results):
        rows = [c for c in configs if (c.model, c.stages) == (model, stages) and c.label in results]
        best = [max(((median_of(results[c.label][e], "tokens_per_s"), c.schedule) for c in rows)) for e in (0, 1)]
        best_ratios.append(best[0][0] / best[1][0])
        print(f"{model + ' p' + str(stages):<18} {best[0][1]:>18} {best[0][0]:>7.0f} {best[1][1]:>18} "
              f"{best[1][0]:>7.0f} {best_ratios[-1]:>6.2f}")
    print(f"{'geometric mean':<18} {'':>18} {'':>7} {'':>18} {'':>7} {geometric_mean(best_ratios):>6.2f}")


def print_tables(results, args, configs):
    label_width = max(len(label) for label in results) + 1
    print(f"\nthroughput and step time: median of {args.repeats} runs per engine, {args.steps} timed steps each "
          f"after {args.warmup} warm-up steps, {args.threads} thread(s) per rank")
    print(f"{'configuration':<{label_width}} {'ppctl tok/s':>11} {'torch tok/s':>11} {'ratio':>6} {'pairs':>9} {'sim ms':>8} "
          f"{'sched ms':>8} {'sched/sim':>9} {'step ms':>8} {'step/sim':>8} {'torch step/sim':>14} "
          f"{'1st step s':>11} {'CPU ms/step':>15}")
    for label, (p, t) in results.items():
        print(f"{label:<{label_width}} {median_of(p, 'tokens_per_s'):>11.0f} {median_of(t, 'tokens_per_s'):>11.0f} "
              f"{median_of(p, 'tokens_per_s') / median_of(t, 'tokens_per_s'):>6.2f} {pair_range(p, t):>9} "
              f"{median_of(p, 'sim_ms'):>8.1f} "
              f"{median_of(p, 'schedule_ms'):>8.1f} {median_of(p, 'schedule_over_sim'):>9.2f} "
              f"{median_of(p, 'step_ms'):>8.1f} {median_of(p, 'step_over_sim'):>8.2f} "
              f"{median_of(t, 'step_over_sim'):>14.2f} "
              f"{median_of(p, 'first_step_s'):>5.2f}/{median_of(t, 'first_step_s'):<5.2f} "
              f"{median_of(p, 'cpu_ms'):>7.0f}/{median_of(t, 'cpu_ms'):<7.0f}")
    print_summary(results, configs)

    print("\ncompute per microbatch (ms, median over runs of the per-run means), rank 0/1/...; bwd is B, "
          "or I + W under a split backward (zbv, zb-h1)")
    print(f"{'configuration':<{label_width}} {'ppctl F':>24} {'torch F':>24} {'ppctl bwd':>24} {'torch bwd':>24}")
    for label, (p, t) in results.items():
        costs = [median_of(r, "costs") for r in (p, t)]  # per rank {kind: ms}
        print(f"{label:<{label_width}} " + " ".join(
            f"{fmt_list([c['F'] if k == 'F' else backward_ms(c) for c in costs[e]], 1):>24}"
            for k in ("F", "bwd") for e in (0, 1)))

    print("\nmemory per rank (MiB, rank 0/1/...): peak resident set; activations kept for backward "
          "(ppctl: executor's count; torch: autograd saved tensors)")
    print(f"{'configuration':<{label_width}} {'ppctl RSS':>24} {'torch RSS':>24} {'ppctl act':>20} {'torch act':>20}")
    for label, (p, t) in results.items():
        print(f"{label:<{label_width}} {fmt_list(median_of(p, 'rss_mib')):>24} {fmt_list(median_of(t, 'rss_mib')):>24} "
              f"{fmt_list(median_of(p, 'activations_mib'), 1):>20} {fmt_list(median_of(t, 'activations_mib'), 1):>20}")

    pairs = {(model, stages): [results.get(f"{model} p{stages} {s}") for s in ("1f1b", "gpipe")]
             for model in args.models for stages in args.stages}
    pairs = {key: pair for key, pair in pairs.items() if None not in pair}
    if pairs:
        print("\n1F1B stage-0 activations against GPipe's (ppctl's kept-for-backward bytes): "
              "target 1f1b <= (p/m) x gpipe x 1.10")
        print(f"{'model, stages':<16} {'1f1b MiB':>9} {'gpipe MiB':>9} {'1f1b/gpipe':>10} {'(p/m)x1.1':>9}  ok")
    for (model, stages), pair in pairs.items():
        one, gpipe = (median_of(r[0], "activations_mib")[0] for r in pair)
        bound = stages / MODELS[model]["microbatches"] * 1.10
        print(f"{model + ' p' + str(stages):<16} {one:>9.2f} {gpipe:>9.2f} {one / gpipe:>10.3f} {bound:>9.3f}  "
              f"{'yes' if one / gpipe <= bound else 'NO'}")


def print_saved_tables(path):
    """The tables of a --json file, as the run that wrote it printed them (and the pairs column)."""
    with open(path) as f:
        saved = json.load(f)
    args = argparse.Namespace(**saved["args"])
    configs = [Config(model, stages, schedule, args)
               for model in args.models for stages in args.stages for schedule in args.schedules]
    results = {label: (runs["ppctl"], runs["torch"]) for label, runs in saved["results"].items()}
    print_tables(results, args, configs)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=lambda s: s.split(","), default=list(MODELS),
                        help=f"comma-separated, from {', '.join(MODELS)} (default: all)")
    parser.add_argument("--schedules", type=lambda s: s.split(","), default=list(SCHEDULES),
                        help=f"comma-separated, from {', '.join(SCHEDULES)} (default: all)")
    # --stages (rank counts p: ppctl's pipeline.stages; interleaved-1f1b and zbv hold 2 stages per rank),
    # --steps, --warmup, --data (both engines' text files), --no-build.
    add_run_options(parser, steps=10)
    parser.add_argument("--repeats", type=int, default=3, help="runs per engine and configuration (default 3)")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads per rank (default 1)")
    parser.add_argument("--launch-runs", type=int, default=5,
                        help="runs of launch_to_first_step.sh (0: skip; default 5)")
    parser.add_argument("--json", help="also write every run's numbers to this file")
    parser.add_argument("--tables-from", metavar="JSON",
                        help="run nothing: print the tables of an earlier run's --json file")
    args = parser.parse_args()
    if args.tables_from:
        try:
            print_saved_tables(args.tables_from)
        except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError) as e:
            parser.error(f"--tables-from {args.tables_from}: not a file that --json wrote ({type(e).__name__}: {e})")
        return
    check_run_options(parser, args)
    if args.warmup < 1:
        parser.error(f"--warmup {args.warmup}: must be at least 1 (the first step includes one-off set-up in "
                     "both engines)")
    for option, value, least in (("--repeats", args.repeats, 1), ("--threads", args.threads, 1),
                                 ("--launch-runs", args.launch_runs, 0)):
        if value < least:
            parser.error(f"{option} {value}: must be at least {least}")
    for option, given, known in (("--models", args.models, MODELS), ("--schedules", args.schedules, SCHEDULES)):
        unknown = [name for name in given if name not in known]
        repeated = sorted({name for name in given if given.count(name) > 1})
        if unknown or repeated:
            parser.error(f"{option} {','.join(given)}: " + (f"unknown {', '.join(map(repr, unknown))}" if unknown
                                                            else f"repeated {', '.join(repeated)}")
                         + f"; each must be one of {', '.join(known)}, once")
    if args.json is not None:
        args.json = os.path.abspath(os.path.expanduser(args.json)) if args.json else ""
        writable = (os.access(args.json, os.W_OK) if os.path.exists(args.json)
                    else os.access(os.path.dirname(args.json), os.W_OK))
        if not args.json or os.path.isdir(args.json) or not writable:
            parser.error(f"--json {args.json!r}: cannot write that file (give a file name in a folder that "
                         "exists and is writable)")
    if args.no_build and not os.access(PPCTL, os.X_OK):
        parser.error(f"--no-build: no ppctl at {PPCTL} (build it with scripts/build.sh, or set PPCTL_BUILD_DIR "
                     "to the build folder that has app/ppctl)")

    build_ppctl(args)
    python = subprocess.run([os.path.join(ROOT, "scripts", "setup.sh")], capture_output=True, text=True,
                            check=True).stdout.strip()
    print_machine_line()
    results, failed = {}, []
    configs = [Config(model, stages, schedule, args)
               for model in args.models for stages in args.stages for schedule in args.schedules]
    with tempfile.TemporaryDirectory() as workdir:
        for cfg in configs:
            if not cfg.fits:
                print(f"  {cfg.label}: skipped, {cfg.shape['layers']} blocks for {cfg.stages} x "
                      f"{cfg.virtual_stages} stages", flush=True)
                continue
            runs = ([], [])
            try:
                if cfg.schedule == "zb-auto":
                    cfg.zb_auto = zb_auto_costs(cfg, workdir)
                    print(f"  {cfg.label}: pipeline.zb_auto {cfg.zb_auto} (from the probe runs)", flush=True)
                spec = cfg.write_spec(workdir, 1)
                blocks = plan_layout(spec)
                for _ in range(args.repeats):
                    runs[0].append(run_ppctl(cfg, workdir))
                    runs[1].append(run_torch(cfg, workdir, python, blocks, spec))
            except RunFailed as failure:
                print(f"  {cfg.label}: FAILED, skipped: {failure}", flush=True)
                failed.append(cfg.label)
                continue
            results[cfg.label] = runs
            print(f"  {cfg.label}: ppctl {fmt_list([r['tokens_per_s'] for r in runs[0]])} tok/s, "
                  f"torch {fmt_list([r['tokens_per_s'] for r in runs[1]])} tok/s", flush=True)
    if not results:
        raise SystemExit("vs_torch: no configuration was measured (each was skipped or failed, see above)")
    print_tables(results, args, configs)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "results": {k: {"ppctl": p, "torch": t} for k, (p, t) in results.items()}},
                      f, indent=1)
    if args.launch_runs > 0:
        print(f"\nlaunch to first step, ppctl, tiny model (scripts/bench/launch_to_first_step.sh {args.launch_runs}):",
              flush=True)
        subprocess.run([os.path.join(HERE, "launch_to_first_step.sh"), str(args.launch_runs)], check=True,
                       env=os.environ | {"PPCTL": PPCTL})  # the ppctl measured above, not rebuilt
    if failed:
        raise SystemExit(f"vs_torch: {len(failed)} configuration(s) failed and are not in the tables: "
                         + ", ".join(failed))


if __name__ == "__main__":
    main()
