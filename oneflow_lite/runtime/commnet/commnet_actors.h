// Actors for cross-machine tasks, built over CommNetRoute.
//
// CommNetActor (TASK_COMMNET, on the consumer's machine): the remote producer
// (CommNetConf.src_task_id) sends "produced". For a CM_STATIC_ZERO_COPY
// register the actor READs the remote copy into a free copy of its own
// "out" register (CommNetRoute::StartRead; one READ in flight; the route's
// kStart completion message resumes it); otherwise the message came with the
// register's valid bytes (pushed by CommNetRoute), copied into "out". Then
// it produces "out" to its local consumers and returns the remote register.
// End-of-data from the producer is passed on once every received register
// was produced.
//
// CollectiveActor (TASK_COLLECTIVE, one ring rank) follows the algorithm the
// compiler recorded in TaskProto.collective (compiler/collective_choice.h
// says which conversions get which); it never chooses. Create fails, naming
// the task, when the plan records none or one it cannot run (a ring that
// is not one task per machine of the job in machine order, a dtype a ring
// cannot add, buffer sizes that do not match the logical tensor, SBPs the
// ring op does not convert). A ring algorithm (comm/collective/ring.h: P->B
// all-reduce, P->S reduce-scatter, or all-reduce and cut, S(0)->B
// all-gather) runs on a pool buffer of the recorded buffer_bytes, in
// messages of the recorded chunk_bytes and slots, on a worker thread of its
// own, one piece at a time; the worker wakes it with a kStart message from
// itself.
// Each collective is bounded by CollectiveActorOptions.ring_timeout; the
// ring's router channel comes from the RingChannelTable (ring_channels.h),
// and its tag is the ring's rank-0 task id. Cancellation: with an
// AbortNotice, the first abort (this rank's Broadcast or a peer's notice)
// cancels the ring in flight (it returns within a status poll) and fails
// the runtime with that reason even when no ring is in flight; a collective
// still in flight when the actor is destroyed (its runtime aborted) is
// cancelled before the worker is joined, so teardown never waits for the
// ring's deadline. All-to-all: when its local part for
// a piece arrives it sends the part to every other ring task
// (BoxingConf.ring_task_id), local or remote; once all parts of the piece
// are there and an output copy is free it assembles the logical tensor
// (in_sbp: P sums the parts in ring-rank order, S(a) concatenates, B takes
// rank 0's) and cuts its output part (out_sbp: S(a) its balanced range, B
// all, P rank 0 all and the others zeros), like BoxingBody does locally.
//
// Both run on their actor's thread only (see actor.h); the route and env
// must outlive them.
#ifndef ONEFLOW_LITE_RUNTIME_COMMNET_COMMNET_ACTORS_H_
#define ONEFLOW_LITE_RUNTIME_COMMNET_COMMNET_ACTORS_H_

#include <chrono>
#include <memory>

#include "oneflow_lite/runtime/actor.h"
#include "oneflow_lite/runtime/actor_env.h"
#include "oneflow_lite/runtime/actor_registry.h"
#include "oneflow_lite/runtime/commnet/abort_notice.h"
#include "oneflow_lite/runtime/commnet/commnet_route.h"
#include "oneflow_lite/runtime/commnet/ring_channels.h"
#include "proto/plan.pb.h"

namespace oflite {

struct CollectiveActorOptions {
  // Bound of one ring collective (every rank must take part within it).
  std::chrono::milliseconds ring_timeout{120000};
  // Not owned, may be null (then only teardown cancels a ring); must
  // outlive the actors.
  AbortNotice* abort = nullptr;
};

StatusOr<std::unique_ptr<Actor>> CreateCommNetActor(const TaskProto& task, const ActorEnv& env,
                                                    CommNetRoute* route);
// `channels` must outlive the actor; one table per runtime.
StatusOr<std::unique_ptr<Actor>> CreateCollectiveActor(const TaskProto& task,
                                                       const ActorEnv& env, CommNetRoute* route,
                                                       RingChannelTable* channels,
                                                       const CollectiveActorOptions& options);

// BuiltinActorRegistry() plus TASK_COMMNET and TASK_COLLECTIVE over `route`
// (the registry owns the RingChannelTable of its collective actors: use one
// registry per runtime).
ActorRegistry MultiMachineActorRegistry(CommNetRoute* route,
                                        const CollectiveActorOptions& options = {});

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_COMMNET_COMMNET_ACTORS_H_
