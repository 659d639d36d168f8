// The matmul CPU kernel on rank >= 2 inputs against a naive reference, in
// float32 and float64, with both CPU kernel libraries (float32 batched
// products take oneDNN's batched matmul or the loop of GEMMs): every
// transpose, the Linear fold, batched and broadcast batch dims, sum_batch
// and empty sizes.
#include <gtest/gtest.h>

#include <tuple>

#include "oneflow_lite/kernels/cpu/cpu_library.h"
#include "oneflow_lite/kernels/cpu/testing/math_kernel_checks.h"
#include "oneflow_lite/ops/math/math_util.h"

namespace oflite {
namespace math {
namespace {

struct Case {
  Shape a, b;  // stored shapes
  bool sum_batch;
};

// out[batch..., i, j] = alpha * sum_p op(a)[i, p] op(b)[p, j], batch dims
// broadcast (right-aligned); under sum_batch also summed over the batch.
std::vector<double> Reference(const HostTensor& a, const HostTensor& b, bool ta, bool tb,
                              double alpha, bool sum_batch, const Shape& out) {
  const std::vector<double> av = ToDoubles(a), bv = ToDoubles(b);
  const Shape& as = a.shape();
  const Shape& bs = b.shape();
  const int64_t ar = as.dim(as.rank() - 2), ac = as.dim(as.rank() - 1);
  const int64_t br = bs.dim(bs.rank() - 2), bc = bs.dim(bs.rank() - 1);
  const int64_t m = ta ? ac : ar, k = ta ? ar : ac, n = tb ? br : bc;
  const Shape a_batch(std::vector<int64_t>(as.dims().begin(), as.dims().end() - 2));
  const Shape b_batch(std::vector<int64_t>(bs.dims().begin(), bs.dims().end() - 2));
  Shape batch;
  if (sum_batch) {
    batch = a_batch;
  } else {
    EXPECT_TRUE(BroadcastShapes(a_batch, b_batch, &batch));
  }
  std::vector<double> result(out.elem_count(), 0.0);
  for (int64_t e = 0; e < batch.elem_count(); ++e) {
    const std::vector<int64_t> index = Unravel(e, batch);
    auto entry = [&](const Shape& own) {
      std::vector<int64_t> own_index(own.rank());
      for (int64_t i = 0; i < own.rank(); ++i) {
        const int64_t axis = i + batch.rank() - own.rank();
        own_index[i] = own.dim(i) == 1 ? 0 : index[axis];
      }
      return own.rank() == 0 ? 0 : Ravel(own_index, own);
    };
    const int64_t a_base = entry(a_batch) * m * k, b_base = entry(b_batch) * k * n;
    const int64_t out_base = sum_batch ? 0 : e * m * n;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p) {
          const double x = av[a_base + (ta ? p * m + i : i * k + p)];
          const double y = bv[b_base + (tb ? j * k + p : p * n + j)];
          sum += x * y;
        }
        result[out_base + i * n + j] += alpha * sum;
      }
    }
  }
  return result;
}

Shape Stored(std::vector<int64_t> batch, int64_t rows, int64_t cols, bool transposed) {
  batch.push_back(transposed ? cols : rows);
  batch.push_back(transposed ? rows : cols);
  return Shape(std::move(batch));
}

class MatmulKernelTest : public ::testing::TestWithParam<std::tuple<DataType, CpuKernelLibrary>> {
 protected:
  void SetUp() override { SetCpuKernelLibrary(std::get<1>(GetParam())); }
  void TearDown() override { SetCpuKernelLibrary(CpuKernelLibrary::kOneDnn); }
  DataType dtype() const { return std::get<0>(GetParam()); }

  void Check(const std::vector<int64_t>& a_batch, const std::vector<int64_t>& b_batch, int64_t m,
             int64_t k, int64_t n, bool sum_batch) {
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      const double alpha = t == 1 ? 0.5 : 1.0;
      TensorMap env;
      env.emplace("a", RandomTensor(TensorDesc(Stored(a_batch, m, k, ta), dtype()), ++seed_));
      env.emplace("b", RandomTensor(TensorDesc(Stored(b_batch, k, n, tb), dtype()), ++seed_));
      OpConfBuilder builder("matmul", "mm");
      builder.Input("a", "a")
          .Input("b", "b")
          .Output("out")
          .Attr("transpose_a", ta)
          .Attr("transpose_b", tb)
          .Attr("alpha", alpha);
      if (sum_batch) builder.Attr("sum_batch", true);
      auto out = RunSingle(builder.Build(), &env, "mm/out_0");
      ASSERT_TRUE(out.ok()) << out.status();
      const std::vector<double> want =
          Reference(env.at("a"), env.at("b"), ta, tb, alpha, sum_batch, out->shape());
      EXPECT_EQ(CompareValues(ToDoubles(*out), want, Tolerance(dtype()) * (1 + k / 64.0)), "")
          << "a " << env.at("a").shape() << " b " << env.at("b").shape() << " ta " << ta << " tb "
          << tb << " sum_batch " << sum_batch;
    }
  }

  uint64_t seed_ = 0;
};

TEST_P(MatmulKernelTest, LinearFoldsTheLeadingDimsIntoRows) {
  Check({3, 4}, {}, 5, 7, 6, false);
  Check({2}, {1}, 3, 9, 4, false);
  Check({5}, {}, 1, 1, 1, false);
  Check({2, 3}, {}, 48, 32, 40, false);
}

TEST_P(MatmulKernelTest, BatchedAndBroadcastBatches) {
  Check({6}, {6}, 7, 5, 3, false);
  Check({2, 3}, {2, 3}, 17, 9, 13, false);  // attention-like
  Check({2, 3}, {1, 3}, 4, 6, 5, false);
  Check({2, 1}, {3}, 4, 6, 5, false);
  Check({3}, {2, 1, 3}, 2, 3, 4, false);
  Check({}, {4}, 5, 3, 2, false);  // 2-D a, batched b
  Check({2, 1, 3}, {1, 4, 1}, 3, 2, 5, false);
}

TEST_P(MatmulKernelTest, SumBatchSumsTheProducts) {
  Check({4}, {4}, 5, 7, 3, true);
  Check({2, 3}, {2, 3}, 6, 4, 5, true);
  Check({}, {}, 3, 4, 5, true);
  Check({1}, {1}, 3, 4, 5, true);
}

TEST_P(MatmulKernelTest, EmptySizes) {
  Check({0, 3}, {3}, 2, 4, 5, false);  // empty batch
  Check({3}, {3}, 2, 0, 5, false);     // k = 0: zeros
  Check({3}, {}, 0, 4, 5, false);
  Check({3}, {3}, 2, 4, 0, false);
  Check({0}, {0}, 2, 4, 5, true);  // sum over nothing: zeros
  Check({3}, {3}, 2, 0, 5, true);
}

INSTANTIATE_TEST_SUITE_P(TypesAndLibraries, MatmulKernelTest,
                         ::testing::Combine(::testing::Values(DT_FLOAT, DT_DOUBLE),
                                            ::testing::Values(CpuKernelLibrary::kOneDnn,
                                                              CpuKernelLibrary::kReference)),
                         [](const auto& info) {
                           return std::string(DataTypeName(std::get<0>(info.param))) + "_" +
                                  CpuKernelLibraryName(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace math
}  // namespace oflite
