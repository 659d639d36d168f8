// Format versions of the files OneFlow-Lite writes. Bump on any change a
// reader of the previous version would misread. See docs/plan_format.md.
#ifndef ONEFLOW_LITE_COMMON_VERSION_H_
#define ONEFLOW_LITE_COMMON_VERSION_H_

#include <cstdint>

namespace oflite {

inline constexpr const char* kOfliteVersion = "0.1.0";
// Plan files (proto/plan.proto). A reader accepts versions
// [kMinPlanVersion, kPlanVersion] and rejects newer ones.
inline constexpr uint32_t kPlanVersion = 1;
inline constexpr uint32_t kMinPlanVersion = 1;
// Job files (proto/job.proto).
inline constexpr uint32_t kJobVersion = 1;

}  // namespace oflite

#endif  // ONEFLOW_LITE_COMMON_VERSION_H_
