// The CommNet and collective actors follow the same register protocol as
// RegstActor (RegstProtocol): a plan they would have run differently is
// refused the same way, naming the task.
#include <gtest/gtest.h>

#include "oneflow_lite/common/id.h"
#include "oneflow_lite/runtime/commnet/commnet_actors.h"
#include "oneflow_lite/runtime/memory_zones.h"
#include "oneflow_lite/runtime/regst.h"
#include "oneflow_lite/runtime/testing/test_plan_builder.h"

namespace oflite {
namespace {

int64_t RemoteTask() {
  TaskIdParts parts;
  parts.stream.machine = 1;
  parts.stream.device_type = DEVICE_CPU;
  parts.task_index = 9;
  return EncodeTaskId(parts).value();
}

// `type` produces "out" (one float blob), read by "reader"; "out" names a
// mutator that is not one of its consumers.
Status CreateWithStrayMutator(TaskType type) {
  testing::TestPlanBuilder builder;
  const int64_t source = builder.AddTask("source", TASK_SOURCE);
  const int64_t in = builder.AddRegst(source, "in", {TensorDesc(Shape{4}, DT_FLOAT)}, 1);
  const int64_t actor = builder.AddTask("under-test", type);
  const int64_t reader = builder.AddTask("reader", TASK_COMPUTE);
  const int64_t out = builder.AddRegst(actor, "out", {TensorDesc(Shape{4}, DT_FLOAT)}, 1);
  builder.Consume(reader, out);
  builder.MarkMutator(out, source);  // the source does not consume "out"
  TaskProto* task = builder.task(actor);
  if (type == TASK_COMMNET) {
    task->mutable_commnet()->set_src_task_id(RemoteTask());
    task->mutable_commnet()->set_src_regst_desc_id(500);
  } else {
    builder.Consume(actor, in);
    task->mutable_boxing()->add_ring_task_id(actor);
    task->mutable_boxing()->add_ring_task_id(RemoteTask());
    task->mutable_boxing()->add_in_regst_desc_id(in);
  }
  Plan plan = builder.Build(1);
  std::unique_ptr<MemoryZones> zones = MemoryZones::Create(plan.machine(0)).value();
  std::unique_ptr<RegstStore> store = RegstStore::Create(plan.machine(0), *zones).value();
  ActorEnv env;
  env.regsts = store.get();
  ActorRegistry registry = MultiMachineActorRegistry(/*route=*/nullptr);
  for (const TaskProto& built : plan.machine(0).task()) {
    if (built.task_id() == actor) return registry.Create(built, env).status();
  }
  return InternalError("no task under test");
}

TEST(ActorProtocolTest, CommNetActorRefusesAMutatorThatIsNotAConsumer) {
  Status status = CreateWithStrayMutator(TASK_COMMNET);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("'under-test'"), std::string::npos) << status;
  EXPECT_NE(status.message().find("not one of its consumers"), std::string::npos) << status;
}

TEST(ActorProtocolTest, CollectiveActorRefusesAMutatorThatIsNotAConsumer) {
  Status status = CreateWithStrayMutator(TASK_COLLECTIVE);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("'under-test'"), std::string::npos) << status;
  EXPECT_NE(status.message().find("not one of its consumers"), std::string::npos) << status;
}

}  // namespace
}  // namespace oflite
