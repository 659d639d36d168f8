// The actors runtime/commnet adds to the builtin ones, for multi-machine
// plans: TASK_COMMNET (CommNetActor, commnet_actor.h: brings a remote
// register in) and TASK_COLLECTIVE (CollectiveActor, collective_actor.h: one
// ring rank of a cross-machine SBP conversion). Both compose RegstProtocol
// (runtime/regst_protocol.h), which owns the register protocol.
#ifndef ONEFLOW_LITE_RUNTIME_COMMNET_COMMNET_ACTORS_H_
#define ONEFLOW_LITE_RUNTIME_COMMNET_COMMNET_ACTORS_H_

#include "oneflow_lite/runtime/actor_registry.h"
#include "oneflow_lite/runtime/commnet/collective_actor.h"
#include "oneflow_lite/runtime/commnet/commnet_actor.h"
#include "oneflow_lite/runtime/commnet/commnet_route.h"

namespace oflite {

// BuiltinActorRegistry() plus TASK_COMMNET and TASK_COLLECTIVE over `route`
// (the registry owns the RingChannelTable of its collective actors: use one
// registry per runtime). `route` (and options.abort) must outlive the
// actors it creates.
ActorRegistry MultiMachineActorRegistry(CommNetRoute* route,
                                        const CollectiveActorOptions& options = {});

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_COMMNET_COMMNET_ACTORS_H_
