#!/bin/bash
# validate.py's parsers of a calibration (the tcp transport's own
# cpu_ns_per_byte, not another transport's or a collective's; the runtime's
# copy speed) and its choice of an oflite rank's communication threads: the
# figures its communication reference subtracts and sums (docs/simulate.md,
# "The communication reference"). No root, no namespaces.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
cat > "$TMP/cal.pbtxt" <<'CAL'
runtime {
  act_us: 0.03
  copy_gbyte_per_s: 14.25
  cache_bytes: 90000000
}
kernel {
  key: "matmul float32 cpu/t1 in=2x2,2x2 out=2x2 {}"
  us: 1.5
}
transport {
  name: "shm"
  latency_us: 1.2
  cpu_ns_per_byte: 0.086
}
transport {
  name: "tcp"
  latency_us: 4.7
  collective {
    algorithm: COLLECTIVE_RING_ALL_REDUCE
    ranks: 2
    point {
      bytes: 4096
      us: 43.9
    }
  }
  gbyte_per_s: 7.08
  cpu_ns_per_byte: 0.144324
  busy_message_us: 49.39
}
CAL
printf 'runtime {\n  act_us: 0.03\n}\ntransport {\n  name: "shm"\n  cpu_ns_per_byte: 0.086\n}\n' > "$TMP/no_tcp.pbtxt"
cd "$HERE"
/usr/bin/python3 - "$TMP" <<'PY'
import statistics
import sys
import validate
tmp = sys.argv[1]
failures = []
def check(what, got, want):
    if got != want:
        failures.append("%s: got %r, want %r" % (what, got, want))
check("tcp cpu_ns_per_byte", validate.transport_cpu_ns_per_byte(tmp + "/cal.pbtxt"), 0.144324)
check("shm cpu_ns_per_byte", validate.transport_cpu_ns_per_byte(tmp + "/cal.pbtxt", "shm"), 0.086)
check("no tcp transport", validate.transport_cpu_ns_per_byte(tmp + "/no_tcp.pbtxt"), None)
check("copy speed", validate.runtime_copy_gbyte_per_s(tmp + "/cal.pbtxt"), 14.25)
check("copy speed unset", validate.runtime_copy_gbyte_per_s(tmp + "/no_tcp.pbtxt"), 5.0)
for name, want in [("oflite-tcp", True), ("oflite-coll", True), ("m3/cpu0/s5", True),
                   ("m0/cpu0/s0", False), ("m0/cpu0/s6", False), ("oflite-ctrl", False)]:
    check("comm thread %s" % name, validate.is_comm_thread(name), want)
# The compute check: kernel CPU a step from a --trace-cpu trace (only
# kernel slices count), and the ratios' median over ranks with predictions.
import json
trace = {"otherData": {"cpu_time": True}, "traceEvents": [
    {"ph": "X", "cat": "kernel", "name": "a", "dur": 900, "args": {"cpu_us": 600}},
    {"ph": "X", "cat": "kernel", "name": "b", "dur": 500, "args": {"cpu_us": 400}},
    {"ph": "X", "cat": "act", "name": "a", "dur": 2000, "args": {"iteration": 3}},
    {"ph": "M", "name": "thread_name", "args": {"name": "m0/cpu0/s0"}}]}
with open(tmp + "/rank-0.json", "w") as f:
    json.dump(trace, f)
check("kernel cpu a step", validate.trace_kernel_cpu_ms(tmp + "/rank-0.json", 2), 0.5)
trace["otherData"]["cpu_time"] = False
with open(tmp + "/plain.json", "w") as f:
    json.dump(trace, f)
try:
    validate.trace_kernel_cpu_ms(tmp + "/plain.json", 2)
    failures.append("a trace without --trace-cpu was read")
except ValueError:
    pass
