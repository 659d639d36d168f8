#!/usr/bin/python3
"""Validation of the cost model (docs/simulate.md): the step time `oflite
simulate` predicts for a plan against the step time the plan takes on
network-namespace hosts with shaped links, for two models in several
layouts, host counts and link rates.

Configurations, named MODEL-LAYOUT-Nh-RATE (--list prints them; --configs
picks some by name or shell pattern, e.g. 'gpt-*-4h-*'):
  mlp  MLP 784-2048-2048-10 of tools/bench/scaling/scaling.py
         dp     data parallel (scaling.py's own job, write_scaling_job)
         tp     Megatron's MLP over the hosts: the first weight split by
                columns, the second by rows, one reduction of activations a
                pass (write_test_job --model_parallel megatron; until
                2026-12-07 the first weight alone, by columns)
         pp     2 stages (layer 1 | layers 2-3), 1F1B over --micro-batches (2 hosts)
         dp_pp  the same 2 stages, each data parallel over 2 hosts (4 hosts)
         dp_tp  2x2: data parallel x Megatron MLP (write_test_job dp_tp, 4 hosts)
  gpt  the GPT of tools/bench/scaling/gpt_layouts.py, in its layouts
         dp, tp, pp (one stage per host), dp_tp and tp_pp (4 hosts)
on every --hosts count a layout fits and every --rates link rate.

Every plan is compiled for a cluster file that states what the simulator
needs: each machine's nic (the rate one TCP stream measured over the
--rates link; the one-way latency the namespace link adds to loopback,
measured with latency_probe.py, or --latency-us; the CPU per byte per end
that a collective's bytes cost beyond the transport's calibrated own
figure, measured in the job's arrangement by a data-parallel reference
run on the N hosts (measure_paths), unless --no-link-cpu or
--path-cpu-ns), its
cpu_set (the core its rank is pinned to, rank r on --cores[r mod len]:
with more hosts than cores, machines share a core and their cpu_set says
so) and cpu_threads 1 (one compute thread per rank).
Then, unless --measure-only:
  1. `oflite profile` writes OUT/calibration.pbtxt (or --calibration
     reuses one) in two passes: before the plans are compiled, the runtime
     (with the scheduler's wake-up delay on a busy core) and the tcp
     transport on all --cores, whose collectives' ranks are then bound as
     the runs bind theirs (the path probe needs its per-byte figure); then
     (--update) the kernels of the plans (one per model, layout and host
     count: the link rate changes no kernel), pinned like rank 0 with
     --threads 1; unless --no-in-situ it also runs (--run-plan) a one-host
     plan of each model at the 2-host data-parallel device batch, for the
     kernels' times inside a real run and the runtime's cost per act there,
  2. the plans are compiled with the first pass's calibration (oflite
     compile --calibration: each collective's algorithm from the tcp
     curves and the cluster file's links, what a user with a calibration
     gets; --size-rule keeps the compiler's size rule),
  3. `oflite simulate --json` predicts every plan's step time
     (OUT/NAME.simulate.json; its "step_time_ms"),
  4. with --recalibrate, before every later repeat both profile passes
     run again (OUT/calibration.rREP.pbtxt; the plans stay as compiled)
     and predict every plan again (OUT/NAME.rREP.simulate.json); a row's
     prediction is then the median over these calibrations, which sample
     the same hours as the runs (the host's speed moves within minutes on
     the VMs we measure on), and the table shows how far the calibrations'
     predictions spread, the first calibration's prediction and its error;
     the summary that calibration's median error, worst and orders too.
Measured: samples interleaved (repeat r runs every configuration once, in
reverse order on odd repeats), medians over --repeats; one sample is the
wall time on rank 0 between the end of step WARMUP and the end of step
WARMUP+MEASURE divided by MEASURE (gpt_layouts.py's Bench.run_plan, each
rank pinned to its core with one compute thread). The compute check
(unless --no-compute-check or --measure-only): one more run per
configuration with every rank traced with --trace-cpu over the same window
(OUT/traces/NAME/rank-R.json); each rank's kernel CPU a step against the
work the simulator charged that machine's acts a step
(machines[].compute_ms_per_step), so a row's error splits into the
kernels' and the rest (communication, waits on shared cores). The CPU
check (every timed sample, untraced): each rank's threads' CPU (schedstat)
at rank 0's step marks, all threads and the communication threads
(is_comm_thread), a step, against machines[].cpu_ms_per_step and
comm_cpu_ms_per_step, and each core's load (the CPU of the ranks pinned
to it over the step, measured and predicted): whether a row's error is
work the model misses or waits it misses. The JSON also keeps every
rank's threads by name (thread_cpu_ms, medians), and --thread-cpu prints
them: which thread spends what the model does not charge.

Printed: per configuration the measured and predicted step time and the
error (predicted - measured) / measured; the median |error| and the worst;
per setting (model, hosts, rate) the layouts ordered by measured and by
predicted step time and whether the two orders are the same. A setting's
layouts run one after another in each repeat, and the host's hour moves
whole repeats by 10-40 % on the VMs we measure on, so the verdict compares
each pair of layouts within the repeats that ran both (the median of the
repeats' ratios, paired_ratio; the medians when fewer than 3 repeats ran
both); the pairs the medians alone would get right are counted beside it,
and a disagreeing pair prints its measured and predicted ratios. The compute
check's and the CPU check's figures per rank and their ratios' medians. Everything
lands in --out-dir (default a fresh temp dir, kept and printed) so that a
prediction can be rerun by hand:
  oflite simulate --plan OUT/NAME.plan.pb --calibration OUT/calibration.pbtxt --json

Needs root (ip netns, tc) and the binaries:
  bazel build //tools/oflite:oflite //examples:gpt_char \\
    //tools/bench/scaling:write_scaling_job //oneflow_lite/testing:write_test_job
  sudo tools/bench/simulate/validate.py --smoke --measure-only  # quick, figures meaningless
  sudo tools/bench/simulate/validate.py --json rows.json        # the real figures
  tools/bench/simulate/validate.py --resummarize rows.json      # its summary again
Exit: 0 the measurement ran (whatever the accuracy), 1 a compile, the
profile, a prediction or a sample failed, 2 bad arguments, or namespaces,
binaries or the oflite profile/simulate commands unavailable.
"""
import argparse
import copy
import fnmatch
import json
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ left in the source tree
sys.path.insert(0, os.path.join(HERE, "..", "scaling"))
import scaling  # noqa: E402  (Hosts, measure_link, write_cluster, load, openblas_core_for_cpu)
import gpt_layouts  # noqa: E402  (LAYOUTS, Bench: the GPT's jobs, run_plan)

WORKSPACE = scaling.WORKSPACE
LATENCY_PROBE = os.path.join(HERE, "latency_probe.py")

# MLP layout -> (host counts it runs on, write_test_job flags for N hosts;
# None: scaling.py's data-parallel job from write_scaling_job).
MLP_LAYOUTS = {
    "dp": (lambda n: n >= 2, None),
    "tp": (lambda n: n >= 2,
           lambda n, a: ["--placement", "0-%d:cpu:0" % (n - 1), "--model_parallel", "megatron"]),
    # 3 Dense layers: the second stage takes the two later ones (4.2M of the
    # 5.8M weights; the first stage's input is the widest activation).
    "pp": (lambda n: n == 2,
           lambda n, a: ["--stages", "0:cpu:0,1:cpu:0,1:cpu:0", "--micro_batches",
                         str(a.micro_batches), "--schedule", "1f1b"]),
    "dp_pp": (lambda n: n == 4,
              lambda n, a: ["--stages", "0-1:cpu:0,2-3:cpu:0,2-3:cpu:0", "--micro_batches",
                            str(a.micro_batches), "--schedule", "1f1b"]),
    "dp_tp": (lambda n: n == 4,
              lambda n, a: ["--placement", "0-3:cpu:0@2x2", "--model_parallel", "dp_tp"]),
}
GPT_LAYOUTS = ("dp", "tp", "pp", "dp_tp", "tp_pp")
MODELS = ("mlp", "gpt")
RATE_UNITS = {"kbit": 1e-6, "mbit": 1e-3, "gbit": 1.0, "tbit": 1e3}


class Config:
    def __init__(self, model, layout, hosts, rate):
        self.model, self.layout, self.hosts, self.rate = model, layout, hosts, rate
        self.name = "%s-%s-%dh-%s" % (model, layout, hosts, rate)
        self.cluster = None    # its cluster file (path)
        self.plan = None       # compiled plan (path)
        self.predicted = None  # ms (the rounds' median: combine_rounds)
        # One prediction per calibration (one, or with --recalibrate one
        # before every repeat): dicts of the repeat, the step (ms) and the
        # per-machine lists of predict.
        self.rounds = []
        self.predicted_first = None  # ms, with the sitting's first calibration
        self.samples = []      # ms
        self.sample_reps = []  # the repeat each sample came from
        self.kernel_cpu_ms = None         # per rank (the compute check)
        self.predicted_compute_ms = None  # per machine (predict)
        # The CPU check: per sample, per rank (cpu ms a step, comm threads'
        # ms a step) from the threads at rank 0's marks; per machine the
        # simulator's cpu_ms_per_step and comm_cpu_ms_per_step (predict).
        self.cpu_samples = []
        # Per sample, per rank: thread name -> CPU ms a step (--thread-cpu).
        self.thread_samples = []
        self.predicted_cpu_ms = None
        self.predicted_comm_cpu_ms = None
        # --resummarize: the row's thread_cpu_ms (threads_by_name's result).
        self.thread_cpu_row = None


