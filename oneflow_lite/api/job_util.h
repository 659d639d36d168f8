// Small helpers over a Job shared by the graph builder, the autodiff and
// optimizer passes, the evaluation-job builder and the reference executor.
//
// All functions are pure (they read or return Jobs by value), hold no
// state and are thread-compatible. Errors name the op and the blob at fault.
#ifndef ONEFLOW_LITE_API_JOB_UTIL_H_
#define ONEFLOW_LITE_API_JOB_UTIL_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "oneflow_lite/common/status.h"
#include "oneflow_lite/common/tensor.h"
#include "oneflow_lite/ops/op_builder.h"
#include "oneflow_lite/ops/op_def.h"
#include "proto/job.pb.h"

namespace oflite {

using BlobDescMap = std::map<std::string, TensorDesc>;  // lbn -> desc

// The descs recorded in Job.blob.
BlobDescMap BlobDescsOf(const Job& job);
// Replaces Job.blob with `descs`, sorted by lbn.
void SetBlobDescs(const BlobDescMap& descs, Job* job);

// The descs of `op`'s inputs, by arg name, looked up in `descs`; NotFound
// naming the op and the lbn for an unknown blob.
StatusOr<ArgDescs> InputDescsOf(const OpConf& op, const BlobDescMap& descs);

// Runs InferOp on `op` with inputs from `descs`, checks that `op` declares
// exactly the outputs inference produced (arg names and counts), and adds
// the output descs to `descs` (AlreadyExists if an lbn is produced twice).
Status InferAndRecord(const OpConf& op, BlobDescMap* descs);

// Re-runs shape inference over the whole job, in topological order, and
// rewrites Job.blob. Use after editing ops or attrs (e.g. a batch size).
Status ReinferBlobDescs(Job* job);

// Sets OpConf.mutable_input from each op's definition.
Status FillMutableInputs(Job* job);

// Indices of job.op in a topological order over data edges (input lbns)
// and control_input edges. Among ready ops the lowest index comes first,
// so a job already in order keeps its order. Errors on a cycle, an input
// lbn nobody produces, an unknown control input, or duplicate op names.
StatusOr<std::vector<int>> TopologicalOrder(const Job& job);

// lbn -> index of the producing op in job.op.
std::map<std::string, int> ProducerIndex(const Job& job);
// Names of the ops that read `lbn` (sorted).
std::vector<std::string> ConsumersOf(const Job& job, const std::string& lbn);

// Op lookup by name; null when absent.
const OpConf* FindOp(const Job& job, const std::string& name);
OpConf* FindMutableOp(Job* job, const std::string& name);

// MakeUniqueName: ops/op_builder.h (the compiler's passes name ops too).

}  // namespace oflite

#endif  // ONEFLOW_LITE_API_JOB_UTIL_H_
