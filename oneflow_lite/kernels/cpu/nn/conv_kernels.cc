// CPU conv2d kernels. float32 runs on oneDNN (kernels/cpu/onednn) unless the
// reference kernels are selected (kernels/cpu/cpu_library.h), oneDNN is not
// built in, or it refuses the shape; float64 and those cases run the
// reference below: im2col + GEMM per sample.
//
// For sample n, with K = C * KH * KW and S = OH * OW:
//   col[K, S]    = im2col(x[n])
//   y[n][O, S]   = weight[O, K] * col
//   col          = weight^T * dy[n];  dx[n] = col2im(col)
//   dw[O, K]    += dy[n][O, S] * col^T
// The col scratch buffer (K * S elements) is allocated once in Init from the
// static shapes; Forward never allocates. A 1x1 kernel with stride 1 and no
// padding uses x[n] as col directly.
#include <algorithm>
#include <memory>
#include <type_traits>
#include <vector>

#include "oneflow_lite/kernels/cpu/cpu_library.h"
#include "oneflow_lite/kernels/cpu/nn/cpu_nn_util.h"
#include "oneflow_lite/kernels/cpu/onednn/onednn.h"
#include "oneflow_lite/kernels/kernel.h"
#include "oneflow_lite/ops/nn/nn_util.h"

namespace oflite {
namespace nn {
namespace {

// Output columns [begin, end) whose input column ow * stride_w - pad_w +
// kw * dilation_w falls inside the image; the others read padding.
struct ColumnRange {
  int64_t begin, end, offset;  // input column of output column ow: ow * stride_w + offset
};

ColumnRange ValidColumns(const Window2d& w, int64_t kw) {
  const int64_t offset = kw * w.dilation_w - w.pad_w;
  // ow * stride + offset >= 0  and  ow * stride + offset < width.
  const int64_t begin = offset >= 0 ? 0 : (-offset + w.stride_w - 1) / w.stride_w;
  const int64_t end = w.width - offset <= 0 ? 0 : (w.width - offset + w.stride_w - 1) / w.stride_w;
  return {std::min(begin, w.out_w), std::max(std::min(end, w.out_w), std::min(begin, w.out_w)),
          offset};
}

// Unfolds one sample image [C, H, W] into col [C*KH*KW, OH*OW].
template <typename T>
void Im2Col(const Window2d& w, const T* image, T* col) {
  for (int64_t c = 0; c < w.channels; ++c) {
    for (int64_t kh = 0; kh < w.kernel_h; ++kh) {
      for (int64_t kw = 0; kw < w.kernel_w; ++kw) {
        T* row = col + ((c * w.kernel_h + kh) * w.kernel_w + kw) * w.OutSpatial();
        const ColumnRange r = ValidColumns(w, kw);
        for (int64_t oh = 0; oh < w.out_h; ++oh) {
          const int64_t ih = oh * w.stride_h - w.pad_h + kh * w.dilation_h;
          T* out = row + oh * w.out_w;
          if (ih < 0 || ih >= w.height) {
            std::fill(out, out + w.out_w, T(0));
            continue;
          }
          const T* in = image + (c * w.height + ih) * w.width;
          std::fill(out, out + r.begin, T(0));
          if (w.stride_w == 1) {
            std::copy(in + r.begin + r.offset, in + r.end + r.offset, out + r.begin);
          } else {
            for (int64_t ow = r.begin; ow < r.end; ++ow) out[ow] = in[ow * w.stride_w + r.offset];
          }
          std::fill(out + r.end, out + w.out_w, T(0));
        }
      }
    }
  }
}

// Folds col back into image (image is overwritten: zeroed, then summed).
template <typename T>
void Col2Im(const Window2d& w, const T* col, T* image) {
  std::fill(image, image + w.channels * w.InSpatial(), T(0));
  for (int64_t c = 0; c < w.channels; ++c) {
    for (int64_t kh = 0; kh < w.kernel_h; ++kh) {
      for (int64_t kw = 0; kw < w.kernel_w; ++kw) {
        const T* row = col + ((c * w.kernel_h + kh) * w.kernel_w + kw) * w.OutSpatial();
        const ColumnRange r = ValidColumns(w, kw);
        for (int64_t oh = 0; oh < w.out_h; ++oh) {
          const int64_t ih = oh * w.stride_h - w.pad_h + kh * w.dilation_h;
          if (ih < 0 || ih >= w.height) continue;
          T* out = image + (c * w.height + ih) * w.width;
          const T* in = row + oh * w.out_w;
          if (w.stride_w == 1) {
            T* shifted = out + r.offset + r.begin;  // in bounds: column begin + offset >= 0
            for (int64_t ow = 0; ow < r.end - r.begin; ++ow) shifted[ow] += in[r.begin + ow];
          } else {
            for (int64_t ow = r.begin; ow < r.end; ++ow) out[ow * w.stride_w + r.offset] += in[ow];
          }
        }
      }
    }
  }
}

bool IsPointwise(const Window2d& w) {
  return w.kernel_h == 1 && w.kernel_w == 1 && w.stride_h == 1 && w.stride_w == 1 && w.pad_h == 0 &&
         w.pad_w == 0;
}

// Shared set-up: the window from (image shape, weight shape), and either the
// oneDNN pass (float32) or the reference's scratch.
template <typename T>
class ConvKernelBase : public Kernel {
 protected:
  Status InitWindow(const KernelInitContext& ctx, const Shape& image, const Shape& weight,
                    onednn::ConvPass pass) {
    auto window = MakeConvWindow(ctx.attrs(), image, weight);
    if (!window.ok()) {
      return InvalidArgumentError("op '", ctx.op->name(), "' (", ctx.op->op_type(),
                                  "): ", window.status().message());
    }
    window_ = *window;
    out_channels_ = weight.dim(0);
    if constexpr (std::is_same_v<T, float>) {
      if (GetCpuKernelLibrary() == CpuKernelLibrary::kOneDnn && onednn::Available()) {
        // A shape oneDNN refuses keeps the reference kernel (same results).
        auto library = onednn::Conv2d::Create(pass, window_, out_channels_);
        if (library.ok()) library_ = std::move(library).value();
      }
    }
    if (library_ == nullptr && !IsPointwise(window_)) col_.resize(ColSize());
    return Status::OK();
  }

