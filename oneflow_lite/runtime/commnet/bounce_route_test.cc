// Dynamic-shape registers across machines through bounce buffers
// (CommNetRoute over comm::BounceStreams), on the TCP provider (real
// sockets) and on the ibverbs provider over the verbs emulator, two CommNets
// in one process:
//  * route level, with hand-built plans: payloads of 0 bytes, 1 element,
//    odd sizes and larger than a bounce buffer (chunked) arrive intact with
//    their actual shapes, in order with end-of-data, and the counters show
//    one copy and only the valid bytes moved;
//  * runtime level: a compiled two-machine pipeline whose cross-machine
//    registers are switched to CM_BOUNCE_BUFFER trains like one machine, and
//    every byte moved through bounce buffers, none through message frames.
#include <cmath>
#include <cstring>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>

#include <unistd.h>

#include <gtest/gtest.h>

#include "oneflow_lite/comm/ibverbs/emulated_transport.h"
#include "oneflow_lite/comm/socket_util.h"
#include "oneflow_lite/common/id.h"
#include "oneflow_lite/compiler/compiler.h"
#include "oneflow_lite/testing/test_jobs.h"
#include "oneflow_lite/runtime/commnet/commnet_actors.h"
#include "oneflow_lite/runtime/commnet/commnet_route.h"
#include "oneflow_lite/runtime/memory_zones.h"
#include "oneflow_lite/runtime/regst.h"
#include "oneflow_lite/runtime/runtime.h"
#include "oneflow_lite/runtime/testing/test_fixtures.h"

namespace oflite {
namespace {

using std::chrono::milliseconds;
constexpr milliseconds kTimeout{20000};

std::string FreeMaster() {
  int port = 0;
  auto fd = comm::ListenTcp("127.0.0.1", &port);
  CHECK(fd.ok());
  ::close(*fd);
  return "127.0.0.1:" + std::to_string(port);
}

// "tcp" or "ibverbs-emulated" (one emulated fabric shared by both ranks).
comm::ProviderFactory ProviderFor(const std::string& name) {
  if (name == "tcp") return nullptr;
  return comm::ibverbs::EmulatedIbverbsCreator();
}

std::vector<std::unique_ptr<comm::CommNet>> StartNets(const std::string& provider,
                                                      const std::string& token) {
  const std::string master = FreeMaster();
  comm::ProviderFactory factory = ProviderFor(provider);
  std::vector<std::unique_ptr<comm::CommNet>> nets(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      comm::CommNetOptions options;
      options.rank = rank;
      options.world_size = 2;
      options.master = master;
      options.job_token = token;
      options.connect_timeout = kTimeout;
      options.provider = factory;
      auto net = comm::CommNet::Start(options);
      if (net.ok()) nets[rank] = std::move(*net);
      else LOG(ERROR) << "rank " << rank << ": " << net.status();
    });
  }
  for (auto& thread : threads) thread.join();
  return nets;
}

// ------------------------------------------------------------- route level

int64_t TaskOn(int64_t machine, int64_t index) {
  return (machine << kMachineShift) | (int64_t{3} << kStreamShift) | index;
}

constexpr int64_t kSourceDesc = 7, kCopyDesc = 8;
constexpr int64_t kMaxFloats = 301, kMaxInts = 4;

// A register of two dynamic blobs (up to 301 floats, up to 4 int32s) in the
// host zone of `machine`.
RegstDescProto DynamicDesc(int64_t id, int64_t producer, int64_t consumer, int64_t machine,
                           int32_t copies, CrossMachineStrategy strategy) {
  RegstDescProto desc;
  desc.set_regst_desc_id(id);
  desc.set_name("out");
  desc.set_producer_task_id(producer);
  desc.add_consumer_task_id(consumer);
  desc.set_regst_num(copies);
  desc.mutable_zone()->set_machine_id(machine);
  desc.mutable_zone()->set_type(ZONE_HOST);
  desc.set_is_dynamic(true);
  desc.set_cross_machine_strategy(strategy);
  auto add_blob = [&](const std::string& lbn, int64_t count, DataType dtype, int64_t offset) {
    BlobInRegst* blob = desc.add_blob();
    blob->set_lbn(lbn);
    blob->mutable_desc()->mutable_shape()->add_dim(count);
    blob->mutable_desc()->set_dtype(dtype);
    blob->mutable_desc()->set_is_dynamic(true);
    blob->set_offset(offset);
    blob->set_bytes(count * 4);
  };
  add_blob("x/out", kMaxFloats, DT_FLOAT, 0);
  add_blob("n/out", kMaxInts, DT_INT32, 1216);  // 64-byte aligned after 1204
  desc.set_bytes_per_regst(1280);
  for (int32_t i = 0; i < copies; ++i) desc.add_mem_offset(i * 1280);
  return desc;
}

