#include "oneflow_lite/runtime/commnet/commnet_actors.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <sstream>
#include <thread>

#include "oneflow_lite/comm/collective/ring.h"
#include "oneflow_lite/common/id.h"
#include "oneflow_lite/common/partition.h"
#include "oneflow_lite/runtime/commnet/transfer_trace.h"
#include "oneflow_lite/runtime/register_slots.h"

namespace oflite {
namespace {

// The protocol half both actors share: every local consumed register desc
// (data or control) in ConsumedSlots, every produced desc in ProducedSlots
// (readers, then mutators, as RegstActor does). Subclasses add the remote
// input and decide when to act.
class SlotActor : public Actor {
 public:
  SlotActor(const TaskProto& task, const ActorEnv& env, CommNetRoute* route)
      : task_(&task), env_(&env), route_(route) {}

  int64_t id() const override { return task_->task_id(); }
  const std::string& name() const override { return task_->name(); }
  bool finished() const override { return finished_; }
  int64_t act_count() const override { return acts_; }

 protected:
  // Adds every consumed desc except `skip_desc` (a remote one).
  Status InitSlots(int64_t skip_desc) {
    for (const ConsumedRegst& consumed : task_->consumed()) {
      for (int64_t desc_id : consumed.regst_desc_id()) {
        if (desc_id == skip_desc) continue;
        const RegstDescProto* desc = env_->regsts->FindDesc(desc_id);
        if (desc == nullptr) {
          return InvalidArgumentError("task '", name(), "' consumes register ", desc_id,
                                      " that no task of this machine produces");
        }
        consumed_.AddDesc(desc_id, desc->producer_task_id());
      }
    }
    for (const RegstDescProto& desc : task_->produced()) {
      std::vector<Regst*> copies;
      for (int32_t i = 0; i < desc.regst_num(); ++i) {
        copies.push_back(env_->regsts->Get(desc.regst_desc_id(), i));
      }
      std::vector<int64_t> mutators(desc.mutator_task_id().begin(), desc.mutator_task_id().end());
      std::vector<int64_t> readers;
      for (int64_t consumer : desc.consumer_task_id()) {
        if (std::find(mutators.begin(), mutators.end(), consumer) == mutators.end()) {
          readers.push_back(consumer);
        }
      }
      produced_.AddDesc(desc.regst_desc_id(), std::move(copies), std::move(readers),
                        std::move(mutators));
      if (desc.blob_size() > 0) {
        if (data_out_ != nullptr) {
          return InvalidArgumentError("task '", name(), "' produces two data registers");
        }
        data_out_ = &desc;
      }
    }
    return Status::OK();
  }

  // Acquires a copy of every produced desc; returns the data one (or null).
  Regst* AcquireAll(int64_t piece, std::vector<Regst*>* all) {
    Regst* data = nullptr;
    for (const RegstDescProto& desc : task_->produced()) {
      Regst* regst = produced_.Acquire(desc.regst_desc_id());
      regst->piece_id = piece;
      all->push_back(regst);
      if (&desc == data_out_) data = regst;
    }
    return data;
  }

  Status ProduceAll(const std::vector<Regst*>& all) {
    for (Regst* regst : all) {
      for (int64_t consumer : produced_.MarkProduced(regst)) {
        RETURN_IF_ERROR(env_->bus->Send(ActorMessage::Produced(
            id(), consumer, regst->desc->regst_desc_id(), regst->index, regst->piece_id)));
      }
    }
    ++acts_;
    return Status::OK();
  }

  // Pops the front of every local consumed desc and returns it.
  Status ReturnLocalFronts() {
    for (Regst* regst : consumed_.PopFronts()) {
      RETURN_IF_ERROR(env_->bus->Send(ActorMessage::Returned(
          id(), regst->desc->producer_task_id(), regst->desc->regst_desc_id(), regst->index,
          regst->piece_id)));
    }
    return Status::OK();
  }

