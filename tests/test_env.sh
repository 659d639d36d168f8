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
