#include "oneflow_lite/runtime/commnet/multi_machine.h"

#include <cstdio>
#include <set>
#include <sstream>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "oneflow_lite/common/thread_name.h"
#include "oneflow_lite/runtime/commnet/commnet_actors.h"

namespace oflite {
namespace {

// Router channel of the goodbye a rank sends when its session ends after a
// successful last run (empty payload): its connections closing next is not
// a loss. Clear of the actor (0x10), bounce (0x11), abort (0x1f) and
// collective (0x100+) channels.
constexpr uint32_t kGoodbyeChannel = 0x1e;
static_assert(kGoodbyeChannel != comm::kActorChannel && kGoodbyeChannel != kBounceChannel &&
                  kGoodbyeChannel != kAbortChannel && kGoodbyeChannel < comm::kCollectiveChannel,
              "the goodbye channel must not be shared");

// How long a failed control call waits for the peer failure behind it (the
// master's connection may break a moment before the data connection's loss
// or the relayed notice is seen).
constexpr std::chrono::milliseconds kCauseGrace{2000};
// How long the relays of a fatal event may take to leave before on_fatal.
constexpr std::chrono::milliseconds kRelayFlush{1000};

// The ring key of every collective of `plan`, every machine's (a ring over
// a group of machines is absent from the others' parts), ascending.
std::vector<int64_t> PlanRings(const Plan& plan) {
  std::set<int64_t> keys;
  for (const MachinePlan& machine : plan.machine()) {
    for (const TaskProto& task : machine.task()) {
      if (task.type() == TASK_COLLECTIVE && task.boxing().ring_task_id_size() > 0) {
        keys.insert(task.boxing().ring_task_id(0));
      }
    }
  }
  return {keys.begin(), keys.end()};
}

// 16 hex digits of FNV-1a over the plan's deterministic serialization.
std::string PlanFingerprint(const Plan& plan) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    plan.SerializeToCodedStream(&coded);
  }
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

}  // namespace

StatusOr<std::unique_ptr<MultiMachineSession>> MultiMachineSession::Start(
    const Plan& plan, const MultiMachineOptions& options) {
  const int world = plan.machine_size();
  if (options.rank < 0 || options.rank >= world) {
    return InvalidArgumentError("rank ", options.rank, " is not a machine of the plan (",
                                world, " machines)");
  }
  if (options.master.empty()) {
    return InvalidArgumentError("a ", world, "-machine plan needs --master HOST:PORT");
  }
  if (options.job_token.empty()) {
    return InvalidArgumentError("rank ", options.rank,
                                ": no job token (oflite run reads OFLITE_JOB_TOKEN)");
  }
  std::unique_ptr<MultiMachineSession> session(new MultiMachineSession());
  MultiMachineSession* self = session.get();
  session->options_ = options;
  ASSIGN_OR_RETURN(session->plan_, FindMachinePlan(plan, options.rank));
  comm::CommNetOptions net;
  net.rank = static_cast<int>(options.rank);
  net.world_size = world;
  net.master = options.master;
  net.job_token = options.job_token;
  net.listen_host = options.listen_host;
  net.connect_timeout = options.connect_timeout;
  net.peer_timeout = options.peer_timeout;
  net.refused_rank_grace = options.refused_rank_grace;
  net.transport.message_slot_size = kRuntimeMessageSlotSize;
  net.on_peer_error = [self](int peer, const Status& status) { self->OnPeerLost(peer, status); };
  net.provider = options.provider;
  net.after_join = options.after_join;
  session->fatal_thread_ = std::thread([self] {
    NameThisThread("oflite-fatal");
    self->FatalLoop();
  });
  int failed_peer = -1;
  StatusOr<std::unique_ptr<comm::CommNet>> started = comm::CommNet::Start(net, &failed_peer);
  if (!started.ok()) {
    if (failed_peer < 0 || failed_peer == options.rank) return started.status();
    JobFailure failure;
    failure.rank = failed_peer;
    failure.reason = UnavailableError("lost rank ", failed_peer,
                                      " while joining: ", started.status().message());
    if (options.on_fatal) options.on_fatal(failure);
    return failure.reason;
  }
  session->net_ = std::move(*started);
  session->provider_ = !options.provider_name.empty()
                           ? options.provider_name
                           : comm::DescribePeerProviders(*session->net_->transport());
  session->InstallHandlers();
  session->HoldTransportFor(plan);
  session->plan_rings_ = PlanRings(plan);
  std::fprintf(stderr, "%s: rank %lld of %d joined over %s\n", options.program.c_str(),
               static_cast<long long>(options.rank), world, session->provider_.c_str());
  session->MakeRoute();
  return session;
}

