#!/usr/bin/python3
"""A 2-rank job bound to one core per rank next to the same job unbound.

Ranks started by hand (`oflite run --rank R --master ...`) keep the whole
machine as their affinity mask; `oflite launch` binds each rank to its own
core. This bench runs the data-parallel MLP of tests/multinode_test.sh
(synthetic batches) on 2 ranks over each --comms transport, each sample once
bound (taskset -c 0 / -c 1) and once unbound (started by hand with no
binding; on a host with more than 2 CPUs both ranks get CPUs 0-1, so that
both cases have 2 cores), otherwise with the same command line; the two
orders alternate per repeat; medians over --repeats. --baseline runs a
second oflite binary (e.g. one built before a change) in the same
interleaved loop.

Step time: wall time on rank 0 between its progress lines of step WARMUP
and WARMUP+MEASURE, divided by MEASURE. CPU: user+sys of both ranks over the
same window (/proc), per step. --threads: each rank's busiest threads over
that window (CPU share, voluntary/involuntary context switches, time spent
runnable but waiting for a CPU) and the CPU of threads that ended inside it,
to see who spins. The load average is printed with every sample: other
work on the host changes the figures.

  bazel build //tools/oflite:oflite //oneflow_lite/testing:write_test_job
  tools/bench/unbound_ranks.py                 # ~1 minute on 2 cores
  tools/bench/unbound_ranks.py --smoke         # a few seconds, figures meaningless
  tools/bench/unbound_ranks.py --hidden 256,128 --batch 64 --warmup 50 --measure 300
                                               # a larger MLP: its compute threads matter
Exit: 0 ok, 1 a run failed, 2 bad arguments (or this process is itself
bound to fewer than 2 CPUs, which would make "unbound" bound).
"""
import argparse
import math
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

WORKSPACE = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--oflite", default=os.path.join(WORKSPACE, "bazel-bin", "tools", "oflite", "oflite"))
    p.add_argument("--baseline", metavar="OFLITE",
                   help="another oflite binary (e.g. a copy built before a change) measured in the same "
                        "interleaved loop, its rows marked 'baseline'")
    p.add_argument("--write-job", default=os.path.join(WORKSPACE, "bazel-bin", "oneflow_lite", "testing",
                                                       "write_test_job"))
    p.add_argument("--comms", default="tcp,shm", help="comma list of transports (tcp, shm)")
    p.add_argument("--repeats", type=int, default=5, help="samples per configuration (median)")
    p.add_argument("--warmup", type=int, default=200, help="steps before the measured window")
    p.add_argument("--measure", type=int, default=1000, help="steps measured")
    p.add_argument("--batch", type=int, default=32, help="global batch (S(0) over the 2 ranks)")
    p.add_argument("--hidden", default="64", help="hidden widths of the MLP (write_test_job --hidden)")
    p.add_argument("--cpu-threads", type=int, default=0,
                   help="oflite run --cpu-threads for every run (0: the default, cores / devices)")
    p.add_argument("--env", action="append", default=[], metavar="VAR=VALUE",
                   help="an environment variable for every rank (repeatable), e.g. OPENBLAS_NUM_THREADS=1")
    p.add_argument("--threads", action="store_true", help="print each rank's busiest threads per run")
    p.add_argument("--timeout", type=int, default=120, help="seconds one run may take")
    p.add_argument("--smoke", action="store_true", help="1 repeat, 20+100 steps (a quick check)")
    a = p.parse_args()
    if a.smoke:
        a.repeats, a.warmup, a.measure = 1, 20, 100
    a.comms = [c for c in a.comms.split(",") if c]
    bad = [c for c in a.comms if c not in ("tcp", "shm")]
    if bad or not a.comms:
        p.error("--comms: want tcp and/or shm, got %r" % ",".join(bad or a.comms))
    if a.repeats < 1 or a.warmup < 1 or a.measure < 1 or a.batch < 2 or a.cpu_threads < 0:
        p.error("--repeats, --warmup, --measure must be >= 1, --batch >= 2, --cpu-threads >= 0")
    for flag, path in (("--oflite", a.oflite), ("--write-job", a.write_job), ("--baseline", a.baseline)):
        if path is not None and not os.access(path, os.X_OK):
            p.error("%s %s is not an executable (bazel build //tools/oflite:oflite "
                    "//oneflow_lite/testing:write_test_job)" % (flag, path))
    for item in a.env:
        if "=" not in item or not item.split("=", 1)[0]:
            p.error("--env %r: want VAR=VALUE" % item)
    if len(os.sched_getaffinity(0)) < 2:
        p.error("this process may run on %d CPU(s): unbound ranks would be bound too; start it "
                "without taskset" % len(os.sched_getaffinity(0)))
    return a


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_stat(path):
    """(utime + stime seconds, name) of a /proc/.../stat file, or None."""
    try:
        with open(path) as f:
            text = f.read()
        name = text[text.index("(") + 1:text.rindex(")")]
        fields = text.rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS, name
    except (OSError, IndexError, ValueError):
        return None


