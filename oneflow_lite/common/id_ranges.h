// Ascending ids as ranges, "0-3,8,10-11" (placement text, CPU lists).
#ifndef ONEFLOW_LITE_COMMON_ID_RANGES_H_
#define ONEFLOW_LITE_COMMON_ID_RANGES_H_

#include <string>

namespace oflite {

// `ids`: any indexable container of ascending, unique integers (a
// std::vector, a protobuf RepeatedField); "" for none.
template <typename Ids>
std::string IdRangesText(const Ids& ids) {
  std::string out;
  const int size = static_cast<int>(ids.size());
  for (int i = 0; i < size;) {
    int j = i;
    while (j + 1 < size && ids[j + 1] == ids[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(ids[i]);
    if (j > i) out += "-" + std::to_string(ids[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace oflite

#endif  // ONEFLOW_LITE_COMMON_ID_RANGES_H_