namespace {

// True when actors of `plan` wait for peers' messages themselves, not
// through a collective's communicator: a cross-machine register (its
// TASK_COMMNET consumer, and the producer waiting for its release) or an
// all-to-all's parts.
bool ActorsWaitOnPeers(const Plan& plan) {
  for (const MachinePlan& machine : plan.machine()) {
    for (const TaskProto& task : machine.task()) {
      if (task.type() == TASK_COMMNET) return true;
      if (task.type() == TASK_COLLECTIVE &&
          (task.collective().algorithm() == COLLECTIVE_ALL_TO_ALL ||
           task.collective().algorithm() == COLLECTIVE_UNSET)) {
        return true;
      }
    }
  }
  return false;
}

}  // namespace

void MultiMachineSession::HoldTransportFor(const Plan& plan) {
  if (!ActorsWaitOnPeers(plan)) {
    actors_wait_.reset();
  } else if (!actors_wait_) {
    actors_wait_ = std::make_unique<comm::BlockingWait>(net_->transport());
  }
}

void MultiMachineSession::InstallHandlers() {
  net_->router()->SetHandler(kGoodbyeChannel, [this](int peer, const void*, size_t) {
    std::lock_guard<std::mutex> lock(mutex_);
    departed_.insert(peer);
  });
  abort_ = std::make_unique<AbortNotice>(net_->transport(), net_->router(),
                                         [this](int, const Status&) { OnPeerAbort(); });
  std::vector<std::pair<int, Status>> early;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ready_ = true;
    early.swap(early_losses_);
  }
  wake_.notify_all();
  for (const auto& [peer, error] : early) OnPeerLost(peer, error);
}

void MultiMachineSession::MakeRoute() {
  route_ = std::make_unique<CommNetRoute>(
      net_.get(), [this](const Status& status) { OnLocalFatal(status); });
  route_->set_key_prefix(KeyPrefix());
  CollectiveActorOptions collectives;
  collectives.abort = abort_.get();
  collectives.ring_timeout = options_.ring_timeout;
  collectives.plan_rings = plan_rings_;
  registry_ = MultiMachineActorRegistry(route_.get(), collectives);
}

std::string MultiMachineSession::BarrierName(const std::string& what) const {
  return run_name_.empty() ? what : run_name_ + "/" + what;
}

std::string MultiMachineSession::KeyPrefix() const {
  return "oflite/run/" + std::to_string(run_index_) + "-" + run_name_ + "/";
}

MultiMachineSession::~MultiMachineSession() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    armed_ = false;
    stopping_ = true;
  }
  wake_.notify_all();
  if (fatal_thread_.joinable()) fatal_thread_.join();
  if (net_ != nullptr && last_done_ && failure().rank < 0) {
    // Leaving after a successful last run: peers still in that barrier
    // must not take the connections closing for a loss.
    for (int peer = 0; peer < net_->world_size(); ++peer) {
      if (peer == options_.rank) continue;
      StatusOr<comm::Connection*> connection = net_->transport()->GetConnection(peer);
      if (connection.ok() && (*connection)->status().ok()) {
        (void)comm::MessageRouter::Send(*connection, kGoodbyeChannel, "");
      }
    }
    if (abort_ != nullptr) abort_->Flush(kRelayFlush);
  }
  if (net_ != nullptr) net_->router()->RemoveHandler(kGoodbyeChannel);
  route_.reset();
  abort_.reset();
  actors_wait_.reset();  // before its transport
  net_.reset();
}

