// Every nn op has a definition and CPU kernels for float32 and float64, and
// every differentiable forward op has a gradient rule.
#include <gtest/gtest.h>

#include "oneflow_lite/kernels/kernel.h"
#include "oneflow_lite/ops/op_def.h"

namespace oflite {
namespace {

const char* const kForwardOps[] = {"softmax",    "log_softmax", "sparse_softmax_cross_entropy",
                                   "conv2d",     "max_pool2d",  "avg_pool2d",
                                   "layer_norm", "embedding",   "dropout"};
const char* const kOtherOps[] = {"softmax_grad",
                                 "log_softmax_grad",
                                 "sparse_softmax_cross_entropy_grad",
                                 "conv2d_grad_data",
                                 "conv2d_grad_filter",
                                 "max_pool2d_grad",
                                 "avg_pool2d_grad",
                                 "layer_norm_grad",
                                 "embedding_grad",
                                 "dropout_grad",
                                 "argmax",
                                 "accuracy"};

TEST(NnRegistrationTest, DefinitionsKernelsAndGradRules) {
  std::vector<std::string> all(std::begin(kForwardOps), std::end(kForwardOps));
  all.insert(all.end(), std::begin(kOtherOps), std::end(kOtherOps));
  for (const std::string& type : all) {
    StatusOr<const OpDef*> def = LookupOpDef(type);
    ASSERT_TRUE(def.ok()) << def.status();
    EXPECT_TRUE((*def)->infer) << type;
    EXPECT_TRUE(HasKernel(type, DEVICE_CPU, DT_FLOAT)) << type;
    EXPECT_TRUE(HasKernel(type, DEVICE_CPU, DT_DOUBLE)) << type;
  }
  for (const std::string type : kForwardOps) EXPECT_TRUE((*LookupOpDef(type))->grad) << type;
  EXPECT_TRUE((*LookupOpDef("argmax"))->no_grad);
  EXPECT_TRUE((*LookupOpDef("accuracy"))->no_grad);
}

}  // namespace
}  // namespace oflite
