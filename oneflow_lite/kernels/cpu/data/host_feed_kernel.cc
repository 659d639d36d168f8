// CPU kernel of `host_feed`: each iteration, the next tensor the program
// pushed under the op's `feed` (the process's HostFeed registry,
// data/host_feed.h), copied into the output.
//
// The wait is bounded by the op's timeout_ms (default 60 s): then the run
// fails with DeadlineExceeded naming the op, the feed and the iteration. A
// pushed tensor of another shape or dtype fails naming the op, the feed and
// both descs. The kernel runs on the source stream's thread, so waiting
// holds up only the sources of its device, never the compute that produces
// the outputs a program answers with its next push.
#include <chrono>
#include <cstring>
#include <string>

#include "oneflow_lite/data/host_feed.h"
#include "oneflow_lite/kernels/kernel.h"

namespace oflite {
namespace {

class HostFeedKernel final : public Kernel {
 public:
  Status Init(const KernelInitContext& ctx) override {
    ASSIGN_OR_RETURN(feed_, ctx.attrs().GetString("feed"));
    ASSIGN_OR_RETURN(Shape shape, ctx.attrs().GetShape("shape"));
    ASSIGN_OR_RETURN(DataType dtype, ctx.attrs().GetDataType("dtype"));
    desc_ = TensorDesc(shape, dtype);
    timeout_ = std::chrono::milliseconds(
        ctx.attrs().GetIntOr("timeout_ms", kDefaultHostFeedTimeout.count()));
    if (ctx.parallel_num != 1) {
      return InvalidArgumentError("op '", ctx.op->name(), "' (host_feed): feed '", feed_,
                                  "' runs on one device, but its placement has ", ctx.parallel_num,
                                  " (place the op on one device)");
    }
    if (!(ctx.Output("out") == desc_)) {
      return InvalidArgumentError("op '", ctx.op->name(), "' (host_feed): output ",
                                  ctx.Output("out").ToString(), " differs from its attrs' ",
                                  desc_.ToString());
    }
    return Status::OK();
  }

  Status Forward(KernelContext* ctx) override {
    StatusOr<HostTensor> pushed = HostFeed::Pop(feed_, timeout_);
    if (!pushed.ok()) {
      return pushed.status().WithContext("op '" + ctx->op().name() + "' (host_feed) at iteration " +
                                         std::to_string(ctx->iteration()));
    }
    if (!(pushed->desc() == desc_)) {
      return ctx->Error("feed '", feed_, "' delivered ", pushed->desc().ToString(),
                        ", but the op takes ", desc_.ToString());
    }
    Blob* out = ctx->Output("out");
    if (desc_.ByteSize() > 0) std::memcpy(out->raw(), pushed->raw(), desc_.ByteSize());
    return Status::OK();
  }

 private:
  std::string feed_;
  TensorDesc desc_;
  std::chrono::milliseconds timeout_ = kDefaultHostFeedTimeout;
};

REGISTER_KERNEL("host_feed", DEVICE_CPU, DT_INT32, HostFeedKernel);
REGISTER_KERNEL("host_feed", DEVICE_CPU, DT_INT64, HostFeedKernel);
REGISTER_KERNEL("host_feed", DEVICE_CPU, DT_FLOAT, HostFeedKernel);
REGISTER_KERNEL("host_feed", DEVICE_CPU, DT_DOUBLE, HostFeedKernel);

}  // namespace
}  // namespace oflite
