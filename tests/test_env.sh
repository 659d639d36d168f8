# shellcheck shell=bash
# The shell tests' environment (tests/ and tools/oflite/), sourced first:
#   source "${TEST_SRCDIR}/oneflow_lite/tests/test_env.sh"
#   fresh_tmp NAME        # TMP=$TEST_TMPDIR/NAME, created empty
# Sets OFLITE and WRITE_JOB (the programs under test; a test lists them in
# its data) and fail=0, the test's result so far.
OFLITE="${TEST_SRCDIR}/oneflow_lite/tools/oflite/oflite"
WRITE_JOB="${TEST_SRCDIR}/oneflow_lite/oneflow_lite/testing/write_test_job"
fail=0

fresh_tmp() {
  TMP="${TEST_TMPDIR:-/tmp}/$1"
  rm -rf "$TMP"
  mkdir -p "$TMP"
}

# free_port [COUNT]: prints a TCP port P such that P .. P+COUNT-1 (COUNT
# defaults to 8: tests step to P+1, P+2 for later jobs) can all be bound on
# every interface right now. The ports come from below the kernel's
# ephemeral range, so no outgoing connection of a concurrent test takes one
# between this check and the job's listen (a port the kernel handed out for
# a bind to port 0 could be reused that way), and each is checked, so two
# tests do not collide the way unchecked random picks did.
free_port() {
  /usr/bin/python3 - "${1:-8}" <<'PY'
import random, socket, sys
count = int(sys.argv[1])
try:
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except (OSError, ValueError, IndexError):
    low = 32768
low = min(low, 32768)
rng = random.SystemRandom()
for _ in range(2000):
    start = rng.randrange(10000, low - count)
    held = []
    try:
        for port in range(start, start + count):
            s = socket.socket()
            held.append(s)
            s.bind(("0.0.0.0", port))
    except OSError:
        continue
    finally:
        for s in held:
            s.close()
    print(start)
    sys.exit(0)
sys.exit("free_port: no %d free consecutive ports below %d" % (count, low))
PY
}

# loopback_cluster FILE MACHINES [DEVICES]: a cluster of MACHINES machines at
# 127.0.0.1, 127.0.0.2, ..., DEVICES (default 1) CPU devices each.
loopback_cluster() {
  : > "$1"
  local m
  for ((m = 0; m < $2; ++m)); do
    echo "machine { id: $m address: \"127.0.0.$((m + 1))\" cpu_devices: ${3:-1} }" >> "$1"
  done
}

# compile_mlp NAME CLUSTER WRITE_JOB_ARGS...: $TMP/NAME.job.pb from
# write_test_job with the caller's MLP array of arguments and the rest,
# compiled for CLUSTER into $TMP/NAME.plan.pb; a failure sets fail=1 and
# shows the tail of the output.
compile_mlp() {
  local name=$1 cl=$2; shift 2
  "$WRITE_JOB" "$TMP/$name.job.pb" "${MLP[@]}" "$@" > "$TMP/out" 2>&1 &&
    "$OFLITE" compile --job "$TMP/$name.job.pb" --cluster "$cl" -o "$TMP/$name.plan.pb" --quiet \
        > "$TMP/out" 2>&1 || { echo "FAIL: compile $name"; tail -20 "$TMP/out"; fail=1; }
}
