#include "oneflow_lite/profile/transport_profiler.h"
#include "oneflow_lite/profile/temp_directory.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <ctime>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "oneflow_lite/comm/builtin_providers.h"
#include "oneflow_lite/comm/collective/exchange.h"
#include "oneflow_lite/comm/collective/ring.h"
#include "oneflow_lite/comm/comm_net.h"
#include "oneflow_lite/comm/control/connect.h"
#include "oneflow_lite/comm/launch/process_group.h"
#include "oneflow_lite/comm/socket_util.h"
#include "oneflow_lite/common/id.h"
#include "oneflow_lite/common/ring_segments.h"
#include "oneflow_lite/common/tensor.h"
#include "oneflow_lite/device/device_context.h"
#include "oneflow_lite/kernels/cpu/cpu_threads.h"
#include "oneflow_lite/kernels/kernel.h"
#include "oneflow_lite/runtime/commnet/multi_machine.h"
#include "oneflow_lite/runtime/runtime.h"
#include "oneflow_lite/session/exit_codes.h"

namespace oflite {
namespace profile {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

void Note(const ProfileNote& note, const std::string& text) {
  if (note) {
    note(text);
  } else {
    std::fprintf(stderr, "oflite profile: %s\n", text.c_str());
  }
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t middle = values.size() / 2;
  return values.size() % 2 ? values[middle] : (values[middle - 1] + values[middle]) / 2;
}

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// "4 KiB", "64 MiB", "100 B".
std::string SizeName(int64_t bytes) {
  if (bytes >= (1 << 20) && bytes % (1 << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
}

std::string AlgorithmName(CollectiveAlgorithm algorithm) {
  switch (algorithm) {
    case COLLECTIVE_RING_ALL_REDUCE:
      return "ring all-reduce";
    case COLLECTIVE_RING_REDUCE_SCATTER:
      return "ring reduce-scatter";
    case COLLECTIVE_RING_ALL_GATHER:
      return "ring all-gather";
    case COLLECTIVE_EXCHANGE_ALL_REDUCE:
      return "exchange all-reduce";
    case COLLECTIVE_DOUBLING_ALL_REDUCE:
      return "doubling all-reduce";
    case COLLECTIVE_SCATTER_GATHER_ALL_REDUCE:
      return "scatter-gather all-reduce";
    default:
      return CollectiveAlgorithm_Name(algorithm);
  }
}

// The all-reduces that travel in transport messages (exchange.h), timed
// only up to TransportProfileOptions::exchange_max_bytes.
bool IsExchangeFamily(CollectiveAlgorithm algorithm) {
  return algorithm == COLLECTIVE_EXCHANGE_ALL_REDUCE ||
         algorithm == COLLECTIVE_DOUBLING_ALL_REDUCE ||
         algorithm == COLLECTIVE_SCATTER_GATHER_ALL_REDUCE;
}

// ------------------------------------------------------------ the runtime

// The empty kernel of the runtime profile's actors: what an act costs
// beyond it is the runtime's own.
constexpr char kNoopOp[] = "oflite_profile_noop";

class NoopKernel final : public Kernel {
 public:
  Status Forward(KernelContext*) override { return Status::OK(); }
};
REGISTER_KERNEL(kNoopOp, DEVICE_CPU, DT_FLOAT, NoopKernel);

// A source and `actors` compute tasks on one CPU stream (one thread); task
// i consumes the 1-element registers of the `fan_in` tasks before it (the
// source included), each under its own name, and produces one. Every
// register has 2 slots, as the compiler gives them, so the chain runs
// pipelined. Laid out as the compiler would: registers one after another
// in one host block.
StatusOr<Plan> ChainPlan(int actors, int fan_in, int64_t iterations) {
  const TensorDesc scalar(Shape{1}, DT_FLOAT);
  constexpr int kSlots = 2;
  constexpr int64_t kRegstBytes = 64;
  std::vector<TaskProto> tasks;
  std::vector<int64_t> outputs;  // regst desc id of task i's output
  for (int i = 0; i <= actors; ++i) {
    TaskIdParts parts;
    parts.stream.machine = 0;
    parts.stream.device_type = DEVICE_CPU;
    parts.stream.device_index = 0;
    parts.task_index = i;
    ASSIGN_OR_RETURN(const int64_t id, EncodeTaskId(parts));
    TaskProto task;
    task.set_task_id(id);
    task.set_name(i == 0 ? "source" : "noop" + std::to_string(i));
    task.set_type(i == 0 ? TASK_SOURCE : TASK_COMPUTE);
    task.set_device_type(DEVICE_CPU);
    task.set_device_index(0);
    task.mutable_parallel_ctx()->set_parallel_num(1);
    RegstDescProto* out = task.add_produced();
    out->set_regst_desc_id(i + 1);
    out->set_name("out");
    out->set_producer_task_id(id);
    out->set_regst_num(kSlots);
    out->mutable_zone()->set_type(ZONE_HOST);
    BlobInRegst* blob = out->add_blob();
    blob->set_lbn(task.name() + "/out");
    *blob->mutable_desc() = scalar.ToProto();
    blob->set_offset(0);
    blob->set_bytes(scalar.ByteSize());
    out->set_bytes_per_regst(kRegstBytes);
    KernelConf* kernel = task.add_kernel();
    kernel->set_dtype(DT_FLOAT);
    kernel->mutable_op()->set_name(task.name());
    kernel->mutable_op()->set_op_type(kNoopOp);
    const int first = std::max(0, i - fan_in);
    for (int j = first; j < i; ++j) {
      ConsumedRegst* consumed = task.add_consumed();
      consumed->set_name("in" + std::to_string(j - first));
      consumed->add_regst_desc_id(outputs[j]);
      tasks[j].mutable_produced(0)->add_consumer_task_id(id);
      BlobBinding* input = kernel->add_input();
      input->set_arg("in");
      input->set_index(j - first);
      input->set_regst_desc_id(outputs[j]);
    }
    BlobBinding* output = kernel->add_output();
    output->set_arg("out");
    output->set_index(0);
    output->set_regst_desc_id(out->regst_desc_id());
    outputs.push_back(out->regst_desc_id());
    tasks.push_back(std::move(task));
  }
  Plan plan;
  plan.set_total_iters(iterations);
  plan.set_seed(1);
  MachinePlan* machine = plan.add_machine();
  machine->set_machine_id(0);
  int64_t offset = 0;
  for (TaskProto& task : tasks) {
    RegstDescProto* out = task.mutable_produced(0);
    for (int slot = 0; slot < kSlots; ++slot) {
      out->add_mem_offset(offset);
      offset += kRegstBytes;
    }
    *machine->add_task() = std::move(task);
  }
  MemBlockProto* block = machine->add_mem_block();
  block->mutable_zone()->set_type(ZONE_HOST);
  block->set_size(offset);
  block->set_bytes_without_reuse(offset);
  return plan;
}

struct PlanRun {
  double us_per_act = 0;
  double messages_per_act = 0;
};

StatusOr<PlanRun> RunPlan(const Plan& plan, int cpu_threads) {
  RuntimeOptions options;
  options.cpu_threads = cpu_threads;  // the setting found: nothing changes
  ASSIGN_OR_RETURN(std::unique_ptr<Runtime> runtime, Runtime::Create(plan, options));
  RETURN_IF_ERROR(runtime->Run());
  const RunStats& stats = runtime->stats();
  if (stats.acts <= 0 || stats.seconds <= 0) {
    return InternalError("runtime profile: the chain ran no act (", stats.acts, " acts in ",
                         stats.seconds, " s)");
  }
  return PlanRun{stats.seconds * 1e6 / stats.acts,
                 static_cast<double>(stats.messages) / stats.acts};
}

// Microseconds of one call of the empty kernel, called in a plain loop as
// the actors call it: what an act costs that is not the runtime's.
StatusOr<double> KernelCallMicroseconds(int64_t calls) {
  OpConf op;
  op.set_name("noop");
  op.set_op_type(kNoopOp);
  ASSIGN_OR_RETURN(std::unique_ptr<Kernel> kernel, CreateKernel(op, DEVICE_CPU, DT_FLOAT));
  CpuDeviceContext device;
  KernelContext context(op, &device, 0);
  float scalar = 0;
  Blob blob(&scalar, TensorDesc(Shape{1}, DT_FLOAT));
  context.BindInput("in", &blob);
  context.BindOutput("out", &blob);
  const auto start = Clock::now();
  for (int64_t i = 0; i < calls; ++i) {
    context.set_iteration(i);
    RETURN_IF_ERROR(kernel->Forward(&context));
  }
  return SecondsSince(start) * 1e6 / static_cast<double>(calls);
}

// GB/s of one memcpy of `bytes` between two buffers touched beforehand.
double CopySample(std::vector<char>* from, std::vector<char>* to) {
  constexpr int kCopies = 4;
  const auto start = Clock::now();
  for (int i = 0; i < kCopies; ++i) {
    std::memcpy(to->data(), from->data(), to->size());
    (*from)[static_cast<size_t>(i) % from->size()] ^= (*to)[to->size() / 2];  // keeps the copies
  }
  return kCopies * static_cast<double>(to->size()) / SecondsSince(start) / 1e9;
}

Status ValidateRuntimeOptions(const RuntimeProfileOptions& options) {
  if (options.samples < 1 || options.samples > 1000) {
    return InvalidArgumentError("samples: ", options.samples, " is outside [1, 1000]");
  }
  // Shorter runs fit in one scheduler slice, and on a busy host the
  // two chains then see different shares of the CPU.
  if (options.iterations < 500 || options.iterations > 100000000) {
    return InvalidArgumentError("iterations: ", options.iterations, " is outside [500, 1e8]");
  }
  if (options.actors < 2 || options.actors > 10000) {
    return InvalidArgumentError("actors: ", options.actors, " is outside [2, 10000]");
  }
  if (options.fan_in < 2 || options.fan_in > options.actors) {
    return InvalidArgumentError("fan_in: ", options.fan_in,
                                " is outside [2, actors = ", options.actors, "]");
  }
  if (options.copy_bytes < (1 << 20) || options.copy_bytes > (int64_t{1} << 32)) {
    return InvalidArgumentError("copy_bytes: ", options.copy_bytes, " is outside [1 MiB, 4 GiB]");
  }
  return Status::OK();
}

// ---------------------------------------------------- transports: one rank

// Router channels of the rank program (the ring also uses channel |
// kReplyBit); none is the runtime's actor channel.
constexpr uint32_t kRingChannel = comm::kCollectiveChannel;
constexpr uint32_t kExchangeChannel = 0x200;
constexpr uint32_t kDoublingChannel = 0x300;
constexpr uint32_t kScatterGatherChannel = 0x400;
constexpr uint32_t kPingChannel = 0x600;
constexpr uint32_t kBusyChannel = 0x700;

// The busy-core message probe (MeasureBusyMessages): each phase's length,
// the mean gap between pings (a 4-host GPT step takes a message about every
// 300 us per rank) and the compute side's working set (a kernel's, in L2).
constexpr milliseconds kBusyPhase{150};
constexpr std::chrono::microseconds kBusyPingGap{300};
constexpr size_t kBusyWorkFloats = 128 * 1024;
// Messaging phases at least (each between two quiet ones): one phase's
// figure moves by tens of percent with the host's jitter (three profiles
// of one sitting read 18, 29 and 43 us from 5 phases), so the median needs
// many.
constexpr int kBusyMessagingPhases = 24;

// Past its share of the budget a rank still has this long to finish
// what it is doing (its waits end here); the launcher kills it later.
constexpr milliseconds kRankGrace{5000};
// The launcher's bound past a run's share: the ranks' grace, process start
// and teardown.
constexpr milliseconds kRunGrace{10000};

// Round trips per latency sample, and before the first.
constexpr int kPingsPerSample = 300;
constexpr int kWarmUpPings = 50;

struct RankConfig {
  std::string transport;
  int rank = -1;
  int world = 0;
  std::string master;
  std::string out;  // rank 0: where the figures go
  std::string token;
  std::vector<int64_t> bytes;
  int samples = 0;
  int64_t exchange_max_bytes = 0;
  int64_t stream_bytes = 0;
  bool p2p = false;
  bool busy_messages = false;  // with p2p: the busy-core message probe
  bool collectives = false;
  milliseconds budget{0};
  milliseconds op_timeout{0};
};

StatusOr<int64_t> ParseInteger(const std::string& text, const std::string& flag, int64_t min,
                               int64_t max) {
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || errno != 0 || end == nullptr || *end != '\0' || value < min || value > max) {
    return InvalidArgumentError("flag '--", flag, "': '", text, "' is not an integer in [", min,
                                ", ", max, "]");
  }
  return static_cast<int64_t>(value);
}

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) items.push_back(item);
  return items;
}

StatusOr<RankConfig> ParseRankFlags(int argc, char** argv) {
  std::map<std::string, std::string> values;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t equals = arg.find('=');
    if (arg.rfind("--", 0) != 0 || equals == std::string::npos) {
      return InvalidArgumentError("argument '", arg, "' is not --name=value");
    }
    values[arg.substr(2, equals - 2)] = arg.substr(equals + 1);
  }
  static const std::set<std::string> kKnown = {
      "transport",    "rank",  "world",       "master",
      "out",          "bytes", "samples",     "exchange_max_bytes",
      "stream_bytes", "p2p",   "collectives", "budget_ms",
      "op_timeout_ms", "busy_messages"};
  for (const auto& [name, value] : values) {
    if (!kKnown.count(name)) return InvalidArgumentError("unknown flag '--", name, "'");
  }
  for (const char* required :
       {"transport", "rank", "world", "master", "bytes", "samples", "budget_ms", "op_timeout_ms"}) {
    if (!values.count(required)) return InvalidArgumentError("flag '--", required, "' missing");
  }
  RankConfig config;
  config.transport = values["transport"];
  ASSIGN_OR_RETURN(const int64_t world, ParseInteger(values["world"], "world", 2, 1024));
  config.world = static_cast<int>(world);
  ASSIGN_OR_RETURN(const int64_t rank, ParseInteger(values["rank"], "rank", 0, world - 1));
  config.rank = static_cast<int>(rank);
  config.master = values["master"];
  config.out = values["out"];
  if (config.rank == 0 && config.out.empty()) {
    return InvalidArgumentError("rank 0 needs flag '--out'");
  }
  for (const std::string& item : SplitCommas(values["bytes"])) {
    ASSIGN_OR_RETURN(const int64_t bytes, ParseInteger(item, "bytes", 4, int64_t{1} << 30));
    if (bytes % 4 != 0) return InvalidArgumentError("flag '--bytes': ", bytes, " is not 4 * n");
    config.bytes.push_back(bytes);
  }
  if (!std::is_sorted(config.bytes.begin(), config.bytes.end())) {
    return InvalidArgumentError("flag '--bytes': not ascending");
  }
  ASSIGN_OR_RETURN(const int64_t samples, ParseInteger(values["samples"], "samples", 1, 1000));
  config.samples = static_cast<int>(samples);
  ASSIGN_OR_RETURN(
      config.exchange_max_bytes,
      ParseInteger(values.count("exchange_max_bytes") ? values["exchange_max_bytes"] : "0",
                   "exchange_max_bytes", 0, int64_t{1} << 30));
  ASSIGN_OR_RETURN(config.stream_bytes,
                   ParseInteger(values.count("stream_bytes") ? values["stream_bytes"] : "8388608",
                                "stream_bytes", 4096, int64_t{1} << 30));
  ASSIGN_OR_RETURN(const int64_t p2p,
                   ParseInteger(values.count("p2p") ? values["p2p"] : "0", "p2p", 0, 1));
  ASSIGN_OR_RETURN(
      const int64_t collectives,
      ParseInteger(values.count("collectives") ? values["collectives"] : "1", "collectives", 0, 1));
  ASSIGN_OR_RETURN(const int64_t busy_messages,
                   ParseInteger(values.count("busy_messages") ? values["busy_messages"] : "0",
                                "busy_messages", 0, 1));
  config.p2p = p2p != 0;
  config.busy_messages = busy_messages != 0;
  config.collectives = collectives != 0;
  if (config.p2p && config.world != 2) {
    return InvalidArgumentError("flag '--p2p=1' needs --world=2");
  }
  if (config.busy_messages && !config.p2p) {
    return InvalidArgumentError("flag '--busy_messages=1' needs --p2p=1");
  }
  ASSIGN_OR_RETURN(const int64_t budget,
                   ParseInteger(values["budget_ms"], "budget_ms", 1, int64_t{1} << 40));
  ASSIGN_OR_RETURN(const int64_t op_timeout,
                   ParseInteger(values["op_timeout_ms"], "op_timeout_ms", 1, int64_t{1} << 40));
  config.budget = milliseconds(budget);
  config.op_timeout = milliseconds(op_timeout);
  const char* token = std::getenv("OFLITE_JOB_TOKEN");
  if (token == nullptr || *token == '\0') {
    return InvalidArgumentError("no job token (OFLITE_JOB_TOKEN is not set)");
  }
  config.token = token;
  return config;
}