void AddHostBlock(MachinePlan* plan, const RegstDescProto& desc) {
  MemBlockProto* block = plan->add_mem_block();
  *block->mutable_zone() = desc.zone();
  block->set_size(desc.bytes_per_regst() * desc.regst_num());
}

// Machine 0: producer P of register 7 (4 copies); machine 1: the commnet
// task C pulling it into register 8 (1 copy).
struct RoutePlans {
  RoutePlans() {
    const int64_t consumer_of_copy = TaskOn(1, 3);
    plans[0].set_machine_id(0);
    TaskProto* p = plans[0].add_task();
    p->set_task_id(producer);
    p->set_name("producer");
    p->set_type(TASK_COMPUTE);
    *p->add_produced() = DynamicDesc(kSourceDesc, producer, commnet, 0, 4, CM_BOUNCE_BUFFER);
    AddHostBlock(&plans[0], p->produced(0));
    plans[1].set_machine_id(1);
    TaskProto* c = plans[1].add_task();
    c->set_task_id(commnet);
    c->set_name("commnet");
    c->set_type(TASK_COMMNET);
    c->mutable_commnet()->set_src_machine_id(0);
    c->mutable_commnet()->set_src_task_id(producer);
    c->mutable_commnet()->set_src_regst_desc_id(kSourceDesc);
    *c->mutable_commnet()->mutable_src_regst() = p->produced(0);
    *c->add_produced() = DynamicDesc(kCopyDesc, commnet, consumer_of_copy, 1, 1, CM_NONE);
    AddHostBlock(&plans[1], c->produced(0));
  }
  const int64_t producer = TaskOn(0, 1);
  const int64_t commnet = TaskOn(1, 2);
  MachinePlan plans[2];
};

// Writes a payload of `floats` floats and `ints` ints (values from `seed`)
// into `regst`, setting the blobs' actual shapes.
void Fill(Regst* regst, int64_t floats, int64_t ints, int seed) {
  regst->blobs[0].set_shape(Shape({floats}));
  regst->blobs[1].set_shape(Shape({ints}));
  float* x = static_cast<float*>(regst->blobs[0].raw());
  int32_t* n = static_cast<int32_t*>(regst->blobs[1].raw());
  for (int64_t i = 0; i < kMaxFloats; ++i) x[i] = i < floats ? seed * 1000.0f + i : -1.0f;
  for (int64_t i = 0; i < kMaxInts; ++i) n[i] = i < ints ? seed * 10 + static_cast<int32_t>(i) : -1;
}

class BounceRouteTest : public ::testing::TestWithParam<std::string> {};

