#include "oneflow_lite/runtime/runtime.h"

#include <map>
#include <optional>
#include <vector>
#include <sstream>
#include <thread>

#include "oneflow_lite/common/id.h"
#include "oneflow_lite/common/thread_name.h"
#include "oneflow_lite/device/device_context.h"
#include "oneflow_lite/kernels/cpu/cpu_threads.h"
#include "oneflow_lite/plan/plan_verifier.h"
#include "oneflow_lite/runtime/trace_messages.h"

namespace oflite {

// One thread per device stream: pops messages for its actors and hands each
// to its receiver until all of them are finished or the run aborts.
class Runtime::StreamThread {
 public:
  // `name`: the stream's label ("m0/cpu0/s0"), the thread's name for people.
  StreamThread(Runtime* runtime, int64_t stream_key, std::string name,
               std::unique_ptr<DeviceContext> device)
      : runtime_(runtime), key_(stream_key), name_(std::move(name)), device_(std::move(device)) {
    env_.device = device_.get();
  }

  Inbox* inbox() { return &inbox_; }
  ActorEnv* env() { return &env_; }
  // An actor of this thread, with its name as interned on the thread's
  // trace track (HandleTrace).
  struct Hosted {
    std::unique_ptr<Actor> actor;
    trace::InternedName trace_name;
  };
  void Add(std::unique_ptr<Actor> actor) {
    const int64_t id = actor->id();
    actors_[id].actor = std::move(actor);
  }
  const std::map<int64_t, Hosted>& actors() const { return actors_; }

  void Start() {
    BuildLookup();
    thread_ = std::thread([this] {
      NameThisThread(name_);
      Loop();
    });
  }
  void Join() {
    if (thread_.joinable()) thread_.join();
  }
  void Close() { inbox_.Close(); }
  void SetTraceTrack(trace::Track* track) { trace_track_ = track; }
  // Messages handled so far (for the watchdog; any thread may read).
  int64_t handled() const { return handled_.load(std::memory_order_relaxed); }
  // After Join: destroys the context, which first runs (or cancels) every
  // completion callback it accepted, while the actors still exist.
  void ReleaseDevice() {
    env_.device = nullptr;
    device_.reset();
  }

 private:
  void Loop();
  int CountUnfinished() const;
  // The actor a message is for (with its Hosted entry), or null.
  struct Found {
    Actor* actor = nullptr;
    Hosted* hosted = nullptr;
  };
  Found Lookup(int64_t actor_id) {
    const uint64_t slot = static_cast<uint64_t>(actor_id - lookup_base_);
    if (slot < lookup_.size()) {
      // The id and the actor sit in the table: nothing cold is loaded to
      // find or check it.
      const LookupEntry& entry = lookup_[slot];
      return entry.id == actor_id ? Found{entry.actor, entry.hosted} : Found{};
    }
    if (!lookup_.empty()) return {};
    auto it = actors_.find(actor_id);
    return it == actors_.end() ? Found{} : Found{it->second.actor.get(), &it->second};
  }
  // Task ids of one stream differ in their task index only, which the
  // compiler numbers densely: a table indexed by id answers each message
  // without a search. Ids too sparse for a table leave it empty.
  void BuildLookup() {
    lookup_.clear();
    if (actors_.empty()) return;
    const int64_t low = actors_.begin()->first;
    const int64_t span = actors_.rbegin()->first - low + 1;
    if (span > 4 * static_cast<int64_t>(actors_.size()) + 1024) return;
    lookup_base_ = low;
    lookup_.assign(static_cast<size_t>(span), LookupEntry{});
    for (auto& [id, hosted] : actors_) {
      lookup_[static_cast<size_t>(id - low)] = {id, hosted.actor.get(), &hosted};
    }
  }

