#include "oneflow_lite/runtime/commnet/ring_worker.h"

#include "oneflow_lite/common/thread_name.h"
#include <algorithm>

namespace oflite {

RingWorker::~RingWorker() {
  if (!thread_.joinable()) return;
  // Destroyed with a collective in flight: the runtime aborted. The peers
  // may never finish this ring; do not wait for its deadline.
  if (busy_) {
    options_.cancel->Cancel(AbortedError("collective actor '", options_.actor_name,
                                         "' destroyed with its ring collective in flight"));
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

Status RingWorker::Allocate(int64_t bytes) {
  ASSIGN_OR_RETURN(buffer_, options_.net->pool()->Allocate(bytes));
  return Status::OK();
}

void RingWorker::Start(int64_t piece, std::function<void()> done) {
  busy_ = true;
  piece_ = piece;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = std::move(done);
    posted_ = true;
    finished_ = false;
  }
  if (!thread_.joinable()) {
    thread_ = std::thread([this] {
      NameThisThread("oflite-coll");
      Loop();
    });
  } else {
    changed_.notify_all();
  }
}

void RingWorker::Loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    // Idle until the next Start or the destructor (a posted collective
    // still runs first: cancelled, it ends at once and `done` is called as
    // for any other outcome).
    changed_.wait(lock, [this] { return posted_ || stopping_; });
    if (!posted_) return;
    posted_ = false;
    const int64_t piece = piece_;
    std::function<void()> done = std::move(done_);
    lock.unlock();
    Status status;
    {
      trace::ScopedCurrentTrack traced(options_.track, piece);
      status = Run();
    }
    lock.lock();
    status_ = std::move(status);
    finished_ = true;
    lock.unlock();
    changed_.notify_all();
    done();
    lock.lock();
  }
}

Status RingWorker::Finish(int64_t piece) {
  if (!busy_ || piece != piece_) {
    return InternalError("ring completion of piece ", piece,
                         " without a collective of it in flight");
  }
  // `done` came after `finished_` was set, so this does not wait; the
  // collective itself was bounded by its deadline.
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] { return finished_; });
  busy_ = false;
  return status_;
}

Status RingWorker::RunExchange(comm::Deadline deadline) {
  if (exchange_ == nullptr) {
    comm::ExchangeOptions options;
    ASSIGN_OR_RETURN(options.channel, options_.channels->ChannelOf(options_.ring_key));
    options.tag = static_cast<uint64_t>(options_.ring_key);
    options.cancel = options_.cancel;
    options.schedule = ExchangeScheduleOf(op_);
    options.members = options_.members;
    ASSIGN_OR_RETURN(exchange_, comm::ExchangeCommunicator::Create(
                                    options_.net->transport(), options_.net->router(), options));
  }
  return exchange_->AllReduce(buffer(), static_cast<size_t>(logical_.shape.elem_count()),
                              logical_.dtype, deadline);
}

Status RingWorker::Run() {
  comm::CommNet* net = options_.net;
  RETURN_IF_ERROR(options_.cancel->status());
  if (IsExchangeOp(op_)) {
    return RunExchange(comm::DeadlineAfter(options_.timeout))
        .WithContext(std::string(comm::ExchangeScheduleName(ExchangeScheduleOf(op_))) +
                     " rank " + std::to_string(rank_) + " of " + std::to_string(world_));
  }
  if (communicator_ == nullptr) {
    comm::CollectiveOptions options;
    ASSIGN_OR_RETURN(options.channel, options_.channels->ChannelOf(options_.ring_key));
    options.tag = static_cast<uint64_t>(options_.ring_key);
    options.cancel = options_.cancel;
    options.setup_timeout = std::min(options.setup_timeout, options_.timeout);
    options.chunk_bytes = options_.chunk_bytes;
    options.slots = options_.slots;
    options.members = options_.members;
    ASSIGN_OR_RETURN(communicator_, comm::RingCommunicator::Create(
                                        net->transport(), net->router(), net->pool(), options));
  }
  const comm::Deadline deadline = comm::DeadlineAfter(options_.timeout);
  const comm::MemoryRegion& region = buffer_.region();
  const int64_t count = logical_.shape.elem_count();
  Status status;
  switch (op_) {
    case RingOp::kAllReduce:
      status = communicator_->AllReduce(region, buffer_.offset(), count, logical_.dtype, deadline);
      break;
    case RingOp::kReduceScatter:
      status =
          communicator_->ReduceScatter(region, buffer_.offset(), count, logical_.dtype, deadline);
      break;
    case RingOp::kAllGather:
      status = communicator_->AllGather(region, buffer_.offset(), count, logical_.dtype, deadline);
      break;
    case RingOp::kNone:
    case RingOp::kExchangeAllReduce:
    case RingOp::kDoublingAllReduce:
    case RingOp::kScatterGatherAllReduce:
      return InternalError("ring collective without a ring op");
  }
  return status.WithContext("ring rank " + std::to_string(rank_) + " of " +
                            std::to_string(world_));
}

}  // namespace oflite
