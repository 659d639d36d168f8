// Every vectorized table this CPU supports against plain scalar loops, at
// sizes that exercise empty input, the scalar tail and several vector widths.
// Tolerance: none. Every table must be bit-identical to the scalar loops
// (float32, no fused multiply-add: vec.h), also for the optimizer updates.
// The loops with polynomial approximations (exp, the normal CDF) have no
// scalar twin: each table must give the baseline table's bits and stay
// within stated bounds of a double-precision reference.
#include "oneflow_lite/kernels/cpu/vec/vec.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace oflite {
namespace vec {
namespace {

const int64_t kSizes[] = {0, 1, 3, 7, 8, 15, 16, 17, 31, 33, 64, 257, 1003};

std::vector<float> Random(int64_t n, uint32_t seed, float low = -2.0f, float high = 2.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(low, high);
  std::vector<float> values(n);
  for (float& v : values) v = dist(rng);
  return values;
}

// Bit-identical (no output here is NaN).
void ExpectSame(const std::vector<float>& got, const std::vector<float>& want,
                const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << what << " at " << i;
}

class VecTest : public ::testing::TestWithParam<const Table*> {
 protected:
  const Table& table() const { return *GetParam(); }
  std::string Name(const char* fn, int64_t n) const {
    return std::string(IsaName(table().isa)) + " " + fn + " n=" + std::to_string(n);
  }
};

TEST_P(VecTest, ReluAndGradMatchReference) {
  for (int64_t n : kSizes) {
    std::vector<float> x = Random(n, 1), dy = Random(n, 2);
    if (n > 2) x[1] = std::numeric_limits<float>::quiet_NaN();  // NaN -> 0, like the functor
    if (n > 3) x[2] = -0.0f;
    std::vector<float> y(n), want_y(n), dx(n), want_dx(n);
    for (int64_t i = 0; i < n; ++i) want_y[i] = x[i] > 0 ? x[i] : 0;
    table().relu(x.data(), y.data(), n);
    ExpectSame(y, want_y, Name("relu", n));
    for (int64_t i = 0; i < n; ++i) want_dx[i] = want_y[i] > 0 ? dy[i] : 0;
    table().relu_grad(dy.data(), want_y.data(), dx.data(), n);
    ExpectSame(dx, want_dx, Name("relu_grad", n));
    // In place: y written over x.
    std::vector<float> in_place = x;
    table().relu(in_place.data(), in_place.data(), n);
    ExpectSame(in_place, want_y, Name("relu in place", n));
  }
}

TEST_P(VecTest, BiasAddMatchesReference) {
  for (int64_t rows : {1, 3, 5}) {
    for (int64_t channels : {1, 7, 16, 33, 257}) {
      const int64_t n = rows * channels;
      std::vector<float> x = Random(n, 3), bias = Random(channels, 4);
      for (bool relu : {false, true}) {
        std::vector<float> want(n), got(n);
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t c = 0; c < channels; ++c) {
            const float v = x[r * channels + c] + bias[c];
            want[r * channels + c] = relu ? (v > 0 ? v : 0) : v;
          }
        }
        table().bias_add_rows(x.data(), bias.data(), got.data(), rows, channels, relu);
        ExpectSame(got, want, Name(relu ? "bias_add_rows relu" : "bias_add_rows", n));
        // The same numbers as NCHW with outer = rows / 1 and inner = 1 ...
        table().bias_add_inner(x.data(), bias.data(), got.data(), rows, channels, 1, relu);
        ExpectSame(got, want, Name("bias_add_inner inner=1", n));
      }
    }
  }
  // ... and with spatial positions (inner 1, 9, 49, 196).
  for (int64_t inner : {9, 49, 196}) {
    const int64_t outer = 3, channels = 5, n = outer * channels * inner;
    std::vector<float> x = Random(n, 5), bias = Random(channels, 6), want(n), got(n);
    for (int64_t i = 0; i < n; ++i) {
      const float v = x[i] + bias[(i / inner) % channels];
      want[i] = v > 0 ? v : 0;
    }
    table().bias_add_inner(x.data(), bias.data(), got.data(), outer, channels, inner, true);
    ExpectSame(got, want, Name("bias_add_inner relu", n));
  }
}

