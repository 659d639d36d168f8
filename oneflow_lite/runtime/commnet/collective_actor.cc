#include "oneflow_lite/runtime/commnet/collective_actor.h"

#include <cstdio>
#include <cstring>
#include <sstream>

#include "oneflow_lite/common/id.h"
#include "oneflow_lite/common/partition.h"

namespace oflite {
namespace {

// Cuts this rank's output part (out_sbp: S(a) its balanced range, else all)
// from the whole tensor; returns the bytes copied.
int64_t CutRingOutput(const TensorDesc& logical, const SbpParallel& out_sbp, int64_t rank,
                      int64_t world, const char* whole, char* dst) {
  if (!out_sbp.has_split_axis()) {
    std::memcpy(dst, whole, logical.ByteSize());
    return logical.ByteSize();
  }
  const int64_t axis = out_sbp.split_axis();
  const PartRange range = BalancedPart(logical.shape.dim(axis), world, rank);
  CopyWholeToPart(logical.shape, axis, range, SizeOf(logical.dtype), whole, dst);
  return logical.ByteSize() / logical.shape.dim(axis) * range.size;
}

// Counted as registered-pool traffic: the ring WRITEs from and into a pool
// buffer (the exchange's messages carry the same pool buffer's bytes); the
// CPU copies are the staging in and the cut out.
void CountRingTraffic(RingOp op, const TensorDesc& logical, int rank, int world, int64_t copied,
                      comm::StrategyCounters* counters) {
  counters->bytes_moved += static_cast<int64_t>(CollectiveBytesSent(op, logical, rank, world));
  counters->transfers += 1;
  counters->bytes_copied += copied;
}

}  // namespace

StatusOr<std::unique_ptr<Actor>> CollectiveActor::Create(const TaskProto& task, const ActorEnv& env,
                                                         CommNetRoute* route,
                                                         RingChannelTable* channels,
                                                         const CollectiveActorOptions& options) {
  std::unique_ptr<CollectiveActor> actor(new CollectiveActor(task, env, route, channels, options));
  RETURN_IF_ERROR(actor->Init());
  return std::unique_ptr<Actor>(std::move(actor));
}

Status CollectiveActor::Init() {
  RETURN_IF_ERROR(protocol_.Init());
  const BoxingConf& conf = task_->boxing();
  for (int r = 0; r < conf.ring_task_id_size(); ++r) rank_of_[conf.ring_task_id(r)] = r;
  what_ = "collective actor '" + name() + "'";
  if (rank_of_.count(id()) == 0) {
    return InvalidArgumentError("collective task '", name(), "': not in its ring");
  }
  logical_ = TensorDesc(conf.logical_desc());
  RETURN_IF_ERROR(task_->collective().member_size() > 0 ? InitBucket() : InitSingle());
  input_ = members_.front().input;
  RETURN_IF_ERROR(InitRing());
  if (options_.abort != nullptr) {
    listener_ = options_.abort->AddListener([this](const Status& reason) { OnAbort(reason); });
  }
  return Status::OK();
}

// An unfused collective: its one input and one data output.
Status CollectiveActor::InitSingle() {
  ASSIGN_OR_RETURN(const RegstDescProto* data_out, protocol_.SingleDataOutput());
  const BoxingConf& conf = task_->boxing();
  if (conf.in_regst_desc_id_size() != 1 || data_out == nullptr) {
    return InvalidArgumentError("collective task '", name(), "': ", conf.in_regst_desc_id_size(),
                                " data inputs (expected 1) or no data output");
  }
  Member member;
  member.input = conf.in_regst_desc_id(0);
  member.output = data_out->regst_desc_id();
  member.logical = logical_;
  member.out_sbp = FirstSbp(conf.out_sbp());
  if (!protocol_.Consumes(member.input)) {
    return InvalidArgumentError("collective task '", name(), "': input ", member.input,
                                " is not consumed");
  }
  members_.push_back(member);
  return Status::OK();
}

// A fused bucket: every member's part consumed, its output produced, its
// range inside the bucket's buffer.
Status CollectiveActor::InitBucket() {
  std::string names;
  for (const CollectiveMember& m : task_->collective().member()) {
    Member member;
    member.input = m.in_regst_desc_id();
    member.output = m.out_regst_desc_id();
    member.logical = TensorDesc(m.logical_desc());
    member.byte_offset = m.element_offset() * SizeOf(logical_.dtype);
    member.out_sbp = m.has_out_sbp() ? m.out_sbp() : SbpParallel();
    if (!m.has_out_sbp()) member.out_sbp.set_broadcast(true);
    // P -> B (both unset), P -> S(a) or S(a) -> B, a an axis of the member.
    const int64_t rank = member.logical.shape.rank();
    auto axis_ok = [rank](int64_t axis) { return axis >= 0 && axis < rank; };
    bool sbp_ok = !m.in_sbp().has_broadcast() && !m.out_sbp().has_partial_sum();
    if (m.in_sbp().has_split_axis()) {
      member.part_axis = m.in_sbp().split_axis();
      sbp_ok = sbp_ok && axis_ok(member.part_axis) && member.out_sbp.has_broadcast();
    } else if (member.out_sbp.has_split_axis()) {
      sbp_ok = sbp_ok && axis_ok(member.out_sbp.split_axis());
    }
    if (!sbp_ok) {
      return InvalidArgumentError("collective task '", name(), "': bucket member '", m.lbn(),
                                  "' converts ", m.in_sbp().ShortDebugString(), " -> ",
                                  m.out_sbp().ShortDebugString(), " of ", member.logical.ToString(),
                                  " (a bucket member is P -> B, P -> S(a) or S(a) -> B)");
    }
    bool produced = false;
    for (const RegstDescProto& desc : task_->produced()) {
      produced = produced || (desc.regst_desc_id() == member.output && !desc.is_ctrl());
    }
    if (!protocol_.Consumes(member.input) || !produced || member.logical.dtype != logical_.dtype ||
        m.element_offset() < 0 ||
        member.byte_offset + member.logical.ByteSize() > logical_.ByteSize()) {
      return InvalidArgumentError("collective task '", name(), "': bucket member '", m.lbn(),
                                  "' (input ", member.input, ", output ", member.output, ", ",
                                  member.logical.ToString(), " at element ", m.element_offset(),
                                  ") does not fit the task (bucket ", logical_.ToString(), ")");
    }
    names += (names.empty() ? "" : ", ") + m.lbn();
    members_.push_back(member);
  }
  bucket_ = "bucket of " + names;
  what_ += " (" + bucket_ + ")";
  return Status::OK();
}

Status CollectiveActor::InitRing() {
  trace::Track* track =
      env_->tracer != nullptr ? env_->tracer->AddTrack("ring " + name()) : nullptr;
  ASSIGN_OR_RETURN(ring_op_, RecordedRingOp(*task_, logical_, route_->net()));
  if (task_->collective().member_size() > 0 && ring_op_ != RingOp::kAllReduce &&
      !IsExchangeOp(ring_op_)) {
    return InvalidArgumentError(what_, ": a bucket runs an all-reduce, the plan records ",
                                CollectiveAlgorithm_Name(task_->collective().algorithm()));
  }
  if (ring_op_ == RingOp::kNone) {
    all_to_all_ = std::make_unique<AllToAllParts>(*task_, logical_, rank_of_, id(), route_);
    return Status::OK();
  }
  const CollectiveConf& conf = task_->collective();
  RingWorkerOptions options;
  options.actor_name = name();
  options.net = route_->net();
  options.channels = channels_;
  options.ring_key = task_->boxing().ring_task_id(0);
  // RecordedRingOp checked the ring's machines are distinct ranks of the job.
  DistinctMachinesOf(task_->boxing().ring_task_id(), route_->net()->world_size(), &options.members);
  options.chunk_bytes = static_cast<size_t>(conf.chunk_bytes());
  options.slots = conf.slots();
  options.timeout = options_.ring_timeout;
  options.cancel = &cancel_;
  options.track = track;
  ring_ = std::make_unique<RingWorker>(ring_op_, logical_, static_cast<int>(rank_of_.at(id())),
                                       static_cast<int>(rank_of_.size()), std::move(options));
  RETURN_IF_ERROR(ring_->Allocate(conf.buffer_bytes()));
  return channels_->Add(task_->boxing().ring_task_id(0), id(), name());
}

CollectiveActor::~CollectiveActor() {
  if (options_.abort != nullptr && listener_ >= 0) options_.abort->RemoveListener(listener_);
  ring_.reset();  // cancels and joins a collective in flight
}

std::string CollectiveActor::DescribeWaiting() const {
  if (finished_) return "";
  std::ostringstream os;
  if (!bucket_.empty()) os << bucket_ << ": ";
  if (busy()) os << "ring collective of piece " << ring_->piece() << " in flight; ";
  os << (all_to_all_ != nullptr ? all_to_all_->Describe() : "peer parts for 0 pieces");
  os << "; " << protocol_.DescribeInputs() << " " << protocol_.DescribeOutputs();
  return os.str();
}

Status CollectiveActor::Handle(const ActorMessage& m) {
  const std::string& what = what_;
  switch (m.kind) {
    case MessageKind::kAbort:
      return cancel_.status();  // this rank or a peer failed
    case MessageKind::kWakeup:
      RETURN_IF_ERROR(FinishRing(m).WithContext(what));
      break;
    case MessageKind::kStart:
      break;
    case MessageKind::kReadDone:
      return InvalidArgumentError(what, ": unexpected ", m.ToString());
    default:
      RETURN_IF_ERROR(HandleData(m).WithContext(what));
  }
  return Pump().WithContext(what);
}

Status CollectiveActor::HandleData(const ActorMessage& m) {
  if (m.kind == MessageKind::kReturned) {
    std::vector<ActorMessage> send;
    RETURN_IF_ERROR(protocol_.OnReturned(m, &send));
    return protocol_.SendAll(send);
  }
  if (protocol_.Consumes(m.regst_desc_id)) {
    if (m.kind == MessageKind::kEndOfData) return protocol_.OnEndOfData(m);
    RETURN_IF_ERROR(protocol_.OnProduced(m));
    if (m.regst_desc_id != input_ || all_to_all_ == nullptr) return Status::OK();
    ASSIGN_OR_RETURN(Regst * part, env_->regsts->Find(m.regst_desc_id, m.regst_index));
    return all_to_all_->SendPart(m, *part);
  }
  if (m.kind == MessageKind::kProduced && rank_of_.count(m.src_actor_id) > 0 &&
      all_to_all_ != nullptr) {
    return all_to_all_->OnPeerPart(m);
  }
  return InvalidArgumentError("unexpected ", m.ToString());
}

bool CollectiveActor::Ready() const {
  if (busy() || !protocol_.InputsReadable() || !protocol_.OutputsFree()) return false;
  if (ring_ != nullptr) return true;
  return all_to_all_->HasAllParts(protocol_.Front(input_)->piece_id);
}

Status CollectiveActor::ActOnce() { return ring_ != nullptr ? StartRing() : AssembleAllToAll(); }

Status CollectiveActor::Pump() {
  while (Ready()) RETURN_IF_ERROR(ActOnce());
  std::vector<ActorMessage> end_of_data;
  protocol_.EndOfDataIfDrained(!busy(), &end_of_data);
  RETURN_IF_ERROR(protocol_.SendAll(end_of_data));
  finished_ = protocol_.Done();
  return Status::OK();
}

// Copies `part` of `member` into the registered buffer (at its offset; an
// all-gather's part at its ring segment).
Status CollectiveActor::Stage(const Member& member, const Blob& part) {
  const int64_t elem = SizeOf(logical_.dtype);
  const int64_t n = static_cast<int64_t>(rank_of_.size());
  const int64_t me = rank_of_.at(id());
  size_t seg_begin = 0, seg_end = 0;
  comm::RingCommunicator::SegmentBounds(logical_.shape.elem_count(), static_cast<int>(n),
                                        static_cast<int>(me), &seg_begin, &seg_end);
  const bool gather = ring_op_ == RingOp::kAllGather;
  PartRange range;
  if (member.part_axis >= 0) {
    range = BalancedPart(member.logical.shape.dim(member.part_axis), n, me);
  }
  const int64_t expect =
      gather ? static_cast<int64_t>(seg_end - seg_begin) * elem
      : member.part_axis >= 0
          ? BalancedPartShape(member.logical.shape, member.part_axis, n, me).elem_count() * elem
          : member.logical.ByteSize();
  if (part.ByteSize() != expect) {
    return InvalidArgumentError("part of ring rank ", me, " has ", part.ByteSize(),
                                " bytes, expected ", expect, " (logical ",
                                member.logical.ToString(), ")");
  }
  char* whole = ring_->buffer() + member.byte_offset;
  if (member.part_axis >= 0) {
    // The other ranks' ranges hold the identity: the sum gathers.
    RETURN_IF_ERROR(FillAdditiveIdentity(logical_.dtype, whole, member.logical.shape.elem_count()));
    CopyPartToWhole(member.logical.shape, member.part_axis, range, elem, part.raw(), whole);
  } else {
    const int64_t offset = gather ? static_cast<int64_t>(seg_begin) * elem : member.byte_offset;
    std::memcpy(ring_->buffer() + offset, part.raw(), expect);
  }
  staged_bytes_ += expect;
  return Status::OK();
}

// Stages this rank's parts in the registered buffer and starts the
// collective on the worker (it blocks until every rank took part).
Status CollectiveActor::StartRing() {
  const int64_t piece = protocol_.Front(input_)->piece_id;
  staged_bytes_ = 0;
  for (const Member& member : members_) {
    Regst* in = protocol_.Front(member.input);
    if (in->piece_id != piece) {
      return InternalError("bucket parts of iterations ", piece, " and ", in->piece_id,
                           " are at the front together");
    }
    RETURN_IF_ERROR(Stage(member, in->blobs.at(0)));
  }
  ring_->Start(piece, [this, piece] {
    Status sent = env_->bus->Send(ActorMessage::Wakeup(id(), piece));
    if (!sent.ok() && !cancel_.cancelled()) {
      std::fprintf(stderr, "%s: %s\n", what_.c_str(), sent.ToString().c_str());
    }
  });
  return Status::OK();
}

// The collective of the front piece is done: cut each output, count the
// traffic (one transfer), produce.
Status CollectiveActor::FinishRing(const ActorMessage& done) {
  const int64_t piece = done.piece_id;
  RETURN_IF_ERROR(ring_ == nullptr
                      ? InternalError("ring completion in all-to-all mode: ", done.ToString())
                      : ring_->Finish(piece));
  ActContext context;
  protocol_.AcquireOutputs(piece, &context);
  const int me = static_cast<int>(rank_of_.at(id()));
  const int n = static_cast<int>(rank_of_.size());
  int64_t cut = 0;
  for (const Member& member : members_) {
    Regst* out = context.produced.at(member.output);
    cut +=
        CutRingOutput(member.logical, member.out_sbp, me, n, ring_->buffer() + member.byte_offset,
                      static_cast<char*>(out->blobs.at(0).raw()));
  }
  CountRingTraffic(ring_op_, logical_, me, n, staged_bytes_ + cut, &route_->net()->stats()->pool);
  std::vector<ActorMessage> send;
  protocol_.CompleteAct(context, &send);
  return protocol_.SendAll(send);
}

Status CollectiveActor::AssembleAllToAll() {
  Regst* in = protocol_.Front(input_);
  ActContext context;
  protocol_.AcquireOutputs(in->piece_id, &context);
  Regst* out = context.produced.at(members_.front().output);
  RETURN_IF_ERROR(all_to_all_->Assemble(in->piece_id, in->blobs.at(0), &out->blobs.at(0)));
  std::vector<ActorMessage> send;
  protocol_.CompleteAct(context, &send);
  return protocol_.SendAll(send);
}

void CollectiveActor::OnAbort(const Status& reason) {
  cancel_.Cancel(reason);
  // After the run the bus may refuse: nothing to fail then.
  (void)env_->bus->Send(ActorMessage::Abort(id()));
}

}  // namespace oflite