def context_switches(pid, tid):
    voluntary = involuntary = 0
    try:
        with open("/proc/%d/task/%d/status" % (pid, tid)) as f:
            for line in f:
                if line.startswith("voluntary_ctxt_switches:"):
                    voluntary = int(line.split()[1])
                elif line.startswith("nonvoluntary_ctxt_switches:"):
                    involuntary = int(line.split()[1])
    except (OSError, ValueError):
        pass
    return voluntary, involuntary


def run_queue_wait(pid, tid):
    """Seconds the thread spent runnable but waiting for a CPU (schedstat)."""
    try:
        with open("/proc/%d/task/%d/schedstat" % (pid, tid)) as f:
            return int(f.read().split()[1]) * 1e-9
    except (OSError, IndexError, ValueError):
        return 0.0


def sample(pid):
    """Process CPU seconds and, per thread id, (CPU seconds, name, vcsw, ivcsw)."""
    whole = read_stat("/proc/%d/stat" % pid)
    threads = {}
    try:
        tids = [int(t) for t in os.listdir("/proc/%d/task" % pid)]
    except OSError:
        tids = []
    for tid in tids:
        stat = read_stat("/proc/%d/task/%d/stat" % (pid, tid))
        if stat:
            threads[tid] = (stat[0], stat[1]) + context_switches(pid, tid) + (run_queue_wait(pid, tid),)
    return (whole[0] if whole else None), threads