  // Handles returned, local produced and local end-of-data messages; false
  // when the message is for the subclass.
  StatusOr<bool> HandleCommon(const ActorMessage& m) {
    if (m.kind == MessageKind::kStart) return true;
    if (m.kind == MessageKind::kReturned) {
      std::vector<int64_t> send_to;
      RETURN_IF_ERROR(produced_.OnReturned(m.regst_desc_id, m.regst_index, &send_to));
      for (int64_t consumer : send_to) {
        RETURN_IF_ERROR(env_->bus->Send(ActorMessage::Produced(id(), consumer, m.regst_desc_id,
                                                               m.regst_index, m.piece_id)));
      }
      return true;
    }
    if (consumed_.producers().count(m.regst_desc_id) == 0) return false;
    if (m.kind == MessageKind::kEndOfData) {
      RETURN_IF_ERROR(consumed_.OnEndOfData(m.regst_desc_id));
      return true;
    }
    if (m.kind == MessageKind::kProduced) {
      ASSIGN_OR_RETURN(Regst * regst, env_->regsts->Find(m.regst_desc_id, m.regst_index));
      RETURN_IF_ERROR(consumed_.OnProduced(regst));
      return true;
    }
    return false;
  }

  // Once `input_done` (the subclass's own input is drained too): end-of-data
  // to every consumer; finished when every produced copy is back.
  Status MaybeFinish(bool input_done) {
    if (!end_sent_ && input_done && consumed_.AllDrained()) {
      end_sent_ = true;
      for (const RegstDescProto& desc : task_->produced()) {
        for (int64_t consumer : desc.consumer_task_id()) {
          RETURN_IF_ERROR(
              env_->bus->Send(ActorMessage::EndOfData(id(), consumer, desc.regst_desc_id())));
        }
      }
    }
    finished_ = end_sent_ && produced_.AllFree();
    return Status::OK();
  }

  std::string DescribeSlots() const {
    return consumed_.DescribeMissing() + " " + produced_.DescribeMissing();
  }

  const TaskProto* task_;
  const ActorEnv* env_;
  CommNetRoute* route_;
  ConsumedSlots consumed_;
  ProducedSlots produced_;
  const RegstDescProto* data_out_ = nullptr;
  bool end_sent_ = false;
  bool finished_ = false;
  int64_t acts_ = 0;
};

class CommNetActor final : public SlotActor {
 public:
  using SlotActor::SlotActor;
  Status Init() {
    RETURN_IF_ERROR(InitSlots(task_->commnet().src_regst_desc_id()));
    zero_copy_ = CommNetRoute::IsPulledByRead(task_->commnet().src_regst());
    transfers_.Init(env_->tracer, name());
    if (task_->commnet().src_regst().blob_size() > 0 && data_out_ == nullptr) {
      return InvalidArgumentError("commnet task '", name(), "' has no data register to fill");
    }
    return Status::OK();
  }

  std::string DescribeWaiting() const override {
    if (finished_) return "";
    std::ostringstream os;
    if (!end_of_data_) os << "data from " << TaskIdToString(task_->commnet().src_task_id()) << "; ";
    os << pending_.size() << " received; " << DescribeSlots();
    return os.str();
  }

  Status Handle(const ActorMessage& m) override {
    const std::string what = "commnet actor '" + name() + "'";
    if (m.kind == MessageKind::kStart && m.src_actor_id == task_->commnet().src_task_id()) {
      RETURN_IF_ERROR(FinishRead(m).WithContext(what));
      return Pump(what);
    }
    StatusOr<bool> common = HandleCommon(m);
    if (!common.ok()) return common.status().WithContext(what);
    const bool handled = *common;
    if (!handled) {
      if (m.src_actor_id != task_->commnet().src_task_id() ||
          m.regst_desc_id != task_->commnet().src_regst_desc_id()) {
        return InvalidArgumentError(what, ": unexpected ", m.ToString());
      }
      if (m.kind == MessageKind::kProduced && zero_copy_) {
        pending_.push_back({m, std::string()});
      } else if (m.kind == MessageKind::kProduced) {
        StatusOr<std::string> payload = route_->TakePayload(m);
        if (!payload.ok()) return payload.status().WithContext(what);
        pending_.push_back({m, std::move(*payload)});
      } else if (m.kind == MessageKind::kEndOfData) {
        end_of_data_ = true;
      } else {
        return InvalidArgumentError(what, ": unexpected ", m.ToString());
      }
    }
    return Pump(what);
  }

 private:
  Status Pump(const std::string& what) {
    while (!reading_ && !pending_.empty() && consumed_.AllReadable() &&
           produced_.AllHaveFree()) {
      RETURN_IF_ERROR((zero_copy_ ? StartRead() : ActOnce()).WithContext(what));
    }
    return MaybeFinish(end_of_data_ && pending_.empty());
  }

