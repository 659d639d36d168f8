#include "oneflow_lite/api/autodiff.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "oneflow_lite/api/data_sources.h"
#include "oneflow_lite/api/graph.h"
#include "oneflow_lite/api/job_util.h"
#include "oneflow_lite/api/layers.h"
#include "oneflow_lite/common/placement_text.h"
#include "oneflow_lite/ops/op_builder.h"
#include "oneflow_lite/reference/reference_executor.h"

namespace oflite {
namespace {

using ::testing::HasSubstr;

// Test-only ops: an identity whose gradient rule declares a gradient of the
// wrong shape, and one without a gradient rule.
Status InferSame(InferContext* ctx) {
  *ctx->Output("y") = ctx->Input("x");
  return Status::OK();
}
REGISTER_OP("autodiff_test_bad_grad")
    .Input("x")
    .Output("y")
    .Infer(InferSame)
    .Grad([](GradContext* ctx) -> Status {
      ASSIGN_OR_RETURN(std::string name, ctx->AddOp(OpConfBuilder("reduce_sum", "")
                                                        .Input("x", ctx->OutputGradLbn("y"))
                                                        .Output("y")
                                                        .Attr("keepdims", false)
                                                        .Build()));
      ctx->SetInputGrad("x", 0, OutputLbn(name, "y"));
      return Status::OK();
    });
REGISTER_OP("autodiff_test_no_rule").Input("x").Output("y").Infer(InferSame);

// Double-precision value of scalar metric "loss" after one forward pass.
double LossAt(const Job& forward, const VariableMap& values) {
  auto executor = ReferenceExecutor::Create(forward);
  CHECK_OK(executor.status());
  for (const auto& [name, value] : values) CHECK_OK((*executor)->SetVariable(name, value));
  auto runs = (*executor)->Run(1);
  CHECK_OK(runs.status());
  return runs->at(0).values.at("loss");
}

// Compares autodiff's gradients of every trainable variable with central
// finite differences of the whole forward graph, in float64.
void CheckAgainstFiniteDifferences(const Job& forward) {
  StatusOr<AutodiffResult> autodiff = Autodiff(forward);
  ASSERT_TRUE(autodiff.ok()) << autodiff.status();

  auto initial = ReferenceExecutor::Create(forward);
  ASSERT_TRUE(initial.ok()) << initial.status();
  ASSERT_TRUE((*initial)->Run(0).ok());
  const VariableMap values = (*initial)->Variables();

  auto backward = ReferenceExecutor::Create(autodiff->job);
  ASSERT_TRUE(backward.ok()) << backward.status();
  for (const auto& [name, value] : values) ASSERT_TRUE((*backward)->SetVariable(name, value).ok());
  ASSERT_TRUE((*backward)->Run(1).ok());

  int trainable = 0;
  for (const OpConf& op : forward.op()) trainable += IsTrainableVariable(op);
  ASSERT_EQ(static_cast<int>(autodiff->variable_grads.size()), trainable);
  const double epsilon = 1e-6;
  for (const auto& [name, grad_lbn] : autodiff->variable_grads) {
    StatusOr<const HostTensor*> grad = (*backward)->Fetch(grad_lbn);
    ASSERT_TRUE(grad.ok()) << grad.status();
    ASSERT_EQ((*grad)->desc(), values.at(name).desc()) << name;
    for (int64_t i = 0; i < (*grad)->elem_count(); ++i) {
      VariableMap plus, minus;
      for (const auto& [other, value] : values) {
        plus.emplace(other, value.Clone());
        minus.emplace(other, value.Clone());
      }
      plus.at(name).data<double>()[i] += epsilon;
      minus.at(name).data<double>()[i] -= epsilon;
      const double numeric = (LossAt(forward, plus) - LossAt(forward, minus)) / (2 * epsilon);
      const double analytic = (*grad)->data<double>()[i];
      EXPECT_NEAR(analytic, numeric, 1e-7 + 1e-6 * std::fabs(numeric))
          << "d loss / d " << name << "[" << i << "]";
    }
  }
}

Tensor Parameter(Graph* g, const std::string& name, const Shape& shape) {
  return g->Variable(name, shape, {.initializer = Initializer::Uniform(-1, 1), .dtype = DT_DOUBLE});
}

// Shared weight W (two matmuls), fan-out of h (matmul and mul) and of h2
// (mul, sigmoid, cross entropy), two losses summed.
Job FanOutAndSharedWeightJob() {
  Graph g("fanout", 11);
  Batch data = RandomBatch(&g, Shape{5, 3}, 3, Split(0), DT_DOUBLE);
  Tensor w = Parameter(&g, "w", Shape{3, 3});
  Tensor b = Parameter(&g, "b", Shape{3});
  Tensor h = g.Tanh(g.BiasAdd(g.MatMul(data.image, w), b));
  Tensor h2 = g.MatMul(h, w);
  Tensor y = g.ReduceMean(g.Mul(h2, h));
  Tensor s = g.ReduceMean(g.Sigmoid(h2));
  Tensor ce = g.SparseSoftmaxCrossEntropy(h2, data.label);
  g.Minimize(g.AddN({y, s, ce}), Sgd{});
  StatusOr<Job> job = g.BuildForward();
  CHECK_OK(job.status());
  return *job;
}

TEST(AutodiffTest, FanOutAndSharedWeightsMatchFiniteDifferences) {
  CheckAgainstFiniteDifferences(FanOutAndSharedWeightJob());
}

TEST(AutodiffTest, DenseReluSoftmaxNetworkMatchesFiniteDifferences) {
  Graph g("mlp64", 5);
  Batch data = RandomBatch(&g, Shape{4, 6}, 3, Split(0), DT_DOUBLE);
  Tensor h = g.Relu(Dense(&g, data.image, 5, {.bias_init = Initializer::Constant(0.1)}));
  Tensor logits = Dense(&g, g.Gelu(Dense(&g, h, 4)), 3);
  g.Minimize(g.SparseSoftmaxCrossEntropy(logits, data.label), Sgd{});
  StatusOr<Job> job = g.BuildForward();
  ASSERT_TRUE(job.ok()) << job.status();
  CheckAgainstFiniteDifferences(*job);
}

// Convolution, pooling, layer norm (three outputs, one with a gradient),
// dropout and an embedding branch added to the dense branch.
TEST(AutodiffTest, ConvPoolNormEmbeddingNetworkMatchesFiniteDifferences) {
  Graph g("convnet64", 3);
  Batch data = RandomBatch(&g, Shape{2, 2, 5, 5}, 3, Split(0), DT_DOUBLE);
  Tensor x =
      Conv2d(&g, data.image, 2, 3, {.padding = {1, 1}, .bias_init = Initializer::Constant(0.1)});
  x = AvgPool2d(&g, g.Tanh(x), 2, {.strides = {1, 1}});
  x = MaxPool2d(&g, x, 2);
  x = LayerNorm(&g, g.Flatten(x));
  x = Dropout(&g, x, 0.25);
  Tensor dense = Dense(&g, x, 3);
  Tensor embedded = Embedding(&g, data.label, 3, 3, {.dtype = DT_DOUBLE});
  Tensor logits = g.Add(dense, g.Sigmoid(embedded));
  g.Minimize(g.SparseSoftmaxCrossEntropy(logits, data.label), Sgd{});
  StatusOr<Job> job = g.BuildForward();
  ASSERT_TRUE(job.ok()) << job.status();
  CheckAgainstFiniteDifferences(*job);
}

TEST(AutodiffTest, FanOutGradientsAreSummedOnce) {
  StatusOr<AutodiffResult> result = Autodiff(FanOutAndSharedWeightJob());
  ASSERT_TRUE(result.ok()) << result.status();
  std::set<std::string> sums;
  for (const OpConf& op : result->job.op()) {
    if (op.name().find("-grad_sum") != std::string::npos) {
      EXPECT_EQ(op.op_type(), "add");
      EXPECT_TRUE(op.is_backward());
      sums.insert(op.name());
    }
  }
  // w (two matmuls), h (matmul, mul), h2 (mul, sigmoid, cross entropy).
  EXPECT_EQ(sums, (std::set<std::string>{"w-out_0-grad_sum", "tanh-y_0-grad_sum",
                                         "matmul_1-out_0-grad_sum"}));
  const OpConf* h2_sum = FindOp(result->job, "matmul_1-out_0-grad_sum");
  ASSERT_NE(h2_sum, nullptr);
  EXPECT_EQ(h2_sum->input(0).lbn_size(), 3);
}

// A blob of stage 0 read twice on stage 1 (a residual stream): its two
// gradient parts are summed on stage 1, so that one gradient crosses back;
// a blob read twice on its own stage is summed there as before. The
// gradients still match finite differences.
TEST(AutodiffTest, PartsFromTheNextStageAreSummedThere) {
  Graph g("stages", 7);
  Batch data = RandomBatch(&g, Shape{4, 3}, 3, Split(0), DT_DOUBLE);
  Tensor h, logits;
  {
    auto scope = g.WithPlacement(Placement::Parse("0:cpu:0"));
    h = g.Tanh(g.MatMul(data.image, Parameter(&g, "w0", Shape{3, 3})));
  }
  {
    auto scope = g.WithPlacement(Placement::Parse("0:cpu:1"));
    Tensor r = g.Add(h, g.Sigmoid(g.MatMul(h, Parameter(&g, "w1", Shape{3, 3}))));
    Tensor u = g.Tanh(r);
    logits = g.Add(g.MatMul(u, Parameter(&g, "w2", Shape{3, 3})), g.Sigmoid(u));
    g.Minimize(g.SparseSoftmaxCrossEntropy(logits, data.label), Sgd{});
  }
  StatusOr<Job> job = g.BuildForward();
  ASSERT_TRUE(job.ok()) << job.status();
  StatusOr<AutodiffResult> result = Autodiff(*job);
  ASSERT_TRUE(result.ok()) << result.status();
  const std::string h_op = h.lbn.substr(0, h.lbn.find('/'));
  int sums = 0;
  for (const OpConf& op : result->job.op()) {
    if (op.name().find("-grad_sum") == std::string::npos) continue;
    ++sums;
    ASSERT_TRUE(op.has_placement()) << op.name();
    // h (stage 0, read twice on stage 1) and u (stage 1, read twice there):
    // both summed on stage 1.
    EXPECT_EQ(PlacementToString(op.placement()), "0:cpu:1") << op.name();
  }
  EXPECT_EQ(sums, 2);
  ASSERT_NE(FindOp(result->job, h_op + "-y_0-grad_sum"), nullptr);
  CheckAgainstFiniteDifferences(*job);
}

TEST(AutodiffTest, HandComputedGradient) {
  // loss = mean(x * w) with a fixed x: d loss / d w = x / 4.
  Graph g("hand");
  Tensor x =
      g.Variable("x", Shape{4},
                 {.initializer = Initializer::Constant(3), .dtype = DT_DOUBLE, .trainable = false});
  Tensor w =
      g.Variable("w", Shape{4}, {.initializer = Initializer::Constant(1), .dtype = DT_DOUBLE});
  g.Minimize(g.ReduceMean(g.Mul(x, w)), Sgd{});
  StatusOr<Job> forward = g.BuildForward();
  ASSERT_TRUE(forward.ok()) << forward.status();
  StatusOr<AutodiffResult> result = Autodiff(*forward);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->variable_grads.size(), 1u);  // x is not trainable
  auto executor = ReferenceExecutor::Create(result->job);
  ASSERT_TRUE(executor.ok()) << executor.status();
  ASSERT_TRUE(
      (*executor)->SetVariable("x", HostTensor::FromVector<double>(Shape{4}, {1, 2, 3, 4})).ok());
  ASSERT_TRUE((*executor)->Run(1).ok());
  StatusOr<const HostTensor*> grad = (*executor)->Fetch(result->variable_grads.at("w"));
  ASSERT_TRUE(grad.ok()) << grad.status();
  EXPECT_EQ((*grad)->ToVector<double>(), (std::vector<double>{0.25, 0.5, 0.75, 1.0}));
}

TEST(AutodiffTest, EveryBackwardOpFeedsAVariableGradient) {
  StatusOr<AutodiffResult> result = Autodiff(FanOutAndSharedWeightJob());
  ASSERT_TRUE(result.ok()) << result.status();
  std::set<std::string> needed;
  for (const auto& [name, lbn] : result->variable_grads) needed.insert(lbn);
  for (int i = result->job.op_size() - 1; i >= 0; --i) {
    const OpConf& op = result->job.op(i);
    if (!op.is_backward()) continue;
    bool used = false;
    for (const ArgProto& arg : op.output()) {
      for (const std::string& lbn : arg.lbn()) used = used || needed.count(lbn);
    }
    EXPECT_TRUE(used) << "dead backward op " << op.name();
    for (const ArgProto& arg : op.input()) {
      for (const std::string& lbn : arg.lbn()) needed.insert(lbn);
    }
  }
  // Blob descs cover exactly the ops' outputs.
  std::set<std::string> produced;
  for (const OpConf& op : result->job.op()) {
    for (const ArgProto& arg : op.output()) produced.insert(arg.lbn().begin(), arg.lbn().end());
  }
  std::set<std::string> described;
  for (const LogicalBlobDesc& blob : result->job.blob()) described.insert(blob.lbn());
  EXPECT_EQ(produced, described);
}

TEST(AutodiffTest, OpWithoutRuleOnThePathIsNamed) {
  Graph g("norule");
  Tensor w = g.Variable("w", Shape{3});
  OpConf op =
      OpConfBuilder("autodiff_test_no_rule", "mystery").Input("x", w.lbn).Output("y").Build();
  std::vector<Tensor> y = g.AddOp(op);
  ASSERT_EQ(y.size(), 1u) << g.status();
  g.Minimize(g.ReduceSum(y[0]), Sgd{});
  StatusOr<Job> job = g.Build();
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), StatusCode::kUnimplemented);
  EXPECT_THAT(job.status().message(), HasSubstr("op 'mystery' (autodiff_test_no_rule)"));
  EXPECT_THAT(job.status().message(), HasSubstr("no gradient rule"));
}