TEST_P(BounceRouteTest, DynamicRegistersArriveIntactInOrderWithOneCopy) {
  // Before the nets: the progress threads may still be in DeliverLocal when
  // the test body ends, so the buses and inbox must outlive them.
  LocalMessageBus bus0(0), bus1(1);
  Inbox inbox1;
  auto nets = StartNets(GetParam(), "bounce-route-test");
  ASSERT_TRUE(nets[0] != nullptr && nets[1] != nullptr);
  RoutePlans setup;
  std::unique_ptr<MemoryZones> zones[2];
  std::unique_ptr<RegstStore> stores[2];
  for (int m = 0; m < 2; ++m) {
    auto zone = MemoryZones::Create(setup.plans[m]);
    ASSERT_TRUE(zone.ok()) << zone.status();
    zones[m] = std::move(*zone);
    auto store = RegstStore::Create(setup.plans[m], *zones[m]);
    ASSERT_TRUE(store.ok()) << store.status();
    stores[m] = std::move(*store);
  }
  std::mutex errors_mutex;
  std::vector<Status> errors;
  auto on_error = [&](const Status& s) {
    std::lock_guard<std::mutex> lock(errors_mutex);
    errors.push_back(s);
  };
  comm::BounceStreamOptions bounce;
  bounce.buffer_size = 256;  // a full payload (1220 bytes) takes 5 chunks
  bounce.buffer_count = 2;
  bus1.RegisterInbox(StreamKeyOfTaskId(setup.commnet), &inbox1);
  CommNetRoute route0(nets[0].get(), on_error, bounce);
  CommNetRoute route1(nets[1].get(), on_error, bounce);
  bus0.SetRemoteRoute(&route0);
  route0.Attach(&bus0, stores[0].get());
  route1.Attach(&bus1, stores[1].get());
  ASSERT_TRUE(route0.RegisterStaticRegisters(setup.plans[0]).ok());
  ASSERT_TRUE(route1.RegisterStaticRegisters(setup.plans[1]).ok());

  // (floats, ints): nothing, one float, a payload larger than a buffer with
  // every element, an odd one; all in flight before the consumer pulls.
  const std::vector<std::pair<int64_t, int64_t>> pieces = {{0, 0}, {1, 0}, {301, 4}, {150, 3}};
  uint64_t valid_bytes = 0;
  for (size_t piece = 0; piece < pieces.size(); ++piece) {
    Regst* regst = stores[0]->Get(kSourceDesc, static_cast<int32_t>(piece));
    Fill(regst, pieces[piece].first, pieces[piece].second, static_cast<int>(piece));
    valid_bytes += 4 * (pieces[piece].first + pieces[piece].second);
    ASSERT_TRUE(bus0.Send(ActorMessage::Produced(setup.producer, setup.commnet, kSourceDesc,
                                                 static_cast<int32_t>(piece), piece))
                    .ok());
  }
  ASSERT_TRUE(bus0.Send(ActorMessage::EndOfData(setup.producer, setup.commnet, kSourceDesc)).ok());

  std::vector<ActorMessage> arrived;
  for (size_t i = 0; i <= pieces.size(); ++i) {
    std::optional<ActorMessage> message = inbox1.Pop(kTimeout);
    ASSERT_TRUE(message.has_value()) << "message " << i;
    arrived.push_back(*message);
  }
  EXPECT_EQ(arrived.back().kind, MessageKind::kEndOfData);  // after every produced

  const RegstDescProto& src = setup.plans[1].task(0).commnet().src_regst();
  Regst* into = stores[1]->Get(kCopyDesc, 0);
  for (size_t piece = 0; piece < pieces.size(); ++piece) {
    const ActorMessage& produced = arrived[piece];
    ASSERT_EQ(produced.kind, MessageKind::kProduced);
    ASSERT_EQ(produced.piece_id, static_cast<int64_t>(piece));
    std::memset(into->base, 0x7f, 1280);
    ASSERT_TRUE(route1.StartRead(produced, src, into).ok());
    std::optional<ActorMessage> done = inbox1.Pop(kTimeout);
    ASSERT_TRUE(done.has_value());
    ASSERT_EQ(done->kind, MessageKind::kReadDone);
    ASSERT_TRUE(route1.TakeReadStatus(*done).ok());
    const auto [floats, ints] = pieces[piece];
    EXPECT_EQ(into->blobs[0].shape(), Shape({floats}));
    EXPECT_EQ(into->blobs[1].shape(), Shape({ints}));
    const float* x = static_cast<const float*>(into->blobs[0].raw());
    const int32_t* n = static_cast<const int32_t*>(into->blobs[1].raw());
    for (int64_t i = 0; i < floats; ++i) ASSERT_EQ(x[i], piece * 1000.0f + i) << i;
    for (int64_t i = 0; i < ints; ++i) ASSERT_EQ(n[i], static_cast<int32_t>(piece * 10 + i));
    // Only the valid bytes moved: what lies beyond is untouched.
    if (floats < kMaxFloats) {
      EXPECT_EQ(reinterpret_cast<const uint8_t*>(x)[4 * floats], 0x7f);
    }
    if (ints < kMaxInts) {
      EXPECT_EQ(reinterpret_cast<const uint8_t*>(n)[4 * ints], 0x7f);
    }
  }
  const comm::CommStats& sent = *nets[0]->stats();
  const comm::CommStats& received = *nets[1]->stats();
  std::cout << "[" << GetParam() << "] producer: " << sent.Summary() << "\n["
            << GetParam() << "] consumer: " << received.Summary() << std::endl;
  EXPECT_EQ(valid_bytes, 0u + 4 + 1220 + 612);
  EXPECT_EQ(sent.bounce.bytes_copied, valid_bytes);    // one copy, into the bounce buffers
  EXPECT_EQ(received.bounce.bytes_moved, valid_bytes); // READs of the valid bytes only
  EXPECT_EQ(received.bounce.bytes_copied, 0u);         // READ straight into the register
  EXPECT_EQ(sent.bounce.transfers, 0u + 1 + 5 + 3);    // chunks of 256 bytes
  EXPECT_EQ(sent.bounce.registrations, 1u);            // the stream's buffers, once
  EXPECT_EQ(received.bounce.registrations, 1u);        // the commnet task's register
  EXPECT_EQ(route0.bounce_payloads_sent(), 4);
  EXPECT_EQ(route0.bytes_sent(), 0);  // nothing pushed inside message frames
  EXPECT_EQ(sent.pool.bytes_moved, 0u);
  EXPECT_EQ(sent.zero_copy.bytes_moved + received.zero_copy.bytes_moved, 0u);
  EXPECT_EQ(route1.bounce_streams()->queued_chunks(), 0u);
  EXPECT_EQ(route1.StartRead(arrived[0], src, into).code(), StatusCode::kFailedPrecondition)
      << "a produced message is pulled once";
  std::lock_guard<std::mutex> lock(errors_mutex);
  EXPECT_TRUE(errors.empty()) << errors.front();
  route0.Detach();
  route1.Detach();
}

