#!/usr/bin/env python3
"""The measured idle share of each pipeline stage, from a timeline trace.

    pipeline_bubble.py TRACE.json [--stages S --micro-batches M] [--skip K] [--json]

TRACE is a trace of `oflite run --trace` (docs/tracing.md), usually the
merged one `oflite launch ... -- --trace DIR` writes as DIR/trace.json. A
stage's device is a compute stream thread (`m<machine>/cpu<k>/s0` or
`.../cuda<k>/s0`): the thread that runs its forward and backward units (data
sources, CommNet READs and collectives have threads of their own).

The window is steady state: from the end of the K-th traced iteration
(default 1: the first one, whose start the trace does not see whole) to the
end of the last, where an iteration ends with its last act on any rank (the
merged trace puts every rank on rank 0's clock). A thread is busy while any
slice of it (acts, kernels, message handling) runs; its idle share is
1 - busy / window. With --stages and --micro-batches the ideal bubble
(S - 1) / (M + S - 1) (docs/compiler.md, "Micro-batches and pipeline
schedules") is printed beside the mean over the stage threads, with the
difference in points.

Exit 1 when the file is not a trace or holds fewer than K + 1 iterations;
exit 2 on bad flags.
"""

import argparse
import json
import re
import sys

STAGE_THREAD = re.compile(r"^m\d+/(cpu|cuda)\d+/s0$")


def load(path):
    with open(path) as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    names = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            names[(e["pid"], e["tid"])] = e["args"]["name"]
    return events, names


def union_length(intervals, lo, hi):
    """Total length of the union of [begin, end) intervals clipped to [lo, hi)."""
    total, cursor = 0.0, lo
    for begin, end in sorted(intervals):
        begin, end = max(begin, cursor), min(end, hi)
        if end > begin:
            total += end - begin
            cursor = end
    return total


def measure(events, names, skip):
    iteration_end = {}
    slices = {}
    for e in events:
        if e.get("ph") != "X":
            continue
        end = e["ts"] + e.get("dur", 0.0)
        if e.get("cat") == "act":
            it = e.get("args", {}).get("iteration")
            if it is not None:
                iteration_end[it] = max(iteration_end.get(it, end), end)
        key = (e["pid"], e["tid"])
        if STAGE_THREAD.match(names.get(key, "")):
            slices.setdefault(key, []).append((e["ts"], end))
    iterations = sorted(iteration_end)
    if len(iterations) <= skip:
        raise ValueError("the trace holds %d iteration(s); need more than --skip %d"
                         % (len(iterations), skip))
    first, last = iterations[skip - 1], iterations[-1]
    lo, hi = iteration_end[first], iteration_end[last]
    window = hi - lo
    threads = []
    for key in sorted(slices, key=lambda k: (k[0], names[k])):
        busy = union_length(slices[key], lo, hi)
        threads.append({"rank": key[0], "thread": names[key], "busy_us": busy,
                        "idle_share": 1.0 - busy / window if window > 0 else 0.0})
    return {"iterations": [first + 1, last], "window_us": window,
            "step_us": window / max(1, last - first), "threads": threads}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("trace")
    parser.add_argument("--stages", type=int, default=0)
    parser.add_argument("--micro-batches", type=int, default=0)
    parser.add_argument("--skip", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.skip < 1 or args.stages < 0 or args.micro_batches < 0 or \
            (args.stages > 0) != (args.micro_batches > 0):
        print("pipeline_bubble: --skip must be >= 1, and --stages and --micro-batches given "
              "together (both >= 1)", file=sys.stderr)
        return 2
    try:
        events, names = load(args.trace)
        result = measure(events, names, args.skip)
    except (OSError, ValueError, KeyError, TypeError) as error:
        print("pipeline_bubble: %s: %s" % (args.trace, error), file=sys.stderr)
        return 1
    if not result["threads"]:
        print("pipeline_bubble: %s: no compute stream thread (m*/cpu*/s0)" % args.trace,
              file=sys.stderr)
        return 1
    mean = sum(t["idle_share"] for t in result["threads"]) / len(result["threads"])
    result["mean_idle_share"] = mean
    if args.stages:
        s, m = args.stages, args.micro_batches
        result["ideal_bubble"] = (s - 1) / (m + s - 1)
        result["difference_points"] = 100.0 * (mean - result["ideal_bubble"])
    if args.json:
        print(json.dumps(result, indent=1, sort_keys=True))
        return 0
    first, last = result["iterations"]
    print("iterations %d..%d: window %.3f ms, step %.3f ms"
          % (first, last, result["window_us"] / 1e3, result["step_us"] / 1e3))
    for t in result["threads"]:
        print("  rank %d %-14s busy %10.3f ms  idle %5.1f%%"
              % (t["rank"], t["thread"], t["busy_us"] / 1e3, 100.0 * t["idle_share"]))
    print("mean idle share of the stage threads: %.1f%%" % (100.0 * mean))
    if args.stages:
        print("ideal bubble (S-1)/(M+S-1) = %d/%d = %.1f%%; measured - ideal = %+.1f points"
              % (args.stages - 1, args.micro_batches + args.stages - 1,
                 100.0 * result["ideal_bubble"], result["difference_points"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
