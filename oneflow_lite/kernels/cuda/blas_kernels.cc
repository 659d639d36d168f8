// matmul (cuBLAS; rank >= 2 with broadcast batch dims) and conv2d /
// conv2d_grad_data / conv2d_grad_filter (cuDNN), float32.
//
// matmul computes in full FP32 by default. TF32 tensor cores are an opt-in:
// the bool attribute `allow_tf32` on the op, or the stream context's
// allow_tf32 (DeviceBackendOptions, from RuntimeOptions::device; oflite run
// sets it from OFLITE_CUDA_ALLOW_TF32=1) for every matmul of the run.
//
// The convolutions build their cuDNN descriptors and pick an algorithm once
// in Init (FMA math only: no TF32, so results stay within FP32 rounding of
// the CPU kernel), then allocate that algorithm's workspace once; Forward
// only launches. Blob shapes must equal the planned ones. The algorithm is
// the fastest deterministic one cuDNN measures (cudnnFind*Ex on scratch
// buffers; the heuristics' first deterministic candidate if measuring
// fails), chosen once per process for each convolution geometry, so every
// kernel of one convolution (two runs of a plan) uses the same algorithm.
// OFLITE_CUDNN_NOTES=1 prints each choice with the measured times to stderr;
// OFLITE_CUDNN_ALGOS=direct leaves out the FFT and Winograd algorithms
// (closer to the CPU kernel's rounding, often slower).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>
#include <string>

#include "oneflow_lite/kernels/cuda/cuda_kernel_util.h"
#include "oneflow_lite/ops/math/matmul_util.h"
#include "oneflow_lite/ops/nn/nn_util.h"

namespace oflite {
namespace cuda {
namespace {

// out = alpha * op(a) op(b) over the batch dims (ops/math/matmul_util.h):
// one cublasGemmEx when the batch folds into the rows (2-D, the Linear
// case) or, under sum_batch, into k; otherwise cublasGemmStridedBatchedEx
// over the innermost merged batch axis (stride 0 for an operand broadcast
// along it), looped over the outer axes, which broadcast differently; and
// for the rest of sum_batch a loop of GEMMs accumulating into out.
class MatmulKernel final : public Kernel {
 public:
  Status Init(const KernelInitContext& ctx) override {
    transpose_a_ = ctx.attrs().GetBoolOr("transpose_a", false);
    transpose_b_ = ctx.attrs().GetBoolOr("transpose_b", false);
    sum_batch_ = ctx.attrs().GetBoolOr("sum_batch", false);
    alpha_ = static_cast<float>(ctx.attrs().GetFloatOr("alpha", 1.0));
    allow_tf32_ = ctx.attrs().GetBoolOr("allow_tf32", false);
    return Status::OK();
  }

  Status Forward(KernelContext* ctx) override {
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    const Blob& a = ctx->Input("a");
    const Blob& b = ctx->Input("b");
    Blob* out = ctx->Output("out");
    RETURN_IF_ERROR(Prepare(*ctx, a.shape(), b.shape()));
    const math::MatmulGeometry& g = geometry_;
    if (out->shape() != g.out) {
      return ctx->Error("shapes do not multiply: a ", a.shape(), ", b ", b.shape(), ", out ",
                        out->shape());
    }
    if (out->elem_count() == 0) return Status::OK();
    if (g.k == 0 || g.batch_count == 0) {
      CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out->raw(), 0, out->ByteSize(), cuda->stream()));
      return Status::OK();
    }
    const cublasComputeType_t compute =
        allow_tf32_ || cuda->allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    const Gemm gemm{cuda->cublas(), compute, a.data<float>(), b.data<float>(), out->data<float>()};
    if (g.FoldsIntoRows()) {
      return Run(gemm, transpose_a_, transpose_b_, g.batch_count * g.m, g.k, {}, 0.f, {});
    }
    if (g.FoldsIntoInner()) return Run(gemm, true, false, g.m, g.batch_count * g.k, {}, 0.f, {});
    if (g.sum_batch) {
      for (int64_t i = 0; i < g.batch_count; ++i) {
        Offsets at;
        g.Offsets(i, &at.a, &at.b, &at.out);
        RETURN_IF_ERROR(Run(gemm, transpose_a_, transpose_b_, g.m, g.k, {}, i > 0 ? 1.f : 0.f, at));
      }
      return Status::OK();
    }
    const math::MatmulGeometry::BatchAxis& inner = g.batch.back();
    for (int64_t outer = 0; outer < g.batch_count / inner.extent; ++outer) {
      Offsets at;
      g.Offsets(outer * inner.extent, &at.a, &at.b, &at.out);
      RETURN_IF_ERROR(Run(gemm, transpose_a_, transpose_b_, g.m, g.k, inner, 0.f, at));
    }
    return Status::OK();
  }

