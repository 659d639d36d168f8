#!/usr/bin/env bash
# The oflite CLI: help for every subcommand, bad plan files (and what is no
# plan at all, such as /dev/zero) rejected with exit code 2 and a message
# naming the file, and compile's output folder checked before compiling.
set -u
OFLITE="${TEST_SRCDIR}/oneflow_lite/tools/oflite/oflite"
TMP="${TEST_TMPDIR:-/tmp}"
fail=0
check() {  # check DESCRIPTION EXPECTED_RC ACTUAL_RC
  if [[ "$2" != "$3" ]]; then echo "FAIL: $1: exit $3, expected $2"; fail=1; else echo "ok: $1"; fi
}
expect_in() {  # expect_in DESCRIPTION NEEDLE FILE
  if ! grep -q -- "$2" "$3"; then echo "FAIL: $1: '$2' not in output:"; cat "$3"; fail=1; fi
}

"$OFLITE" version > "$TMP/out" 2>&1; check "version" 0 $?
expect_in "version text" "plan format" "$TMP/out"
"$OFLITE" > "$TMP/out" 2>&1; check "no command" 2 $?
"$OFLITE" frobnicate > "$TMP/out" 2>&1; check "unknown command" 2 $?
expect_in "unknown command named" "frobnicate" "$TMP/out"
for cmd in compile inspect run launch; do
  "$OFLITE" $cmd --help > "$TMP/out" 2>&1; check "$cmd --help" 0 $?
  expect_in "$cmd usage" "usage: oflite $cmd" "$TMP/out"
done
"$OFLITE" inspect --bogus x.pb > "$TMP/out" 2>&1; check "inspect unknown flag" 2 $?
expect_in "unknown flag named" "bogus" "$TMP/out"

# Bad plan files: missing, empty, garbage, truncated, future version.
"$OFLITE" inspect "$TMP/nope.plan.pb" > "$TMP/out" 2>&1; check "missing plan" 2 $?
expect_in "missing plan named" "nope.plan.pb" "$TMP/out"
: > "$TMP/empty.pb"
"$OFLITE" inspect "$TMP/empty.pb" > "$TMP/out" 2>&1; check "empty plan" 2 $?
expect_in "empty plan named" "empty.pb" "$TMP/out"
head -c 4096 /dev/urandom > "$TMP/garbage.pb"
printf '\xff\xff\xff\xff\xff' >> "$TMP/garbage.pb"
"$OFLITE" inspect "$TMP/garbage.pb" > "$TMP/out" 2>&1; check "garbage plan" 2 $?
expect_in "garbage plan named" "garbage.pb" "$TMP/out"
# A valid version-2 plan: field 1 (version) = 2, field 5 (total_iters) = 300.
printf '\x08\x02\x28\xac\x02' > "$TMP/good.pb"
"$OFLITE" inspect "$TMP/good.pb" > "$TMP/out" 2>&1; check "good plan" 0 $?
expect_in "good plan summary" "version 2" "$TMP/out"
# An old version-1 plan (before run settings, the evaluation plan and
# collective algorithms were Plan fields): refused, with a hint to recompile.
printf '\x08\x01\x28\xac\x02' > "$TMP/old.pb"
"$OFLITE" inspect "$TMP/old.pb" > "$TMP/out" 2>&1; check "old plan" 2 $?
expect_in "old version explained" "recompile it with \`oflite compile\`" "$TMP/out"
"$OFLITE" run --plan "$TMP/old.pb" > "$TMP/out" 2>&1; check "run refuses an old plan" 2 $?
expect_in "run names the old plan" "old.pb' is a plan of version 1" "$TMP/out"
# Truncated: cut the varint of total_iters.
printf '\x08\x01\x28\xac' > "$TMP/trunc.pb"
"$OFLITE" inspect "$TMP/trunc.pb" > "$TMP/out" 2>&1; check "truncated plan" 2 $?
# Future version 99.
printf '\x08\x63' > "$TMP/future.pb"
"$OFLITE" inspect "$TMP/future.pb" > "$TMP/out" 2>&1; check "future plan" 2 $?
expect_in "future version explained" "newer" "$TMP/out"
"$OFLITE" compile --help > /dev/null 2>&1; check "compile help" 0 $?

# Not a plan at all, refused at once naming the file: /dev/zero (a device
# that never ends: inspect used to read it until it died of bad_alloc at
# 8 GB), and a 3-byte garbage file.
start=$(date +%s)
timeout 30 "$OFLITE" inspect /dev/zero > "$TMP/out" 2>&1; check "inspect /dev/zero" 2 $?
(( $(date +%s) - start < 10 )) || { echo "FAIL: inspect /dev/zero took $(( $(date +%s) - start )) s"; fail=1; }
expect_in "/dev/zero named" "'/dev/zero' is not a regular file" "$TMP/out"
printf 'abc' > "$TMP/three.pb"
"$OFLITE" inspect "$TMP/three.pb" > "$TMP/out" 2>&1; check "3-byte garbage plan" 2 $?
expect_in "3-byte garbage plan named" "three.pb" "$TMP/out"

# compile -o into a folder that does not exist: exit 2 naming the folder,
# before anything is read or compiled (the job here does not even exist).
"$OFLITE" compile --job "$TMP/nope.job.pb" --cluster "$TMP/nope.pbtxt" \
  -o "$TMP/no/such/dir/x.plan.pb" > "$TMP/out" 2>&1
check "compile into a missing folder" 2 $?
expect_in "missing output folder named" "directory '$TMP/no/such/dir' does not exist" "$TMP/out"
[[ -e "$TMP/no" ]] && { echo "FAIL: compile created $TMP/no"; fail=1; }
exit $fail