// Rank 0's figures, one line each, flushed as they come so that a run cut
// short still leaves what it measured:
//   latency_us <us> | gbyte_per_s <GB/s> | cpu_ns_per_byte <ns> |
//   point <algorithm> <ranks> <bytes> <us> | note <text>
class ResultFile {
 public:
  ~ResultFile() {
    if (file_ != nullptr) std::fclose(file_);
  }
  Status Open(const std::string& path) {
    file_ = std::fopen(path.c_str(), "w");
    if (file_ == nullptr) {
      return UnavailableError("cannot write '", path, "': ", std::strerror(errno));
    }
    return Status::OK();
  }
  void Line(const std::string& line) {
    if (file_ == nullptr) return;
    std::fprintf(file_, "%s\n", line.c_str());
    std::fflush(file_);
  }
  void Figure(const std::string& name, double value) {
    char text[96];
    std::snprintf(text, sizeof(text), "%s %.9g", name.c_str(), value);
    Line(text);
  }

 private:
  FILE* file_ = nullptr;
};

// The bounds of one rank's run: its share of the budget, and a little
// more for its waits.
class RankClock {
 public:
  RankClock(milliseconds budget, milliseconds op_timeout)
      : start_(Clock::now()),
        end_(start_ + budget),
        hard_end_(end_ + kRankGrace),
        op_timeout_(op_timeout) {}
  double Elapsed() const { return SecondsSince(start_); }
  double Budget() const { return std::chrono::duration<double>(end_ - start_).count(); }
  // One wait's bound: the op timeout, cut at the hard end.
  comm::Deadline OpDeadline() const { return std::min(Clock::now() + op_timeout_, hard_end_); }
  milliseconds OpWait() const {
    const auto left = std::chrono::duration_cast<milliseconds>(OpDeadline() - Clock::now());
    return std::max(left, milliseconds(1));
  }

