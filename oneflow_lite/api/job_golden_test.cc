// Golden Jobs: the serialized bytes of Jobs built through every builder of
// the graph API (Graph's ops, the layers, the data sources) and the shared
// test and reference models, fingerprinted. A refactoring of the builders
// must leave every fingerprint alone (names, seeds, field order: graph.h,
// "Determinism"). When a change to a Job is intended (a new attr, a new
// Job version), the failure prints the new table to paste over kGolden.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "oneflow_lite/api/data_sources.h"
#include "oneflow_lite/api/graph.h"
#include "oneflow_lite/api/layers.h"
#include "oneflow_lite/common/attr.h"
#include "oneflow_lite/data/npy.h"
#include "oneflow_lite/testing/test_jobs.h"

namespace oflite {
namespace {

// FNV-1a, 64 bits.
uint64_t Fingerprint(const std::string& bytes) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

// Convolutions, pooling, normalization, dropout, shared parameters,
// activations; trained with Adam, a cosine schedule and clipping.
StatusOr<Job> ConvNetJob() {
  Graph g("golden_conv", /*seed=*/3);
  Batch data = RandomBatch(&g, Shape{8, 3, 8, 8}, 4);
  Layer conv = Conv2dLayer(&g, data.image, 4, 3, {.padding = {1, 1}});
  g.HintSbp(conv.weight, Broadcast());
  Tensor x = BatchNorm(&g, g.Relu(conv.output));
  x = MaxPool2d(&g, x, 2);  // [8, 4, 4, 4]
  x = AvgPool2d(&g, Conv2d(&g, x, 6, 1, {.use_bias = false}), 2,
                {.strides = {1, 1}});           // [8, 6, 3, 3]
  x = g.Flatten(g.AdaptiveAvgPool2d(x, 1, 1));  // [8, 6]
  Layer norm = LayerNormLayer(&g, x);
  x = Dropout(&g, g.Gelu(norm.output), 0.25);
  Layer fc = DenseLayer(&g, x, 6, {.name = "fc"});
  Tensor tied = Dense(&g, g.Silu(fc.output), 6, {.weight = fc.weight, .bias = fc.bias});
  Tensor h = g.Add(g.Tanh(tied), g.Sigmoid(g.LeakyRelu(tied, 0.2)));
  Tensor logits = Dense(&g, h, 4);
  g.AddMetric("accuracy", g.Accuracy(logits, data.label));
  g.AddOutput("logits", logits);
  g.Minimize(g.SparseSoftmaxCrossEntropy(logits, data.label), Adam{.learning_rate = 0.01},
             {.schedule = LrScheduleOptions::Cosine(2), .clip_global_norm = 1.0});
  g.SetIterations(3);
  return g.Build();
}

// Every math, selection and indexing op on variables, an embedding and a
// placement scope; trained with momentum on a mean squared error.
StatusOr<Job> MathJob() {
  Graph g("golden_math", /*seed=*/5);
  g.SetPlacement(Placement::Parse("0:cpu:0-1"));
  Batch data = RandomBatch(&g, Shape{4, 3}, 2, Broadcast(), DT_DOUBLE, "rows");
  Tensor v = g.Variable("v", Shape{4, 3}, {.dtype = DT_DOUBLE});
  Tensor w = g.Variable("w", Shape{3, 4}, {Initializer::Normal(0, 1), DT_DOUBLE, true});
  Tensor b = g.Variable("b", Shape{4}, {.dtype = DT_DOUBLE});
  Tensor y = g.BiasAdd(g.MatMul(v, w, false, false, 0.5), b);  // [4, 4]
  y = g.MatMul(y, w, false, true);                             // [4, 3]
  Tensor z = g.AddN({y, data.image, v});
  z = g.Div(g.Mul(g.Sub(z, v), z), g.ScalarAdd(g.Abs(z), 1.0));
  z = g.Pow(g.ScalarMul(z, 0.5), 2.0);
  Tensor loss = g.MeanSquaredError(z, data.image);
  g.Minimize(loss, Momentum{0.1, 0.9, 1e-4}, {.schedule = LrScheduleOptions::Step(2, 0.5)});
  {
    auto scope = g.WithPlacement(Placement::Parse("0:cpu:1"));
    Tensor e = g.Exp(g.Neg(data.image));
    e = g.Sqrt(g.Rsqrt(g.Log(g.ScalarAdd(e, 2.0))));
    e = g.Clamp(e, 0.1, std::nullopt);
    e = g.Maximum(g.Minimum(e, data.image), g.Clamp(data.image, std::nullopt, 1.0));
    Tensor condition = g.Reshape(data.label, Shape{4, 1});
    e = g.Where(condition, e, data.image);
    e = g.Concat({e, g.Gather(data.image, data.label)}, 1);       // [4, 6]
    e = g.Slice(g.Transpose(e, {1, 0}), {0, 0}, {6, 4}, {2, 1});  // [3, 4]
    g.AddMetric("sum", g.ReduceSum(g.Identity(e)));
    g.AddMetric("mean", g.ReduceMean(g.ReduceSum(e, {1}, true)));
    g.AddOutput("one_hot", g.OneHot(data.label, 3, DT_DOUBLE));
    g.AddOutput("softmax", g.Softmax(g.LogSoftmax(g.Cast(e, DT_FLOAT), 0)));
    g.AddOutput("selected", g.SelectRows(data.image, data.label));
  }
  Layer table = EmbeddingLayer(&g, data.label, 5, 3, {.name = "table"});
  Tensor looked_up = Embedding(&g, data.label, 7, 2);
  g.AddMetric("bce", g.BinaryCrossEntropyWithLogits(table.output,
                                                    g.Sigmoid(g.Cast(table.output, DT_FLOAT))));
  g.AddOutput("looked_up", looked_up);
  g.SetIterations(2);
  return g.Build();
}

// Writes <dir>/<split>_x.npy (uint8 [count, 2, 3]) and <split>_y.npy.
void WriteNpySplit(const std::string& dir, const std::string& split, int64_t count) {
  std::vector<uint8_t> samples(count * 6, 7);
  std::vector<int64_t> labels(count, 1);
  ASSERT_TRUE(WriteNpy(dir + "/" + split + "_x.npy", DT_UINT8, {count, 2, 3}, samples.data()).ok());
  ASSERT_TRUE(WriteNpy(dir + "/" + split + "_y.npy", DT_INT64, {count}, labels.data()).ok());
}

// The data sources: Fashion-MNIST (both splits, flattened, uneven split),
// .npy arrays, random batches; epochs from the train source.
StatusOr<Job> SourcesJob(const std::string& npy_dir) {
  Graph g("golden_sources", /*seed=*/9);
  g.SetPlacement(Placement::Parse("0:cpu:0-2"));
  FashionMnistOptions fashion;
  fashion.flatten = true;
  fashion.mean = 0.25;
  fashion.std = 0.5;
  fashion.check_path = false;
  fashion.uneven_split = true;
  Batch train = FashionMnist(&g, "fashion", 100, Split(0), fashion);
  Batch test = FashionMnist(&g, "fashion", 50, Broadcast(),
                            {.split = "test", .shuffle = false, .check_path = false, .name = "t"});
  NpyDataOptions npy;
  npy.scale = 1.0 / 255;
  npy.uneven_split = true;
  Batch arrays = NpyData(&g, npy_dir, 5, Split(0), npy);
  Batch arrays_test = NpyData(&g, npy_dir, 2, Split(0), {.split = "test", .shuffle = false});
  Batch random = RandomBatch(&g, Shape{6, 2, 3}, 3);
  Tensor logits = Dense(&g, train.image, 10);
  g.AddMetric("test_accuracy", g.Accuracy(Dense(&g, test.image, 10), test.label));
  g.AddMetric("npy_accuracy", g.Accuracy(Dense(&g, arrays.image, 3), arrays.label));
  g.AddMetric("npy_test_accuracy", g.Accuracy(Dense(&g, arrays_test.image, 3), arrays_test.label));
  g.AddMetric("random_accuracy", g.Accuracy(Dense(&g, random.image, 3), random.label));
  g.Minimize(g.SparseSoftmaxCrossEntropy(logits, train.label),
             Sgd{.learning_rate = 0.1, .weight_decay = 1e-3});
  g.SetEpochs(2);
  StatusOr<Job> job = g.Build();
  if (!job.ok()) return job;
  // The .npy directory is the test's temporary one: not part of the golden.
  for (OpConf& op : *job->mutable_op()) {
    if (op.op_type() == "npy_dataset") SetStringAttr(&op, "path", "npy");
  }
  return job;
}

struct Golden {
  const char* name;
  size_t bytes;
  uint64_t fingerprint;
};

// name, serialized size, FNV-1a 64 of the serialized Job.
constexpr Golden kGolden[] = {
    {"mlp", 6035, 0x0ebc269c937c3110ull},
    {"mlp_data_parallel", 6203, 0x1826469b8955de42ull},
    {"mlp_columns", 5940, 0x678bd9825e294034ull},
    {"mlp_rows", 5934, 0x8aa3fe35cb1c3dedull},
    {"mlp_pipeline", 8812, 0x57829e7275be6bf2ull},
    {"mlp_adam", 8961, 0xb22b9d7af9e1612bull},
    {"mlp_inference", 2633, 0x4e603c0e020b1384ull},
    {"lenet5", 18691, 0x71fb4b69258d8f0bull},
    {"conv", 28868, 0x78017cadf401b500ull},
    {"math", 12892, 0x241e074e043b513bull},
    {"sources", 10162, 0xdef7a8715950ba4aull},
};

TEST(JobGoldenTest, JobsAreByteIdentical) {
  using compiler::MlpSpec;
  const std::string npy_dir = std::string(std::getenv("TEST_TMPDIR"));
  WriteNpySplit(npy_dir, "train", 10);
  WriteNpySplit(npy_dir, "test", 4);
  MlpSpec data_parallel{.placement = "0:cpu:0-1", .accuracy_metric = true};
  MlpSpec columns{.placement = "0:cpu:0-1",
                  .model_parallel = compiler::ModelParallel::kSplitColumns};
  MlpSpec rows{.placement = "0:cpu:0-1", .model_parallel = compiler::ModelParallel::kSplitRows};
  MlpSpec pipeline{.hidden = {32, 16}, .stages = {"0:cpu:0", "1:cpu:0", "1:cpu:1"}};
  MlpSpec adam{.optimizer = compiler::MlpOptimizer::kAdam};
  MlpSpec inference{.optimizer = compiler::MlpOptimizer::kMomentum};
  inference.train = false;
  const std::vector<std::pair<std::string, std::function<StatusOr<Job>()>>> jobs = {
      {"mlp", [] { return compiler::BuildMlpJob(MlpSpec{}); }},
      {"mlp_data_parallel", [&] { return compiler::BuildMlpJob(data_parallel); }},
      {"mlp_columns", [&] { return compiler::BuildMlpJob(columns); }},
      {"mlp_rows", [&] { return compiler::BuildMlpJob(rows); }},
      {"mlp_pipeline", [&] { return compiler::BuildMlpJob(pipeline); }},
      {"mlp_adam", [&] { return compiler::BuildMlpJob(adam); }},
      {"mlp_inference", [&] { return compiler::BuildMlpJob(inference); }},
      {"lenet5", [] { return compiler::BuildLeNetJob("0:cpu:0-1", 4, 3); }},
      {"conv", ConvNetJob},
      {"math", MathJob},
      {"sources", [&] { return SourcesJob(npy_dir); }},
  };
  std::string table;
  bool all_equal = true;
  for (size_t i = 0; i < jobs.size(); ++i) {
    StatusOr<Job> job = jobs[i].second();
    ASSERT_TRUE(job.ok()) << jobs[i].first << ": " << job.status();
    const std::string bytes = job->SerializeAsString();
    const uint64_t fingerprint = Fingerprint(bytes);
    char line[128];
    std::snprintf(line, sizeof(line), "    {\"%s\", %zu, 0x%016llxull},\n", jobs[i].first.c_str(),
                  bytes.size(), static_cast<unsigned long long>(fingerprint));
    table += line;
    const bool known = i < std::size(kGolden) && jobs[i].first == kGolden[i].name;
    const bool equal =
        known && kGolden[i].bytes == bytes.size() && kGolden[i].fingerprint == fingerprint;
    EXPECT_TRUE(equal) << "job '" << jobs[i].first << "' differs from its golden";
    all_equal = all_equal && equal;
  }
  EXPECT_EQ(jobs.size(), std::size(kGolden));
  if (!all_equal) ADD_FAILURE() << "Jobs changed; if intended, kGolden becomes:\n" << table;
}

}  // namespace
}  // namespace oflite
