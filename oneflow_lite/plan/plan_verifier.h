// The plan verifier: the one check every loader of a Plan runs before it
// trusts the file (`oflite run`, `oflite inspect`, Runtime::Create).
//
// A Plan is read from a file anyone may have written or damaged, and the
// runtime acts on it without further questions: it cuts registers out of
// memory blocks at the given offsets, binds kernel arguments to the named
// blobs, routes messages to the listed consumers. VerifyPlan checks every fact
// of that kind, so that a plan it accepts cannot make the runtime read or
// write outside its memory, abort on a CHECK, or let a kernel write into a
// register another task owns. What is checked, and the error format, is
// written down in docs/plan_format.md ("Verification").
//
// Errors are InvalidArgument and name the culprit: the task (name and id) and
// the field, e.g.
//   task 'dense1@0' (m0/cpu0/s0/t3): kernel[0] (op 'dense1', matmul):
//   input 'b'[0] is not bound
// Plan-level problems name the machine, memory block or cluster entry.
//
// Op argument lists come from the op registry (ops/op_def.h) when the op
// type is registered in this binary; kernels of unregistered types (test
// kernels) are checked against their own OpConf only. Thread-safe: a pure
// function of its argument.
#ifndef ONEFLOW_LITE_PLAN_PLAN_VERIFIER_H_
#define ONEFLOW_LITE_PLAN_PLAN_VERIFIER_H_

#include <cstdint>

#include "oneflow_lite/common/status.h"
#include "proto/plan.pb.h"

namespace oflite {

// Bounds beyond which a plan is refused as implausible (they keep the
// runtime's arithmetic and allocations bounded).
inline constexpr int32_t kMaxRegstNum = 1024;               // copies of one register
inline constexpr int64_t kMaxZoneBytes = int64_t{1} << 50;  // one memory block
inline constexpr int kMaxBlobRank = 16;
inline constexpr int64_t kMaxParallelNum = 1 << 16;

struct PlanVerifierOptions {
  // A task's device_type may differ from the device type in its id. Only for
  // a runtime given its own DeviceContextFactory, which then decides what
  // each stream runs on (tests run CUDA plans on CPU contexts that way: the
  // tasks say DEVICE_CPU, their ids keep the CUDA streams). Off for files.
  bool allow_device_type_other_than_id = false;
};

// OK when the plan is internally consistent; otherwise InvalidArgument
// naming the first problem found (task, field).
Status VerifyPlan(const Plan& plan, const PlanVerifierOptions& options = {});

}  // namespace oflite

#endif  // ONEFLOW_LITE_PLAN_PLAN_VERIFIER_H_
