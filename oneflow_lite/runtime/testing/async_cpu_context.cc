#include "oneflow_lite/runtime/testing/async_cpu_context.h"

#include <cstring>

namespace oflite {
namespace testing {
namespace {

constexpr std::chrono::seconds kSynchronizeBound(30);

void MoveZone(MemZoneId* zone) {
  if (zone->type() == ZONE_DEVICE && zone->device_type() == DEVICE_CUDA) {
    zone->set_device_type(DEVICE_CPU);
  }
}

// The recording of one capture: closures run in order on replay.
class RecordedGraph final : public DeviceGraph {
 public:
  RecordedGraph(const AsyncCpuDeviceContext* owner, std::vector<std::function<Status()>> work)
      : owner_(owner), work_(std::move(work)) {}
  const AsyncCpuDeviceContext* owner() const { return owner_; }
  const std::vector<std::function<Status()>>& work() const { return work_; }

 private:
  const AsyncCpuDeviceContext* owner_;
  std::vector<std::function<Status()>> work_;
};

}  // namespace

AsyncCpuDeviceContext::AsyncCpuDeviceContext(int device_index, AsyncCpuOptions options)
    : device_index_(device_index), options_(std::move(options)), random_(options_.seed) {
  worker_ = std::thread([this] { Work(); });
}

AsyncCpuDeviceContext::~AsyncCpuDeviceContext() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  worker_.join();  // runs what is queued first
  for (DoneCallback& done : held_) {
    done(CancelledError("completion held back by the test context, cancelled at destruction"));
  }
}

Status AsyncCpuDeviceContext::BindToCurrentThread() const {
  std::lock_guard<std::mutex> lock(mutex_);
  owner_ = std::this_thread::get_id();
  return Status::OK();
}

Status AsyncCpuDeviceContext::CheckThread(const char* what) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (owner_ != std::this_thread::get_id()) {
    return InternalError("async CPU context cpu:", device_index_, ": ", what,
                         " called from a thread other than its stream thread");
  }
  return Status::OK();
}

void AsyncCpuDeviceContext::Enqueue(Item item) const {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(item));
  }
  changed_.notify_all();
}

Status AsyncCpuDeviceContext::StickyError() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return sticky_;
}

Status AsyncCpuDeviceContext::OnStreamDone(const std::string& label, DoneCallback done) const {
  RETURN_IF_ERROR(CheckThread("OnStreamDone"));
  if (capturing_) {
    return InternalError("async CPU context cpu:", device_index_, ": OnStreamDone for '", label,
                         "' while capturing a graph");
  }
  Status result;
  if (!options_.fail_actor.empty() && label == options_.fail_actor) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (fail_seen_++ >= options_.fail_at) {
      result = InternalError("injected device fault on stream cpu:", device_index_);
    }
  }
  if (!options_.hold_actor.empty() && label == options_.hold_actor) {
    std::lock_guard<std::mutex> lock(mutex_);
    held_.push_back(std::move(done));
    return Status::OK();
  }
  if (options_.complete_early) {
    done(result);
    return Status::OK();
  }
  Enqueue(Item{[this, done = std::move(done), result] {
                 Status sticky = StickyError();
                 done(sticky.ok() ? result : sticky);
                 return Status::OK();
               },
               false});
  return Status::OK();
}

Status AsyncCpuDeviceContext::Launch(std::function<Status()> work) const {
  RETURN_IF_ERROR(CheckThread("Launch"));
  Submit(std::move(work));
  return Status::OK();
}

void AsyncCpuDeviceContext::Submit(std::function<Status()> work) const {
  if (capturing_) {
    recorded_.push_back(std::move(work));
  } else {
    Enqueue(Item{std::move(work), true});
  }
}

Status AsyncCpuDeviceContext::Memcpy(void* dst, const void* src, int64_t bytes,
                                     CopyKind kind) const {
  RETURN_IF_ERROR(CheckThread("Memcpy"));
  if (bytes < 0) return InvalidArgumentError("Memcpy of ", bytes, " bytes");
  if (bytes == 0) return Status::OK();
  Submit([dst, src, bytes] {
    std::memcpy(dst, src, static_cast<size_t>(bytes));
    return Status::OK();
  });
  return Status::OK();
}

Status AsyncCpuDeviceContext::BeginCapture() const {
  RETURN_IF_ERROR(CheckThread("BeginCapture"));
  if (!options_.graphs) return DeviceContext::BeginCapture();
  if (capturing_) {
    return InternalError("async CPU context cpu:", device_index_, ": BeginCapture while capturing");
  }
  capturing_ = true;
  recorded_.clear();
  return Status::OK();
}

