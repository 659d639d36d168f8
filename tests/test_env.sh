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

# free_port: prints a TCP port that is free on 127.0.0.1 right now (the
# kernel picks it: a bound-then-closed socket), so concurrent tests do not
# collide the way random picks from a fixed range did.
free_port() {
  /usr/bin/python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
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
