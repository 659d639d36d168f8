// Test-only CPU kernels (float) for runtime machinery tests and benchmarks.
// Registered under "test_*" op types so they never collide with real ops.
//   test_source       out[:] = iteration + attr offset
//   test_add_one      out = sum(in...) + 1
//   test_noop         touches nothing
//   test_fail_at      out = in; fails at iteration attr "at"
//   test_nan_at       out = in; writes NaN at iteration attr "at"
//   test_late_fail_at out = in; finds a fault at iteration attr "at" but,
//                     like a CUDA kernel's device-side check, reports it
//                     late: from its next Forward, or from
//                     ReportDeferredErrors at the end of the run
//   test_init         out[:] = attr "value" (a variable initializer)
//   test_accumulate   model (mutable) += in[0]
//   test_stamp        checks that every element of every input holds the
//                     stamp iteration * 1000 + attr "in_depth" (fails naming
//                     the input, the element and the stamp found: the act
//                     read a register before its producer's work finished,
//                     or after the next iteration overwrote it), then writes
//                     iteration * 1000 + attr "depth" into every output
#include <atomic>
#include <cmath>
#include <limits>

#include "oneflow_lite/kernels/kernel.h"

namespace oflite {
namespace testing {
namespace {

void Fill(Blob* blob, float value) {
  float* data = blob->data<float>();
  for (int64_t i = 0; i < blob->elem_count(); ++i) data[i] = value;
}

class SourceKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    Fill(ctx->Output("out"), static_cast<float>(ctx->iteration() + ctx->attrs().GetIntOr("offset", 0)));
    return Status::OK();
  }
};

class AddOneKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    Blob* out = ctx->Output("out");
    Fill(out, 1.0f);
    float* o = out->data<float>();
    for (int k = 0; k < ctx->InputCount("in"); ++k) {
      const float* in = ctx->Input("in", k).data<float>();
      for (int64_t i = 0; i < out->elem_count(); ++i) o[i] += in[i];
    }
    return Status::OK();
  }
};

class NoopKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override { return Status::OK(); }
};

class CopyKernel : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    const Blob& in = ctx->Input("in");
    Blob* out = ctx->Output("out");
    for (int64_t i = 0; i < out->elem_count(); ++i) out->data<float>()[i] = in.data<float>()[i];
    return Status::OK();
  }
};

class FailAtKernel final : public CopyKernel {
 public:
  Status Forward(KernelContext* ctx) override {
    if (ctx->iteration() == ctx->attrs().GetIntOr("at", -1)) {
      return ctx->Error("injected failure");
    }
    return CopyKernel::Forward(ctx);
  }
};

class NanAtKernel final : public CopyKernel {
 public:
  Status Forward(KernelContext* ctx) override {
    RETURN_IF_ERROR(CopyKernel::Forward(ctx));
    if (ctx->iteration() == ctx->attrs().GetIntOr("at", -1)) {
      ctx->Output("out")->data<float>()[0] = std::numeric_limits<float>::quiet_NaN();
    }
    return Status::OK();
  }
};

class LateFailAtKernel final : public CopyKernel {
 public:
  Status Forward(KernelContext* ctx) override {
    RETURN_IF_ERROR(Take(*ctx, "reported by a later call"));
    RETURN_IF_ERROR(CopyKernel::Forward(ctx));
    if (ctx->iteration() == ctx->attrs().GetIntOr("at", -1)) found_at_.store(ctx->iteration());
    return Status::OK();
  }
  Status ReportDeferredErrors(const KernelContext& ctx) override {
    return Take(ctx, "reported at the end of the run");
  }

 private:
  Status Take(const KernelContext& ctx, const char* when) {
    const int64_t found = found_at_.exchange(-1);
    if (found < 0) return Status::OK();
    return ctx.Error("injected late fault of iteration ", found, ", ", when);
  }
  // Written by the stream's work (another thread on the test stream).
  std::atomic<int64_t> found_at_{-1};
};

class InitKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    Fill(ctx->Output("out"), static_cast<float>(ctx->attrs().GetIntOr("value", 0)));
    return Status::OK();
  }
};

class AccumulateKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    Blob* model = ctx->MutableInput("model");
    const float* in = ctx->Input("in").data<float>();
    for (int64_t i = 0; i < model->elem_count(); ++i) model->data<float>()[i] += in[i];
    return Status::OK();
  }
};

class StampKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    const float want = Stamp(ctx, "in_depth");
    for (int k = 0; k < ctx->InputCount("in"); ++k) {
      const Blob& in = ctx->Input("in", k);
      const float* data = in.data<float>();
      for (int64_t i = 0; i < in.elem_count(); ++i) {
        if (data[i] != want) {
          return ctx->Error("input 'in'[", k, "] element ", i, " holds stamp ", data[i],
                            ", expected ", want, ": read before its producer's work finished "
                            "or after it was overwritten");
        }
      }
    }
    for (int k = 0; k < ctx->OutputCount("out"); ++k) Fill(ctx->Output("out", k), Stamp(ctx, "depth"));
    return Status::OK();
  }

 private:
  static float Stamp(KernelContext* ctx, const char* attr) {
    return static_cast<float>(ctx->iteration() * 1000 + ctx->attrs().GetIntOr(attr, 0));
  }
};

REGISTER_KERNEL("test_source", DEVICE_CPU, DT_FLOAT, SourceKernel);
REGISTER_KERNEL("test_add_one", DEVICE_CPU, DT_FLOAT, AddOneKernel);
REGISTER_KERNEL("test_noop", DEVICE_CPU, DT_FLOAT, NoopKernel);
REGISTER_KERNEL("test_fail_at", DEVICE_CPU, DT_FLOAT, FailAtKernel);
REGISTER_KERNEL("test_nan_at", DEVICE_CPU, DT_FLOAT, NanAtKernel);
REGISTER_KERNEL("test_late_fail_at", DEVICE_CPU, DT_FLOAT, LateFailAtKernel);
REGISTER_KERNEL("test_init", DEVICE_CPU, DT_FLOAT, InitKernel);
REGISTER_KERNEL("test_accumulate", DEVICE_CPU, DT_FLOAT, AccumulateKernel);
REGISTER_KERNEL("test_stamp", DEVICE_CPU, DT_FLOAT, StampKernel);

}  // namespace
}  // namespace testing
}  // namespace oflite