TEST_P(VecTest, AddMatchesReference) {
  for (int64_t n : kSizes) {
    std::vector<float> a = Random(n, 7), b = Random(n, 8), out(n), want(n);
    for (int64_t i = 0; i < n; ++i) want[i] = a[i] + b[i];
    table().add(a.data(), b.data(), out.data(), n);
    ExpectSame(out, want, Name("add", n));
    std::vector<float> acc = b;
    table().add_into(a.data(), acc.data(), n);
    ExpectSame(acc, want, Name("add_into", n));
  }
}

TEST_P(VecTest, OptimizerUpdatesMatchReference) {
  const float scale = 0.75f, lr = 0.05f, decay = 0.01f, beta = 0.9f;
  for (int64_t n : kSizes) {
    const std::vector<float> model0 = Random(n, 9), diff = Random(n, 10), state0 = Random(n, 11);
    std::vector<float> model = model0, want = model0;
    for (int64_t i = 0; i < n; ++i) want[i] -= lr * (scale * diff[i] + decay * want[i]);
    table().sgd(model.data(), diff.data(), n, scale, lr, decay);
    ExpectSame(model, want, Name("sgd", n));

    model = model0;
    want = model0;
    std::vector<float> momentum = state0, want_momentum = state0;
    for (int64_t i = 0; i < n; ++i) {
      want_momentum[i] = beta * want_momentum[i] + (scale * diff[i] + decay * want[i]);
      want[i] -= lr * want_momentum[i];
    }
    table().momentum(model.data(), momentum.data(), diff.data(), n, scale, lr, decay, beta);
    ExpectSame(momentum, want_momentum, Name("momentum state", n));
    ExpectSame(model, want, Name("momentum model", n));
  }
}

TEST_P(VecTest, AdamMatchesReference) {
  const float scale = 1.0f, lr = 0.01f, beta1 = 0.9f, beta2 = 0.999f, epsilon = 1e-8f;
  const float correction1 = 1.0f - std::pow(beta1, 3.0f), correction2 = 1.0f - std::pow(beta2, 3.0f);
  for (float coupled : {0.0f, 0.01f}) {
    const float decoupled = coupled > 0 ? 0.0f : 0.02f;  // Adam with L2, then AdamW
    for (int64_t n : kSizes) {
      const std::vector<float> model0 = Random(n, 12), diff = Random(n, 13);
      const std::vector<float> m0 = Random(n, 14, -0.1f, 0.1f), v0 = Random(n, 15, 0.0f, 0.1f);
      std::vector<float> model = model0, m = m0, v = v0;
      std::vector<float> want = model0, want_m = m0, want_v = v0;
      for (int64_t i = 0; i < n; ++i) {
        const float g = scale * diff[i] + coupled * want[i];
        want_m[i] = beta1 * want_m[i] + (1 - beta1) * g;
        want_v[i] = beta2 * want_v[i] + (1 - beta2) * g * g;
        const float m_hat = want_m[i] / correction1, v_hat = want_v[i] / correction2;
        want[i] -= lr * (m_hat / (std::sqrt(v_hat) + epsilon) + decoupled * want[i]);
      }
      table().adam(model.data(), m.data(), v.data(), diff.data(), n, scale, lr, beta1, beta2,
                   epsilon, correction1, correction2, coupled, decoupled);
      ExpectSame(m, want_m, Name("adam m", n));
      ExpectSame(v, want_v, Name("adam v", n));
      ExpectSame(model, want, Name("adam model", n));
    }
  }
}

// The exp-based loops have no scalar twin in the kernels: each table must
// give the baseline table's bits and stay within 1e-6 (relative, at least 1)
// of a double-precision reference.
void ExpectNear(const std::vector<float>& got, const std::vector<double>& want,
                const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-6 * std::max(1.0, std::fabs(want[i]))) << what << " at " << i;
  }
}

TEST_P(VecTest, GeluTanhMatchesBaselineBitsAndTheFormula) {
  const Table& baseline = *SupportedTables().front();
  for (int64_t n : kSizes) {
    std::vector<float> x = Random(n, 21, -12.0f, 12.0f), dy = Random(n, 22);
    if (n > 4) x[3] = 0.0f;
    std::vector<float> y(n), dx(n), base_y(n), base_dx(n);
    std::vector<double> want_y(n), want_dx(n);
    for (int64_t i = 0; i < n; ++i) {
      const double v = x[i], k0 = std::sqrt(2.0 / M_PI);
      const double t = std::tanh(k0 * (v + 0.044715 * v * v * v));
      want_y[i] = 0.5 * v * (1 + t);
      want_dx[i] = dy[i] * (0.5 * (1 + t) + 0.5 * v * (1 - t * t) * k0 * (1 + 3 * 0.044715 * v * v));
    }
    table().gelu_tanh(x.data(), y.data(), n);
    table().gelu_tanh_grad(dy.data(), x.data(), dx.data(), n);
    baseline.gelu_tanh(x.data(), base_y.data(), n);
    baseline.gelu_tanh_grad(dy.data(), x.data(), base_dx.data(), n);
    ExpectSame(y, base_y, Name("gelu_tanh vs baseline", n));
    ExpectSame(dx, base_dx, Name("gelu_tanh_grad vs baseline", n));
    ExpectNear(y, want_y, Name("gelu_tanh", n));
    ExpectNear(dx, want_dx, Name("gelu_tanh_grad", n));
  }
}