void MultiMachineSession::AbortPeers(const Status& status) {
  // The peers leave once they hear it; their going is not news here.
  {
    std::lock_guard<std::mutex> lock(mutex_);
    armed_ = false;
  }
  if (abort_ != nullptr && !status.ok()) abort_->Broadcast(status);
}

JobFailure MultiMachineSession::failure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failure_.rank >= 0 || !ready_ || !(armed_ || fatal_)) return failure_;
  // Recorded but not yet handled by FatalLoop (e.g. a collective failed its
  // runtime with a peer's notice a moment before on_peer_abort ran).
  return JobFailure{abort_->failed_rank(), abort_->status()};
}

bool MultiMachineSession::TriggerFatalLocked() {
  if (!armed_ || fatal_) return false;
  fatal_ = true;
  wake_.notify_all();
  return true;
}

void MultiMachineSession::OnPeerLost(int peer, const Status& error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!ready_) {
    early_losses_.emplace_back(peer, error);
    return;
  }
  if (!armed_ || departed_.count(peer) > 0) return;
  abort_->RecordPeerLoss(peer, error);  // or an earlier cause stays the first
  TriggerFatalLocked();
}

void MultiMachineSession::OnPeerAbort() {
  std::lock_guard<std::mutex> lock(mutex_);
  TriggerFatalLocked();
}

void MultiMachineSession::OnLocalFatal(const Status& status) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (local_fatal_.ok()) local_fatal_ = status;
  TriggerFatalLocked();
}

void MultiMachineSession::FatalLoop() {
  Status local;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    // abort_ is in place once ready_ (a parked notice may fire while the
    // AbortNotice is being constructed).
    wake_.wait(lock, [this] { return (fatal_ && ready_) || stopping_; });
    if (!fatal_ || !ready_) return;
    local = local_fatal_;
  }
  // A local detection (malformed frame) is this rank's failure: told to
  // every peer; otherwise the peer's cause was recorded and relays sent.
  if (!local.ok()) abort_->Broadcast(local.WithContext(Who()), kRelayFlush);
  abort_->Flush(kRelayFlush);
  JobFailure failure{abort_->failed_rank(), abort_->status()};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    failure_ = failure;
  }
  // on_fatal first: a waiter woken by the abort may rely on it having run.
  if (options_.on_fatal) options_.on_fatal(failure);
  net_->control()->Abort(failure.reason);
}

