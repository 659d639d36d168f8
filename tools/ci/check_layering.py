#!/usr/bin/env python3
"""Checks that production targets depend only on lower layers.

Input: the dependency edges of the repository as `bazel query --output=graph
--nograph:factored` prints them (lines `"//a:b" -> "//c:d"`), and the labels
of test-only targets (tests and testonly rules), one per line. Each layer
below names the package prefixes it owns and the layers it may use; an edge
from a production target of one layer into a package of a layer it may not
use is printed as `LAYERING: //from:target -> //to:target (A may not depend
on B)`, and the exit code is 1. Test targets may use any layer (a runtime
test may compile a plan), but no production target may use a test-only one
(Bazel's testonly enforces that). docs/architecture.md has the picture.

Usage: check_layering.py GRAPH_FILE TESTONLY_FILE
"""
import re
import sys

# Layer -> (package prefixes, layers it may depend on besides itself).
# Lowest first. Packages not listed (proto, third_party, tools, examples,
# tests, external repositories) are unchecked sources; edges into tools/,
# examples/ and tests/ are checked below.
LAYERS = [
    ("common", ["oneflow_lite/common"], []),
    ("device", ["oneflow_lite/device"], ["common"]),
    ("data", ["oneflow_lite/data"], ["common"]),
    ("ops", ["oneflow_lite/ops"], ["common"]),
    ("kernels", ["oneflow_lite/kernels"], ["common", "device", "data", "ops"]),
    ("comm", ["oneflow_lite/comm"], ["common"]),
    ("checkpoint", ["oneflow_lite/checkpoint"], ["common"]),
    # cost: the plan simulator and calibrations (reads plans only).
    ("cost", ["oneflow_lite/cost"], ["common"]),
    ("compiler", ["oneflow_lite/compiler"], ["common", "ops", "cost"]),
    # data: the data sources read a .npy dataset's headers (api/data_sources.h: NpyData).
    ("api", ["oneflow_lite/api"], ["common", "data", "ops", "compiler", "cost"]),
    ("plan", ["oneflow_lite/plan"], ["common", "ops"]),
    ("runtime", ["oneflow_lite/runtime"],
     ["common", "device", "data", "ops", "kernels", "checkpoint", "plan"]),
    # The runtime's CommNet integration: the one place runtime meets comm.
    ("runtime_commnet", ["oneflow_lite/runtime/commnet"],
     ["common", "device", "data", "ops", "kernels", "checkpoint", "plan", "runtime", "comm"]),
    ("reference", ["oneflow_lite/reference"],
     ["common", "device", "data", "ops", "kernels", "api"]),
    ("session", ["oneflow_lite/session"],
     ["common", "device", "data", "ops", "kernels", "comm", "checkpoint", "plan", "runtime",
      "runtime_commnet"]),
    # profile: `oflite profile` measures kernels, the runtime and the
    # transports for the cost model.
    ("profile", ["oneflow_lite/profile"],
     ["common", "device", "data", "ops", "kernels", "comm", "checkpoint", "plan", "runtime",
      "runtime_commnet", "session", "cost"]),
    ("driver", ["tools/driver"],
     ["common", "device", "data", "ops", "kernels", "comm", "checkpoint", "compiler", "api",
      "plan", "runtime", "runtime_commnet", "session"]),
    ("testing", ["oneflow_lite/testing"],
     ["common", "device", "data", "ops", "kernels", "comm", "checkpoint", "cost", "compiler", "api",
      "plan", "runtime", "runtime_commnet", "reference"]),
]
# Top-level code no library may depend on (build settings in //tools:BUILD
# itself, such as :cuda_enabled, are allowed).
TOP = ["tools/oflite", "tools/bench", "tools/gpu", "examples", "tests"]

EDGE = re.compile(r'^\s*"([^"]+)"\s*->\s*"([^"]+)"')


def package(label):
    label = label.lstrip("@")
    if not label.startswith("//"):
        return None  # external repository
    return label[2:].split(":", 1)[0]


def layer_of(pkg):
    best = None
    for name, prefixes, _ in LAYERS:
        for prefix in prefixes:
            if pkg == prefix or pkg.startswith(prefix + "/"):
                if best is None or len(prefix) > best[1]:
                    best = (name, len(prefix))
    return best[0] if best else None


def main(graph_file, testonly_file):
    allowed = {name: set(deps) | {name} for name, _, deps in LAYERS}
    with open(testonly_file) as f:
        testonly = {line.strip() for line in f if line.strip()}
    violations = []
    edges = 0
    with open(graph_file) as f:
        for line in f:
            match = EDGE.match(line)
            if not match:
                continue
            edges += 1
            source, target = match.groups()
            if source in testonly:
                continue
            source_pkg, target_pkg = package(source), package(target)
            if source_pkg is None or target_pkg is None:
                continue
            source_layer = layer_of(source_pkg)
            if source_layer is None:
                continue
            target_layer = layer_of(target_pkg)
            if any(target_pkg == t or target_pkg.startswith(t + "/") for t in TOP):
                violations.append((source, target, source_layer, target_pkg))
            elif target_layer is not None and target_layer not in allowed[source_layer]:
                violations.append((source, target, source_layer, target_layer))
    if edges == 0:
        print("check_layering: no dependency edges in %s" % graph_file)
        return 2
    for source, target, source_layer, target_layer in sorted(set(violations)):
        print("LAYERING: %s -> %s (%s may not depend on %s)" %
              (source, target, source_layer, target_layer))
    if violations:
        print("check_layering: %d forbidden edge(s); the layer order is in "
              "tools/ci/check_layering.py and docs/architecture.md" % len(set(violations)))
        return 1
    print("check_layering: %d edges, layer order respected" % edges)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
