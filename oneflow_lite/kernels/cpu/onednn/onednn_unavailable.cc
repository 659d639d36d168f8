// onednn.h in builds without oneDNN (--config=static: Debian ships no static
// libdnnl): every entry point says so, and the kernels use their reference
// code.
#include "oneflow_lite/kernels/cpu/onednn/onednn.h"

namespace oflite {
namespace onednn {

bool Available() { return false; }

int64_t ConvPrimitivesBuilt() { return 0; }

std::string Description() { return "oneDNN not built in"; }

Status Sgemm(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*,
             int64_t, float, float*, int64_t) {
  return UnimplementedError("oneDNN is not built in (--config=static)");
}

StatusOr<std::unique_ptr<BatchedMatmul>> BatchedMatmul::Create(const std::vector<int64_t>&,
                                                               const std::vector<int64_t>&, bool,
                                                               bool, int64_t, int64_t, int64_t,
                                                               float) {
  return UnimplementedError("oneDNN is not built in (--config=static)");
}

StatusOr<std::unique_ptr<GemmBias>> GemmBias::Create(bool, bool, int64_t, int64_t, int64_t) {
  return UnimplementedError("oneDNN is not built in (--config=static)");
}

StatusOr<std::unique_ptr<Conv2d>> Conv2d::Create(ConvPass, const Window2d&, int64_t) {
  return UnimplementedError("oneDNN is not built in (--config=static)");
}

}  // namespace onednn
}  // namespace oflite