StatusOr<std::unique_ptr<DeviceGraph>> AsyncCpuDeviceContext::EndCapture() const {
  RETURN_IF_ERROR(CheckThread("EndCapture"));
  if (!capturing_) {
    return InternalError("async CPU context cpu:", device_index_, ": EndCapture without BeginCapture");
  }
  capturing_ = false;
  if (options_.fail_capture) {
    recorded_.clear();  // nothing recorded runs, as after a broken CUDA capture
    return InternalError("async CPU context cpu:", device_index_, ": injected capture failure");
  }
  std::unique_ptr<DeviceGraph> graph(new RecordedGraph(this, std::move(recorded_)));
  recorded_.clear();
  if (options_.graph_counters) options_.graph_counters->captures.fetch_add(1);
  return graph;
}

Status AsyncCpuDeviceContext::LaunchGraph(const DeviceGraph& graph) const {
  RETURN_IF_ERROR(CheckThread("LaunchGraph"));
  const auto* recorded = dynamic_cast<const RecordedGraph*>(&graph);
  if (recorded == nullptr || recorded->owner() != this) {
    return InternalError("async CPU context cpu:", device_index_,
                         ": LaunchGraph of a graph another context recorded");
  }
  if (capturing_) {
    return InternalError("async CPU context cpu:", device_index_, ": LaunchGraph while capturing");
  }
  if (options_.graph_counters) options_.graph_counters->launches.fetch_add(1);
  // One item, like a graph launch; the graph outlives its launches (the
  // caller keeps it until the context is destroyed).
  Enqueue(Item{[recorded] {
                 for (const std::function<Status()>& work : recorded->work()) {
                   RETURN_IF_ERROR(work());
                 }
                 return Status::OK();
               },
               true});
  return Status::OK();
}

Status AsyncCpuDeviceContext::Synchronize() const {
  RETURN_IF_ERROR(CheckThread("Synchronize"));
  if (capturing_) {
    return InternalError("async CPU context cpu:", device_index_,
                         ": Synchronize while capturing a graph");
  }
  std::unique_lock<std::mutex> lock(mutex_);
  if (!changed_.wait_for(lock, kSynchronizeBound, [this] { return queue_.empty() && !busy_; })) {
    return DeadlineExceededError("async CPU context cpu:", device_index_, ": ", queue_.size(),
                                 " items still queued after ", kSynchronizeBound.count(), " s");
  }
  return sticky_;
}

void AsyncCpuDeviceContext::Work() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ and drained
    Item item = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    const bool stopping = stop_;
    lock.unlock();
    if (!stopping && options_.max_delay.count() > 0) {
      std::uniform_int_distribution<int64_t> pause(0, options_.max_delay.count());
      std::this_thread::sleep_for(std::chrono::microseconds(pause(random_)));
    }
    Status status = item.run();
    if (!item.is_copy) completions_.fetch_add(1);
    lock.lock();
    if (!status.ok() && sticky_.ok()) sticky_ = status;
    busy_ = false;
    changed_.notify_all();
  }
}

DeviceContextFactory AsyncCpuContexts(AsyncCpuOptions options) {
  return [options](const StreamId& stream) -> StatusOr<std::unique_ptr<DeviceContext>> {
    AsyncCpuOptions mine = options;
    mine.seed = options.seed * 1000003u + static_cast<uint64_t>(stream.device_type) * 65537u +
                static_cast<uint64_t>(stream.device_index) * 257u +
                static_cast<uint64_t>(stream.stream);
    return std::unique_ptr<DeviceContext>(new AsyncCpuDeviceContext(stream.device_index, mine));
  };
}

int EmulateCudaOnCpu(Plan* plan) {
  int moved = 0;
  for (MachinePlan& machine : *plan->mutable_machine()) {
    for (MemBlockProto& block : *machine.mutable_mem_block()) MoveZone(block.mutable_zone());
    for (TaskProto& task : *machine.mutable_task()) {
      if (task.device_type() == DEVICE_CUDA) {
        task.set_device_type(DEVICE_CPU);
        ++moved;
      }
      for (RegstDescProto& regst : *task.mutable_produced()) MoveZone(regst.mutable_zone());
    }
  }
  return moved;
}

}  // namespace testing
}  // namespace oflite
