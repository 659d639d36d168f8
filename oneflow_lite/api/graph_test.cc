#include "oneflow_lite/api/graph.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "oneflow_lite/api/data_sources.h"
#include "oneflow_lite/api/job_util.h"
#include "oneflow_lite/api/layers.h"
#include "oneflow_lite/common/attr.h"

namespace oflite {
namespace {

using ::testing::HasSubstr;

constexpr char kFashionMnist[] = "/usr/share/datasets/fashion-mnist";

void BuildMlp(Graph* g) {
  Batch data = FashionMnist(g, kFashionMnist, 64, Split(0));
  Tensor h = g->Relu(Dense(g, data.image, 256));
  Tensor logits = Dense(g, g->Relu(Dense(g, h, 256)), 10);
  Tensor loss = g->SparseSoftmaxCrossEntropy(logits, data.label);
  g->AddMetric("accuracy", g->Accuracy(logits, data.label));
  g->Minimize(loss, Sgd{.learning_rate = 0.1});
  g->SetPlacement(Placement::Parse("0:cpu:0-1"));
}

std::vector<const OpConf*> OpsOfType(const Job& job, const std::string& type) {
  std::vector<const OpConf*> ops;
  for (const OpConf& op : job.op()) {
    if (op.op_type() == type) ops.push_back(&op);
  }
  return ops;
}

TensorDesc DescOf(const Job& job, const std::string& lbn) {
  BlobDescMap descs = BlobDescsOf(job);
  auto it = descs.find(lbn);
  CHECK(it != descs.end()) << lbn;
  return it->second;
}

TEST(GraphTest, MlpBuildsForwardBackwardAndUpdates) {
  Graph g("mlp", 7);
  BuildMlp(&g);
  StatusOr<Job> job = g.Build();
  ASSERT_TRUE(job.ok()) << job.status();

  EXPECT_EQ(job->conf().name(), "mlp");
  EXPECT_EQ(job->conf().seed(), 7);
  EXPECT_TRUE(job->conf().is_train());
  EXPECT_EQ(job->conf().batch_size(), 64);
  EXPECT_EQ(job->conf().total_iters(), 60000 / 64);
  EXPECT_EQ(PlacementToString(job->conf().default_placement()), "0:cpu:0-1");
  ASSERT_EQ(job->conf().train().metric_size(), 2);
  EXPECT_EQ(job->conf().train().metric(0).name(), "loss");
  EXPECT_EQ(job->conf().train().metric(0).lbn(0), job->conf().train().loss_lbn());
  EXPECT_EQ(job->conf().train().metric(1).name(), "accuracy");
  EXPECT_EQ(job->conf().train().optimizer().lr().base_lr(), 0.1);
  EXPECT_EQ(job->conf().train().optimizer().lr().total_iters(), 937);

  // Shapes inferred while building: the image is flattened into Dense.
  EXPECT_EQ(DescOf(*job, "fashion_mnist/image_0").ToString(), "float32(64, 1, 28, 28)");
  EXPECT_EQ(DescOf(*job, "dense-weight/out_0").ToString(), "float32(784, 256)");
  EXPECT_EQ(DescOf(*job, "dense_2-weight/out_0").ToString(), "float32(256, 10)");
  EXPECT_EQ(DescOf(*job, "dense_2-bias/out_0").ToString(), "float32(10,)");
  EXPECT_EQ(DescOf(*job, job->conf().train().loss_lbn()).shape.elem_count(), 1);

  // The data source carries the S(0) hint on both outputs.
  const OpConf* data = FindOp(*job, "fashion_mnist");
  ASSERT_NE(data, nullptr);
  ASSERT_EQ(data->output_sbp_hint_size(), 2);
  EXPECT_EQ(SbpToString(data->output_sbp_hint(0).sbp(0)), "S(0)");
  EXPECT_EQ(SbpToString(data->output_sbp_hint(1).sbp(0)), "S(0)");

  // Six trainable variables, six sgd updates writing them in place.
  std::vector<const OpConf*> variables = OpsOfType(*job, "variable");
  std::vector<const OpConf*> updates = OpsOfType(*job, "sgd_update");
  EXPECT_EQ(variables.size(), 6u);
  ASSERT_EQ(updates.size(), 6u);
  for (const OpConf* update : updates) {
    EXPECT_TRUE(update->is_optimizer());
    ASSERT_EQ(update->mutable_input_size(), 1);
    EXPECT_EQ(update->mutable_input(0), "model");
    EXPECT_EQ(AttrView(*update).GetFloatOr("base_lr", 0), 0.1);
    EXPECT_EQ(AttrView(*update).GetStringOr("lr_type", ""), "constant");
  }
  // Backward ops exist and are marked.
  int backward = 0;
  for (const OpConf& op : job->op()) backward += op.is_backward();
  EXPECT_GT(backward, 10);
  // Nothing differentiates the data source or the accuracy metric.
  for (const OpConf& op : job->op()) {
    EXPECT_NE(op.op_type(), "conv2d_grad_data");
    if (op.is_backward()) {
      EXPECT_EQ(op.name().find("accuracy"), std::string::npos) << op.name();
    }
  }
}

TEST(GraphTest, UpdatesWaitForEveryReaderOfTheirVariable) {
  Graph g("mlp");
  BuildMlp(&g);
  StatusOr<Job> job = g.Build();
  ASSERT_TRUE(job.ok()) << job.status();
  const OpConf* update = FindOp(*job, "dense_1-weight-update");
  ASSERT_NE(update, nullptr);
  std::vector<std::string> readers = ConsumersOf(*job, "dense_1-weight/out_0");
  readers.erase(std::remove(readers.begin(), readers.end(), update->name()), readers.end());
  ASSERT_GE(readers.size(), 2u);  // the forward matmul and the backward data-gradient
  std::vector<std::string> controls(update->control_input().begin(), update->control_input().end());
  EXPECT_EQ(controls, readers);
  EXPECT_THAT(controls, ::testing::Contains("dense_1-matmul"));
  // The order respects them.
  StatusOr<std::vector<int>> order = TopologicalOrder(*job);
  ASSERT_TRUE(order.ok()) << order.status();
}

TEST(GraphTest, BuildIsDeterministic) {
  std::string first, second, third;
  {
    Graph g("mlp", 3);
    BuildMlp(&g);
    StatusOr<Job> a = g.Build();
    StatusOr<Job> b = g.Build();
    ASSERT_TRUE(a.ok() && b.ok()) << a.status();
    ASSERT_TRUE(a->SerializeToString(&first));
    ASSERT_TRUE(b->SerializeToString(&second));
  }
  {
    Graph g("mlp", 3);
    BuildMlp(&g);
    StatusOr<Job> c = g.Build();
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_TRUE(c->SerializeToString(&third));
  }
  EXPECT_EQ(first, second);
  EXPECT_EQ(first, third);
  // Another seed changes the variable seeds, hence the bytes.
  Graph g("mlp", 4);
  BuildMlp(&g);
  std::string other;
  ASSERT_TRUE(g.Build()->SerializeToString(&other));
  EXPECT_NE(first, other);
}

TEST(GraphTest, MismatchedMatMulFailsAtThatCallNamingOpAndShapes) {
  Graph g("bad");
  Batch data = FashionMnist(&g, kFashionMnist, 64, Split(0), {.flatten = true});
  Tensor w = g.Variable("w", Shape{100, 10});
  ASSERT_TRUE(g.ok()) << g.status();
  Tensor y = g.MatMul(data.image, w);
  EXPECT_FALSE(y.valid());
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("graph 'bad'"));
  EXPECT_THAT(g.status().message(), HasSubstr("'matmul'"));
  EXPECT_THAT(g.status().message(), HasSubstr("float32(64, 784)"));
  EXPECT_THAT(g.status().message(), HasSubstr("float32(100, 10)"));
  // Sticky: later calls do nothing, Build returns the first error.
  Tensor z = g.Relu(data.image);
  EXPECT_FALSE(z.valid());
  StatusOr<Job> job = g.Build();
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status(), g.status());
}

