#include "oneflow_lite/runtime/commnet/commnet_actors.h"

#include <memory>

namespace oflite {

ActorRegistry MultiMachineActorRegistry(CommNetRoute* route,
                                        const CollectiveActorOptions& options) {
  ActorRegistry registry = BuiltinActorRegistry();
  registry.RegisterActor(TASK_COMMNET, [route](const TaskProto& task, const ActorEnv& env) {
    return CommNetActor::Create(task, env, route);
  });
  auto channels = std::make_shared<RingChannelTable>();
  registry.RegisterActor(TASK_COLLECTIVE, [route, channels, options](const TaskProto& task,
                                                                     const ActorEnv& env) {
    return CollectiveActor::Create(task, env, route, channels.get(), options);
  });
  return registry;
}

}  // namespace oflite