 private:
  const Clock::time_point start_;
  const Clock::time_point end_;
  const Clock::time_point hard_end_;
  const milliseconds op_timeout_;
};

// Half the median round trip of a small router message, rank 0 to rank 1
// and back (rank 1's handler echoes it on its progress thread). Rank 0
// waits as an application thread would: it polls the transport for up to
// 50 us, then sleeps.
Status MeasureLatency(const RankConfig& config, comm::CommNet* net, const RankClock& clock,
                      ResultFile* results) {
  struct Echoes {
    std::mutex mutex;
    std::condition_variable arrived;
    std::atomic<uint64_t> count{0};
  };
  auto echoes = std::make_shared<Echoes>();
  ASSIGN_OR_RETURN(comm::Connection * peer, net->transport()->GetConnection(1 - config.rank));
  if (config.rank == 1) {
    net->router()->SetHandler(kPingChannel, [peer](int, const void* data, size_t size) {
      comm::MessageRouter::Send(peer, kPingChannel,
                                std::string(static_cast<const char*>(data), size))
          .IgnoreError();  // a failed echo shows as rank 0's timeout
    });
  } else {
    net->router()->SetHandler(kPingChannel, [echoes](int, const void*, size_t) {
      {
        std::lock_guard<std::mutex> lock(echoes->mutex);
        echoes->count.fetch_add(1, std::memory_order_release);
      }
      echoes->arrived.notify_all();
    });
  }
  RETURN_IF_ERROR(net->control()->Barrier("latency-start", clock.OpWait()));
  Status status;
  if (config.rank == 0) {
    comm::Transport* transport = net->transport();
    const std::string payload(8, '\0');
    uint64_t sent = 0;
    auto round_trip = [&]() -> StatusOr<double> {
      const auto start = Clock::now();
      RETURN_IF_ERROR(comm::MessageRouter::Send(peer, kPingChannel, payload));
      const uint64_t want = ++sent;
      const auto spin_until = Clock::now() + std::chrono::microseconds(50);
      while (echoes->count.load(std::memory_order_acquire) != want && Clock::now() < spin_until) {
        if (!transport->Poll()) std::this_thread::yield();
      }
      if (echoes->count.load(std::memory_order_acquire) != want) {
        transport->EndPolling();  // about to sleep: the progress thread takes over
        std::unique_lock<std::mutex> lock(echoes->mutex);
        if (!echoes->arrived.wait_until(lock, clock.OpDeadline(),
                                        [&] { return echoes->count.load() == want; })) {
          return DeadlineExceededError("no echo of ping ", want, " from rank 1");
        }
      }
      return SecondsSince(start) * 1e6;
    };
    std::vector<double> blocks;
    for (int i = 0; i < kWarmUpPings && status.ok(); ++i) status = round_trip().status();
    for (int sample = 0; sample < config.samples && status.ok(); ++sample) {
      std::vector<double> trips;
      for (int i = 0; i < kPingsPerSample; ++i) {
        StatusOr<double> trip = round_trip();
        if (!trip.ok()) {
          status = trip.status();
          break;
        }
        trips.push_back(*trip);
      }
      blocks.push_back(Median(trips));
    }
    if (status.ok()) results->Figure("latency_us", Median(blocks) / 2);
  }
  // Rank 1 waits here while rank 0 pings; a failure on rank 0 ends the run.
  RETURN_IF_ERROR(status.WithContext("latency"));
  RETURN_IF_ERROR(net->control()->Barrier("latency-end", clock.OpWait()));
  net->router()->RemoveHandler(kPingChannel);
  return Status::OK();
}

// CPU seconds of this whole process so far (every thread).
double ProcessCpuSeconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

// The calling thread's CPU time in seconds.
double ThreadCpuSeconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

// One stream's throughput: rank 0 WRITEs `stream_bytes` at a time into
// rank 1's registered buffer, a window of them in flight (as
// comm_p2p_bench), at least 64 MiB per sample; the median of the samples.
Status MeasureStream(const RankConfig& config, comm::CommNet* net, const comm::MemoryRegion& region,
                     const RankClock& clock, ResultFile* results) {
  comm::control::ControlClient* control = net->control();
  const size_t size = static_cast<size_t>(config.stream_bytes);
  const size_t total = std::max<size_t>(size * 8, size_t{64} << 20) / size * size;
  if (config.rank == 1) {
    RETURN_IF_ERROR(comm::control::PublishRemoteKey(control, "stream", region.remote_key()));
    // The receiver's CPU over the timed samples (their bounds are rank 0's
    // barriers), per byte received: its share of cpu_ns_per_byte.
    RETURN_IF_ERROR(control->Barrier("stream-timed", clock.OpWait()));
    const double cpu_start = ProcessCpuSeconds();
    RETURN_IF_ERROR(control->Barrier("stream-timed-end", clock.OpWait()));
    const double cpu_ns = (ProcessCpuSeconds() - cpu_start) * 1e9;
    RETURN_IF_ERROR(control->Put(
        "stream-cpu-1", std::to_string(cpu_ns / static_cast<double>(total * config.samples))));
  } else {
    ASSIGN_OR_RETURN(const comm::RemoteKey remote,
                     comm::control::FetchRemoteKey(control, "stream", 1, clock.OpWait()));
    ASSIGN_OR_RETURN(comm::Connection * link, net->transport()->GetConnection(1));
    const int window_limit = static_cast<int>(std::clamp<size_t>((16u << 20) / size, 2, 64));
    // Shared with the completions, which may outlive a timed-out wait.
    struct Window {
      std::mutex mutex;
      std::condition_variable changed;
      int outstanding = 0;
      Status error;
    };
    auto window = std::make_shared<Window>();
    auto wait_below = [&](int limit, comm::Deadline deadline) -> Status {
      std::unique_lock<std::mutex> lock(window->mutex);
      if (!window->changed.wait_until(
              lock, deadline, [&] { return window->outstanding < limit || !window->error.ok(); })) {
        return DeadlineExceededError("WRITE to rank 1 did not complete in time");
      }
      return window->error;
    };
    auto sample = [&]() -> StatusOr<double> {
      const comm::Deadline deadline = clock.OpDeadline();
      const auto start = Clock::now();
      for (size_t moved = 0; moved < total; moved += size) {
        RETURN_IF_ERROR(wait_below(window_limit, deadline));
        {
          std::lock_guard<std::mutex> lock(window->mutex);
          ++window->outstanding;
        }
        Status posted = link->PostWrite(region, 0, remote, 0, size, [window](const Status& s) {
          std::lock_guard<std::mutex> lock(window->mutex);
          --window->outstanding;
          if (!s.ok() && window->error.ok()) window->error = s;
          window->changed.notify_all();
        });
        if (!posted.ok()) {
          std::lock_guard<std::mutex> lock(window->mutex);
          --window->outstanding;
          return posted;
        }
      }
      RETURN_IF_ERROR(wait_below(1, deadline));
      return static_cast<double>(total) / SecondsSince(start) / 1e9;
    };
    Status status = sample().status();  // warm-up
    std::vector<double> rates;
    RETURN_IF_ERROR(control->Barrier("stream-timed", clock.OpWait()));
    const double cpu_start = ProcessCpuSeconds();
    for (int i = 0; i < config.samples && status.ok(); ++i) {
      StatusOr<double> rate = sample();
      if (rate.ok()) {
        rates.push_back(*rate);
      } else {
        status = rate.status();
      }
    }
    const double cpu_ns = (ProcessCpuSeconds() - cpu_start) * 1e9;
    RETURN_IF_ERROR(control->Barrier("stream-timed-end", clock.OpWait()));
    RETURN_IF_ERROR(status.WithContext("stream of " + SizeName(config.stream_bytes) + " WRITEs"));
    results->Figure("gbyte_per_s", Median(rates));
    // CPU per byte: each end's process CPU (all its threads: the poster, the
    // transport's progress thread, its polling) over the bytes it moved;
    // the simulator charges it at both ends, so the larger of the two.
    StatusOr<std::string> peer = control->Get("stream-cpu-1", clock.OpWait(), 1);
    const double sent_ns = cpu_ns / static_cast<double>(total * config.samples);
    double received_ns = 0;
    if (peer.ok()) received_ns = std::strtod(peer->c_str(), nullptr);
    results->Figure("cpu_ns_per_byte", std::max(sent_ns, received_ns));
  }
  return control->Barrier("stream-end", clock.OpWait());
}