  // The oneDNN pass over `batch` samples (library_ is set); a batch of 0
  // leaves the output to the caller.
  Status RunLibrary(KernelContext* ctx, int64_t batch, const T* first, const T* second, T* out) {
    if (batch == 0) return Status::OK();
    if constexpr (std::is_same_v<T, float>) {
      Status status = library_->Run(batch, first, second, out);
      if (!status.ok()) {
        return InternalError("op '", ctx->op().name(), "' (", ctx->op().op_type(),
                             ") at iteration ", ctx->iteration(), ": ", status.message());
      }
    }
    return Status::OK();
  }

  // Dynamic batch sizes are fine; any other change would outgrow the scratch.
  Status CheckImage(KernelContext* ctx, const Shape& image) const {
    if (image.rank() != 4 || image.dim(1) != window_.channels || image.dim(2) != window_.height ||
        image.dim(3) != window_.width || image.dim(0) > window_.batch) {
      return ctx->Error(
          "input shape ", image.ToString(), " differs from the planned ",
          Shape({window_.batch, window_.channels, window_.height, window_.width}).ToString());
    }
    return Status::OK();
  }

  int64_t ColRows() const { return window_.channels * window_.KernelSpatial(); }
  int64_t ColSize() const { return ColRows() * window_.OutSpatial(); }
  int64_t ImageSize() const { return window_.channels * window_.InSpatial(); }
  int64_t OutSize() const { return out_channels_ * window_.OutSpatial(); }

  // The col matrix of one sample (the sample itself for pointwise kernels).
  const T* Unfold(const T* image) {
    if (IsPointwise(window_)) return image;
    Im2Col(window_, image, col_.data());
    return col_.data();
  }

  Window2d window_;
  int64_t out_channels_ = 0;
  std::vector<T> col_;
  std::unique_ptr<onednn::Conv2d> library_;  // float32 with oneDNN only
};

template <typename T>
class Conv2dKernel final : public ConvKernelBase<T> {
 public:
  Status Init(const KernelInitContext& ctx) override {
    return this->InitWindow(ctx, ctx.Input("x").shape, ctx.Input("weight").shape,
                            onednn::ConvPass::kForward);
  }