def gbit_per_s(rate):
    """tc's rate ("1gbit", "100mbit") in Gbit/s, or None."""
    match = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)(kbit|mbit|gbit|tbit)", rate.lower())
    return float(match.group(1)) * RATE_UNITS[match.group(2)] if match else None


def netns_burst_bytes(rate):
    """The token-bucket depth tests/netns/netns_lib.sh (_netns_burst) shapes
    a link of tc rate `rate` with: 2 ms at the rate, at least 64 KiB.
    Stated as the cluster files' nic.burst_bytes, so that the simulator
    lets what a tbf lets through at once after idle time (docs/simulate.md)."""
    return max(65536, int(gbit_per_s(rate) * 1e9 / 8 / 500))


def layouts_of(model):
    if model == "mlp":
        return [(name, fits) for name, (fits, _) in MLP_LAYOUTS.items()]
    return [(name, gpt_layouts.LAYOUTS[name][0]) for name in GPT_LAYOUTS]


def all_configs(args):
    return [Config(model, layout, nhosts, rate) for model in MODELS for nhosts in args.hosts
            for rate in args.rates for layout, fits in layouts_of(model) if fits(nhosts)]


def add_shared_arguments(p):
    """The flags validate.py and auto_vs_ddp.py share: hosts and links, the
    two models' sizes, steps, pinning and the binaries."""
    p.add_argument("--hosts", default="2,4", help="comma list of host counts")
    p.add_argument("--rates", default="1gbit,10gbit", help="link rates (tc syntax: 1gbit, 100mbit)")
    p.add_argument("--warmup", type=int, default=5, help="steps before (and after) the window")
    p.add_argument("--measure", type=int, default=20, help="steps in the timed window")
    p.add_argument("--mlp-batch", type=int, default=128, help="the MLP's global batch")
    p.add_argument("--gpt-batch", type=int, default=32, help="the GPT's global batch (sequences)")
    p.add_argument("--layers", type=int, default=4, help="the GPT's blocks")
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--channels", type=int, default=128)
    p.add_argument("--block", type=int, default=64)
    p.add_argument("--cores", default="0,1", help="cores; rank r runs on cores[r mod len]")
    p.add_argument("--no-link-burst", dest="link_burst", action="store_false",
                   help="state the links' nic.burst_bytes 0 (a plain line-rate link) instead of "
                        "the namespace links' token bucket (docs/simulate.md)")
    p.add_argument("--no-link-cpu", dest="link_cpu", action="store_false",
                   help="do not measure the CPU the namespace path costs per byte (state it free)")
    p.add_argument("--path-cpu-ns", type=float, default=None, metavar="NS",
                   help="state this CPU cost per byte per end beyond the transport's own, for "
                        "every host count, instead of measuring it")
    p.add_argument("--oflite", default=os.path.join(WORKSPACE, "bazel-bin/tools/oflite/oflite"))
    p.add_argument("--gpt-char", default=os.path.join(WORKSPACE, "bazel-bin/examples/gpt_char"))
    p.add_argument("--write-job",
                   default=os.path.join(WORKSPACE, "bazel-bin/tools/bench/scaling/write_scaling_job"))
    p.add_argument("--probe-mb", type=int, default=100, help="MB sent to measure each link rate")
    p.add_argument("--timeout", type=int, default=900, help="bound of one sample, seconds")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_shared_arguments(p)
    p.add_argument("--configs", default="*",
                   help="comma list of configuration names or shell patterns (default: all; --list)")
    p.add_argument("--list", action="store_true", help="print the configuration names and exit")
    p.add_argument("--repeats", type=int, default=5, help="samples per configuration (median; >= 3; the ground rules ask >= 5)")
    p.add_argument("--micro-batches", type=int, default=4, help="of the pipelined layouts")
    p.add_argument("--no-in-situ", dest="in_situ", action="store_false",
                   help="profile kernels in isolation only (no one-host reference run)")
    p.add_argument("--latency-us", default="measure",
                   help="one-way link latency written to each machine's nic (microseconds), or "
                        "'measure': 1-byte TCP ping-pong over the namespace link minus the same "
                        "on loopback (the transport's own share, which the calibration holds)")
    p.add_argument("--out-dir", default="", help="plans, cluster files, calibration, predictions and "
                                                 "logs (default: a new temp dir, kept)")
    p.add_argument("--calibration", default="", help="reuse this calibration instead of profiling")
    p.add_argument("--recalibrate", action="store_true",
                   help="profile again before every later repeat and predict with the median over "
                        "the calibrations (the first calibration's figures are printed beside)")
    p.add_argument("--size-rule", action="store_true",
                   help="compile every plan's collectives by the compiler's size rule instead of "
                        "from the calibration's curves and the cluster's links (oflite compile "
                        "--calibration, what a user with a calibration gets)")
    p.add_argument("--profile-args", default="",
                   help="more flags for oflite profile (one string, shell words)")
    p.add_argument("--no-compute-check", dest="compute_check", action="store_false",
                   help="skip the traced run per configuration that compares each rank's kernel "
                        "CPU time with the simulator's compute")
    p.add_argument("--measure-only", action="store_true",
                   help="measure only: no profile, no predictions")
    p.add_argument("--json", default="", help="write every row and the summary to this file")
    p.add_argument("--thread-cpu", action="store_true",
                   help="also print each rank's threads by CPU a step (the JSON has them anyway): "
                        "which thread spends what the CPU check finds uncharged")
    p.add_argument("--resummarize", default="", metavar="JSON",
                   help="print the table and the orders again from an earlier run's --json, "
                        "measuring nothing (rows without sample_reps: samples in repeat order)")
    p.add_argument("--smoke", action="store_true",
                   help="tiny GPT, MLP batch 16, 1 repeat, 2+3+2 steps: checks that everything runs")
    p.add_argument("--write-test-job",
                   default=os.path.join(WORKSPACE, "bazel-bin/oneflow_lite/testing/write_test_job"))
    p.add_argument("--profile-timeout", type=int, default=3600, help="bound of oflite profile, seconds")
    p.add_argument("--simulate-timeout", type=int, default=300, help="bound of one oflite simulate")
    p.add_argument("--openblas-coretype", default="auto",
                   help="OPENBLAS_CORETYPE of the ranks and the profile (see scaling.py --help)")
    args = p.parse_args()
    if args.smoke:
        args.repeats, args.warmup, args.measure, args.probe_mb = 1, 2, 3, 20
        args.mlp_batch, args.gpt_batch = 16, 16
        args.layers, args.heads, args.channels, args.block = 4, 4, 32, 16
    errors = []
    try:
        args.hosts = [int(n) for n in args.hosts.split(",")]
        args.cores = [int(c) for c in args.cores.split(",")]
    except ValueError:
        p.error("--hosts and --cores want comma lists of integers")
    args.rates = args.rates.split(",")
    errors += ["--rates: '%s' is not a tc rate such as 1gbit or 100mbit" % r
               for r in args.rates if gbit_per_s(r) is None]
    if min(args.hosts) < 2:
        errors.append("--hosts: every count must be >= 2")
    if args.repeats < 3 and not args.smoke:
        errors.append("--repeats must be >= 3 (a median of fewer says little; --smoke runs 1)")
    if args.warmup < 1 or args.measure < 1:
        errors.append("--warmup and --measure must be >= 1")
    if args.latency_us != "measure":
        try:
            if float(args.latency_us) < 0:
                raise ValueError
        except ValueError:
            errors.append("--latency-us must be 'measure' or microseconds >= 0, got '%s'" % args.latency_us)
    for batch, flag in ((args.mlp_batch, "--mlp-batch"), (args.gpt_batch, "--gpt-batch")):
        if any(batch % (n * args.micro_batches) for n in args.hosts):
            errors.append("%s %d: want a multiple of every host count x --micro-batches" % (flag, batch))
    if args.measure_only and args.calibration:
        errors.append("--calibration with --measure-only: nothing would read it")
    if args.recalibrate and (args.calibration or args.measure_only):
        errors.append("--recalibrate profiles again before each repeat: not with %s"
                      % ("--calibration (a calibration reused)" if args.calibration
                         else "--measure-only (no calibration)"))
    if errors:
        p.error("; ".join(errors))
    if args.openblas_coretype == "auto":
        args.openblas_coretype = scaling.openblas_core_for_cpu()
    elif args.openblas_coretype == "none":
        args.openblas_coretype = ""
    configs = all_configs(args)
    chosen, unmatched = [], []
    for pattern in args.configs.split(","):
        hits = [c for c in configs if fnmatch.fnmatchcase(c.name, pattern)]
        if not hits:
            unmatched.append(pattern)
        chosen += [c for c in hits if c not in chosen]
    if unmatched:
        p.error("--configs: no configuration named like '%s' (--list prints the names)"
                % "', '".join(unmatched))
    args.chosen = [c for c in configs if c in chosen]  # in grid order
    return args


def tools_missing(args):
    """Why the tools this run needs are not there, or ""."""
    needed = [args.oflite]
    models = {c.model for c in args.chosen}
    if "gpt" in models:
        needed.append(args.gpt_char)
    if "mlp" in models:
        needed += [args.write_job, args.write_test_job]
    for path in needed:
        if not os.access(path, os.X_OK):
            return ("%s is not built (bazel build //tools/oflite:oflite //examples:gpt_char "
                    "//tools/bench/scaling:write_scaling_job //oneflow_lite/testing:write_test_job)"
                    % path)
    if args.measure_only:
        return ""
    commands = ["simulate"] + ([] if args.calibration else ["profile"])
    for command in commands:
        done = subprocess.run([args.oflite, command, "--help"], capture_output=True, text=True,
                              timeout=60)
        if done.returncode != 0:
            said = (done.stderr or done.stdout).strip().splitlines()
            return ("`oflite %s` is unavailable in %s (%s): build an oflite that has it, or pass "
                    "--measure-only" % (command, args.oflite, said[0] if said else "exit %d"
                                        % done.returncode))
    if args.calibration and not os.path.isfile(args.calibration):
        return "--calibration %s: no such file" % args.calibration
    return ""