Status MultiMachineSession::ControlError(const Status& error) {
  const auto deadline = std::chrono::steady_clock::now() + kCauseGrace;
  while (true) {
    const JobFailure known = failure();
    if (known.rank >= 0) return known.reason;
    if (std::chrono::steady_clock::now() >= deadline) return error;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void MultiMachineSession::Configure(RuntimeOptions* options) {
  options->remote_route = route_.get();
  options->registry = &registry_;
}

Status MultiMachineSession::AfterCreate(Runtime* runtime) {
  const std::string who = Who();
  route_->Attach(runtime->bus(), runtime->regsts());
  RETURN_IF_ERROR(route_->RegisterStaticRegisters(*plan_).WithContext(who));
  Status ready = net_->control()->Barrier(BarrierName("actors-ready"), options_.connect_timeout);
  if (!ready.ok()) {
    return ControlError(ready.WithContext(who + " waiting for every rank's actors"));
  }
  return route_->FetchStaticKeys(*plan_, options_.connect_timeout).WithContext(who);
}

void MultiMachineSession::Detach() { route_->Detach(); }

Status MultiMachineSession::Finish(bool last) {
  Status done = net_->control()->Barrier(BarrierName("run-done"), options_.connect_timeout);
  if (!done.ok()) {
    return ControlError(done.WithContext(Who() + " waiting for every rank to finish" +
                                         (run_name_.empty() ? "" : " " + run_name_)));
  }
  const JobFailure known = failure();
  if (known.rank >= 0) return known.reason;
  run_finished_ = true;
  if (last) {
    std::lock_guard<std::mutex> lock(mutex_);
    armed_ = false;
    last_done_ = true;
  }
  return Status::OK();
}

Status MultiMachineSession::BeginRun(const Plan& plan, const std::string& name) {
  if (!run_finished_) {
    return FailedPreconditionError(Who(), ": BeginRun('", name,
                                   "') before the previous run's Finish");
  }
  const JobFailure known = failure();
  if (known.rank >= 0) return known.reason;
  if (name.empty()) return InvalidArgumentError("BeginRun: a run needs a name");
  if (plan.machine_size() != net_->world_size()) {
    return InvalidArgumentError(Who(), ": the ", name, " plan has ", plan.machine_size(),
                                " machines, the job ", net_->world_size());
  }
  ASSIGN_OR_RETURN(const MachinePlan* part, FindMachinePlan(plan, options_.rank));
  retired_messages_ += route_->messages_sent();
  retired_bytes_ += route_->bytes_sent();
  retired_bounce_payloads_ += route_->bounce_payloads_sent();
  // The old route (its registered memory, its bounce-channel handlers) goes
  // before the new one installs its own handlers on the router.
  ++run_index_;
  run_name_ = name;
  route_.reset();
  plan_rings_ = PlanRings(plan);
  MakeRoute();  // its keys under this run's prefix
  plan_ = part;
  HoldTransportFor(plan);
  run_finished_ = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    armed_ = true;  // re-armed after a last Finish (tests run several "last" runs)
    last_done_ = false;
  }
  const std::string fingerprint = PlanFingerprint(plan);
  const std::string key = KeyPrefix() + "plan";
  if (options_.rank == 0) {
    Status put = net_->control()->Put(key, fingerprint);
    return put.ok() ? put : ControlError(put.WithContext(Who() + " publishing its plan"));
  }
  StatusOr<std::string> expected =
      net_->control()->Get(key, options_.connect_timeout, /*publisher_rank=*/0);
  if (!expected.ok()) {
    return ControlError(
        expected.status().WithContext(Who() + " waiting for rank 0's " + name + " plan"));
  }
  if (*expected != fingerprint) {
    return FailedPreconditionError(Who(), ": its ", name, " plan (fingerprint ", fingerprint,
                                   ") differs from rank 0's (", *expected,
                                   "); every rank must run the same oflite on the same job");
  }
  return Status::OK();
}

StatusOr<std::vector<std::string>> MultiMachineSession::GatherToRoot(const std::string& key,
                                                                     const std::string& value) {
  const std::string prefix = KeyPrefix() + key + "/";
  Status put = net_->control()->Put(prefix + std::to_string(options_.rank), value);
  if (!put.ok()) return ControlError(put.WithContext(Who() + " publishing " + key));
  std::vector<std::string> values;
  if (options_.rank != 0) return values;
  for (int rank = 0; rank < net_->world_size(); ++rank) {
    StatusOr<std::string> got =
        net_->control()->Get(prefix + std::to_string(rank), options_.connect_timeout, rank);
    if (!got.ok()) return ControlError(got.status().WithContext("rank 0 gathering " + key));
    values.push_back(std::move(*got));
  }
  return values;
}

std::string MultiMachineSession::StatsSummary() const {
  std::ostringstream os;
  os << "comm (" << provider_ << "): actor frames sent "
     << retired_messages_ + route_->messages_sent() << ", payloads through bounce buffers "
     << retired_bounce_payloads_ + route_->bounce_payloads_sent()
     << ", bytes pushed inside actor frames (collective fallback) "
     << retired_bytes_ + route_->bytes_sent() << "\n"
     << net_->stats()->Summary();
  return os.str();
}

}  // namespace oflite