 private:
  struct Gemm {
    cublasHandle_t handle;
    cublasComputeType_t compute;
    const float* a;
    const float* b;
    float* out;
  };
  // Element offsets of the first matrices of a call.
  struct Offsets {
    int64_t a = 0, b = 0, out = 0;
  };

  // Row-major out[rows, n] = alpha * op(a)[rows, k] op(b)[k, n] + beta * out
  // for `batch.extent` entries (strides from `batch`; extent 0 means one),
  // the first at the element offsets in `at`. Row-major C = op(A) op(B) is
  // column-major C^T = op(B)^T op(A)^T.
  Status Run(const Gemm& gemm, bool ta, bool tb, int64_t rows, int64_t k,
             const math::MatmulGeometry::BatchAxis& batch, float beta, const Offsets& at) const {
    const math::MatmulGeometry& g = geometry_;
    const auto i = [](int64_t v) { return static_cast<int>(v); };
    const cublasOperation_t op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    const float* a = gemm.a + at.a;
    const float* b = gemm.b + at.b;
    float* c = gemm.out + at.out;
    if (batch.extent <= 1) {
      CUBLAS_RETURN_IF_ERROR(cublasGemmEx(gemm.handle, op_b, op_a, i(g.n), i(rows), i(k), &alpha_,
                                          b, CUDA_R_32F, i(g.b_cols), a, CUDA_R_32F, i(g.a_cols),
                                          &beta, c, CUDA_R_32F, i(g.n), gemm.compute,
                                          CUBLAS_GEMM_DEFAULT));
      return Status::OK();
    }
    CUBLAS_RETURN_IF_ERROR(cublasGemmStridedBatchedEx(
        gemm.handle, op_b, op_a, i(g.n), i(rows), i(k), &alpha_, b, CUDA_R_32F, i(g.b_cols),
        batch.b_stride, a, CUDA_R_32F, i(g.a_cols), batch.a_stride, &beta, c, CUDA_R_32F, i(g.n),
        batch.out_stride, i(batch.extent), gemm.compute, CUBLAS_GEMM_DEFAULT));
    return Status::OK();
  }

  // The geometry of these blob shapes, kept while they stay the same.
  Status Prepare(const KernelContext& ctx, const Shape& a, const Shape& b) {
    if (prepared_ && a == a_shape_ && b == b_shape_) return Status::OK();
    StatusOr<math::MatmulGeometry> g =
        math::MakeMatmulGeometry(a, b, transpose_a_, transpose_b_, sum_batch_);
    if (!g.ok()) return ctx.Error(g.status().message());
    constexpr int64_t kMaxInt = std::numeric_limits<int>::max();
    if (std::max({g->n, g->a_cols, g->b_cols, g->batch_count * g->m, g->batch_count * g->k,
                  g->batch_count}) > kMaxInt) {
      return ctx.Error("dimension too large for cuBLAS (int): a ", a, ", b ", b);
    }
    geometry_ = std::move(*g);
    a_shape_ = a;
    b_shape_ = b;
    prepared_ = true;
    return Status::OK();
  }

