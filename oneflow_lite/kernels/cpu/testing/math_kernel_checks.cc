#include "oneflow_lite/kernels/cpu/testing/math_kernel_checks.h"

#include <cmath>
#include <sstream>

namespace oflite {
namespace math {

std::vector<int64_t> Unravel(int64_t flat, const Shape& shape) {
  std::vector<int64_t> index(shape.rank());
  for (int64_t i = shape.rank() - 1; i >= 0; --i) {
    index[i] = flat % shape.dim(i);
    flat /= shape.dim(i);
  }
  return index;
}

int64_t Ravel(const std::vector<int64_t>& index, const Shape& shape) {
  int64_t flat = 0;
  for (int64_t i = 0; i < shape.rank(); ++i) flat = flat * shape.dim(i) + index[i];
  return flat;
}

StatusOr<HostTensor> RunSingle(const OpConf& op, TensorMap* env, const std::string& out_lbn) {
  ASSIGN_OR_RETURN(TensorMap outs, RunOp(op, env));
  auto it = outs.find(out_lbn);
  if (it == outs.end()) return NotFoundError("no output ", out_lbn);
  return std::move(it->second);
}

std::string CompareValues(const std::vector<double>& got, const std::vector<double>& want,
                          double tol) {
  std::ostringstream os;
  if (got.size() != want.size()) {
    os << "size " << got.size() << " vs expected " << want.size();
    return os.str();
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i]) && std::isnan(want[i])) continue;
    if (!(std::fabs(got[i] - want[i]) <= tol * (1 + std::fabs(want[i])))) {
      os << "element " << i << ": got " << got[i] << ", expected " << want[i];
      return os.str();
    }
  }
  return "";
}

double Tolerance(DataType dtype) {
  switch (dtype) {
    case DT_FLOAT:
      return 1e-5;
    case DT_DOUBLE:
      return 1e-12;
    default:
      return 0;
  }
}

}  // namespace math
}  // namespace oflite
