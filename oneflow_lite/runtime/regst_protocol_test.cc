#include "oneflow_lite/runtime/regst_protocol.h"

#include <gtest/gtest.h>

#include "oneflow_lite/runtime/memory_zones.h"
#include "oneflow_lite/runtime/regst.h"
#include "oneflow_lite/runtime/testing/test_plan_builder.h"

namespace oflite {
namespace {

// source --out(2 copies)--> reader, then mutator (in place).
class RegstProtocolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::TestPlanBuilder builder;
    source_ = builder.AddTask("source", TASK_SOURCE);
    reader_ = builder.AddTask("reader", TASK_COMPUTE);
    mutator_ = builder.AddTask("mutator", TASK_COMPUTE);
    out_ = builder.AddRegst(source_, "out", {TensorDesc(Shape{3}, DT_FLOAT)}, 2);
    builder.Consume(reader_, out_);
    builder.Consume(mutator_, out_);
    builder.MarkMutator(out_, mutator_);
    plan_ = builder.Build(4);
    Load();
  }
  void Load() {
    zones_ = MemoryZones::Create(plan_.machine(0)).value();
    store_ = RegstStore::Create(plan_.machine(0), *zones_).value();
    env_.regsts = store_.get();
  }
  const TaskProto& Task(int64_t id) const {
    for (const TaskProto& task : plan_.machine(0).task()) {
      if (task.task_id() == id) return task;
    }
    ADD_FAILURE() << "no task " << id;
    return plan_.machine(0).task(0);
  }

  Plan plan_;
  int64_t source_ = 0, reader_ = 0, mutator_ = 0, out_ = 0;
  std::unique_ptr<MemoryZones> zones_;
  std::unique_ptr<RegstStore> store_;
  ActorEnv env_;
};

TEST_F(RegstProtocolTest, ReadersThenMutatorsThenEndOfDataOnce) {
  RegstProtocol protocol(Task(source_), env_);
  ASSERT_TRUE(protocol.Init().ok());
  EXPECT_FALSE(protocol.has_local_inputs());
  ActContext context;
  protocol.AcquireOutputs(7, &context);
  ASSERT_EQ(context.produced.size(), 1u);
  EXPECT_EQ(context.produced.at(out_)->piece_id, 7);
  std::vector<ActorMessage> send;
  protocol.CompleteAct(context, &send);
  EXPECT_EQ(protocol.act_count(), 1);
  const int32_t index = context.produced.at(out_)->index;
  ASSERT_EQ(send, std::vector<ActorMessage>{
                      ActorMessage::Produced(source_, reader_, out_, index, 7)});
  send.clear();
  // The reader returns it: now the mutator gets it.
  ASSERT_TRUE(protocol.OnReturned(ActorMessage::Returned(reader_, source_, out_, index, 7), &send)
                  .ok());
  ASSERT_EQ(send, std::vector<ActorMessage>{
                      ActorMessage::Produced(source_, mutator_, out_, index, 7)});
  send.clear();
  protocol.EndOfDataIfDrained(/*input_done=*/false, &send);
  EXPECT_TRUE(send.empty());
  protocol.EndOfDataIfDrained(/*input_done=*/true, &send);
  EXPECT_EQ(send.size(), 2u);  // to the reader and the mutator
  protocol.EndOfDataIfDrained(/*input_done=*/true, &send);
  EXPECT_EQ(send.size(), 2u);  // once
  EXPECT_FALSE(protocol.Done());  // the mutator still holds the copy
  EXPECT_TRUE(protocol.OutputsFree());  // the other of the 2 copies
  ASSERT_TRUE(
      protocol.OnReturned(ActorMessage::Returned(mutator_, source_, out_, index, 7), &send).ok());
  EXPECT_TRUE(protocol.Done());
  // A return nobody owed is an error.
  EXPECT_EQ(protocol.OnReturned(ActorMessage::Returned(mutator_, source_, out_, index, 7), &send)
                .code(),
            StatusCode::kInvalidArgument);
}

TEST_F(RegstProtocolTest, ConsumerReturnsWhatItReadAndSkipsRemoteInputs) {
  RegstProtocol protocol(Task(reader_), env_);
  ASSERT_TRUE(protocol.Init().ok());
  EXPECT_TRUE(protocol.Consumes(out_));
  EXPECT_FALSE(protocol.InputsReadable());
  ASSERT_TRUE(protocol.OnProduced(ActorMessage::Produced(source_, reader_, out_, 1, 3)).ok());
  store_->Get(out_, 1)->piece_id = 3;
  ASSERT_TRUE(protocol.InputsReadable());
  ActContext context;
  ASSERT_TRUE(protocol.ReadInputs(&context).ok());
  EXPECT_EQ(context.piece_id, 3);
  std::vector<ActorMessage> send;
  protocol.CompleteAct(context, &send);
  ASSERT_EQ(send, std::vector<ActorMessage>{ActorMessage::Returned(reader_, source_, out_, 1, 3)});
  ASSERT_TRUE(protocol.OnEndOfData(ActorMessage::EndOfData(source_, reader_, out_)).ok());
  send.clear();
  protocol.EndOfDataIfDrained(true, &send);
  EXPECT_TRUE(send.empty());  // the reader produces nothing
  EXPECT_TRUE(protocol.Done());

  // A remote input gets no slot: the actor handles it.
  RegstProtocol remote(Task(reader_), env_);
  ASSERT_TRUE(remote.Init({out_}).ok());
  EXPECT_FALSE(remote.Consumes(out_));
  EXPECT_FALSE(remote.has_local_inputs());
  EXPECT_EQ(remote.OnProduced(ActorMessage::Produced(source_, reader_, out_, 0, 0)).code(),
            StatusCode::kInvalidArgument);
}

TEST_F(RegstProtocolTest, MutatorThatIsNotAConsumerIsRefusedNamingTheTask) {
  plan_.mutable_machine(0)->mutable_task(0)->mutable_produced(0)->add_mutator_task_id(12345);
  Load();
  RegstProtocol protocol(Task(source_), env_);
  Status status = protocol.Init();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("'source'"), std::string::npos) << status;
  EXPECT_NE(status.message().find("not one of its consumers"), std::string::npos) << status;
}

TEST_F(RegstProtocolTest, UnknownConsumedRegisterIsRefusedNamingTheTask) {
  TaskProto task = Task(reader_);
  task.mutable_consumed(0)->set_regst_desc_id(0, 999);
  RegstProtocol protocol(task, env_);
  Status status = protocol.Init();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("'reader' consumes register 999"), std::string::npos)
      << status;
}

}  // namespace
}  // namespace oflite