def pinned_stream(server_ns, client_ns, address, port, nbytes, cores):
    """One TCP stream of `nbytes` (scaling.PROBE) from `client_ns` to a
    server in `server_ns` at `address`, the server pinned to cores[0] and
    the client to cores[1] as ranks 0 and 1 are. Returns the server's
    output words (None when it failed)."""
    server = subprocess.Popen(["ip", "netns", "exec", server_ns, "taskset", "-c", str(cores[0]),
                               sys.executable, scaling.PROBE, "serve", str(port), "--timeout", "60"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        subprocess.run(["ip", "netns", "exec", client_ns, "taskset", "-c", str(cores[1 % len(cores)]),
                        sys.executable, scaling.PROBE, "send", address, str(port), str(nbytes),
                        "--timeout", "60"], capture_output=True, timeout=120)
        out = server.communicate(timeout=120)[0]
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    return out.split() if server.returncode == 0 else None


def link_rate_mbit(hosts, rate, megabytes, cores):
    """The rate one TCP stream carries over the shaped link, Mbit/s: the
    median of 3 pinned streams from host 1 to host 0 (scaling.measure_link
    leaves the ends unpinned: one run read 8.7 Gbit/s at 10 Gbit/s where
    others read 9.6-9.8, and predicted the byte-bound rows 12 % slow). NaN
    when no probe gave a figure."""
    hosts.shape(rate)
    rates = []
    for _ in range(3):
        words = pinned_stream(hosts.ns[0], hosts.ns[1], hosts.addr[0], 5001, megabytes * 1000000,
                              cores)
        if words is not None and len(words) > 6:
            rates.append(float(words[6]))
    return statistics.median(rates) if rates else float("nan")


def link_latency_us(hosts, rate, port, cores):
    """One-way latency the namespace link adds to loopback, microseconds
    (never below 0), and the two medians of 3 probes it comes from. The
    two ends are pinned to the first two cores as ranks 0 and 1 are:
    unpinned, whether they share a core swings the figure between ~3 and
    ~40 us."""
    hosts.shape(rate)

    def one_way(server_prefix, client_prefix, address):
        server = subprocess.Popen(server_prefix + [sys.executable, LATENCY_PROBE, "serve", str(port),
                                                   "--timeout", "30"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            done = subprocess.run(client_prefix + [sys.executable, LATENCY_PROBE, "ping", address,
                                                   str(port), "--timeout", "30"],
                                  capture_output=True, text=True, timeout=60)
            server.wait(timeout=30)
        finally:
            if server.poll() is None:
                server.kill()
                server.wait()
        words = done.stdout.split()
        if done.returncode != 0 or len(words) < 6:
            raise RuntimeError("latency_probe ping %s: %s" % (address, done.stderr.strip()[-200:]))
        return float(words[5])

    ns = lambda i, rank: ["ip", "netns", "exec", hosts.ns[i], "taskset", "-c", str(cores[rank % len(cores)])]
    links, loopbacks = [], []
    for _ in range(3):  # interleaved; medians: one probe now and then lands on a busy core
        links.append(one_way(ns(0, 0), ns(1, 1), hosts.addr[0]))
        loopbacks.append(one_way(ns(0, 0), ns(0, 1), "127.0.0.1"))
    link, loopback = statistics.median(links), statistics.median(loopbacks)
    return max(0.0, link - loopback), link, loopback


def thread_cpu(pid, tid):
    """(name, CPU seconds) of one thread: its run time from schedstat (ns,
    exact), else utime + stime from stat (clock ticks); None when gone."""
    got = scaling.stat_cpu("/proc/%d/task/%s/stat" % (pid, tid))
    if not got:
        return None
    try:
        with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
            return got[0], int(f.read().split()[0]) / 1e9
    except (OSError, IndexError, ValueError):
        return got


def threads_cpu_seconds(pid):
    """Thread name -> CPU seconds of process `pid`'s threads of that name,
    summed (thread_cpu); {} when the process is gone."""
    out = {}
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return out
    for tid in tids:
        got = thread_cpu(pid, tid)
        if got:
            out[got[0]] = out.get(got[0], 0.0) + got[1]
    return out


def cpu_between(start, end, pick=lambda name: True):
    """CPU seconds the threads `pick` takes (by name) spent from `start` to
    `end` (two threads_cpu_seconds of one process)."""
    return sum(end[t] - start.get(t, 0.0) for t in end if pick(t))


class ThreadCpuAtMarks:
    """A scaling.run_ranks watcher: every rank's threads' CPU seconds by
    name (threads_cpu_seconds) as soon as rank 0's start and end marks
    arrive (polled every 2 ms), in .at["start"] / .at["end"]."""

    def __init__(self):
        self.at = {}

    def start(self, procs, marks):
        self.procs, self.marks = procs, marks
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        while not self.stopping.is_set() and len(self.at) < 2:
            for name in ("start", "end"):
                if name in self.marks and name not in self.at:
                    self.at[name] = [threads_cpu_seconds(p.pid) for p in self.procs]
            time.sleep(0.002)

    def stop(self):
        self.stopping.set()
        self.thread.join(timeout=5)


def is_comm_thread(name):
    """Whether an oflite rank's thread of this name works on its
    collectives: the tcp transport's progress thread, the ring worker
    (reductions, posting, waiting) and the actor thread of the collective
    stream (kCollectiveStream, 5: staging into the ring's buffer and the
    cut-out of the result; named mM/cpuD/s5)."""
    return name.startswith("oflite-tcp") or name.startswith("oflite-coll") or name.endswith("/s5")


def runtime_copy_gbyte_per_s(calibration):
    """The calibration's runtime copy_gbyte_per_s (the simulator's copy
    speed, 5 GB/s when unset)."""
    with open(calibration) as f:
        m = re.search(r"^runtime \{[^}]*?copy_gbyte_per_s: ([0-9.eE+-]+)", f.read(), re.M)
    return float(m.group(1)) if m else 5.0


def transport_cpu_ns_per_byte(calibration, name="tcp"):
    """cpu_ns_per_byte of transport `name` in a calibration text proto
    (its own field, not a collective's); None when absent."""
    depth, inside, found = 0, False, None
    with open(calibration) as f:
        for line in f:
            words = line.split()
            if depth == 1 and inside and words[:1] == ["cpu_ns_per_byte:"]:
                found = float(words[1])
            if depth == 1 and words[:2] == ["name:", '"%s"' % name]:
                inside = True
            if depth == 0 and words[:2] == ["transport", "{"]:
                inside = False
            depth += line.count("{") - line.count("}")
            if depth == 0 and inside:
                if found is not None:
                    return found
                inside = False
    return found


class Validation:
    def __init__(self, args, hosts, out):
        self.args, self.hosts, self.out = args, hosts, out
        gpt_args = copy.copy(args)
        gpt_args.global_batch = args.gpt_batch
        # The GPT's jobs and every sample (both models) go through
        # gpt_layouts.py's Bench: the same ranks, pinning and step marks.
        self.bench = gpt_layouts.Bench(gpt_args, hosts, out)
        self.bench.port = 29700
        self.bench.token = "validate-%d" % os.getpid()
        self.jobs = {}
        self.reference_plans = {}  # model -> its one-host plan (reference_plan)
        self.latency = {}  # rate -> one-way µs of the nic
        # host count -> CPU ns per byte per end a collective's bytes cost
        # beyond the transport's own in that many hosts' arrangement
        # (measure_paths): the cluster files' nic cpu_ns_per_byte.
        self.link_cpu = {}
        self.link_gbit = {}  # rate -> what one TCP stream carries over it, Gbit/s
        for sub in ("jobs", "logs"):
            os.makedirs(os.path.join(out, sub), exist_ok=True)

    def job(self, c):
        """The Job of c's model, layout and host count (written once)."""
        key = (c.model, c.layout, c.hosts)
        if key in self.jobs:
            return self.jobs[key]
        a = self.args
        folder = os.path.join(self.out, "jobs", "%s-%s-%dh" % key)
        if c.model == "gpt":
            path = self.bench.job(c.layout, c.hosts, folder)
        else:
            os.makedirs(folder, exist_ok=True)
            path = os.path.join(folder, "mlp.job.pb")
            iterations = str(2 * a.warmup + a.measure)
            flags = MLP_LAYOUTS[c.layout][1]
            if flags is None:
                cmd = [a.write_job, path, "--model", "mlp", "--batch", str(a.mlp_batch),
                       "--machines", str(c.hosts), "--iterations", iterations]
            else:
                cmd = [a.write_test_job, path, "--batch", str(a.mlp_batch), "--features", "784",
                       "--hidden", "2048,2048", "--classes", "10",
                       "--iterations", iterations] + flags(c.hosts, a)
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            if done.returncode != 0:
                raise RuntimeError("%s: %s" % (" ".join(cmd[:1] + cmd[2:]), done.stderr.strip()[-300:]))
        self.jobs[key] = path
        return path

    def cluster(self, c):
        """Writes OUT/NAME.cluster.pbtxt for c's hosts and link rate (the
        measured link model of measure_network); returns its path."""
        a = self.args
        nic = ('nic { gbit_per_s: %.4g latency_us: %.1f cpu_ns_per_byte: %.3f burst_bytes: %d }' % (
            self.link_gbit.get(c.rate, gbit_per_s(c.rate)), self.latency[c.rate],
            self.link_cpu.get(c.hosts, 0.0),
            netns_burst_bytes(c.rate) if getattr(a, "link_burst", True) else 0))
        cluster = os.path.join(self.out, c.name + ".cluster.pbtxt")
        # cpu_threads 1: what each pinned rank computes with anyway (the
        # runtime gives BLAS the cores of its affinity, one), stated so that
        # the simulator looks up the kernel times profiled with --threads 1.
        scaling.write_cluster(cluster, self.hosts.addr[:c.hosts],
                              lambda m: 'cpu_threads: 1 %s cpu_set: "%d"' % (nic, a.cores[m % len(a.cores)]))
        return cluster

    def compile(self, c, calibration=""):
        """Compiles c's plan; with a calibration (and not --size-rule) every
        collective takes the algorithm its curves predict fastest over the
        cluster file's slowest link, as `oflite compile --calibration`
        chooses for a user."""
        a = self.args
        cluster = self.cluster(c)
        plan = os.path.join(self.out, c.name + ".plan.pb")
        chosen = ["--calibration", calibration, "--transport", "tcp"] if (
            calibration and not a.size_rule) else []
        done = subprocess.run([a.oflite, "compile", "--job", self.job(c), "--cluster", cluster,
                               "-o", plan, "--quiet"] + chosen, capture_output=True, text=True,
                              timeout=300)
        if done.returncode != 0:
            raise RuntimeError("oflite compile: " + done.stderr.strip()[-300:])
        c.cluster, c.plan = cluster, plan

    def reference_plan(self, model):
        """A one-host plan of `model` whose device batch equals the 2-host
        data-parallel one (half the global batch): `oflite profile
        --run-plan` runs it to measure its kernels inside a real run."""
        a = self.args
        folder = os.path.join(self.out, "jobs", "%s-reference-1h" % model)
        os.makedirs(folder, exist_ok=True)
        if model == "gpt":
            saved = self.bench.args.global_batch
            self.bench.args.global_batch = max(1, a.gpt_batch // 2)
            try:
                job = self.bench.job("1host", 1, folder)
            finally:
                self.bench.args.global_batch = saved
        else:
            job = os.path.join(folder, "mlp.job.pb")
            cmd = [a.write_job, job, "--model", "mlp", "--batch", str(max(1, a.mlp_batch // 2)),
                   "--machines", "1", "--iterations", str(2 * a.warmup + a.measure)]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            if done.returncode != 0:
                raise RuntimeError("write_scaling_job: " + done.stderr.strip()[-300:])
        cluster = os.path.join(folder, "cluster.pbtxt")
        scaling.write_cluster(cluster, ["127.0.0.1"], lambda m: "cpu_threads: 1")
        plan = os.path.join(folder, "reference.plan.pb")
        done = subprocess.run([a.oflite, "compile", "--job", job, "--cluster", cluster, "-o", plan,
                               "--quiet"], capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeError("oflite compile (reference): " + done.stderr.strip()[-300:])
        return plan

    def comm_reference(self, n, rate, calibration, runs=3, warmup=10, measure=60):
        """The CPU a byte of a collective costs per end on n namespace hosts
        in a real run, beyond the staging copies the simulator charges: a
        data-parallel reference job (the MLP at half of --mlp-batch, a job
        no configuration measures), pinned as the runs are, over the `rate`
        link; the CPU of every rank's comm threads (is_comm_thread) over
        `measure` steps after `warmup`, per step, less the staging copies
        at the calibration's copy speed (each all-reduce copies its buffer
        in and its result out: n/(n-1) of the bytes a rank sends), over
        the bytes each rank sends and receives per step (twice the egress
        `oflite simulate` counts for the plan: ring collectives send what
        they receive). Returns (ns per byte per end: the median over `runs`
        runs of the ranks' mean, the runs' figures, bytes a rank sends per
        step)."""
        a = self.args
        folder = os.path.join(self.out, "jobs", "mlp-commref-%dh" % n)
        os.makedirs(folder, exist_ok=True)
        job = os.path.join(folder, "mlp.job.pb")
        total = 2 * warmup + measure
        cmd = [a.write_job, job, "--model", "mlp", "--batch", str(max(n, a.mlp_batch // 2)),
               "--machines", str(n), "--iterations", str(total)]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeError("write_scaling_job: " + done.stderr.strip()[-300:])
        cluster = os.path.join(folder, "cluster.pbtxt")
        scaling.write_cluster(cluster, self.hosts.addr[:n],
                              lambda m: 'cpu_threads: 1 cpu_set: "%d"' % a.cores[m % len(a.cores)])
        plan = os.path.join(folder, "reference.plan.pb")
        done = subprocess.run([a.oflite, "compile", "--job", job, "--cluster", cluster, "-o", plan,
                               "--quiet"], capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeError("oflite compile (comm reference): " + done.stderr.strip()[-300:])
        done = subprocess.run([a.oflite, "simulate", "--plan", plan, "--calibration", calibration,
                               "--json"], capture_output=True, text=True,
                              timeout=getattr(a, "simulate_timeout", 300))
        try:
            egress = statistics.mean(m["egress_bytes_per_step"]
                                     for m in json.loads(done.stdout)["machines"])
        except (ValueError, KeyError, TypeError, statistics.StatisticsError):
            raise RuntimeError("oflite simulate (comm reference) gave no egress bytes: "
                               + done.stderr.strip()[-300:])
        if not egress > 0:
            raise RuntimeError("the comm reference plan sends nothing")
        self.hosts.shape(rate)
        staging_s = egress * n / (n - 1) / (runtime_copy_gbyte_per_s(calibration) * 1e9)
        figures = []
        for run in range(runs):
            watch = ThreadCpuAtMarks()
            self.bench.run_plan(plan, n, os.path.join(self.out, "logs", "commref-%dh.run%d" % (n, run)),
                                watcher=watch, warmup=warmup, measure=measure)
            if len(watch.at) < 2:
                raise RuntimeError("the comm reference's threads were not sampled at both marks")
            per_rank = []
            for start, end in zip(watch.at["start"], watch.at["end"]):
                cpu = cpu_between(start, end, is_comm_thread)
                per_rank.append((cpu / measure - staging_s) * 1e9 / (2 * egress))
            figures.append(statistics.mean(per_rank))
        return statistics.median(figures), figures, egress

    def profile_env(self):
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
        if self.args.openblas_coretype:
            env["OPENBLAS_CORETYPE"] = self.args.openblas_coretype
        return env

    def profile_transports(self, name="calibration.pbtxt", log_suffix=""):
        """The profile's first pass: the runtime (with the scheduler's
        wake-up delay on a busy core) and the tcp transport on every core
        the ranks use (--cores). The profile binds its transport ranks as
        `oflite launch` binds ranks, over the cores it may use, so the
        collective curves see the runs' placement (2 ranks: a core each;
        4 ranks on 2 cores: two per core), and the wake-up probe needs two
        cores. Runs before the plans are compiled: their cluster files
        state the path's CPU beyond the transport's own figure (measure_paths).
        Returns the calibration's path (OUT/NAME)."""
        a = self.args
        out = os.path.join(self.out, name)
        cores = ",".join(str(c) for c in dict.fromkeys(a.cores))
        first = ["taskset", "-c", cores, a.oflite, "profile", "--out", out, "--threads", "1",
                 "--transports", "tcp"] + shlex.split(a.profile_args)
        self.run_profile(first, self.profile_env(), "profile-transports%s.log" % log_suffix, out)
        return out

    def profile_kernels(self, configs, out, log_suffix=""):
        """The profile's second pass (--update of `out`): the kernels of one
        plan per (model, layout, hosts), pinned like rank 0 with one compute
        thread (the kernels' conditions in the runs), and, unless
        --no-in-situ, a one-host reference plan per model that it also
        runs."""
        a = self.args
        plans, seen = [], set()
        for c in configs:
            if (c.model, c.layout, c.hosts) not in seen:
                seen.add((c.model, c.layout, c.hosts))
                plans.append(c.plan)
        run_plans = []
        if a.in_situ:
            for m in dict.fromkeys(c.model for c in configs):
                if m not in self.reference_plans:
                    self.reference_plans[m] = self.reference_plan(m)
                run_plans.append(self.reference_plans[m])
            plans += run_plans
        cmd = ["taskset", "-c", str(a.cores[0]), a.oflite, "profile", "--update", "--plan",
               ",".join(plans), "--out", out, "--threads", "1", "--transports", "tcp"] + shlex.split(
                   a.profile_args)
        if run_plans:
            cmd += ["--run-plan", ",".join(run_plans)]
        self.run_profile(cmd, self.profile_env(), "profile%s.log" % log_suffix, out)

    def run_profile(self, cmd, env, log_name, out):
        """Runs one oflite profile command into OUT/logs/LOG_NAME; raises
        RuntimeError with the log's tail when it fails."""
        log = os.path.join(self.out, "logs", log_name)
        print("profile: %s (log %s)" % (" ".join(cmd), log), flush=True)
        with open(log, "w") as f:
            try:
                rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env,
                                    timeout=self.args.profile_timeout).returncode
            except subprocess.TimeoutExpired:
                raise RuntimeError("oflite profile ran past --profile-timeout %d s (log %s)"
                                   % (self.args.profile_timeout, log))
        if rc != 0 or not os.path.isfile(out):
            with open(log) as f:
                tail = " | ".join(f.read().strip().splitlines()[-3:])
            raise RuntimeError("oflite profile exited %d: %s (log %s)" % (rc, tail, log))

    def predict(self, c, calibration, rep=0):
        """Predicts c with `calibration` (OUT/NAME.simulate.json, for a
        later repeat's calibration OUT/NAME.rREP.simulate.json); adds the
        prediction to c.rounds and sets c's prediction from them
        (combine_rounds)."""
        a = self.args
        done = subprocess.run([a.oflite, "simulate", "--plan", c.plan, "--calibration", calibration,
                               "--json"], capture_output=True, text=True, timeout=a.simulate_timeout)
        path = os.path.join(self.out, c.name + (".r%d" % rep if rep else "") + ".simulate.json")
        with open(path, "w") as f:
            f.write(done.stdout)
        if done.returncode != 0:
            raise RuntimeError("oflite simulate exited %d: %s" % (
                done.returncode, " | ".join(done.stderr.strip().splitlines()[-3:])))
        try:
            result = json.loads(done.stdout)
            step = result["step_time_ms"]
        except (ValueError, KeyError, TypeError) as error:
            raise RuntimeError("oflite simulate --json gave no \"step_time_ms\" (%s; %s)" % (error, path))
        machines = sorted(result.get("machines", []), key=lambda m: m["machine"])
        c.rounds.append({"rep": rep, "step_ms": float(step),
                         "compute_ms": [m.get("compute_ms_per_step") for m in machines],
                         "cpu_ms": [m.get("cpu_ms_per_step") for m in machines],
                         "comm_cpu_ms": [m.get("comm_cpu_ms_per_step") for m in machines]})
        combine_rounds(c)

    def recalibrate(self, configs, rep):
        """Before repeat `rep`: both profile passes again into
        OUT/calibration.rREP.pbtxt (the plans stay as compiled) and every
        configuration predicted with it. The host's speed moves within
        minutes on the VMs we measure on (kernels 1.00-1.26x, the busy-core
        message cost 42-108 us, docs/simulate.md), so a calibration from the
        sitting's first minutes alone predicts an hour it did not measure;
        calibrations interleaved with the repeats sample the same hours as
        the runs, and their spread says how repeatable one calibration is
        (--recalibrate). Returns the calibration's path."""
        out = self.profile_transports("calibration.r%d.pbtxt" % rep, "-r%d" % rep)
        self.profile_kernels(configs, out, "-r%d" % rep)
        for c in configs:
            self.predict(c, out, rep)
        return out

    def compute_check(self, c):
        """One more run of c with every rank's kernels traced with their CPU
        time (--trace-cpu) over the timed window: sets c.kernel_cpu_ms (per
        rank, ms of kernel CPU a step), beside c.predicted_compute_ms (per
        machine, the work the simulator charged its acts a step: predict)."""
        a = self.args
        folder = os.path.join(self.out, "traces", c.name)
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(os.path.dirname(folder), exist_ok=True)
        extra = ["--trace", folder, "--trace-iters", "%d:%d" % (a.warmup, a.warmup + a.measure),
                 "--trace-cpu"]
        self.bench.run_plan(c.plan, c.hosts, os.path.join(self.out, "logs", c.name + ".traced"),
                            extra=extra)
        c.kernel_cpu_ms = [trace_kernel_cpu_ms(os.path.join(folder, "rank-%d.json" % rank), a.measure)
                           for rank in range(c.hosts)]

    def sample(self, c, rep):
        watch = ThreadCpuAtMarks()
        wall, _, last = self.bench.run_plan(c.plan, c.hosts, os.path.join(self.out, "logs", c.name),
                                            watcher=watch)
        c.samples.append(wall / self.args.measure * 1e3)
        c.sample_reps.append(rep)
        if len(watch.at) == 2:
            # Per rank, thread name -> CPU ms a step; the CPU check's two
            # sums (all threads, the communication threads') come from it.
            threads = [{t: (end[t] - start.get(t, 0.0)) / self.args.measure * 1e3 for t in end}
                       for start, end in zip(watch.at["start"], watch.at["end"])]
            c.thread_samples.append(threads)
            c.cpu_samples.append([(sum(d.values()), sum(ms for t, ms in d.items() if is_comm_thread(t)))
                                  for d in threads])
        return last


def trace_kernel_cpu_ms(path, steps):
    """The kernel CPU time a step (ms) of one rank's trace file written with
    --trace-cpu over `steps` steps; ValueError when the trace has no CPU
    times (written without --trace-cpu)."""
    with open(path) as f:
        return kernel_cpu_ms_of(json.load(f), steps, path)


def kernel_cpu_ms_of(doc, steps, path):
    """trace_kernel_cpu_ms of a trace already loaded (`doc`, from `path`)."""
    if not doc.get("otherData", {}).get("cpu_time"):
        raise ValueError("%s was traced without --trace-cpu" % path)
    cpu_us = sum(e.get("args", {}).get("cpu_us", 0) for e in doc["traceEvents"]
                 if e.get("ph") == "X" and e.get("cat") == "kernel")
    return cpu_us / 1e3 / steps


def summarize_compute(configs):
    """Prints each row's kernel CPU a step against the simulator's compute,
    per rank (the compute check); returns the ratios' median or None."""
    rows = [c for c in configs if c.kernel_cpu_ms and c.predicted_compute_ms
            and None not in c.predicted_compute_ms]
    if not rows:
        return None
    print("\ncompute check: kernel CPU a step (one run traced with --trace-cpu) against the work "
          "the simulator charged each rank's acts a step, ms")
    ratios = []
    for c in rows:
        pairs = list(zip(c.kernel_cpu_ms, c.predicted_compute_ms))
        ratios += [m / p for m, p in pairs if p > 0]
        print("%-22s %s" % (c.name, "  ".join("r%d %.1f/%.1f" % (r, m, p)
                                              for r, (m, p) in enumerate(pairs))))
    mid = statistics.median(ratios)
    print("measured / predicted per rank: median %.2f, range %.2f-%.2f over %d ranks"
          % (mid, min(ratios), max(ratios), len(ratios)))
    return mid


def cpu_check(c):
    """Per rank (measured CPU, measured comm CPU) ms a step, the medians
    over c's samples; None without samples of every rank."""
    full = [s for s in c.cpu_samples if len(s) == c.hosts]
    if not full:
        return None
    return [(statistics.median(s[r][0] for s in full), statistics.median(s[r][1] for s in full))
            for r in range(c.hosts)]


def threads_by_name(c):
    """Per rank, thread name -> CPU ms a step, the median over c's samples
    that saw every rank (a thread missing from a sample counts 0); None
    without such samples."""
    full = [s for s in c.thread_samples if len(s) == c.hosts]
    if not full:
        return None
    out = []
    for r in range(c.hosts):
        names = set().union(*(s[r].keys() for s in full))
        out.append({t: statistics.median(s[r].get(t, 0.0) for s in full) for t in sorted(names)})
    return out


def summarize_threads(configs, floor_ms=0.5):
    """--thread-cpu: each row's threads by CPU a step, per rank, those
    above floor_ms (a thread name is every thread of that name summed)."""
    rows = [(c, threads_by_name(c)) for c in configs]
    rows = [(c, got) for c, got in rows if got]
    if not rows:
        return
    print("\nthreads: each rank's threads' CPU a step (the timed samples' median), ms, above %g"
          % floor_ms)
    for c, got in rows:
        for r, threads in enumerate(got):
            busy = sorted(((ms, t) for t, ms in threads.items() if ms >= floor_ms), reverse=True)
            print("%-22s r%d %s" % (c.name if r == 0 else "", r,
                                    "  ".join("%s %.1f" % (t, ms) for ms, t in busy)))


def summarize_cpu(args, configs):
    """Prints each row's CPU a step per rank against the simulator's (the
    CPU check) and each core's load: the CPU of the ranks pinned to it
    over the step, measured and predicted. Returns the ratios' median or
    None."""
    rows = [(c, cpu_check(c)) for c in configs if c.predicted_cpu_ms
            and None not in c.predicted_cpu_ms and c.predicted]
    rows = [(c, got) for c, got in rows if got]
    if not rows:
        return None
    print("\nCPU check: each rank's CPU a step (all threads, the timed samples' median), measured/"
          "predicted (oflite simulate's cpu_ms_per_step: acts and communication), of it the "
          "communication threads' (oflite-tcp, oflite-coll, s5) against comm_cpu_ms_per_step, "
          "and each core's load (its ranks' CPU over the step), ms")
    ratios = []
    for c, got in rows:
        ratios += [m[0] / p for m, p in zip(got, c.predicted_cpu_ms) if p > 0]
        load = {}
        for r, (m, p) in enumerate(zip(got, c.predicted_cpu_ms)):
            core = args.cores[r % len(args.cores)]
            mm, pp = load.get(core, (0.0, 0.0))
            load[core] = (mm + m[0], pp + p)
        print("%-22s %s  | load %s" % (
            c.name,
            "  ".join("r%d %.1f/%.1f comm %.1f/%.1f" % (r, m[0], p, m[1], pc) for r, (m, p, pc) in
                      enumerate(zip(got, c.predicted_cpu_ms, c.predicted_comm_cpu_ms))),
            " ".join("cpu%d %.0f/%.0f%%" % (core, 100 * mm / median(c), 100 * pp / c.predicted)
                     for core, (mm, pp) in sorted(load.items()))))
    mid = statistics.median(ratios)
    print("measured / predicted CPU per rank: median %.2f, range %.2f-%.2f over %d ranks"
          % (mid, min(ratios), max(ratios), len(ratios)))
    return mid


def median(c):
    return statistics.median(c.samples) if c.samples else None


def median_lists(lists):
    """Element-wise medians of equally long lists (None where an element
    is None in every list); None when the lengths differ or none is given."""
    if not lists or len({len(x) for x in lists}) != 1:
        return None
    out = []
    for values in zip(*lists):
        known = [v for v in values if v is not None]
        out.append(statistics.median(known) if known else None)
    return out


def combine_rounds(c):
    """c's prediction from its rounds (one per calibration): the step the
    median of the rounds' steps, the per-machine figures their element-wise
    medians; c.predicted_first the first round's step."""
    if not c.rounds:
        return
    c.predicted_first = c.rounds[0]["step_ms"]
    c.predicted = statistics.median(r["step_ms"] for r in c.rounds)
    c.predicted_compute_ms = median_lists([r["compute_ms"] for r in c.rounds])
    c.predicted_cpu_ms = median_lists([r["cpu_ms"] for r in c.rounds])
    c.predicted_comm_cpu_ms = median_lists([r["comm_cpu_ms"] for r in c.rounds])


def error_pct(c, predicted=None):
    """(predicted - measured) / measured in %, predicted c.predicted unless
    given; None without both."""
    m = median(c)
    p = c.predicted if predicted is None else predicted
    return (p - m) / m * 100 if m and p is not None else None


def pairs_disagreeing(group, predicted_of=lambda c: c.predicted):
    """The pairs of a setting's layouts whose order within the repeats
    (measured_faster) differs from their predicted order."""
    return [(x, y) for i, x in enumerate(group) for y in group[i + 1:]
            if measured_faster(x, y) != (predicted_of(x) < predicted_of(y))]


def orders_agreeing(configs, predicted_of):
    """(settings whose every pair of layouts agrees, settings scored) with
    the predictions predicted_of(c): the verdict summarize prints."""
    settings = {}
    for c in configs:
        if median(c) is not None:
            settings.setdefault((c.model, c.hosts, c.rate), []).append(c)
    same = scored = 0
    for group in settings.values():
        if len(group) < 2 or any(predicted_of(c) is None for c in group):
            continue
        scored += 1
        same += not pairs_disagreeing(group, predicted_of)
    return same, scored


TIE_PCT = 2.0  # summarize: measured medians this close are a near tie
MIN_PAIRED_REPS = 3  # paired_ratio: fewer common repeats fall back to the medians


def paired_ratio(x, y):
    """The median over the repeats that sampled both x and y of x's step
    over y's in that repeat, or None when fewer than MIN_PAIRED_REPS did.
    A setting's layouts run next to each other in every repeat, so the
    host's hour, which moves whole repeats by 10-40 %, divides out."""
    xs = dict(zip(x.sample_reps, x.samples))
    ys = dict(zip(y.sample_reps, y.samples))
    common = sorted(set(xs) & set(ys))
    if len(common) < MIN_PAIRED_REPS:
        return None
    return statistics.median(xs[r] / ys[r] for r in common)


def measured_ratio(x, y):
    """x's step over y's: their paired ratio when enough repeats sampled
    both, else the ratio of their medians."""
    ratio = paired_ratio(x, y)
    return ratio if ratio is not None else median(x) / median(y)


def measured_faster(x, y):
    """Whether x measured faster than y (measured_ratio)."""
    return measured_ratio(x, y) < 1


def paired_order(group):
    """The group's layouts fastest first by their wins in measured_faster
    over the others (ties by the median), or None when some pair has fewer
    than MIN_PAIRED_REPS repeats in common."""
    if any(paired_ratio(x, y) is None for i, x in enumerate(group) for y in group[i + 1:]):
        return None
    wins = {id(c): sum(measured_faster(c, o) for o in group if o is not c) for c in group}
    return [c.layout for c in sorted(group, key=lambda c: (-wins[id(c)], median(c)))]


KERNEL_TIME = re.compile(r"^(\s*)(us|in_situ_us|cold_us): ([0-9.eE+-]+)\s*$")


def scale_kernel_times(calibration_text, factor):
    """The text of a calibration whose kernel times (each KernelCost's us,
    in_situ_us and cold_us) are `factor` times those of calibration_text;
    nothing else changes (the runtime, transport and collective costs)."""
    lines, depth, in_kernel = [], 0, False
    for line in calibration_text.split("\n"):
        stripped = line.strip()
        if depth == 0 and stripped == "kernel {":
            in_kernel = True
        if in_kernel and depth == 1:
            m = KERNEL_TIME.match(line)
            if m:
                line = "%s%s: %.9g" % (m.group(1), m.group(2), float(m.group(3)) * factor)
        depth += stripped.count("{") - stripped.count("}")
        if depth == 0:
            in_kernel = False
        lines.append(line)
    return "\n".join(lines)


COMPUTE_THREAD = re.compile(r"^m\d+/cpu\d+/s0$")


def compute_thread_cpu_ms(c):
    """Per rank, the CPU ms a step of its compute threads (the CPU devices'
    stream 0, "mM/cpuD/s0") in the timed samples (median), or None."""
    threads = threads_by_name(c) or c.thread_cpu_row
    if not threads:
        return None
    return [sum(ms for name, ms in t.items() if COMPUTE_THREAD.match(name)) for t in threads]


def summarize_kernel_scaled(args, configs, calibration, folder):
    """The kernel-speed diagnostic. Each row is predicted again from
    `calibration` with every kernel time scaled by a factor of that row:
      traced:  its ranks' kernel CPU in the traced run (the compute check)
               over the compute the simulator charged them;
      samples: its ranks' compute threads' CPU in the timed samples (kernels
               and the runtime's acts) over the same charge;
    each the mean over the ranks: as if the calibration had met the work
    at the speed it ran at there. The traced run is one run after the
    samples, so a host whose speed moves within minutes can differ between
    them; the samples' factor also holds the acts' own cost. What error is
    left is outside the compute thread's charge: the communication threads'
    CPU and the schedule (waits, turns on shared cores). A diagnostic of
    the model, not a prediction: it reads measurements of the runs it
    predicts. Returns {config: {"traced": ms, "samples": ms}} and prints
    the table with each column's median and worst error."""
    if not calibration or not os.path.isfile(calibration):
        return {}
    rows = [c for c in configs if c.predicted_compute_ms and None not in c.predicted_compute_ms
            and median(c) and c.plan and os.path.isfile(c.plan)]
    if not rows:
        return {}
    with open(calibration) as f:
        text = f.read()
    os.makedirs(folder, exist_ok=True)

    def factor(measured, charged):
        ratios = [m / p for m, p in zip(measured or [], charged) if p > 0]
        return statistics.mean(ratios) if ratios else None

    def predict(c, how, scale):
        path = os.path.join(folder, "%s.%s.calibration.pbtxt" % (c.name, how))
        with open(path, "w") as f:
            f.write(scale_kernel_times(text, scale))
        done = subprocess.run([args.oflite, "simulate", "--plan", c.plan, "--calibration", path,
                               "--json"], capture_output=True, text=True,
                              timeout=args.simulate_timeout)
        try:
            return float(json.loads(done.stdout)["step_time_ms"])
        except (ValueError, KeyError, TypeError):
            print("%-22s oflite simulate (%s) failed (exit %d): %s" % (
                c.name, how, done.returncode, " | ".join(done.stderr.strip().splitlines()[-2:])))
            return None

    print("\nkernel-speed diagnostic: each row predicted again with the calibration's kernel "
          "times scaled by the row's measured work over its charge, per rank, mean (traced: the "
          "traced run's kernel CPU; samples: the timed samples' compute-thread CPU, acts "
          "included); the error left is outside the compute threads' charge")
    print("%-22s %9s %9s %8s  %7s %9s %8s  %7s %9s %8s" % (
        "config", "measured", "predicted", "error", "traced", "predicted", "error",
        "samples", "predicted", "error"))
    scaled, errors = {}, {"traced": [], "samples": []}
    for c in rows:
        m = median(c)
        e0 = error_pct(c)
        line = "%-22s %9.2f %9s %8s" % (c.name, m, "%.2f" % c.predicted
                                         if c.predicted is not None else "-",
                                         "%+.1f%%" % e0 if e0 is not None else "-")
        for how, measured in (("traced", c.kernel_cpu_ms), ("samples", compute_thread_cpu_ms(c))):
            f = factor(measured, c.predicted_compute_ms)
            step = predict(c, how, f) if f else None
            if step is None:
                line += "  %7s %9s %8s" % ("-", "-", "-")
                continue
            scaled.setdefault(c.name, {})[how] = step
            e = (step - m) / m * 100
            errors[how].append((abs(e), e, c.name))
            line += "  %6.3fx %9.2f %+7.1f%%" % (f, step, e)
        print(line)
    for how, got in errors.items():
        if got:
            worst = max(got)
            print("with the work at its %s speed: median |error| %.1f%%, worst %+.1f%% (%s), "
                  "%d rows" % (how, statistics.median(e for e, _, _ in got), worst[1], worst[2],
                               len(got)))
    return scaled


def attach_kernel_scaled(doc, scaled):
    """Adds summarize_kernel_scaled's predictions to doc's rows."""
    for row in doc.get("rows", []):
        if row["config"] in scaled:
            row["predicted_work_scaled_ms"] = scaled[row["config"]]


def summarize(args, configs):
    """Prints the table and the orders; returns the JSON document."""
    rounds = max((len(c.rounds) for c in configs), default=0)
    print("\n%-22s %9s %9s %9s %8s%s" % ("config", "measured", "spread", "predicted", "error",
                                         " %9s %9s %8s" % ("p.spread", "1st cal", "error")
                                         if rounds > 1 else ""))
    for c in configs:
        m, e = median(c), error_pct(c)
        spread = "%.1f%%" % ((max(c.samples) - min(c.samples)) / m * 100) if len(c.samples) > 1 else "-"
        line = "%-22s %9s %9s %9s %8s" % (
            c.name, "%.2f" % m if m else "failed", spread,
            "%.2f" % c.predicted if c.predicted is not None else "-",
            "%+.1f%%" % e if e is not None else "-")
        if rounds > 1:
            steps = [r["step_ms"] for r in c.rounds]
            e1 = error_pct(c, c.predicted_first)
            line += " %9s %9s %8s" % (
                "%.1f%%" % ((max(steps) - min(steps)) / c.predicted * 100) if len(steps) > 1 else "-",
                "%.2f" % c.predicted_first if c.predicted_first is not None else "-",
                "%+.1f%%" % e1 if e1 is not None else "-")
        print(line)
    print("step times in ms: measured = median of %d samples (spread: max - min over the median), "
          "predicted = oflite simulate's step_time_ms%s, error = (predicted - measured) / measured"
          % (args.repeats, ", the median over %d calibrations, one before each repeat (p.spread: "
             "max - min over the median; 1st cal: with the sitting's first calibration alone)"
             % rounds if rounds > 1 else ""))
    doc = {"repeats": args.repeats, "warmup": args.warmup, "measure": args.measure,
           "calibrations": rounds, "rows": [], "settings": []}
    errors = [(abs(error_pct(c)), c) for c in configs if error_pct(c) is not None]
    if errors:
        worst = max(errors, key=lambda x: x[0])
        doc["median_abs_error_pct"] = statistics.median(e for e, _ in errors)
        doc["worst"] = {"config": worst[1].name, "error_pct": error_pct(worst[1])}
        print("median |error| %.1f%% over %d configurations; worst %+.1f%% (%s)" % (
            doc["median_abs_error_pct"], len(errors), error_pct(worst[1]), worst[1].name))
    first = [(abs(error_pct(c, c.predicted_first)), c) for c in configs
             if error_pct(c, c.predicted_first) is not None]
    if rounds > 1 and first:
        worst = max(first, key=lambda x: x[0])
        same, scored = orders_agreeing(configs, lambda c: c.predicted_first)
        doc["first_calibration"] = {
            "median_abs_error_pct": statistics.median(e for e, _ in first),
            "worst": {"config": worst[1].name, "error_pct": error_pct(worst[1], worst[1].predicted_first)},
            "same_orders": same, "settings": scored}
        print("with the first calibration alone: median |error| %.1f%%; worst %+.1f%% (%s); "
              "orders the same in %d of %d settings" % (
                  doc["first_calibration"]["median_abs_error_pct"],
                  doc["first_calibration"]["worst"]["error_pct"], worst[1].name, same, scored))
    print("\nlayouts by step time, fastest first (per model, hosts, rate):")
    settings = []
    for c in configs:
        if (c.model, c.hosts, c.rate) not in settings:
            settings.append((c.model, c.hosts, c.rate))
    for model, nhosts, rate in settings:
        group = [c for c in configs if (c.model, c.hosts, c.rate) == (model, nhosts, rate)
                 and median(c) is not None]
        measured = [c.layout for c in sorted(group, key=median)]
        paired = paired_order(group)
        line = "%-3s %dh %-7s measured  %s" % (model, nhosts, rate, " < ".join(measured) or "-")
        if paired is not None and paired != measured:
            line += "  (paired within repeats: %s)" % " < ".join(paired)
        entry = {"model": model, "hosts": nhosts, "rate": rate, "measured_order": measured,
                 "paired_order": paired}
        scored = [c for c in group if c.predicted is not None]
        if len(scored) == len(group) and len(group) > 1:
            predicted = [c.layout for c in sorted(group, key=lambda c: c.predicted)]
            pairs = [(x, y) for i, x in enumerate(group) for y in group[i + 1:]]
            by_medians = sum((median(x) < median(y)) == (x.predicted < y.predicted)
                             for x, y in pairs)
            # The verdict compares each pair within the repeats that ran
            # both (measured_faster); the medians' count is printed beside it.
            disagree = pairs_disagreeing(group)
            agree = len(pairs) - len(disagree)
            # Disagreeing pairs whose paired ratio (or medians) lie within
            # TIE_PCT of 1: a near tie, said beside the verdict (which counts
            # them as disagreeing all the same).
            ties = ["%s/%s" % (x.layout, y.layout) for x, y in disagree
                    if abs(measured_ratio(x, y) - 1) * 100 <= TIE_PCT]
            same = not disagree
            entry.update(predicted_order=predicted, same_order=same,
                         same_order_by_medians=predicted == measured, pairs_agreeing=agree,
                         pairs_agreeing_by_medians=by_medians, pairs=len(pairs),
                         measured_ties_disagreeing=ties)
            line += "\n%-14s predicted %s  -> same order: %s (%d of %d pairs agree within repeats, " \
                    "%d by the medians%s)" % (
                        "", " < ".join(predicted), "yes" if same else "NO", agree, len(pairs),
                        by_medians,
                        "; measured within %g %% of each other: %s" % (TIE_PCT, ", ".join(ties))
                        if ties else "")
            for x, y in disagree:
                line += "\n%-14s   %s/%s: measured %.3f (%s), predicted %.3f" % (
                    "", x.layout, y.layout, measured_ratio(x, y),
                    "median of the repeats' ratios" if paired_ratio(x, y) is not None
                    else "ratio of medians", x.predicted / y.predicted)
        elif not args.measure_only and len(group) > 1:
            line += "\n%-14s predicted (incomplete: a prediction failed)" % ""
        print(line)
        doc["settings"].append(entry)
    for c in configs:
        got = cpu_check(c)
        doc["rows"].append({
            "config": c.name, "model": c.model, "layout": c.layout, "hosts": c.hosts, "rate": c.rate,
            "cluster": c.cluster, "plan": c.plan, "samples_ms": c.samples,
            "sample_reps": c.sample_reps, "measured_ms": median(c),
            "predicted_ms": c.predicted, "error_pct": error_pct(c),
            "predicted_first_ms": c.predicted_first,
            "round_predictions": [{"rep": r["rep"], "step_ms": r["step_ms"]} for r in c.rounds],
            "kernel_cpu_ms": c.kernel_cpu_ms, "predicted_compute_ms": c.predicted_compute_ms,
            "cpu_ms": [m[0] for m in got] if got else None,
            "comm_cpu_ms": [m[1] for m in got] if got else None,
            "thread_cpu_ms": threads_by_name(c),
            "predicted_cpu_ms": c.predicted_cpu_ms,
            "predicted_comm_cpu_ms": c.predicted_comm_cpu_ms})
    return doc


def measure_network(args, hosts, v, rate):
    """Measures the link model of `rate` that v's cluster files state (the
    rate one TCP stream carries, the one-way latency) into v.link_gbit and
    v.latency, printing each figure; False (said) when the latency probe
    failed. Uses ports 5001-5002 inside the namespaces and needs
    args.probe_mb, latency_us and cores. The path's CPU: measure_paths."""
    mbit = link_rate_mbit(hosts, rate, args.probe_mb, args.cores)
    if mbit == mbit and mbit > 0:  # not NaN: the rate the link really carries
        v.link_gbit[rate] = min(gbit_per_s(rate), mbit / 1000.0)
    if args.latency_us == "measure":
        try:
            v.latency[rate], link, loopback = link_latency_us(hosts, rate, 5002, args.cores)
        except (RuntimeError, subprocess.SubprocessError, OSError) as error:
            print("link %s: latency FAILED: %s" % (rate, error), flush=True)
            return False
        how = "measured: ping-pong %.1f us - loopback %.1f us" % (link, loopback)
    else:
        v.latency[rate] = float(args.latency_us)
        how = "--latency-us"
    print("link %s: %.0f Mbit/s measured (one TCP stream, host 1 -> host 0, median of 3); nic latency %.1f us "
          "(%s)" % (rate, mbit, v.latency[rate], how), flush=True)
    return True


def measure_paths(args, hosts, v, host_counts, calibration):
    """The CPU per byte per end that a collective's bytes cost beyond the
    tcp transport's calibrated own figure, for each host count, into
    v.link_cpu[n] (the cluster files' nic cpu_ns_per_byte), printing each
    figure: v.comm_reference(n) at the fastest of args.rates, less the
    calibration's tcp cpu_ns_per_byte, never below 0; stated for every rate.
    The transport's own figure comes from a one-way stream on loopback;
    what a run's bytes cost on top of it (the namespace path, the ring's
    reductions and waits, two ranks to a core, buffers out of cache)
    depends on the arrangement, so it is measured there, in a real run.
    --path-cpu-ns states one figure for all; --no-link-cpu, or no
    calibration to take the transport's figure from (--measure-only),
    states 0."""
    transport = transport_cpu_ns_per_byte(calibration) if calibration else None
    for n in sorted(set(host_counts)):
        if args.path_cpu_ns is not None:
            v.link_cpu[n] = args.path_cpu_ns
            print("path %dh: %.3f CPU ns per byte per end (--path-cpu-ns)" % (n, args.path_cpu_ns),
                  flush=True)
            continue
        if n < 2:
            v.link_cpu[n] = 0.0  # no link
            continue
        if not args.link_cpu or transport is None:
            v.link_cpu[n] = 0.0
            print("path %dh: not measured (%s): stated free" % (
                n, "--no-link-cpu" if not args.link_cpu else "no calibration of the tcp transport"),
                flush=True)
            continue
        fastest = max(args.rates, key=gbit_per_s)
        per_end, figures, egress = v.comm_reference(n, fastest, calibration)
        v.link_cpu[n] = max(0.0, per_end - transport)
        print("path %dh: %.3f CPU ns per byte per end: the comm threads of a %d-host data-parallel "
              "reference run over the %s link spent %.3f per byte per end (runs: %s; %.1f MB sent a "
              "step) less the tcp transport's own %.3f; stated for every rate"
              % (n, v.link_cpu[n], n, fastest, per_end, " ".join("%.3f" % f for f in figures),
                 egress / 1e6, transport), flush=True)


def run(args, hosts, out):
    """Everything between the hosts' start and their teardown; returns the
    exit status."""
    v = Validation(args, hosts, out)
    failed = False
    configs = args.chosen
    print("validate: %d configuration(s), out dir %s, steps %d+%d+%d, %d repeat(s), cores %s, "
          "OPENBLAS_CORETYPE=%s, %s" % (len(configs), out, args.warmup, args.measure, args.warmup,
                                        args.repeats, args.cores, args.openblas_coretype or "unset",
                                        scaling.load()), flush=True)
    if "mlp" in {c.model for c in configs}:
        print("mlp: 784-2048-2048-10, global batch %d, micro-batches %d (pp, dp_pp)"
              % (args.mlp_batch, args.micro_batches))
    if "gpt" in {c.model for c in configs}:
        print("gpt: %d layers, %d heads, %d channels, block %d, global batch %d, micro-batches %d "
              "(pp, tp_pp)" % (args.layers, args.heads, args.channels, args.block, args.gpt_batch,
                               args.micro_batches))
    if max(c.hosts for c in configs) > len(args.cores):
        print("more hosts than cores: machines that share a core say so in their cpu_set")
    for rate in dict.fromkeys(c.rate for c in configs):
        if not measure_network(args, hosts, v, rate):
            return 1
    calibration = args.calibration
    if not args.measure_only and not calibration:
        try:
            calibration = v.profile_transports()
        except (RuntimeError, subprocess.SubprocessError, OSError) as error:
            print("profile FAILED: %s" % error, flush=True)
            return 1
    try:
        measure_paths(args, hosts, v, [c.hosts for c in configs], calibration)
    except (RuntimeError, subprocess.SubprocessError, OSError) as error:
        print("path probe FAILED: %s" % error, flush=True)
        return 1
    ok = []
    for c in configs:
        try:
            v.compile(c, calibration or "")
            ok.append(c)
        except (RuntimeError, subprocess.SubprocessError, OSError) as error:
            print("compile %s FAILED: %s" % (c.name, error), flush=True)
            failed = True
    doc = {"out_dir": out}
    if not args.measure_only and ok:
        try:
            if not args.calibration:
                v.profile_kernels(ok, calibration)
        except (RuntimeError, subprocess.SubprocessError, OSError) as error:
            print("profile FAILED: %s" % error, flush=True)
            return 1
        doc["calibration"] = calibration
        print("calibration: %s" % calibration, flush=True)
        for c in ok:
            try:
                v.predict(c, calibration)
                print("predict %-22s %9.2f ms" % (c.name, c.predicted), flush=True)
            except (RuntimeError, subprocess.SubprocessError, OSError) as error:
                print("predict %s FAILED: %s" % (c.name, error), flush=True)
                failed = True
    recalibrate = args.recalibrate and not args.measure_only and not args.calibration
    for rep in range(args.repeats):
        if rep > 0 and recalibrate and any(c.rounds for c in ok):
            try:
                moved = [c for c in ok if c.rounds]
                path = v.recalibrate(moved, rep)
                shifts = sorted((c.rounds[-1]["step_ms"] / c.rounds[0]["step_ms"] - 1) * 100
                                for c in moved if c.rounds[-1]["rep"] == rep)
                print("recalibrated before rep %d (%s): predictions %+.1f%% in the median against "
                      "the first calibration's (%+.1f%% .. %+.1f%%)"
                      % (rep, path, statistics.median(shifts), shifts[0], shifts[-1]), flush=True)
            except (RuntimeError, subprocess.SubprocessError, OSError, statistics.StatisticsError,
                    IndexError) as error:
                print("recalibration before rep %d FAILED: %s" % (rep, error), flush=True)
                failed = True
        for c in ok if rep % 2 == 0 else ok[::-1]:
            hosts.shape(c.rate)
            try:
                last = v.sample(c, rep)
            except (RuntimeError, subprocess.SubprocessError, OSError) as error:
                print("rep %d %-22s FAILED: %s" % (rep, c.name, error), flush=True)
                failed = True
                continue
            print("rep %d %-22s step %8.2f ms  (%s)" % (rep, c.name, c.samples[-1], last[:50]),
                  flush=True)
        print("after rep %d: %s" % (rep, scaling.load()), flush=True)
    if args.compute_check and not args.measure_only:
        for c in ok:
            if c.predicted is None:
                continue
            hosts.shape(c.rate)
            try:
                v.compute_check(c)
            except (RuntimeError, subprocess.SubprocessError, OSError, ValueError, KeyError) as error:
                print("compute check %s FAILED: %s" % (c.name, error), flush=True)
    doc.update(summarize(args, configs))
    ratio = summarize_compute(configs)
    if ratio is not None:
        doc["compute_measured_over_predicted_median"] = ratio
    attach_kernel_scaled(doc, summarize_kernel_scaled(
        args, configs, doc.get("calibration"), os.path.join(out, "kernel-scaled")))
    ratio = summarize_cpu(args, configs)
    if ratio is not None:
        doc["cpu_measured_over_predicted_median"] = ratio
    if args.thread_cpu:
        summarize_threads(configs)
    doc["latency_us"] = v.latency
    doc["path_cpu_ns_per_byte"] = {str(n): ns for n, ns in v.link_cpu.items()}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
        print("rows: %s" % args.json)
    if not args.measure_only and "calibration" in doc:
        print("rerun a prediction: %s simulate --plan %s/NAME.plan.pb --calibration %s --json"
              % (args.oflite, out, doc["calibration"]))
    print("out dir: %s" % out)
    return 1 if failed else 0


def resummarize(args):
    """--resummarize: the summary of an earlier run's JSON, with this
    version's order verdicts."""
    try:
        with open(args.resummarize) as f:
            doc = json.load(f)
        rows = doc["rows"]
        for row in rows:
            for key in ("model", "layout", "hosts", "rate"):
                if key not in row:
                    raise KeyError("a row without %r" % key)
    except (OSError, ValueError, KeyError, TypeError) as error:
        print("validate: --resummarize %s: not a validate.py --json file (%s)"
              % (args.resummarize, error), file=sys.stderr)
        return 2
    configs = []
    for row in rows:
        c = Config(row["model"], row["layout"], row["hosts"], row["rate"])
        c.samples = list(row.get("samples_ms") or [])
        c.sample_reps = list(row.get("sample_reps") or range(len(c.samples)))
        c.predicted = row.get("predicted_ms")
        c.rounds = [{"rep": r.get("rep", i), "step_ms": r["step_ms"], "compute_ms": [],
                     "cpu_ms": [], "comm_cpu_ms": []}
                    for i, r in enumerate(row.get("round_predictions") or []) if "step_ms" in r]
        c.predicted_first = row.get("predicted_first_ms", c.predicted)
        c.plan = row.get("plan")
        c.kernel_cpu_ms = row.get("kernel_cpu_ms")
        c.predicted_compute_ms = row.get("predicted_compute_ms")
        c.thread_cpu_row = row.get("thread_cpu_ms")
        if c.samples:
            configs.append(c)
    if not configs:
        print("validate: %s has no measured rows" % args.resummarize, file=sys.stderr)
        return 2
    args.repeats = doc.get("repeats", args.repeats)
    summarize(args, configs)
    # The kernel-speed diagnostic, while the sitting's plans and
    # calibration are where it left them (its out dir).
    if doc.get("out_dir") and os.path.isdir(doc["out_dir"]):
        summarize_kernel_scaled(args, configs, doc.get("calibration"),
                                os.path.join(doc["out_dir"], "kernel-scaled"))
    return 0


def main():
    args = parse_args()
    if args.resummarize:
        return resummarize(args)
    if args.list:
        for c in args.chosen:
            print(c.name)
        return 0
    if os.geteuid() != 0:
        print("validate: needs root (ip netns, tc)", file=sys.stderr)
        return 2
    check = subprocess.run([scaling.NETNS, "check"], capture_output=True, text=True)
    if check.returncode != 0:
        print("validate: network namespaces unavailable: " + check.stdout.strip(), file=sys.stderr)
        return 2
    why = tools_missing(args)
    if why:
        print("validate: " + why, file=sys.stderr)
        return 2
    if args.calibration:
        args.calibration = os.path.abspath(args.calibration)
    out = os.path.abspath(args.out_dir) if args.out_dir else tempfile.mkdtemp(prefix="validate.")
    os.makedirs(out, exist_ok=True)
    print("validate: out dir %s" % out, flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        hosts = scaling.Hosts(max(c.hosts for c in args.chosen))
    except (RuntimeError, subprocess.SubprocessError, OSError) as error:
        print("validate: %s" % error, file=sys.stderr)
        return 1
    try:
        return run(args, hosts, out)
    finally:
        hosts.close()


if __name__ == "__main__":
    sys.exit(main())
