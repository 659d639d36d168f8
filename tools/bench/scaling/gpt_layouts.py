#!/usr/bin/python3
"""The GPT of examples/gpt_char in every parallel layout over network-namespace
hosts, next to PyTorch DDP (Gloo) in the same run.

Layouts (--layouts; each on every --hosts count it fits):
  dp      data parallel over the hosts (the batch split S(0), gradients all-reduced)
  zero    dp with the optimizer states and parameters sharded (--shard-optimizer)
  tp      Megatron tensor parallel over the hosts (--tp N)
  pp      one pipeline stage per host, 1F1B over --micro-batches
  dp_tp   2-D: data parallel across host pairs x tensor parallel inside (4 hosts)
  dp_pp   data parallel x 2 pipeline stages (4 hosts)
  tp_pp   tensor parallel x 2 pipeline stages (4 hosts)
and `1host`, the same model on one host (the scaling baseline).

Each host is a network namespace (tests/netns) whose link is shaped to every
--rates value; rank r runs pinned to core --cores[r mod len] with one compute
thread (OPENBLAS_NUM_THREADS=1, torch threads 1) and the same OpenBLAS
kernels for both frameworks. With more hosts than cores, two ranks share a
core on both sides alike; the table says so. Samples interleaved (repeat r
runs every configuration once, frameworks alternating which goes first);
medians over --repeats. Step time: wall time on rank 0 between the end of
step WARMUP and the end of step WARMUP+MEASURE, divided by MEASURE (oflite's
progress lines, the peer's mark lines); CPU: user+sys of all ranks over that
window per step.

Needs root (ip netns, tc) and the binaries:
  bazel build //tools/oflite:oflite //examples:gpt_char
  sudo tools/bench/scaling/gpt_layouts.py --smoke       # quick, figures meaningless
  sudo tools/bench/scaling/gpt_layouts.py --repeats 5   # the real figures
Exit: 0 ok, 1 a run failed, 2 bad arguments or namespaces unavailable.
"""
import argparse
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scaling  # noqa: E402  (Hosts, run_ranks, measure_link, load)

WORKSPACE = scaling.WORKSPACE
PEER = os.path.join(WORKSPACE, "tools", "bench", "scaling", "gpt_ddp_peer.py")