TEST(GraphTest, DenseWithMismatchedSharedWeightNamesLayerAndShapes) {
  Graph g("shared");
  Batch data = RandomBatch(&g, Shape{8, 100}, 10);
  Tensor w = g.Variable("w", Shape{784, 256}, {.initializer = Initializer::XavierUniform()});
  Tensor y = Dense(&g, data.image, 256, {.weight = w});
  EXPECT_FALSE(y.valid());
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), HasSubstr("dense 'dense'"));
  EXPECT_THAT(g.status().message(), HasSubstr("float32(8, 100)"));
  EXPECT_THAT(g.status().message(), HasSubstr("float32(784, 256)"));
  EXPECT_THAT(g.status().message(), HasSubstr("want (100, 256)"));
}

TEST(GraphTest, DenseRejectsRankOneInput) {
  Graph g("g");
  Tensor v = g.Variable("v", Shape{5});
  Dense(&g, v, 3);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("float32(5,)"));
}

TEST(GraphTest, UnknownDatasetPathIsReportedAtBuildTime) {
  Graph g("data");
  Batch data = FashionMnist(&g, "/nonexistent/fashion", 64);
  EXPECT_FALSE(data.image.valid());
  StatusOr<Job> job = g.Build();
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(job.status().message(), HasSubstr("'/nonexistent/fashion'"));
  EXPECT_THAT(job.status().message(), HasSubstr("train-images-idx3-ubyte"));
}

