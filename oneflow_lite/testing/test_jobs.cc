#include "oneflow_lite/testing/test_jobs.h"

#include <cstdint>
#include <memory>
#include <vector>

#include "oneflow_lite/api/data_sources.h"
#include "oneflow_lite/api/graph.h"
#include "oneflow_lite/api/layers.h"
#include "oneflow_lite/api/models.h"
#include "oneflow_lite/api/transformer.h"
#include "oneflow_lite/data/npy.h"

namespace oflite {
namespace compiler {

namespace {

NdSbp NdSbpOf(std::initializer_list<SbpParallel> axes) {
  NdSbp nd;
  for (const SbpParallel& s : axes) *nd.add_sbp() = s;
  return nd;
}

}  // namespace

StatusOr<Job> BuildMlpJob(const MlpSpec& spec) {
  Graph g("mlp", /*seed=*/7);
  g.SetPlacement(Placement::Parse(spec.placement));
  const size_t layers = spec.hidden.size() + 1;
  // The layouts that split a hidden layer's two weights as a Megatron pair.
  const bool megatron_pair = spec.model_parallel == ModelParallel::kDataTensor2d ||
                             spec.model_parallel == ModelParallel::kMegatron;
  if (spec.hidden.empty() && megatron_pair) {
    return InvalidArgumentError("MlpSpec: the Megatron layouts (dp_tp, megatron) split a hidden "
                                "layer's two weights; this MLP has no hidden layer");
  }
  if (!spec.stages.empty() && spec.stages.size() != layers) {
    return InvalidArgumentError("MlpSpec: ", spec.stages.size(), " stages for ", layers, " layers");
  }
  auto stage = [&](size_t i) -> std::unique_ptr<Graph::PlacementScope> {
    if (spec.stages.empty()) return nullptr;
    return std::make_unique<Graph::PlacementScope>(g.WithPlacement(Placement::Parse(spec.stages[i])));
  };
  Batch data;
  Tensor x;
  {
    auto scope = stage(0);
    if (spec.fashion_mnist_dir.empty()) {
      data = RandomBatch(&g, Shape{spec.batch, spec.features}, spec.classes);
    } else {
      FashionMnistOptions options;
      options.flatten = true;
      data = FashionMnist(&g, spec.fashion_mnist_dir, spec.batch, Split(0), options);
    }
    x = data.image;
    if (spec.model_parallel == ModelParallel::kDataTensor2d) {
      g.HintSbp(data.image, NdSbpOf({Split(0), Broadcast()}));
      g.HintSbp(data.label, NdSbpOf({Split(0), Broadcast()}));
    } else if (spec.model_parallel == ModelParallel::kMegatron) {
      // Every device reads the whole batch, as tensor parallelism alone has it.
      g.HintSbp(data.image, Broadcast());
      g.HintSbp(data.label, Broadcast());
    }
  }
  if (!g.ok()) return g.Build();  // e.g. a bad placement: no shapes to build on
  for (size_t i = 0; i < layers; ++i) {
    auto scope = stage(i);
    const int64_t units = i + 1 < layers ? spec.hidden[i] : spec.classes;
    DenseOptions options;
    if (i == 0 && spec.model_parallel != ModelParallel::kNone) {
      options.weight = g.Variable("w0", Shape{x.shape().dim(1), units},
                                  {Initializer::XavierUniform(), DT_FLOAT, true});
      options.bias = g.Variable("b0", Shape{units}, {Initializer::Zeros(), DT_FLOAT, true});
      if (spec.model_parallel == ModelParallel::kSplitColumns ||
          spec.model_parallel == ModelParallel::kMegatron) {
        g.HintSbp(options.weight, Split(1));
        g.HintSbp(options.bias, Split(0));
      } else if (spec.model_parallel == ModelParallel::kSplitRows) {
        g.HintSbp(options.weight, Split(0));
      } else {
        g.HintSbp(options.weight, NdSbpOf({Broadcast(), Split(1)}));
        g.HintSbp(options.bias, NdSbpOf({Broadcast(), Split(0)}));
      }
    }
    if (i == 1 && megatron_pair) {
      options.weight = g.Variable("w1", Shape{x.shape().dim(1), units},
                                  {Initializer::XavierUniform(), DT_FLOAT, true});
      if (spec.model_parallel == ModelParallel::kMegatron) {
        g.HintSbp(options.weight, Split(0));
      } else {
        g.HintSbp(options.weight, NdSbpOf({Broadcast(), Split(0)}));
      }
    }
    x = Dense(&g, x, units, options);
    if (spec.model_parallel == ModelParallel::kMegatron && i < 2) {
      // The pair's activations as Megatron has them (api/transformer.cc's
      // hints): the column half's output split by its columns, the row
      // half's a partial sum whose gradient is whole (the column halves'
      // partial input gradients meet in one all-reduce).
      g.HintSbp(x, i == 0 ? Split(1) : PartialSum());
      g.HintGradSbp(x, i == 0 ? Split(1) : Broadcast());
    }
    if (i + 1 < layers) x = spec.activation == "gelu" ? g.Gelu(x) : g.Relu(x);
  }
  {
    auto scope = stage(layers - 1);
    Tensor loss = g.SparseSoftmaxCrossEntropy(x, data.label);
    if (spec.accuracy_metric) g.AddMetric("accuracy", g.Accuracy(x, data.label));
    if (spec.train) {
      MinimizeOptions minimize;
      minimize.clip_global_norm = spec.clip_global_norm;
      switch (spec.optimizer) {
        case MlpOptimizer::kSgd:
          g.Minimize(loss, Sgd{0.1, 0.0}, minimize);
          break;
        case MlpOptimizer::kMomentum:
          g.Minimize(loss, Momentum{0.1, 0.9}, minimize);
          break;
        case MlpOptimizer::kAdam:
          g.Minimize(loss, Adam{0.1}, minimize);
          break;
      }
    } else {
      g.AddMetric("loss", loss);
    }
  }
  g.SetIterations(spec.iterations);
  if (spec.micro_batches != 1) g.SetMicroBatches(spec.micro_batches, spec.schedule);
  return g.Build();
}

StatusOr<Job> BuildTinyGptJob(const std::string& tokens_path, const std::string& placement,
                              int64_t tensor_parallel, double learning_rate, int64_t iterations) {
  constexpr int64_t kVocab = 13;
  std::vector<uint16_t> ids(4096);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<uint16_t>(i % kVocab);
  RETURN_IF_ERROR(WriteNpyUint16(tokens_path, {static_cast<int64_t>(ids.size())}, ids.data()));
  Graph g("gpt", /*seed=*/5);
  g.SetPlacement(Placement::Parse(placement));
  TokenWindowOptions options;
  options.sbp = tensor_parallel > 1 ? Broadcast() : Split(0);
  TokenWindowData data = TokenWindows(&g, tokens_path, /*batch=*/8, /*block=*/16, kVocab, options);
  GptConfig config;
  config.vocab_size = kVocab;
  config.block_size = 16;
  config.layers = 2;
  config.heads = 4;
  config.channels = 64;
  config.tensor_parallel = {.degree = tensor_parallel, .data_axis = false};
  GptModel gpt = Gpt(&g, data.input, config);
  g.Minimize(g.SparseSoftmaxCrossEntropy(gpt.logits, data.target), Sgd{learning_rate, 0.0});
  g.SetIterations(iterations);
  return g.Build();
}

StatusOr<Job> BuildLeNetJob(const std::string& placement, int64_t batch, int64_t iterations) {
  Graph g("lenet5", /*seed=*/7);
  g.SetPlacement(Placement::Parse(placement));
  Batch data = RandomBatch(&g, Shape{batch, 1, 28, 28}, 10);
  Tensor logits = LeNet5Logits(&g, data.image);
  g.Minimize(g.SparseSoftmaxCrossEntropy(logits, data.label), Momentum{0.05, 0.9});
  g.SetIterations(iterations);
  return g.Build();
}

ClusterProto MakeCluster(int machines, int cpus, int gpus) {
  ClusterProto cluster;
  for (int i = 0; i < machines; ++i) {
    MachineProto* m = cluster.add_machine();
    m->set_id(i);
    m->set_address("127.0.0." + std::to_string(i + 1));
    m->set_cpu_devices(cpus);
    m->set_cuda_devices(gpus);
  }
  return cluster;
}

}  // namespace compiler
}  // namespace oflite
