#include "oneflow_lite/runtime/commnet/collective_actor.h"

#include <cstdio>
#include <cstring>
#include <sstream>

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
void CountRingTraffic(RingOp op, const TensorDesc& logical, int rank, int world,
                      int64_t copied, comm::StrategyCounters* counters) {
  counters->bytes_moved += static_cast<int64_t>(CollectiveBytesSent(op, logical, rank, world));
  counters->transfers += 1;
  counters->bytes_copied += copied;
}

}  // namespace

StatusOr<std::unique_ptr<Actor>> CollectiveActor::Create(const TaskProto& task,
                                                         const ActorEnv& env, CommNetRoute* route,
                                                         RingChannelTable* channels,
                                                         const CollectiveActorOptions& options) {
  std::unique_ptr<CollectiveActor> actor(
      new CollectiveActor(task, env, route, channels, options));
  RETURN_IF_ERROR(actor->Init());
  return std::unique_ptr<Actor>(std::move(actor));
}

Status CollectiveActor::Init() {
  RETURN_IF_ERROR(protocol_.Init());
  ASSIGN_OR_RETURN(const RegstDescProto* data_out, protocol_.SingleDataOutput());
  const BoxingConf& conf = task_->boxing();
  for (int r = 0; r < conf.ring_task_id_size(); ++r) rank_of_[conf.ring_task_id(r)] = r;
  if (rank_of_.count(id()) == 0 || conf.in_regst_desc_id_size() != 1 || data_out == nullptr) {
    return InvalidArgumentError("collective task '", name(), "': not in its ring, ",
                                conf.in_regst_desc_id_size(),
                                " data inputs (expected 1) or no data output");
  }
  input_ = conf.in_regst_desc_id(0);
  output_ = data_out->regst_desc_id();
  if (!protocol_.Consumes(input_)) {
    return InvalidArgumentError("collective task '", name(), "': input ", input_,
                                " is not consumed");
  }
  logical_ = TensorDesc(conf.logical_desc());
  RETURN_IF_ERROR(InitRing());
  if (options_.abort != nullptr) {
    listener_ = options_.abort->AddListener([this](const Status& reason) { OnAbort(reason); });
  }
  return Status::OK();
}

Status CollectiveActor::InitRing() {
  trace::Track* track =
      env_->tracer != nullptr ? env_->tracer->AddTrack("ring " + name()) : nullptr;
  ASSIGN_OR_RETURN(ring_op_, RecordedRingOp(*task_, logical_, route_->net()));
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
  if (busy()) os << "ring collective of piece " << ring_->piece() << " in flight; ";
  os << (all_to_all_ != nullptr ? all_to_all_->Describe() : "peer parts for 0 pieces");
  os << "; " << protocol_.DescribeInputs() << " " << protocol_.DescribeOutputs();
  return os.str();
}

Status CollectiveActor::Handle(const ActorMessage& m) {
  const std::string what = "collective actor '" + name() + "'";
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

Status CollectiveActor::ActOnce() {
  return ring_ != nullptr ? StartRing() : AssembleAllToAll();
}

Status CollectiveActor::Pump() {
  while (Ready()) RETURN_IF_ERROR(ActOnce());
  std::vector<ActorMessage> end_of_data;
  protocol_.EndOfDataIfDrained(!busy(), &end_of_data);
  RETURN_IF_ERROR(protocol_.SendAll(end_of_data));
  finished_ = protocol_.Done();
  return Status::OK();
}

// Stages this rank's part in the registered buffer and starts the
// collective on the worker (it blocks until every rank took part).
Status CollectiveActor::StartRing() {
  Regst* in = protocol_.Front(input_);
  const Blob& blob = in->blobs.at(0);
  const int64_t elem = SizeOf(logical_.dtype);
  const int64_t n = static_cast<int64_t>(rank_of_.size());
  const int64_t me = rank_of_.at(id());
  size_t seg_begin = 0, seg_end = 0;
  comm::RingCommunicator::SegmentBounds(logical_.shape.elem_count(), static_cast<int>(n),
                                        static_cast<int>(me), &seg_begin, &seg_end);
  const bool gather = ring_op_ == RingOp::kAllGather;
  const int64_t expect =
      gather ? static_cast<int64_t>(seg_end - seg_begin) * elem : logical_.ByteSize();
  if (blob.ByteSize() != expect) {
    return InvalidArgumentError("part of ring rank ", me, " has ", blob.ByteSize(),
                                " bytes, expected ", expect, " (logical ", logical_.ToString(),
                                ")");
  }
  std::memcpy(ring_->buffer() + (gather ? seg_begin * elem : 0), blob.raw(), expect);
  staged_bytes_ = expect;
  const int64_t piece = in->piece_id;
  ring_->Start(piece, [this, piece] {
    Status sent = env_->bus->Send(ActorMessage::Wakeup(id(), piece));
    if (!sent.ok() && !cancel_.cancelled()) {
      std::fprintf(stderr, "collective actor '%s': %s\n", name().c_str(),
                   sent.ToString().c_str());
    }
  });
  return Status::OK();
}

// The collective of the front piece is done: cut the output, count the
// traffic, produce.
Status CollectiveActor::FinishRing(const ActorMessage& done) {
  const int64_t piece = done.piece_id;
  RETURN_IF_ERROR(ring_ == nullptr ? InternalError("ring completion in all-to-all mode: ",
                                                   done.ToString())
                                   : ring_->Finish(piece));
  ActContext context;
  protocol_.AcquireOutputs(piece, &context);
  Regst* out = context.produced.at(output_);
  const int me = static_cast<int>(rank_of_.at(id()));
  const int n = static_cast<int>(rank_of_.size());
  const int64_t cut = CutRingOutput(logical_, FirstSbp(task_->boxing().out_sbp()), me, n,
                                    ring_->buffer(), static_cast<char*>(out->blobs.at(0).raw()));
  CountRingTraffic(ring_op_, logical_, me, n, staged_bytes_ + cut,
                   &route_->net()->stats()->pool);
  std::vector<ActorMessage> send;
  protocol_.CompleteAct(context, &send);
  return protocol_.SendAll(send);
}

Status CollectiveActor::AssembleAllToAll() {
  Regst* in = protocol_.Front(input_);
  ActContext context;
  protocol_.AcquireOutputs(in->piece_id, &context);
  Regst* out = context.produced.at(output_);
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