  Status Forward(KernelContext* ctx) override {
    const Blob& x = ctx->Input("x");
    RETURN_IF_ERROR(this->CheckImage(ctx, x.shape()));
    const T* weight = ctx->Input("weight").data<T>();
    T* y = ctx->Output("y")->data<T>();
    if (this->library_) return this->RunLibrary(ctx, x.shape().dim(0), x.data<T>(), weight, y);
    const int64_t spatial = this->window_.OutSpatial();
    const int64_t k = this->ColRows();
    for (int64_t n = 0; n < x.shape().dim(0); ++n) {
      const T* col = this->Unfold(x.data<T>() + n * this->ImageSize());
      Gemm<T>(false, false, this->out_channels_, spatial, k, T(1), weight, k, col, spatial, T(0),
              y + n * this->OutSize(), spatial);
    }
    return Status::OK();
  }
};

template <typename T>
class Conv2dGradDataKernel final : public ConvKernelBase<T> {
 public:
  Status Init(const KernelInitContext& ctx) override {
    RETURN_IF_ERROR(this->InitWindow(ctx, ctx.Input("like").shape, ctx.Input("weight").shape,
                                     onednn::ConvPass::kBackwardData));
    if (IsPointwise(this->window_)) this->col_.clear();
    return Status::OK();
  }

  Status Forward(KernelContext* ctx) override {
    const Blob& dy = ctx->Input("dy");
    Blob* dx = ctx->Output("dx");
    RETURN_IF_ERROR(this->CheckImage(ctx, dx->shape()));
    const T* weight = ctx->Input("weight").data<T>();
    if (this->library_) {
      return this->RunLibrary(ctx, dx->shape().dim(0), dy.data<T>(), weight, dx->data<T>());
    }
    const int64_t spatial = this->window_.OutSpatial();
    const int64_t k = this->ColRows();
    const bool pointwise = IsPointwise(this->window_);
    for (int64_t n = 0; n < dx->shape().dim(0); ++n) {
      T* image = dx->data<T>() + n * this->ImageSize();
      T* col = pointwise ? image : this->col_.data();
      Gemm<T>(true, false, k, spatial, this->out_channels_, T(1), weight, k,
              dy.data<T>() + n * this->OutSize(), spatial, T(0), col, spatial);
      if (!pointwise) Col2Im(this->window_, col, image);
    }
    return Status::OK();
  }
};

template <typename T>
class Conv2dGradFilterKernel final : public ConvKernelBase<T> {
 public:
  Status Init(const KernelInitContext& ctx) override {
    return this->InitWindow(ctx, ctx.Input("x").shape, ctx.Input("like").shape,
                            onednn::ConvPass::kBackwardWeights);
  }

  Status Forward(KernelContext* ctx) override {
    const Blob& x = ctx->Input("x");
    RETURN_IF_ERROR(this->CheckImage(ctx, x.shape()));
    const T* dy = ctx->Input("dy").data<T>();
    Blob* dw_blob = ctx->Output("dw");
    T* dw = dw_blob->data<T>();
    if (this->library_ && x.shape().dim(0) > 0) {
      return this->RunLibrary(ctx, x.shape().dim(0), x.data<T>(), dy, dw);
    }
    std::fill(dw, dw + dw_blob->elem_count(), T(0));
    const int64_t spatial = this->window_.OutSpatial();
    const int64_t k = this->ColRows();
    for (int64_t n = 0; n < x.shape().dim(0); ++n) {
      const T* col = this->Unfold(x.data<T>() + n * this->ImageSize());
      Gemm<T>(false, true, this->out_channels_, k, spatial, T(1), dy + n * this->OutSize(), spatial,
              col, spatial, T(1), dw, k);
    }
    return Status::OK();
  }
};

REGISTER_NN_CPU_KERNELS("conv2d", Conv2dKernel);
REGISTER_NN_CPU_KERNELS("conv2d_grad_data", Conv2dGradDataKernel);
REGISTER_NN_CPU_KERNELS("conv2d_grad_filter", Conv2dGradFilterKernel);

}  // namespace
}  // namespace nn
}  // namespace oflite
