#include "oneflow_lite/data/npy_dataset.h"

#include "oneflow_lite/common/data_type.h"
#include "oneflow_lite/data/npy.h"

namespace oflite {
namespace {

bool IsIntegerType(DataType dtype) {
  return dtype == DT_INT8 || dtype == DT_UINT8 || dtype == DT_INT32 || dtype == DT_INT64;
}

template <typename T>
void ConvertTo(const NpyArray& array, std::vector<T>* out) {
  const int64_t n = array.elem_count();
  out->resize(n);
  const char* raw = array.data.data();
  for (int64_t i = 0; i < n; ++i) {
    switch (array.dtype) {
      case DT_FLOAT:
        (*out)[i] = static_cast<T>(reinterpret_cast<const float*>(raw)[i]);
        break;
      case DT_DOUBLE:
        (*out)[i] = static_cast<T>(reinterpret_cast<const double*>(raw)[i]);
        break;
      case DT_INT32:
        (*out)[i] = static_cast<T>(reinterpret_cast<const int32_t*>(raw)[i]);
        break;
      case DT_INT64:
        (*out)[i] = static_cast<T>(reinterpret_cast<const int64_t*>(raw)[i]);
        break;
      case DT_INT8:
        (*out)[i] = static_cast<T>(reinterpret_cast<const int8_t*>(raw)[i]);
        break;
      case DT_UINT8:
        (*out)[i] = static_cast<T>(reinterpret_cast<const uint8_t*>(raw)[i]);
        break;
      case DT_BOOL:
        (*out)[i] = static_cast<T>(raw[i] != 0);
        break;
      default:
        (*out)[i] = 0;
    }
  }
}

// Checks the two headers of a split against each other.
StatusOr<NpySplitInfo> CheckSplit(const NpySplitFiles& files, const NpyArray& samples,
                                  const NpyArray& labels) {
  if (samples.shape.empty()) {
    return InvalidArgumentError("'", files.samples, "' holds a scalar: want samples [N, ...]");
  }
  if (!IsIntegerType(labels.dtype)) {
    return InvalidArgumentError("'", files.labels, "' holds ", DataTypeName(labels.dtype),
                                " labels: want an integer dtype (int64, int32, uint8, int8)");
  }
  const bool column = labels.shape.size() == 2 && labels.shape[1] == 1;
  if (labels.shape.size() != 1 && !column) {
    std::string dims;
    for (int64_t d : labels.shape) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
    return InvalidArgumentError("'", files.labels, "' has shape (", dims,
                                "): want labels [N] or [N, 1]");
  }
  if (labels.shape[0] != samples.shape[0]) {
    return InvalidArgumentError("'", files.samples, "' holds ", samples.shape[0], " samples but '",
                                files.labels, "' holds ", labels.shape[0], " labels");
  }
  NpySplitInfo info;
  info.count = samples.shape[0];
  info.sample_shape.assign(samples.shape.begin() + 1, samples.shape.end());
  return info;
}

}  // namespace

NpySplitFiles NpyDatasetFiles(const std::string& dir, const std::string& split) {
  return NpySplitFiles{dir + "/" + split + "_x.npy", dir + "/" + split + "_y.npy"};
}

StatusOr<NpySplitInfo> ReadNpySplitInfo(const std::string& dir, const std::string& split) {
  const NpySplitFiles files = NpyDatasetFiles(dir, split);
  ASSIGN_OR_RETURN(NpyArray samples, ReadNpyHeader(files.samples));
  ASSIGN_OR_RETURN(NpyArray labels, ReadNpyHeader(files.labels));
  return CheckSplit(files, samples, labels);
}

StatusOr<NpyDataset> LoadNpyDataset(const std::string& dir, const std::string& split) {
  const NpySplitFiles files = NpyDatasetFiles(dir, split);
  ASSIGN_OR_RETURN(NpyArray samples, ReadNpy(files.samples));
  ASSIGN_OR_RETURN(NpyArray labels, ReadNpy(files.labels));
  ASSIGN_OR_RETURN(NpySplitInfo info, CheckSplit(files, samples, labels));
  NpyDataset dataset;
  dataset.count = info.count;
  dataset.sample_shape = info.sample_shape;
  for (int64_t d : info.sample_shape) dataset.sample_size *= d;
  ConvertTo(samples, &dataset.samples);
  std::vector<int64_t> wide;
  ConvertTo(labels, &wide);
  dataset.labels.resize(wide.size());
  for (size_t i = 0; i < wide.size(); ++i) {
    if (wide[i] < 0 || wide[i] > INT32_MAX) {
      return InvalidArgumentError("'", files.labels, "': label ", wide[i], " at index ", i,
                                  " is not a class index (0 .. 2^31-1)");
    }
    dataset.labels[i] = static_cast<int32_t>(wide[i]);
  }
  return dataset;
}

}  // namespace oflite
