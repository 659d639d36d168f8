// oneDNN 2.x (Debian libdnnl-dev) behind onednn.h. The C++ API reports
// failures as dnnl::error exceptions; every entry point catches them here and
// returns a Status, so no exception crosses the header.
#include "oneflow_lite/kernels/cpu/onednn/onednn.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <oneapi/dnnl/dnnl_debug.h>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "oneflow_lite/kernels/cpu/cpu_threads.h"

namespace oflite {
namespace onednn {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;

std::atomic<int64_t> g_conv_primitives{0};

// Sizes the calling thread's OpenMP team to the cpu_threads setting (see the
// header), or to `limit` threads if fewer, and returns the team size oneDNN
// will use.
// Never more than OMP_THREAD_LIMIT allows: oneDNN plans its work (and its
// barriers) for omp_get_max_threads() threads, which the limit does not
// lower, and a team cut to fewer threads than planned spun forever in a
// barrier (OMP_THREAD_LIMIT=1 hung LeNet-5's training).
int ApplyThreads(int64_t limit = 1 << 30) {
  limit = std::min<int64_t>(limit, std::max(1, omp_get_thread_limit()));
  int wanted = CpuComputeThreadsSetting();
  if (wanted <= 0) wanted = omp_get_max_threads();
  wanted = static_cast<int>(std::min<int64_t>(wanted, std::max<int64_t>(1, limit)));
  if (omp_get_max_threads() != wanted) omp_set_num_threads(wanted);
  return omp_get_max_threads();
}

// Multiply-adds per thread below which a GEMM is not split: a small GEMM
// gains little from a second thread and, when the cores are shared (several
// ranks on one host), loses much waiting at the team's barrier for a
// descheduled worker (OpenBLAS likewise keeps small GEMMs on one thread).
constexpr int64_t kGemmWorkPerThread = int64_t{1} << 22;

std::string Geometry(const Window2d& w, int64_t out_channels, int64_t batch) {
  std::ostringstream text;
  text << "conv2d x [" << batch << "," << w.channels << "," << w.height << "," << w.width
       << "] weight [" << out_channels << "," << w.channels << "," << w.kernel_h << ","
       << w.kernel_w << "] strides " << w.stride_h << "," << w.stride_w << " padding " << w.pad_h
       << "," << w.pad_w << " dilations " << w.dilation_h << "," << w.dilation_w;
  return text.str();
}

// The memory descriptors and window of one batch size, in oneDNN's terms.
struct ConvDescs {
  memory::desc x, weight, y;
  memory::dims strides, dilates, pad_left, pad_right;
};

// Right padding that makes oneDNN's output size formula give out exactly
// (negative when the last input rows are never read).
int64_t PadRight(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t dilation,
                 int64_t pad_left) {
  return (out - 1) * stride + (kernel - 1) * dilation + 1 - in - pad_left;
}

ConvDescs MakeDescs(const Window2d& w, int64_t out_channels, int64_t batch, bool any_layout) {
  const auto f32 = memory::data_type::f32;
  ConvDescs d;
  d.x = memory::desc({batch, w.channels, w.height, w.width}, f32,
                     any_layout ? Tag::any : Tag::nchw);
  d.weight = memory::desc({out_channels, w.channels, w.kernel_h, w.kernel_w}, f32,
                          any_layout ? Tag::any : Tag::oihw);
  d.y = memory::desc({batch, out_channels, w.out_h, w.out_w}, f32,
                     any_layout ? Tag::any : Tag::nchw);
  d.strides = {w.stride_h, w.stride_w};
  d.dilates = {w.dilation_h - 1, w.dilation_w - 1};  // oneDNN counts the gaps
  d.pad_left = {w.pad_h, w.pad_w};
  d.pad_right = {PadRight(w.height, w.out_h, w.kernel_h, w.stride_h, w.dilation_h, w.pad_h),
                 PadRight(w.width, w.out_w, w.kernel_w, w.stride_w, w.dilation_w, w.pad_w)};
  return d;
}

// One argument of a primitive: the caller's dense buffer and, where oneDNN
// prefers another layout, the copy the primitive reads or writes.
struct Port {
  int arg = 0;
  memory user;   // the caller's buffer; its handle is set on every call
  memory inner;  // what the primitive uses (the same object without reorder)
  dnnl::reorder reorder;  // user -> inner for inputs, inner -> user for outputs
  bool reordered = false;
};

Port MakePort(int arg, const memory::desc& user_desc, const memory::desc& wanted,
              const dnnl::engine& engine, bool output) {
  Port port;
  port.arg = arg;
  port.user = memory(user_desc, engine, DNNL_MEMORY_NONE);
  if (wanted == user_desc) {
    port.inner = port.user;
    return port;
  }
  port.inner = memory(wanted, engine);
  port.reorder = output ? dnnl::reorder(port.inner, port.user) : dnnl::reorder(port.user, port.inner);
  port.reordered = true;
  return port;
}

// The primitive of one (batch, thread count) with its two inputs and output.
struct Executable {
  dnnl::primitive primitive;
  Port first, second, out;
};

Executable Build(ConvPass pass, const Window2d& w, int64_t out_channels, int64_t batch,
                 const dnnl::engine& engine) {
  namespace d = dnnl;
  const ConvDescs plain = MakeDescs(w, out_channels, batch, false);
  const ConvDescs any = MakeDescs(w, out_channels, batch, true);
  const auto algorithm = d::algorithm::convolution_direct;
  const d::convolution_forward::primitive_desc forward(
      d::convolution_forward::desc(d::prop_kind::forward_training, algorithm, any.x, any.weight,
                                   any.y, plain.strides, plain.dilates, plain.pad_left,
                                   plain.pad_right),
      engine);
  Executable e;
  if (pass == ConvPass::kForward) {
    e.primitive = d::convolution_forward(forward);
    e.first = MakePort(DNNL_ARG_SRC, plain.x, forward.src_desc(), engine, false);
    e.second = MakePort(DNNL_ARG_WEIGHTS, plain.weight, forward.weights_desc(), engine, false);
    e.out = MakePort(DNNL_ARG_DST, plain.y, forward.dst_desc(), engine, true);
  } else if (pass == ConvPass::kBackwardData) {
    const d::convolution_backward_data::primitive_desc pd(
        d::convolution_backward_data::desc(algorithm, any.x, any.weight, any.y, plain.strides,
                                           plain.dilates, plain.pad_left, plain.pad_right),
        engine, forward);
    e.primitive = d::convolution_backward_data(pd);
    e.first = MakePort(DNNL_ARG_DIFF_DST, plain.y, pd.diff_dst_desc(), engine, false);
    e.second = MakePort(DNNL_ARG_WEIGHTS, plain.weight, pd.weights_desc(), engine, false);
    e.out = MakePort(DNNL_ARG_DIFF_SRC, plain.x, pd.diff_src_desc(), engine, true);
  } else {
    const d::convolution_backward_weights::primitive_desc pd(
        d::convolution_backward_weights::desc(algorithm, any.x, any.weight, any.y, plain.strides,
                                              plain.dilates, plain.pad_left, plain.pad_right),
        engine, forward);
    e.primitive = d::convolution_backward_weights(pd);
    e.first = MakePort(DNNL_ARG_SRC, plain.x, pd.src_desc(), engine, false);
    e.second = MakePort(DNNL_ARG_DIFF_DST, plain.y, pd.diff_dst_desc(), engine, false);
    e.out = MakePort(DNNL_ARG_DIFF_WEIGHTS, plain.weight, pd.diff_weights_desc(), engine, true);
  }
  return e;
}

class OneDnnConv2d final : public Conv2d {
 public:
  OneDnnConv2d(ConvPass pass, const Window2d& window, int64_t out_channels)
      : pass_(pass),
        window_(window),
        out_channels_(out_channels),
        engine_(dnnl::engine::kind::cpu, 0),
        stream_(engine_) {}