# name -> (host counts it runs on, gpt_char flags for N hosts)
LAYOUTS = {
    "dp": (lambda n: n >= 2, lambda n, a: []),
    "zero": (lambda n: n >= 2, lambda n, a: ["--shard-optimizer"]),
    "tp": (lambda n: n >= 2, lambda n, a: ["--tp", str(n)]),
    "pp": (lambda n: n >= 2, lambda n, a: ["--stages", str(n), "--micro-batches",
                                           str(a.micro_batches), "--pipeline-schedule", "1f1b"]),
    "dp_tp": (lambda n: n == 4, lambda n, a: ["--dp", "2", "--tp", "2"]),
    "dp_pp": (lambda n: n == 4, lambda n, a: ["--stages", "2", "--micro-batches",
                                              str(a.micro_batches), "--pipeline-schedule", "1f1b"]),
    "tp_pp": (lambda n: n == 4, lambda n, a: ["--tp", "2", "--stages", "2", "--micro-batches",
                                              str(a.micro_batches), "--pipeline-schedule", "1f1b"]),
}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--layouts", default="dp,zero,tp,pp,dp_tp,dp_pp,tp_pp")
    p.add_argument("--hosts", default="2,4", help="comma list of host counts")
    p.add_argument("--rates", default="1gbit,10gbit", help="link rates (tc syntax)")
    p.add_argument("--global-batch", type=int, default=32, help="sequences per step over all ranks")
    p.add_argument("--micro-batches", type=int, default=4, help="of the pipelined layouts")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--channels", type=int, default=128)
    p.add_argument("--block", type=int, default=64)
    p.add_argument("--repeats", type=int, default=5, help="samples per configuration (median)")
    p.add_argument("--warmup", type=int, default=5, help="steps before (and after) the window")
    p.add_argument("--measure", type=int, default=20, help="steps in the timed window")
    p.add_argument("--cores", default="0,1", help="cores; rank r runs on cores[r mod len]")
    p.add_argument("--frameworks", default="oflite,ddp", help="comma list of oflite, ddp")
    p.add_argument("--oflite", default=os.path.join(WORKSPACE, "bazel-bin/tools/oflite/oflite"))
    p.add_argument("--gpt-char", default=os.path.join(WORKSPACE, "bazel-bin/examples/gpt_char"))
    p.add_argument("--python", default="/usr/bin/python3", help="interpreter with torch")
    p.add_argument("--probe-mb", type=int, default=100, help="MB sent to measure each link rate")
    p.add_argument("--timeout", type=int, default=900, help="bound of one sample, seconds")
    p.add_argument("--openblas-coretype", default="auto",
                   help="OPENBLAS_CORETYPE for both frameworks' ranks (see scaling.py --help)")
    p.add_argument("--smoke", action="store_true", help="1 repeat, 2+3+2 steps: checks that everything runs")
    args = p.parse_args()
    if args.smoke:
        args.repeats, args.warmup, args.measure, args.probe_mb = 1, 2, 3, 20
    args.layouts = args.layouts.split(",")
    args.rates = args.rates.split(",")
    args.frameworks = args.frameworks.split(",")
    args.cores = [int(c) for c in args.cores.split(",")]
    args.hosts = [int(n) for n in args.hosts.split(",")]
    if args.openblas_coretype == "auto":
        args.openblas_coretype = scaling.openblas_core_for_cpu()
    elif args.openblas_coretype == "none":
        args.openblas_coretype = ""
    bad = [x for x in args.layouts if x not in LAYOUTS] + \
          [f for f in args.frameworks if f not in ("oflite", "ddp")]
    if bad or args.repeats < 1 or args.warmup < 1 or args.measure < 1 or min(args.hosts) < 2 or \
            any(args.global_batch % n for n in args.hosts):
        p.error("bad --layouts/--frameworks (%s), or --repeats/--warmup/--measure < 1, or a --hosts"
                " count < 2, or a --global-batch the hosts do not divide" % ",".join(bad))
    return args


