// Format versions of the files OneFlow-Lite writes. Bump on any change a
// reader of the previous version would misread. See docs/plan_format.md.
#ifndef ONEFLOW_LITE_COMMON_VERSION_H_
#define ONEFLOW_LITE_COMMON_VERSION_H_

#include <cstdint>

namespace oflite {

inline constexpr const char* kOfliteVersion = "0.1.0";
// Plan files (proto/plan.proto). A reader accepts versions
// [kMinPlanVersion, kPlanVersion] and rejects older and newer ones.
// Version 2: run settings, variable descs, the evaluation plan and each
// collective's algorithm are Plan fields; a version-1 plan lacks them and
// must be recompiled.
inline constexpr uint32_t kPlanVersion = 2;
inline constexpr uint32_t kMinPlanVersion = 2;
// Job files (proto/job.proto).
inline constexpr uint32_t kJobVersion = 1;

}  // namespace oflite

#endif  // ONEFLOW_LITE_COMMON_VERSION_H_
