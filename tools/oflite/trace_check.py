#!/usr/bin/env python3
"""Checks a trace written by `oflite run --trace` / `oflite launch` and its
`oflite trace summary --json`, independently of the C++ reader.

Usage: trace_check.py TRACE.json [--summary SUMMARY.json] [--ranks N]
    [--window A:B] [--expect-comm] [--lone-rank]

Trace checks: valid JSON (Python's parser); the expected ranks as
processes; every flow id has exactly one start and one end (unless
--lone-rank), each inside a slice of its thread, and with several ranks
flows exist and one crosses ranks; "X" slices nest properly on
every (pid, tid) track; every slice with an "iteration" arg lies in the
window; act and kernel slices exist, and handle slices too where the trace
states level "messages" (otherData.trace_level, per rank in a merged file;
files without it are "messages"), while every act of level "acts" says what
let it run (ready_after); collective or transfer slices with --expect-comm.
Summary checks (arithmetic against this script's own reading of the trace):
per-op totals equal the sum of the kernel slices by op (1 %); the step time
equals the mean distance between iteration ends (1 %); per iteration,
kernels + runtime + idle of the stream threads equals threads x step time
(10 %); the critical path's waits and durations add up to its length;
where a rank states the step time its session timed from the sink's reports
(measured_step_us, an independent clock), the trace's step is within 10 % of
it or 250 us (--expect-timed: at least one rank must state it).
Exit 0 when all hold, 1 with every failure printed.
"""
import argparse
import collections
import json
import sys

EPS_US = 0.002  # timestamps carry 3 decimals (ns)


def trace_levels(trace):
    other = trace.get("otherData", {})
    if "ranks" in other:
        return {r.get("trace_level", "messages") for r in other["ranks"]}
    return {other.get("trace_level", "messages")}