  // Zero-copy: one READ in flight at a time, in arrival order.
  Status StartRead() {
    const ActorMessage& message = pending_.front().first;
    reading_regsts_.clear();
    Regst* data = AcquireAll(message.piece_id, &reading_regsts_);
    reading_ = true;
    transfers_.Begin();
    return route_->StartRead(message, task_->commnet().src_regst(), data);
  }

  Status FinishRead(const ActorMessage& completion) {
    if (!reading_ || pending_.empty() || !(pending_.front().first.regst_index ==
                                           completion.regst_index &&
                                           pending_.front().first.piece_id == completion.piece_id)) {
      return InternalError("READ completion without a READ in flight: ", completion.ToString());
    }
    RETURN_IF_ERROR(route_->TakeReadStatus(completion));
    const ActorMessage message = pending_.front().first;
    transfers_.End(message, task_->commnet().src_regst());
    pending_.pop_front();
    reading_ = false;
    RETURN_IF_ERROR(ProduceAll(reading_regsts_));
    RETURN_IF_ERROR(ReturnLocalFronts());
    return env_->bus->Send(ActorMessage::Returned(id(), message.src_actor_id,
                                                  message.regst_desc_id, message.regst_index,
                                                  message.piece_id));
  }

  Status ActOnce() {
    auto [message, payload] = std::move(pending_.front());
    pending_.pop_front();
    std::vector<Regst*> all;
    Regst* data = AcquireAll(message.piece_id, &all);
    if (data != nullptr) RETURN_IF_ERROR(DeserializeRegst(payload, data));
    RETURN_IF_ERROR(ProduceAll(all));
    RETURN_IF_ERROR(ReturnLocalFronts());
    return env_->bus->Send(ActorMessage::Returned(id(), message.src_actor_id,
                                                  message.regst_desc_id, message.regst_index,
                                                  message.piece_id));
  }

  std::deque<std::pair<ActorMessage, std::string>> pending_;
  bool end_of_data_ = false;
  bool zero_copy_ = false;  // CM_STATIC_ZERO_COPY source register: pulled by READ
  bool reading_ = false;
  std::vector<Regst*> reading_regsts_;
  TransferTrace transfers_;
};

const SbpParallel& FirstSbp(const NdSbp& sbp) {
  static const SbpParallel* broadcast = [] {
    auto* s = new SbpParallel();
    s->set_broadcast(true);
    return s;
  }();
  return sbp.sbp_size() > 0 ? sbp.sbp(0) : *broadcast;
}

class CollectiveActor final : public SlotActor {
 public:
  CollectiveActor(const TaskProto& task, const ActorEnv& env, CommNetRoute* route,
                  RingChannelTable* channels, const CollectiveActorOptions& options)
      : SlotActor(task, env, route), channels_(channels), options_(options) {}

  Status Init() {
    RETURN_IF_ERROR(InitSlots(/*skip_desc=*/-1));
    if (env_->tracer != nullptr) ring_track_ = env_->tracer->AddTrack("ring " + name());
    const BoxingConf& conf = task_->boxing();
    for (int r = 0; r < conf.ring_task_id_size(); ++r) rank_of_[conf.ring_task_id(r)] = r;
    if (rank_of_.count(id()) == 0 || conf.in_regst_desc_id_size() != 1 || data_out_ == nullptr) {
      return InvalidArgumentError("collective task '", name(), "': not in its ring, ",
                                  conf.in_regst_desc_id_size(),
                                  " data inputs (expected 1) or no data output");
    }
    input_ = conf.in_regst_desc_id(0);
    if (consumed_.producers().count(input_) == 0) {
      return InvalidArgumentError("collective task '", name(), "': input ", input_,
                                  " is not consumed");
    }
    logical_ = TensorDesc(conf.logical_desc());
    RETURN_IF_ERROR(FollowRecordedAlgorithm());
    if (ring_op_ != RingOp::kNone) {
      RETURN_IF_ERROR(channels_->Add(conf.ring_task_id(0), id(), name()));
    }
    if (options_.abort != nullptr) {
      listener_ = options_.abort->AddListener([this](const Status& reason) { OnAbort(reason); });
    }
    return Status::OK();
  }