// One run of the probe's phases (MeasureBusyMessages); rank 0 returns the
// median loss per message (NaN when no phase answered), rank 1 NaN.
StatusOr<double> BusyMessagePhases(const RankConfig& config, comm::CommNet* net,
                                   const RankClock& clock, ResultFile* results, int phases,
                                   const std::string& prefix) {
  comm::control::ControlClient* control = net->control();
  struct Shared {
    std::mutex mutex;
    std::condition_variable changed;
    uint64_t pings = 0;    // rank 0: received, not yet answered
    uint64_t answers = 0;  // rank 0: answered; rank 1: answers received
    bool stop = false;
    Status error;
  };
  auto shared = std::make_shared<Shared>();
  ASSIGN_OR_RETURN(comm::Connection * peer, net->transport()->GetConnection(1 - config.rank));
  const std::string payload(16, '\0');
  std::thread answerer;
  if (config.rank == 0) {
    net->router()->SetHandler(kBusyChannel, [shared](int, const void*, size_t) {
      {
        std::lock_guard<std::mutex> lock(shared->mutex);
        ++shared->pings;
      }
      shared->changed.notify_all();
    });
    answerer = std::thread([shared, peer, payload] {
      std::unique_lock<std::mutex> lock(shared->mutex);
      while (!shared->stop) {
        if (shared->pings == 0) {
          shared->changed.wait_for(lock, milliseconds(100));
          continue;
        }
        --shared->pings;
        lock.unlock();
        Status sent = comm::MessageRouter::Send(peer, kBusyChannel, payload);
        lock.lock();
        if (!sent.ok() && shared->error.ok()) shared->error = sent;
        ++shared->answers;
      }
    });
  } else {
    net->router()->SetHandler(kBusyChannel, [shared](int, const void*, size_t) {
      {
        std::lock_guard<std::mutex> lock(shared->mutex);
        ++shared->answers;
      }
      shared->changed.notify_all();
    });
  }
  auto stop_answerer = [&] {
    if (!answerer.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(shared->mutex);
      shared->stop = true;
    }
    shared->changed.notify_all();
    answerer.join();
  };
  std::vector<float> work(kBusyWorkFloats, 1.0f);
  volatile float sink = 0;
  std::mt19937 random(12345);
  std::uniform_real_distribution<double> gap(0.5, 1.5);
  std::vector<BusyPhase> measured(phases);  // rank 0's
  Status status;
  for (int phase = 0; phase < phases && status.ok(); ++phase) {
    const bool messaging = phase % 2 == 1;
    status = control->Barrier(prefix + std::to_string(phase), clock.OpWait());
    if (!status.ok()) break;
    const auto start = Clock::now();
    const auto end = start + kBusyPhase;
    if (config.rank == 0) {
      uint64_t answered_before = 0;
      {
        std::lock_guard<std::mutex> lock(shared->mutex);
        answered_before = shared->answers;
      }
      int64_t units = 0;
      const double cpu_start = ThreadCpuSeconds();
      while (Clock::now() < end) {
        float sum = 0;
        for (size_t i = 0; i < work.size(); ++i) {
          work[i] = work[i] * 0.999f + 0.001f;
          sum += work[i];
        }
        sink = sink + sum;
        ++units;
      }
      const double seconds = SecondsSince(start);
      const double cpu_seconds = ThreadCpuSeconds() - cpu_start;
      uint64_t answered = 0;
      {
        std::lock_guard<std::mutex> lock(shared->mutex);
        answered = shared->answers - answered_before;
        status = shared->error;
      }
      measured[phase] = {static_cast<double>(units), seconds, cpu_seconds, answered};
    } else if (messaging) {
      while (status.ok() && Clock::now() < end) {
        uint64_t want = 0;
        {
          std::lock_guard<std::mutex> lock(shared->mutex);
          want = shared->answers + 1;
        }
        status = comm::MessageRouter::Send(peer, kBusyChannel, payload);
        if (!status.ok()) break;
        std::unique_lock<std::mutex> lock(shared->mutex);
        if (!shared->changed.wait_until(lock, clock.OpDeadline(),
                                        [&] { return shared->answers >= want; })) {
          status = DeadlineExceededError("rank 0 did not answer ping ", want, " in time");
          break;
        }
        lock.unlock();
        std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(
            gap(random) * static_cast<double>(kBusyPingGap.count())));
      }
    }
    if (status.ok()) {
      status = control->Barrier(prefix + "end-" + std::to_string(phase), clock.OpWait());
    }
  }
  stop_answerer();
  RETURN_IF_ERROR(status.WithContext("busy-core messages"));
  net->router()->RemoveHandler(kBusyChannel);
  const double none = std::numeric_limits<double>::quiet_NaN();
  if (config.rank != 0) return none;
  const BusyMessageCost cost = EstimateBusyMessageCost(measured);
  if (cost.phases == 0) {
    results->Line("note " + config.transport +
                  ": busy-core message cost: no messaging phase answered a ping");
    return none;
  }
  results->Line("note " + config.transport + ": busy-core message cost: " + cost.summary);
  return cost.us;
}

// How much compute a busy core loses per message its rank receives and
// answers (TransportCost.busy_message_us). Rank 0's main thread computes
// (passes over an L2-sized buffer, as a kernel would) on its core for
// phases of kBusyPhase, alternately quiet and with rank 1 pinging it at
// jittered gaps around kBusyPingGap (at least kBusyMessagingPhases of
// them); quiet phases open and close the run.
// Each ping takes the path a piece of a collective takes: rank 0's
// transport receives it, its handler wakes a waiting thread, which sends
// the answer (as a collective's worker sends its next piece); rank 1 waits
// for the answer before its next gap. The figure (EstimateBusyMessageCost,
// from each phase's wall time, the computing thread's CPU time and its
// passes): per messaging phase, the time the thread spent off its core
// beyond the quiet phases on either side of it (a drift of the host then
// moves both alike), over the pings rank 0 answered in it, the median over
// the phases, plus the caches' share when it stands out of the noise. When
// that is not above 0 the run is repeated once if the budget allows. It
// includes the context switches and the polling after each event.
// Needs the two ranks on cores of their own (the launcher asks for it only
// then).
Status MeasureBusyMessages(const RankConfig& config, comm::CommNet* net, const RankClock& clock,
                           ResultFile* results) {
  comm::control::ControlClient* control = net->control();
  const int phases = 2 * std::max(config.samples, kBusyMessagingPhases) + 1;
  // Rank 0 decides whether the phases and their barriers still fit in the
  // run's share of the budget, and tells rank 1.
  auto go = [&](int attempt) -> StatusOr<bool> {
    const std::string key = "busy-go-" + std::to_string(attempt);
    if (config.rank != 0) {
      ASSIGN_OR_RETURN(const std::string answer, control->Get(key, clock.OpWait(), 0));
      return answer == "1";
    }
    const bool fits =
        clock.Elapsed() + phases * kBusyPhase.count() * 1.5 / 1e3 < clock.Budget();
    RETURN_IF_ERROR(control->Put(key, fits ? "1" : "0"));
    return fits;
  };
  // Rank 0 asks for a second run (go(1)) only when the first measured no
  // loss; rank 1 learns it from the same key.
  double loss = std::numeric_limits<double>::quiet_NaN();
  int runs = 0;
  for (int attempt = 0; attempt < 2; ++attempt) {
    ASSIGN_OR_RETURN(const bool fits, go(attempt));
    if (!fits) {
      if (config.rank == 0 && attempt == 0) {
        results->Line("note " + config.transport +
                      ": busy-core message cost not measured (the run's share of the time "
                      "budget is spent)");
      }
      break;
    }
    ASSIGN_OR_RETURN(loss, BusyMessagePhases(config, net, clock, results, phases,
                                             "busy-" + std::to_string(attempt) + "-"));
    ++runs;
    if (config.rank == 0 && loss > 0) {
      if (attempt == 0) RETURN_IF_ERROR(control->Put("busy-go-1", "0"));
      break;
    }
  }
  if (config.rank == 0) {
    if (loss > 0) {
      results->Figure("busy_message_us", loss);
    } else if (!std::isnan(loss)) {
      results->Line("note " + config.transport + ": busy-core message cost: no loss measured (" +
                    std::to_string(loss) + " us per message, within the noise, in " +
                    std::to_string(runs) + " run(s))");
    }
  }
  return Status::OK();
}

// One collective algorithm at one size: how to prepare the buffer, run it
// once, and check the result of a prepared run ("" when right).
struct Contender {
  CollectiveAlgorithm algorithm;
  std::function<void()> fill;
  std::function<Status(comm::Deadline)> run;
  std::function<std::string()> check;
  std::vector<double> us;  // per op, per sample
  std::string wrong;
};

