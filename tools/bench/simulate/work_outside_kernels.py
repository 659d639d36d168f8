#!/usr/bin/python3
"""work_outside_kernels: a plan's compute threads' CPU against their kernels' CPU, in one run.

  bazel build -c opt //tools/oflite:oflite
  tools/bench/simulate/work_outside_kernels.py --plan P [--nproc N] [--comm tcp]
      [--from 15 --to 45] [--cores 0]

Runs the plan once, traced with --trace-cpu over iterations [from, to)
(each kernel's thread CPU time), and reads every thread's CPU from
/proc/PID/task/TID/schedstat when rank 0 prints the progress lines of
iterations `from` and `to`; so both figures come from the same iterations
of the same run, which a host whose speed moves within minutes needs (two
runs of one plan on the 2-core VMs differ by up to 17 %). Prints per rank:
its compute threads' CPU a step (the CPU devices' stream 0, mM/cpuD/s0),
its kernels' CPU a step, the difference (the runtime's work outside the
kernels: acts, messages, waking) and per act, beside the calibration's
in_situ_act_us when --calibration names one (what oflite simulate charges
an act). One rank: `oflite run` pinned to --cores; N ranks: `oflite
launch --nproc N --bind cores` (rank r on core r mod the cores), where
two ranks share each core of a 2-core host from N = 4: what the validation's
4-host configurations run (docs/simulate.md, "Measured error").

A measurement, not a test: the figures move with the host. Exit 1 when a
run or its trace fails, 2 on bad arguments."""
import argparse
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)
import validate  # noqa: E402  (COMPUTE_THREAD, kernel_cpu_ms_of)


def thread_cpu_ns(pids):
    """Thread name -> CPU ns so far, summed over `pids`' threads."""
    out = {}
    for pid in pids:
        for task in glob.glob("/proc/%d/task/*" % pid):
            try:
                with open(task + "/comm") as f:
                    name = f.read().strip()
                with open(task + "/schedstat") as f:
                    ns = int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                continue  # the thread ended
            out[name] = out.get(name, 0) + ns
    return out


def rank_pids(root_pid):
    """The `oflite run` processes under root_pid (itself when it is one)."""
    found = subprocess.run(["pgrep", "-f", "-P", str(root_pid), "oflite run"],
                           capture_output=True, text=True).stdout.split()
    return [root_pid] + [int(p) for p in found]


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--plan", required=True)
    p.add_argument("--nproc", type=int, default=1, help="ranks (the plan's machines)")
    p.add_argument("--comm", default="tcp", help="transport between the ranks (--nproc > 1)")
    p.add_argument("--from", dest="first", type=int, default=15, help="first iteration measured")
    p.add_argument("--to", dest="last", type=int, default=45, help="iteration after the last")
    p.add_argument("--cores", default="0", help="taskset list of the single rank (--nproc 1)")
    p.add_argument("--cpu-threads", type=int, default=1)
    p.add_argument("--calibration", default="", help="print its in_situ_act_us beside")
    p.add_argument("--oflite", default=os.path.join(ROOT, "bazel-bin/tools/oflite/oflite"))
    args = p.parse_args()
    if args.first < 1 or args.last <= args.first or args.nproc < 1:
        print("work_outside_kernels: want 1 <= --from < --to and --nproc >= 1", file=sys.stderr)
        return 2
    if not os.path.isfile(args.plan) or not os.access(args.oflite, os.X_OK):
        print("work_outside_kernels: no plan %s or no oflite at %s (bazel build -c opt "
              "//tools/oflite:oflite)" % (args.plan, args.oflite), file=sys.stderr)
        return 2
    act_us = None
    if args.calibration:
        with open(args.calibration) as f:
            m = re.search(r"in_situ_act_us: ([0-9.eE+-]+)", f.read())
        act_us = float(m.group(1)) if m else None

    traces = tempfile.mkdtemp(prefix="oflite-work-")
    try:
        run_args = ["--iters", str(args.last + 5), "--eval=false", "--log-every", "1",
                    "--cpu-threads", str(args.cpu_threads), "--trace-cpu",
                    "--trace-iters", "%d:%d" % (args.first, args.last)]
        if args.nproc == 1:
            trace = os.path.join(traces, "rank-0.json")
            cmd = ["taskset", "-c", args.cores, args.oflite, "run", "--plan", args.plan,
                   "--trace", trace] + run_args
            line_of = re.compile(r"^iter (\d+)/")
        else:
            cmd = [args.oflite, "launch", "--plan", args.plan, "--nproc", str(args.nproc),
                   "--comm", args.comm, "--bind", "cores", "--", "--trace", traces] + run_args
            line_of = re.compile(r"^\[rank 0\] iter (\d+)/")
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        marks, tail = {}, []
        for line in proc.stdout:
            tail = (tail + [line])[-20:]
            m = line_of.match(line)
            if not m:
                continue
            n = int(m.group(1))
            if n in (args.first, args.last):
                marks[n] = (time.monotonic(), thread_cpu_ns(rank_pids(proc.pid)))
        if proc.wait() != 0 or len(marks) != 2:
            print("work_outside_kernels: the run failed (exit %d) or printed no progress line of "
                  "iteration %d and %d:\n%s" % (proc.returncode, args.first, args.last,
                                                "".join(tail)), file=sys.stderr)
            return 1
        steps = args.last - args.first
        (t0, start), (t1, end) = marks[args.first], marks[args.last]
        print("plan %s, %d rank(s), iterations %d-%d: step %.1f ms (wall between rank 0's lines)"
              % (args.plan, args.nproc, args.first, args.last, (t1 - t0) / steps * 1e3))
        print("%-6s %12s %12s %12s %8s %12s" % ("rank", "compute ms", "kernels ms", "outside ms",
                                              "acts", "us an act"))
        per_act = []
        for rank in range(args.nproc):
            path = os.path.join(traces, "rank-%d.json" % rank)
            try:
                with open(path) as f:
                    doc = json.load(f)
                kernels = validate.kernel_cpu_ms_of(doc, steps, path)
            except (OSError, ValueError, KeyError) as error:
                print("work_outside_kernels: trace %s: %s" % (path, error), file=sys.stderr)
                return 1
            acts = sum(1 for e in doc["traceEvents"]
                       if e.get("ph") == "X" and e.get("cat") == "act") / steps
            compute = sum(ns - start.get(name, 0) for name, ns in end.items()
                          if validate.COMPUTE_THREAD.match(name)
                          and name.startswith("m%d/" % rank))
            compute = compute / 1e6 / steps
            outside = compute - kernels
            per_act.append(outside * 1e3 / acts if acts else 0)
            print("%-6d %12.2f %12.2f %12.2f %8.0f %12.1f" % (rank, compute, kernels, outside, acts,
                                                            per_act[-1]))
        print("outside the kernels: median %.1f us an act%s" % (
            statistics.median(per_act),
            ", the calibration's in_situ_act_us %.2f" % act_us if act_us else ""))
        return 0
    finally:
        shutil.rmtree(traces, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