  Runtime* runtime_;
  const int64_t key_;
  const std::string name_;
  Inbox inbox_;
  std::unique_ptr<DeviceContext> device_;
  ActorEnv env_;
  std::map<int64_t, Hosted> actors_;  // in id order, for starting and reports
  struct LookupEntry {
    int64_t id = -1;  // no actor has a negative id
    Actor* actor = nullptr;
    Hosted* hosted = nullptr;
  };
  int64_t lookup_base_ = 0;  // Lookup's table: id lookup_base_ + i at [i]
  std::vector<LookupEntry> lookup_;
  std::thread thread_;
  trace::Track* trace_track_ = nullptr;  // owned by the tracer; null: untraced
  std::atomic<int64_t> handled_{0};
};

int Runtime::StreamThread::CountUnfinished() const {
  int count = 0;
  for (const auto& [id, hosted] : actors_) count += hosted.actor->finished() ? 0 : 1;
  return count;
}

void Runtime::StreamThread::Loop() {
  Status bound = device_->BindToCurrentThread();
  if (!bound.ok()) {
    runtime_->Abort(bound.WithContext("stream thread " + std::to_string(key_)));
  }
  int unfinished = CountUnfinished();
  trace::ScopedCurrentTrack traced(trace_track_);
  inbox_.BindOwner();
  int64_t handled = 0;
  while (unfinished > 0 && !runtime_->aborted_.load(std::memory_order_acquire)) {
    std::optional<ActorMessage> message = inbox_.Pop(std::chrono::milliseconds(50));
    if (!message) continue;
    // Only this thread writes its count (no shared counter bounced between
    // threads on every message); the watchdog reads the sum.
    handled_.store(++handled, std::memory_order_relaxed);
    const Found found = Lookup(message->dst_actor_id);
    if (found.actor == nullptr) {
      runtime_->Abort(InternalError("thread ", key_, ": message for unknown actor: ",
                                    message->ToString()));
      break;
    }
    Actor* actor = found.actor;
    // Start loading the next message's actor while this one is handled:
    // after a kernel it is out of the caches.
    if (const ActorMessage* next = inbox_.PeekNext()) {
      if (Actor* upcoming = Lookup(next->dst_actor_id).actor) {
        // The lines an actor's message handling reads first (its vtable
        // and the protocol's slot counters).
        const char* object = reinterpret_cast<const char*>(upcoming);
        for (int line = 0; line < 4; ++line) __builtin_prefetch(object + 64 * line);
      }
    }
    const bool was_finished = actor->finished();
    // Only a traced run asks the actor for its name: the task's proto it
    // reads is cold by now.
    std::optional<HandleTrace> handle_trace;
    if (trace_track_ != nullptr) {
      handle_trace.emplace(*message, actor->name(), &found.hosted->trace_name,
                           actor->RecordsActs());
    }
    Status status = actor->Handle(*message);
    if (!status.ok()) {
      runtime_->Abort(status);
      break;
    }
    if (!was_finished && actor->finished()) --unfinished;
  }
  if (unfinished == 0 && !runtime_->aborted_.load(std::memory_order_acquire)) {
    // Stream-ordered acts may still run after their actor finished; their
    // errors belong to this run, and nothing may run after it.
    Status drained = device_->Synchronize();
    if (!drained.ok()) {
      runtime_->Abort(drained.WithContext("stream thread " + std::to_string(key_) +
                                          ": draining the stream at the end of the run"));
    } else {
      // Errors the device found in the last acts' work and no later act
      // reported (a bad label in the last batch).
      for (const auto& [id, hosted] : actors_) {
        Status late = hosted.actor->ReportDeferredErrors();
        if (!late.ok()) {
          runtime_->Abort(late);
          break;
        }
      }
    }
  }
  inbox_.UnbindOwner();
  std::vector<std::string> waiting;
  for (const auto& [id, hosted] : actors_) {
    if (!hosted.actor->finished()) waiting.push_back(hosted.actor->DescribeWaiting());
  }
  runtime_->ThreadDone(waiting);
}

namespace {

// "m0/cpu0/s0": the stream part of a task id.
std::string StreamLabel(int64_t task_id) {
  std::string label = TaskIdToString(task_id);
  return label.substr(0, label.rfind('/'));
}

}  // namespace

StatusOr<const MachinePlan*> FindMachinePlan(const Plan& plan, int64_t machine_id) {
  for (const MachinePlan& machine : plan.machine()) {
    if (machine.machine_id() == machine_id) return &machine;
  }
  return NotFoundError("the plan has no machine ", machine_id, " (it has ", plan.machine_size(),
                       " machines)");
}

namespace {

// Gives the machine's per-device CPU thread count to the BLAS library before
// any kernel runs (kernels/cpu/cpu_threads.h).
Status ApplyCpuThreads(const Plan& plan, const RuntimeOptions& options) {
  int requested = options.cpu_threads;
  int cpu_devices = 1;
  std::string source = "RuntimeOptions.cpu_threads";
  const int64_t id = options.machine_id;
  if (id >= 0 && id < plan.cluster().machine_size()) {
    const MachineProto& machine = plan.cluster().machine(static_cast<int>(id));
    cpu_devices = machine.cpu_devices();
    if (requested == 0) {
      requested = machine.cpu_threads();
      source = "cluster.machine[" + std::to_string(id) + "].cpu_threads";
    }
  }
  ASSIGN_OR_RETURN(const int threads,
                   ResolveCpuThreads(requested, cpu_devices, AvailableCpuCores(), source));
  SetCpuComputeThreads(threads);
  return Status::OK();
}

}  // namespace

StatusOr<std::unique_ptr<Runtime>> Runtime::Create(const Plan& plan, RuntimeOptions options) {
  PlanVerifierOptions verify;
  verify.allow_device_type_other_than_id = static_cast<bool>(options.device_context_factory);
  if (!options.plan_verified) RETURN_IF_ERROR(VerifyPlan(plan, verify));
  ASSIGN_OR_RETURN(const MachinePlan* machine, FindMachinePlan(plan, options.machine_id));
  std::unique_ptr<Runtime> runtime(new Runtime(*machine, options));
  runtime->start_iter_ = options.start_iter;
  runtime->end_iter_ = options.total_iters > 0 ? options.total_iters : plan.total_iters();
  if (runtime->end_iter_ <= 0) {
    return InvalidArgumentError("the plan sets no iteration count (Plan.total_iters) and none "
                                "was given");
  }
  if (runtime->start_iter_ < 0 || runtime->start_iter_ > runtime->end_iter_) {
    return InvalidArgumentError("start iteration ", runtime->start_iter_, " outside [0, ",
                                runtime->end_iter_, "]");
  }
  RETURN_IF_ERROR(ApplyCpuThreads(plan, options));
  RETURN_IF_ERROR(runtime->CreateBackendIfNeeded());
  ASSIGN_OR_RETURN(runtime->zones_, MemoryZones::Create(*machine, options.max_zone_bytes,
                                                        runtime->backend_.get()));
  ASSIGN_OR_RETURN(runtime->regsts_, RegstStore::Create(*machine, *runtime->zones_));
  if (options.remote_route != nullptr) runtime->bus_.SetRemoteRoute(options.remote_route);
  // Actors may hand their abort listeners to other threads while being
  // built (CollectiveActor): the bus refuses their sends until it is done.
  runtime->bus_.BeginBuild();
  RETURN_IF_ERROR(runtime->BuildActors(plan));
  runtime->bus_.EndBuild();
  return runtime;
}

Status Runtime::CreateBackendIfNeeded() {
  bool cuda = false;
  for (const MemBlockProto& block : plan_->mem_block()) {
    cuda = cuda || (block.zone().type() == ZONE_DEVICE && block.zone().device_type() == DEVICE_CUDA);
  }
  if (!options_.device_context_factory) {
    for (const TaskProto& task : plan_->task()) {
      StatusOr<TaskIdParts> parts = DecodeTaskId(task.task_id());
      cuda = cuda || (parts.ok() && parts->stream.device_type == DEVICE_CUDA);
    }
  }
  if (!cuda) return Status::OK();
  StatusOr<std::unique_ptr<DeviceBackend>> backend =
      CreateDeviceBackend(DEVICE_CUDA, options_.device);
  if (!backend.ok()) {
    return backend.status().WithContext("machine " + std::to_string(plan_->machine_id()) +
                                        ": the plan places work on CUDA devices");
  }
  backend_ = std::move(backend).value();
  return Status::OK();
}

StatusOr<std::unique_ptr<DeviceContext>> Runtime::CreateStreamContext(int64_t task_id) {
  ASSIGN_OR_RETURN(TaskIdParts parts, DecodeTaskId(task_id));
  const StreamId& stream = parts.stream;
  std::string label = TaskIdToString(task_id);
  label = label.substr(0, label.rfind('/'));  // "m0/cuda0/s1"
  if (options_.device_context_factory) {
    StatusOr<std::unique_ptr<DeviceContext>> context = options_.device_context_factory(stream);
    if (!context.ok()) return context.status().WithContext("stream " + label);
    if (*context == nullptr) return InternalError("stream ", label, ": the factory made no context");
    return context;
  }
  if (stream.device_type == DEVICE_CPU) {
    return std::unique_ptr<DeviceContext>(new CpuDeviceContext(stream.device_index));
  }
  if (backend_ == nullptr || backend_->device_type() != stream.device_type) {
    return UnimplementedError("stream ", label, ": no backend for device type ",
                              DeviceType_Name(static_cast<DeviceType>(stream.device_type)),
                              " in this runtime");
  }
  return backend_->CreateStreamContext(stream.device_index, label);
}

Status Runtime::BuildActors(const Plan& plan) {
  if (options_.registry == nullptr) {
    builtin_registry_ = BuiltinActorRegistry();
    options_.registry = &builtin_registry_;
  }
  std::map<int64_t, StreamThread*> by_key;
  for (const TaskProto& task : plan_->task()) {
    if (MachineOfTaskId(task.task_id()) != plan_->machine_id()) {
      return InvalidArgumentError("task '", task.name(), "' id ", TaskIdToString(task.task_id()),
                                  " is not on machine ", plan_->machine_id());
    }
    const int64_t key = StreamKeyOfTaskId(task.task_id());
    StreamThread*& thread = by_key[key];
    if (thread == nullptr) {
      ASSIGN_OR_RETURN(std::unique_ptr<DeviceContext> device, CreateStreamContext(task.task_id()));
      threads_.push_back(std::make_unique<StreamThread>(this, key, StreamLabel(task.task_id()),
                                                        std::move(device)));
      thread = threads_.back().get();
      ActorEnv* env = thread->env();
      env->regsts = regsts_.get();
      env->bus = &bus_;
      env->seed = plan.seed();
      env->start_iter = start_iter_;
      env->end_iter = end_iter_;
      env->check_nan = options_.check_nan;
      env->graph_replay = options_.graph_replay;
      env->graph_stats = &graph_stats_;
      env->save_every = options_.save_every;
      env->metrics = options_.metrics;
      env->outputs = options_.outputs;
      env->variables = options_.variables;
      env->tracer = options_.tracer;
      if (options_.tracer != nullptr) {
        thread->SetTraceTrack(options_.tracer->AddTrack(StreamLabel(task.task_id())));
      }
      bus_.RegisterInbox(key, thread->inbox());
    }
    // Kernels initialize (and may allocate) on this thread: on the stream's device.
    RETURN_IF_ERROR(thread->env()->device->BindToCurrentThread().WithContext(
        "task '" + task.name() + "'"));
    ASSIGN_OR_RETURN(std::unique_ptr<Actor> actor, options_.registry->Create(task, *thread->env()));
    thread->Add(std::move(actor));
  }
  return Status::OK();
}

Runtime::Runtime(const MachinePlan& plan, RuntimeOptions options)
    : plan_(&plan), options_(options), bus_(plan.machine_id()) {}

Runtime::~Runtime() {
  for (auto& thread : threads_) thread->Close();
  for (auto& thread : threads_) thread->Join();
  // Contexts (their pending callbacks touch actors and the bus) before the
  // actors, the backend (completion pollers) after the contexts.
  for (auto& thread : threads_) thread->ReleaseDevice();
  backend_.reset();
}

void Runtime::Abort(const Status& status) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (first_error_.ok()) first_error_ = status;
  }
  aborted_.store(true, std::memory_order_release);
  for (auto& thread : threads_) thread->Close();
  changed_.notify_all();
}

