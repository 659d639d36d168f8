#!/usr/bin/python3
"""Two oflite builds against each other on namespace hosts, alternating.

  ab_builds.py --old OLD_OFLITE --new NEW_OFLITE --what compiler CASE...
      each CASE is JOB:CLUSTER:HOSTS:RATE:NAME; the job is compiled by each
      build (`oflite compile --job JOB --cluster CLUSTER`) and both plans
      are run by the new build: what a compiler change does to the step
  ab_builds.py --old OLD_OFLITE --new NEW_OFLITE --what runtime CASE...
      each CASE is PLAN:HOSTS:RATE:NAME; the same plan file is run by each
      build: what a runtime change does to the step

Per case, --repeats pairs of samples (old and new alternating, the first
of each pair swapping), each the step time of one run (steps
--warmup + --measure + --warmup, the window's wall time over --measure), then
the two medians and new / old. The ranks run as gpt_layouts.py runs them
(pinned, rank r on cores[r mod 2], OPENBLAS_NUM_THREADS=1, over tcp); the
load average is printed before each case. Plans must hold at least
2 x warmup + measure iterations. Needs root (namespace hosts,
tests/netns/netns.sh); runs from a built tree. Used for the A/B figures of
docs/compiler.md ("Gradient buckets") and docs/benchmarks.md (the
all-to-all of blocks); history 2026-12-06-0549.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt_layouts  # noqa: E402
import scaling  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--old", required=True, help="the oflite binary before the change")
    p.add_argument("--new", required=True, help="the oflite binary after it")
    p.add_argument("--what", choices=("compiler", "runtime"), required=True)
    p.add_argument("--repeats", type=int, default=5, help="pairs of samples per case")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--measure", type=int, default=20)
    p.add_argument("--timeout", type=int, default=900, help="bound of one sample, seconds")
    p.add_argument("--out-dir", default=None, help="plans and logs (default: a temporary folder)")
    p.add_argument("cases", nargs="+")
    args = p.parse_args()
    fields = 5 if args.what == "compiler" else 4
    for case in args.cases:
        if len(case.split(":")) != fields:
            p.error("case '%s': want %s" % (case, "JOB:CLUSTER:HOSTS:RATE:NAME" if fields == 5
                                            else "PLAN:HOSTS:RATE:NAME"))
    for binary in (args.old, args.new):
        if not os.access(binary, os.X_OK):
            p.error("%s is not an executable" % binary)
    return args


def main():
    args = parse_args()
    out = args.out_dir or tempfile.mkdtemp(prefix="ab_builds.")
    os.makedirs(out, exist_ok=True)
    bench_args = argparse.Namespace(warmup=args.warmup, measure=args.measure, timeout=args.timeout,
                                    cores=[0, 1], oflite=args.new,
                                    openblas_coretype=scaling.openblas_core_for_cpu())
    hosts = scaling.Hosts(4)
    try:
        bench = gpt_layouts.Bench(bench_args, hosts, out)
        for case in args.cases:
            parts = case.split(":")
            name, rate, n = parts[-1], parts[-2], int(parts[-3])
            hosts.shape(rate)
            plans, binaries = {}, {}
            for tag, binary in (("old", args.old), ("new", args.new)):
                if args.what == "compiler":
                    plans[tag] = os.path.join(out, "%s.%s.plan.pb" % (name, tag))
                    subprocess.run([binary, "compile", "--job", parts[0], "--cluster", parts[1],
                                    "-o", plans[tag], "--quiet"], check=True, timeout=300)
                    binaries[tag] = args.new
                else:
                    plans[tag] = parts[0]
                    binaries[tag] = binary
            steps = {"old": [], "new": []}
            print("%s: %s, load average %s" % (name, args.what, " ".join(
                open("/proc/loadavg").read().split()[:3])), flush=True)
            for r in range(args.repeats):
                for tag in (("old", "new") if r % 2 == 0 else ("new", "old")):
                    bench.args.oflite = binaries[tag]
                    wall, _, _ = bench.run_plan(plans[tag], n, os.path.join(out, name + "." + tag))
                    steps[tag].append(wall / args.measure * 1e3)
            old, new = statistics.median(steps["old"]), statistics.median(steps["new"])
            for tag in ("old", "new"):
                print("  %s %s" % (tag, " ".join("%.1f" % x for x in steps[tag])), flush=True)
            print("  median old %.2f new %.2f ms  new/old %.3f" % (old, new, new / old), flush=True)
    finally:
        hosts.close()
    print("out dir: %s" % out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
