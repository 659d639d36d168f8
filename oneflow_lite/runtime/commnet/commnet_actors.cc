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
  // A fresh table: it cannot be fixed yet, and the keys stay below kMaxRings
  // for any plan the verifier accepted; a failure here is a bug.
  const Status seeded = channels->AddPlanRings(options.plan_rings);
  CHECK(seeded.ok()) << seeded;
  registry.RegisterActor(TASK_COLLECTIVE, [route, channels, options](const TaskProto& task,
                                                                     const ActorEnv& env) {
    return CollectiveActor::Create(task, env, route, channels.get(), options);
  });
  return registry;
}

}  // namespace oflite
