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
if failures:
    print("FAIL:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("PASS: validate.py's calibration parsers and communication threads")
PY
