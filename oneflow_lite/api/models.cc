#include "oneflow_lite/api/models.h"

#include "oneflow_lite/api/layers.h"

namespace oflite {

Tensor LeNet5Logits(Graph* g, const Tensor& images) {
  Conv2dOptions same;
  same.padding = {2, 2};
  Tensor x = MaxPool2d(g, g->Relu(Conv2d(g, images, 6, 5, same)), 2);  // [B, 6, 14, 14]
  x = MaxPool2d(g, g->Relu(Conv2d(g, x, 16, 5)), 2);                   // [B, 16, 5, 5]
  x = g->Relu(Dense(g, x, 120));
  x = g->Relu(Dense(g, x, 84));
  return Dense(g, x, 10);
}

}  // namespace oflite
