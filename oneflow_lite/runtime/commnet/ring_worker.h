// RingWorker: runs a collective actor's ring collectives, one piece at a
// time, on a worker thread of its own, over one registered pool buffer
// that holds the logical tensor.
//
// The actor stages its part in buffer(), calls Start, and goes on handling
// messages; the ring blocks the worker until every rank took part (bounded
// by `timeout`, and cancelled within a status poll by `cancel`). When the
// collective ends, whatever its outcome, the worker calls `done` (on the
// worker thread; it must only post a message); the actor then calls Finish
// on its own thread, which returns the outcome. The thread is started by
// the first Start and then waits for the next one: a thread per collective
// cost a clone, an exit and a join every step, and on a host whose ranks
// are not bound to cores a new thread may start on any CPU. Destroying the
// worker with a collective in flight cancels it (the runtime aborted; the
// peers may never finish this ring, so teardown does not wait for its
// deadline); then it stops the thread and joins it.
//
// Thread safety: Start, Finish, busy, piece and the destructor on the
// actor's thread only; `cancel` may be set from any thread. `net`,
// `channels` and `cancel` must outlive the worker.
#ifndef ONEFLOW_LITE_RUNTIME_COMMNET_RING_WORKER_H_
#define ONEFLOW_LITE_RUNTIME_COMMNET_RING_WORKER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "oneflow_lite/comm/collective/cancel.h"
#include "oneflow_lite/comm/collective/exchange.h"
#include "oneflow_lite/comm/collective/ring.h"
#include "oneflow_lite/comm/comm_net.h"
#include "oneflow_lite/common/status.h"
#include "oneflow_lite/common/tensor.h"
#include "oneflow_lite/common/trace/trace.h"
#include "oneflow_lite/runtime/commnet/collective_algorithm.h"
#include "oneflow_lite/runtime/commnet/ring_channels.h"

namespace oflite {

struct RingWorkerOptions {
  std::string actor_name;      // names the actor in errors
  comm::CommNet* net = nullptr;
  RingChannelTable* channels = nullptr;
  int64_t ring_key = 0;        // the ring's rank-0 task id: channel and tag
  std::vector<int> members;    // the ring's machines (ranks), in ring order
  size_t chunk_bytes = 0;      // as recorded in the plan
  int slots = 1;
  std::chrono::milliseconds timeout{120000};  // bound of one collective
  comm::CancelFlag* cancel = nullptr;
  trace::Track* track = nullptr;  // the worker's; null: untraced
};

class RingWorker {
 public:
  // `op` is not kNone; the ring has `world` ranks, this one is `rank`.
  RingWorker(RingOp op, const TensorDesc& logical, int rank, int world, RingWorkerOptions options)
      : op_(op), logical_(logical), rank_(rank), world_(world), options_(std::move(options)) {}
  ~RingWorker();
  RingWorker(const RingWorker&) = delete;
  RingWorker& operator=(const RingWorker&) = delete;

  // Takes the buffer (`bytes` of the pool of the net). Call once.
  Status Allocate(int64_t bytes);
  char* buffer() { return reinterpret_cast<char*>(buffer_.data()); }

  // Runs the collective on buffer() for `piece` on the worker thread.
  void Start(int64_t piece, std::function<void()> done);
  // After `done`: the collective's outcome. Internal error when no
  // collective of `piece` is in flight.
  Status Finish(int64_t piece);
  bool busy() const { return busy_; }
  int64_t piece() const { return piece_; }

 private:
  void Loop();    // the worker thread: each posted collective in turn
  Status Run();  // on the worker thread
  Status RunExchange(comm::Deadline deadline);

  const RingOp op_;
  const TensorDesc logical_;
  const int rank_;
  const int world_;
  const RingWorkerOptions options_;
  comm::PoolBuffer buffer_;
  std::unique_ptr<comm::RingCommunicator> communicator_;  // used by the worker only
  std::unique_ptr<comm::ExchangeCommunicator> exchange_;  // likewise (kExchangeAllReduce)
  std::thread thread_;
  std::mutex mutex_;  // guards the hand-over below
  std::condition_variable changed_;
  bool posted_ = false;    // Start posted a collective the worker has not taken
  bool finished_ = false;  // the worker ended the collective of `piece_`
  bool stopping_ = false;  // the destructor: the worker exits when idle
  std::function<void()> done_;
  Status status_;  // written by the worker before it calls `done`
  bool busy_ = false;
  int64_t piece_ = -1;
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_COMMNET_RING_WORKER_H_