rows = [validate.Config("mlp", "dp", 2, "1gbit") for _ in range(3)]
rows[0].kernel_cpu_ms, rows[0].predicted_compute_ms = [12.0, 9.0], [10.0, 10.0]
rows[1].kernel_cpu_ms, rows[1].predicted_compute_ms = [30.0, 33.0], [20.0, None]
check("compute ratio median", validate.summarize_compute(rows), 1.05)
check("no compute rows", validate.summarize_compute(rows[2:]), None)
# The CPU check: a thread's CPU from its schedstat (this process's main
# thread, which just spun), the medians over samples per rank, and the
# ratios' median over ranks with predictions.
import os, time
t0 = time.process_time()
while time.process_time() - t0 < 0.05:
    pass
name, seconds = validate.thread_cpu(os.getpid(), str(os.getpid()))
if not (seconds >= 0.05 and seconds <= time.process_time() + 0.01):
    failures.append("thread_cpu of this thread: %r s against %r s of process time"
                    % (seconds, time.process_time()))
check("thread_cpu of a thread that is gone", validate.thread_cpu(os.getpid(), "999999999"), None)
if "python" not in "".join(validate.threads_cpu_seconds(os.getpid())):
    failures.append("threads_cpu_seconds names no python thread: %r"
                    % validate.threads_cpu_seconds(os.getpid()))
c = validate.Config("gpt", "dp", 2, "1gbit")
c.samples = [100.0, 110.0, 90.0]
c.cpu_samples = [[(80.0, 8.0), (70.0, 7.0)], [(90.0, 9.0), (60.0, 6.0)], [(85.0, 5.0), (65.0, 5.0)],
                 [(999.0, 99.0)]]  # a sample missing a rank is left out
check("cpu check medians", validate.cpu_check(c), [(85.0, 8.0), (65.0, 6.0)])
c.predicted, c.predicted_cpu_ms, c.predicted_comm_cpu_ms = 80.0, [50.0, 100.0], [4.0, 4.0]
class Args: cores = [0, 1]
check("cpu ratio median", validate.summarize_cpu(Args, [c]), (85.0 / 50.0 + 65.0 / 100.0) / 2)
c.cpu_samples = []
check("no cpu rows", validate.summarize_cpu(Args, [c]), None)
# The measured order within repeats (val_25's MLP, 4 hosts, 10 Gbit/s): tp's
# median is lower, but dp ran faster in 3 of the 5 repeats, the median of
# the repeats' ratios 1.014.
tp, dp = validate.Config("mlp", "tp", 4, "10gbit"), validate.Config("mlp", "dp", 4, "10gbit")
tp.samples, tp.sample_reps = [116.6, 106.7, 108.1, 112.6, 107.6], [0, 1, 2, 3, 4]
dp.samples, dp.sample_reps = [115.0, 99.7, 117.5, 102.9, 114.8], [0, 1, 2, 3, 4]
check("paired ratio", round(validate.paired_ratio(tp, dp), 4), round(116.6 / 115.0, 4))
check("medians", validate.median(tp) < validate.median(dp), True)
check("faster within repeats", validate.measured_faster(dp, tp), True)
check("slower within repeats", validate.measured_faster(tp, dp), False)
# A sample that failed (no repeat 2 for tp) leaves the other repeats paired.
tp.samples, tp.sample_reps = [116.6, 106.7, 112.6, 107.6], [0, 1, 3, 4]
check("paired ratio, a repeat missing", round(validate.paired_ratio(tp, dp), 4),
      round(statistics.median([116.6 / 115.0, 106.7 / 99.7, 112.6 / 102.9, 107.6 / 114.8]), 4))