// Every algorithm of ProfiledAlgorithms(world) at each size in turn,
// samples interleaved between the algorithms (as allreduce_bench), so load
// that drifts hits them alike. Each sample starts at a control-plane
// barrier and one untimed op, then times `iterations` back-to-back ops
// (more for small sizes, so a sample is not one latency). Before the
// samples every algorithm's result is checked on every rank; a wrong one
// is left out with a note. Rank 0 decides before each size whether it fits
// in the run's share of the budget (the last size's time scaled by the
// bytes) and tells the others through the control plane.
Status MeasureCollectives(const RankConfig& config, comm::CommNet* net,
                          const comm::MemoryRegion& region, float* data, const RankClock& clock,
                          ResultFile* results) {
  const int rank = config.rank;
  const int world = config.world;
  comm::control::ControlClient* control = net->control();
  comm::CollectiveOptions ring_options;
  ring_options.channel = kRingChannel;
  ring_options.tag = 1;
  ring_options.setup_timeout = std::min(ring_options.setup_timeout, clock.OpWait());
  ASSIGN_OR_RETURN(
      std::unique_ptr<comm::RingCommunicator> ring,
      comm::RingCommunicator::Create(net->transport(), net->router(), net->pool(), ring_options));
  // The all-reduces in transport messages, one communicator each on a
  // channel of its own (as the runtime gives each ring its own).
  struct ExchangeKind {
    CollectiveAlgorithm algorithm;
    comm::ExchangeSchedule schedule;
    uint32_t channel;
  };
  const ExchangeKind kinds[] = {
      {COLLECTIVE_EXCHANGE_ALL_REDUCE, comm::ExchangeSchedule::kDirect, kExchangeChannel},
      {COLLECTIVE_DOUBLING_ALL_REDUCE, comm::ExchangeSchedule::kDoubling, kDoublingChannel},
      {COLLECTIVE_SCATTER_GATHER_ALL_REDUCE, comm::ExchangeSchedule::kScatterGather,
       kScatterGatherChannel}};
  const std::vector<CollectiveAlgorithm> algorithms = ProfiledAlgorithms(world);
  std::map<CollectiveAlgorithm, std::unique_ptr<comm::ExchangeCommunicator>> exchanges;
  for (const ExchangeKind& kind : kinds) {
    if (std::find(algorithms.begin(), algorithms.end(), kind.algorithm) == algorithms.end()) {
      continue;
    }
    comm::ExchangeOptions options;
    options.channel = kind.channel;
    options.tag = static_cast<uint64_t>(kind.algorithm);
    options.schedule = kind.schedule;
    ASSIGN_OR_RETURN(exchanges[kind.algorithm],
                     comm::ExchangeCommunicator::Create(net->transport(), net->router(), options));
  }

  double last_seconds = 0;
  int64_t last_bytes = 0;
  const std::string run_name = config.transport + ", " + std::to_string(world) + " ranks";
  for (size_t index = 0; index < config.bytes.size(); ++index) {
    const int64_t bytes = config.bytes[index];
    const std::string key = "size/" + std::to_string(index);
    bool go = true;
    if (rank == 0) {
      // The first size always runs: it is the cheapest, and a run with
      // no point says nothing.
      const double estimate =
          last_seconds * static_cast<double>(bytes) / std::max<int64_t>(last_bytes, 1);
      go = index == 0 || clock.Elapsed() + estimate <= clock.Budget();
      RETURN_IF_ERROR(control->Put(key, go ? "go" : "stop"));
      if (!go) {
        char text[256];
        std::snprintf(text, sizeof(text),
                      "note %s: sizes from %s on not measured: this run's share of the time "
                      "budget (%.1f s) would be spent (%.1f s used)",
                      run_name.c_str(), SizeName(bytes).c_str(), clock.Budget(), clock.Elapsed());
        results->Line(text);
      }
    } else {
      ASSIGN_OR_RETURN(const std::string decision, control->Get(key, clock.OpWait(), 0));
      go = decision == "go";
    }
    if (!go) break;
    const auto size_start = Clock::now();
    const size_t count = static_cast<size_t>(bytes) / sizeof(float);
    const double expected = world * (world + 1) / 2.0;
    size_t own_begin = 0, own_end = 0;
    RingSegmentBounds(count, world, rank, &own_begin, &own_end);
    auto fill_all = [data, count, rank] { std::fill(data, data + count, rank + 1.0f); };
    auto check_all = [data, count, expected]() -> std::string {
      for (size_t i : {size_t{0}, count / 2, count - 1}) {
        if (data[i] != expected) {
          return "element " + std::to_string(i) + " is " + std::to_string(data[i]) + ", not " +
                 std::to_string(expected);
        }
      }
      return "";
    };
    std::vector<Contender> contenders;
    for (CollectiveAlgorithm algorithm : algorithms) {
      if (IsExchangeFamily(algorithm) && config.exchange_max_bytes > 0 &&
          bytes > config.exchange_max_bytes) {
        continue;
      }
      Contender contender{algorithm, fill_all, nullptr, check_all, {}, ""};
      switch (algorithm) {
        case COLLECTIVE_RING_ALL_REDUCE:
          contender.run = [&, count](comm::Deadline deadline) {
            return ring->AllReduce(region, 0, count, DT_FLOAT, deadline);
          };
          break;
        case COLLECTIVE_RING_REDUCE_SCATTER:
          contender.run = [&, count](comm::Deadline deadline) {
            return ring->ReduceScatter(region, 0, count, DT_FLOAT, deadline);
          };
          // This rank's segment holds the sum.
          contender.check = [data, own_begin, own_end, expected]() -> std::string {
            for (size_t i : {own_begin, own_end - 1}) {
              if (own_end > own_begin && data[i] != expected) {
                return "element " + std::to_string(i) + " of this rank's segment is " +
                       std::to_string(data[i]) + ", not " + std::to_string(expected);
              }
            }
            return "";
          };
          break;
        case COLLECTIVE_RING_ALL_GATHER:
          contender.run = [&, count](comm::Deadline deadline) {
            return ring->AllGather(region, 0, count, DT_FLOAT, deadline);
          };
          // Segment j comes from rank j, which filled it with j + 1.
          contender.fill = [data, count, rank, own_begin, own_end] {
            std::fill(data, data + count, -1.0f);
            std::fill(data + own_begin, data + own_end, rank + 1.0f);
          };
          contender.check = [data, count, world]() -> std::string {
            for (int segment = 0; segment < world; ++segment) {
              size_t begin = 0, end = 0;
              RingSegmentBounds(count, world, segment, &begin, &end);
              for (size_t i : {begin, end - 1}) {
                if (end > begin && data[i] != segment + 1.0f) {
                  return "element " + std::to_string(i) + " (segment " + std::to_string(segment) +
                         ") is " + std::to_string(data[i]) + ", not " + std::to_string(segment + 1);
                }
              }
            }
            return "";
          };
          break;
        default: {
          comm::ExchangeCommunicator* exchange = exchanges.at(algorithm).get();
          contender.run = [exchange, data, count](comm::Deadline deadline) {
            return exchange->AllReduce(data, count, DT_FLOAT, deadline);
          };
          break;
        }
      }
      contenders.push_back(std::move(contender));
    }
    auto context = [&](const Contender& contender) {
      return run_name + ", " + AlgorithmName(contender.algorithm) + " of " + SizeName(bytes);
    };
    // Checked once, then warmed up once.
    for (Contender& contender : contenders) {
      contender.fill();
      RETURN_IF_ERROR(contender.run(clock.OpDeadline()).WithContext(context(contender)));
      contender.wrong = contender.check();
      RETURN_IF_ERROR(contender.run(clock.OpDeadline()).WithContext(context(contender)));
    }
    // Repeated sums grow the values (up to inf, which costs the same).
    const int iterations = static_cast<int>(std::clamp<int64_t>((int64_t{8} << 20) / bytes, 1, 32));
    for (int sample = 0; sample < config.samples; ++sample) {
      for (Contender& contender : contenders) {
        RETURN_IF_ERROR(control->Barrier("sample", clock.OpWait()));
        RETURN_IF_ERROR(contender.run(clock.OpDeadline()).WithContext(context(contender)));
        const auto start = Clock::now();
        for (int i = 0; i < iterations; ++i) {
          RETURN_IF_ERROR(contender.run(clock.OpDeadline()).WithContext(context(contender)));
        }
        contender.us.push_back(SecondsSince(start) * 1e6 / iterations);
      }
    }
    // Every rank's verdicts reach rank 0, which keeps only right points.
    std::string wrong;
    for (const Contender& contender : contenders) {
      if (!contender.wrong.empty()) {
        wrong += std::to_string(contender.algorithm) + " " + contender.wrong + ";";
      }
    }
    const std::string wrong_key = "wrong/" + std::to_string(index) + "/";
    if (rank != 0) {
      RETURN_IF_ERROR(control->Put(wrong_key + std::to_string(rank), wrong));
    } else {
      std::vector<std::string> verdicts = {wrong};
      for (int peer = 1; peer < world; ++peer) {
        ASSIGN_OR_RETURN(std::string verdict,
                         control->Get(wrong_key + std::to_string(peer), clock.OpWait(), peer));
        verdicts.push_back(verdict);
      }
      for (const Contender& contender : contenders) {
        std::string why;
        for (int r = 0; r < world; ++r) {
          const std::string mark = std::to_string(contender.algorithm) + " ";
          size_t at = verdicts[r].find(mark);
          // Marks are "<enum> <text>;" entries: match at an entry start.
          while (at != std::string::npos && at != 0 && verdicts[r][at - 1] != ';') {
            at = verdicts[r].find(mark, at + 1);
          }
          if (at == std::string::npos) continue;
          const size_t end = verdicts[r].find(';', at);
          why += (why.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) + ": " +
                 verdicts[r].substr(at + mark.size(), end - at - mark.size());
        }
        if (!why.empty()) {
          results->Line("note " + context(contender) + ": wrong result, left out (" + why + ")");
          continue;
        }
        char text[128];
        std::snprintf(text, sizeof(text), "point %d %d %lld %.9g",
                      static_cast<int>(contender.algorithm), world, static_cast<long long>(bytes),
                      Median(contender.us));
        results->Line(text);
      }
    }
    last_seconds = SecondsSince(size_start);
    last_bytes = bytes;
  }
  return control->Barrier("collectives-end", clock.OpWait());
}

