// Graph::Add with numpy broadcasting and Graph::SparseSoftmaxCrossEntropy
// over [B, T, V] logits, as a GPT uses them: a [B, T, C] model with a
// position table [T, C] and a bias [C] added by broadcasting, trained on
// [B, T] targets through the reference executor (autodiff through
// broadcast_add's and the cross-entropy's gradient rules).
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "oneflow_lite/api/data_sources.h"
#include "oneflow_lite/api/graph.h"
#include "oneflow_lite/reference/reference_executor.h"

namespace oflite {
namespace {

TEST(GraphSequenceTest, AddEmitsAddForEqualShapesAndBroadcastAddOtherwise) {
  Graph g("add_kinds", /*seed=*/1);
  Tensor a = g.Variable("a", Shape{2, 3, 4});
  Tensor b = g.Variable("b", Shape{3, 4});
  Tensor c = g.Variable("c", Shape{2, 3, 4});
  Tensor broadcast = g.Add(a, b);
  Tensor same = g.Add(a, c);
  Tensor reversed = g.Add(b, a);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(broadcast.shape(), Shape({2, 3, 4}));
  EXPECT_EQ(reversed.shape(), Shape({2, 3, 4}));
  std::map<std::string, std::string> type_of_output;
  g.AddOutput("broadcast", broadcast);
  g.AddOutput("same", same);
  StatusOr<Job> job = g.Build();
  ASSERT_TRUE(job.ok()) << job.status();
  for (const OpConf& op : job->op()) type_of_output[op.name()] = op.op_type();
  EXPECT_EQ(type_of_output[broadcast.lbn.substr(0, broadcast.lbn.find('/'))], "broadcast_add");
  EXPECT_EQ(type_of_output[same.lbn.substr(0, same.lbn.find('/'))], "add");

  Graph bad("add_mismatch", 1);
  Tensor x = bad.Variable("x", Shape{2, 3});
  Tensor y = bad.Variable("y", Shape{4});
  EXPECT_FALSE(bad.Add(x, y).valid());
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("broadcast_add"), std::string::npos) << bad.status();
}

StatusOr<Job> SequenceModel() {
  constexpr int64_t kBatch = 6, kTime = 5, kChannels = 4;
  Graph g("sequence", /*seed=*/7);
  Batch data = RandomBatch(&g, Shape{kBatch, kTime}, 2);
  // Targets in {0, 1}: the feature rounded (U[-0.5, 0.5) + 0 or 1, plus 0.5).
  Tensor targets = g.Cast(g.ScalarAdd(data.image, 0.5), DT_INT32);  // [B, T]
  Tensor scale =
      g.Variable("scale", Shape{1, kChannels}, {.initializer = Initializer::Normal(0, 1)});
  Tensor positions = g.Variable("positions", Shape{kTime, kChannels},
                                {.initializer = Initializer::Normal(0, 0.1)});
  Tensor bias = g.Variable("bias", Shape{kChannels});
  Tensor h = g.Mul(g.Reshape(data.image, Shape{kBatch, kTime, 1}), scale);  // [B, T, C]
  h = g.Add(h, positions);                                                  // + [T, C]
  Tensor logits = g.Add(h, bias);                                           // + [C]
  Tensor loss = g.SparseSoftmaxCrossEntropy(logits, targets);
  if (loss.rank() != 0) return InternalError("loss is not a scalar: ", loss.desc.ToString());
  g.Minimize(loss, Sgd{.learning_rate = 0.5});
  g.SetIterations(8);
  return g.Build();
}

TEST(GraphSequenceTest, CrossEntropyOverSequencesIsAScalarMeanAndTrains) {
  StatusOr<Job> job = SequenceModel();
  ASSERT_TRUE(job.ok()) << job.status();
  std::map<std::string, int> count;
  for (const OpConf& op : job->op()) ++count[op.op_type()];
  EXPECT_EQ(count["broadcast_add"], 2);
  EXPECT_EQ(count["sparse_softmax_cross_entropy_grad"], 1);
  EXPECT_GE(count["reduce_sum"], 2);  // the gradients of positions and bias
  StatusOr<ReferenceTrainResult> result = TrainReference(*job, 8);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->losses.size(), 8u);
  for (double loss : result->losses) EXPECT_TRUE(std::isfinite(loss)) << loss;
  EXPECT_LT(result->losses.back(), result->losses.front());
}

}  // namespace
}  // namespace oflite
