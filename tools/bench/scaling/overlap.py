#!/usr/bin/python3
"""Does the gradient all-reduce cross the link while backward computes?

Trains the model of scaling.py on 2 namespace hosts over a slow link
(default 100mbit, so every step's all-reduce is long) with oflite and with
PyTorch DDP, and samples rank 0 every --interval-ms during the measured
window: the bytes its link carried (/proc/PID/net/dev, eth0, both
directions) and the CPU time of each of its threads
(/proc/PID/task/TID/schedstat, nanoseconds). Printed per framework:

  link busy     share of the window in which the link moved more than a
                tenth of its rate, and what it carried over the window as a
                share of 2 x rate (both directions of a full-duplex link)
  threads       rank 0's three busiest threads: CPU per step and the share
                of it spent while the link was busy. The compute thread is
                the one that also runs while the link is idle (oflite's
                compute stream; PyTorch's main thread, marked "main": CPU
                autograd runs backward on the calling thread); threads at
                ~100% are the transport's (oflite's TCP progress thread,
                Gloo's).

An all-reduce that only starts once backward is done leaves the compute
thread's "under comm" near 0. One that starts as soon as its gradient
exists overlaps the rest of backward, and where the gradients' all-reduces
finish at different times (oflite runs them concurrently, one ring each),
the next step's forward of the layers already updated too. A qualitative
check, valid under load (it measures concurrency, not speed); sampling
costs CPU, so step times here are not figures. Needs root; binaries and
flags as in scaling.py.
"""
import argparse
import os
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ beside the sources
import scaling  # noqa: E402 (after the line above)


def link_bytes(pid):
    with open("/proc/%d/net/dev" % pid) as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name.strip() == "eth0":
                fields = rest.split()
                return int(fields[0]) + int(fields[8])  # rx + tx bytes
    return 0


def thread_cpu_ns(pid):
    cpu = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                cpu[tid] = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return cpu


class Sampler:
    """Samples rank 0 between the start and end marks (run_ranks' watcher)."""

    def __init__(self, interval_s):
        self.interval_s = interval_s
        self.samples = []

    def start(self, procs, marks):
        self.pid, self.marks, self.samples = procs[0].pid, marks, []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        while not self.done.is_set() and "end" not in self.marks:
            if "start" in self.marks:
                try:
                    self.samples.append((time.monotonic(), link_bytes(self.pid), thread_cpu_ns(self.pid)))
                except OSError:
                    return
            time.sleep(self.interval_s)

    def stop(self):
        self.done.set()
        self.thread.join(timeout=5)


def write_timeline(path, samples):
    """One line per sample interval: seconds, link bytes, CPU ns per thread."""
    tids = sorted(samples[-1][2])
    with open(path, "w") as f:
        f.write("t_s link_bytes " + " ".join("cpu_ns_" + t for t in tids) + "\n")
        for (t0, b0, c0), (t1, b1, c1) in zip(samples, samples[1:]):
            f.write("%.4f %d %s\n" % (t1 - samples[0][0], b1 - b0,
                                     " ".join(str(c1.get(t, 0) - c0.get(t, 0)) for t in tids)))


def analyse(samples, rate_bits, steps, main_tid):
    """One line: the link's use, then the busiest threads of rank 0 (the
    main thread marked "main"), each with its CPU per step and the share of
    it spent while the link was busy."""
    if len(samples) < 3:
        return "too few samples (%d)" % len(samples)
    total, under = {}, {}
    busy_time = 0.0
    for (t0, b0, c0), (t1, b1, c1) in zip(samples, samples[1:]):
        busy = (b1 - b0) * 8 > 0.1 * rate_bits * (t1 - t0)
        busy_time += (t1 - t0) if busy else 0
        for tid, ns in c1.items():
            delta = ns - c0.get(tid, ns)
            total[tid] = total.get(tid, 0) + delta
            under[tid] = under.get(tid, 0) + (delta if busy else 0)
    wall = samples[-1][0] - samples[0][0]
    gaps = sorted(b[0] - a[0] for a, b in zip(samples, samples[1:]))
    moved = samples[-1][1] - samples[0][1]
    line = "%d samples, median gap %.1f ms; link busy %.0f%% of %.1f s, carrying %.0f%% of its" \
           " full-duplex capacity; threads:" % (
               len(samples), gaps[len(gaps) // 2] * 1e3, 100 * busy_time / wall, wall,
               100 * moved * 8 / (2 * rate_bits * wall))
    for tid in sorted(total, key=total.get, reverse=True)[:3]:
        line += " %s%s %.1f ms/step %.0f%% under comm;" % (
            tid, " (main)" if tid == main_tid else "", total[tid] / 1e6 / steps,
            100 * under[tid] / max(total[tid], 1))
    return line


def rate_bits(rate):
    for suffix, scale in (("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3)):
        if rate.endswith(suffix):
            return float(rate[:-len(suffix)]) * scale
    raise ValueError("rate '%s': want N[gmk]bit" % rate)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="mlp", choices=sorted(scaling.PARAMS))
    p.add_argument("--rate", default="100mbit")
    p.add_argument("--global-batch", type=int, default=128)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--measure", type=int, default=6)
    p.add_argument("--interval-ms", type=float, default=5)
    p.add_argument("--cores", default="0,1")
    p.add_argument("--frameworks", default="oflite,ddp")
    p.add_argument("--oflite", default=os.path.join(scaling.WORKSPACE, "bazel-bin/tools/oflite/oflite"))
    p.add_argument("--write-job",
                   default=os.path.join(scaling.WORKSPACE, "bazel-bin/tools/bench/scaling/write_scaling_job"))
    p.add_argument("--python", default="/usr/bin/python3")
    p.add_argument("--timeout", type=int, default=900)
    p.add_argument("--timeline", help="write each framework's samples to TIMELINE.<framework>")
    p.add_argument("--openblas-coretype", default="auto",
                   help="OPENBLAS_CORETYPE for both frameworks (as scaling.py; none: unset)")
    args = p.parse_args()
    if args.openblas_coretype == "auto":
        args.openblas_coretype = scaling.openblas_core_for_cpu()
    elif args.openblas_coretype == "none":
        args.openblas_coretype = ""
    args.cores = [int(c) for c in args.cores.split(",")]
    try:
        bits = rate_bits(args.rate)
    except ValueError as error:
        p.error(str(error))
    if os.geteuid() != 0:
        print("overlap: needs root (ip netns, tc)", file=sys.stderr)
        return 2
    hosts = scaling.Hosts(2)
    try:
        hosts.shape(args.rate)
        with tempfile.TemporaryDirectory(prefix="overlap.") as tmp:
            bench = scaling.Bench(args, hosts, tmp)
            bench.plan(args.model, 2, args.global_batch)
            bench.watcher = Sampler(args.interval_ms / 1e3)
            print("overlap: %s, global batch %d, 2 hosts, link %s, %d measured steps, %s" % (
                args.model, args.global_batch, args.rate, args.measure, scaling.load()))
            for fw in args.frameworks.split(","):
                getattr(bench, fw)(args.model, 2, args.global_batch)
                print("%-6s %s" % (fw, analyse(bench.watcher.samples, bits, args.measure,
                                               str(bench.watcher.pid))), flush=True)
                if args.timeline and len(bench.watcher.samples) > 1:
                    write_timeline(args.timeline + "." + fw, bench.watcher.samples)
            print(scaling.load())
    finally:
        hosts.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