  bool transpose_a_ = false, transpose_b_ = false, sum_batch_ = false, allow_tf32_ = false;
  float alpha_ = 1.f;
  bool prepared_ = false;
  Shape a_shape_, b_shape_;
  math::MatmulGeometry geometry_;
};

enum class ConvKind { kForward, kGradData, kGradFilter };

constexpr size_t kMaxWorkspaceBytes = size_t{512} << 20;

// The descriptor asks for FMA math; a candidate reported with default math
// runs under that restriction too. Tensor-core (TF32) candidates are skipped.
bool NoTensorCores(cudnnMathType_t type) {
  return type == CUDNN_FMA_MATH || type == CUDNN_DEFAULT_MATH;
}

// FFT and Winograd algorithms transform the operands and round differently
// from a direct convolution (about 1e-5 relative per call, more after many
// momentum steps); the GEMM-like ones sum the products as the CPU kernel
// does, to FP32 rounding.
bool TransformAlgorithm(cudnnConvolutionFwdAlgo_t a) {
  return a == CUDNN_CONVOLUTION_FWD_ALGO_FFT || a == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD ||
         a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
}
bool TransformAlgorithm(cudnnConvolutionBwdDataAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT ||
         a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD ||
         a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
}
bool TransformAlgorithm(cudnnConvolutionBwdFilterAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT ||
         a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
}

// OFLITE_CUDNN_ALGOS=direct keeps to the GEMM-like algorithms (the GPU
// check's comparison with the CPU plan uses it); unset or "fastest": any
// deterministic algorithm, the fastest measured.
bool DirectAlgorithmsOnly() {
  static const bool direct = [] {
    const char* mode = std::getenv("OFLITE_CUDNN_ALGOS");
    return mode != nullptr && std::string(mode) == "direct";
  }();
  return direct;
}

const char* ConvKindName(ConvKind kind) {
  switch (kind) {
    case ConvKind::kForward: return "forward";
    case ConvKind::kGradData: return "grad_data";
    case ConvKind::kGradFilter: return "grad_filter";
  }
  return "?";
}

// The algorithm chosen for a convolution geometry (see the file comment).
struct ConvChoice {
  int algo = 0;
  std::string note;
};

std::mutex& ConvChoicesMutex() {
  static std::mutex* mutex = new std::mutex;
  return *mutex;
}

std::map<std::string, ConvChoice>& ConvChoices() {
  static auto* choices = new std::map<std::string, ConvChoice>;
  return *choices;
}

bool ConvNotesWanted() {
  const char* notes = std::getenv("OFLITE_CUDNN_NOTES");
  return notes != nullptr && notes[0] == '1';
}

// Device scratch buffers for measuring algorithms, freed on scope exit.
class Scratch {
 public:
  ~Scratch() {
    for (void* p : buffers_) cudaFree(p);
  }
  // Zeroed (finite inputs: no NaN or denormal slow paths while timing).
  void* Get(size_t bytes, cudaStream_t stream) {
    void* p = nullptr;
    if (cudaMalloc(&p, bytes > 0 ? bytes : 1) != cudaSuccess) {
      cudaGetLastError();
      ok_ = false;
      return nullptr;
    }
    buffers_.push_back(p);
    if (cudaMemsetAsync(p, 0, bytes, stream) != cudaSuccess) ok_ = false;
    return p;
  }
  bool ok() const { return ok_; }

 private:
  std::vector<void*> buffers_;
  bool ok_ = true;
};

template <ConvKind kKind>
class ConvKernel final : public Kernel {
 public:
  ~ConvKernel() override {
    if (workspace_ != nullptr) cudaFree(workspace_);
    if (conv_ != nullptr) cudnnDestroyConvolutionDescriptor(conv_);
    if (filter_ != nullptr) cudnnDestroyFilterDescriptor(filter_);
    if (x_desc_ != nullptr) cudnnDestroyTensorDescriptor(x_desc_);
    if (y_desc_ != nullptr) cudnnDestroyTensorDescriptor(y_desc_);
  }

  Status Init(const KernelInitContext& ctx) override {
    Status status = InitDescriptors(ctx);
    if (!status.ok()) {
      return InvalidArgumentError("op '", ctx.op->name(), "' (", ctx.op->op_type(),
                                  "): ", status.message());
    }
    return Status::OK();
  }