Status RunRank(const RankConfig& config) {
  const RankClock clock(config.budget, config.op_timeout);
  ResultFile results;
  if (config.rank == 0) RETURN_IF_ERROR(results.Open(config.out));
  comm::BuiltinProviderOptions providers;
  providers.listen_host = "127.0.0.1";
  providers.job_token = config.token;
  comm::CommNetOptions options;
  options.rank = config.rank;
  options.world_size = config.world;
  options.master = config.master;
  options.job_token = config.token;
  options.connect_timeout = clock.OpWait();
  options.transport.message_slot_size = kRuntimeMessageSlotSize;  // as a session's CommNet
  ASSIGN_OR_RETURN(options.provider, comm::BuiltinProviders(providers).Find(config.transport));
  // The stream's buffer; the collectives take theirs from the transport
  // (below). Declared before the CommNet: outlives the transport, which
  // may still copy into it after a failed wait.
  const int64_t stream_bytes = config.p2p ? config.stream_bytes : 4;
  std::vector<float> buffer(static_cast<size_t>(stream_bytes) / sizeof(float), 0.0f);
  ASSIGN_OR_RETURN(std::unique_ptr<comm::CommNet> net, comm::CommNet::Start(options));
  ASSIGN_OR_RETURN(std::unique_ptr<comm::MemoryRegion> region,
                   net->transport()->RegisterMemory(buffer.data(), buffer.size() * sizeof(float),
                                                    comm::kAccessAll));
  // The collectives reduce memory from the transport, as the runtime's
  // collective actors reduce buffers of the session's registered pool
  // (shm: a memfd the peers map, so the ring's copies are plain memcpy;
  // the point-to-point stream above keeps the caller's registered buffer,
  // as a register pulled in place).
  std::unique_ptr<comm::MemoryRegion> pooled;
  if (config.collectives) {
    const int64_t largest = config.bytes.empty() ? 4 : config.bytes.back();
    ASSIGN_OR_RETURN(pooled, net->transport()->AllocateRegistered(static_cast<size_t>(largest),
                                                                  comm::kAccessAll));
  }
  Status status;
  if (config.p2p) {
    status = MeasureLatency(config, net.get(), clock, &results);
    if (status.ok()) status = MeasureStream(config, net.get(), *region, clock, &results);
    if (status.ok() && config.busy_messages) {
      status = MeasureBusyMessages(config, net.get(), clock, &results);
    }
  }
  if (status.ok() && config.collectives) {
    status = MeasureCollectives(config, net.get(), *pooled,
                                reinterpret_cast<float*>(pooled->data()), clock, &results);
  }
  // After a failure a WRITE may still be outstanding on the regions: they
  // are left registered (the process ends next) rather than released under
  // it.
  if (!status.ok()) {
    region.release();
    pooled.release();
  }
  return status;
}

// ---------------------------------------------- transports: the launcher

// One group of processes: `world` ranks over `transport`; with `p2p` (2
// ranks) the latency and stream figures first.
struct RunSpec {
  std::string transport;
  int world = 0;
  bool p2p = false;
  bool collectives = true;
  std::string Name() const { return transport + ", " + std::to_string(world) + " ranks"; }
  // Its claim on the budget: more processes, more time.
  double Weight() const { return world + (p2p ? 1.0 : 0.0); }
};

struct Point {
  CollectiveAlgorithm algorithm;
  int world;
  int64_t bytes;
  double us;
};

struct RunFigures {
  double latency_us = 0;
  double gbyte_per_s = 0;
  double cpu_ns_per_byte = 0;  // 0: not measured
  double busy_message_us = 0;  // 0: not measured
  std::vector<Point> points;
  int lines = 0;  // figures and notes read
};

bool Positive(double value) { return std::isfinite(value) && value > 0; }

// Reads rank 0's result file (see ResultFile); notes are passed on, odd
// lines too (as notes: they should not happen).
RunFigures ReadResults(const std::string& path, const RunSpec& spec, const ProfileNote& note) {
  RunFigures figures;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    ++figures.lines;
    std::istringstream fields(line);
    std::string kind;
    fields >> kind;
    if (kind == "note") {
      Note(note, line.size() > 5 ? line.substr(5) : "");
      continue;
    }
    bool good = false;
    if (kind == "latency_us" || kind == "gbyte_per_s" || kind == "cpu_ns_per_byte" ||
        kind == "busy_message_us") {
      double value = 0;
      good = static_cast<bool>(fields >> value) && Positive(value);
      if (good) {
        (kind == "latency_us"        ? figures.latency_us
         : kind == "gbyte_per_s"     ? figures.gbyte_per_s
         : kind == "cpu_ns_per_byte" ? figures.cpu_ns_per_byte
                                     : figures.busy_message_us) = value;
      }
    } else if (kind == "point") {
      int algorithm = 0;
      Point point{};
      good = static_cast<bool>(fields >> algorithm >> point.world >> point.bytes >> point.us) &&
             CollectiveAlgorithm_IsValid(algorithm) && Positive(point.us);
      point.algorithm = static_cast<CollectiveAlgorithm>(algorithm);
      if (good) figures.points.push_back(point);
    }
    if (!good) Note(note, spec.Name() + ": figure left out (not a positive number): " + line);
  }
  return figures;
}

// A loopback port that was free a moment ago, for rank 0's rendezvous.
StatusOr<int> FreePort() {
  int port = 0;
  ASSIGN_OR_RETURN(const int fd, comm::ListenTcp("127.0.0.1", &port));
  ::close(fd);
  return port;
}

std::string JoinBytes(const std::vector<int64_t>& bytes) {
  std::string text;
  for (int64_t value : bytes) text += (text.empty() ? "" : ",") + std::to_string(value);
  return text;
}

// Runs one group of rank processes for at most `share` (plus kRunGrace)
// and reads what rank 0 wrote, also from a run that failed or was cut
// short. `failure` gets why a run failed ("" when it did not).
StatusOr<RunFigures> RunGroup(const TransportProfileOptions& options, const RunSpec& spec,
                              milliseconds share, const std::string& directory, int index,
                              std::string* failure) {
  ASSIGN_OR_RETURN(const int port, FreePort());
  const std::string out = directory + "/run-" + std::to_string(index) + ".txt";
  const std::string log = directory + "/run-" + std::to_string(index) + ".log";
  const std::string token = comm::control::GenerateJobToken();
  const std::vector<std::vector<int>> cores = comm::AllowedCores();
  std::vector<int64_t> bytes = options.bytes;
  std::sort(bytes.begin(), bytes.end());
  bytes.erase(std::unique(bytes.begin(), bytes.end()), bytes.end());
  std::vector<std::vector<int>> rank_cpus;
  for (int rank = 0; rank < spec.world; ++rank) {
    rank_cpus.push_back(comm::CpusForLocalRank(cores, rank, spec.world, options.bind));
  }
  // The busy-core message probe needs each of the two ranks on CPUs of its
  // own: one computes, the other pings it.
  bool busy_messages = false;
  if (spec.p2p && options.busy_messages) {
    busy_messages = !rank_cpus[0].empty() && !rank_cpus[1].empty();
    for (int cpu : rank_cpus[0]) {
      if (std::count(rank_cpus[1].begin(), rank_cpus[1].end(), cpu) != 0) busy_messages = false;
    }
    if (!busy_messages) {
      Note(options.note, spec.transport +
                             ": busy-core message cost not measured (the two ranks have no "
                             "cores of their own: " +
                             std::to_string(cores.size()) + " core(s) here)");
    }
  }
  std::vector<comm::RankProcess> ranks;
  for (int rank = 0; rank < spec.world; ++rank) {
    comm::RankProcess process;
    process.argv = {options.executable,
                    kProfileRankCommand,
                    "--transport=" + spec.transport,
                    "--rank=" + std::to_string(rank),
                    "--world=" + std::to_string(spec.world),
                    "--master=127.0.0.1:" + std::to_string(port),
                    "--bytes=" + JoinBytes(bytes),
                    "--samples=" + std::to_string(options.samples),
                    "--exchange_max_bytes=" + std::to_string(options.exchange_max_bytes),
                    "--stream_bytes=" + std::to_string(options.stream_bytes),
                    std::string("--p2p=") + (spec.p2p ? "1" : "0"),
                    std::string("--busy_messages=") + (busy_messages ? "1" : "0"),
                    std::string("--collectives=") + (spec.collectives ? "1" : "0"),
                    "--budget_ms=" + std::to_string(share.count()),
                    "--op_timeout_ms=" + std::to_string(options.op_timeout.count())};
    if (rank == 0) process.argv.push_back("--out=" + out);
    process.environment = {"OFLITE_JOB_TOKEN=" + token};
    process.cpus = rank_cpus[rank];
    ranks.push_back(std::move(process));
  }
  FILE* output = std::fopen(log.c_str(), "w");
  if (output == nullptr) {
    return UnavailableError("cannot write '", log, "': ", std::strerror(errno));
  }
  comm::ProcessGroupOptions group;
  group.grace = milliseconds(2000);
  group.timeout = share + kRunGrace;
  group.output = output;
  group.interrupt = options.interrupt;
  StatusOr<comm::ProcessGroupResult> result = comm::RunProcessGroup(ranks, group);
  std::fclose(output);
  RETURN_IF_ERROR(result.status().WithContext(spec.Name()));
  if (result->interrupted_by != 0) {
    return CancelledError("transport profile interrupted by signal ", result->interrupted_by, " (",
                          spec.Name(), ")");
  }
  failure->clear();
  if (!result->ok) {
    *failure = result->message;
    if (!result->cause.empty()) *failure += ": " + result->cause;
  }
  return ReadResults(out, spec, options.note);
}