  // Builds the planned batch's primitive (so an unsupported shape shows at
  // Create); throws dnnl::error.
  void Prepare() { Find(window_.batch, ApplyThreads()); }

  Status Run(int64_t batch, const float* first, const float* second, float* out) override {
    if (batch < 1) {
      return InvalidArgumentError("oneDNN ", Geometry(window_, out_channels_, batch),
                                  ": batch must be >= 1");
    }
    try {
      Executable& e = Find(batch, ApplyThreads());
      e.first.user.set_data_handle(const_cast<float*>(first));
      e.second.user.set_data_handle(const_cast<float*>(second));
      e.out.user.set_data_handle(out);
      for (Port* in : {&e.first, &e.second}) {
        if (in->reordered) in->reorder.execute(stream_, in->user, in->inner);
      }
      e.primitive.execute(stream_, {{e.first.arg, e.first.inner},
                                    {e.second.arg, e.second.inner},
                                    {e.out.arg, e.out.inner}});
      if (e.out.reordered) e.out.reorder.execute(stream_, e.out.inner, e.out.user);
      stream_.wait();
    } catch (const dnnl::error& error) {
      return InternalError("oneDNN ", Geometry(window_, out_channels_, batch), " failed: ",
                           error.what());
    }
    return Status::OK();
  }

