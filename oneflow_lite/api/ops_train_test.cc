// Graph's op builders beyond the basic ones (graph_math_ops.cc,
// graph_nn_ops.cc) and the BatchNorm layer (layers.h) inside a whole
// training job: every such op on the path to the loss, autodiff through each
// gradient rule, and a few iterations of the reference executor (finite,
// decreasing loss); bad arguments are errors naming the layer.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "oneflow_lite/api/data_sources.h"
#include "oneflow_lite/api/graph.h"
#include "oneflow_lite/api/layers.h"
#include "oneflow_lite/reference/reference_executor.h"

namespace oflite {
namespace {

StatusOr<Job> EveryNewOp() {
  Graph g("more_ops", /*seed=*/3);
  Batch data = RandomBatch(&g, Shape{12, 2, 3, 3}, 4);
  Tensor x = BatchNorm(&g, data.image);
  x = g.AdaptiveAvgPool2d(x, 2, 2);  // [12, 2, 2, 2]
  x = g.Flatten(x);                  // [12, 8]
  Tensor h = Dense(&g, x, 6);
  Tensor positive = g.ScalarAdd(g.Abs(h), 0.5);
  Tensor mixed = g.Add(g.Log(positive), g.Sqrt(positive));
  mixed = g.Add(mixed, g.Rsqrt(positive));
  mixed = g.Add(mixed, g.ScalarMul(g.Exp(g.Clamp(h, -2.0, 2.0)), 0.1));
  mixed = g.Add(mixed, g.Neg(g.LeakyRelu(h, 0.1)));
  mixed = g.Maximum(g.Silu(mixed), g.Minimum(h, g.ScalarMul(h, 0.5)));
  Tensor table = g.Variable("table", Shape{4, 6}, {.initializer = Initializer::Normal(0, 0.5)});
  mixed = g.Add(mixed, g.Gather(table, data.label));
  Tensor onehot = g.OneHot(data.label, 6);
  mixed = g.Where(g.Cast(onehot, DT_INT32), mixed, g.ScalarMul(mixed, 0.5));
  Tensor logits = Dense(&g, mixed, 4);
  Tensor targets = g.OneHot(data.label, 4);
  Tensor loss = g.Add(g.SparseSoftmaxCrossEntropy(logits, data.label),
                      g.BinaryCrossEntropyWithLogits(logits, targets));
  g.Minimize(loss, Sgd{.learning_rate = 0.05});
  g.SetIterations(12);
  return g.Build();
}

TEST(OpsTrainTest, EveryBuilderTrainsThroughTheReferenceExecutor) {
  StatusOr<Job> job = EveryNewOp();
  ASSERT_TRUE(job.ok()) << job.status();
  std::set<std::string> types;
  for (const OpConf& op : job->op()) types.insert(op.op_type());
  for (const char* type :
       {"batch_norm", "batch_norm_grad", "adaptive_avg_pool2d_grad", "log", "sqrt", "rsqrt", "exp",
        "abs_grad", "clamp_grad", "neg", "leaky_relu_grad", "silu_grad", "maximum_grad",
        "minimum_grad", "gather_grad", "where", "binary_cross_entropy_with_logits_grad"}) {
    EXPECT_TRUE(types.count(type)) << "no " << type << " in the job";
  }
  StatusOr<ReferenceTrainResult> result = TrainReference(*job, 12);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->losses.size(), 12u);
  for (double loss : result->losses) EXPECT_TRUE(std::isfinite(loss)) << loss;
  // The same batch every iteration would be needed for a monotone curve;
  // over 12 random batches the mean of the last 4 is below the first 4.
  double first = 0, last = 0;
  for (int i = 0; i < 4; ++i) {
    first += result->losses[i];
    last += result->losses[8 + i];
  }
  EXPECT_LT(last, first);
  // The running statistics moved off their initial zeros.
  const HostTensor& moving_mean = result->variables.at("batch_norm-moving_mean");
  double norm = 0;
  for (int64_t i = 0; i < moving_mean.elem_count(); ++i)
    norm += std::abs(moving_mean.data<float>()[i]);
  EXPECT_GT(norm, 0.0);
}

TEST(OpsTrainTest, BadArgumentsNameTheLayer) {
  {
    Graph g("bad", 1);
    Batch data = RandomBatch(&g, Shape{4, 3}, 2);
    g.Clamp(data.image, std::nullopt, std::nullopt);
    EXPECT_NE(g.status().message().find("needs a float attribute 'min' or 'max'"),
              std::string::npos)
        << g.status();
  }
  {
    Graph g("bad", 1);
    Batch data = RandomBatch(&g, Shape{4, 3}, 2);
    BatchNormOptions options;
    options.gamma = g.Variable("g", Shape{2});
    BatchNorm(&g, data.image, options);
    EXPECT_NE(g.status().message().find("batch_norm 'batch_norm': shared gamma"), std::string::npos)
        << g.status();
  }
  {
    Graph g("bad", 1);
    Batch data = RandomBatch(&g, Shape{4}, 2);
    BatchNorm(&g, data.image);
    EXPECT_NE(g.status().message().find("want x [N, C, ...]"), std::string::npos) << g.status();
  }
}

}  // namespace
}  // namespace oflite