// Whether this host can run `transport` at all; only ibverbs is in doubt
// (no library, no device). The error says why.
Status ProbeTransport(const std::string& transport) {
  if (transport != "ibverbs") return Status::OK();
  comm::BuiltinProviderOptions providers;
  providers.job_token = "probe";
  ASSIGN_OR_RETURN(comm::ProviderFactory factory,
                   comm::BuiltinProviders(providers).Find(transport));
  comm::TransportOptions options;
  options.rank = 0;
  options.world_size = 2;
  ASSIGN_OR_RETURN(std::unique_ptr<comm::Transport> opened, factory(options));
  return Status::OK();
}

}  // namespace

BusyMessageCost EstimateBusyMessageCost(const std::vector<BusyPhase>& phases) {
  // Per messaging phase, in us a message: the time other threads took the
  // core from the computing one (its wall time beyond its own CPU time,
  // less the mean of the same in the quiet phases on either side), and the
  // compute it lost inside its CPU time (its units per CPU second against
  // theirs: the caches the message path took).
  std::vector<double> taken, slowed;
  for (size_t phase = 1; phase + 1 < phases.size(); phase += 2) {
    const BusyPhase& b = phases[phase];
    const BusyPhase& before = phases[phase - 1];
    const BusyPhase& after = phases[phase + 1];
    if (b.answered == 0 || !(b.cpu_seconds > 0) || !(before.cpu_seconds > 0) ||
        !(after.cpu_seconds > 0) || !(before.units > 0) || !(after.units > 0)) {
      continue;
    }
    auto off_core = [](const BusyPhase& p) { return p.seconds - p.cpu_seconds; };
    auto per_cpu_second = [](const BusyPhase& p) { return p.units / p.cpu_seconds; };
    const double answered = static_cast<double>(b.answered);
    taken.push_back((off_core(b) - (off_core(before) + off_core(after)) / 2) * 1e6 / answered);
    const double quiet = (per_cpu_second(before) + per_cpu_second(after)) / 2;
    slowed.push_back((1.0 - per_cpu_second(b) / quiet) * b.cpu_seconds * 1e6 / answered);
  }
  BusyMessageCost cost;
  cost.phases = static_cast<int>(taken.size());
  if (taken.empty()) return cost;
  std::sort(taken.begin(), taken.end());
  std::sort(slowed.begin(), slowed.end());
  const size_t n = taken.size();
  cost.taken_us = Median(taken);
  cost.slowed_us = Median(slowed);
  cost.slowed_counted = slowed[n / 4] > 0;
  cost.us = cost.taken_us + (cost.slowed_counted ? cost.slowed_us : 0.0);
  char text[320];
  std::snprintf(text, sizeof(text),
                "%.1f us a message: %.1f off the computing thread (phases' quartiles %.1f..%.1f) "
                "and %.1f of its compute slowed (quartiles %.1f..%.1f, %s), %d phases",
                cost.us, cost.taken_us, taken[n / 4], taken[(3 * n) / 4], cost.slowed_us,
                slowed[n / 4], slowed[(3 * n) / 4],
                cost.slowed_counted ? "counted: its lower quartile is above 0"
                                    : "not counted: within the host's noise",
                cost.phases);
  cost.summary = text;
  return cost;
}

// ------------------------------------------------------------ public API

StatusOr<RuntimeCost> ProfileRuntime(const RuntimeProfileOptions& options) {
  RETURN_IF_ERROR(ValidateRuntimeOptions(options));
  ASSIGN_OR_RETURN(const Plan chain, ChainPlan(options.actors, 1, options.iterations));
  ASSIGN_OR_RETURN(const Plan dense, ChainPlan(options.actors, options.fan_in, options.iterations));
  // Runtime::Create gives the BLAS library a thread count: hand it the one
  // in force, so that profiling the runtime changes nothing for the
  // kernels measured around it.
  const int threads =
      CpuComputeThreadsSetting() > 0 ? CpuComputeThreadsSetting() : CpuComputeThreads();
  const int64_t acts = options.iterations * (options.actors + 1);
  std::vector<double> act_us, message_us, copy;
  for (int sample = 0; sample < options.samples; ++sample) {
    ASSIGN_OR_RETURN(const PlanRun one, RunPlan(chain, threads));
    ASSIGN_OR_RETURN(const PlanRun many, RunPlan(dense, threads));
    ASSIGN_OR_RETURN(const double kernel_us, KernelCallMicroseconds(acts));
    // us per act = act + messages per act * message: the line through the
    // two chains.
    const double extra_messages = many.messages_per_act - one.messages_per_act;
    if (extra_messages <= 0) {
      return InternalError("runtime profile: the chain of fan-in ", options.fan_in,
                           " sent no more messages per act (", many.messages_per_act,
                           ") than the chain of fan-in 1 (", one.messages_per_act, ")");
    }
    const double message = (many.us_per_act - one.us_per_act) / extra_messages;
    message_us.push_back(message);
    act_us.push_back(one.us_per_act - one.messages_per_act * message - kernel_us);
  }
  std::vector<char> from(static_cast<size_t>(options.copy_bytes), 1);
  std::vector<char> to(static_cast<size_t>(options.copy_bytes), 0);
  CopySample(&from, &to);  // warm-up: pages and caches
  for (int sample = 0; sample < options.samples; ++sample) copy.push_back(CopySample(&from, &to));
  // The middle half of the samples should agree; a wide spread means the
  // machine was busy, worth saying beside the figure.
  auto spread_note = [&](const char* name, const std::vector<double>& samples) {
    std::vector<double> sorted = samples;
    std::sort(sorted.begin(), sorted.end());
    const double low = sorted[sorted.size() / 4];
    const double high = sorted[(sorted.size() * 3) / 4];
    const double median = Median(samples);
    if (median > 0 && (high - low) > 0.5 * median) {
      char text[192];
      std::snprintf(text, sizeof(text),
                    "runtime: %s varied widely between samples (%.3g to %.3g around a median "
                    "of %.3g): a busy machine? more samples help",
                    name, low, high, median);
      Note(options.note, text);
    }
  };
  spread_note("act_us", act_us);
  spread_note("message_us", message_us);
  spread_note("copy_gbyte_per_s", copy);
  RuntimeCost cost;
  cost.set_act_us(Median(act_us));
  cost.set_message_us(Median(message_us));
  // The runtime's fixed cost per act is a few tens of nanoseconds next to
  // its cost per message, so noise can put the line's intercept below zero:
  // then the act costs nothing measurable beyond its messages, which is
  // what the floor below says (and the note tells).
  constexpr double kActFloorUs = 0.001;
  if (Positive(cost.message_us()) && cost.act_us() < kActFloorUs) {
    char text[160];
    std::snprintf(text, sizeof(text),
                  "runtime: the cost per act (%.3g us) is below what these samples resolve; "
                  "counted as %.3g us (its messages carry the rest)",
                  cost.act_us(), kActFloorUs);
    Note(options.note, text);
    cost.set_act_us(kActFloorUs);
  }
  cost.set_copy_gbyte_per_s(Median(copy));
  if (!Positive(cost.act_us()) || !Positive(cost.message_us()) ||
      !Positive(cost.copy_gbyte_per_s())) {
    return UnavailableError("runtime profile: a figure is not positive (act ", cost.act_us(),
                            " us, message ", cost.message_us(), " us, copy ",
                            cost.copy_gbyte_per_s(),
                            " GB/s): the machine was too busy to tell them apart; run again");
  }
  return cost;
}

std::vector<int64_t> DefaultProfileBytes() {
  std::vector<int64_t> bytes;
  for (int64_t size = 4 << 10; size <= (64 << 20); size *= 4) bytes.push_back(size);
  return bytes;
}

