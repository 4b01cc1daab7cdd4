"""What ppctl's benchmark scripts share: the run-shape options, building ppctl first, the machine line."""
import argparse
import glob
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def stage_list(text):
    """--stages "2,4" -> [2, 4] (argparse type: a bad value is a usage error naming the rule)."""
    try:
        return [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give comma-separated whole numbers, e.g. 2,4") from None


def check_run_options(parser, args, min_stages=2):
    """Usage errors, before anything runs, for the options of add_run_options: each stage count at least
    `min_stages` (2: a pipeline; 1 where a script also measures data parallelism alone) and given once,
    --steps at least 1, --warmup at least 0, and a --data glob that matches a file.
    Makes --data absolute (~ expanded): the specs are written to temporary folders."""
    bad = [s for s in args.stages if s < min_stages]
    if bad or len(set(args.stages)) != len(args.stages):
        what = "(a pipeline has two stages or more) " if min_stages == 2 else ""
        parser.error(f"--stages {','.join(map(str, args.stages))}: each stage count must be at least {min_stages} "
                     f"{what}and given once")
    if args.steps < 1:
        parser.error(f"--steps {args.steps}: must be at least 1")
    if args.warmup < 0:
        parser.error(f"--warmup {args.warmup}: must be at least 0")
    args.data = os.path.abspath(os.path.expanduser(args.data))
    if not glob.glob(args.data):
        parser.error(f"--data {args.data}: no file matches (give text files; quote a glob)")


def add_run_options(parser, steps):
    """--stages, --steps (default `steps`), --warmup, --data and --no-build on `parser`."""
    parser.add_argument("--stages", type=stage_list, default=[2, 4],
                        help="comma-separated stage counts p (pipeline.stages), each at least 2 (default 2,4)")
    parser.add_argument("--steps", type=int, default=steps, help=f"timed steps per run (default {steps})")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps at the start of each run (default 2)")
    parser.add_argument("--data", default="/usr/share/games/fortunes/*.u8", help="text files (glob)")
    parser.add_argument("--no-build", action="store_true", help="use the ppctl already built")


def build_ppctl(args):
    """scripts/build.sh --target ppctl, unless --no-build (raises CalledProcessError when it fails)."""
    if not args.no_build:
        subprocess.run([os.path.join(ROOT, "scripts", "build.sh"), "--target", "ppctl"], check=True,
                       stdout=subprocess.DEVNULL)


def print_machine_line():
    """The UTC time, the CPU count, the 1-minute load average and the command line, as one line."""
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.2f}; {sys.argv[0]} {' '.join(sys.argv[1:])}", flush=True)


def rank_of_stage(stage, ranks, schedule):
    """The rank that holds `stage`, as ppctl places stages: k on rank k mod p, or the V of zbv (rank r
    holds stages r and 2p-1-r)."""
    return min(stage, 2 * ranks - 1 - stage) if schedule == "zbv" else stage % ranks


def stage_costs(rank_costs, ranks, virtual_stages, schedule):
    """The values of `ppctl plan --costs`: one F,B,I,W group (ms) per stage, stage by stage, from each
    rank's mean cost per action kind (`rank_costs[r]`: a dict of the kinds rank r ran; a missing or
    zero entry means none ran). A rank's means stand for each of its stages, as ppctl's timing line is
    per rank. What a schedule does not run is filled in: B as I + W, I and W as half of B."""
    values = []
    for stage in range(ranks * virtual_stages):
        ran = {k: v for k, v in rank_costs[rank_of_stage(stage, ranks, schedule)].items() if v}
        backward = ran.get("B", ran.get("I", 0.0) + ran.get("W", 0.0))
        values += [ran["F"], backward, ran.get("I", backward / 2), ran.get("W", backward / 2)]
    return values


def zb_auto_mapping(kept, deferred, fused=None):
    """pipeline.zb_auto as YAML flow text from two probe runs' per-rank mean costs (dicts of "F", "I", "W" ms):
    `kept` ran every W right after its I (zb-auto with a defer penalty above any step), `deferred` is zb-h1,
    which defers the W of ranks 1..p-1. Each of those ranks' defer penalty is the difference of their W (at
    least 0); rank 0, which never defers under zb-h1, takes the others' mean penalty as a share of its W.
    `fused` (optional) are a third run's means, of 1f1b (dicts with "B" ms, the backward unsplit): given, the
    mapping gets `b` (a rank without a B mean takes its I + W), so that zb-auto can choose 1F1B where B costs
    less than I then W; not given, zb-auto takes B as I + W."""
    ranks = len(kept)
    penalty = [max(0.0, deferred[r].get("W", 0.0) - kept[r].get("W", 0.0)) for r in range(ranks)]
    shares = [penalty[r] / kept[r]["W"] for r in range(1, ranks) if kept[r].get("W")]
    if shares:
        penalty[0] = statistics.mean(shares) * kept[0].get("W", 0.0)
    text = lambda values: "[" + ", ".join(f"{v:.3f}" for v in values) + "]"  # noqa: E731
    b = ""
    if fused is not None:
        b = ", b: " + text([fused[r].get("B") or kept[r].get("I", 0.0) + kept[r].get("W", 0.0) for r in range(ranks)])
    return (f"{{f: {text([k['F'] for k in kept])}, i: {text([k.get('I', 0.0) for k in kept])}, "
            f"w: {text([k.get('W', 0.0) for k in kept])}{b}, defer_penalty: {text(penalty)}}}")
