#include "oneflow_lite/ops/nn/adaptive_pool.h"

namespace oflite {
namespace nn {

StatusOr<Shape> AdaptivePoolOutputShape(const AttrView& attrs, const Shape& x) {
  if (!attrs.Has("output_size")) {
    return InvalidArgumentError("missing ints attribute 'output_size' ([OH, OW])");
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> size, attrs.GetInts("output_size"));
  if (size.size() != 2 || size[0] < 1 || size[1] < 1) {
    return InvalidArgumentError("output_size must be two values >= 1, got ", size.size(),
                                " values");
  }
  if (x.rank() != 4 || x.dim(2) < 1 || x.dim(3) < 1) {
    return InvalidArgumentError("x must be [N, C, H, W] with H, W >= 1, got ", x);
  }
  return Shape({x.dim(0), x.dim(1), size[0], size[1]});
}

}  // namespace nn
}  // namespace oflite
