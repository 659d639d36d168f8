#include "oneflow_lite/api/models.h"

namespace oflite {

Tensor LeNet5Logits(Graph* g, const Tensor& images) {
  Conv2dOptions same;
  same.padding = {2, 2};
  Tensor x = g->MaxPool2d(g->Relu(g->Conv2d(images, 6, 5, same)), 2);  // [B, 6, 14, 14]
  x = g->MaxPool2d(g->Relu(g->Conv2d(x, 16, 5)), 2);                  // [B, 16, 5, 5]
  x = g->Relu(g->Dense(x, 120));
  x = g->Relu(g->Dense(x, 84));
  return g->Dense(x, 10);
}

}  // namespace oflite
