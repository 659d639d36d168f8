#!/usr/bin/python3
"""The cost model's acceptance bench: the layout `oflite compile
--auto-parallel` chooses against PyTorch DDP measured in the same run, and
against the best hand-written layout of a validate.py run.

The claim it checks: at 1 Gbit/s on 2 and 4 hosts the auto-chosen plan of
the MLP 784-2048-2048-10 and of the GPT is at least 2x faster per step than
PyTorch DDP and within 5 % of the best hand-written layout; at 10 Gbit/s
it is no slower than DDP.

For every --models model, --hosts count and --rates link rate:
  1. the model's data-parallel job for N hosts (validate.py's dp job: the
     search re-lays the forward graph, so the job's own layout does not
     matter) and a cluster file as validate.py writes it: the link rate one
     TCP stream carries over the shaped namespace link, the one-way latency
     it adds to loopback, the CPU per byte per end beyond the transport's
     own in N hosts' arrangement (validate.py's measure_paths, with the
     tcp figure of --calibration), each rank's core (cpu_set) and
     cpu_threads 1;
  2. `oflite compile --auto-parallel --calibration OUT/calibration.pbtxt`
     (a copy of --calibration: the compile adds the kernels it lacks to the
     file it is given), pinned and single-threaded like validate.py's
     profile, so that kernels it times match the calibrated ones; the
     chosen layout and its predicted step time come from `oflite inspect`;
  3. samples of the chosen plan (gpt_layouts.py's Bench.run_plan, pinned as
     in validate.py: rank r on --cores[r mod len], one compute thread) and
     of the DDP peer at the same global batch and pinning (MLP:
     scaling.py's ddp_peer.py; GPT: gpt_layouts.py's gpt_ddp_peer.py),
     interleaved: repeat r runs every (setting, framework) once, in reverse
     order on odd repeats; medians over --repeats.

A step is the wall time on rank 0 between the end of step WARMUP and the
end of step WARMUP+MEASURE divided by MEASURE; CPU is user+sys of every
rank over that window, per step.

--hand ROWS.json (the --json of a validate.py run) adds, per setting, the
layout that run measured fastest and its step time. It is another run:
other moments, maybe other settings; the table marks it so. Run
validate.py with the same --cores, batches and model flags for a fair
comparison.

Needs root (ip netns, tc), PyTorch in --python and the binaries:
  bazel build //tools/oflite:oflite //examples:gpt_char //tools/bench/scaling:write_scaling_job
  sudo tools/bench/simulate/auto_vs_ddp.py --calibration CAL --smoke   # quick, figures meaningless
  sudo tools/bench/simulate/validate.py --json rows.json               # calibration + hand layouts
  sudo tools/bench/simulate/auto_vs_ddp.py --calibration OUT/calibration.pbtxt --hand rows.json
Everything lands in --out-dir (default a fresh temp dir, kept and printed).
Exit: 0 every sample was measured (whatever the verdicts), 1 a compile, a
link measurement or a sample failed, 2 bad arguments, no root or
namespaces, binaries, PyTorch or the calibration missing.
"""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ left in the source tree
sys.path.insert(0, HERE)
import validate  # noqa: E402  (Config, Validation, measure_network, gbit_per_s; imports the next two)
import scaling  # noqa: E402  (Hosts, Bench.ddp, load)
import gpt_layouts  # noqa: E402  (Bench.run_plan, Bench.ddp)

WORKSPACE = scaling.WORKSPACE
MODELS = ("mlp", "gpt")
HAND_MARGIN = 1.05  # "within 5 % of the best hand-written layout"


def ddp_target(rate):
    """The speed-up over DDP the claim asks for at this link rate: 2x at
    1 Gbit/s (and slower links), no slower than DDP beyond."""
    return 2.0 if validate.gbit_per_s(rate) <= 1.0 else 1.0


