#include "oneflow_lite/api/job_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "oneflow_lite/ops/op_builder.h"

namespace oflite {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

OpConf Variable(const std::string& name) {
  return OpConfBuilder("variable", name).Output("out").Attr("shape", Shape{2}).Build();
}

OpConf Relu(const std::string& name, const std::string& input) {
  return OpConfBuilder("relu", name).Input("x", input).Output("y").Build();
}

TEST(JobUtilTest, TopologicalOrderKeepsJobOrderWhenValid) {
  Job job;
  *job.add_op() = Variable("a");
  *job.add_op() = Relu("b", "a/out_0");
  *job.add_op() = Relu("c", "b/y_0");
  StatusOr<std::vector<int>> order = TopologicalOrder(job);
  ASSERT_TRUE(order.ok()) << order.status();
  EXPECT_THAT(*order, ElementsAre(0, 1, 2));
}

TEST(JobUtilTest, TopologicalOrderFollowsDataAndControlEdges) {
  Job job;
  *job.add_op() = Relu("c", "b/y_0");    // 0: needs b
  *job.add_op() = Relu("b", "a/out_0");  // 1: needs a
  *job.add_op() = Variable("a");         // 2
  OpConf late = Variable("late");
  late.add_control_input("c");  // 3: after c
  *job.add_op() = late;
  *job.add_op() = Variable("free");  // 4
  StatusOr<std::vector<int>> order = TopologicalOrder(job);
  ASSERT_TRUE(order.ok()) << order.status();
  EXPECT_THAT(*order, ElementsAre(2, 1, 0, 3, 4));
}

TEST(JobUtilTest, TopologicalOrderErrors) {
  Job missing;
  *missing.add_op() = Relu("b", "nowhere/out_0");
  StatusOr<std::vector<int>> order = TopologicalOrder(missing);
  ASSERT_FALSE(order.ok());
  EXPECT_THAT(order.status().message(), HasSubstr("op 'b' (relu)"));
  EXPECT_THAT(order.status().message(), HasSubstr("'nowhere/out_0'"));

  Job cycle;
  *cycle.add_op() = Relu("x", "y/y_0");
  *cycle.add_op() = Relu("y", "x/y_0");
  order = TopologicalOrder(cycle);
  ASSERT_FALSE(order.ok());
  EXPECT_THAT(order.status().message(), HasSubstr("cycle"));

  Job duplicate;
  *duplicate.add_op() = Variable("v");
  *duplicate.add_op() = Variable("v");
  EXPECT_THAT(TopologicalOrder(duplicate).status().message(), HasSubstr("two ops are named 'v'"));

  Job bad_control;
  OpConf op = Variable("v");
  op.add_control_input("ghost");
  *bad_control.add_op() = op;
  EXPECT_THAT(TopologicalOrder(bad_control).status().message(), HasSubstr("'ghost'"));
}

TEST(JobUtilTest, ConsumersAreSortedAndUnique) {
  Job job;
  *job.add_op() = Variable("a");
  *job.add_op() = Relu("z", "a/out_0");
  *job.add_op() = OpConfBuilder("add", "m")
                      .Input("in", std::vector<std::string>{"a/out_0", "a/out_0"})
                      .Output("out")
                      .Build();
  EXPECT_THAT(ConsumersOf(job, "a/out_0"), ElementsAre("m", "z"));
  EXPECT_TRUE(ConsumersOf(job, "z/y_0").empty());
}

TEST(JobUtilTest, UniqueNames) {
  std::set<std::string> used;
  EXPECT_EQ(MakeUniqueName("dense", &used), "dense");
  EXPECT_EQ(MakeUniqueName("dense", &used), "dense_1");
  EXPECT_EQ(MakeUniqueName("dense", &used), "dense_2");
  used.insert("relu_1");
  EXPECT_EQ(MakeUniqueName("relu", &used), "relu");
  EXPECT_EQ(MakeUniqueName("relu", &used), "relu_2");
}

TEST(JobUtilTest, BlobDescsRoundTripSorted) {
  Job job;
  BlobDescMap descs;
  descs["b/out_0"] = TensorDesc(Shape{2}, DT_FLOAT);
  descs["a/out_0"] = TensorDesc(Shape{3, 1}, DT_INT32);
  SetBlobDescs(descs, &job);
  ASSERT_EQ(job.blob_size(), 2);
  EXPECT_EQ(job.blob(0).lbn(), "a/out_0");
  EXPECT_EQ(BlobDescsOf(job), descs);
}

}  // namespace
}  // namespace oflite