TEST(GraphTest, BadPlacementTextBecomesTheGraphError) {
  Graph g("p");
  g.SetPlacement(Placement::Parse("0:tpu:0"));
  StatusOr<Job> job = g.Build();
  ASSERT_FALSE(job.ok());
  EXPECT_THAT(job.status().message(), HasSubstr("unknown device type 'tpu'"));
}

TEST(GraphTest, PlacementScopesApplyToOpsCreatedInside) {
  Graph g("stages");
  Batch data = RandomBatch(&g, Shape{8, 16}, 4);
  Tensor h;
  {
    auto stage0 = g.WithPlacement(Placement::Parse("0:cpu:0"));
    h = g.Relu(Dense(&g, data.image, 8, {.name = "first"}));
    {
      auto inner = g.WithPlacement(Placement::Parse("1:cpu:0-1"));
      h = g.Tanh(h);
    }
    h = g.Sigmoid(h);
  }
  Tensor out = Dense(&g, h, 4, {.name = "second"});
  ASSERT_TRUE(g.ok()) << g.status();
  StatusOr<Job> job = g.BuildForward();
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(PlacementToString(FindOp(*job, "first-weight")->placement()), "0:cpu:0");
  EXPECT_EQ(PlacementToString(FindOp(*job, "first-matmul")->placement()), "0:cpu:0");
  EXPECT_EQ(PlacementToString(FindOp(*job, "tanh")->placement()), "1:cpu:0-1");
  EXPECT_EQ(PlacementToString(FindOp(*job, "sigmoid")->placement()), "0:cpu:0");
  EXPECT_FALSE(FindOp(*job, "second-matmul")->has_placement());
  EXPECT_FALSE(FindOp(*job, "random_batch")->has_placement());
}