class Setting:
    """One (model, hosts, rate): its auto-parallel plan and the samples."""

    def __init__(self, model, hosts, rate):
        self.model, self.hosts, self.rate = model, hosts, rate
        # validate.py's dp configuration gives the job and the cluster
        # file; renamed so that its files say what they are for.
        self.config = validate.Config(model, "dp", hosts, rate)
        self.config.name = "%s-auto-%dh-%s" % (model, hosts, rate)
        self.name = self.config.name
        self.plan = None
        self.chosen = None      # the layout's name
        self.predicted = None   # ms
        self.evaluated = None   # candidates compiled and simulated
        self.note = ""          # the search's note (e.g. its budget ran out)
        self.samples = {"auto": [], "ddp": []}  # [(step ms, CPU ms per step)]
        self.hand = None        # (layout, ms) from --hand

    def median(self, fw, i=0):
        s = self.samples[fw]
        return statistics.median(x[i] for x in s) if s else None


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    validate.add_shared_arguments(p)
    p.add_argument("--calibration", required=True,
                   help="the calibration to search with (e.g. OUT/calibration.pbtxt of validate.py); "
                        "copied into --out-dir, the copy is what the compiles use and extend")
    p.add_argument("--hand", default="", help="the --json of a validate.py run: its fastest layout "
                                              "per setting is printed beside (another run)")
    p.add_argument("--models", default="mlp,gpt", help="comma list of mlp, gpt")
    p.add_argument("--repeats", type=int, default=5, help="samples per framework and setting (median)")
    p.add_argument("--search-seconds", type=int, default=0,
                   help="oflite compile --search-seconds (default: the compile's own budget)")
    p.add_argument("--latency-us", default="measure",
                   help="one-way link latency of the cluster files' nic, or 'measure' (validate.py)")
    p.add_argument("--out-dir", default="", help="jobs, cluster files, plans, the calibration copy "
                                                 "and logs (default: a new temp dir, kept)")
    p.add_argument("--json", default="", help="write every row to this file")
    p.add_argument("--smoke", action="store_true",
                   help="tiny GPT, MLP batch 16, 1 repeat, 2+3+2 steps: checks that everything runs")
    p.add_argument("--python", default="/usr/bin/python3", help="interpreter with torch (the DDP peers)")
    p.add_argument("--compile-timeout", type=int, default=1800,
                   help="bound of one oflite compile --auto-parallel, seconds")
    p.add_argument("--openblas-coretype", default="auto",
                   help="OPENBLAS_CORETYPE of every rank and the compiles (see scaling.py --help)")
    args = p.parse_args()
    if args.smoke:  # validate.py's smoke sizes
        args.repeats, args.warmup, args.measure, args.probe_mb = 1, 2, 3, 20
        args.mlp_batch, args.gpt_batch = 16, 16
        args.layers, args.heads, args.channels, args.block = 4, 4, 32, 16
    errors = []
    try:
        args.hosts = [int(n) for n in args.hosts.split(",")]
        args.cores = [int(c) for c in args.cores.split(",")]
    except ValueError:
        p.error("--hosts and --cores want comma lists of integers")
    args.models = args.models.split(",")
    args.rates = args.rates.split(",")
    errors += ["--models: '%s' is not mlp or gpt" % m for m in args.models if m not in MODELS]
    errors += ["--rates: '%s' is not a tc rate such as 1gbit or 100mbit" % r
               for r in args.rates if validate.gbit_per_s(r) is None]
    if min(args.hosts) < 2:
        errors.append("--hosts: every count must be >= 2")
    if args.repeats < 1 or args.warmup < 1 or args.measure < 1:
        errors.append("--repeats, --warmup and --measure must be >= 1")
    if args.search_seconds < 0:
        errors.append("--search-seconds must be >= 1 (or 0: the compile's default)")
    if args.latency_us != "measure":
        try:
            if float(args.latency_us) < 0:
                raise ValueError
        except ValueError:
            errors.append("--latency-us must be 'measure' or microseconds >= 0, got '%s'" % args.latency_us)
    for batch, flag, model in ((args.mlp_batch, "--mlp-batch", "mlp"), (args.gpt_batch, "--gpt-batch", "gpt")):
        if model in args.models and any(batch % n for n in args.hosts):
            errors.append("%s %d: want a multiple of every host count" % (flag, batch))
    if errors:
        p.error("; ".join(errors))
    if args.openblas_coretype == "auto":
        args.openblas_coretype = scaling.openblas_core_for_cpu()
    elif args.openblas_coretype == "none":
        args.openblas_coretype = ""
    args.calibration = os.path.abspath(args.calibration)
    return args


