#include "oneflow_lite/ops/nn/nn_util.h"

namespace oflite {
namespace nn {
namespace {

StatusOr<std::vector<int64_t>> Pair(const AttrView& attrs, const std::string& key,
                                    std::vector<int64_t> def, int64_t min_value) {
  std::vector<int64_t> v = def;
  if (attrs.Has(key)) {
    ASSIGN_OR_RETURN(v, attrs.GetInts(key));
  }
  if (v.size() != 2) {
    return InvalidArgumentError("attribute '", key, "' must hold 2 values (h, w), got ", v.size());
  }
  for (int64_t x : v) {
    if (x < min_value) {
      return InvalidArgumentError("attribute '", key, "' = [", v[0], ", ", v[1],
                                  "]: every value must be >= ", min_value);
    }
  }
  return v;
}

uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

}  // namespace

StatusOr<int64_t> NormalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) {
    return InvalidArgumentError("axis ", axis, " is out of range for rank ", rank);
  }
  return axis < 0 ? axis + rank : axis;
}

StatusOr<Window2d> MakeWindow2d(const AttrView& attrs, const Shape& x, int64_t kernel_h,
                                int64_t kernel_w, bool with_dilations) {
  if (x.rank() != 4) {
    return InvalidArgumentError("input must be 4-D NCHW, got shape ", x.ToString());
  }
  Window2d w;
  w.batch = x.dim(0);
  w.channels = x.dim(1);
  w.height = x.dim(2);
  w.width = x.dim(3);
  w.kernel_h = kernel_h;
  w.kernel_w = kernel_w;
  ASSIGN_OR_RETURN(std::vector<int64_t> strides, Pair(attrs, "strides", {1, 1}, 1));
  ASSIGN_OR_RETURN(std::vector<int64_t> padding, Pair(attrs, "padding", {0, 0}, 0));
  std::vector<int64_t> dilations = {1, 1};
  if (with_dilations) {
    ASSIGN_OR_RETURN(dilations, Pair(attrs, "dilations", {1, 1}, 1));
  }
  w.stride_h = strides[0];
  w.stride_w = strides[1];
  w.pad_h = padding[0];
  w.pad_w = padding[1];
  w.dilation_h = dilations[0];
  w.dilation_w = dilations[1];
  const int64_t span_h = w.dilation_h * (w.kernel_h - 1) + 1;
  const int64_t span_w = w.dilation_w * (w.kernel_w - 1) + 1;
  const int64_t padded_h = w.height + 2 * w.pad_h;
  const int64_t padded_w = w.width + 2 * w.pad_w;
  if (w.kernel_h < 1 || w.kernel_w < 1 || span_h > padded_h || span_w > padded_w) {
    return InvalidArgumentError("window ", w.kernel_h, "x", w.kernel_w, " (dilated ", span_h, "x",
                                span_w, ") does not fit input ", x.ToString(), " padded by [",
                                w.pad_h, ", ", w.pad_w, "]");
  }
  w.out_h = (padded_h - span_h) / w.stride_h + 1;
  w.out_w = (padded_w - span_w) / w.stride_w + 1;
  return w;
}

StatusOr<Window2d> MakeConvWindow(const AttrView& attrs, const Shape& x, const Shape& weight) {
  if (weight.rank() != 4) {
    return InvalidArgumentError("weight must be 4-D [O, C, KH, KW], got shape ", weight.ToString());
  }
  if (x.rank() == 4 && x.dim(1) != weight.dim(1)) {
    return InvalidArgumentError("input channels differ: ", ShapePair("x", x, "weight", weight));
  }
  return MakeWindow2d(attrs, x, weight.dim(2), weight.dim(3), /*with_dilations=*/true);
}

StatusOr<Window2d> MakePoolWindow(const AttrView& attrs, const Shape& x) {
  ASSIGN_OR_RETURN(std::vector<int64_t> kernel, Pair(attrs, "kernel_size", {0, 0}, 1));
  // No window may lie wholly in the padding.
  const std::vector<int64_t> padding = attrs.GetIntsOr("padding", {0, 0});
  if (padding.size() == 2 && (2 * padding[0] > kernel[0] || 2 * padding[1] > kernel[1])) {
    return InvalidArgumentError("padding [", padding[0], ", ", padding[1],
                                "] exceeds half of kernel_size [", kernel[0], ", ", kernel[1], "]");
  }
  return MakeWindow2d(attrs, x, kernel[0], kernel[1], /*with_dilations=*/false);
}

double DropoutUniform(int64_t seed, int64_t iteration, int64_t parallel_id, int64_t index) {
  uint64_t key = SplitMix64(static_cast<uint64_t>(seed));
  key = SplitMix64(key ^ static_cast<uint64_t>(iteration));
  key = SplitMix64(key ^ static_cast<uint64_t>(parallel_id));
  const uint64_t bits = SplitMix64(key ^ static_cast<uint64_t>(index));
  return static_cast<double>(bits >> 11) * (1.0 / 9007199254740992.0);  // 53 bits
}

StatusOr<double> DropoutRate(const AttrView& attrs) {
  ASSIGN_OR_RETURN(double rate, attrs.GetFloat("rate"));
  if (!(rate >= 0.0 && rate < 1.0)) {
    return InvalidArgumentError("attribute 'rate' = ", rate, " must be in [0, 1)");
  }
  return rate;
}

std::string ShapePair(const std::string& name_a, const Shape& a, const std::string& name_b,
                      const Shape& b) {
  return name_a + " " + a.ToString() + " vs " + name_b + " " + b.ToString();
}

}  // namespace nn
}  // namespace oflite