TEST(GraphTest, BackwardOpsFollowTheirForwardPlacement) {
  Graph g("stages");
  Batch data = RandomBatch(&g, Shape{8, 16}, 4);
  Tensor logits;
  {
    auto stage = g.WithPlacement(Placement::Parse("1:cpu:0"));
    logits = Dense(&g, data.image, 4, {.name = "head"});
  }
  g.Minimize(g.SparseSoftmaxCrossEntropy(logits, data.label), Sgd{.learning_rate = 0.1});
  StatusOr<Job> job = g.Build();
  ASSERT_TRUE(job.ok()) << job.status();
  int checked = 0;
  for (const OpConf& op : job->op()) {
    if (op.name().rfind("head-", 0) == 0) {
      EXPECT_EQ(PlacementToString(op.placement()), "1:cpu:0") << op.name();
      ++checked;
    }
  }
  EXPECT_GE(checked, 6);  // weight, bias, matmul, bias_add, their grads, updates
}

TEST(GraphTest, ExplicitNamesMustBeUnique) {
  Graph g("names");
  g.Variable("w", Shape{2});
  g.Variable("w", Shape{2});
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kAlreadyExists);
  EXPECT_THAT(g.status().message(), HasSubstr("'w'"));
}

TEST(GraphTest, MinimizeRequiresAFloatingScalar) {
  Graph g("loss");
  Batch data = RandomBatch(&g, Shape{8, 16}, 4);
  Tensor logits = Dense(&g, data.image, 4);
  g.Minimize(logits, Sgd{});
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("float32(8, 4)"));
  EXPECT_THAT(g.status().message(), HasSubstr("scalar"));
}

TEST(GraphTest, LossThroughAnOpWithoutGradientIsAnError) {
  Graph g("nograd");
  Batch data = RandomBatch(&g, Shape{8, 16}, 4);
  Tensor logits = Dense(&g, data.image, 4);
  g.Minimize(g.Accuracy(logits, data.label), Sgd{});
  StatusOr<Job> job = g.Build();
  ASSERT_FALSE(job.ok());
  EXPECT_THAT(job.status().message(), HasSubstr("op 'accuracy' (accuracy)"));
  EXPECT_THAT(job.status().message(), HasSubstr("no gradient rule"));
}

TEST(GraphTest, LossIndependentOfVariablesIsAnError) {
  Graph g("novar");
  Batch data = RandomBatch(&g, Shape{8, 16}, 4);
  g.Minimize(g.SparseSoftmaxCrossEntropy(data.image, data.label), Sgd{});
  StatusOr<Job> job = g.Build();
  ASSERT_FALSE(job.ok());
  EXPECT_THAT(job.status().message(), HasSubstr("does not depend on any trainable variable"));
}

TEST(GraphTest, ForwardJobOfAnInferenceGraphHasNoTraining) {
  Graph g("infer");
  Batch data = RandomBatch(&g, Shape{4, 1, 8, 8}, 3);
  Tensor x = MaxPool2d(&g, g.Relu(Conv2d(&g, data.image, 2, 3, {.padding = {1, 1}})), 2);
  x = LayerNorm(&g, g.Flatten(x));
  Tensor logits = Dense(&g, Dropout(&g, x, 0.5), 3);
  g.AddMetric("accuracy", g.Accuracy(logits, data.label));
  StatusOr<Job> job = g.Build();
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_FALSE(job->conf().is_train());
  EXPECT_EQ(job->conf().total_iters(), 0);
  EXPECT_EQ(DescOf(*job, logits.lbn).ToString(), "float32(4, 3)");
  EXPECT_EQ(DescOf(*job, "conv2d-weight/out_0").ToString(), "float32(2, 1, 3, 3)");
  for (const OpConf& op : job->op()) EXPECT_FALSE(op.is_backward() || op.is_optimizer());
}