tp.samples, tp.sample_reps = [116.6, 106.7, 108.1, 112.6, 107.6], [0, 1, 2, 3, 4]
slow, fast = tp, dp
third = validate.Config("mlp", "dp_tp", 4, "10gbit")
third.samples, third.sample_reps = [50.0, 70.0, 52.0, 69.0, 65.0], [0, 1, 2, 3, 4]
check("paired order", validate.paired_order([slow, fast, third]), ["dp_tp", "dp", "tp"])
# Too few repeats in common: the medians decide, and no paired order.
few = validate.Config("mlp", "pp", 4, "10gbit")
few.samples, few.sample_reps = [90.0, 200.0], [1, 3]
check("paired ratio, two repeats", validate.paired_ratio(few, slow), None)
check("medians when unpaired", validate.measured_faster(few, slow), False)
check("no paired order", validate.paired_order([slow, few]), None)
# The verdict counts pairs within repeats; the medians' count goes beside it.
class SumArgs: repeats, warmup, measure, measure_only = 5, 5, 20, False
slow.predicted, fast.predicted, third.predicted = 90.0, 95.0, 50.0
setting = validate.summarize(SumArgs, [slow, fast, third])["settings"][0]
check("verdict within repeats", (setting["same_order"], setting["pairs_agreeing"]), (False, 2))
slow.predicted, fast.predicted = 95.0, 90.0
setting = validate.summarize(SumArgs, [slow, fast, third])["settings"][0]
check("verdict agrees", (setting["same_order"], setting["pairs_agreeing"],
                         setting["same_order_by_medians"]), (True, 3, False))
# --resummarize: an earlier run's JSON again (rows without sample_reps take
# their samples in repeat order); a file that is not one: exit 2.
doc = {"repeats": 5, "rows": [
    {"model": "mlp", "layout": "tp", "hosts": 4, "rate": "10gbit", "predicted_ms": 95.0,
     "samples_ms": [116.6, 106.7, 108.1, 112.6, 107.6]},
    {"model": "mlp", "layout": "dp", "hosts": 4, "rate": "10gbit", "predicted_ms": 90.0,
     "samples_ms": [115.0, 99.7, 117.5, 102.9, 114.8], "sample_reps": [0, 1, 2, 3, 4]}]}
with open(tmp + "/rows.json", "w") as f:
    json.dump(doc, f)
class Again(SumArgs): resummarize = tmp + "/rows.json"
check("resummarize", validate.resummarize(Again), 0)
Again.resummarize = tmp + "/no_tcp.pbtxt"
check("resummarize a file that is not one", validate.resummarize(Again), 2)
# --thread-cpu: per rank, each thread's median over the samples that saw
# every rank; a thread a sample lacks counts 0 there.
rows = validate.Config("gpt", "pp", 2, "10gbit")
rows.thread_samples = [
    [{"m0/cpu0/s0": 50.0, "oflite-tcp": 2.0}, {"m1/cpu0/s0": 40.0}],
    [{"m0/cpu0/s0": 54.0, "oflite-tcp": 4.0}, {"m1/cpu0/s0": 44.0, "oflite-ctl": 3.0}],
    [{"m0/cpu0/s0": 52.0}, {"m1/cpu0/s0": 42.0, "oflite-ctl": 1.0}],
    [{"m0/cpu0/s0": 99.0}]]  # rank 1 missing: left out
check("threads by name", validate.threads_by_name(rows),
      [{"m0/cpu0/s0": 52.0, "oflite-tcp": 2.0}, {"m1/cpu0/s0": 42.0, "oflite-ctl": 1.0}])
check("threads by name, no full sample", validate.threads_by_name(validate.Config("gpt", "pp", 2, "1gbit")), None)
# Recalibration: a row's prediction is the median of its rounds' (one per
# calibration), its per-machine figures the element-wise medians (a None
# where every round lacks it), the first round's step kept beside it; the
# first calibration's errors and orders are summarized too.
r = validate.Config("mlp", "pp", 2, "1gbit")
r.samples, r.sample_reps = [100.0, 104.0, 96.0], [0, 1, 2]
for rep, step, compute in ((0, 80.0, [10.0, None]), (1, 120.0, [30.0, None]), (2, 101.0, [14.0, None])):
    r.rounds.append({"rep": rep, "step_ms": step, "compute_ms": compute, "cpu_ms": [1.0, 2.0],
                     "comm_cpu_ms": [0.0, 0.5]})