  ~CollectiveActor() override {
    if (options_.abort != nullptr && listener_ >= 0) options_.abort->RemoveListener(listener_);
    if (worker_.joinable()) {
      // Destroyed with a collective in flight: the runtime aborted. The
      // peers may never finish this ring; do not wait for its deadline.
      cancel_.Cancel(AbortedError("collective actor '", name(),
                                  "' destroyed with its ring collective in flight"));
      worker_.join();
    }
  }

  std::string DescribeWaiting() const override {
    if (finished_) return "";
    std::ostringstream os;
    if (busy_) os << "ring collective of piece " << ring_piece_ << " in flight; ";
    os << "peer parts for " << parts_.size() << " pieces";
    for (const auto& [piece, ranks] : parts_) {
      os << " (piece " << piece << ": " << ranks.size() << " of " << rank_of_.size() - 1 << ")";
      break;
    }
    os << "; " << DescribeSlots();
    return os.str();
  }

  Status Handle(const ActorMessage& m) override {
    const std::string what = "collective actor '" + name() + "'";
    if (m.is_wakeup() && m.src_actor_id == id() && m.regst_desc_id == kAbortSignal) {
      return cancel_.status();  // this rank or a peer failed
    }
    if (m.kind == MessageKind::kStart && m.src_actor_id == id()) {
      RETURN_IF_ERROR(FinishRing(m).WithContext(what));
      while (Ready()) RETURN_IF_ERROR(ActOnce().WithContext(what));
      return MaybeFinish(!busy_);
    }
    StatusOr<bool> common = HandleCommon(m);
    if (!common.ok()) return common.status().WithContext(what);
    if (*common) {
      if (m.kind == MessageKind::kProduced && m.regst_desc_id == input_ &&
          ring_op_ == RingOp::kNone) {
        RETURN_IF_ERROR(SendPart(m).WithContext(what));
      }
    } else if (m.kind == MessageKind::kProduced && rank_of_.count(m.src_actor_id) > 0) {
      StatusOr<std::string> payload = route_->TakePayload(m);
      if (!payload.ok()) return payload.status().WithContext(what);
      parts_[m.piece_id][rank_of_[m.src_actor_id]] = std::move(*payload);
    } else {
      return InvalidArgumentError(what, ": unexpected ", m.ToString());
    }
    while (Ready()) RETURN_IF_ERROR(ActOnce().WithContext(what));
    return MaybeFinish(!busy_);
  }

 private:
  enum class RingOp { kNone, kAllReduce, kReduceScatter, kAllGather };

  // Follows the algorithm the compiler recorded (TaskProto.collective,
  // compiler/collective_choice.h): all-to-all, or a ring op on a pool
  // buffer. A choice this runtime cannot run is refused, naming the task.
  Status FollowRecordedAlgorithm() {
    const CollectiveConf& conf = task_->collective();
    switch (conf.algorithm()) {
      case COLLECTIVE_ALL_TO_ALL: ring_op_ = RingOp::kNone; return Status::OK();
      case COLLECTIVE_RING_ALL_REDUCE: ring_op_ = RingOp::kAllReduce; break;
      case COLLECTIVE_RING_REDUCE_SCATTER: ring_op_ = RingOp::kReduceScatter; break;
      case COLLECTIVE_RING_ALL_GATHER: ring_op_ = RingOp::kAllGather; break;
      default:
        return InvalidArgumentError("collective task '", name(), "': the plan records no "
                                    "algorithm (TaskProto.collective); recompile the plan");
    }
    const std::string why = WhyRingImpossible(conf);
    if (!why.empty()) {
      return InvalidArgumentError("collective task '", name(), "': the plan's algorithm ",
                                  CollectiveAlgorithm_Name(conf.algorithm()),
                                  " cannot run: ", why);
    }
    ASSIGN_OR_RETURN(buffer_, route_->net()->pool()->Allocate(conf.buffer_bytes()));
    return Status::OK();
  }

  // Empty when the recorded ring op (ring_op_) can run here: an addable
  // dtype, buffers that fit the logical tensor, SBPs the op turns into each
  // other (the plan's own consistency), and one ring task per machine of
  // this job in machine order (the plan against this CommNet).
  std::string WhyRingImpossible(const CollectiveConf& conf) const {
    const BoxingConf& boxing = task_->boxing();
    const int64_t n = boxing.ring_task_id_size();
    std::string why = WhyRingInconsistent(conf, n);
    if (!why.empty()) return why;
    comm::CommNet* net = route_->net();
    if (net == nullptr) return "this runtime has no CommNet";
    if (n != net->world_size()) {
      return "its ring has " + std::to_string(n) + " tasks, the job " +
             std::to_string(net->world_size()) + " machines";
    }
    for (int64_t r = 0; r < n; ++r) {
      if (MachineOfTaskId(boxing.ring_task_id(r)) != r) {
        return "ring rank " + std::to_string(r) + " is not on machine " + std::to_string(r);
      }
    }
    return "";
  }