TEST_P(VecTest, SoftmaxRowsMatchBaselineBitsAndTheFormula) {
  const Table& baseline = *SupportedTables().front();
  for (int64_t n : kSizes) {
    if (n == 0) continue;  // rows have at least one element
    const float scale = 0.7f;
    std::vector<float> x = Random(n, 23, -30.0f, 30.0f), dy = Random(n, 24);
    std::vector<float> y(n), base_y(n), dx(n), base_dx(n);
    table().softmax_row(x.data(), y.data(), n, scale);
    baseline.softmax_row(x.data(), base_y.data(), n, scale);
    ExpectSame(y, base_y, Name("softmax_row vs baseline", n));
    double max_value = -1e300, sum = 0, dot = 0;
    for (int64_t i = 0; i < n; ++i) max_value = std::max(max_value, double(scale) * x[i]);
    for (int64_t i = 0; i < n; ++i) sum += std::exp(double(scale) * x[i] - max_value);
    std::vector<double> want(n), want_dx(n);
    for (int64_t i = 0; i < n; ++i) want[i] = std::exp(double(scale) * x[i] - max_value) / sum;
    ExpectNear(y, want, Name("softmax_row", n));
    table().softmax_grad_row(dy.data(), y.data(), dx.data(), n, scale);
    baseline.softmax_grad_row(dy.data(), y.data(), base_dx.data(), n, scale);
    ExpectSame(dx, base_dx, Name("softmax_grad_row vs baseline", n));
    for (int64_t i = 0; i < n; ++i) dot += double(dy[i]) * y[i];
    for (int64_t i = 0; i < n; ++i) want_dx[i] = scale * double(y[i]) * (dy[i] - dot);
    ExpectNear(dx, want_dx, Name("softmax_grad_row", n));
  }
}

double ExactNormalCdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

// Phi against double erfc every 1e-4 over [-14, 14] and at the special
// points: absolute error at most 8e-8 (erf's at most 1.6e-7), and relative
// error in the left tail, where 1 + erf would have cancelled.
TEST_P(VecTest, NormalCdfIsCloseToErfOverADenseRangeAndInTheTails) {
  const Table& baseline = *SupportedTables().front();
  std::vector<float> x;
  for (int64_t k = -140000; k <= 140000; ++k) x.push_back(static_cast<float>(k * 1e-4));
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> y(n), base_y(n);
  table().normal_cdf(x.data(), y.data(), n);
  baseline.normal_cdf(x.data(), base_y.data(), n);
  ExpectSame(y, base_y, Name("normal_cdf vs baseline", n));
  for (int64_t i = 0; i < n; ++i) {
    const double want = ExactNormalCdf(x[i]);
    ASSERT_NEAR(y[i], want, 8e-8) << Name("normal_cdf", n) << " at x = " << x[i];
    if (x[i] < -1.0f && x[i] > -12.6f) {
      const double relative = x[i] > -6.0f ? 2e-6 : 6e-6;
      ASSERT_NEAR(y[i], want, relative * want) << Name("normal_cdf tail", n) << " at x = " << x[i];
    }
  }
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> special = {0.0f, -0.0f, inf, -inf, 40.0f, -40.0f, 1e-30f, -1e-30f};
  const std::vector<float> want = {0.5f, 0.5f, 1.0f, 0.0f, 1.0f, 0.0f, 0.5f, 0.5f};
  std::vector<float> got(special.size());
  table().normal_cdf(special.data(), got.data(), special.size());
  ExpectSame(got, want, Name("normal_cdf special points", special.size()));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  table().normal_cdf(&nan, got.data(), 1);
  EXPECT_TRUE(std::isnan(got[0])) << Name("normal_cdf NaN", 1);
}

