// CPU argmax (first maximum, int32 result) and accuracy.
#include "oneflow_lite/kernels/cpu/nn/cpu_nn_util.h"
#include "oneflow_lite/kernels/kernel.h"

namespace oflite {
namespace nn {
namespace {

// Index of the first maximum of `size` values `stride` apart.
template <typename T>
int64_t FirstMax(const T* x, int64_t size, int64_t stride) {
  int64_t best = 0;
  for (int64_t d = 1; d < size; ++d) {
    if (x[d * stride] > x[best * stride]) best = d;
  }
  return best;
}

template <typename T>
class ArgmaxKernel final : public Kernel {
 public:
  Status Init(const KernelInitContext& ctx) override {
    axis_ = ctx.attrs().GetIntOr("axis", -1);
    return Status::OK();
  }
  Status Forward(KernelContext* ctx) override {
    const Blob& x = ctx->Input("x");
    auto layout = MakeAxisLayout(x.shape(), axis_);
    if (!layout.ok()) return ctx->Error(layout.status().message());
    const AxisLayout& l = *layout;
    int32_t* y = ctx->Output("y")->data<int32_t>();
    for (int64_t o = 0; o < l.outer; ++o) {
      for (int64_t i = 0; i < l.inner; ++i) {
        const T* base = x.data<T>() + o * l.size * l.inner + i;
        y[o * l.inner + i] = static_cast<int32_t>(FirstMax(base, l.size, l.inner));
      }
    }
    return Status::OK();
  }

 private:
  int64_t axis_ = -1;
};

// Fraction of rows whose first-maximum class equals the label (0 when N = 0).
// A label outside [0, C) simply never matches.
template <typename T>
class AccuracyKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    const Blob& prediction = ctx->Input("prediction");
    const Blob& label = ctx->Input("label");
    const int64_t rows = prediction.shape().dim(0), classes = prediction.shape().dim(1);
    int64_t correct = 0;
    for (int64_t n = 0; n < rows; ++n) {
      correct += FirstMax(prediction.data<T>() + n * classes, classes, 1) == IndexAt(label, n);
    }
    *ctx->Output("out")->data<T>() = rows > 0 ? T(correct) / T(rows) : T(0);
    return Status::OK();
  }
};

REGISTER_NN_CPU_KERNELS("argmax", ArgmaxKernel);
REGISTER_NN_CPU_KERNELS("accuracy", AccuracyKernel);

}  // namespace
}  // namespace nn
}  // namespace oflite
