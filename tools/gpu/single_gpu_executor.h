// SingleGpuExecutor: runs a whole Job on one GPU, op by op in a fixed
// topological order on one CUDA stream, with the CUDA kernels. A bridge for
// the GPU check and benchmark until the actor runtime runs CUDA tasks (see
// docs/gpu.md): it exercises exactly the kernels a plan would, with the same
// static-memory discipline.
//
// Create infers blob shapes, makes ONE cudaMalloc for every blob of the job
// (256-byte aligned offsets) and one pinned host block for the outputs of
// ops without a CUDA kernel (the data sources), which run on the CPU and are
// copied to the device with cudaMemcpyAsync; it creates and initializes every
// kernel. Run enqueues iterations without per-step allocation and reads the
// job's metrics (one D2H copy into pinned memory and one stream
// synchronization per iteration, only when asked for).
//
// Not thread-safe: one thread drives an executor. Kernel errors keep their
// messages (op, iteration); reported device-side errors surface on the next
// call of the offending kernel, or at the latest from Metrics.
#ifndef ONEFLOW_LITE_TOOLS_GPU_SINGLE_GPU_EXECUTOR_H_
#define ONEFLOW_LITE_TOOLS_GPU_SINGLE_GPU_EXECUTOR_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "oneflow_lite/common/host_tensor.h"
#include "oneflow_lite/device/cuda/cuda_device_context.h"
#include "oneflow_lite/device/cuda/cuda_memory.h"
#include "oneflow_lite/kernels/kernel.h"
#include "proto/job.pb.h"

namespace oflite {

struct SingleGpuOptions {
  int device_index = 0;
  // Run the CPU-side sources only in the first iteration and keep their
  // device copies (benchmarks: the runtime overlaps loading with compute).
  bool sources_once = false;
  // With sources_once: capture the second iteration (every op but the
  // sources, variables already initialized) once as a CUDA Graph and replay
  // it for every later Step. Valid only for jobs whose kernels take no
  // per-iteration launch arguments (Plan.graph_capturable says which; see
  // docs/gpu.md, "Graph replay"). If capture fails, Step falls back to
  // launching the ops (graph_note() says why). Device-side error reports of
  // replayed iterations are read by Metrics / ReportDeferredErrors.
  bool graph_replay = false;
  // Time every op of every Step (benchmarks, to name the kernels a step's
  // time goes to): a device op by a pair of CUDA events around its launches
  // on the stream, a host op (a source) by the host clock around its Forward
  // and its H2D copy by events. Step then waits for the stream, so steps do
  // not overlap. Not with graph_replay.
  bool time_ops = false;
};

// One op's accumulated time (SingleGpuOptions::time_ops).
struct OpTime {
  std::string name, type;
  bool on_host = false;   // a source run on the CPU
  double ms = 0;          // device time of its launches; host time of a source's Forward
  double copy_ms = 0;     // a source's H2D copy (device time)
  int64_t calls = 0;
};

class SingleGpuExecutor {
 public:
  static StatusOr<std::unique_ptr<SingleGpuExecutor>> Create(const Job& job,
                                                             const SingleGpuOptions& options);
  SingleGpuExecutor(const SingleGpuExecutor&) = delete;
  SingleGpuExecutor& operator=(const SingleGpuExecutor&) = delete;

  // Enqueues one iteration (variables are initialized before the first).
  Status Step();
  // Waits for the stream and returns the job's metrics of the last step,
  // or the first error a kernel's device code found since the last report
  // (ReportDeferredErrors).
  StatusOr<std::map<std::string, double>> Metrics();
  // Waits for the stream; the first error the device found in any step so
  // far that no kernel call reported (also in replayed graph iterations,
  // which call no Forward; Kernel::ReportDeferredErrors), naming the op.
  Status ReportDeferredErrors();
  // A blob's current value (synchronizes). NotFound for an unknown lbn.
  StatusOr<HostTensor> Fetch(const std::string& lbn);
  // Every variable's current value by op name (synchronizes).
  StatusOr<std::map<std::string, HostTensor>> Variables();

  const CudaDeviceContext& device() const { return *cuda_; }
  // Whether Step replays a captured graph, and why not when it does not.
  bool replaying() const { return graph_exec_ != nullptr; }
  const std::string& graph_note() const { return graph_note_; }
  // With time_ops: each op's time since creation or the last ResetOpTimes,
  // in execution order.
  std::vector<OpTime> OpTimes() const;
  void ResetOpTimes();
  ~SingleGpuExecutor();
  int64_t iteration() const { return iteration_; }

 private:
  struct OpState {
    const OpConf* op = nullptr;
    std::unique_ptr<Kernel> kernel;
    bool on_host = false;      // no CUDA kernel: a CPU source
    bool is_variable = false;
    // time_ops: events around the launches (a source: around its copy),
    // whether they were recorded this step, and the totals.
    cudaEvent_t begin = nullptr, end = nullptr;
    bool recorded = false;
    OpTime time;
  };
  struct BlobSlot {
    TensorDesc desc;
    char* device = nullptr;
    char* host = nullptr;  // pinned staging, only for host-produced blobs
  };

  SingleGpuExecutor(Job job, SingleGpuOptions options)
      : job_(std::move(job)), options_(options) {}
  Status Prepare();
  Status RunOp(OpState* state);
  Status RunDeviceOps();
  // Captures RunDeviceOps into graph_exec_; on failure leaves it null and
  // explains in graph_note_ (the stream is usable again either way).
  Status TryCapture();
  // time_ops: waits for the stream and adds this step's event intervals.
  Status CollectOpTimes();

  Job job_;
  SingleGpuOptions options_;
  std::unique_ptr<CudaDeviceContext> cuda_;
  CpuDeviceContext cpu_;
  std::unique_ptr<CudaMemoryBlock> device_block_, pinned_block_;
  std::map<std::string, BlobSlot> blobs_;
  std::vector<OpState> ops_;
  bool variables_ready_ = false;
  cudaGraphExec_t graph_exec_ = nullptr;
  bool capture_tried_ = false;
  std::string graph_note_ = "graph replay not asked for";
  int64_t iteration_ = 0;
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_TOOLS_GPU_SINGLE_GPU_EXECUTOR_H_
