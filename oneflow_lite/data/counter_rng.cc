#include "oneflow_lite/data/counter_rng.h"

#include <cmath>

namespace oflite {
namespace {

// ln 2 split so that exponent * kLn2High is exact for |exponent| < 2^11.
constexpr double kLn2High = 6.93147180369123816490e-01;
constexpr double kLn2Low = 1.90821492927058770002e-10;
constexpr double kSqrtHalf = 0.70710678118654752440;
constexpr double kTwoPi = 6.28318530717958647692;

// 2 * atanh(s) = 2 (s + s^3 / 3 + s^5 / 5 + ...), |s| <= 0.1716: 13 terms
// bring the truncation error below 1e-20.
double TwoAtanh(double s) {
  const double s2 = s * s;
  double sum = 0.0;
  for (int k = 12; k >= 0; --k) sum = sum * s2 + 2.0 / (2 * k + 1);
  return s * sum;
}

// Taylor series on [0, pi/4]; 11 terms are below 1e-20 there.
double CosSeries(double a) {
  const double a2 = a * a;
  double sum = 0.0;
  for (int k = 10; k >= 1; --k) sum = 1.0 - sum * a2 / ((2 * k - 1) * (2 * k));
  return sum;
}

double SinSeries(double a) {
  const double a2 = a * a;
  double sum = 0.0;
  for (int k = 10; k >= 1; --k) sum = 1.0 - sum * a2 / ((2 * k) * (2 * k + 1));
  return a * sum;
}

}  // namespace

double PortableLog(double x) {
  int exponent = 0;
  double mantissa = std::frexp(x, &exponent);  // exact: x = mantissa * 2^exponent
  if (mantissa < kSqrtHalf) {
    mantissa *= 2.0;
    --exponent;
  }
  const double s = (mantissa - 1.0) / (mantissa + 1.0);
  return exponent * kLn2High + (exponent * kLn2Low + TwoAtanh(s));
}

double PortableCosTurns(double turns) {
  double t = turns - std::floor(turns + 0.5);  // [-0.5, 0.5), exact
  if (t < 0) t = -t;                           // cos is even
  double sign = 1.0;
  if (t > 0.25) {  // cos(2 pi t) = -cos(2 pi (1/2 - t))
    t = 0.5 - t;
    sign = -1.0;
  }
  if (t > 0.125) return sign * SinSeries(kTwoPi * (0.25 - t));
  return sign * CosSeries(kTwoPi * t);
}

double NormalFromBits(uint64_t bits_a, uint64_t bits_b) {
  const double radius = std::sqrt(-2.0 * PortableLog(OpenUniformFromBits(bits_a)));
  return radius * PortableCosTurns(UniformFromBits(bits_b));
}

}  // namespace oflite