def missing(args):
    """Why this run cannot start (the binaries, PyTorch, the calibration, the
    hand rows), or ""."""
    needed = [args.oflite] + ([args.gpt_char] if "gpt" in args.models else []) + \
             ([args.write_job] if "mlp" in args.models else [])
    for path in needed:
        if not os.access(path, os.X_OK):
            return ("%s is not built (bazel build //tools/oflite:oflite //examples:gpt_char "
                    "//tools/bench/scaling:write_scaling_job)" % path)
    done = subprocess.run([args.oflite, "compile", "--help"], capture_output=True, text=True, timeout=60)
    if "auto-parallel" not in done.stdout + done.stderr:
        return "%s has no `oflite compile --auto-parallel`: build an oflite that has it" % args.oflite
    if not os.path.isfile(args.calibration):
        return "--calibration %s: no such file" % args.calibration
    try:
        done = subprocess.run([args.python, "-c", "import torch"], capture_output=True, text=True,
                              timeout=120)
    except (OSError, subprocess.SubprocessError) as error:
        return "--python %s: %s" % (args.python, error)
    if done.returncode != 0:
        return "--python %s cannot import torch (the DDP peers need it)" % args.python
    return ""


def read_hand(path):
    """validate.py's --json: (setting -> (layout, measured ms) of its
    fastest layout, the document); raises ValueError naming the file."""
    try:
        with open(path) as f:
            doc = json.load(f)
        best = {}
        for row in doc["rows"]:
            ms = row.get("measured_ms")
            if ms is None:
                continue
            key = (row["model"], int(row["hosts"]), row["rate"])
            if key not in best or ms < best[key][1]:
                best[key] = (row["layout"], float(ms))
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError("--hand %s: not the --json of a validate.py run (%s)" % (path, error))
    return best, doc


def parse_inspect(text):
    """`oflite inspect PLAN`: (chosen layout, its predicted ms, candidates
    evaluated, note); raises RuntimeError when the plan names no choice."""
    match = re.search(r"^layout chosen by --auto-parallel: (.*) \(of (\d+) compiled and simulated",
                      text, re.M)
    if not match:
        raise RuntimeError("oflite inspect printed no 'layout chosen by --auto-parallel' line")
    chosen, evaluated = match.group(1), int(match.group(2))
    predicted, note = None, ""
    for line in text[match.end():].splitlines()[1:]:
        if line.startswith("  note: "):
            note = line[len("  note: "):]
        elif line.startswith("  " + chosen + " "):
            ms = re.match(r"\s+([0-9.]+) ms predicted", line[2 + len(chosen):])
            if ms:
                predicted = float(ms.group(1))
                break
        elif not line.startswith("  "):
            break
    if predicted is None:
        raise RuntimeError("oflite inspect lists no predicted step time for '%s'" % chosen)
    return chosen, predicted, evaluated, note


def compile_auto(args, v, s, calibration):
    """Writes s's job and cluster file, compiles them with --auto-parallel
    and reads the choice back from the plan."""
    c = s.config
    job = v.job(c)
    cluster = v.cluster(c)
    plan = os.path.join(v.out, s.name + ".plan.pb")
    cmd = ["taskset", "-c", str(args.cores[0]), args.oflite, "compile", "--job", job, "--cluster",
           cluster, "-o", plan, "--auto-parallel", "--calibration", calibration]
    if args.search_seconds:
        cmd += ["--search-seconds", str(args.search_seconds)]
    # Kernels the calibration lacks are timed by the compile itself: on
    # rank 0's core with one thread, as validate.py's profile timed the rest.
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    if args.openblas_coretype:
        env["OPENBLAS_CORETYPE"] = args.openblas_coretype
    log = os.path.join(v.out, "logs", s.name + ".compile.log")
    with open(log, "w") as f:
        try:
            rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env,
                                timeout=args.compile_timeout).returncode
        except subprocess.TimeoutExpired:
            raise RuntimeError("oflite compile ran past --compile-timeout %d s (log %s)"
                               % (args.compile_timeout, log))
    if rc != 0:
        with open(log) as f:
            tail = " | ".join(f.read().strip().splitlines()[-3:])
        raise RuntimeError("oflite compile --auto-parallel exited %d: %s (log %s)" % (rc, tail, log))
    done = subprocess.run([args.oflite, "inspect", plan], capture_output=True, text=True, timeout=300)
    with open(os.path.join(v.out, s.name + ".inspect.txt"), "w") as f:
        f.write(done.stdout)
    if done.returncode != 0:
        raise RuntimeError("oflite inspect %s exited %d: %s" % (plan, done.returncode,
                                                                done.stderr.strip()[-200:]))
    s.chosen, s.predicted, s.evaluated, s.note = parse_inspect(done.stdout)
    s.plan = plan