  Status Forward(KernelContext* ctx) override {
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    const float alpha = 1.f, beta = 0.f;
    switch (kKind) {
      case ConvKind::kForward: {
        RETURN_IF_ERROR(CheckShape(*ctx, ctx->Input("x").shape(), x_shape_, "x"));
        RETURN_IF_ERROR(CheckShape(*ctx, ctx->Output("y")->shape(), y_shape_, "y"));
        CUDNN_RETURN_IF_ERROR(cudnnConvolutionForward(
            cuda->cudnn(), &alpha, x_desc_, ctx->Input("x").raw(), filter_,
            ctx->Input("weight").raw(), conv_, forward_algo_, workspace_, workspace_bytes_,
            &beta, y_desc_, ctx->Output("y")->raw()));
        break;
      }
      case ConvKind::kGradData: {
        RETURN_IF_ERROR(CheckShape(*ctx, ctx->Input("dy").shape(), y_shape_, "dy"));
        RETURN_IF_ERROR(CheckShape(*ctx, ctx->Output("dx")->shape(), x_shape_, "dx"));
        CUDNN_RETURN_IF_ERROR(cudnnConvolutionBackwardData(
            cuda->cudnn(), &alpha, filter_, ctx->Input("weight").raw(), y_desc_,
            ctx->Input("dy").raw(), conv_, data_algo_, workspace_, workspace_bytes_, &beta,
            x_desc_, ctx->Output("dx")->raw()));
        break;
      }
      case ConvKind::kGradFilter: {
        RETURN_IF_ERROR(CheckShape(*ctx, ctx->Input("dy").shape(), y_shape_, "dy"));
        RETURN_IF_ERROR(CheckShape(*ctx, ctx->Input("x").shape(), x_shape_, "x"));
        CUDNN_RETURN_IF_ERROR(cudnnConvolutionBackwardFilter(
            cuda->cudnn(), &alpha, x_desc_, ctx->Input("x").raw(), y_desc_,
            ctx->Input("dy").raw(), conv_, filter_algo_, workspace_, workspace_bytes_, &beta,
            filter_, ctx->Output("dw")->raw()));
        break;
      }
    }
    return Status::OK();
  }

 private:
  static Status CheckShape(const KernelContext& ctx, const Shape& got, const Shape& planned,
                           const char* arg) {
    if (got != planned) return ctx.Error(arg, " ", got, " differs from the planned ", planned);
    return Status::OK();
  }