// The producer's rank goes away while the consumer pulls a chunked payload
// whose chunks wait for buffers: the pull fails (no hang), naming the stream.
TEST_P(BounceRouteTest, PullFailsWhenTheProducerGoes) {
  LocalMessageBus bus0(0), bus1(1);  // outlive the nets' progress threads
  Inbox inbox1;
  auto nets = StartNets(GetParam(), "bounce-route-failure");
  ASSERT_TRUE(nets[0] != nullptr && nets[1] != nullptr);
  RoutePlans setup;
  auto zones0 = MemoryZones::Create(setup.plans[0]);
  auto zones1 = MemoryZones::Create(setup.plans[1]);
  ASSERT_TRUE(zones0.ok() && zones1.ok());
  auto store0 = RegstStore::Create(setup.plans[0], **zones0);
  auto store1 = RegstStore::Create(setup.plans[1], **zones1);
  ASSERT_TRUE(store0.ok() && store1.ok());
  comm::BounceStreamOptions bounce;
  bounce.buffer_size = 64;
  bounce.buffer_count = 1;
  bus1.RegisterInbox(StreamKeyOfTaskId(setup.commnet), &inbox1);
  auto route0 = std::make_unique<CommNetRoute>(nets[0].get(), [](const Status&) {}, bounce);
  CommNetRoute route1(nets[1].get(), [](const Status&) {}, bounce);
  bus0.SetRemoteRoute(route0.get());
  route0->Attach(&bus0, store0->get());
  route1.Attach(&bus1, store1->get());
  ASSERT_TRUE(route1.RegisterStaticRegisters(setup.plans[1]).ok());
  Fill((*store0)->Get(kSourceDesc, 0), kMaxFloats, kMaxInts, 1);
  ASSERT_TRUE(bus0.Send(ActorMessage::Produced(setup.producer, setup.commnet, kSourceDesc, 0, 0))
                  .ok());
  std::optional<ActorMessage> produced = inbox1.Pop(kTimeout);
  ASSERT_TRUE(produced.has_value());
  // Machine 0 goes before the consumer asks for more than the first chunk.
  route0->Detach();
  route0.reset();
  nets[0].reset();
  const RegstDescProto& src = setup.plans[1].task(0).commnet().src_regst();
  Status started = route1.StartRead(*produced, src, (*store1)->Get(kCopyDesc, 0));
  if (started.ok()) {
    std::optional<ActorMessage> done = inbox1.Pop(milliseconds(10000));
    ASSERT_TRUE(done.has_value()) << "the pull must end when its producer is gone";
    Status status = route1.TakeReadStatus(*done);
    EXPECT_FALSE(status.ok());
    EXPECT_NE(status.ToString().find("bounce"), std::string::npos) << status;
  } else {
    EXPECT_NE(started.ToString().find("bounce pull"), std::string::npos) << started;
  }
  route1.Detach();
}

