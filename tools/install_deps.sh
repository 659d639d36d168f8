#!/usr/bin/env bash
# Installs every Debian package OneFlow-Lite needs, from the Debian archive
# only. Idempotent: packages already present are not touched, and a machine
# that has everything does no network access at all. Quiet on success; on
# failure it names the package that could not be installed.
set -euo pipefail

PACKAGES=(
  # Build: Bazel 4 (offline) and the rule sets it needs.
  bazel-bootstrap bazel-rules-java default-jdk-headless
  g++ python3
  # Libraries (one //third_party target each).
  libprotobuf-dev protobuf-compiler
  libgoogle-glog-dev libgflags-dev libunwind-dev liblzma-dev
  libgtest-dev libgmock-dev
  libopenblas-dev zlib1g-dev gfortran
  # oneDNN: the float32 CPU convolutions and GEMMs (OpenMP-threaded).
  libdnnl-dev
  libibverbs-dev librdmacm-dev
  # Data: Fashion-MNIST (idx files, gzip) under /usr/share/datasets; the
  # character-level GPT's default corpus, public-domain quotations under
  # /usr/share/games/fortunes (data/char_tokenizer.h: DefaultCorpusFiles).
  dataset-fashion-mnist fortunes
  # Benchmark peers: Gloo (all-reduce), PyTorch (training), OpenMPI's
  # shared-memory transport (the shm provider's peer).
  libgloo-dev python3-torch openmpi-bin libopenmpi-dev
  # A real Slurm over the network-namespace hosts (tests/netns/
  # slurm_netns_test): slurmctld, slurmd, srun and the munge daemon.
  slurm-wlm munge
  # The PyTorch twin's loss-curve plots (PNG).
  python3-matplotlib
  # A single TCP stream (iperf3), the point-to-point bench's second peer.
  iperf3
  # oflite inspect --dot renders with Graphviz in tests.
  graphviz
  # The libFuzzer run of the CommNet wire decoder (clang + its fuzzer runtime).
  clang libclang-rt-14-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "install_deps: installing ${missing[*]}" >&2
if ! $SUDO apt-get update -qq >"$log" 2>&1; then
  cat "$log" >&2
  echo "install_deps: 'apt-get update' failed (is the Debian archive reachable?)" >&2
  exit 1
fi
for p in "${missing[@]}"; do
  if ! apt-cache show "$p" >/dev/null 2>&1; then
    echo "install_deps: package '$p' is not in the configured Debian archive" >&2
    exit 1
  fi
done
if ! DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >"$log" 2>&1; then
  tail -n 30 "$log" >&2
  echo "install_deps: 'apt-get install' failed for: ${missing[*]}" >&2
  exit 1
fi
# Verify that what we asked for is really there.
for p in "${missing[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    echo "install_deps: package '$p' did not install" >&2
    exit 1
  fi
done