class Bench:
    def __init__(self, args, hosts, tmp):
        self.args, self.hosts, self.tmp = args, hosts, tmp
        self.port = 29600
        self.token = "gpt-layouts-%d" % os.getpid()
        self.plans = {}

    def prefix(self, rank):
        env = ["OPENBLAS_NUM_THREADS=1", "OMP_NUM_THREADS=1"]
        if self.args.openblas_coretype:
            env.append("OPENBLAS_CORETYPE=" + self.args.openblas_coretype)
        core = self.args.cores[rank % len(self.args.cores)]
        return ["ip", "netns", "exec", self.hosts.ns[rank], "taskset", "-c", str(core), "env"] + env

    def model_flags(self):
        a = self.args
        return ["--layers", str(a.layers), "--heads", str(a.heads), "--channels", str(a.channels),
                "--block", str(a.block), "--batch", str(a.global_batch),
                "--iters", str(2 * a.warmup + a.measure), "--warmup", "0"]

    def job(self, layout, nhosts, out):
        """Writes the layout's Job for `nhosts` machines into folder `out`
        (gpt_char --compile-only); returns its path."""
        a = self.args
        os.makedirs(out, exist_ok=True)
        flags = [] if layout == "1host" else LAYOUTS[layout][1](nhosts, a)
        machines = 1 if layout == "1host" else nhosts
        cmd = [a.gpt_char, "--compile-only", "--out-dir", out, "--data-dir",
               os.path.join(self.tmp, "data"), "--machines", str(machines)] + self.model_flags() + flags
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeError("gpt_char %s: %s" % (" ".join(flags), done.stderr.strip()[-300:]))
        return os.path.join(out, "gpt_char.job.pb")

    def plan(self, layout, nhosts):
        """Compiles the layout's plan for the namespace hosts; returns its path."""
        a = self.args
        key = (layout, nhosts)
        if key in self.plans:
            return self.plans[key]
        out = os.path.join(self.tmp, "%s.%d" % (layout, nhosts))
        job = self.job(layout, nhosts, out)
        machines = 1 if layout == "1host" else nhosts
        cluster = os.path.join(out, "cluster.pbtxt")
        scaling.write_cluster(cluster, self.hosts.addr[:machines])
        plan = os.path.join(out, "ns.plan.pb")
        subprocess.run([a.oflite, "compile", "--job", job, "--cluster", cluster, "-o", plan, "--quiet"],
                       check=True, timeout=300)
        self.plans[key] = plan
        return plan

    def oflite(self, layout, nhosts):
        return self.run_plan(self.plan(layout, nhosts), 1 if layout == "1host" else nhosts)

    def run_plan(self, plan, machines, log_prefix=None, watcher=None, warmup=None, measure=None,
                 extra=None):
        """One sample of `plan` over its `machines` namespace hosts: the
        (wall, CPU, last line) of scaling.run_ranks (`watcher`: its); the
        ranks' logs go to LOG_PREFIX.rR.log (default TMP/oflite). The window
        is steps `warmup` .. `warmup` + `measure` (default --warmup and
        --measure) of a plan of 2 warmup + measure steps. `extra`: more
        `oflite run` flags for every rank (a trace's)."""
        a = self.args
        self.port += 1
        warmup = a.warmup if warmup is None else warmup
        measure = a.measure if measure is None else measure
        total = 2 * warmup + measure
        commands = []
        for r in range(machines):
            commands.append(self.prefix(r) + [
                "OFLITE_HOST=" + self.hosts.addr[r], "OFLITE_JOB_TOKEN=" + self.token, a.oflite, "run",
                "--plan", plan, "--rank", str(r), "--master", "%s:%d" % (self.hosts.addr[0], self.port),
                "--comm", "tcp", "--log-every", str(math.gcd(warmup, measure)), "--eval=false"] +
                (extra or []))
        return scaling.run_ranks(commands, "iter %d/%d" % (warmup, total),
                                 "iter %d/%d" % (warmup + measure, total), a.timeout,
                                 log_prefix or os.path.join(self.tmp, "oflite"), watcher)

    def ddp(self, layout, nhosts):
        a = self.args
        self.port += 1
        world = 1 if layout == "1host" else nhosts
        commands = [self.prefix(r) + [
            a.python, PEER, "--layers", str(a.layers), "--heads", str(a.heads),
            "--channels", str(a.channels), "--block", str(a.block),
            "--global-batch", str(a.global_batch), "--world", str(world), "--rank", str(r),
            "--master", "%s:%d" % (self.hosts.addr[0], self.port),
            "--warmup", str(a.warmup), "--measure", str(a.measure)] for r in range(world)]
        return scaling.run_ranks(commands, "mark start", "mark end", a.timeout,
                                 os.path.join(self.tmp, "ddp"))


def configs(args):
    """(layout, hosts, rate, framework) in run order; DDP is the peer of
    every host count and rate (its one layout: data parallel)."""
    out = [("1host", 1, "-", fw) for fw in args.frameworks]
    for nhosts in args.hosts:
        for rate in args.rates:
            if "ddp" in args.frameworks:
                out.append(("ddp", nhosts, rate, "ddp"))
            if "oflite" in args.frameworks:
                for layout in args.layouts:
                    if LAYOUTS[layout][0](nhosts):
                        out.append((layout, nhosts, rate, "oflite"))
    return out