// ----------------------------------------------------------- runtime level

using Recorder = testing::MetricsRecorder;

compiler::MlpSpec PipelineSpec(const std::string& second_stage) {
  compiler::MlpSpec spec;
  spec.batch = 16;
  spec.features = 24;
  spec.hidden = {12};
  spec.classes = 4;
  spec.placement = "0:cpu:0";
  spec.iterations = 8;
  spec.stages = {"0:cpu:0", second_stage};
  return spec;
}

// Switches every cross-machine register of `plan` to bounce buffers (what
// the compiler picks for a dynamic-shape register); returns how many bytes
// all commnet tasks pull per piece (their source registers' full sizes).
int64_t SwitchToBounce(Plan* plan) {
  int64_t per_piece = 0;
  for (MachinePlan& machine : *plan->mutable_machine()) {
    for (TaskProto& task : *machine.mutable_task()) {
      for (RegstDescProto& desc : *task.mutable_produced()) {
        if (desc.cross_machine_strategy() == CM_STATIC_ZERO_COPY) {
          desc.set_cross_machine_strategy(CM_BOUNCE_BUFFER);
        }
      }
      if (task.type() != TASK_COMMNET) continue;
      RegstDescProto* src = task.mutable_commnet()->mutable_src_regst();
      if (src->cross_machine_strategy() == CM_STATIC_ZERO_COPY) {
        src->set_cross_machine_strategy(CM_BOUNCE_BUFFER);
      }
      for (const BlobInRegst& blob : src->blob()) per_piece += TensorDesc(blob.desc()).ByteSize();
    }
  }
  return per_piece;
}

struct RankResult {
  Status status;
  uint64_t bounce_moved = 0, bounce_copied = 0, zero_copy_moved = 0;
  int64_t frame_bytes = 0;
};

RankResult RunRank(const Plan& plan, int rank, const std::string& master,
                   const comm::ProviderFactory& provider, Recorder* recorder) {
  RankResult result;
  auto fail = [&](const Status& status) {
    result.status = status.WithContext("rank " + std::to_string(rank));
    return result;
  };
  comm::CommNetOptions net_options;
  net_options.rank = rank;
  net_options.world_size = 2;
  net_options.master = master;
  net_options.job_token = "bounce-pipeline";
  net_options.connect_timeout = kTimeout;
  net_options.provider = provider;
  auto net = comm::CommNet::Start(net_options);
  if (!net.ok()) return fail(net.status());
  std::mutex errors_mutex;
  Status route_error;
  comm::BounceStreamOptions bounce;
  bounce.buffer_size = 256;  // the 768-byte activations travel in 3 chunks
  CommNetRoute route(net->get(), [&](const Status& s) {
    std::lock_guard<std::mutex> lock(errors_mutex);
    if (route_error.ok()) route_error = s;
  }, bounce);
  ActorRegistry registry = MultiMachineActorRegistry(&route);
  RuntimeOptions options;
  options.machine_id = rank;
  options.metrics = recorder;
  options.watchdog_timeout = kTimeout;
  options.remote_route = &route;
  options.registry = &registry;
  auto runtime = Runtime::Create(plan, options);
  if (!runtime.ok()) return fail(runtime.status());
  route.Attach((*runtime)->bus(), (*runtime)->regsts());
  auto machine = FindMachinePlan(plan, rank);
  Status status = machine.ok() ? route.RegisterStaticRegisters(**machine) : machine.status();
  if (status.ok()) status = (*net)->control()->Barrier("actors-ready", kTimeout);
  if (status.ok()) status = route.FetchStaticKeys(**machine, kTimeout);
  if (status.ok()) status = (*runtime)->Run();
  if (status.ok()) status = (*net)->control()->Barrier("run-done", kTimeout);
  route.Detach();
  runtime->reset();
  {
    std::lock_guard<std::mutex> lock(errors_mutex);
    if (status.ok()) status = route_error;
  }
  if (!status.ok()) return fail(status);
  const comm::CommStats& stats = *(*net)->stats();
  std::cout << "[rank " << rank << "] " << stats.Summary() << std::endl;
  result.bounce_moved = stats.bounce.bytes_moved;
  result.bounce_copied = stats.bounce.bytes_copied;
  result.zero_copy_moved = stats.zero_copy.bytes_moved;
  result.frame_bytes = route.bytes_sent();
  return result;
}

