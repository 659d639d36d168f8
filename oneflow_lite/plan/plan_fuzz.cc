// libFuzzer entry point of the plan fuzzer (see plan_fuzz_body.h). Built
// two ways:
//  * plan_fuzz_test (gcc, cc_test): structured mutations of real compiled
//    plans (plan_fuzz_test.cc), also under --config=asan / ubsan;
//  * with clang -fsanitize=fuzzer,address,undefined (run_plan_fuzzer.sh),
//    seeded with the compiled plans, as plan_libfuzzer_test.
#include <cstddef>
#include <cstdint>

#include "oneflow_lite/plan/plan_fuzz_body.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return oflite::FuzzPlanBytes(data, size);
}
