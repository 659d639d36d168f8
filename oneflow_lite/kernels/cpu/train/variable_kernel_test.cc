// Variable initialization: values, determinism, statistics and sharding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "oneflow_lite/data/counter_rng.h"
#include "oneflow_lite/device/device_context.h"
#include "oneflow_lite/kernels/kernel.h"
#include "oneflow_lite/ops/op_builder.h"
#include "oneflow_lite/testing/op_runner.h"

namespace oflite {
namespace {

OpConf Variable(const Shape& shape, const std::string& initializer, int64_t seed = 7) {
  OpConf op = OpConfBuilder("variable", "w")
                  .Output("out")
                  .Attr("shape", shape)
                  .Attr("dtype", DT_DOUBLE)
                  .Attr("initializer", initializer)
                  .Build();
  if (seed >= 0) SetIntAttr(&op, "seed", seed);
  return op;
}

std::vector<double> RunVariable(const OpConf& op, int64_t job_seed = 0) {
  TensorMap env;
  RunOpOptions options;
  options.seed = job_seed;
  StatusOr<TensorMap> out = RunOp(op, &env, options);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? out->at("w/out_0").ToVector<double>() : std::vector<double>{};
}

// Runs the kernel as device `parallel_id` of `parallel_num` whose plan gives
// it the physical output shape `physical`.
StatusOr<HostTensor> RunShard(const OpConf& op, const Shape& physical, int64_t parallel_id,
                              int64_t parallel_num) {
  static const CpuDeviceContext device;
  KernelInitContext init;
  init.op = &op;
  init.outputs["out"] = {TensorDesc(physical, DT_DOUBLE)};
  init.parallel_id = parallel_id;
  init.parallel_num = parallel_num;
  init.device = &device;
  ASSIGN_OR_RETURN(std::unique_ptr<Kernel> kernel,
                   CreateAndInitKernel(init, DEVICE_CPU, DT_DOUBLE));
  HostTensor out(TensorDesc(physical, DT_DOUBLE));
  Blob blob = out.AsBlob();
  KernelContext ctx(op, &device, 0);
  ctx.BindOutput("out", &blob);
  RETURN_IF_ERROR(kernel->Forward(&ctx));
  return out;
}

void MeanAndStd(const std::vector<double>& v, double* mean, double* std) {
  double sum = 0, sum_sq = 0;
  for (double x : v) sum += x;
  *mean = sum / v.size();
  for (double x : v) sum_sq += (x - *mean) * (x - *mean);
  *std = std::sqrt(sum_sq / v.size());
}

TEST(VariableKernelTest, Constant) {
  OpConf op = Variable(Shape{2, 3}, "constant");
  SetFloatAttr(&op, "value", 0.25);
  EXPECT_EQ(RunVariable(op), std::vector<double>(6, 0.25));
  EXPECT_EQ(RunVariable(Variable(Shape{}, "constant")), std::vector<double>{0.0});
  EXPECT_TRUE(RunVariable(Variable(Shape{0, 3}, "uniform")).empty());
}

TEST(VariableKernelTest, UniformIsAFunctionOfSeedAndIndex) {
  OpConf op = Variable(Shape{1000}, "uniform", 11);
  SetFloatAttr(&op, "low", -2.0);
  SetFloatAttr(&op, "high", 3.0);
  std::vector<double> values = RunVariable(op);
  ASSERT_EQ(values.size(), 1000u);
  for (size_t i = 0; i < values.size(); ++i) {
    ASSERT_EQ(values[i], -2.0 + 5.0 * UniformFromBits(CounterBits(11, i))) << i;
    ASSERT_GE(values[i], -2.0);
    ASSERT_LT(values[i], 3.0);
  }
  double mean, std;
  MeanAndStd(values, &mean, &std);
  EXPECT_NEAR(mean, 0.5, 0.15);
  EXPECT_NEAR(std, 5.0 / std::sqrt(12.0), 0.1);
}

TEST(VariableKernelTest, NormalStatisticsAndDeterminism) {
  OpConf op = Variable(Shape{100, 100}, "normal", 3);
  SetFloatAttr(&op, "mean", 1.0);
  SetFloatAttr(&op, "std", 2.0);
  std::vector<double> first = RunVariable(op);
  double mean, std;
  MeanAndStd(first, &mean, &std);
  EXPECT_NEAR(mean, 1.0, 0.06);
  EXPECT_NEAR(std, 2.0, 0.06);
  EXPECT_EQ(first, RunVariable(op));  // bit-identical on a rerun
  SetIntAttr(&op, "seed", 4);
  EXPECT_NE(first, RunVariable(op));
}

TEST(VariableKernelTest, GlorotAndHeScales) {
  double mean, std;
  MeanAndStd(RunVariable(Variable(Shape{200, 50}, "kaiming_normal")), &mean, &std);
  EXPECT_NEAR(std, std::sqrt(2.0 / 200.0), 0.004);  // fan_in = 200 ([in, out])
  MeanAndStd(RunVariable(Variable(Shape{8, 4, 5, 5}, "xavier_normal")), &mean, &std);
  EXPECT_NEAR(std, std::sqrt(2.0 / (100.0 + 200.0)), 0.006);  // fans 4*25, 8*25
  std::vector<double> he_uniform = RunVariable(Variable(Shape{6, 10}, "kaiming_uniform"));
  const double bound = std::sqrt(2.0) * std::sqrt(3.0 / 6.0);
  for (double x : he_uniform) {
    ASSERT_LE(std::fabs(x), bound);
  }
}

TEST(VariableKernelTest, SeedFromJobSeedWhenAttrAbsent) {
  OpConf op = Variable(Shape{4}, "normal", /*seed=*/-1);
  EXPECT_EQ(RunVariable(op, 1), RunVariable(op, 1));
  EXPECT_NE(RunVariable(op, 1), RunVariable(op, 2));
}

// The shards of S(axis) over `parallel_num` devices, reassembled, must equal
// the 1-device tensor.
void ExpectShardsReassemble(const Shape& logical, int64_t axis, int64_t parallel_num,
                            bool set_axis_attr) {
  OpConf op = Variable(logical, "normal", 5);
  if (set_axis_attr) SetIntAttr(&op, "split_axis", axis);
  std::vector<double> full = RunVariable(op);
  const int64_t length = logical.dim(axis);
  const int64_t outer = logical.Count(0, axis);
  const int64_t inner = logical.Count(axis + 1);
  std::vector<double> assembled(full.size(), std::nan(""));
  int64_t begin = 0;
  for (int64_t k = 0; k < parallel_num; ++k) {
    Shape physical = logical;
    const int64_t size = length / parallel_num + (k < length % parallel_num ? 1 : 0);
    physical.mutable_dim(axis) = size;
    StatusOr<HostTensor> shard = RunShard(op, physical, k, parallel_num);
    ASSERT_TRUE(shard.ok()) << shard.status();
    const double* data = shard->data<double>();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t a = 0; a < size; ++a) {
        std::memcpy(&assembled[(o * length + begin + a) * inner], &data[(o * size + a) * inner],
                    inner * sizeof(double));
      }
    }
    begin += size;
  }
  EXPECT_EQ(assembled, full) << logical << " S(" << axis << ") over " << parallel_num;
}