class MlpDdp(scaling.Bench):
    """scaling.py's DDP peer of the MLP with its ranks pinned as the oflite
    ranks are (gpt_layouts.Bench.prefix: rank r on cores[r mod len]);
    scaling.Bench's own prefix wants a core per rank."""

    def prefix(self, rank):
        return gpt_layouts.Bench.prefix(self, rank)


def fmt(x, spec="%.2f", none="-"):
    return spec % x if x is not None else none


def verdicts(s, hand_given):
    """(vs DDP, vs hand) as 'ok', 'NO' or '-' (not measured / not given)."""
    auto, ddp = s.median("auto"), s.median("ddp")
    vs_ddp = "-" if auto is None or ddp is None else ("ok" if ddp / auto >= ddp_target(s.rate) else "NO")
    vs_hand = "-"
    if hand_given and auto is not None and s.hand:
        vs_hand = "ok" if auto <= s.hand[1] * HAND_MARGIN else "NO"
    return vs_ddp, vs_hand


def report(args, settings, hand_doc):
    """Prints the table and the acceptance line; returns the JSON rows."""
    hand_given = hand_doc is not None
    width = max([len("chosen layout")] + [len(s.chosen) for s in settings if s.chosen])
    line = "%-5s %5s %-7s %-" + str(width) + "s %9s %9s %8s %9s %8s %7s %6s %-3s %-8s %9s %-3s"
    print("\n" + line % ("model", "hosts", "rate", "chosen layout", "predicted", "auto ms", "auto CPU",
                         "DDP ms", "DDP CPU", "speedup", "target", "ok", "hand*", "hand* ms", "5%"))
    rows = []
    for s in settings:
        auto, ddp = s.median("auto"), s.median("ddp")
        speedup = ddp / auto if auto and ddp else None
        vs_ddp, vs_hand = verdicts(s, hand_given)
        print(line % (
            s.model, s.hosts, s.rate, s.chosen or "failed", fmt(s.predicted), fmt(auto),
            fmt(s.median("auto", 1)), fmt(ddp), fmt(s.median("ddp", 1)), fmt(speedup, "%.2fx"),
            "%.0fx" % ddp_target(s.rate), vs_ddp, s.hand[0] if s.hand else "-",
            fmt(s.hand[1] if s.hand else None), vs_hand))
        rows.append({"setting": s.name, "model": s.model, "hosts": s.hosts, "rate": s.rate,
                     "chosen": s.chosen, "evaluated": s.evaluated, "search_note": s.note,
                     "plan": s.plan, "predicted_ms": s.predicted,
                     "auto_samples": s.samples["auto"], "ddp_samples": s.samples["ddp"],
                     "auto_ms": auto, "ddp_ms": ddp, "auto_cpu_ms": s.median("auto", 1),
                     "ddp_cpu_ms": s.median("ddp", 1), "speedup": speedup,
                     "target": ddp_target(s.rate), "meets_ddp_target": vs_ddp == "ok",
                     "hand_layout": s.hand[0] if s.hand else None,
                     "hand_ms": s.hand[1] if s.hand else None,
                     "within_5pct_of_hand": (vs_hand == "ok") if vs_hand != "-" else None})
    print("medians of %d; ms per step: wall on rank 0 (steps %d+%d+%d); CPU: user+sys of all ranks "
          "per step; predicted: the chosen candidate's simulated step (oflite inspect); speedup = "
          "DDP / auto, target: 2x at <= 1 Gbit/s, 1x faster; ok: speedup >= target"
          % (args.repeats, args.warmup, args.measure, args.warmup))
    if hand_given:
        print("hand*: the fastest hand-written layout of ANOTHER run (--hand %s: %s repeats, steps "
              "%s+%s+%s), not measured here; 5%%: auto ms <= 1.05 x hand* ms"
              % (args.hand, hand_doc.get("repeats", "?"), hand_doc.get("warmup", "?"),
                 hand_doc.get("measure", "?"), hand_doc.get("warmup", "?")))
        if (hand_doc.get("warmup"), hand_doc.get("measure")) != (args.warmup, args.measure):
            print("WARNING: that run's steps differ from this run's %d+%d+%d: hand* compares little"
                  % (args.warmup, args.measure, args.warmup))
    else:
        print("hand*: not given (--hand ROWS.json of a validate.py run); the 5 % criterion is unchecked")
    if max(args.hosts) > len(args.cores):
        print("more hosts than cores: ranks share cores, both frameworks alike")
    for s in settings:
        if s.note:
            print("note %s: the search said: %s" % (s.name, s.note))
    # The claim: >= 2x DDP and within 5 % of the best hand layout at 1 Gbit/s;
    # no slower than DDP beyond.
    failing, unchecked = [], []
    for s in settings:
        vs_ddp, vs_hand = verdicts(s, hand_given)
        slow_link = validate.gbit_per_s(s.rate) <= 1.0
        if vs_ddp == "NO" or (slow_link and vs_hand == "NO"):
            failing.append(s.name)
        elif vs_ddp == "-" or (slow_link and vs_hand == "-"):
            unchecked.append(s.name)
    print("acceptance (>= 2x DDP and within 5%% of the best hand-written layout at <= 1 Gbit/s, >= 1x "
          "DDP faster): %d of %d settings pass%s%s" % (
              len(settings) - len(failing) - len(unchecked), len(settings),
              "; FAIL: " + ", ".join(failing) if failing else "",
              "; not decided (a figure is missing): " + ", ".join(unchecked) if unchecked else ""))
    return rows


