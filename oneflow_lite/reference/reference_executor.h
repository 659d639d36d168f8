// The reference executor: a test oracle that runs a Job on the CPU, one op
// at a time, in a fixed topological order (data and control edges; ties in
// Job order), with kernels from the registry.
//
// It is deliberately small and obviously correct: logical shapes only
// (parallel_id 0 of 1; placements and SBP hints are ignored), one host
// tensor per blob allocated once (float outputs start as NaN, so a kernel
// that never writes its output shows up), kernel objects created and
// initialized once and kept across iterations. `variable` ops run once,
// before the first iteration (unless SetVariable gave a value first); their
// tensors persist, and update ops write them in place through their
// mutable inputs. After each iteration the job's metrics
// (job.conf.train.metric, e.g. "loss", "accuracy") are read as doubles.
//
// Not thread-safe: one thread drives an executor. Errors from kernels keep
// their messages (op, iteration) and stop the run.
#ifndef ONEFLOW_LITE_REFERENCE_REFERENCE_EXECUTOR_H_
#define ONEFLOW_LITE_REFERENCE_REFERENCE_EXECUTOR_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "oneflow_lite/api/eval_job.h"
#include "oneflow_lite/common/host_tensor.h"
#include "oneflow_lite/common/status.h"
#include "oneflow_lite/kernels/kernel.h"
#include "proto/job.pb.h"

namespace oflite {

// What one iteration reported: metric name -> value, and copies of the
// blobs asked for in Run's `fetch` (by lbn). Movable, not copyable.
struct IterationMetrics {
  int64_t iteration = 0;
  std::map<std::string, double> values;
  std::map<std::string, HostTensor> fetched;
};

// Variable op name -> value.
using VariableMap = std::map<std::string, HostTensor>;

class ReferenceExecutor {
 public:
  // Re-runs shape inference over `job` (a copy is kept), orders its ops and
  // creates and initializes every kernel. Errors name the op.
  static StatusOr<std::unique_ptr<ReferenceExecutor>> Create(const Job& job);

  ReferenceExecutor(const ReferenceExecutor&) = delete;
  ReferenceExecutor& operator=(const ReferenceExecutor&) = delete;

  // Gives variable `name` a value (shape and dtype must match); it is then
  // not initialized by its kernel. Allowed before and between runs.
  Status SetVariable(const std::string& name, const HostTensor& value);

  // Runs `iterations` more iterations (the iteration counter continues from
  // the previous call) and returns their metrics, plus a copy of each blob
  // in `fetch` taken at the end of each iteration (NotFound up front for an
  // unknown lbn).
  StatusOr<std::vector<IterationMetrics>> Run(int64_t iterations,
                                              const std::vector<std::string>& fetch = {});

  // A blob's value after the last iteration (variables: their current
  // value). NotFound for an unknown lbn. The pointer stays valid as long as
  // the executor; the next Run overwrites the value.
  StatusOr<const HostTensor*> Fetch(const std::string& lbn) const;

  // Copies of every variable (trainable and optimizer state), by op name.
  VariableMap Variables() const;

  // Iterations run so far.
  int64_t iteration() const { return iteration_; }
  const Job& job() const { return job_; }

 private:
  struct OpState {
    const OpConf* op = nullptr;
    std::unique_ptr<Kernel> kernel;
    bool is_variable = false;
    bool initialized = false;  // variables only
  };

  explicit ReferenceExecutor(Job job) : job_(std::move(job)) {}
  Status Prepare();
  Status RunOp(OpState* state, int64_t iteration);
  StatusOr<IterationMetrics> ReadMetrics() const;

  Job job_;
  std::vector<OpState> ops_;                   // topological order
  std::map<std::string, HostTensor> tensors_;  // lbn -> value
  int64_t iteration_ = 0;
};

// Trains: runs `iterations` iterations (-1: job.conf.total_iters, which
// must then be > 0) and returns per-iteration metrics, the losses (metric
// "loss", when the job has one) and the final variables.
struct ReferenceTrainResult {
  std::vector<IterationMetrics> iterations;
  std::vector<double> losses;
  VariableMap variables;
};
StatusOr<ReferenceTrainResult> TrainReference(const Job& job, int64_t iterations = -1);

// Forward-only evaluation: builds MakeEvalJob(train_job, options), loads
// `variables` (every variable of the evaluation job must be given; extra
// entries such as optimizer state are ignored), runs `iterations`
// iterations (0: the eval job's total_iters, one pass over the split) and
// returns each metric averaged over the iterations.
StatusOr<std::map<std::string, double>> EvaluateReference(const Job& train_job,
                                                          const VariableMap& variables,
                                                          const EvalJobOptions& options = {},
                                                          int64_t iterations = 0);

}  // namespace oflite

#endif  // ONEFLOW_LITE_REFERENCE_REFERENCE_EXECUTOR_H_
