// What the executors that run a whole Job op by op share: the reference
// executor here and tools/gpu's SingleGpuExecutor. They differ in where a
// blob lives (host tensors; device memory with pinned staging) but set up
// and call kernels the same way: the dtype an op's kernel is registered
// under, its KernelInitContext from the job's blob descs, the binding of
// its blobs for one call, and a metric's value read as a double.
//
// Logical shapes only (parallel_id 0 of 1). Stateless functions;
// thread-compatible.
#ifndef ONEFLOW_LITE_REFERENCE_OP_BY_OP_H_
#define ONEFLOW_LITE_REFERENCE_OP_BY_OP_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <string>

#include "oneflow_lite/api/job_util.h"
#include "oneflow_lite/common/host_tensor.h"
#include "oneflow_lite/common/status.h"
#include "oneflow_lite/kernels/kernel.h"
#include "proto/job.pb.h"

namespace oflite {

// The dtype that keys `op`'s kernel: its first input's, or for a source its
// first output's; DT_INVALID for an op with neither. Every lbn of `op` must
// be in `descs`.
DataType KernelDtypeOf(const OpConf& op, const BlobDescMap& descs);

// The creation facts of `op`'s kernel: its input and output descs from
// `descs` (NotFound naming the op for an unknown input), the job's `seed`
// and `device`. The context points at `op` and `device`, which must outlive
// its use.
StatusOr<KernelInitContext> MakeKernelInitContext(const OpConf& op, const BlobDescMap& descs,
                                                  int64_t seed, const DeviceContext* device);

// Binds every input and then every output of `op` to `context`, in argument
// order, as the blob `blob_of(lbn, is_output)` returns. The blobs are kept in
// `blobs` (a deque, so the addresses the context holds stay valid), which
// must outlive the use of `context`.
void BindOpBlobs(const OpConf& op,
                 const std::function<Blob(const std::string& lbn, bool is_output)>& blob_of,
                 std::deque<Blob>* blobs, KernelContext* context);

// The value of metric `name` from its tensor, which must hold one element
// of float32, float64, int32 or int64; InvalidArgument naming the metric
// otherwise.
StatusOr<double> MetricValue(const std::string& name, const HostTensor& tensor);

}  // namespace oflite

#endif  // ONEFLOW_LITE_REFERENCE_OP_BY_OP_H_