TEST_P(BounceRouteTest, PipelineWithBounceRegistersEqualsOneMachine) {
  StatusOr<Job> one_job = compiler::BuildMlpJob(PipelineSpec("0:cpu:1"));
  ASSERT_TRUE(one_job.ok()) << one_job.status();
  StatusOr<Plan> one = compiler::Compile(*one_job, compiler::MakeCluster(1, 2));
  ASSERT_TRUE(one.ok()) << one.status();
  Recorder reference;
  {
    RuntimeOptions options;
    options.metrics = &reference;
    auto runtime = Runtime::Create(*one, options);
    ASSERT_TRUE(runtime.ok()) << runtime.status();
    ASSERT_TRUE((*runtime)->Run().ok());
  }
  StatusOr<Job> two_job = compiler::BuildMlpJob(PipelineSpec("1:cpu:0"));
  ASSERT_TRUE(two_job.ok());
  StatusOr<Plan> two = compiler::Compile(*two_job, compiler::MakeCluster(2, 1));
  ASSERT_TRUE(two.ok()) << two.status();
  const int64_t per_piece = SwitchToBounce(&*two);
  ASSERT_GT(per_piece, 0);

  const std::string master = FreeMaster();
  comm::ProviderFactory provider = ProviderFor(GetParam());
  Recorder recorders[2];
  RankResult results[2];
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      results[rank] = RunRank(*two, rank, master, provider, &recorders[rank]);
    });
  }
  for (auto& thread : threads) thread.join();
  ASSERT_TRUE(results[0].status.ok()) << results[0].status;
  ASSERT_TRUE(results[1].status.ok()) << results[1].status;

  std::map<int64_t, double> want = reference.Values("loss");
  std::map<int64_t, double> got = recorders[0].Values("loss");
  for (const auto& [iteration, value] : recorders[1].Values("loss")) got[iteration] = value;
  ASSERT_EQ(want.size(), 8u);
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [iteration, value] : want) {
    EXPECT_NEAR(got[iteration], value, 1e-5 * std::fabs(value)) << "iteration " << iteration;
  }
  // Every cross-machine byte went through bounce buffers, copied once.
  const uint64_t expected = static_cast<uint64_t>(per_piece) * 8;
  EXPECT_EQ(results[0].bounce_moved + results[1].bounce_moved, expected);
  EXPECT_EQ(results[0].bounce_copied + results[1].bounce_copied, expected);
  EXPECT_EQ(results[0].zero_copy_moved + results[1].zero_copy_moved, 0u);
  EXPECT_EQ(results[0].frame_bytes + results[1].frame_bytes, 0);
}

INSTANTIATE_TEST_SUITE_P(Providers, BounceRouteTest,
                         ::testing::Values("tcp", "ibverbs-emulated"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param == "tcp" ? std::string("Tcp")
                                                      : std::string("EmulatedIbverbs");
                         });

}  // namespace
}  // namespace oflite