  std::string WhyRingInconsistent(const CollectiveConf& conf, int64_t n) const {
    if (n < 2) return "a ring needs 2 or more tasks, it has " + std::to_string(n);
    const DataType dtype = logical_.dtype;
    if (!CanAccumulate(dtype)) {
      return std::string("a ring cannot add ") + DataTypeName(dtype);
    }
    const int64_t elem = SizeOf(dtype);
    if (logical_.shape.elem_count() <= 0 || conf.element_count() != logical_.shape.elem_count() ||
        conf.buffer_bytes() != logical_.ByteSize()) {
      return "element_count " + std::to_string(conf.element_count()) + " / buffer_bytes " +
             std::to_string(conf.buffer_bytes()) + " do not match the logical " +
             logical_.ToString();
    }
    if (conf.chunk_bytes() < 8 || conf.chunk_bytes() % elem != 0 || conf.slots() < 1) {
      return "chunk_bytes " + std::to_string(conf.chunk_bytes()) + " (needs >= 8, a multiple of " +
             std::to_string(elem) + ") or slots " + std::to_string(conf.slots()) + " (needs >= 1)";
    }
    return WhySbpsDoNotFit(n);
  }

  std::string WhySbpsDoNotFit(int64_t n) const {
    const SbpParallel& in = FirstSbp(task_->boxing().in_sbp());
    const SbpParallel& out = FirstSbp(task_->boxing().out_sbp());
    const bool segments_match = SplitMatchesSegments(n);
    const bool fits =
        ring_op_ == RingOp::kAllReduce
            ? in.has_partial_sum() && (out.has_broadcast() || out.has_split_axis())
        : ring_op_ == RingOp::kReduceScatter
            ? in.has_partial_sum() && out.has_split_axis() && out.split_axis() == 0 &&
                  segments_match
            : in.has_split_axis() && in.split_axis() == 0 && out.has_broadcast() &&
                  segments_match;
    if (fits) return "";
    return "it does not turn " + in.ShortDebugString() + " into " + out.ShortDebugString() +
           (segments_match ? "" : " (the axis-0 parts are not the ring's flat segments)");
  }

  // True when rank r's axis-0 balanced range is the ring's flat segment r.
  bool SplitMatchesSegments(int64_t n) const {
    if (logical_.shape.rank() == 0 || logical_.shape.dim(0) <= 0) return false;
    const int64_t count = logical_.shape.elem_count();
    const int64_t inner = count / logical_.shape.dim(0);
    for (int64_t r = 0; r < n; ++r) {
      size_t seg_begin = 0, seg_end = 0;
      comm::RingCommunicator::SegmentBounds(count, static_cast<int>(n), static_cast<int>(r),
                                            &seg_begin, &seg_end);
      const PartRange range = BalancedPart(logical_.shape.dim(0), n, r);
      if (static_cast<int64_t>(seg_begin) != range.begin * inner ||
          static_cast<int64_t>(seg_end) != range.end() * inner) {
        return false;
      }
    }
    return true;
  }

  // On the thread that saw the first abort (AbortNotice's lock held): stops
  // the ring in flight and wakes this actor, whose Handle then fails the
  // runtime with `reason`. After the run the bus may refuse: nothing to fail.
  void OnAbort(const Status& reason) {
    cancel_.Cancel(reason);
    ActorMessage wakeup = ActorMessage::Wakeup(id(), -1);
    wakeup.regst_desc_id = kAbortSignal;
    (void)env_->bus->Send(wakeup);
  }

