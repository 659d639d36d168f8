#!/usr/bin/env bash
# CI: fails, naming the edge, when a production target of a lower layer
# depends on a higher one (runtime on compiler or api, comm on runtime, a
# library on tools/ or tests/, ...). Runs `bazel query` over every target's
# direct deps (select() branches included, so CUDA-only deps are checked
# too) and hands the edges to check_layering.py, which holds the layer table.
# Exit 0: clean; 1: forbidden edges (printed); 2: the query failed.
set -uo pipefail
cd "$(dirname "$0")/../.."

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
scope='//oneflow_lite/... + //tools/... + //examples/... + //tests/... + //proto/...'
if ! bazel query --noimplicit_deps --output=graph --nograph:factored \
     "deps($scope, 1)" > "$work/graph" 2> "$work/err"; then
  tail -n 20 "$work/err"
  echo "check_layering: bazel query over deps failed"
  exit 2
fi
if ! bazel query "attr(testonly, 1, $scope) + tests($scope)" \
     > "$work/testonly" 2> "$work/err"; then
  tail -n 20 "$work/err"
  echo "check_layering: bazel query for test targets failed"
  exit 2
fi
python3 tools/ci/check_layering.py "$work/graph" "$work/testonly"