  Status InitDescriptors(const KernelInitContext& ctx) {
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(ctx));
    RETURN_IF_ERROR(cuda->Activate());
    const char* image_arg = kKind == ConvKind::kForward ? "x" : (kKind == ConvKind::kGradData ? "like" : "x");
    const char* weight_arg = kKind == ConvKind::kGradFilter ? "like" : "weight";
    x_shape_ = ctx.Input(image_arg).shape;
    w_shape_ = ctx.Input(weight_arg).shape;
    ASSIGN_OR_RETURN(nn::Window2d w, nn::MakeConvWindow(ctx.attrs(), x_shape_, w_shape_));
    window_ = w;
    y_shape_ = Shape({w.batch, w_shape_.dim(0), w.out_h, w.out_w});
    const auto i = [](int64_t v) { return static_cast<int>(v); };
    CUDNN_RETURN_IF_ERROR(cudnnCreateTensorDescriptor(&x_desc_));
    CUDNN_RETURN_IF_ERROR(cudnnCreateTensorDescriptor(&y_desc_));
    CUDNN_RETURN_IF_ERROR(cudnnCreateFilterDescriptor(&filter_));
    CUDNN_RETURN_IF_ERROR(cudnnCreateConvolutionDescriptor(&conv_));
    CUDNN_RETURN_IF_ERROR(cudnnSetTensor4dDescriptor(x_desc_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                                     i(x_shape_.dim(0)), i(x_shape_.dim(1)),
                                                     i(x_shape_.dim(2)), i(x_shape_.dim(3))));
    CUDNN_RETURN_IF_ERROR(cudnnSetTensor4dDescriptor(y_desc_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                                     i(y_shape_.dim(0)), i(y_shape_.dim(1)),
                                                     i(y_shape_.dim(2)), i(y_shape_.dim(3))));
    CUDNN_RETURN_IF_ERROR(cudnnSetFilter4dDescriptor(filter_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
                                                     i(w_shape_.dim(0)), i(w_shape_.dim(1)),
                                                     i(w_shape_.dim(2)), i(w_shape_.dim(3))));
    CUDNN_RETURN_IF_ERROR(cudnnSetConvolution2dDescriptor(
        conv_, i(w.pad_h), i(w.pad_w), i(w.stride_h), i(w.stride_w), i(w.dilation_h),
        i(w.dilation_w), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    CUDNN_RETURN_IF_ERROR(cudnnSetConvolutionMathType(conv_, CUDNN_FMA_MATH));
    if (x_shape_.elem_count() == 0 || y_shape_.elem_count() == 0) {
      return InvalidArgumentError("empty convolution (x ", x_shape_, ") is not supported on CUDA");
    }
    RETURN_IF_ERROR(ChooseAlgorithm(*cuda));
    if (workspace_bytes_ > 0) CUDA_RETURN_IF_ERROR(cudaMalloc(&workspace_, workspace_bytes_));
    return Status::OK();
  }

  // The first candidate without tensor cores that fits, preferring
  // deterministic ones (cuDNN's perf[k].determinism): a non-deterministic
  // algorithm (atomics) makes two runs of one plan differ, and the GPU check
  // compares runs. -1 when none fits. Candidates come sorted (by expected
  // time from the heuristics, by measured time from cudnnFind*).
  template <typename Perf>
  static int PickAlgorithm(const Perf* perf, int found) {
    for (bool need_deterministic : {true, false}) {
      for (int k = 0; k < found; ++k) {
        if (perf[k].status != CUDNN_STATUS_SUCCESS || !NoTensorCores(perf[k].mathType) ||
            perf[k].memory > kMaxWorkspaceBytes ||
            (DirectAlgorithmsOnly() && TransformAlgorithm(perf[k].algo))) {
          continue;
        }
        if (need_deterministic && perf[k].determinism != CUDNN_DETERMINISTIC) continue;
        return k;
      }
    }
    return -1;
  }

  // The largest workspace a usable heuristic candidate asks for.
  template <typename Perf>
  static size_t LargestWorkspace(const Perf* perf, int found) {
    size_t bytes = 0;
    for (int k = 0; k < found; ++k) {
      if (perf[k].status == CUDNN_STATUS_SUCCESS && perf[k].memory <= kMaxWorkspaceBytes) {
        bytes = std::max(bytes, perf[k].memory);
      }
    }
    return bytes;
  }

  // "algo A det 0.123 ms, ..." for the notes.
  template <typename Perf>
  static std::string Candidates(const Perf* perf, int found) {
    std::ostringstream os;
    for (int k = 0; k < found; ++k) {
      if (perf[k].status != CUDNN_STATUS_SUCCESS) continue;
      os << (os.tellp() > 0 ? ", " : "") << "algo " << static_cast<int>(perf[k].algo)
         << (perf[k].determinism == CUDNN_DETERMINISTIC ? " det " : " nondet ") << perf[k].time
         << " ms" << (NoTensorCores(perf[k].mathType) ? "" : " (tensor cores)")
         << (perf[k].memory > kMaxWorkspaceBytes ? " (workspace too large)" : "");
    }
    return os.str();
  }

  std::string GeometryKey(int device) const {
    std::ostringstream os;
    os << "cuda:" << device << " " << ConvKindName(kKind) << " x" << x_shape_ << " w" << w_shape_
       << " pad " << window_.pad_h << "," << window_.pad_w << " stride " << window_.stride_h << ","
       << window_.stride_w << " dilation " << window_.dilation_h << "," << window_.dilation_w;
    return os.str();
  }

  // Heuristic candidates, then (unless that fails) measured ones; picks with
  // PickAlgorithm. Returns the algorithm index, -1 if none fits.
  template <typename Perf, typename Heuristic, typename Find>
  static int Choose(const char* what, Heuristic heuristic, Find find, std::string* note,
                    Status* error) {
    constexpr int kWant = 16;
    Perf perf[kWant];
    int found = 0;
    cudnnStatus_t st = heuristic(kWant, &found, perf);
    if (st != CUDNN_STATUS_SUCCESS) {
      *error = InternalError(what, ": ", cudnnGetErrorString(st));
      return -1;
    }
    const int k = PickAlgorithm(perf, found);
    if (k < 0) return -1;
    Perf measured[kWant];
    int measured_found = 0;
    std::string why;
    st = find(LargestWorkspace(perf, found), kWant, &measured_found, measured, &why);
    const int m = st == CUDNN_STATUS_SUCCESS ? PickAlgorithm(measured, measured_found) : -1;
    if (m >= 0) {
      *note = std::string("measured: ") + Candidates(measured, measured_found);
      return static_cast<int>(measured[m].algo);
    }
    *note = "heuristic (measuring failed: " +
            (why.empty() ? std::string(cudnnGetErrorString(st)) : why) +
            "): " + Candidates(perf, found);
    return static_cast<int>(perf[k].algo);
  }

  // The algorithm of this convolution direction (see the file comment).
  Status ChooseAlgorithm(const CudaDeviceContext& cuda) {
    cudnnHandle_t handle = cuda.cudnn();
    cudaStream_t stream = cuda.stream();
    const std::string key = GeometryKey(cuda.device_index());
    std::lock_guard<std::mutex> lock(ConvChoicesMutex());
    auto cached = ConvChoices().find(key);
    int algo = -1;
    if (cached != ConvChoices().end()) {
      algo = cached->second.algo;
    } else {
      std::string note;
      Status error;
      const size_t x_bytes = x_shape_.elem_count() * sizeof(float);
      const size_t y_bytes = y_shape_.elem_count() * sizeof(float);
      const size_t w_bytes = w_shape_.elem_count() * sizeof(float);
      // Measures into scratch buffers; `why` explains a failure outside cuDNN.
      auto measure = [&](auto run) {
        return [&, run](size_t workspace, int want, int* found, auto* perf, std::string* why) {
          Scratch scratch;
          void* x = scratch.Get(x_bytes, stream);
          void* y = scratch.Get(y_bytes, stream);
          void* w = scratch.Get(w_bytes, stream);
          void* ws = scratch.Get(workspace, stream);
          if (!scratch.ok() || cudaStreamSynchronize(stream) != cudaSuccess) {
            cudaGetLastError();
            *why = "no device memory for the scratch buffers";
            return CUDNN_STATUS_ALLOC_FAILED;
          }
          return run(x, y, w, ws, workspace, want, found, perf);
        };
      };
      if (kKind == ConvKind::kForward) {
        algo = Choose<cudnnConvolutionFwdAlgoPerf_t>(
            "cudnnGetConvolutionForwardAlgorithm_v7",
            [&](int want, int* found, cudnnConvolutionFwdAlgoPerf_t* perf) {
              return cudnnGetConvolutionForwardAlgorithm_v7(handle, x_desc_, filter_, conv_,
                                                            y_desc_, want, found, perf);
            },
            measure([&](void* x, void* y, void* w, void* ws, size_t ws_bytes, int want,
                        int* found, cudnnConvolutionFwdAlgoPerf_t* perf) {
              return cudnnFindConvolutionForwardAlgorithmEx(handle, x_desc_, x, filter_, w, conv_,
                                                            y_desc_, y, want, found, perf, ws,
                                                            ws_bytes);
            }),
            &note, &error);
      } else if (kKind == ConvKind::kGradData) {
        algo = Choose<cudnnConvolutionBwdDataAlgoPerf_t>(
            "cudnnGetConvolutionBackwardDataAlgorithm_v7",
            [&](int want, int* found, cudnnConvolutionBwdDataAlgoPerf_t* perf) {
              return cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, filter_, y_desc_, conv_,
                                                                 x_desc_, want, found, perf);
            },
            measure([&](void* x, void* y, void* w, void* ws, size_t ws_bytes, int want,
                        int* found, cudnnConvolutionBwdDataAlgoPerf_t* perf) {
              return cudnnFindConvolutionBackwardDataAlgorithmEx(handle, filter_, w, y_desc_, y,
                                                                 conv_, x_desc_, x, want, found,
                                                                 perf, ws, ws_bytes);
            }),
            &note, &error);
      } else {
        algo = Choose<cudnnConvolutionBwdFilterAlgoPerf_t>(
            "cudnnGetConvolutionBackwardFilterAlgorithm_v7",
            [&](int want, int* found, cudnnConvolutionBwdFilterAlgoPerf_t* perf) {
              return cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, x_desc_, y_desc_,
                                                                   conv_, filter_, want, found,
                                                                   perf);
            },
            measure([&](void* x, void* y, void* w, void* ws, size_t ws_bytes, int want,
                        int* found, cudnnConvolutionBwdFilterAlgoPerf_t* perf) {
              return cudnnFindConvolutionBackwardFilterAlgorithmEx(handle, x_desc_, x, y_desc_, y,
                                                                   conv_, filter_, w, want, found,
                                                                   perf, ws, ws_bytes);
            }),
            &note, &error);
      }
      RETURN_IF_ERROR(error);
      if (algo < 0) {
        return InternalError("cuDNN offered no algorithm without tensor cores for x ", x_shape_,
                             ", weight ", w_shape_, " within ", kMaxWorkspaceBytes >> 20,
                             " MiB of workspace");
      }
      cudaGetLastError();  // a failed scratch allocation is not this kernel's error
      ConvChoices()[key] = ConvChoice{algo, note};
      if (ConvNotesWanted()) {
        std::fprintf(stderr, "cudnn %s: algo %d; %s\n", key.c_str(), algo, note.c_str());
      }
    }
    switch (kKind) {
      case ConvKind::kForward:
        forward_algo_ = static_cast<cudnnConvolutionFwdAlgo_t>(algo);
        CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionForwardWorkspaceSize(
            handle, x_desc_, filter_, conv_, y_desc_, forward_algo_, &workspace_bytes_));
        break;
      case ConvKind::kGradData:
        data_algo_ = static_cast<cudnnConvolutionBwdDataAlgo_t>(algo);
        CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionBackwardDataWorkspaceSize(
            handle, filter_, y_desc_, conv_, x_desc_, data_algo_, &workspace_bytes_));
        break;
      case ConvKind::kGradFilter:
        filter_algo_ = static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo);
        CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionBackwardFilterWorkspaceSize(
            handle, x_desc_, y_desc_, conv_, filter_, filter_algo_, &workspace_bytes_));
        break;
    }
    return Status::OK();
  }

  Shape x_shape_, w_shape_, y_shape_;
  nn::Window2d window_;
  cudnnTensorDescriptor_t x_desc_ = nullptr, y_desc_ = nullptr;
  cudnnFilterDescriptor_t filter_ = nullptr;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
  cudnnConvolutionFwdAlgo_t forward_algo_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  cudnnConvolutionBwdDataAlgo_t data_algo_ = CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;
  cudnnConvolutionBwdFilterAlgo_t filter_algo_ = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
};

REGISTER_KERNEL("matmul", DEVICE_CUDA, DT_FLOAT, MatmulKernel);
REGISTER_KERNEL("conv2d", DEVICE_CUDA, DT_FLOAT, ConvKernel<ConvKind::kForward>);
REGISTER_KERNEL("conv2d_grad_data", DEVICE_CUDA, DT_FLOAT, ConvKernel<ConvKind::kGradData>);
REGISTER_KERNEL("conv2d_grad_filter", DEVICE_CUDA, DT_FLOAT, ConvKernel<ConvKind::kGradFilter>);

}  // namespace
}  // namespace cuda
}  // namespace oflite