  // Ring mode: stages this rank's part in the registered buffer and runs the
  // collective on a worker thread (it blocks until every rank took part); the
  // worker posts kStart from this actor to itself when done.
  Status StartRing() {
    Regst* in = consumed_.Front(input_);
    const Blob& blob = in->blobs.at(0);
    const int64_t elem = SizeOf(logical_.dtype);
    const int64_t count = logical_.shape.elem_count();
    const int64_t n = static_cast<int64_t>(rank_of_.size());
    const int64_t me = rank_of_.at(id());
    size_t seg_begin = 0, seg_end = 0;
    comm::RingCommunicator::SegmentBounds(count, static_cast<int>(n), static_cast<int>(me),
                                          &seg_begin, &seg_end);
    const int64_t expect = ring_op_ == RingOp::kAllGather
                               ? static_cast<int64_t>(seg_end - seg_begin) * elem
                               : logical_.ByteSize();
    if (blob.ByteSize() != expect) {
      return InvalidArgumentError("part of ring rank ", me, " has ", blob.ByteSize(),
                                  " bytes, expected ", expect, " (logical ",
                                  logical_.ToString(), ")");
    }
    const size_t at = ring_op_ == RingOp::kAllGather ? seg_begin * elem : 0;
    std::memcpy(buffer_.data() + at, blob.raw(), expect);
    staged_bytes_ = expect;
    if (worker_.joinable()) worker_.join();
    busy_ = true;
    ring_piece_ = in->piece_id;
    worker_ = std::thread([this, count, me, piece = in->piece_id] {
      trace::ScopedCurrentTrack traced(ring_track_, piece);
      ring_status_ = RunRing(count, me);
      Status sent = env_->bus->Send(ActorMessage::Wakeup(id(), piece));
      if (!sent.ok() && !cancel_.cancelled()) {
        std::fprintf(stderr, "collective actor '%s': %s\n", name().c_str(),
                     sent.ToString().c_str());
      }
    });
    return Status::OK();
  }

  // The ring collective of ring_op_ (not kNone).
  comm::RingCollective Collective() const {
    switch (ring_op_) {
      case RingOp::kReduceScatter: return comm::RingCollective::kReduceScatter;
      case RingOp::kAllGather: return comm::RingCollective::kAllGather;
      default: return comm::RingCollective::kAllReduce;
    }
  }

  // On the worker thread.
  Status RunRing(int64_t count, int64_t me) {
    comm::CommNet* net = route_->net();
    RETURN_IF_ERROR(cancel_.status());
    if (communicator_ == nullptr) {
      const int64_t ring_key = task_->boxing().ring_task_id(0);
      comm::CollectiveOptions options;
      ASSIGN_OR_RETURN(options.channel, channels_->ChannelOf(ring_key));
      options.tag = static_cast<uint64_t>(ring_key);
      options.cancel = &cancel_;
      options.setup_timeout = std::min(options.setup_timeout, options_.ring_timeout);
      options.chunk_bytes = static_cast<size_t>(task_->collective().chunk_bytes());
      options.slots = task_->collective().slots();
      ASSIGN_OR_RETURN(communicator_, comm::RingCommunicator::Create(
                                          net->transport(), net->router(), net->pool(), options));
    }
    const comm::Deadline deadline = comm::DeadlineAfter(options_.ring_timeout);
    const comm::MemoryRegion& region = buffer_.region();
    Status status;
    switch (ring_op_) {
      case RingOp::kAllReduce:
        status = communicator_->AllReduce(region, buffer_.offset(), count, logical_.dtype, deadline);
        break;
      case RingOp::kReduceScatter:
        status = communicator_->ReduceScatter(region, buffer_.offset(), count, logical_.dtype,
                                              deadline);
        break;
      case RingOp::kAllGather:
        status = communicator_->AllGather(region, buffer_.offset(), count, logical_.dtype, deadline);
        break;
      case RingOp::kNone:
        return InternalError("ring collective without a ring op");
    }
    return status.WithContext("ring rank " + std::to_string(me) + " of " +
                              std::to_string(rank_of_.size()));
  }