TEST(GraphTest, LossMetricNames) {
  Graph inference("infer");
  Batch data = RandomBatch(&inference, Shape{8, 16}, 4);
  Tensor logits = Dense(&inference, data.image, 4);
  inference.AddMetric("loss", inference.SparseSoftmaxCrossEntropy(logits, data.label));
  StatusOr<Job> job = inference.Build();
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_EQ(job->conf().train().metric_size(), 1);
  EXPECT_EQ(job->conf().train().metric(0).name(), "loss");

  Graph train("train");
  data = RandomBatch(&train, Shape{8, 16}, 4);
  logits = Dense(&train, data.image, 4);
  Tensor loss = train.SparseSoftmaxCrossEntropy(logits, data.label);
  train.AddMetric("loss", loss);  // the same tensor: reported once
  train.Minimize(loss, Sgd{});
  job = train.Build();
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->conf().train().metric_size(), 1);

  Graph clash("clash");
  data = RandomBatch(&clash, Shape{8, 16}, 4);
  logits = Dense(&clash, data.image, 4);
  clash.AddMetric("loss", clash.ReduceMean(logits));
  clash.Minimize(clash.SparseSoftmaxCrossEntropy(logits, data.label), Sgd{});
  EXPECT_THAT(clash.Build().status().message(), HasSubstr("metric 'loss'"));
  clash.AddMetric("", clash.ReduceMean(logits));
  EXPECT_FALSE(clash.ok());
}

TEST(GraphTest, EpochsAndIterations) {
  Graph g("epochs");
  Batch data = FashionMnist(&g, kFashionMnist, 100);
  g.Minimize(g.SparseSoftmaxCrossEntropy(Dense(&g, data.image, 10), data.label), Sgd{});
  g.SetEpochs(3);
  EXPECT_EQ(g.BuildForward()->conf().total_iters(), 1800);
  g.SetIterations(5);
  EXPECT_EQ(g.BuildForward()->conf().total_iters(), 5);

  Graph synthetic("synthetic");
  RandomBatch(&synthetic, Shape{4, 4}, 2);
  synthetic.SetEpochs(1);
  EXPECT_FALSE(synthetic.BuildForward().ok());
}

TEST(GraphTest, AddOpAcceptsAnyRegisteredOp) {
  Graph g("raw");
  Tensor v = g.Variable("v", Shape{3, 4});
  OpConf op;
  op.set_op_type("transpose");
  ArgProto* in = op.add_input();
  in->set_name("x");
  in->add_lbn(v.lbn);
  op.add_output()->set_name("y");
  SetIntsAttr(&op, "perm", {1, 0});
  std::vector<Tensor> outputs = g.AddOp(op);
  ASSERT_EQ(outputs.size(), 1u) << g.status();
  EXPECT_EQ(outputs[0].lbn, "transpose/y_0");
  EXPECT_EQ(outputs[0].desc.ToString(), "float32(4, 3)");

  op.set_op_type("no_such_op");
  op.set_name("");
  EXPECT_TRUE(g.AddOp(op).empty());
  EXPECT_EQ(g.status().code(), StatusCode::kNotFound);
}

// The attention pieces: shapes and dtypes of CausalSoftmax, Iota and the
// comparisons, and Gelu's unknown form rejected naming the op.
TEST(GraphTest, CausalSoftmaxIotaComparisonsAndGeluForms) {
  Graph g("attention");
  Tensor scores = g.Variable("scores", Shape{2, 4, 4});
  Tensor probs = g.CausalSoftmax(scores, 0.5);
  Tensor rows = g.Iota(scores, -2, DT_INT64);
  Tensor keep = g.GreaterEqual(rows, g.Iota(scores, -1, DT_INT64));
  Tensor masked = g.Where(keep, scores, g.ScalarMul(scores, 0.0));
  Tensor y = g.Gelu(masked, "tanh");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(probs.desc, TensorDesc(Shape({2, 4, 4}), DT_FLOAT));
  EXPECT_EQ(rows.desc, TensorDesc(Shape({2, 4, 4}), DT_INT64));
  EXPECT_EQ(keep.desc, TensorDesc(Shape({2, 4, 4}), DT_UINT8));
  EXPECT_TRUE(y.valid());
  g.Gelu(y, "sigmoid");
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("(gelu): attribute 'approximate'"));
}

}  // namespace
}  // namespace oflite
