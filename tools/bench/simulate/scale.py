#!/usr/bin/python3
"""Scaling by simulation: the step time `oflite simulate` PREDICTS for the
MLP 784-2048-2048-10 (tools/bench/scaling/scaling.py) and the GPT of
tools/bench/scaling/gpt_layouts.py, trained data parallel on 1 to 64 nodes
over three networks. Nothing here runs a training step: every figure is a
prediction of the cost model (docs/simulate.md) from one calibration of
this host.

Weak scaling: every node keeps the same batch (--mlp-batch samples,
--gpt-batch sequences), one CPU device and --threads compute threads, so
its kernels have the shapes they have on one node and only the gradient
all-reduce grows with the node count. Scaling efficiency on N nodes is
T(1) / T(N) (step times); throughput is N x batch / T(N).

Networks (--networks):
  eth10    10 Gbit/s Ethernet, 25 us one-way latency, transport tcp
  rdma100  100 Gbit/s RDMA,     2 us, transport ibverbs
  rdma200  200 Gbit/s RDMA,     2 us, transport ibverbs
A calibration taken here has no ibverbs transport (this host has no RDMA
device): for those rows the simulator adds only the link's latency and rate,
no transport software cost. The output says so.

For each model, node count N and network:
  1. the job for N machines (write_scaling_job; gpt_char --compile-only as
     gpt_layouts.py writes it), global batch N x the per-node batch,
  2. a cluster file of N machines, each `cpu_devices: 1 cpu_threads: T
     nic { gbit_per_s latency_us }`, and `oflite compile`,
  3. `oflite simulate --json --transport tcp|ibverbs` with ONE calibration:
     --calibration, or one `oflite profile --threads T --transports tcp`
     over the 1-node and 2-node plans (the kernel shapes of every N).
With --auto also `oflite compile --auto-parallel` of each N-node job (N >= 2,
up to --auto-max-nodes, default 8: the search compiles and simulates up to
64 layouts, ~3 minutes for the GPT on 16 nodes, over ten on 64) and the chosen layout's
simulated step time beside data parallel's. The search adds the kernels of
its layouts to a copy of the calibration (OUT/calibration.auto.pbtxt); the
data-parallel rows use the calibration unchanged. Those kernels are timed
during the search, minutes after the profile: on a busy host the auto/dp
ratio mixes figures taken under different loads.

Printed: a table headed PREDICTED (model, network, nodes, step ms,
samples/s, efficiency, communication and exposed communication ms per
step: the busiest machine's time with a transfer in flight, and of it the
time no compute hides; T(N) - T(1)), the simulator's notes once each, and
the time the run took. A calibration's collective curves cover the rank
counts measured on this box (oflite profile --ranks, default up to 4); the
simulator stretches them to more ranks, and the output says where that
rules the tcp rows. Written to --out-dir (default a new temp dir, kept): jobs,
cluster files, plans, the calibration, each OUT/NAME.simulate.json, the
rows (--json) and the plot (--png, default OUT/scale.png: efficiency over
nodes, log2 axis, one line per model x network).

  bazel build //tools/oflite:oflite //examples:gpt_char //tools/bench/scaling:write_scaling_job
  tools/bench/simulate/scale.py --smoke      # 1, 2, 4 nodes, tiny GPT: checks that it runs
  tools/bench/simulate/scale.py              # the full grid: about a minute on 2 cores
  tools/bench/simulate/scale.py --auto       # and the searches up to 8 nodes: about 8 more
Needs /usr/bin/python3 with matplotlib; no root, no network.
Exit: 0 ok, 1 a step failed (named; the others still run), 2 bad arguments,
binaries or matplotlib missing.
"""
import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ left in the source tree
sys.path.insert(0, os.path.join(HERE, "..", "scaling"))
import scaling  # noqa: E402  (WORKSPACE, write_cluster, openblas_core_for_cpu)
import gpt_layouts  # noqa: E402  (Bench.job: the GPT's job as the benchmarks write it)