  // Ring mode: the collective of the front piece is done; cut the output.
  Status FinishRing(const ActorMessage& done) {
    if (!busy_ || done.piece_id != ring_piece_) {
      return InternalError("ring completion without a collective in flight: ", done.ToString());
    }
    worker_.join();
    busy_ = false;
    RETURN_IF_ERROR(ring_status_);
    // Counted as registered-pool traffic: the ring WRITEs from and into a
    // pool buffer; the CPU copies are the staging in and the cut out.
    comm::StrategyCounters& counters = route_->net()->stats()->pool;
    counters.bytes_moved += static_cast<int64_t>(comm::RingBytesSent(
        Collective(), logical_.shape.elem_count(), SizeOf(logical_.dtype), rank_of_.at(id()),
        static_cast<int>(rank_of_.size())));
    counters.transfers += 1;
    counters.bytes_copied += staged_bytes_;
    std::vector<Regst*> all;
    Regst* out = AcquireAll(ring_piece_, &all);
    char* dst = static_cast<char*>(out->blobs.at(0).raw());
    const SbpParallel& out_sbp = FirstSbp(task_->boxing().out_sbp());
    char* whole = reinterpret_cast<char*>(buffer_.data());
    if (out_sbp.has_split_axis()) {
      const PartRange range = BalancedPart(logical_.shape.dim(out_sbp.split_axis()),
                                           rank_of_.size(), rank_of_.at(id()));
      CopyWholeToPart(logical_.shape, out_sbp.split_axis(), range, SizeOf(logical_.dtype), whole,
                      dst);
      counters.bytes_copied +=
          logical_.ByteSize() / logical_.shape.dim(out_sbp.split_axis()) * range.size;
    } else {
      counters.bytes_copied += logical_.ByteSize();
      std::memcpy(dst, whole, logical_.ByteSize());
    }
    RETURN_IF_ERROR(ProduceAll(all));
    return ReturnLocalFronts();
  }

  // Sends this rank's part to every other ring task.
  Status SendPart(const ActorMessage& m) {
    ASSIGN_OR_RETURN(Regst * regst, env_->regsts->Find(m.regst_desc_id, m.regst_index));
    for (const auto& [task, rank] : rank_of_) {
      if (task == id()) continue;
      RETURN_IF_ERROR(route_->SendWithData(
          ActorMessage::Produced(id(), task, m.regst_desc_id, m.regst_index, m.piece_id), *regst));
    }
    return Status::OK();
  }

  bool Ready() const {
    if (busy_ || !consumed_.AllReadable() || !produced_.AllHaveFree()) return false;
    if (ring_op_ != RingOp::kNone) return true;
    const size_t peers = rank_of_.size() - 1;
    if (peers == 0) return true;
    auto it = parts_.find(consumed_.Front(input_)->piece_id);
    return it != parts_.end() && it->second.size() == peers;
  }

  Status ActOnce() {
    if (ring_op_ != RingOp::kNone) return StartRing();
    Regst* in = consumed_.Front(input_);
    const int64_t piece = in->piece_id;
    const int64_t n = static_cast<int64_t>(rank_of_.size());
    const int64_t me = rank_of_[id()];
    std::vector<std::string> parts(n);
    std::vector<Shape> shapes(n);
    for (int64_t r = 0; r < n; ++r) {
      if (r == me) {
        const Blob& blob = in->blobs.at(0);
        parts[r].assign(static_cast<const char*>(blob.raw()), blob.ByteSize());
        shapes[r] = blob.shape();
        continue;
      }
      ASSIGN_OR_RETURN(std::vector<PayloadBlob> blobs, ParsePayload(parts_[piece][r]));
      if (blobs.empty()) return DataLossError("part of ring rank ", r, " has no blob");
      parts[r] = std::move(blobs[0].bytes);
      shapes[r] = blobs[0].shape;
    }
    parts_.erase(piece);
    std::vector<Regst*> all;
    Regst* out = AcquireAll(piece, &all);
    RETURN_IF_ERROR(Compute(parts, shapes, me, n, &out->blobs.at(0)));
    RETURN_IF_ERROR(ProduceAll(all));
    return ReturnLocalFronts();
  }