 private:
  Executable& Find(int64_t batch, int threads) {
    const std::pair<int64_t, int> key(batch, threads);
    auto it = cache_.find(key);
    if (it == cache_.end()) {
      it = cache_.emplace(key, Build(pass_, window_, out_channels_, batch, engine_)).first;
      g_conv_primitives.fetch_add(1);
    }
    return it->second;
  }

  const ConvPass pass_;
  const Window2d window_;
  const int64_t out_channels_;
  dnnl::engine engine_;
  dnnl::stream stream_;
  std::map<std::pair<int64_t, int>, Executable> cache_;  // by (batch, threads)
};

// Multiply-adds per thread below which a batched matmul stays on fewer
// threads. Lower than for one GEMM: the entries are independent, so the
// team meets at one barrier per call and a second thread pays off sooner
// (48 products of 64x64x32, 6M multiply-adds, run ~2x faster on 2 threads).
constexpr int64_t kBatchedWorkPerThread = int64_t{1} << 20;

// Row-major strides of a [batch..., rows, cols] matrix stack stored dense
// over its own batch extents, read through `transposed` (stored
// [batch..., cols, rows]).
memory::dims MatrixStrides(const std::vector<int64_t>& batch, int64_t rows, int64_t cols,
                           bool transposed) {
  memory::dims strides(batch.size() + 2);
  strides[batch.size()] = transposed ? 1 : cols;
  strides[batch.size() + 1] = transposed ? rows : 1;
  int64_t stride = rows * cols;
  for (size_t i = batch.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= batch[i];
  }
  return strides;
}

memory::dims MatrixDims(const std::vector<int64_t>& batch, int64_t rows, int64_t cols) {
  memory::dims dims(batch.begin(), batch.end());
  dims.push_back(rows);
  dims.push_back(cols);
  return dims;
}

// oneDNN's matmul primitive over a batch of matrices (BatchedMatmul) or, with
// a bias added in its epilogue, over one matrix (GemmBias).
class OneDnnMatmul final : public BatchedMatmul, public GemmBias {
 public:
  // with_bias: the bias [n] is broadcast over out's rows and batch.
  // work_per_thread: multiply-adds per thread below which fewer threads run.
  OneDnnMatmul(const std::vector<int64_t>& a_batch, const std::vector<int64_t>& b_batch,
               bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
               bool with_bias, int64_t work_per_thread)
      : engine_(dnnl::engine::kind::cpu, 0),
        stream_(engine_),
        with_bias_(with_bias),
        work_per_thread_(work_per_thread) {
    const auto f32 = memory::data_type::f32;
    std::vector<int64_t> c_batch(a_batch.size());
    int64_t entries = 1;
    for (size_t i = 0; i < a_batch.size(); ++i) {
      c_batch[i] = std::max(a_batch[i], b_batch[i]);
      entries *= c_batch[i];
    }
    a_desc_ =
        memory::desc(MatrixDims(a_batch, m, k), f32, MatrixStrides(a_batch, m, k, transpose_a));
    b_desc_ =
        memory::desc(MatrixDims(b_batch, k, n), f32, MatrixStrides(b_batch, k, n, transpose_b));
    c_desc_ = memory::desc(MatrixDims(c_batch, m, n), f32, MatrixStrides(c_batch, m, n, false));
    if (with_bias) {
      const std::vector<int64_t> ones(c_batch.size(), 1);
      bias_desc_ =
          memory::desc(MatrixDims(ones, 1, n), f32, MatrixStrides(ones, 1, n, false));
    }
    if (alpha != 1.0f) attr_.set_output_scales(0, {alpha});
    work_ = entries * m * n * k;
    text_ = Text(a_batch, b_batch, transpose_a, transpose_b, m, n, k);
    if (with_bias) text_ += " with bias";
  }