TEST_P(VecTest, GeluErfMatchesBaselineBitsAndTheFormula) {
  const Table& baseline = *SupportedTables().front();
  for (int64_t n : kSizes) {
    std::vector<float> x = Random(n, 25, -12.0f, 12.0f), dy = Random(n, 26);
    if (n > 4) x[3] = 0.0f;
    std::vector<float> y(n), dx(n), base_y(n), base_dx(n), phi(n);
    std::vector<double> want_y(n), want_dx(n);
    for (int64_t i = 0; i < n; ++i) {
      const double v = x[i], cdf = ExactNormalCdf(v);
      want_y[i] = v * cdf;
      want_dx[i] = dy[i] * (cdf + v * std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI));
    }
    table().gelu_erf(x.data(), y.data(), n);
    table().gelu_erf_grad(dy.data(), x.data(), dx.data(), n);
    baseline.gelu_erf(x.data(), base_y.data(), n);
    baseline.gelu_erf_grad(dy.data(), x.data(), base_dx.data(), n);
    ExpectSame(y, base_y, Name("gelu_erf vs baseline", n));
    ExpectSame(dx, base_dx, Name("gelu_erf_grad vs baseline", n));
    ExpectNear(y, want_y, Name("gelu_erf", n));
    ExpectNear(dx, want_dx, Name("gelu_erf_grad", n));
    // gelu_erf is x times normal_cdf, bit for bit.
    table().normal_cdf(x.data(), phi.data(), n);
    for (int64_t i = 0; i < n; ++i) phi[i] = x[i] * phi[i];
    ExpectSame(y, phi, Name("gelu_erf vs x * normal_cdf", n));
  }
}

// y is gelu_erf's and dy * d gelu_erf_grad's, bit for bit.
TEST_P(VecTest, GeluErfAndDerivativeGivesGeluErfAndItsGradientBits) {
  for (int64_t n : kSizes) {
    std::vector<float> x = Random(n, 28, -12.0f, 12.0f), dy = Random(n, 29);
    if (n > 4) x[3] = 0.0f;
    if (n > 5) x[4] = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> y(n), d(n), want_y(n), want_dx(n), dx(n);
    table().gelu_erf_and_derivative(x.data(), y.data(), d.data(), n);
    table().gelu_erf(x.data(), want_y.data(), n);
    table().gelu_erf_grad(dy.data(), x.data(), want_dx.data(), n);
    for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * d[i];
    // Bit patterns (a NaN input gives NaN in both).
    for (int64_t i = 0; i < n; ++i) {
      uint32_t got_y, wanted_y, got_dx, wanted_dx;
      std::memcpy(&got_y, &y[i], 4);
      std::memcpy(&wanted_y, &want_y[i], 4);
      std::memcpy(&got_dx, &dx[i], 4);
      std::memcpy(&wanted_dx, &want_dx[i], 4);
      ASSERT_EQ(got_y, wanted_y) << Name("gelu_erf_and_derivative y", n) << " at " << i;
      ASSERT_EQ(got_dx, wanted_dx) << Name("gelu_erf_and_derivative dy * d", n) << " at " << i;
    }
  }
}

// The sum against a long double one (each square is exact in double, so
// only the additions round), and the same bits on every table.
TEST_P(VecTest, SumOfSquaresMatchesBaselineBitsAndALongDoubleSum) {
  const Table& baseline = *SupportedTables().front();
  for (int64_t n : kSizes) {
    const std::vector<float> x = Random(n, 27, -3.0f, 3.0f);
    long double want = 0;
    for (float v : x) want += static_cast<long double>(v) * v;
    const double got = table().sum_of_squares(x.data(), n);
    EXPECT_EQ(got, baseline.sum_of_squares(x.data(), n)) << Name("sum_of_squares", n);
    EXPECT_NEAR(got, static_cast<double>(want), 1e-15 * static_cast<double>(want))
        << Name("sum_of_squares", n);
  }
}

INSTANTIATE_TEST_SUITE_P(AllSupported, VecTest, ::testing::ValuesIn(SupportedTables()),
                         [](const ::testing::TestParamInfo<const Table*>& info) {
                           return std::string(IsaName(info.param->isa));
                         });

TEST(VecDispatchTest, ActiveIsTheWidestSupportedTable) {
  const std::vector<const Table*> tables = SupportedTables();
  ASSERT_FALSE(tables.empty());
  EXPECT_EQ(tables.front()->isa, Isa::kBaseline);
  EXPECT_EQ(&Active(), tables.back());
}

}  // namespace
}  // namespace vec
}  // namespace oflite