WORKSPACE = scaling.WORKSPACE
# name -> (label, Gbit/s, one-way latency us, transport)
NETWORKS = {
    "eth10": ("10GbE", 10.0, 25.0, "tcp"),
    "rdma100": ("100G RDMA", 100.0, 2.0, "ibverbs"),
    "rdma200": ("200G RDMA", 200.0, 2.0, "ibverbs"),
}
MODELS = ("mlp", "gpt")


class Step(Exception):
    """A named step (compile, profile, simulate ...) that failed."""


class Row:
    def __init__(self, model, network, nodes):
        self.model, self.network, self.nodes = model, network, nodes
        self.name = "%s-%s-%dn" % (model, network, nodes)
        self.plan = None
        self.sim = None        # simulate's JSON (dict)
        # With --auto: {"layout", "search_ms" (the search's own figure),
        # "ms" (oflite simulate of the written plan; None when that failed)}.
        self.auto = None

    def step_ms(self):
        return self.sim["step_time_ms"] if self.sim else None

    def comm_ms(self, field):
        """The busiest machine's figure (they are alike under data parallel)."""
        return max((m[field] for m in self.sim.get("machines", [])), default=0.0)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="mlp,gpt", help="comma list of mlp, gpt")
    p.add_argument("--networks", default="eth10,rdma100,rdma200",
                   help="comma list of " + ", ".join(NETWORKS))
    p.add_argument("--nodes", default="1,2,4,8,16,32,64",
                   help="comma list of node counts; must hold 1 (the baseline)")
    p.add_argument("--mlp-batch", type=int, default=64, help="the MLP's samples per node")
    p.add_argument("--gpt-batch", type=int, default=16, help="the GPT's sequences per node")
    p.add_argument("--threads", type=int, default=1,
                   help="compute threads of each node's CPU device (cluster cpu_threads, and "
                        "oflite profile --threads)")
    p.add_argument("--layers", type=int, default=4, help="the GPT's blocks (gpt_layouts.py's default)")
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--channels", type=int, default=128)
    p.add_argument("--block", type=int, default=64)
    p.add_argument("--iterations", type=int, default=24, help="iterations each simulation runs")
    p.add_argument("--calibration", default="",
                   help="use this calibration instead of profiling one (its kernels should have "
                        "--threads threads)")
    p.add_argument("--profile-args", default="",
                   help="more flags for oflite profile (one string, shell words)")
    p.add_argument("--auto", action="store_true",
                   help="also compile every N-node job (N >= 2) with --auto-parallel and report the "
                        "chosen layout's predicted step time beside data parallel's")
    p.add_argument("--auto-max-nodes", type=int, default=8,
                   help="with --auto: node counts above this are not searched (on this 2-core "
                        "host the GPT's search takes ~3 min on 16 nodes and over 10 min on 64, "
                        "per network)")
    p.add_argument("--out-dir", default="",
                   help="jobs, plans, calibration, predictions (default: a new temp dir, kept)")
    p.add_argument("--png", default="", help="the plot (default OUT/scale.png)")
    p.add_argument("--json", default="", help="also write every row to this file")
    p.add_argument("--smoke", action="store_true",
                   help="nodes 1,2,4 and a tiny GPT (2 blocks, 32 channels, context 16): checks "
                        "that everything runs; figures meaningless")
    p.add_argument("--oflite", default=os.path.join(WORKSPACE, "bazel-bin/tools/oflite/oflite"))
    p.add_argument("--gpt-char", default=os.path.join(WORKSPACE, "bazel-bin/examples/gpt_char"))
    p.add_argument("--write-job",
                   default=os.path.join(WORKSPACE, "bazel-bin/tools/bench/scaling/write_scaling_job"))
    p.add_argument("--timeout", type=int, default=600,
                   help="bound of one job write, compile or simulate, seconds")
    p.add_argument("--profile-timeout", type=int, default=1800, help="bound of oflite profile, seconds")
    p.add_argument("--auto-timeout", type=int, default=1800,
                   help="bound of one oflite compile --auto-parallel, seconds")
    args = p.parse_args()
    if args.smoke:
        args.nodes = ",".join(n for n in args.nodes.split(",") if n.strip().isdigit() and int(n) <= 4)
        args.layers, args.heads, args.channels, args.block = 2, 2, 32, 16
    errors = []
    args.models = args.models.split(",")
    args.networks = args.networks.split(",")
    errors += ["--models: '%s' is not one of %s" % (m, ", ".join(MODELS))
               for m in args.models if m not in MODELS]
    errors += ["--networks: '%s' is not one of %s" % (n, ", ".join(NETWORKS))
               for n in args.networks if n not in NETWORKS]
    try:
        args.nodes = sorted(set(int(n) for n in args.nodes.split(",")))
    except ValueError:
        errors.append("--nodes wants a comma list of integers, got '%s'" % args.nodes)
        args.nodes = [1]
    if 1 not in args.nodes or min(args.nodes) < 1 or max(args.nodes) > 4096:
        errors.append("--nodes: counts in 1..4096, 1 among them (the baseline of the efficiency)")
    for value, flag in ((args.mlp_batch, "--mlp-batch"), (args.gpt_batch, "--gpt-batch"),
                        (args.threads, "--threads"), (args.layers, "--layers"),
                        (args.heads, "--heads"), (args.channels, "--channels"),
                        (args.block, "--block"), (args.timeout, "--timeout"),
                        (args.profile_timeout, "--profile-timeout"),
                        (args.auto_timeout, "--auto-timeout"), (args.auto_max_nodes, "--auto-max-nodes")):
        if value < 1:
            errors.append("%s must be >= 1, got %d" % (flag, value))
    if args.iterations < 3:
        errors.append("--iterations must be >= 3 (oflite simulate's bound)")
    if args.channels % max(args.heads, 1):
        errors.append("--channels %d: want a multiple of --heads %d" % (args.channels, args.heads))
    if errors:
        p.error("; ".join(errors))
    return args


