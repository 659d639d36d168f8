#!/usr/bin/env bash
# LeNet-5 data parallel over 2 CPU devices with OMP_THREAD_LIMIT=1 (what
# --config=tsan sets, and what a user may set): it once spun forever in a
# oneDNN barrier, planned for more threads than the limit let the team have.
# The run must finish (bounded) with the 1-device losses, as without the limit.
set -u
bin="${TEST_SRCDIR}/oneflow_lite/oneflow_lite/runtime/training_test"
OMP_THREAD_LIMIT=1 timeout 120 "$bin" --gtest_filter='TrainingTest.Lenet5OnTwoDevicesTrainsLikeOneDevice'
rc=$?
if [[ $rc == 124 ]]; then echo "FAIL: hung (killed after 120 s) with OMP_THREAD_LIMIT=1"; exit 1; fi
exit $rc