void Runtime::ThreadDone(const std::vector<std::string>& waiting) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++threads_done_;
    waiting_.insert(waiting_.end(), waiting.begin(), waiting.end());
  }
  changed_.notify_all();
}

int64_t Runtime::Progress() const {
  int64_t sum = 0;
  for (const auto& thread : threads_) sum += thread->handled();
  return sum;
}

void Runtime::Watch() {
  const int total = static_cast<int>(threads_.size());
  int64_t last_progress = Progress();
  auto last_change = std::chrono::steady_clock::now();
  const auto tick = std::min(options_.watchdog_timeout / 4 + std::chrono::milliseconds(1),
                             std::chrono::milliseconds(100));
  std::unique_lock<std::mutex> lock(mutex_);
  while (threads_done_ < total && !aborted_.load()) {
    changed_.wait_for(lock, tick);
    const int64_t progress = Progress();
    const auto now = std::chrono::steady_clock::now();
    if (progress != last_progress) {
      last_progress = progress;
      last_change = now;
    } else if (now - last_change >= options_.watchdog_timeout && threads_done_ < total) {
      lock.unlock();
      Abort(DeadlineExceededError(
          "watchdog: no actor made progress for ",
          std::chrono::duration_cast<std::chrono::milliseconds>(now - last_change).count(),
          " ms"));
      lock.lock();
    }
  }
}

