#include "oneflow_lite/runtime/actor_registry.h"

#include "oneflow_lite/runtime/actor_bodies.h"
#include "oneflow_lite/runtime/boxing_body.h"
#include "oneflow_lite/runtime/regst_actor.h"
#include "oneflow_lite/runtime/traced_act_body.h"

namespace oflite {

StatusOr<std::unique_ptr<Actor>> ActorRegistry::Create(const TaskProto& task,
                                                       const ActorEnv& env) const {
  auto custom = actor_factories_.find(task.type());
  if (custom != actor_factories_.end()) return custom->second(task, env);
  auto it = factories_.find(task.type());
  if (it == factories_.end()) {
    return UnimplementedError("task '", task.name(), "': no actor for task type ",
                              TaskType_Name(task.type()), " in this runtime");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<ActBody> body, it->second(task, env));
  if (env.tracer != nullptr) body = std::make_unique<TracedActBody>(task, std::move(body));
  ASSIGN_OR_RETURN(std::unique_ptr<RegstActor> actor,
                   RegstActor::Create(task, env, std::move(body)));
  return std::unique_ptr<Actor>(std::move(actor));
}

ActorRegistry BuiltinActorRegistry() {
  ActorRegistry registry;
  registry.Register(TASK_COMPUTE, ComputeBody::Create);
  registry.Register(TASK_SOURCE, ComputeBody::Create);
  registry.Register(TASK_SINK, SinkBody::Create);
  registry.Register(TASK_VARIABLE, VariableBody::Create);
  registry.Register(TASK_COPY_H2D, CopyBody::Create);
  registry.Register(TASK_COPY_D2H, CopyBody::Create);
  registry.Register(TASK_BOXING, BoxingBody::Create);
  return registry;
}

}  // namespace oflite