validate.combine_rounds(r)
check("rounds' median", (r.predicted, r.predicted_first), (101.0, 80.0))
check("rounds' per-machine medians", (r.predicted_compute_ms, r.predicted_cpu_ms), ([14.0, None], [1.0, 2.0]))
check("first calibration's error", validate.error_pct(r, r.predicted_first), -20.0)
check("median lists, lengths differ", validate.median_lists([[1.0], [1.0, 2.0]]), None)
q = validate.Config("mlp", "dp", 2, "1gbit")
q.samples, q.sample_reps = [90.0, 95.0, 92.0], [0, 1, 2]
q.rounds = [{"rep": 0, "step_ms": 85.0, "compute_ms": [], "cpu_ms": [], "comm_cpu_ms": []},
            {"rep": 1, "step_ms": 130.0, "compute_ms": [], "cpu_ms": [], "comm_cpu_ms": []},
            {"rep": 2, "step_ms": 128.0, "compute_ms": [], "cpu_ms": [], "comm_cpu_ms": []}]
validate.combine_rounds(q)
# dp measured faster than pp: the rounds' medians (dp 128, pp 101) and the
# first calibration (85 and 80) both put pp first; a first round of 70 agrees.
check("orders, rounds' medians", validate.orders_agreeing([r, q], lambda c: c.predicted), (0, 1))
check("orders, first calibration", validate.orders_agreeing([r, q], lambda c: c.predicted_first), (0, 1))
q.rounds[0]["step_ms"] = 70.0
validate.combine_rounds(q)
check("orders, first calibration agreeing", validate.orders_agreeing([r, q], lambda c: c.predicted_first), (1, 1))
doc = validate.summarize(SumArgs, [r, q])
check("summary of the first calibration", (doc["calibrations"], doc["first_calibration"]["same_orders"],
                                           round(doc["first_calibration"]["median_abs_error_pct"], 3)),
      (3, 1, round(statistics.median([20.0, abs(70.0 - 92.0) / 92.0 * 100]), 3)))
check("round predictions in the rows", doc["rows"][0]["round_predictions"][1], {"rep": 1, "step_ms": 120.0})
# The kernel-speed diagnostic scales the kernels' times only: not a
# collective's curve points (also "us"), not the runtime's act_us.
cal = open(tmp + "/cal.pbtxt").read() + 'kernel {\n  key: "relu"\n  us: 2\n  in_situ_us: 3\n  cold_us: 4\n}\n'
scaled = validate.scale_kernel_times(cal, 1.5)
check("kernel times scaled", [l.strip() for l in scaled.split("\n")
                              if l.strip().split(":")[0] in ("us", "in_situ_us", "cold_us")],
      ["us: 2.25", "us: 43.9", "us: 3", "in_situ_us: 4.5", "cold_us: 6"])
check("the rest unchanged", [l for l in scaled.split("\n") if "us:" not in l],
      [l for l in cal.split("\n") if "us:" not in l])
check("act_us unchanged", "act_us: 0.03" in scaled, True)
# The samples' factor reads the compute threads (stream 0 of each CPU device)
# only: not a copy stream's thread, not the transport's.
w = validate.Config("gpt", "pp", 2, "1gbit")
w.thread_cpu_row = [{"m0/cpu0/s0": 70.0, "m0/cpu0/s3": 1.5, "oflite-tcp": 4.0},
                    {"m1/cpu0/s0": 60.0, "m1/cpu1/s0": 5.0, "m1/cpu0/s5": 2.0}]
check("compute threads' CPU", validate.compute_thread_cpu_ms(w), [70.0, 65.0])
if failures:
    print("FAIL:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("PASS: validate.py's calibration parsers, communication threads, CPU and order checks")
PY
