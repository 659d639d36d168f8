// Reference networks built with the graph API, shared by tests, the GPU
// check and the benchmarks, so that they all run the same model.
#ifndef ONEFLOW_LITE_API_MODELS_H_
#define ONEFLOW_LITE_API_MODELS_H_

#include "oneflow_lite/api/graph.h"

namespace oflite {

// LeNet-5 on images [B, 1, 28, 28]: two blocks of a 5x5 convolution (6
// filters padded to keep 28x28, then 16 unpadded), ReLU and 2x2 max
// pooling, then Dense 120 and 84 with ReLU and Dense 10. Returns the logits
// [B, 10]; the ops go on the graph's current placement.
Tensor LeNet5Logits(Graph* g, const Tensor& images);

}  // namespace oflite

#endif  // ONEFLOW_LITE_API_MODELS_H_
