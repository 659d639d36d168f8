// Bad input: every error names the op, blob, field or file at fault.
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "oneflow_lite/compiler/compiler.h"
#include "oneflow_lite/testing/test_jobs.h"
#include "oneflow_lite/ops/op_builder.h"
#include "oneflow_lite/ops/sbp.h"

namespace oflite {
namespace compiler {
namespace {

OpConf Variable(const std::string& name, const Shape& shape) {
  return OpConfBuilder("variable", name)
      .Output("out")
      .Attr("shape", shape)
      .Attr("dtype", DT_FLOAT)
      .Attr("initializer", "constant")
      .Attr("value", 0.0)
      .Build();
}

OpConf Relu(const std::string& name, const std::string& x) {
  return OpConfBuilder("relu", name).Input("x", x).Output("y").Build();
}

Job JobOf(std::vector<OpConf> ops) {
  Job job;
  job.mutable_conf()->set_name("bad");
  for (OpConf& op : ops) *job.add_op() = std::move(op);
  return job;
}

void ExpectError(const Job& job, const ClusterProto& cluster,
                 const std::vector<std::string>& needles) {
  StatusOr<Plan> plan = Compile(job, cluster);
  ASSERT_FALSE(plan.ok()) << "compiled a bad job";
  for (const std::string& needle : needles) {
    EXPECT_NE(plan.status().message().find(needle), std::string::npos)
        << "'" << needle << "' not in: " << plan.status();
  }
}

TEST(CompilerErrorsTest, CyclicJob) {
  Job job = JobOf({Relu("a", "b/y_0"), Relu("b", "a/y_0")});
  ExpectError(job, MakeCluster(1, 1), {"cyclic job", "op 'a'", "op 'b'"});
}

TEST(CompilerErrorsTest, CycleThroughControlEdge) {
  OpConf a = Relu("a", "w/out_0");
  OpConf b = Relu("b", "a/y_0");
  a.add_control_input("b");
  Job job = JobOf({Variable("w", Shape{2, 2}), a, b});
  ExpectError(job, MakeCluster(1, 1), {"cyclic job", "op 'b' -> op 'a' -> op 'b'"});
}

TEST(CompilerErrorsTest, UnknownOpType) {
  OpConf op = OpConfBuilder("frobnicate", "mystery").Output("out").Build();
  ExpectError(JobOf({op}), MakeCluster(1, 1), {"mystery", "unknown op type 'frobnicate'"});
}

TEST(CompilerErrorsTest, DanglingBlob) {
  Job job = JobOf({Variable("w", Shape{2, 2}), Relu("act", "ghost/out_0")});
  ExpectError(job, MakeCluster(1, 1), {"op 'act'", "ghost/out_0", "dangling"});
}

TEST(CompilerErrorsTest, ShapeMismatchInInference) {
  OpConf mm = OpConfBuilder("matmul", "mm").Input("a", "a/out_0").Input("b", "b/out_0")
                  .Output("out").Build();
  Job job = JobOf({Variable("a", Shape{4, 3}), Variable("b", Shape{5, 2}), mm});
  ExpectError(job, MakeCluster(1, 1), {"op 'mm'", "matmul"});
}

TEST(CompilerErrorsTest, ShapeMismatchWithJobBlobs) {
  Job job = JobOf({Variable("w", Shape{2, 3}), Relu("act", "w/out_0")});
  LogicalBlobDesc* b = job.add_blob();
  b->set_lbn("act/y_0");
  *b->mutable_desc() = TensorDesc(Shape{3, 2}, DT_FLOAT).ToProto();
  ExpectError(job, MakeCluster(1, 1), {"op 'act'", "act/y_0", "shape mismatch"});
}

TEST(CompilerErrorsTest, BatchNotDivisibleByDevices) {
  // Data parallel over 3 machines with batch 64: the source cannot split its
  // batch evenly, and the error says so in those words.
  MlpSpec spec;
  spec.batch = 64;
  spec.placement = "0-2:cpu:0";
  StatusOr<Job> job = BuildMlpJob(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  ExpectError(*job, MakeCluster(3, 1),
              {"impossible SBP request", "batch 64 is not divisible by 3 devices", "63 or 66"});
  spec.batch = 2;  // fewer samples than devices: the only example is upward
  job = BuildMlpJob(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  ExpectError(*job, MakeCluster(3, 1), {"batch 2 is not divisible by 3 devices", "e.g. 3)"});
}

TEST(CompilerErrorsTest, ImpossibleSbpHint) {
  // A [3, 2] tensor cannot be split 4 ways along axis 0.
  OpConf w = Variable("w", Shape{3, 2});
  *w.mutable_placement() = *ParsePlacementText("0:cpu:0-3");
  *w.add_output_sbp_hint()->add_sbp() = SplitSbp(0);
  ExpectError(JobOf({w, Relu("act", "w/out_0")}), MakeCluster(1, 4),
              {"op 'w'", "impossible SBP request", "0:cpu:0-3", "hinted S(0)"});
  // A split axis past the rank.
  OpConf v = Variable("v", Shape{4, 4});
  *v.mutable_placement() = *ParsePlacementText("0:cpu:0-1");
  *v.add_output_sbp_hint()->add_sbp() = SplitSbp(5);
  ExpectError(JobOf({v}), MakeCluster(1, 2), {"op 'v'", "S(5)"});
}

TEST(CompilerErrorsTest, HintCountMismatch) {
  OpConf w = Variable("w", Shape{4, 4});
  *w.add_output_sbp_hint()->add_sbp() = BroadcastSbp();
  *w.add_output_sbp_hint()->add_sbp() = BroadcastSbp();
  ExpectError(JobOf({w}), MakeCluster(1, 1), {"op 'w'", "2 output SBP hints for 1 outputs"});
}

TEST(CompilerErrorsTest, PlacementOutsideCluster) {
  OpConf w = Variable("w", Shape{4, 4});
  *w.mutable_placement() = *ParsePlacementText("0-1:cpu:0");
  ExpectError(JobOf({w}), MakeCluster(1, 1), {"op 'w'", "machine 1", "1 machine(s)"});
  *w.mutable_placement() = *ParsePlacementText("0:cuda:0");
  ExpectError(JobOf({w}), MakeCluster(1, 1), {"op 'w'", "cuda:0 on machine 0"});
}

TEST(CompilerErrorsTest, DuplicateOpName) {
  ExpectError(JobOf({Variable("w", Shape{2}), Variable("w", Shape{2})}), MakeCluster(1, 1),
              {"op 'w'", "used by two ops"});
}

TEST(CompilerErrorsTest, UnknownMetricBlob) {
  Job job = JobOf({Variable("w", Shape{2})});
  job.mutable_conf()->mutable_train()->set_loss_lbn("nothing/out_0");
  ExpectError(job, MakeCluster(1, 1), {"metric 'loss'", "nothing/out_0"});
}

TEST(CompilerErrorsTest, EmptyJobAndBadCluster) {
  ExpectError(Job(), MakeCluster(1, 1), {"has no op"});
  ClusterProto cluster = MakeCluster(2, 1);
  cluster.mutable_machine(1)->set_id(0);
  ExpectError(JobOf({Variable("w", Shape{2})}), cluster, {"machine[1].id"});
}

TEST(CompilerErrorsTest, CorruptClusterFile) {
  const std::string dir = testing::TempDir();
  const std::string path = dir + "/corrupt.pbtxt";
  std::ofstream(path) << "machine { id: 0 cpu_devices: 2 }\nmachine { id: 1 cpu_devices: }\n";
  StatusOr<ClusterProto> cluster = LoadCluster(path);
  ASSERT_FALSE(cluster.ok());
  EXPECT_NE(cluster.status().message().find("corrupt.pbtxt"), std::string::npos)
      << cluster.status();
  const std::string gaps = dir + "/gaps.pbtxt";
  std::ofstream(gaps) << "machine { id: 0 cpu_devices: 1 }\nmachine { id: 2 cpu_devices: 1 }\n";
  cluster = LoadCluster(gaps);
  ASSERT_FALSE(cluster.ok());
  EXPECT_NE(cluster.status().message().find("gaps.pbtxt"), std::string::npos) << cluster.status();
  EXPECT_NE(cluster.status().message().find("machine[1].id"), std::string::npos)
      << cluster.status();
  EXPECT_FALSE(LoadCluster(dir + "/missing.pbtxt").ok());
}

}  // namespace
}  // namespace compiler
}  // namespace oflite
