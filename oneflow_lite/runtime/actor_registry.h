// ActorRegistry: builds an actor from its task, by task type.
//
// A registry is an ordinary object (no global state): the runtime gets one
// from BuiltinActorRegistry(), tests and CommNet may add or replace kinds
// with Register before the runtime is created. Each kind is a factory for
// the ActBody; the protocol around it is always RegstActor.
// Not thread-safe for Register; Create is const and thread-safe.
#ifndef ONEFLOW_LITE_RUNTIME_ACTOR_REGISTRY_H_
#define ONEFLOW_LITE_RUNTIME_ACTOR_REGISTRY_H_

#include <functional>
#include <map>
#include <memory>

#include "oneflow_lite/runtime/actor.h"
#include "oneflow_lite/runtime/actor_env.h"
#include "proto/plan.pb.h"

namespace oflite {

using ActBodyFactory =
    std::function<StatusOr<std::unique_ptr<ActBody>>(const TaskProto&, const ActorEnv&)>;
// A kind with its own protocol (CommNet's cross-machine actors).
using ActorFactory =
    std::function<StatusOr<std::unique_ptr<Actor>>(const TaskProto&, const ActorEnv&)>;

class ActorRegistry {
 public:
  // Replaces any earlier factory of `type`.
  void Register(TaskType type, ActBodyFactory factory) { factories_[type] = std::move(factory); }
  // Replaces any earlier factory of `type`; the actor brings its own protocol.
  void RegisterActor(TaskType type, ActorFactory factory) {
    actor_factories_[type] = std::move(factory);
  }
  bool Has(TaskType type) const {
    return factories_.count(type) > 0 || actor_factories_.count(type) > 0;
  }
  // Unimplemented naming the task and its type when no factory is known.
  StatusOr<std::unique_ptr<Actor>> Create(const TaskProto& task, const ActorEnv& env) const;

 private:
  std::map<int, ActBodyFactory> factories_;
  std::map<int, ActorFactory> actor_factories_;
};

// compute, source, sink, variable, copy (H2D, D2H) and boxing.
ActorRegistry BuiltinActorRegistry();

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_ACTOR_REGISTRY_H_