std::vector<CollectiveAlgorithm> ProfiledAlgorithms(int ranks) {
  std::vector<CollectiveAlgorithm> algorithms = {
      COLLECTIVE_RING_ALL_REDUCE, COLLECTIVE_RING_REDUCE_SCATTER, COLLECTIVE_RING_ALL_GATHER,
      COLLECTIVE_EXCHANGE_ALL_REDUCE};
  if (ranks >= 4 && IsPowerOfTwo(ranks)) algorithms.push_back(COLLECTIVE_DOUBLING_ALL_REDUCE);
  if (ranks >= 3) algorithms.push_back(COLLECTIVE_SCATTER_GATHER_ALL_REDUCE);
  return algorithms;
}

Status ValidateTransportProfileOptions(const TransportProfileOptions& options) {
  static const std::set<std::string> kTransports = {"tcp", "shm", "ibverbs"};
  if (options.transports.empty()) return InvalidArgumentError("transports: none given");
  std::set<std::string> seen;
  for (const std::string& transport : options.transports) {
    if (!kTransports.count(transport)) {
      return InvalidArgumentError("transports: unknown transport '", transport,
                                  "' (tcp, shm or ibverbs)");
    }
    if (!seen.insert(transport).second) {
      return InvalidArgumentError("transports: '", transport, "' given twice");
    }
  }
  if (options.ranks.empty()) return InvalidArgumentError("ranks: none given");
  for (int ranks : options.ranks) {
    if (ranks < 2) {
      return InvalidArgumentError("ranks: ", ranks,
                                  " is below 2 (a collective needs 2 or more processes)");
    }
    if (ranks > 64) {
      return InvalidArgumentError("ranks: ", ranks, " is above 64 (processes on one host)");
    }
  }
  if (options.bytes.empty()) return InvalidArgumentError("bytes: none given");
  for (int64_t bytes : options.bytes) {
    if (bytes < 4 || bytes > (int64_t{1} << 30) || bytes % 4 != 0) {
      return InvalidArgumentError("bytes: ", bytes,
                                  " is not a multiple of 4 (float32 elements) in [4, 1 GiB]");
    }
  }
  if (options.samples < 1 || options.samples > 1000) {
    return InvalidArgumentError("samples: ", options.samples, " is outside [1, 1000]");
  }
  if (options.exchange_max_bytes < 0) {
    return InvalidArgumentError("exchange_max_bytes: ", options.exchange_max_bytes,
                                " is negative (0: no bound)");
  }
  if (options.stream_bytes < 4096 || options.stream_bytes > (int64_t{1} << 30)) {
    return InvalidArgumentError("stream_bytes: ", options.stream_bytes,
                                " is outside [4 KiB, 1 GiB]");
  }
  if (options.budget.count() <= 0) {
    return InvalidArgumentError("budget: ", options.budget.count(), " ms is not positive");
  }
  if (options.op_timeout.count() <= 0) {
    return InvalidArgumentError("op_timeout: ", options.op_timeout.count(), " ms is not positive");
  }
  if (options.executable.empty()) return InvalidArgumentError("executable: empty");
  return Status::OK();
}

StatusOr<std::vector<TransportCost>> ProfileTransports(const TransportProfileOptions& options) {
  RETURN_IF_ERROR(ValidateTransportProfileOptions(options));
  const auto start = Clock::now();
  std::vector<int> worlds = options.ranks;
  std::sort(worlds.begin(), worlds.end());
  worlds.erase(std::unique(worlds.begin(), worlds.end()), worlds.end());
  const bool has_two = worlds.front() == 2;

  std::vector<std::string> transports;
  for (const std::string& transport : options.transports) {
    Status usable = ProbeTransport(transport);
    if (usable.ok()) {
      transports.push_back(transport);
    } else {
      Note(options.note,
           transport + ": skipped, no usable device here (" + usable.ToString() + ")");
    }
  }
  // The runs, transport by transport; the 2-rank one also measures the
  // latency and the stream (a run of its own when 2 ranks is not asked).
  std::vector<RunSpec> runs;
  for (const std::string& transport : transports) {
    if (!has_two) runs.push_back({transport, 2, true, false});
    for (int world : worlds) runs.push_back({transport, world, world == 2, true});
  }
  TempDirectory directory;
  RETURN_IF_ERROR(directory.Create("oflite-profile"));

  std::map<std::string, RunFigures> by_transport;
  std::vector<std::string> failures;
  // Each run gets the remaining budget in proportion to its weight; what a
  // run leaves unused goes to the ones after it.
  constexpr milliseconds kSmallestShare{1500};
  double weight_left = 0;
  for (const RunSpec& spec : runs) weight_left += spec.Weight();
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunSpec& spec = runs[i];
    const auto left =
        options.budget - std::chrono::duration_cast<milliseconds>(Clock::now() - start);
    const milliseconds share(static_cast<int64_t>(left.count() * spec.Weight() / weight_left));
    weight_left -= spec.Weight();
    if (share < kSmallestShare) {
      Note(options.note, spec.Name() + ": not profiled, the time budget (" +
                             std::to_string(options.budget.count() / 1000) +
                             " s) is spent; give more or fewer sizes and rank counts");
      continue;
    }
    std::string failure;
    ASSIGN_OR_RETURN(RunFigures figures, RunGroup(options, spec, share, directory.path(),
                                                  static_cast<int>(i), &failure));
    // A run that failed before writing anything (a port taken between
    // FreePort and the rendezvous, a transport that failed to connect) is
    // tried once more when the budget allows.
    if (!failure.empty() && figures.lines == 0 && Clock::now() - start + share < options.budget) {
      Note(options.note, spec.Name() + ": failed (" + failure + "); trying once more");
      ASSIGN_OR_RETURN(figures, RunGroup(options, spec, share, directory.path(),
                                         static_cast<int>(i) + 1000, &failure));
    }
    if (!failure.empty()) {
      Note(options.note,
           spec.Name() + ": failed, its remaining points are missing (" + failure + ")");
      failures.push_back(spec.Name() + ": " + failure);
    }
    RunFigures& total = by_transport[spec.transport];
    if (spec.p2p) {
      total.latency_us = figures.latency_us;
      total.gbyte_per_s = figures.gbyte_per_s;
      total.cpu_ns_per_byte = figures.cpu_ns_per_byte;
      total.busy_message_us = figures.busy_message_us;
    }
    total.points.insert(total.points.end(), figures.points.begin(), figures.points.end());
  }

  std::vector<TransportCost> costs;
  for (const std::string& transport : transports) {
    const RunFigures& figures = by_transport[transport];
    TransportCost cost;
    cost.set_name(transport);
    cost.set_latency_us(figures.latency_us);
    cost.set_gbyte_per_s(figures.gbyte_per_s);
    cost.set_cpu_ns_per_byte(figures.cpu_ns_per_byte);
    cost.set_busy_message_us(figures.busy_message_us);
    // Said only of a transport that is kept (one left out gets one note).
    std::vector<std::string> missing;
    if (figures.latency_us <= 0) missing.push_back(transport + ": latency not measured");
    if (figures.gbyte_per_s <= 0) missing.push_back(transport + ": stream throughput not measured");
    for (int world : worlds) {
      for (CollectiveAlgorithm algorithm : ProfiledAlgorithms(world)) {
        std::vector<Point> points;
        for (const Point& point : figures.points) {
          if (point.world == world && point.algorithm == algorithm) points.push_back(point);
        }
        if (points.empty()) {
          missing.push_back(transport + ", " + std::to_string(world) + " ranks: no point of " +
                            AlgorithmName(algorithm));
          continue;
        }
        std::sort(points.begin(), points.end(),
                  [](const Point& a, const Point& b) { return a.bytes < b.bytes; });
        CollectiveCurve* curve = cost.add_collective();
        curve->set_algorithm(algorithm);
        curve->set_ranks(world);
        for (const Point& point : points) {
          CurvePoint* added = curve->add_point();
          added->set_bytes(point.bytes);
          added->set_us(point.us);
        }
      }
    }
    if (cost.latency_us() <= 0 && cost.gbyte_per_s() <= 0 && cost.collective_size() == 0) {
      Note(options.note, transport + ": left out, no figure measured");
      continue;
    }
    for (const std::string& text : missing) Note(options.note, text);
    costs.push_back(std::move(cost));
  }
  if (costs.empty()) {
    std::string why;
    for (const std::string& failure : failures) why += (why.empty() ? "" : "; ") + failure;
    return UnavailableError("transport profile: no transport gave a figure",
                            why.empty() ? std::string() : " (" + why + ")");
  }
  return costs;
}

int RunTransportProfileRank(int argc, char** argv) {
  StatusOr<RankConfig> config = ParseRankFlags(argc, argv);
  if (!config.ok()) {
    std::fprintf(stderr, "oflite %s: %s\n", kProfileRankCommand, config.status().message().c_str());
    return cli::kExitBadInput;
  }
  Status status = RunRank(*config);
  if (!status.ok()) {
    std::fprintf(stderr, "oflite %s: %s, rank %d of %d: %s\n", kProfileRankCommand,
                 config->transport.c_str(), config->rank, config->world, status.ToString().c_str());
    return cli::kExitFailure;
  }
  return cli::kExitOk;
}

}  // namespace profile
}  // namespace oflite
