#include "tools/gpu/gpu_jobs.h"

#include "oneflow_lite/api/data_sources.h"
#include "oneflow_lite/api/graph.h"
#include "oneflow_lite/api/layers.h"
#include "oneflow_lite/api/models.h"

namespace oflite {

StatusOr<Job> MlpJob(int64_t batch, int64_t iterations, const std::string& placement,
                     int64_t hidden) {
  Graph g("mlp_gpu", /*seed=*/1);
  g.SetPlacement(Placement::Parse(placement));
  Batch data = RandomBatch(&g, Shape{batch, 784}, 10);
  Tensor h = g.Relu(Dense(&g, data.image, hidden));
  h = g.Relu(Dense(&g, h, hidden));
  Tensor logits = Dense(&g, h, 10);
  g.Minimize(g.SparseSoftmaxCrossEntropy(logits, data.label), Sgd{0.1, 0.0});
  g.SetIterations(iterations);
  return g.Build();
}

StatusOr<Job> LeNetJob(int64_t batch, int64_t iterations, const std::string& placement) {
  Graph g("lenet5_gpu", /*seed=*/1);
  g.SetPlacement(Placement::Parse(placement));
  Batch data = RandomBatch(&g, Shape{batch, 1, 28, 28}, 10);
  Tensor logits = LeNet5Logits(&g, data.image);
  g.Minimize(g.SparseSoftmaxCrossEntropy(logits, data.label),
             Momentum{.learning_rate = 0.05, .momentum = 0.9});
  g.SetIterations(iterations);
  return g.Build();
}

}  // namespace oflite