TEST(AutodiffTest, GradientOfTheWrongShapeIsRejected) {
  Graph g("badrule");
  Tensor w = g.Variable("w", Shape{3});
  OpConf op = OpConfBuilder("autodiff_test_bad_grad", "liar").Input("x", w.lbn).Output("y").Build();
  std::vector<Tensor> y = g.AddOp(op);
  ASSERT_EQ(y.size(), 1u) << g.status();
  g.Minimize(g.ReduceSum(y[0]), Sgd{});
  StatusOr<Job> job = g.Build();
  ASSERT_FALSE(job.ok());
  EXPECT_THAT(job.status().message(), HasSubstr("op 'liar' (autodiff_test_bad_grad)"));
  EXPECT_THAT(job.status().message(), HasSubstr("float32(3,)"));
}

TEST(AutodiffTest, JobWithoutLossIsRejected) {
  Graph g("noloss");
  g.Variable("w", Shape{3});
  StatusOr<Job> job = g.BuildForward();
  ASSERT_TRUE(job.ok());
  StatusOr<AutodiffResult> result = Autodiff(*job);
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(), HasSubstr("has no loss"));
}

// HintGradSbp on a tensor read twice: the backward op reading its summed
// gradient (the matmul's gradient of its input a) gets the hint in that
// input slot, its other slot empty; no other op is hinted.
TEST(AutodiffTest, GradientSbpHintBecomesAnInputHintOfItsReaders) {
  Graph g("gradhint");
  auto scope = g.WithPlacement(Placement::Parse("0:cpu:0-1"));
  Tensor w = g.Variable("w", Shape{3, 4});
  Tensor v = g.Variable("v", Shape{4, 2});
  Tensor h = g.Tanh(g.MatMul(w, g.Variable("u", Shape{4, 4})));
  g.HintGradSbp(h, Broadcast());
  Tensor loss = g.ReduceSum(g.Add(g.MatMul(h, v), g.MatMul(h, v)));
  g.Minimize(loss, Sgd{});
  StatusOr<Job> job = g.Build();
  ASSERT_TRUE(job.ok()) << job.status();
  std::string grad_of_h;
  int hinted = 0;
  const std::string h_op = h.lbn.substr(0, h.lbn.find('/'));
  for (const OpConf& op : job->op()) {
    if (op.name().rfind(h_op + "-", 0) == 0 && op.name().find("grad_sum") != std::string::npos) {
      grad_of_h = OutputLbn(op.name(), "out");
    }
  }
  ASSERT_FALSE(grad_of_h.empty());
  for (const OpConf& op : job->op()) {
    if (op.input_sbp_hint_size() == 0) continue;
    ++hinted;
    EXPECT_TRUE(op.is_backward()) << op.name();
    int flat = 0;
    for (const ArgProto& arg : op.input()) {
      for (const std::string& lbn : arg.lbn()) {
        ASSERT_LT(flat, op.input_sbp_hint_size()) << op.name();
        const NdSbp& hint = op.input_sbp_hint(flat++);
        if (lbn == grad_of_h) {
          ASSERT_EQ(hint.sbp_size(), 1) << op.name();
          EXPECT_EQ(SbpToString(hint.sbp(0)), "B") << op.name();
        } else {
          EXPECT_EQ(hint.sbp_size(), 0) << op.name() << " input " << lbn;
        }
      }
    }
  }
  EXPECT_EQ(hinted, 1);  // tanh's gradient op
  // Two tensors sharing one gradient (add passes it through) hinted apart.
  Graph clash("clash");
  Tensor a = clash.Tanh(clash.Variable("a", Shape{3}));
  Tensor sum = clash.Add(a, clash.Tanh(clash.Variable("b", Shape{3})));
  clash.HintGradSbp(a, Broadcast());
  clash.HintGradSbp(sum, Split(0));
  clash.Minimize(clash.ReduceSum(clash.Tanh(sum)), Sgd{});
  StatusOr<Job> bad = clash.Build();
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("gradient SBP hints differ"));
  EXPECT_THAT(bad.status().message(), HasSubstr(a.lbn));
}

}  // namespace
}  // namespace oflite
