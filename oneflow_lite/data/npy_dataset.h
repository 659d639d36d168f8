// A dataset of the user's own arrays in NumPy .npy files (npy.h): a
// directory holding, per split, the samples and their labels:
//
//   <dir>/train_x.npy  samples [N, ...] of any numeric dtype (uint8, int8,
//                      int32, int64, float32, float64): converted to float32
//   <dir>/train_y.npy  labels [N] (or [N, 1]) of an integer dtype, >= 0
//   <dir>/test_x.npy, <dir>/test_y.npy   the same for evaluation (optional)
//
// e.g. from Python: numpy.save("d/train_x.npy", x.astype(numpy.float32)).
// LoadNpyDataset reads and checks a split; every error names the file: a
// missing file (NotFound), an unsupported or non-integer label dtype, a
// label shape other than [N] / [N, 1], a negative label (naming its
// index), sample and label counts that differ (naming both files), and the
// .npy format errors of npy.h (truncated data, Fortran order, ...).
// ReadNpySplitInfo reads only the headers (for the graph builder: sample
// shape and count without loading the data). Thread-safe free functions.
#ifndef ONEFLOW_LITE_DATA_NPY_DATASET_H_
#define ONEFLOW_LITE_DATA_NPY_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "oneflow_lite/common/status.h"

namespace oflite {

struct NpySplitFiles {
  std::string samples;  // <dir>/<split>_x.npy
  std::string labels;   // <dir>/<split>_y.npy
};
NpySplitFiles NpyDatasetFiles(const std::string& dir, const std::string& split);

struct NpySplitInfo {
  int64_t count = 0;
  std::vector<int64_t> sample_shape;  // the sample dims after N
};

struct NpyDataset {
  int64_t count = 0;
  std::vector<int64_t> sample_shape;
  int64_t sample_size = 1;      // elements per sample
  std::vector<float> samples;   // count * sample_size
  std::vector<int32_t> labels;  // count

  const float* Sample(int64_t index) const { return samples.data() + index * sample_size; }
};

StatusOr<NpySplitInfo> ReadNpySplitInfo(const std::string& dir, const std::string& split);
StatusOr<NpyDataset> LoadNpyDataset(const std::string& dir, const std::string& split);

}  // namespace oflite

#endif  // ONEFLOW_LITE_DATA_NPY_DATASET_H_
