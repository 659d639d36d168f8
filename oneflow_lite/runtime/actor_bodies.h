// The acts of the actor kinds, one small class each:
//   ComputeBody   compute and source tasks: runs the task's kernels.
//   VariableBody  owns a persistent register: initializes it once (from the
//                 VariableStore on resume, else with its initializer
//                 kernel), then hands the same register out every
//                 iteration; update tasks write it in place. Snapshots it
//                 every env.save_every iterations and at the end.
//   SinkBody      reads metrics (loss, accuracy) and reports, per iteration,
//                 the element mean of each SinkConf.metric's register under
//                 the metric's name (every consumed register when the task
//                 has no SinkConf).
//   CopyBody      host <-> device copy through the stream's DeviceContext
//                 (memcpy on the CPU, cudaMemcpyAsync on a CUDA stream).
// Boxing lives in boxing_body.h. Each is used on its actor's thread only.
#ifndef ONEFLOW_LITE_RUNTIME_ACTOR_BODIES_H_
#define ONEFLOW_LITE_RUNTIME_ACTOR_BODIES_H_

#include <memory>
#include <vector>

#include "oneflow_lite/runtime/actor.h"
#include "oneflow_lite/runtime/actor_env.h"
#include "oneflow_lite/runtime/kernel_runner.h"
#include "proto/plan.pb.h"

namespace oflite {

class ComputeBody final : public ActBody {
 public:
  static StatusOr<std::unique_ptr<ActBody>> Create(const TaskProto& task, const ActorEnv& env);
  Status Act(ActContext* context) override { return kernels_->Run(context); }
  Status ReportDeferredErrors() override { return kernels_->ReportDeferredErrors(); }

 private:
  explicit ComputeBody(std::unique_ptr<KernelRunner> kernels) : kernels_(std::move(kernels)) {}
  std::unique_ptr<KernelRunner> kernels_;
};

class VariableBody final : public ActBody {
 public:
  // InvalidArgument unless the task produces one persistent register with
  // regst_num 1 and has one kernel (the initializer).
  static StatusOr<std::unique_ptr<ActBody>> Create(const TaskProto& task, const ActorEnv& env);
  Status Act(ActContext* context) override;
  Status OnFinish(int64_t end_piece) override;

 private:
  VariableBody(const TaskProto& task, const ActorEnv& env) : task_(&task), env_(&env) {}
  Status Initialize(ActContext* context);
  Blob* ValueBlob(ActContext* context) const;
  // The variable's value in host memory (`staging` holds it when the
  // register lives on a device); synchronizes the device first.
  StatusOr<Blob> HostValue(const Blob& value, std::vector<char>* staging) const;

  const TaskProto* task_;
  const ActorEnv* env_;
  std::unique_ptr<KernelRunner> initializer_;
  VariablePart part_;
  // Whether this task hands its part to the store on saves: false for the
  // replicas of an n-D layout but the first (every distinct part is saved
  // by exactly one task, so a checkpoint is assembled and written once).
  bool owns_save_ = true;
  Regst* regst_ = nullptr;
  bool initialized_ = false;
  int64_t last_saved_ = -1;
};

class SinkBody final : public ActBody {
 public:
  static StatusOr<std::unique_ptr<ActBody>> Create(const TaskProto& task, const ActorEnv& env);
  Status Act(ActContext* context) override;
  Status ReportDeferredErrors() override { return kernels_->ReportDeferredErrors(); }

 private:
  SinkBody(const TaskProto& task, const ActorEnv& env) : task_(&task), env_(&env) {}
  const TaskProto* task_;
  const ActorEnv* env_;
  std::unique_ptr<KernelRunner> kernels_;
};

class CopyBody final : public ActBody {
 public:
  static StatusOr<std::unique_ptr<ActBody>> Create(const TaskProto& task, const ActorEnv& env);
  Status Act(ActContext* context) override;

 private:
  CopyBody(const TaskProto& task, const ActorEnv& env, int64_t in, int64_t out, CopyKind kind)
      : task_(&task), env_(&env), in_(in), out_(out), kind_(kind) {}
  const TaskProto* task_;
  const ActorEnv* env_;
  int64_t in_;
  int64_t out_;
  CopyKind kind_;
};

// The produced registers of `task` that hold data (not control registers).
std::vector<const RegstDescProto*> DataRegsts(const TaskProto& task);

// Mean over every element of every blob of `regsts` (float, double, int32,
// int64 blobs); 0 when there are no elements.
double MeanOfBlobs(const std::vector<const Regst*>& regsts);

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_ACTOR_BODIES_H_
