#include "oneflow_lite/kernels/cpu/testing/nn_kernel_checks.h"

namespace oflite {
namespace nn {
namespace testing {
namespace {

OpConf EmbeddingOp() {
  return OpConfBuilder("embedding", "emb")
      .Input("weight", "in/w_0")
      .Input("indices", "in/i_0")
      .Output("out")
      .Build();
}

TEST(EmbeddingKernelTest, GathersRowsExactly) {
  for (DataType dtype : FloatTypes()) {
    for (DataType index_type : {DT_INT32, DT_INT64}) {
      for (const Shape& indices_shape : {Shape({0}), Shape({1}), Shape({3, 5})}) {
        const int64_t vocabulary = 7, depth = 3;
        TensorMap env;
        env.emplace("in/w_0", RandomTensor(TensorDesc(Shape({vocabulary, depth}), dtype), 1));
        env.emplace("in/i_0",
                    RandomTensor(TensorDesc(indices_shape, index_type), 2, 0, vocabulary));
        const std::vector<double> w = ToDoubles(env.at("in/w_0"));
        const std::vector<double> idx = ToDoubles(env.at("in/i_0"));
        std::vector<double> expected;
        for (double i : idx) {
          for (int64_t d = 0; d < depth; ++d)
            expected.push_back(w[static_cast<int64_t>(i) * depth + d]);
        }
        TensorMap out = MustRun(EmbeddingOp(), &env);
        std::vector<int64_t> dims = indices_shape.dims();
        dims.push_back(depth);
        EXPECT_EQ(out.at("emb/out_0").shape(), Shape(dims));
        ExpectAllNear(out.at("emb/out_0"), expected, 0);
      }
    }
  }
}

TEST(EmbeddingKernelTest, BadIndexNamesOpIndexPositionAndVocabulary) {
  TensorMap env;
  env.emplace("in/w_0", HostTensor(TensorDesc(Shape({5, 2}), DT_FLOAT)));
  env.emplace("in/i_0", HostTensor::FromVector<int64_t>(Shape({2, 2}), {0, 4, 5, 1}));
  std::string error = RunError(EmbeddingOp(), &env);
  EXPECT_NE(error.find("'emb'"), std::string::npos) << error;
  EXPECT_NE(error.find("index 5 at position 2"), std::string::npos) << error;
  EXPECT_NE(error.find("vocabulary size 5"), std::string::npos) << error;

  env.at("in/i_0").data<int64_t>()[2] = -1;
  error = RunError(EmbeddingOp(), &env);
  EXPECT_NE(error.find("index -1 at position 2"), std::string::npos) << error;
}

TEST(EmbeddingKernelTest, GradScatterAddsRepeatedIndices) {
  TensorMap env;
  env.emplace("in/dy_0", HostTensor::FromVector<double>(Shape({3, 2}), {1, 2, 3, 4, 5, 6}));
  env.emplace("in/i_0", HostTensor::FromVector<int32_t>(Shape({3}), {2, 0, 2}));
  env.emplace("in/like_0", HostTensor(TensorDesc(Shape({4, 2}), DT_DOUBLE)));
  OpConf op = OpConfBuilder("embedding_grad", "g")
                  .Input("dy", "in/dy_0")
                  .Input("indices", "in/i_0")
                  .Input("like", "in/like_0")
                  .Output("dweight")
                  .Build();
  TensorMap out = MustRun(op, &env);
  ExpectAllNear(out.at("g/dweight_0"), {3, 4, 0, 0, 6, 8, 0, 0}, 0);
}

TEST(EmbeddingKernelTest, GradientMatchesFiniteDifferences) {
  for (DataType index_type : {DT_INT32, DT_INT64}) {
    TensorMap env;
    env.emplace("in/w_0", RandomTensor(TensorDesc(Shape({6, 3}), DT_DOUBLE), 1));
    env.emplace("in/i_0", RandomTensor(TensorDesc(Shape({2, 5}), index_type), 2, 0, 6));
    GradCheckOptions options;
    options.skip_inputs = {"indices"};
    Status status = CheckOpGradient(EmbeddingOp(), env, options);
    EXPECT_TRUE(status.ok()) << status;
  }
}

}  // namespace
}  // namespace testing
}  // namespace nn
}  // namespace oflite
