#!/usr/bin/python3
"""Data-parallel scaling across hosts: oflite next to PyTorch DDP (Gloo).

Trains the MLP 784-2048-2048-10 (and with --models mlp,cnn the CNN of
write_scaling_job.cc) on 1 host and on N hosts (--hosts, default 2), each
host a network namespace whose link is shaped to every --rates value
(tests/netns), each rank pinned to its own core (--cores, taskset) with one
compute thread (OPENBLAS_NUM_THREADS=1; torch.set_num_threads(1)) and the
same OpenBLAS kernels (OPENBLAS_CORETYPE, --openblas-coretype: unset, Debian's
OpenBLAS falls back to SSE3 kernels on CPUs newer than it knows, which
starved PyTorch's matmuls 3-4x while oflite sets it for itself). The same
global batch, model, cores and links for both frameworks, in the same run;
samples interleaved (repeat r runs every configuration once, frameworks
alternating which goes first); medians over --repeats.

Step time: wall time on rank 0 between the end of step WARMUP and the end of
step WARMUP+MEASURE (oflite's progress lines, the peer's "mark" lines,
timestamped as they arrive), divided by MEASURE; CPU: user+sys of every rank
over that same window (/proc), per step. Scaling efficiency on N hosts:
(1-host time per sample) / (N-host time per sample) / N. All-reduce
(estimates; there is no timeline trace): "comm" = the N-host step of the
same model at one sample per rank (the step is nearly all communication),
per framework; exposed = N-host step - 1-host step / N (the compute of 1/N
of the batch, if compute scales linearly); hidden = comm - exposed, clipped
to [0, comm].

Needs root (ip netns, tc), bazel-built binaries:
  bazel build //tools/oflite:oflite //tools/bench/scaling:write_scaling_job
  sudo tools/bench/scaling/scaling.py --smoke        # quick, figures meaningless
  sudo tools/bench/scaling/scaling.py --repeats 5    # the real figures
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
import threading
import time

# The workspace (or the runfiles tree of a Bazel test) this script sits in.
WORKSPACE = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
NETNS = os.path.join(WORKSPACE, "tests", "netns", "netns.sh")
PROBE = os.path.join(WORKSPACE, "tests", "netns", "link_probe.py")
PEER = os.path.join(WORKSPACE, "tools", "bench", "scaling", "ddp_peer.py")
# Gradient bytes per step (float32 parameters of the model).
PARAMS = {"mlp": 784 * 2048 + 2048 + 2048 * 2048 + 2048 + 2048 * 10 + 10,
          "cnn": 16 * 9 + 16 + 32 * 16 * 9 + 32 + 32 * 7 * 7 * 10 + 10}
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="mlp", help="comma list of mlp, cnn (default mlp)")
    p.add_argument("--hosts", default="2", help="comma list of host counts beside 1 (e.g. 2,4)")
    p.add_argument("--rates", default="1gbit,10gbit", help="link rates of the N-host runs (tc syntax)")
    p.add_argument("--global-batch", type=int, default=128, help="samples per step over all ranks")
    p.add_argument("--repeats", type=int, default=5, help="samples per configuration (median)")
    p.add_argument("--warmup", type=int, default=10, help="steps before (and after) the window")
    p.add_argument("--measure", type=int, default=50, help="steps in the timed window")
    p.add_argument("--cores", default="0,1", help="core of rank 0, 1, ... (taskset -c)")
    p.add_argument("--frameworks", default="oflite,ddp", help="comma list of oflite, ddp")
    p.add_argument("--oflite", default=os.path.join(WORKSPACE, "bazel-bin/tools/oflite/oflite"))
    p.add_argument("--write-job",
                   default=os.path.join(WORKSPACE, "bazel-bin/tools/bench/scaling/write_scaling_job"))
    p.add_argument("--python", default="/usr/bin/python3", help="interpreter with torch")
    p.add_argument("--probe-mb", type=int, default=200, help="MB sent to measure each link rate")
    p.add_argument("--timeout", type=int, default=900, help="bound of one sample, seconds")
    p.add_argument("--openblas-coretype", default="auto",
                   help="OPENBLAS_CORETYPE for both frameworks' ranks (PyTorch's matmuls run on "
                        "Debian's OpenBLAS, which on CPUs newer than it knows falls back to SSE3 "
                        "kernels); auto: SkylakeX with AVX-512, Haswell with AVX2; none: unset")
    p.add_argument("--smoke", action="store_true",
                   help="1 repeat, 2+4+2 steps, 20 MB probes: checks that everything runs")
    args = p.parse_args()
    if args.smoke:
        args.repeats, args.warmup, args.measure, args.probe_mb = 1, 2, 4, 20
    args.models = args.models.split(",")
    args.rates = args.rates.split(",")
    args.frameworks = args.frameworks.split(",")
    args.cores = [int(c) for c in args.cores.split(",")]
    args.hosts = [int(n) for n in args.hosts.split(",")]
    if args.openblas_coretype == "auto":
        args.openblas_coretype = openblas_core_for_cpu()
    elif args.openblas_coretype == "none":
        args.openblas_coretype = ""
    bad = [m for m in args.models if m not in PARAMS] + \
          [f for f in args.frameworks if f not in ("oflite", "ddp")]
    if bad or args.repeats < 1 or args.warmup < 1 or args.measure < 1 or \
            min(args.hosts) < 2 or len(args.cores) < max(args.hosts) or \
            any(args.global_batch % n for n in args.hosts):
        p.error("bad --models/--frameworks (%s), or --repeats/--warmup/--measure < 1, or a"
                " --hosts count < 2, or fewer --cores than hosts, or a --global-batch that"
                " the hosts do not divide" % ",".join(bad))
    return args


class Hosts:
    """N namespace hosts owned by this process (torn down by close(); a
    kill -9 of this process leaves them to the next harness run's reap)."""

    def __init__(self, count):
        self.count = count
        out = subprocess.run([NETNS, "up", "--hosts", str(count), "--owner", str(os.getpid())],
                             capture_output=True, text=True, timeout=60)
        if out.returncode != 0:
            raise RuntimeError("netns.sh up failed: " + out.stderr.strip())
        self.id, self.ns, self.addr = None, [], []
        for line in out.stdout.splitlines():
            words = line.split()
            if words[0] == "id":
                self.id = words[1]
            elif words[0] == "host":
                self.ns.append(words[2])
                self.addr.append(words[3])
        self.rate = "none"

    def shape(self, rate):
        if rate != self.rate:
            subprocess.run([NETNS, "shape", "--id", self.id, "--hosts", str(self.count), "--rate", rate],
                           check=True, timeout=60)
            self.rate = rate

    def close(self):
        if self.id:
            subprocess.run([NETNS, "down", "--id", self.id], timeout=120)
            self.id = None


def write_cluster(path, addresses, machine_fields=None):
    """Writes the cluster file (text ClusterProto) of one machine of one CPU
    device per address; `machine_fields(m)`, when given, returns more fields
    of machine m as text (the simulator's nic and cpu_set:
    tools/bench/simulate/validate.py)."""
    with open(path, "w") as f:
        for m, address in enumerate(addresses):
            more = machine_fields(m) if machine_fields else ""
            f.write('machine { id: %d address: "%s" cpu_devices: 1%s }\n' % (
                m, address, " " + more if more else ""))


def stat_cpu(path):
    """(name, CPU seconds: utime + stime) of a /proc .../stat file (a
    process's or one of its threads'); None when it cannot be read."""
    try:
        with open(path) as f:
            stat = f.read()
        fields = stat.rsplit(")", 1)[1].split()
        return stat[stat.index("(") + 1:stat.rindex(")")], \
            (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    except (OSError, IndexError, ValueError):
        return None


def cpu_seconds(pid):
    got = stat_cpu("/proc/%d/stat" % pid)
    return got[1] if got else None


def run_ranks(commands, start_marker, end_marker, timeout, log_prefix, watcher=None):
    """Starts one process per command (rank 0 first), timestamps rank 0's
    lines matching the markers and samples every rank's CPU at those
    moments. Returns (wall seconds, CPU seconds of all ranks, last line of
    rank 0). Raises RuntimeError naming the rank on failure or timeout.
    `watcher` (may be None): its start(procs, marks) is called once every
    rank is started (marks: name -> (time, CPUs), filled as they arrive),
    its stop() before this returns or raises."""
    logs = [open("%s.r%d.log" % (log_prefix, r), "w+") for r in range(len(commands))]
    procs = []
    marks = {}
    try:
        procs.append(subprocess.Popen(commands[0], stdout=subprocess.PIPE, stderr=logs[0], text=True))
        for r in range(1, len(commands)):
            procs.append(subprocess.Popen(commands[r], stdout=logs[r], stderr=logs[r]))
        lines = []

        def read():
            for line in procs[0].stdout:
                now = time.monotonic()
                for name, marker in (("start", start_marker), ("end", end_marker)):
                    if line.startswith(marker) and name not in marks:
                        marks[name] = (now, [cpu_seconds(p.pid) for p in procs])
                lines.append(line)
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        if watcher:
            watcher.start(procs, marks)
        deadline = time.monotonic() + timeout
        for r, proc in enumerate(procs):
            rc = proc.wait(timeout=max(1, deadline - time.monotonic()))
            if rc != 0:
                logs[r].seek(0)
                tail = (logs[r].read() or "".join(lines[-5:])).strip().splitlines()[-3:]
                raise RuntimeError("rank %d exited %d: %s" % (r, rc, " | ".join(tail)))
        reader.join(timeout=10)
    except subprocess.TimeoutExpired:
        raise RuntimeError("a rank ran past --timeout %d s" % timeout)
    finally:
        if watcher:
            watcher.stop()
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for log in logs:
            log.close()
    if "start" not in marks or "end" not in marks:
        raise RuntimeError("rank 0 printed no '%s' / '%s' line" % (start_marker, end_marker))
    wall = marks["end"][0] - marks["start"][0]
    cpu = sum(e - s for s, e in zip(marks["start"][1], marks["end"][1])
              if s is not None and e is not None)
    return wall, cpu, lines[-1].strip() if lines else ""


class Bench:
    def __init__(self, args, hosts, tmp):
        self.args, self.hosts, self.tmp = args, hosts, tmp
        self.port = 29500
        self.token = "scaling-%d" % os.getpid()
        self.watcher = None  # passed to run_ranks

    def prefix(self, rank):
        env = ["OPENBLAS_NUM_THREADS=1", "OMP_NUM_THREADS=1"]
        if self.args.openblas_coretype:  # the same kernels for both frameworks
            env.append("OPENBLAS_CORETYPE=" + self.args.openblas_coretype)
        return ["ip", "netns", "exec", self.hosts.ns[rank], "taskset", "-c",
                str(self.args.cores[rank]), "env"] + env

    def plan(self, model, nhosts, batch):
        a = self.args
        path = os.path.join(self.tmp, "%s.%d.%d" % (model, nhosts, batch))
        iterations = 2 * a.warmup + a.measure
        subprocess.run([a.write_job, path + ".job.pb", "--model", model, "--batch", str(batch),
                        "--machines", str(nhosts), "--iterations", str(iterations)], check=True)
        write_cluster(path + ".cluster", self.hosts.addr[:nhosts])
        subprocess.run([a.oflite, "compile", "--job", path + ".job.pb", "--cluster", path + ".cluster",
                        "-o", path + ".plan.pb", "--quiet"], check=True)
        return path + ".plan.pb"

    def oflite(self, model, nhosts, batch):
        a = self.args
        self.port += 1
        plan = os.path.join(self.tmp, "%s.%d.%d.plan.pb" % (model, nhosts, batch))
        total = 2 * a.warmup + a.measure
        commands = []
        for r in range(nhosts):
            commands.append(self.prefix(r) + [
                "OFLITE_HOST=" + self.hosts.addr[r], "OFLITE_JOB_TOKEN=" + self.token, a.oflite, "run",
                "--plan", plan, "--rank", str(r), "--master", "%s:%d" % (self.hosts.addr[0], self.port),
                "--comm", "tcp", "--log-every", str(math.gcd(a.warmup, a.measure)), "--eval=false"])
        return run_ranks(commands, "iter %d/%d" % (a.warmup, total),
                         "iter %d/%d" % (a.warmup + a.measure, total), a.timeout,
                         os.path.join(self.tmp, "oflite"), self.watcher)

    def ddp(self, model, nhosts, batch):
        a = self.args
        self.port += 1
        commands = [self.prefix(r) + [
            a.python, PEER, "--model", model, "--global-batch", str(batch), "--world", str(nhosts),
            "--rank", str(r), "--master", "%s:%d" % (self.hosts.addr[0], self.port),
            "--warmup", str(a.warmup), "--measure", str(a.measure)] for r in range(nhosts)]
        return run_ranks(commands, "mark start", "mark end", a.timeout, os.path.join(self.tmp, "ddp"),
                         self.watcher)


def measure_link(hosts, rate, megabytes):
    hosts.shape(rate)
    server = subprocess.Popen(["ip", "netns", "exec", hosts.ns[0], sys.executable, PROBE, "serve", "5001",
                               "--timeout", "60"], stdout=subprocess.PIPE, text=True)
    subprocess.run(["ip", "netns", "exec", hosts.ns[1], sys.executable, PROBE, "send", hosts.addr[0], "5001",
                    str(megabytes * 1000000), "--timeout", "60"], capture_output=True, timeout=120)
    out = server.communicate(timeout=120)[0].split()
    return float(out[6]) if server.returncode == 0 and len(out) > 6 else float("nan")


def load():
    return "load average %.2f %.2f %.2f" % os.getloadavg()


def report(args, results):
    """Prints the table of medians; `results` maps (model, hosts, link,
    framework, kind) to [(step seconds, CPU seconds per step)]."""
    print("\n%-5s %-5s %-7s %-7s %9s %9s %9s %6s %8s %8s %8s" % (
        "model", "hosts", "link", "fw", "step ms", "samples/s", "CPU ms", "eff", "comm", "exposed",
        "hidden"))
    median = lambda key, i: statistics.median(s[i] for s in results[key]) if results.get(key) else None
    for model in args.models:
        for fw in args.frameworks:
            t1 = median((model, 1, "-", fw, "train"), 0)
            for nhosts, link in [(1, "-")] + [(n, r) for n in args.hosts for r in args.rates]:
                step = median((model, nhosts, link, fw, "train"), 0)
                if step is None:
                    print("%-5s %-5d %-7s %-7s %9s" % (model, nhosts, link, fw, "failed"))
                    continue
                cpu = median((model, nhosts, link, fw, "train"), 1)
                comm = median((model, nhosts, link, fw, "comm"), 0)
                eff = comm_text = exposed = hidden = "-"
                if nhosts > 1 and t1:
                    eff = "%.2f" % (t1 / (nhosts * step))
                    exp_s = max(0.0, step - t1 / nhosts)
                    exposed = "%.1f" % (exp_s * 1e3)
                    if comm is not None:
                        comm_text = "%.1f" % (comm * 1e3)
                        hidden = "%.1f" % (min(comm, max(0.0, comm - exp_s)) * 1e3)
                print("%-5s %-5d %-7s %-7s %9.2f %9.0f %9.2f %6s %8s %8s %8s" % (
                    model, nhosts, link, fw, step * 1e3, args.global_batch / step, cpu * 1e3, eff,
                    comm_text, exposed, hidden))
    print("medians of %d; step ms: wall per step; CPU ms: user+sys of all ranks per step; eff:"
          " scaling efficiency; comm: the step at one sample per rank; exposed = N-host step -"
          " 1-host step / N; hidden = comm - exposed (all in ms, estimates: see --help)"
          % args.repeats)


def run_samples(args, bench, hosts):
    """Every configuration once per repeat, frameworks alternating first."""
    configs = []
    for model in args.models:
        configs.append((model, 1, "-", args.global_batch, "train"))
        bench.plan(model, 1, args.global_batch)
        for nhosts in args.hosts:
            bench.plan(model, nhosts, args.global_batch)
            bench.plan(model, nhosts, nhosts)
            for rate in args.rates:
                configs.append((model, nhosts, rate, args.global_batch, "train"))
                configs.append((model, nhosts, rate, nhosts, "comm"))
    results, failed = {}, False
    for rep in range(args.repeats):
        order = args.frameworks if rep % 2 == 0 else args.frameworks[::-1]
        for model, nhosts, rate, batch, kind in configs:
            if nhosts > 1:
                hosts.shape(rate)
            for fw in order:
                what = "rep %d %-4s %s %d host(s) link %-6s %-6s" % (rep, model, kind, nhosts, rate, fw)
                try:
                    wall, cpu, last = getattr(bench, fw)(model, nhosts, batch)
                except (RuntimeError, subprocess.SubprocessError, OSError) as error:
                    print("%s FAILED: %s" % (what, error), flush=True)
                    failed = True
                    continue
                step, cpu_step = wall / args.measure, cpu / args.measure
                results.setdefault((model, nhosts, rate, fw, kind), []).append((step, cpu_step))
                print("%s step %8.2f ms  CPU %8.2f ms  (%s)" % (what, step * 1e3, cpu_step * 1e3,
                                                             last[:50]), flush=True)
        print("after rep %d: %s" % (rep, load()), flush=True)
    return results, failed


def openblas_core_for_cpu():
    """The widest OpenBLAS kernel family this CPU runs ("" when unknown): the
    rule of PreferredOpenBlasCore (oneflow_lite/kernels/cpu/cpu_threads.cc),
    which the oflite ranks apply to themselves when they re-exec."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f
                          if line.startswith("flags")), [])
    except OSError:
        return ""
    if all(f in flags for f in ("avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl")):
        return "SkylakeX"
    return "Haswell" if "avx2" in flags and "fma" in flags else ""


def main():
    args = parse_args()
    if os.geteuid() != 0:
        print("scaling: needs root (ip netns, tc)", file=sys.stderr)
        return 2
    check = subprocess.run([NETNS, "check"], capture_output=True, text=True)
    if check.returncode != 0:
        print("scaling: network namespaces unavailable: " + check.stdout.strip(), file=sys.stderr)
        return 2
    for path in (args.oflite, args.write_job):
        if not os.access(path, os.X_OK):
            print("scaling: %s not built (bazel build //tools/oflite:oflite "
                  "//tools/bench/scaling:write_scaling_job)" % path, file=sys.stderr)
            return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    hosts = Hosts(max(args.hosts))
    try:
        with tempfile.TemporaryDirectory(prefix="scaling.") as tmp:
            print("scaling: global batch %d, steps %d+%d+%d, cores %s, OPENBLAS_CORETYPE=%s "
                  "(both), %s" % (args.global_batch, args.warmup, args.measure, args.warmup,
                                  args.cores, args.openblas_coretype or "unset", load()))
            for rate in args.rates:
                print("link %s: measured %.0f Mbit/s (one TCP stream, host 1 -> host 0)" % (
                    rate, measure_link(hosts, rate, args.probe_mb)))
            results, failed = run_samples(args, Bench(args, hosts, tmp), hosts)
            report(args, results)
            print(load())
    finally:
        hosts.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