Status Runtime::Run() {
  if (ran_) return FailedPreconditionError("Runtime::Run called twice");
  ran_ = true;
  const auto begin = std::chrono::steady_clock::now();
  for (auto& thread : threads_) thread->Start();
  for (auto& thread : threads_) {
    for (const auto& [id, hosted] : thread->actors()) {
      RETURN_IF_ERROR(bus_.DeliverLocal(ActorMessage::Start(id)));
    }
  }
  Watch();
  for (auto& thread : threads_) thread->Join();
  stats_.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  stats_.threads = static_cast<int64_t>(threads_.size());
  for (auto& thread : threads_) {
    for (const auto& [id, hosted] : thread->actors()) {
      ++stats_.actors;
      stats_.acts += hosted.actor->act_count();
    }
  }
  stats_.messages = bus_.sent_count();
  stats_.graph_tasks = graph_stats_.tasks.load();
  stats_.graphs_captured = graph_stats_.captured.load();
  stats_.acts_replayed = graph_stats_.replayed.load();
  stats_.graph_fallbacks = graph_stats_.fallbacks.load();
  stats_.graph_note = graph_stats_.fallback_note();
  std::lock_guard<std::mutex> lock(mutex_);
  if (first_error_.ok()) return Status::OK();
  if (first_error_.code() != StatusCode::kDeadlineExceeded || waiting_.empty()) {
    return first_error_;
  }
  std::ostringstream os;
  os << first_error_.message() << "; actors not finished:";
  for (const std::string& line : waiting_) os << "\n  " << line;
  return Status(first_error_.code(), os.str());
}

}  // namespace oflite
