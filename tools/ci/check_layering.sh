#!/usr/bin/env bash
# CI: fails, naming the edge, when a production target of a lower layer
# depends on a higher one (runtime on compiler or api, comm on runtime, a
# library on tools/ or tests/, ...). Runs `bazel query` over every target's
# direct deps (select() branches included, so CUDA-only deps are checked
# too) and hands the edges to check_layering.py, which holds the layer table.
# It also checks the public surface (docs/graph_api.md): the libraries of
# oneflow_lite/ and tools/ that a package outside them (//user_model, a
# user's own package) may depend on must be exactly PUBLIC below.
# Exit 0: clean; 1: forbidden edges or a changed public surface (printed);
# 2: a query failed.
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
python3 tools/ci/check_layering.py "$work/graph" "$work/testonly" || exit $?

PUBLIC='//oneflow_lite/api:data_sources
//oneflow_lite/api:graph
//oneflow_lite/api:layers
//tools/driver:trainer
//tools/oflite:oflite'
if ! bazel query "kind('cc_library|cc_binary', visible(//user_model:train_in_code, \
     //oneflow_lite/... + //tools/...))" 2> "$work/err" | sort > "$work/public"; then
  tail -n 20 "$work/err"
  echo "check_layering: bazel query for the public surface failed"
  exit 2
fi
if [[ "$(cat "$work/public")" != "$PUBLIC" ]]; then
  echo "PUBLIC SURFACE: a user's package sees:"; sed 's/^/  /' "$work/public"
  echo "check_layering: expected exactly (docs/graph_api.md, tools/ci/check_layering.sh):"
  echo "$PUBLIC" | sed 's/^/  /'
  exit 1
fi
echo "check_layering: public surface is $(echo $PUBLIC)"
