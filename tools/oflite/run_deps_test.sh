#!/usr/bin/env bash
# The Plan is the whole contract: `oflite run` (//tools/oflite:run) must not
# depend on the compiler or on the graph API (which compiles), directly or
# transitively. $1: the output of `bazel query 'deps(//tools/oflite:run)'`
# (genquery :run_deps).
set -u
deps="$1"
if [[ ! -s "$deps" ]]; then echo "FAIL: empty dependency list '$deps'"; exit 1; fi
if ! grep -qx "//oneflow_lite/runtime:runtime" "$deps"; then
  echo "FAIL: the list does not even name //oneflow_lite/runtime:runtime"; exit 1
fi
bad=$(grep -E '^//oneflow_lite/(compiler|api)[:/]' "$deps")
if [[ -n "$bad" ]]; then
  echo "FAIL: //tools/oflite:run depends on:"; echo "$bad"; exit 1
fi
echo "ok: //tools/oflite:run has $(wc -l < "$deps") deps, none of them compiler or api"
