// CollectiveActor (TASK_COLLECTIVE): one ring rank of a cross-machine SBP
// conversion, following the algorithm the compiler recorded in
// TaskProto.collective (collective_algorithm.h; it never chooses).
//
// It composes one piece per responsibility:
//  * RegstProtocol: local slots, produced/returned, end-of-data, finishing;
//  * the recorded algorithm, checked at Create (RecordedRingOp);
//  * a ring algorithm (comm/collective/ring.h: P->B all-reduce, P->S
//    reduce-scatter or all-reduce and cut, S(0)->B all-gather): this class
//    stages its part in the RingWorker's registered buffer, the worker runs
//    the collective on a thread of its own, one piece at a time, and wakes
//    the actor with a kWakeup message from itself (tag: the piece); the
//    actor then cuts its output part and counts the traffic as
//    registered-pool bytes (moved: the ring's sends; copied: staging in and
//    the cut out; one transfer per collective);
//  * a fused bucket (CollectiveConf.member, compiler/gradient_buckets.h):
//    several P->B all-reduces in one: it acts when every member's part is
//    readable and every member's output has a free copy, packs the parts
//    at their element offsets into the buffer, runs ONE all-reduce (the
//    recorded ring or exchange) and copies each member's range to its
//    output; one transfer is counted for the bucket, and its errors name
//    the members. A P->S member's output is this rank's range of its
//    reduced range; an S->B member's part is placed at its range in the
//    member's elements, the others set to the additive identity (-0.0), so
//    the sum is the gathered tensor bit for bit;
//  * all-to-all (AllToAllParts): parts to and from every ring task;
//  * cancellation: with an AbortNotice, the first abort (this rank's
//    Broadcast or a peer's notice) sets the actor's CancelFlag, which stops
//    the ring in flight (it returns within a status poll), and sends the
//    actor a kAbort message, whose handling fails the runtime with that
//    reason even when no ring is in flight. A collective still in flight
//    when the actor is destroyed (its runtime aborted) is cancelled before
//    the worker is joined, so teardown never waits for the ring's deadline.
//
// Each ring collective is bounded by CollectiveActorOptions.ring_timeout;
// its router channel comes from the RingChannelTable (ring_channels.h) and
// its tag is the ring's rank-0 task id. Create fails, naming the task, for
// an algorithm this runtime cannot run. Runs on its actor's thread, except
// the abort listener (any thread) and the worker; the task, env, route,
// channel table and AbortNotice must outlive it.
#ifndef ONEFLOW_LITE_RUNTIME_COMMNET_COLLECTIVE_ACTOR_H_
#define ONEFLOW_LITE_RUNTIME_COMMNET_COLLECTIVE_ACTOR_H_

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "oneflow_lite/comm/collective/cancel.h"
#include "oneflow_lite/runtime/actor.h"
#include "oneflow_lite/runtime/actor_env.h"
#include "oneflow_lite/runtime/commnet/abort_notice.h"
#include "oneflow_lite/runtime/commnet/all_to_all_parts.h"
#include "oneflow_lite/runtime/commnet/collective_algorithm.h"
#include "oneflow_lite/runtime/commnet/commnet_route.h"
#include "oneflow_lite/runtime/commnet/ring_channels.h"
#include "oneflow_lite/runtime/commnet/ring_worker.h"
#include "oneflow_lite/runtime/regst_protocol.h"
#include "proto/plan.pb.h"

namespace oflite {

struct CollectiveActorOptions {
  // Bound of one ring collective (every rank must take part within it).
  std::chrono::milliseconds ring_timeout{120000};
  // Not owned, may be null (then only teardown cancels a ring); must
  // outlive the actors.
  AbortNotice* abort = nullptr;
  // The ring keys (ring_task_id(0)) of every collective of the whole plan,
  // the same on every rank (RingChannelTable::AddPlanRings); empty: only
  // this machine's.
  std::vector<int64_t> plan_rings;
};

class CollectiveActor final : public Actor {
 public:
  // `channels` must outlive the actor; one table per runtime.
  static StatusOr<std::unique_ptr<Actor>> Create(const TaskProto& task, const ActorEnv& env,
                                                 CommNetRoute* route, RingChannelTable* channels,
                                                 const CollectiveActorOptions& options);
  ~CollectiveActor() override;

  int64_t id() const override { return protocol_.id(); }
  const std::string& name() const override { return protocol_.name(); }
  Status Handle(const ActorMessage& message) override;
  bool finished() const override { return finished_; }
  std::string DescribeWaiting() const override;
  int64_t act_count() const override { return protocol_.act_count(); }

 private:
  CollectiveActor(const TaskProto& task, const ActorEnv& env, CommNetRoute* route,
                  RingChannelTable* channels, const CollectiveActorOptions& options)
      : task_(&task), env_(&env), route_(route), channels_(channels), options_(options),
        protocol_(task, env) {}
  // One conversion the collective carries: the task's own (unfused) or a
  // member of its bucket.
  struct Member {
    int64_t input = 0;   // the part's regst desc id
    int64_t output = 0;  // the output's regst desc id
    TensorDesc logical;
    int64_t byte_offset = 0;  // in the ring buffer
    // A bucket's S(a) -> B member: its part is this rank's range along
    // part_axis, placed into identity-filled elements (-1: a whole part).
    int64_t part_axis = -1;
    SbpParallel out_sbp;  // B: the whole member out; S(a): this rank's range
  };

  Status Init();
  Status InitSingle();
  Status InitBucket();
  Status InitRing();
  Status HandleData(const ActorMessage& message);
  bool busy() const { return ring_ != nullptr && ring_->busy(); }
  bool Ready() const;
  Status ActOnce();
  // Acts while it can; then end-of-data and finishing.
  Status Pump();
  Status Stage(const Member& member, const Blob& part);
  Status StartRing();
  Status FinishRing(const ActorMessage& done);
  Status AssembleAllToAll();
  // On the thread that saw the first abort (AbortNotice's lock held).
  void OnAbort(const Status& reason);

  const TaskProto* task_;
  const ActorEnv* env_;
  CommNetRoute* route_;
  RingChannelTable* const channels_;
  const CollectiveActorOptions options_;
  RegstProtocol protocol_;
  std::map<int64_t, int64_t> rank_of_;  // ring task id -> ring rank
  int64_t input_ = 0;                   // the (first member's) data input
  std::vector<Member> members_;         // one, or a bucket's in order
  TensorDesc logical_;                  // what the ring runs over
  std::string bucket_;                  // "bucket of LBN, LBN, ..." (buckets only)
  std::string what_;                    // "collective actor 'NAME' (BUCKET)"
  RingOp ring_op_ = RingOp::kNone;
  comm::CancelFlag cancel_;  // set by the first abort or by destruction
  int listener_ = -1;        // in options_.abort
  std::unique_ptr<RingWorker> ring_;             // ring algorithms only
  std::unique_ptr<AllToAllParts> all_to_all_;    // all-to-all only
  int64_t staged_bytes_ = 0;  // this rank's part, copied into the ring buffer
  bool finished_ = false;
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_COMMNET_COLLECTIVE_ACTOR_H_