  // Builds the primitive for the current thread count; false when oneDNN
  // would use its reference implementation. Throws dnnl::error.
  bool Prepare() {
    const Executable& e = Find(ApplyThreads(work_ / work_per_thread_));
    return e.impl.rfind("ref", 0) != 0;
  }

  Status Run(const float* a, const float* b, float* c) override {
    return Execute(a, b, nullptr, c);
  }

  Status Run(const float* a, const float* b, const float* bias, float* c) override {
    return Execute(a, b, bias, c);
  }

  static std::string Text(const std::vector<int64_t>& a_batch, const std::vector<int64_t>& b_batch,
                          bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k) {
    std::ostringstream text;
    text << "batch a [";
    for (size_t i = 0; i < a_batch.size(); ++i) text << (i ? "," : "") << a_batch[i];
    text << "] b [";
    for (size_t i = 0; i < b_batch.size(); ++i) text << (i ? "," : "") << b_batch[i];
    text << "] m=" << m << " n=" << n << " k=" << k << " transpose_a=" << transpose_a
         << " transpose_b=" << transpose_b;
    return text.str();
  }

 private:
  struct Executable {
    dnnl::matmul primitive;
    memory a, b, c, bias;
    std::string impl;
  };

  Status Execute(const float* a, const float* b, const float* bias, float* c) {
    if ((bias != nullptr) != with_bias_) {
      return InternalError("oneDNN matmul ", text_, ": called ", bias ? "with" : "without",
                           " a bias");
    }
    try {
      Executable& e = Find(ApplyThreads(work_ / work_per_thread_));
      e.a.set_data_handle(const_cast<float*>(a));
      e.b.set_data_handle(const_cast<float*>(b));
      e.c.set_data_handle(c);
      if (with_bias_) {
        e.bias.set_data_handle(const_cast<float*>(bias));
        e.primitive.execute(stream_, {{DNNL_ARG_SRC, e.a},
                                      {DNNL_ARG_WEIGHTS, e.b},
                                      {DNNL_ARG_BIAS, e.bias},
                                      {DNNL_ARG_DST, e.c}});
      } else {
        e.primitive.execute(stream_,
                            {{DNNL_ARG_SRC, e.a}, {DNNL_ARG_WEIGHTS, e.b}, {DNNL_ARG_DST, e.c}});
      }
      stream_.wait();
    } catch (const dnnl::error& error) {
      return InternalError("oneDNN matmul ", text_, " failed: ", error.what());
    }
    return Status::OK();
  }

  Executable& Find(int threads) {
    auto it = cache_.find(threads);
    if (it == cache_.end()) {
      const dnnl::matmul::desc desc = with_bias_
                                          ? dnnl::matmul::desc(a_desc_, b_desc_, bias_desc_, c_desc_)
                                          : dnnl::matmul::desc(a_desc_, b_desc_, c_desc_);
      const dnnl::matmul::primitive_desc pd(desc, attr_, engine_);
      Executable e;
      e.primitive = dnnl::matmul(pd);
      e.a = memory(a_desc_, engine_, DNNL_MEMORY_NONE);
      e.b = memory(b_desc_, engine_, DNNL_MEMORY_NONE);
      e.c = memory(c_desc_, engine_, DNNL_MEMORY_NONE);
      if (with_bias_) e.bias = memory(bias_desc_, engine_, DNNL_MEMORY_NONE);
      e.impl = pd.impl_info_str();
      it = cache_.emplace(threads, std::move(e)).first;
    }
    return it->second;
  }

