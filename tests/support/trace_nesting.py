#!/usr/bin/env python3
"""Checks that the complete ("X") slices of a Chrome trace nest exactly on every track, as Perfetto reads them.

Perfetto's JSON importer turns a slice's "ts" and "dur" (microseconds, JSON numbers) into whole nanoseconds, each on
its own, by truncation: int64(value * 1000.0) (CoerceToTs in src/trace_processor/importers/json/json_utils.cc of
google/perfetto). On a track (a pid and tid) every slice must then start at or after the end of the one before it,
or lie wholly inside it; a slice that starts inside another and ends after it does not nest, and Perfetto draws it
apart from its track (issue 26 item 6: 15 % of the slices did while "ts" held microseconds since the epoch).
Perfetto's own trace processor cannot be run here (docs/measurements.md, issue 26): this is its arithmetic.

Usage: trace_nesting.py TRACE_JSON...  (exit 1 naming the first slice that does not nest in each file), or
       trace_nesting.py --self-test    (each way of not nesting is found, and the truncation matters).
"""
import json
import sys


def perfetto_ns(microseconds):
    """Whole nanoseconds from a JSON number of microseconds, as Perfetto's importer computes them."""
    return int(float(microseconds) * 1000.0)


def nesting_problems(events):
    """(track, text) for each slice that starts inside another on its track and ends after it."""
    tracks = {}
    for e in events:
        if e.get("ph") == "X":
            start = perfetto_ns(e["ts"])
            tracks.setdefault((e.get("pid"), e.get("tid")), []).append((start, start + perfetto_ns(e["dur"]), e))
    problems = []
    for track, slices in sorted(tracks.items(), key=lambda item: str(item[0])):
        open_slices = []  # the enclosing slices of the one being placed, innermost last
        for start, end, event in sorted(slices, key=lambda s: (s[0], -s[1])):
            while open_slices and open_slices[-1][1] <= start:
                open_slices.pop()
            if open_slices and end > open_slices[-1][1]:
                outer = open_slices[-1]
                problems.append((track, f"'{event.get('name')}' [{start}, {end}) ns starts inside "
                                        f"'{outer[2].get('name')}' [{outer[0]}, {outer[1]}) ns and ends after it"))
            open_slices.append((start, end, event))
    return problems


def check_file(path):
    """Prints the problems of one trace file; returns how many slices and tracks it has and whether it nests."""
    events = json.load(open(path))["traceEvents"]
    problems = nesting_problems(events)
    for track, text in problems[:5]:
        print(f"{path}: track pid {track[0]} tid {track[1]}: {text}", file=sys.stderr)
    if len(problems) > 5:
        print(f"{path}: ... {len(problems) - 5} more", file=sys.stderr)
    slices = [e for e in events if e.get("ph") == "X"]
    return len(slices), len({(e.get("pid"), e.get("tid")) for e in slices}), not problems


def self_test():
    def x(name, ts, dur, tid=0):
        return {"ph": "X", "name": name, "ts": ts, "dur": dur, "pid": 0, "tid": tid}
    good = [x("step", 0, 10), x("F0", 1, 3), x("wait", 2, 2), x("B0", 4, 6), x("after", 10, 1), x("other", 5, 9, tid=1)]
    cases = {
        "nested and adjacent slices": (good, 0),
        "one overlapping the one before": (good + [x("late", 10.5, 1)], 1),
        "a child ending after its parent": ([x("step", 0, 10), x("F0", 1, 3), x("wait", 3, 2)], 1),
        # 1.001 us is 1001 ns, but 1.001 * 1000.0 is 1000.9999999999999: Perfetto's 1000 ns. The slice that
        # starts where "a" ends (0.5 + 0.501 us) then starts 1 ns inside it: found only with the truncation.
        "a boundary that truncates down": ([x("a", 0.5, 0.501), x("b", 1.001, 1)], 1),
        "tracks apart": ([x("a", 0, 2, tid=0), x("b", 1, 2, tid=1)], 0),
    }
    ok = True
    for name, (events, want) in cases.items():
        got = len(nesting_problems(events))
        if got != want:
            print(f"self-test failed: {name}: {got} problems, expected {want}")
            ok = False
    if perfetto_ns(1.001) != 1000 or perfetto_ns(0.501) != 501:
        print("self-test failed: the truncation is not Perfetto's")
        ok = False
    print("self-test passed: each slice that does not nest was found" if ok else "self-test FAILED")
    return 0 if ok else 1


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    ok = True
    for path in sys.argv[1:]:
        slices, tracks, nests = check_file(path)
        print(f"{path}: {slices} slices on {tracks} tracks {'nest' if nests else 'DO NOT nest'}")
        ok = ok and nests
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