def run_job(a, oflite, tmp, plan, comm, bound, label):
    """One 2-rank run. Returns (wall s/step, CPU s/step, thread lines)."""
    port = free_port()
    token = "unbound-%d-%d" % (os.getpid(), port)
    procs, logs, marks = [], [], {}
    total = 2 * a.warmup + a.measure
    start_line = "iter %d/%d " % (a.warmup, total)
    end_line = "iter %d/%d " % (a.warmup + a.measure, total)
    try:
        for rank in range(2):
            env = dict(os.environ, OFLITE_JOB_TOKEN=token, OFLITE_HOST="127.0.0.%d" % (rank + 1))
            env.update(item.split("=", 1) for item in a.env)
            for var in ("RANK", "WORLD_SIZE", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"):
                env.pop(var, None)
            if bound:
                prefix = ["taskset", "-c", str(rank)]
            elif len(os.sched_getaffinity(0)) > 2:
                prefix = ["taskset", "-c", "0,1"]
            else:
                prefix = []
            command = prefix + [
                oflite, "run", "--plan", plan, "--rank", str(rank), "--master", "127.0.0.1:%d" % port,
                "--comm", comm, "--eval=false", "--log-every", str(math.gcd(a.warmup, a.measure))]
            if a.cpu_threads:
                command += ["--cpu-threads", str(a.cpu_threads)]
            log = open(os.path.join(tmp, "%s.r%d.log" % (label, rank)), "w+")
            logs.append(log)
            procs.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE if rank == 0 else log,
                                          stderr=log, text=True))

        def read():
            for line in procs[0].stdout:
                now = time.monotonic()
                for name, marker in (("start", start_line), ("end", end_line)):
                    if line.startswith(marker) and name not in marks:
                        marks[name] = (now, [sample(p.pid) for p in procs])
                logs[0].write(line)
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        deadline = time.monotonic() + a.timeout
        for rank, proc in enumerate(procs):
            try:
                rc = proc.wait(timeout=max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise RuntimeError("%s: rank %d ran past --timeout %d s" % (label, rank, a.timeout))
            if rc != 0:
                logs[rank].flush()
                logs[rank].seek(0)
                tail = " | ".join(logs[rank].read().strip().splitlines()[-3:])
                raise RuntimeError("%s: rank %d exited %d: %s" % (label, rank, rc, tail))
        reader.join(timeout=10)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        for log in logs:
            log.close()
    if "start" not in marks or "end" not in marks:
        raise RuntimeError("%s: rank 0 printed no '%s' / '%s' line" % (label, start_line, end_line))
    wall = marks["end"][0] - marks["start"][0]
    cpu = 0.0
    thread_lines = []
    for rank, ((cpu0, threads0), (cpu1, threads1)) in enumerate(zip(marks["start"][1], marks["end"][1])):
        if cpu0 is not None and cpu1 is not None:
            cpu += cpu1 - cpu0
        busiest = []
        for tid, (t1, name, v1, i1, q1) in threads1.items():
            t0, _, v0, i0, q0 = threads0.get(tid, (0.0, name, 0, 0, 0.0))
            busiest.append((t1 - t0, tid, name, v1 - v0, i1 - i0, q1 - q0))
        busiest.sort(reverse=True)
        # CPU of threads that ended inside the window (counted by the
        # process, no longer listed): e.g. a thread per collective.
        gone = (cpu1 - cpu0) - sum(b[0] for b in busiest) if cpu0 is not None and cpu1 is not None else 0
        thread_lines.append("    rank %d: " % rank + ", ".join(
            "%s(+%d) %.0f%% vcsw %d ivcsw %d rq %.0f%%" % (
                name, tid - procs[rank].pid, 100 * used / wall, vol, invol, 100 * queued / wall)
            for used, tid, name, vol, invol, queued in busiest[:6] if used > 0 or vol or invol) +
            ", ended threads %.0f%%" % max(0.0, 100 * gone / wall))
    return wall / a.measure, cpu / a.measure, thread_lines


def make_plan(a, tmp):
    job, cluster, plan = (os.path.join(tmp, n) for n in ("mlp.job.pb", "two.pbtxt", "mlp.plan.pb"))
    with open(cluster, "w") as f:
        for m in range(2):
            f.write('machine { id: %d address: "127.0.0.%d" cpu_devices: 1 }\n' % (m, m + 1))
    iterations = 2 * a.warmup + a.measure
    subprocess.run([a.write_job, job, "--batch", str(a.batch), "--features", "784", "--hidden", a.hidden,
                    "--classes", "10", "--iterations", str(iterations), "--placement", "0-1:cpu:0"],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run([a.oflite, "compile", "--job", job, "--cluster", cluster, "-o", plan, "--quiet"],
                   check=True, stdout=subprocess.DEVNULL)
    return plan


def load():
    return "%.2f %.2f %.2f" % os.getloadavg()


def main():
    a = parse_args()
    print("unbound_ranks: 2-rank data-parallel MLP 784-%s-10, global batch %d, %d+%d steps, %d repeats, "
          "cpu-threads %s, %d CPUs%s; load average %s" % (
              a.hidden.replace(",", "-"), a.batch, a.warmup, a.measure, a.repeats,
              a.cpu_threads or "default", len(os.sched_getaffinity(0)),
              "".join(", " + item for item in a.env), load()), flush=True)
    results = {}  # (comm, bound) -> [(wall, cpu)]
    with tempfile.TemporaryDirectory(prefix="unbound_ranks.") as tmp:
        try:
            plan = make_plan(a, tmp)
        except subprocess.CalledProcessError as e:
            print("unbound_ranks: making the plan failed: %s" % e, file=sys.stderr)
            return 1
        builds = [("", a.oflite)] + ([("baseline", a.baseline)] if a.baseline else [])
        for r in range(a.repeats):
            for comm in a.comms:
                order = (True, False) if r % 2 == 0 else (False, True)
                for build, oflite in builds if r % 2 == 0 else builds[::-1]:
                    for bound in order:
                        label = "%s.%s%s.%d" % (comm, "bound" if bound else "unbound",
                                                "." + build if build else "", r)
                        try:
                            wall, cpu, thread_lines = run_job(a, oflite, tmp, plan, comm, bound, label)
                        except RuntimeError as e:
                            print("unbound_ranks: %s" % e, file=sys.stderr)
                            return 1
                        results.setdefault((build, comm, bound), []).append((wall, cpu))
                        print("  %-25s wall %7.1f us/step  cpu %7.1f us/step  load %s" % (
                            label, wall * 1e6, cpu * 1e6, load()), flush=True)
                        if a.threads:
                            print("\n".join(thread_lines), flush=True)
    print("medians of %d (wall and CPU of both ranks per step; load average now %s):" % (a.repeats, load()))
    print("  %-5s %-8s %-9s %10s %10s %14s" % ("comm", "binding", "build", "wall us", "cpu us", "wall range"))
    for comm in a.comms:
        for build, _ in builds:
            med = {}
            for bound in (True, False):
                walls = [w for w, _ in results[(build, comm, bound)]]
                cpus = [c for _, c in results[(build, comm, bound)]]
                med[bound] = statistics.median(walls)
                print("  %-5s %-8s %-9s %10.1f %10.1f %7.0f-%-6.0f" % (
                    comm, "bound" if bound else "unbound", build or "-", med[bound] * 1e6,
                    statistics.median(cpus) * 1e6, min(walls) * 1e6, max(walls) * 1e6))
            print("  %-5s unbound / bound wall%s: %.2fx" % (
                comm, " (baseline)" if build else "", med[False] / med[True]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