  dnnl::engine engine_;
  dnnl::stream stream_;
  memory::desc a_desc_, b_desc_, c_desc_, bias_desc_;
  dnnl::primitive_attr attr_;
  const bool with_bias_;
  const int64_t work_per_thread_;
  int64_t work_ = 0;
  std::string text_;
  std::map<int, Executable> cache_;  // by thread count
};

}  // namespace

bool Available() { return true; }

int64_t ConvPrimitivesBuilt() { return g_conv_primitives.load(); }

std::string Description() {
  const dnnl_version_t* version = dnnl_version();
  std::ostringstream text;
  text << "oneDNN " << version->major << "." << version->minor << "." << version->patch
       << " (OpenMP)";
  return text.str();
}

Status Sgemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
             const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
             int64_t ldc) {
  ApplyThreads(m * n * k / kGemmWorkPerThread);
  const dnnl_status_t status = dnnl_sgemm(transpose_a ? 'T' : 'N', transpose_b ? 'T' : 'N', m, n,
                                          k, alpha, a, lda, b, ldb, beta, c, ldc);
  if (status != dnnl_success) {
    return InternalError("oneDNN sgemm m=", m, " n=", n, " k=", k, " lda=", lda, " ldb=", ldb,
                         " ldc=", ldc, " failed: ", dnnl_status2str(status));
  }
  return Status::OK();
}

StatusOr<std::unique_ptr<BatchedMatmul>> BatchedMatmul::Create(const std::vector<int64_t>& a_batch,
                                                               const std::vector<int64_t>& b_batch,
                                                               bool transpose_a, bool transpose_b,
                                                               int64_t m, int64_t n, int64_t k,
                                                               float alpha) {
  const std::string text =
      OneDnnMatmul::Text(a_batch, b_batch, transpose_a, transpose_b, m, n, k);
  if (a_batch.size() != b_batch.size() || a_batch.size() + 2 > DNNL_MAX_NDIMS ||
      std::min({m, n, k}) < 1) {
    return InvalidArgumentError("oneDNN matmul cannot take ", text);
  }
  try {
    auto matmul = std::make_unique<OneDnnMatmul>(a_batch, b_batch, transpose_a, transpose_b, m, n,
                                                 k, alpha, /*with_bias=*/false,
                                                 kBatchedWorkPerThread);
    if (!matmul->Prepare()) {
      return UnimplementedError("oneDNN has only its reference matmul for ", text);
    }
    return std::unique_ptr<BatchedMatmul>(std::move(matmul));
  } catch (const dnnl::error& error) {
    return InvalidArgumentError("oneDNN refuses matmul ", text, ": ", error.what());
  }
}

StatusOr<std::unique_ptr<GemmBias>> GemmBias::Create(bool transpose_a, bool transpose_b,
                                                     int64_t m, int64_t n, int64_t k) {
  const std::string text = OneDnnMatmul::Text({}, {}, transpose_a, transpose_b, m, n, k);
  if (std::min({m, n, k}) < 1) return InvalidArgumentError("oneDNN matmul cannot take ", text);
  try {
    auto matmul = std::make_unique<OneDnnMatmul>(std::vector<int64_t>{}, std::vector<int64_t>{},
                                                 transpose_a, transpose_b, m, n, k, 1.0f,
                                                 /*with_bias=*/true, kGemmWorkPerThread);
    if (!matmul->Prepare()) {
      return UnimplementedError("oneDNN has only its reference matmul for ", text, " with bias");
    }
    return std::unique_ptr<GemmBias>(std::move(matmul));
  } catch (const dnnl::error& error) {
    return InvalidArgumentError("oneDNN refuses matmul ", text, " with bias: ", error.what());
  }
}

StatusOr<std::unique_ptr<Conv2d>> Conv2d::Create(ConvPass pass, const Window2d& window,
                                                 int64_t out_channels) {
  try {
    auto conv = std::make_unique<OneDnnConv2d>(pass, window, out_channels);
    if (window.batch >= 1) conv->Prepare();
    return std::unique_ptr<Conv2d>(std::move(conv));
  } catch (const dnnl::error& error) {
    return InvalidArgumentError("oneDNN refuses ", Geometry(window, out_channels, window.batch),
                                ": ", error.what());
  }
}

}  // namespace onednn
}  // namespace oflite
