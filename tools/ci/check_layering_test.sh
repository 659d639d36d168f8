#!/usr/bin/env bash
# The layering checker on small dependency graphs in bazel's graph format:
# allowed edges pass; a runtime library on the compiler, a comm library on
# the runtime and a library on tools/oflite each fail naming the edge; a
# test target may use a higher layer. (CI runs the checker over the real
# graph through tools/ci/check_layering.sh.)
set -euo pipefail
checker="${TEST_SRCDIR}/oneflow_lite/tools/ci/check_layering.py"
work="${TEST_TMPDIR:-$(mktemp -d)}"

cat > "$work/testonly" <<'LABELS'
//oneflow_lite/runtime:training_test
LABELS

run() {  # run NAME EDGES...: writes the graph, runs the checker
  local name=$1; shift
  { echo "digraph mygraph {"; printf '  %s\n' "$@"; echo "}"; } > "$work/$name.graph"
  set +e
  python3 "$checker" "$work/$name.graph" "$work/testonly" > "$work/$name.out" 2>&1
  echo $? > "$work/$name.rc"
  set -e
}
expect() {  # expect NAME RC [TEXT]
  local rc; rc=$(cat "$work/$1.rc")
  if [[ "$rc" != "$2" ]]; then
    echo "FAIL $1: exit $rc, expected $2"; cat "$work/$1.out"; exit 1
  fi
  if [[ $# -ge 3 ]] && ! grep -qF -- "$3" "$work/$1.out"; then
    echo "FAIL $1: output lacks '$3'"; cat "$work/$1.out"; exit 1
  fi
}

run clean \
  '"//oneflow_lite/runtime:runtime" -> "//oneflow_lite/kernels:kernel"' \
  '"//oneflow_lite/runtime/commnet:commnet" -> "//oneflow_lite/comm:comm_net"' \
  '"//oneflow_lite/kernels/cuda:cuda_kernels" -> "//tools:cuda_enabled"' \
  '"//oneflow_lite/compiler:compiler" -> "//oneflow_lite/ops:op_def"' \
  '"//tools/oflite:oflite" -> "//oneflow_lite/compiler:compiler"'
expect clean 0 "layer order respected"

run runtime_on_compiler \
  '"//oneflow_lite/runtime:runtime" -> "//oneflow_lite/kernels:kernel"' \
  '"//oneflow_lite/runtime:runtime" -> "//oneflow_lite/compiler:compiler"'
expect runtime_on_compiler 1 \
  "LAYERING: //oneflow_lite/runtime:runtime -> //oneflow_lite/compiler:compiler (runtime may not depend on compiler)"

run comm_on_runtime '"//oneflow_lite/comm/tcp:tcp" -> "//oneflow_lite/runtime:actor"'
expect comm_on_runtime 1 "(comm may not depend on runtime)"

run runtime_on_commnet '"//oneflow_lite/runtime:runtime" -> "//oneflow_lite/runtime/commnet:commnet"'
expect runtime_on_commnet 1 "(runtime may not depend on runtime_commnet)"

run library_on_cli '"//oneflow_lite/api:graph" -> "//tools/oflite:flags"'
expect library_on_cli 1 "(api may not depend on tools/oflite)"

run production_on_testing '"//oneflow_lite/compiler:compiler" -> "//oneflow_lite/testing:test_jobs"'
expect production_on_testing 1 "(compiler may not depend on testing)"

run test_may_go_up '"//oneflow_lite/runtime:training_test" -> "//oneflow_lite/compiler:compiler"'
expect test_may_go_up 0

run empty
expect empty 2 "no dependency edges"
echo "PASS"