def run(args, hosts, out, hand):
    """Everything between the hosts' start and their teardown; returns the
    exit status."""
    failed = False
    v = validate.Validation(args, hosts, out)
    # Three benches, three port ranges (each sample takes the next port).
    v.bench.port = 30000
    v.bench.token = "auto-vs-ddp-%d" % os.getpid()
    mlp_ddp = MlpDdp(args, hosts, os.path.join(out, "logs", "mlp"))
    mlp_ddp.port = 31000
    gpt_ddp = gpt_layouts.Bench(v.bench.args, hosts, os.path.join(out, "logs", "gpt"))
    gpt_ddp.port = 32000
    for folder in (mlp_ddp.tmp, gpt_ddp.tmp):
        os.makedirs(folder, exist_ok=True)
    calibration = os.path.join(out, "calibration.pbtxt")
    if os.path.abspath(calibration) != args.calibration:
        shutil.copyfile(args.calibration, calibration)
    settings = [Setting(m, n, r) for m in args.models for n in args.hosts for r in args.rates]
    best, hand_doc = hand if hand else ({}, None)
    for s in settings:
        s.hand = best.get((s.model, s.hosts, s.rate))
    print("auto_vs_ddp: %d setting(s), out dir %s, steps %d+%d+%d, %d repeat(s), cores %s, "
          "OPENBLAS_CORETYPE=%s, calibration %s (copied from %s), %s" % (
              len(settings), out, args.warmup, args.measure, args.warmup, args.repeats, args.cores,
              args.openblas_coretype or "unset", calibration, args.calibration, scaling.load()),
          flush=True)
    if "mlp" in args.models:
        print("mlp: 784-2048-2048-10, global batch %d" % args.mlp_batch)
    if "gpt" in args.models:
        print("gpt: %d layers, %d heads, %d channels, block %d, global batch %d"
              % (args.layers, args.heads, args.channels, args.block, args.gpt_batch))
    for rate in args.rates:
        try:
            ok = validate.measure_network(args, hosts, v, rate)
        except (RuntimeError, subprocess.SubprocessError, OSError) as error:
            print("link %s: FAILED: %s" % (rate, error), flush=True)
            ok = False
        if not ok:
            return 1
    try:
        validate.measure_paths(args, hosts, v, args.hosts, calibration)
    except (RuntimeError, subprocess.SubprocessError, OSError) as error:
        print("path probe FAILED: %s" % error, flush=True)
        return 1
    ready = []
    for s in settings:
        try:
            compile_auto(args, v, s, calibration)
        except (RuntimeError, subprocess.SubprocessError, OSError) as error:
            print("compile %s FAILED: %s" % (s.name, error), flush=True)
            failed = True
            continue
        ready.append(s)
        print("compile %-20s chose %-24s %9.2f ms predicted (of %d candidates)%s"
              % (s.name, s.chosen, s.predicted, s.evaluated, "; " + s.note if s.note else ""),
              flush=True)
    runs = [(s, fw) for s in ready for fw in ("auto", "ddp")]
    for rep in range(args.repeats):
        for s, fw in runs if rep % 2 == 0 else runs[::-1]:
            hosts.shape(s.rate)
            what = "rep %d %-20s %-4s" % (rep, s.name, fw)
            try:
                if fw == "auto":
                    wall, cpu, last = v.bench.run_plan(
                        s.plan, s.hosts, os.path.join(out, "logs", "%s.rep%d" % (s.name, rep)))
                elif s.model == "mlp":
                    wall, cpu, last = mlp_ddp.ddp("mlp", s.hosts, args.mlp_batch)
                else:
                    wall, cpu, last = gpt_ddp.ddp("dp", s.hosts)
            except (RuntimeError, subprocess.SubprocessError, OSError) as error:
                print("%s FAILED: %s" % (what, error), flush=True)
                failed = True
                continue
            s.samples[fw].append((wall / args.measure * 1e3, cpu / args.measure * 1e3))
            print("%s step %8.2f ms  CPU %8.2f ms  (%s)" % (what, s.samples[fw][-1][0],
                                                           s.samples[fw][-1][1], last[:50]), flush=True)
        print("after rep %d: %s" % (rep, scaling.load()), flush=True)
    rows = report(args, settings, hand_doc)
    if args.json:
        doc = {"out_dir": out, "calibration": calibration, "repeats": args.repeats,
               "warmup": args.warmup, "measure": args.measure, "hand": args.hand or None,
               "latency_us": v.latency, "link_gbit": v.link_gbit, "link_cpu_ns_per_byte": v.link_cpu,
               "rows": rows}
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
        print("rows: %s" % args.json)
    print("out dir: %s" % out)
    return 1 if failed else 0