def check_trace(trace, args, failures):
    events = trace["traceEvents"]
    slices = [e for e in events if e.get("ph") == "X"]
    pids = sorted({e["pid"] for e in slices})
    if len(pids) != args.ranks:
        failures.append(f"expected {args.ranks} ranks, found processes {pids}")
    flows = collections.defaultdict(lambda: {"s": [], "f": []})
    for e in events:
        if e.get("ph") in ("s", "f"):
            flows[e["id"]][e["ph"]].append(e)
    if args.ranks > 1 and not flows:
        failures.append("no flow events")
    cross = 0
    for flow_id, ends in flows.items():
        if args.lone_rank:
            continue
        if len(ends["s"]) != 1 or len(ends["f"]) != 1:
            failures.append(f"flow {flow_id}: {len(ends['s'])} start(s), {len(ends['f'])} end(s)")
            continue
        cross += ends["s"][0]["pid"] != ends["f"][0]["pid"]
    if args.ranks > 1 and cross == 0:
        failures.append("no flow crosses ranks")
    # Viewers draw a flow from and to the slices enclosing its ends: each end
    # must lie inside a slice of its own thread.
    by_track = collections.defaultdict(list)
    for e in slices:
        by_track[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
    for e in events:
        if e.get("ph") not in ("s", "f"):
            continue
        spans = by_track[(e["pid"], e["tid"])]
        if not any(b - EPS_US <= e["ts"] <= end + EPS_US for b, end in spans):
            failures.append(f"flow {e['id']} ('{e['ph']}' of '{e.get('name')}' at {e['ts']} on "
                            f"{e['pid']}/{e['tid']}) lies in no slice of its thread")
            break
    tracks = collections.defaultdict(list)
    for e in slices:
        if e["dur"] < 0:
            failures.append(f"negative duration: {e}")
        tracks[(e["pid"], e["tid"])].append(e)
    for key, track in tracks.items():
        track.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []
        for e in track:
            while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"] + EPS_US:
                stack.pop()
            if stack and e["ts"] + e["dur"] > stack[-1]["ts"] + stack[-1]["dur"] + EPS_US:
                failures.append(f"track {key}: '{e['name']}' at {e['ts']} overlaps "
                                f"'{stack[-1]['name']}' without nesting")
                break
            stack.append(e)
    first, end = args.window
    for e in slices:
        iteration = e.get("args", {}).get("iteration")
        if iteration is not None and not first <= iteration < end:
            failures.append(f"slice '{e['name']}' of iteration {iteration} outside {first}:{end}")
            break
    cats = collections.Counter(e.get("cat") for e in slices)
    levels = trace_levels(trace)
    if cats["kernel"] == 0 or cats["act"] == 0:
        failures.append(f"missing act/kernel slices: {dict(cats)}")
    if "messages" in levels and cats["handle"] == 0:
        failures.append(f"level messages without handle slices: {dict(cats)}")
    if "acts" in levels:
        unexplained = [e for e in slices if e.get("cat") == "act" and
                       "ready_after" not in e.get("args", {})]
        if unexplained:
            failures.append(f"act '{unexplained[0]['name']}' does not say what let it run")
    if args.expect_comm and cats["collective"] + cats["transfer"] == 0:
        failures.append(f"no collective or transfer slices: {dict(cats)}")
    return slices


def rank_step(slices, pid):
    ends = {}
    for e in slices:
        iteration = e.get("args", {}).get("iteration")
        if e["pid"] == pid and iteration is not None:
            ends[iteration] = max(ends.get(iteration, 0), e["ts"] + e["dur"])
    order = sorted(ends)
    return (ends[order[-1]] - ends[order[0]]) / (len(order) - 1)


def near(a, b, tolerance):
    return abs(a - b) <= tolerance * max(abs(a), abs(b), 1e-9)


def check_summary(summary, slices, failures, expect_timed):
    timed_ranks = []
    for rank in summary["ranks"]:
        pid = rank["rank"]
        ops = collections.defaultdict(float)
        for e in slices:
            if e["pid"] == pid and e.get("cat") == "kernel":
                ops[e["name"]] += e["dur"]
        for name, total in ops.items():
            got = rank["ops"].get(name, {}).get("total_us", -1)
            if not near(got, total, 0.01):
                failures.append(f"rank {pid} op {name}: summary {got} us, trace {total} us")
        step = rank_step(slices, pid)
        if not near(rank["step_us"], step, 0.01):
            failures.append(f"rank {pid}: summary step {rank['step_us']} us, trace {step} us")
        accounted = rank["kernel_per_iter_us"] + rank["runtime_per_iter_us"] + \
            rank["idle_per_iter_us"]
        expected = rank["stream_threads"] * step
        if not near(accounted, expected, 0.10):
            failures.append(f"rank {pid}: kernels + runtime + idle per iteration {accounted} us, "
                            f"threads x step {expected} us")
        if rank["kernel_per_iter_us"] <= 0:
            failures.append(f"rank {pid}: no kernel time per iteration")
        # The session's own clock (the sink's reports over the same window).
        measured = rank.get("measured_step_us", -1)
        if measured > 0:
            timed_ranks.append(pid)
            # 10 %, but at least 250 us: the two clocks end their windows at
            # different acts, and with steps of ~100 us one scheduler stall
            # on a loaded host moves one mean by more than 10 %. A wrong
            # reading (units, another window) is far beyond either bound.
            if not near(step, measured, 0.10) and abs(step - measured) > 250:
                failures.append(f"rank {pid}: trace step {step} us, the session timed "
                                f"{measured} us (more than 10 % and 250 us apart)")
    if expect_timed and not timed_ranks:
        failures.append("no rank states the step time its session measured (measured_step_us)")
    path = summary["critical_path"]
    if not path:
        failures.append("empty critical path")
    else:
        total = sum(s["wait_us"] + s["dur_us"] for s in path) - path[0]["wait_us"]
        if not near(total, summary["critical_path_us"], 0.01):
            failures.append(f"critical path steps add to {total} us, "
                            f"its length is {summary['critical_path_us']} us")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("trace")
    parser.add_argument("--summary")
    parser.add_argument("--ranks", type=int, default=1)
    parser.add_argument("--window", default="0:1000000000")
    parser.add_argument("--expect-comm", action="store_true")
    parser.add_argument("--expect-timed", action="store_true",
                        help="some rank must state the step time its session measured, "
                             "and the trace's step must be within 10 % of it")
    parser.add_argument("--lone-rank", action="store_true",
                        help="one rank's file of a job: flows may end on another rank")
    args = parser.parse_args()
    args.window = tuple(int(x) for x in args.window.split(":"))
    failures = []
    with open(args.trace) as f:
        trace = json.load(f)
    slices = check_trace(trace, args, failures)
    if args.summary:
        with open(args.summary) as f:
            check_summary(json.load(f), slices, failures, args.expect_timed)
    for failure in failures[:20]:
        print("FAIL:", failure)
    print(f"trace_check: {len(slices)} slices, {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