TEST(VariableKernelTest, ShardsAreSlicesOfTheLogicalTensor) {
  ExpectShardsReassemble(Shape{5, 3}, 0, 2, true);
  ExpectShardsReassemble(Shape{4, 7}, 1, 3, true);
  ExpectShardsReassemble(Shape{2, 3, 5}, 1, 2, false);  // axis found from shapes
  ExpectShardsReassemble(Shape{6}, 0, 4, false);
  ExpectShardsReassemble(Shape{3, 2}, 0, 1, true);
}

TEST(VariableKernelTest, WrongShardShapeIsAnErrorNamingTheDevice) {
  OpConf op = Variable(Shape{5, 3}, "normal");
  SetIntAttr(&op, "split_axis", 0);
  StatusOr<HostTensor> shard = RunShard(op, Shape{2, 3}, 0, 2);  // device 0 holds 3 rows
  ASSERT_FALSE(shard.ok());
  EXPECT_NE(shard.status().message().find("parallel_id 0 of 2"), std::string::npos)
      << shard.status();
  OpConf no_axis = Variable(Shape{4, 4}, "normal");
  StatusOr<HostTensor> two_axes = RunShard(no_axis, Shape{2, 2}, 0, 2);
  ASSERT_FALSE(two_axes.ok());
  EXPECT_NE(two_axes.status().message().find("not a one-axis shard"), std::string::npos);
}

}  // namespace
}  // namespace oflite