def main():
    args = parse_args()
    hand = None
    if args.hand:
        try:
            hand = read_hand(args.hand)
        except ValueError as error:
            print("auto_vs_ddp: %s" % error, file=sys.stderr)
            return 2
    if os.geteuid() != 0:
        print("auto_vs_ddp: needs root (ip netns, tc)", file=sys.stderr)
        return 2
    check = subprocess.run([scaling.NETNS, "check"], capture_output=True, text=True)
    if check.returncode != 0:
        print("auto_vs_ddp: network namespaces unavailable: " + check.stdout.strip(), file=sys.stderr)
        return 2
    why = missing(args)
    if why:
        print("auto_vs_ddp: " + why, file=sys.stderr)
        return 2
    out = os.path.abspath(args.out_dir) if args.out_dir else tempfile.mkdtemp(prefix="auto_vs_ddp.")
    os.makedirs(out, exist_ok=True)
    print("auto_vs_ddp: out dir %s; before: %s" % (out, scaling.load()), flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        hosts = scaling.Hosts(max(args.hosts))
    except (RuntimeError, subprocess.SubprocessError, OSError) as error:
        print("auto_vs_ddp: %s" % error, file=sys.stderr)
        return 1
    try:
        return run(args, hosts, out, hand)
    finally:
        hosts.close()
        print("after: %s" % scaling.load(), flush=True)


if __name__ == "__main__":
    sys.exit(main())