def main():
    args = parse_args()
    if os.geteuid() != 0:
        print("gpt_layouts: needs root (ip netns, tc)", file=sys.stderr)
        return 2
    check = subprocess.run([scaling.NETNS, "check"], capture_output=True, text=True)
    if check.returncode != 0:
        print("gpt_layouts: network namespaces unavailable: " + check.stdout.strip(), file=sys.stderr)
        return 2
    for path in (args.oflite, args.gpt_char):
        if not os.access(path, os.X_OK):
            print("gpt_layouts: %s not built (bazel build //tools/oflite:oflite //examples:gpt_char)"
                  % path, file=sys.stderr)
            return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    hosts = scaling.Hosts(max(args.hosts))
    failed = False
    results = {}
    try:
        with tempfile.TemporaryDirectory(prefix="gpt_layouts.") as tmp:
            bench = Bench(args, hosts, tmp)
            print("gpt_layouts: GPT %d layers, %d heads, %d channels, block %d, global batch %d, "
                  "micro-batches %d, steps %d+%d+%d, cores %s, OPENBLAS_CORETYPE=%s, %s" % (
                      args.layers, args.heads, args.channels, args.block, args.global_batch,
                      args.micro_batches, args.warmup, args.measure, args.warmup, args.cores,
                      args.openblas_coretype or "unset", scaling.load()))
            for rate in args.rates:
                print("link %s: measured %.0f Mbit/s (one TCP stream, host 1 -> host 0)" % (
                    rate, scaling.measure_link(hosts, rate, args.probe_mb)), flush=True)
            plan = configs(args)
            for layout, nhosts, rate, fw in plan:  # compile first: a bad layout fails early
                if fw == "oflite":
                    try:
                        bench.plan(layout, nhosts)
                    except (RuntimeError, subprocess.SubprocessError, OSError) as error:
                        print("compile %s on %d hosts FAILED: %s" % (layout, nhosts, error), flush=True)
                        failed = True
            for rep in range(args.repeats):
                order = plan if rep % 2 == 0 else plan[::-1]
                for layout, nhosts, rate, fw in order:
                    if nhosts > 1:
                        hosts.shape(rate)
                    what = "rep %d %-6s %d host(s) link %-6s %-6s" % (rep, layout, nhosts, rate, fw)
                    try:
                        wall, cpu, last = getattr(bench, fw)(layout, nhosts)
                    except (RuntimeError, subprocess.SubprocessError, OSError) as error:
                        print("%s FAILED: %s" % (what, error), flush=True)
                        failed = True
                        continue
                    step, cpu_step = wall / args.measure, cpu / args.measure
                    results.setdefault((layout, nhosts, rate, fw), []).append((step, cpu_step))
                    print("%s step %8.2f ms  CPU %8.2f ms  (%s)" % (what, step * 1e3, cpu_step * 1e3,
                                                                 last[:50]), flush=True)
                print("after rep %d: %s" % (rep, scaling.load()), flush=True)
            report(args, results)
    finally:
        hosts.close()
    print(scaling.load())
    return 1 if failed else 0


def report(args, results):
    med = lambda key, i: statistics.median(s[i] for s in results[key]) if results.get(key) else None
    t1 = med(("1host", 1, "-", "oflite"), 0)
    d1 = med(("1host", 1, "-", "ddp"), 0)
    print("\n%-6s %-5s %-7s %-7s %9s %9s %6s %10s" % ("layout", "hosts", "link", "fw", "step ms",
                                                      "CPU ms", "eff", "vs DDP"))
    if t1:
        print("%-6s %-5d %-7s %-7s %9.2f %9.2f %6s %10s" % ("1host", 1, "-", "oflite", t1 * 1e3,
              med(("1host", 1, "-", "oflite"), 1) * 1e3, "-", "%.2fx" % (d1 / t1) if d1 else "-"))
    if d1:
        print("%-6s %-5d %-7s %-7s %9.2f %9.2f %6s %10s" % ("1host", 1, "-", "torch", d1 * 1e3,
              med(("1host", 1, "-", "ddp"), 1) * 1e3, "-", "-"))
    for nhosts in args.hosts:
        for rate in args.rates:
            ddp = med(("ddp", nhosts, rate, "ddp"), 0)
            rows = [("ddp", "ddp")] + [(x, "oflite") for x in args.layouts]
            for layout, fw in rows:
                step = med((layout, nhosts, rate, fw), 0)
                if step is None:
                    continue
                base = d1 if fw == "ddp" else t1
                eff = "%.2f" % (base / (nhosts * step)) if base else "-"
                vs = "%.2fx" % (ddp / step) if ddp and fw == "oflite" else "-"
                print("%-6s %-5d %-7s %-7s %9.2f %9.2f %6s %10s" % (
                    layout, nhosts, rate, fw, step * 1e3, med((layout, nhosts, rate, fw), 1) * 1e3,
                    eff, vs))
    shared = max(args.hosts) > len(args.cores)
    print("medians of %d; step ms: wall per step on rank 0; CPU ms: user+sys of all ranks per step;"
          " eff: 1-host step / (hosts x step); vs DDP: DDP's step / this step (same hosts and link)%s"
          % (args.repeats, "; with more hosts than cores, ranks share cores (both frameworks alike)"
             if shared else ""))


if __name__ == "__main__":
    sys.exit(main())