  Status Compute(const std::vector<std::string>& parts, const std::vector<Shape>& shapes,
                 int64_t me, int64_t n, Blob* output) {
    const BoxingConf& conf = task_->boxing();
    const SbpParallel& in = FirstSbp(conf.in_sbp());
    const SbpParallel& out = FirstSbp(conf.out_sbp());
    const int64_t elem = SizeOf(logical_.dtype);
    const int64_t bytes = logical_.ByteSize();
    whole_.assign(bytes, 0);
    if (in.has_partial_sum()) {
      for (int64_t r = 0; r < n; ++r) {
        if (static_cast<int64_t>(parts[r].size()) != bytes) {
          return InvalidArgumentError("part of ring rank ", r, " has ", parts[r].size(),
                                      " bytes, logical ", logical_.ToString());
        }
        if (r == 0) { std::memcpy(whole_.data(), parts[0].data(), bytes); continue; }
        RETURN_IF_ERROR(AccumulateInto(logical_.dtype, parts[r].data(), whole_.data(),
                                       bytes / elem)
                            .WithContext("collective partial-sum"));
      }
    } else if (in.has_split_axis()) {
      for (int64_t r = 0; r < n; ++r) {
        const PartRange range = BalancedPart(logical_.shape.dim(in.split_axis()), n, r);
        const int64_t expect = logical_.shape.elem_count() / std::max<int64_t>(1, logical_.shape.dim(in.split_axis())) * range.size * elem;
        if (static_cast<int64_t>(parts[r].size()) != expect) {
          return InvalidArgumentError("part of ring rank ", r, " has ", parts[r].size(), " bytes, expected ", expect);
        }
        CopyPartToWhole(logical_.shape, in.split_axis(), range, elem, parts[r].data(),
                        whole_.data());
      }
    } else {
      if (static_cast<int64_t>(parts[0].size()) != bytes) return InvalidArgumentError("broadcast part size");
      std::memcpy(whole_.data(), parts[0].data(), bytes);
    }
    char* dst = static_cast<char*>(output->raw());
    if (out.has_split_axis()) {
      const PartRange range = BalancedPart(logical_.shape.dim(out.split_axis()), n, me);
      CopyWholeToPart(logical_.shape, out.split_axis(), range, elem, whole_.data(), dst);
    } else if (out.has_partial_sum() && me != 0) {
      std::memset(dst, 0, bytes);
    } else {
      std::memcpy(dst, whole_.data(), bytes);
    }
    return Status::OK();
  }

  std::map<int64_t, int64_t> rank_of_;  // ring task id -> ring rank
  int64_t input_ = 0;
  TensorDesc logical_;
  std::map<int64_t, std::map<int64_t, std::string>> parts_;  // piece -> rank -> payload
  std::vector<char> whole_;
  // Ring mode (ring_op_ != kNone).
  static constexpr int64_t kAbortSignal = -2;  // regst_desc_id of the abort wakeup
  RingChannelTable* const channels_;
  const CollectiveActorOptions options_;
  comm::CancelFlag cancel_;  // set by the first abort or by destruction
  int listener_ = -1;        // in options_.abort
  RingOp ring_op_ = RingOp::kNone;
  comm::PoolBuffer buffer_;  // the logical tensor, registered
  std::unique_ptr<comm::RingCommunicator> communicator_;  // used by the worker only
  std::thread worker_;
  Status ring_status_;  // written by the worker before it posts completion
  bool busy_ = false;
  int64_t ring_piece_ = -1;
  int64_t staged_bytes_ = 0;  // this rank's part, copied into buffer_
  trace::Track* ring_track_ = nullptr;  // the worker's; null: untraced
};

}  // namespace

StatusOr<std::unique_ptr<Actor>> CreateCommNetActor(const TaskProto& task, const ActorEnv& env,
                                                    CommNetRoute* route) {
  auto actor = std::make_unique<CommNetActor>(task, env, route);
  RETURN_IF_ERROR(actor->Init());
  return std::unique_ptr<Actor>(std::move(actor));
}

StatusOr<std::unique_ptr<Actor>> CreateCollectiveActor(const TaskProto& task,
                                                       const ActorEnv& env, CommNetRoute* route,
                                                       RingChannelTable* channels,
                                                       const CollectiveActorOptions& options) {
  auto actor = std::make_unique<CollectiveActor>(task, env, route, channels, options);
  RETURN_IF_ERROR(actor->Init());
  return std::unique_ptr<Actor>(std::move(actor));
}

ActorRegistry MultiMachineActorRegistry(CommNetRoute* route,
                                        const CollectiveActorOptions& options) {
  ActorRegistry registry = BuiltinActorRegistry();
  registry.RegisterActor(TASK_COMMNET, [route](const TaskProto& task, const ActorEnv& env) {
    return CreateCommNetActor(task, env, route);
  });
  auto channels = std::make_shared<RingChannelTable>();
  registry.RegisterActor(TASK_COLLECTIVE, [route, channels, options](const TaskProto& task,
                                                                     const ActorEnv& env) {
    return CreateCollectiveActor(task, env, route, channels.get(), options);
  });
  return registry;
}

}  // namespace oflite