def tools_missing(args):
    """Why this run cannot start, or ""."""
    needed = [args.oflite] + ([args.write_job] if "mlp" in args.models else []) + \
             ([args.gpt_char] if "gpt" in args.models else [])
    for path in needed:
        if not os.access(path, os.X_OK):
            return ("%s is not built (bazel build //tools/oflite:oflite //examples:gpt_char "
                    "//tools/bench/scaling:write_scaling_job)" % path)
    for command in ["simulate"] + ([] if args.calibration else ["profile"]):
        done = subprocess.run([args.oflite, command, "--help"], capture_output=True, text=True,
                              timeout=60)
        if done.returncode != 0:
            said = (done.stderr or done.stdout).strip().splitlines()
            return "`oflite %s` is unavailable in %s (%s)" % (
                command, args.oflite, said[0] if said else "exit %d" % done.returncode)
    if args.calibration and not os.path.isfile(args.calibration):
        return "--calibration %s: no such file" % args.calibration
    try:
        import matplotlib  # noqa: F401  (checked before minutes of work, used at the end)
    except ImportError:
        return "matplotlib is not importable by %s (run the script with /usr/bin/python3)" % sys.executable
    return ""


def run(cmd, what, timeout, **kwargs):
    """Runs cmd; raises Step naming `what` with the tail of its stderr."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kwargs)
    except subprocess.TimeoutExpired:
        raise Step("%s ran past its bound of %d s" % (what, timeout))
    if done.returncode != 0:
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise Step("%s exited %d: %s" % (what, done.returncode, tail[-400:]))
    return done


class Scale:
    def __init__(self, args, out):
        self.args, self.out = args, out
        for sub in ("jobs", "plans", "predictions", "logs"):
            os.makedirs(os.path.join(out, sub), exist_ok=True)
        self.jobs = {}
        self.seconds = {"jobs": 0.0, "compile": 0.0, "profile": 0.0, "simulate": 0.0, "auto": 0.0}

    def job(self, model, nodes):
        """The data-parallel Job of `model` on `nodes` machines (written once;
        the same for every network)."""
        key = (model, nodes)
        if key in self.jobs:
            return self.jobs[key]
        a = self.args
        start = time.monotonic()
        folder = os.path.join(self.out, "jobs", "%s-%dn" % key)
        os.makedirs(folder, exist_ok=True)
        if model == "mlp":
            path = os.path.join(folder, "mlp.job.pb")
            run([a.write_job, path, "--model", "mlp", "--batch", str(a.mlp_batch * nodes),
                 "--machines", str(nodes), "--iterations", "100"],
                "write_scaling_job for %d node(s)" % nodes, a.timeout)
        else:
            # gpt_layouts.Bench writes the GPT's job as the measured benchmarks
            # do (gpt_char --compile-only): its args carry the model and the
            # global batch; the namespace hosts are not needed to write it.
            gpt_args = argparse.Namespace(
                gpt_char=a.gpt_char, layers=a.layers, heads=a.heads, channels=a.channels,
                block=a.block, global_batch=a.gpt_batch * nodes, warmup=5, measure=20,
                micro_batches=1, openblas_coretype="")
            bench = gpt_layouts.Bench(gpt_args, None, self.out)
            try:
                path = bench.job("dp", nodes, folder)
            except (RuntimeError, subprocess.SubprocessError) as error:
                raise Step("gpt_char --compile-only for %d node(s): %s" % (nodes, error))
        self.seconds["jobs"] += time.monotonic() - start
        self.jobs[key] = path
        return path

    def cluster(self, row):
        a = self.args
        _, gbps, latency, _ = NETWORKS[row.network]
        path = os.path.join(self.out, "plans", row.name + ".cluster.pbtxt")
        fields = "cpu_threads: %d nic { gbit_per_s: %g latency_us: %g }" % (a.threads, gbps, latency)
        # Addresses are never dialled: the simulator reads only the fields.
        scaling.write_cluster(path, ["10.%d.%d.%d" % (m >> 16, (m >> 8) & 255, m & 255)
                                     for m in range(1, row.nodes + 1)], lambda m: fields)
        return path

    def compile(self, row):
        job = self.job(row.model, row.nodes)
        start = time.monotonic()
        cluster = self.cluster(row)
        plan = os.path.join(self.out, "plans", row.name + ".plan.pb")
        run([self.args.oflite, "compile", "--job", job, "--cluster", cluster, "-o", plan, "--quiet"],
            "oflite compile of %s" % row.name, self.args.timeout)
        row.plan = plan
        self.seconds["compile"] += time.monotonic() - start

    def profile(self, plans):
        a = self.args
        start = time.monotonic()
        out = os.path.join(self.out, "calibration.pbtxt")
        env = dict(os.environ, OPENBLAS_NUM_THREADS=str(a.threads), OMP_NUM_THREADS=str(a.threads))
        core = scaling.openblas_core_for_cpu()  # the kernels oflite's ranks pick (validate.py alike)
        if core:
            env["OPENBLAS_CORETYPE"] = core
        # tcp only: ibverbs cannot be measured without an RDMA device, shm is
        # no link between nodes.
        cmd = [a.oflite, "profile", "--plan", ",".join(plans), "--out", out, "--threads",
               str(a.threads), "--transports", "tcp"] + shlex.split(a.profile_args)
        # A measurement that failed (exit 1: on a busy shared host the runtime
        # figures can come out unusable) is taken once more with --update,
        # which keeps what the first attempt wrote and measures the rest.
        for attempt in (1, 2):
            log = os.path.join(self.out, "logs", "profile%s.log" % ("" if attempt == 1 else ".2"))
            print("profile: %s (log %s)" % (" ".join(cmd), log), flush=True)
            with open(log, "w") as f:
                try:
                    rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env,
                                        timeout=a.profile_timeout).returncode
                except subprocess.TimeoutExpired:
                    raise Step("oflite profile ran past --profile-timeout %d s (log %s)"
                               % (a.profile_timeout, log))
            if rc == 0 and os.path.isfile(out):
                break
            with open(log) as f:
                tail = " | ".join(f.read().strip().splitlines()[-3:])
            if attempt == 2 or rc != 1 or not os.path.isfile(out):
                raise Step("oflite profile exited %d: %s (log %s)" % (rc, tail, log))
            print("profile: exited 1 (%s); once more with --update" % tail[-200:], flush=True)
            cmd = cmd + ["--update"]
        self.seconds["profile"] += time.monotonic() - start
        return out

    def simulate(self, plan, calibration, transport, name):
        done = run([self.args.oflite, "simulate", "--plan", plan, "--calibration", calibration,
                    "--json", "--transport", transport, "--iterations", str(self.args.iterations)],
                   "oflite simulate of %s" % name, self.args.timeout)
        path = os.path.join(self.out, "predictions", name + ".simulate.json")
        with open(path, "w") as f:
            f.write(done.stdout)
        try:
            sim = json.loads(done.stdout)
            float(sim["step_time_ms"])
        except (ValueError, KeyError, TypeError) as error:
            raise Step("oflite simulate of %s gave no \"step_time_ms\" (%s; %s)" % (name, error, path))
        return sim

    def auto(self, row, calibration):
        """Compiles row's job with --auto-parallel and simulates the plan it
        wrote; fills row.auto. Raises Step when either fails (row.auto then
        keeps what the search printed)."""
        a = self.args
        job = self.job(row.model, row.nodes)
        start = time.monotonic()
        transport = NETWORKS[row.network][3]
        plan = os.path.join(self.out, "plans", row.name + ".auto.plan.pb")
        done = run([a.oflite, "compile", "--job", job, "--cluster",
                    self.cluster(row), "-o", plan, "--auto-parallel", "--calibration", calibration,
                    "--transport", transport], "oflite compile --auto-parallel of %s" % row.name,
                   a.auto_timeout)
        with open(os.path.join(self.out, "logs", row.name + ".auto.log"), "w") as f:
            f.write(done.stdout + done.stderr)
        # PrintChoice's line: "  NAME   12.34 ms   5.6 MiB  <- chosen" (names hold spaces).
        chosen = re.search(r"^\s+(\S.*?)\s+([0-9.]+) ms\s+[0-9.]+ MiB\s+<- chosen\s*$",
                           done.stdout, re.M)
        row.auto = {"layout": chosen.group(1) if chosen else "?",
                    "search_ms": float(chosen.group(2)) if chosen else None, "ms": None}
        try:
            # The same simulation as the data-parallel rows, of the plan as
            # written (the search simulated its own compile of the layout).
            sim = self.simulate(plan, calibration, transport, row.name + ".auto")
            row.auto["ms"] = sim["step_time_ms"]
            row.auto["notes"] = sim.get("notes", [])
        finally:
            self.seconds["auto"] += time.monotonic() - start


def transports_in(calibration):
    """{transport name: the most ranks of its collective curves (0: none)}
    of a calibration (text proto: top-level blocks close at column 0)."""
    with open(calibration) as f:
        text = f.read()
    found = {}
    for block in re.split(r"^transport \{", text, flags=re.M)[1:]:
        block = re.split(r"^\}", block, maxsplit=1, flags=re.M)[0]
        name = re.search(r'^\s*name:\s*"([^"]+)"', block, re.M)
        if name:
            ranks = [int(r) for r in re.findall(r"^\s*ranks:\s*(\d+)", block, re.M)]
            found[name.group(1)] = max(ranks, default=0)
    return found


def short_layout(name):
    """A layout name that fits the table: the descent's per-variable list
    ("dp+B,S0,B,S1,...") as how many of the variables it splits."""
    hints = re.fullmatch(r"(.+?)\+((?:B|S[0-9]+)(?:,(?:B|S[0-9]+))*)", name)
    if len(name) > 24 and hints:
        sbp = hints.group(2).split(",")
        name = "%s+%d/%d vars split" % (hints.group(1), sum(x != "B" for x in sbp), len(sbp))
    return name[:24]


def throughput(row, args):
    per_node = args.mlp_batch if row.model == "mlp" else args.gpt_batch
    return row.nodes * per_node / row.step_ms() * 1e3


def print_table(args, rows, base):
    auto = args.auto
    print("\n" + "=" * 100)
    print("PREDICTED (simulated by `oflite simulate` from one calibration of this host, NOT measured)")
    print("weak scaling, data parallel; per node: 1 CPU device x %d thread(s), batch MLP %d samples, "
          "GPT %d sequences" % (args.threads, args.mlp_batch, args.gpt_batch))
    print("=" * 100)
    head = "%-5s %-10s %5s %10s %12s %6s %9s %11s %9s" % (
        "model", "network", "nodes", "step ms", "samples/s", "eff", "comm ms", "exposed ms", "+ms vs 1")
    if auto:
        head += "  %-24s %9s %8s" % ("auto layout", "auto ms", "auto/dp")
    print(head)
    for r in rows:
        label = NETWORKS[r.network][0]
        if r.sim is None:
            print("%-5s %-10s %5d %10s" % (r.model, label, r.nodes, "FAILED"))
            continue
        t1 = base.get((r.model, r.network))
        eff = "%.2f" % (t1 / r.step_ms()) if t1 else "-"
        grew = "%.2f" % (r.step_ms() - t1) if t1 else "-"
        line = "%-5s %-10s %5d %10.2f %12.1f %6s %9.2f %11.2f %9s" % (
            r.model, label, r.nodes, r.step_ms(), throughput(r, args), eff,
            r.comm_ms("comm_ms_per_step"), r.comm_ms("exposed_comm_ms_per_step"), grew)
        if auto and r.auto:
            ms = r.auto["ms"] if r.auto["ms"] is not None else r.auto["search_ms"]
            mark = "" if r.auto["ms"] is not None else "*"
            line += "  %-24s %9s %8s" % (short_layout(r.auto["layout"]),
                                         "%.2f%s" % (ms, mark) if ms is not None else "-",
                                         "%.2f%s" % (ms / r.step_ms(), mark) if ms is not None else "-")
        print(line)
    print("step ms: predicted steady-state step; samples/s: nodes x per-node batch / step (GPT: "
          "sequences); eff: T(1 node) / T(N nodes) of the same model and network; comm ms: per step, "
          "the busiest machine's time with a transfer in flight; exposed ms: of it, the time no "
          "compute of that machine hides; +ms vs 1: T(N) - T(1), all that going distributed "
          "costs (the simulator counts the collectives' staging copies into and out of their "
          "buffers as acts, not as communication: they are in this column, not in exposed ms)" +
          ("; auto: `oflite compile --auto-parallel`'s chosen layout, its written plan simulated "
           "alike (auto/dp < 1: faster than data parallel; *: that simulation FAILED, the figure "
           "is the search's own)" if auto else ""))


def print_notes(rows):
    """Every distinct note of the simulations once, with the rows it came
    from (counts inside a note vary with the plan: masked to group them)."""
    seen = {}
    for r in rows:
        for sim, name in ((r.sim, r.name), (r.auto, r.name + " auto")):
            for note in (sim or {}).get("notes", []):
                key = re.sub(r"[0-9]+", "#", note)
                seen.setdefault(key, [note, []])[1].append(name)
    if seen:
        print("\nnotes of oflite simulate (each once):")
    for note, names in seen.values():
        which = ", ".join(names) if len(names) <= 4 else "%s ... %s, %d rows" % (
            names[0], names[-1], len(names))
        print("  - %s  [%s]" % (note, which))


def plot(args, rows, base, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 5.5))
    styles = {"eth10": ("o", "-"), "rdma100": ("s", "--"), "rdma200": ("^", ":")}
    colors = {"mlp": "tab:blue", "gpt": "tab:red"}
    for model in args.models:
        for network in args.networks:
            t1 = base.get((model, network))
            points = [(r.nodes, t1 / r.step_ms()) for r in rows
                      if (r.model, r.network) == (model, network) and r.sim and t1]
            if not points:
                continue
            marker, line = styles.get(network, ("x", "-"))
            ax.plot([p[0] for p in points], [p[1] for p in points], marker=marker, linestyle=line,
                    color=colors[model], label="%s, %s" % (model.upper(), NETWORKS[network][0]))
    ax.set_xscale("log", base=2)
    ax.set_xticks(args.nodes)
    ax.set_xticklabels([str(n) for n in args.nodes])
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("nodes (1 CPU device x %d thread(s) each)" % args.threads)
    ax.set_ylabel("weak-scaling efficiency T(1) / T(N)")
    ax.set_title("PREDICTED by oflite simulate (not measured): data parallel, weak scaling\n"
                 "MLP %d samples/node, GPT %d sequences/node" % (args.mlp_batch, args.gpt_batch))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main():
    args = parse_args()
    why = tools_missing(args)
    if why:
        print("scale: " + why, file=sys.stderr)
        return 2
    if args.calibration:
        args.calibration = os.path.abspath(args.calibration)
    out = os.path.abspath(args.out_dir) if args.out_dir else tempfile.mkdtemp(prefix="scale.")
    os.makedirs(out, exist_ok=True)
    png = os.path.abspath(args.png) if args.png else os.path.join(out, "scale.png")
    # Others rebuild bazel-bin while this runs (a shared workspace): every
    # step uses copies taken now, so one run sees one build.
    os.makedirs(os.path.join(out, "bin"), exist_ok=True)
    needed = ["oflite"] + (["gpt_char"] if "gpt" in args.models else []) + \
             (["write_job"] if "mlp" in args.models else [])
    for attr in needed:
        copy = os.path.join(out, "bin", os.path.basename(getattr(args, attr)))
        try:
            if os.path.lexists(copy):  # a rerun into the same --out-dir (copies are read-only)
                os.remove(copy)
            shutil.copy2(getattr(args, attr), copy)
        except OSError as error:
            print("scale: cannot copy %s to %s: %s" % (getattr(args, attr), copy, error), file=sys.stderr)
            return 2
        setattr(args, attr, copy)
    began = time.monotonic()
    print("scale: out dir %s; models %s; networks %s; nodes %s; %d thread(s) per node; GPT %d blocks, "
          "%d heads, %d channels, context %d" % (out, ",".join(args.models), ",".join(args.networks),
                                               ",".join(map(str, args.nodes)), args.threads,
                                               args.layers, args.heads, args.channels, args.block),
          flush=True)
    s = Scale(args, out)
    failed = False
    rows = [Row(m, net, n) for m in args.models for net in args.networks for n in args.nodes]
    for r in rows:
        try:
            s.compile(r)
        except (Step, OSError) as error:
            print("compile %s FAILED: %s" % (r.name, error), flush=True)
            failed = True
    print("compiled %d of %d plans in %.0f s (job writing %.0f s)" % (
        sum(1 for r in rows if r.plan), len(rows), s.seconds["compile"], s.seconds["jobs"]), flush=True)

    calibration = args.calibration
    if not calibration:
        # The kernels of the 1-node and the smallest multi-node plan: under
        # weak scaling every node count has those shapes (the global loss's
        # reduction aside, which the simulator scales from them).
        small = args.nodes[:2]
        plans = [r.plan for r in rows if r.network == args.networks[0] and r.nodes in small and r.plan]
        if not plans:
            print("profile FAILED: no plan of %s node(s) compiled" % small, flush=True)
            return 1
        try:
            calibration = s.profile(plans)
        except (Step, OSError) as error:
            print("profile FAILED: %s" % error, flush=True)
            return 1
    print("calibration: %s (%s)" % (calibration, "given" if args.calibration else
                                    "profiled in %.0f s" % s.seconds["profile"]), flush=True)
    have = transports_in(calibration)
    for transport in sorted({NETWORKS[n][3] for n in args.networks}):
        on = ", ".join(NETWORKS[n][0] for n in args.networks if NETWORKS[n][3] == transport)
        if transport not in have:
            print("NOTE: the calibration has no '%s' transport (%s): on %s the simulator counts "
                  "only the link's rate and latency, no transport software cost" % (
                      transport, "measured: " + ",".join(sorted(have)) if have else "none measured",
                      on), flush=True)
        elif 0 < have[transport] < max(args.nodes):
            # cost/calibration.cc (CollectiveFloorUs) takes the curve of the
            # nearest rank count and multiplies it by (N-1)/(R-1); a ring's
            # bytes per rank stay about twice the tensor, so beyond R a curve
            # measured on one box (ranks sharing its cores) grows the
            # collective far faster than the link model does.
            print("NOTE: the '%s' collective curves were measured on this one box with at most %d "
                  "ranks; the simulator scales them by (N-1)/(%d-1) for N nodes, so on %s the "
                  "rows above %d nodes are dominated by that extrapolation (read them as a "
                  "pessimistic bound, not a forecast)" % (
                      transport, have[transport], have[transport], on, have[transport]), flush=True)

    for r in rows:
        if not r.plan:
            continue
        start = time.monotonic()
        try:
            r.sim = s.simulate(r.plan, calibration, NETWORKS[r.network][3], r.name)
            print("predict %-18s %10.2f ms" % (r.name, r.step_ms()), flush=True)
        except (Step, OSError) as error:
            print("predict %s FAILED: %s" % (r.name, error), flush=True)
            failed = True
        s.seconds["simulate"] += time.monotonic() - start

    if args.auto:
        auto_calibration = os.path.join(out, "calibration.auto.pbtxt")
        shutil.copyfile(calibration, auto_calibration)
        for r in rows:
            if r.nodes < 2 or r.nodes > args.auto_max_nodes or not r.plan:
                continue
            try:
                s.auto(r, auto_calibration)
                print("auto    %-18s %10.2f ms  %s" % (r.name, r.auto["ms"], r.auto["layout"]),
                      flush=True)
            except (Step, OSError) as error:
                print("auto %s FAILED: %s" % (r.name, error), flush=True)
                failed = True

    base = {(r.model, r.network): r.step_ms() for r in rows if r.nodes == 1 and r.sim}
    print_table(args, rows, base)
    print_notes(rows)
    try:
        plot(args, rows, base, png)
        print("\nplot: %s" % png)
    except (OSError, ValueError, RuntimeError) as error:
        print("plot %s FAILED: %s" % (png, error))
        failed = True
    if args.json:
        doc = {"predicted": True, "calibration": calibration, "threads": args.threads,
               "mlp_batch_per_node": args.mlp_batch, "gpt_batch_per_node": args.gpt_batch,
               "gpt": {"layers": args.layers, "heads": args.heads, "channels": args.channels,
                       "block": args.block},
               "rows": [{"model": r.model, "network": r.network, "nodes": r.nodes,
                         "gbit_per_s": NETWORKS[r.network][1], "latency_us": NETWORKS[r.network][2],
                         "transport": NETWORKS[r.network][3], "plan": r.plan,
                         "step_ms": r.step_ms(),
                         "throughput": throughput(r, args) if r.sim else None,
                         "efficiency": base[(r.model, r.network)] / r.step_ms()
                         if r.sim and (r.model, r.network) in base else None,
                         "comm_ms": r.comm_ms("comm_ms_per_step") if r.sim else None,
                         "exposed_comm_ms": r.comm_ms("exposed_comm_ms_per_step") if r.sim else None,
                         "kernels": r.sim.get("kernels") if r.sim else None,
                         "auto_layout": r.auto["layout"] if r.auto else None,
                         "auto_step_ms": r.auto["ms"] if r.auto else None,
                         "auto_search_ms": r.auto["search_ms"] if r.auto else None}
                        for r in rows]}
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
        print("rows: %s" % args.json)
    took = time.monotonic() - began
    print("took %.0f s (jobs %.0f, compile %.0f, profile %.0f, simulate %.0f%s); out dir %s" % (
        took, s.seconds["jobs"], s.seconds["compile"], s.seconds["profile"], s.seconds["simulate"],
        ", auto %.0f" % s.seconds["auto"] if args.auto else "", out))
    print("rerun one: %s simulate --plan %s/plans/NAME.plan.pb --calibration %s --transport tcp|ibverbs"
          % (args.oflite, out, calibration))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
