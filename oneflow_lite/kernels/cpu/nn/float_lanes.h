// 16 float32 lanes written with GCC vector extensions, for the row loops of
// the nn kernels (cross-entropy, causal softmax, layer norm): four SSE2, two
// AVX2 or one AVX-512 register, whichever instruction set the calling
// function is compiled for (the kernels clone their row functions per set
// with target_clones; these helpers are always inlined into each clone).
//
// Every operation is per lane or reduces lanes in a fixed order, and the
// libraries including this header compile without fused multiply-adds
// (nn/BUILD), so every clone gives the same bits.
#ifndef ONEFLOW_LITE_KERNELS_CPU_NN_FLOAT_LANES_H_
#define ONEFLOW_LITE_KERNELS_CPU_NN_FLOAT_LANES_H_

#include <cstdint>
#include <cstring>

namespace oflite {
namespace nn {
namespace lanes {

constexpr int kLanes = 16;
typedef float Floats __attribute__((vector_size(kLanes * sizeof(float))));
typedef int32_t Ints __attribute__((vector_size(kLanes * sizeof(int32_t))));
typedef uint32_t Bits __attribute__((vector_size(kLanes * sizeof(uint32_t))));

#define OFLITE_LANES_INLINE inline __attribute__((always_inline))

// The row functions' per-instruction-set clones, picked at load time by an
// ifunc resolver. Under ThreadSanitizer the resolver is instrumented and
// runs during relocation, before the sanitizer's runtime has started, and
// crashes every binary that links these kernels; a tsan build therefore
// compiles the default clone only (the bits are the same: see above).
#if defined(__SANITIZE_THREAD__)
#define OFLITE_CPU_CLONES
#else
#define OFLITE_CPU_CLONES __attribute__((target_clones("default", "avx2", "avx512f")))
#endif

OFLITE_LANES_INLINE Floats Splat(float v) { return Floats{} + v; }

OFLITE_LANES_INLINE Floats Load(const float* p) {
  Floats v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

OFLITE_LANES_INLINE void Store(float* p, Floats v) { std::memcpy(p, &v, sizeof(v)); }

// True (-1) in lanes [0, count), false (0) in the others.
OFLITE_LANES_INLINE Ints FirstLanes(int64_t count) {
  const Ints index = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  return index < (Ints{} + static_cast<int32_t>(count));
}

// p[0, count) (count < kLanes) in the first lanes, `fill` in the others,
// reading all of p[0, kLanes) (the caller knows it is readable): one load,
// no trip through memory.
OFLITE_LANES_INLINE Floats LoadMasked(const float* p, int64_t count, float fill) {
  return FirstLanes(count) ? Load(p) : Splat(fill);
}

// Like LoadMasked, reading only p[0, count) (through a buffer on the
// stack: slower, for the end of an array).
OFLITE_LANES_INLINE Floats LoadPartial(const float* p, int64_t count, float fill) {
  float padded[kLanes];
  for (int l = 0; l < kLanes; ++l) padded[l] = l < count ? p[l] : fill;
  return Load(padded);
}

// The first `count` lanes of v to p[0, count).
OFLITE_LANES_INLINE void StorePartial(float* p, Floats v, int64_t count) {
  float lanes[kLanes];
  Store(lanes, v);
  for (int64_t l = 0; l < count; ++l) p[l] = lanes[l];
}

// exp(x) for x <= 0 (a value minus its row's maximum); 0 below -87 and for
// -inf, NaN for NaN. A Cody-Waite reduction and a degree-6 polynomial:
// relative error below 1.5 ulp over the range used.
OFLITE_LANES_INLINE Floats ExpNonPositive(Floats x) {
  const Floats low = Splat(-87.0f);
  const Ints underflow = x < low;
  x = x < low ? low : x;
  // n = round(x / ln 2) by the 1.5 * 2^23 shifter; r = x - n ln 2 in two parts.
  const Floats shifter = Splat(12582912.0f);
  Floats n = x * 1.44269504088896341f + shifter;
  n = n - shifter;
  Floats r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  Floats p = Splat(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  // 2^n (n in [-126, 0]) built from its exponent bits.
  const Bits bits = (reinterpret_cast<Bits>(__builtin_convertvector(n, Ints)) + 127u) << 23;
  Floats scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return underflow ? Splat(0.0f) : p * scale;
}

// Lanes reduce by a fixed tree: lane l meets lane l ^ 8, then l ^ 4, l ^ 2
// and l ^ 1 (four steps instead of fifteen dependent ones).
OFLITE_LANES_INLINE Floats Partner(Floats v, int step) {
  switch (step) {
    case 8:
      return __builtin_shuffle(v, Ints{8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7});
    case 4:
      return __builtin_shuffle(v, Ints{4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11});
    case 2:
      return __builtin_shuffle(v, Ints{2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13});
    default:
      return __builtin_shuffle(v, Ints{1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14});
  }
}

// The largest lane (with a NaN lane, some lane's value; callers' later
// arithmetic turns NaN rows into NaN anyway).
OFLITE_LANES_INLINE float LaneMax(Floats v) {
  for (int step = 8; step >= 1; step /= 2) {
    const Floats other = Partner(v, step);
    v = other > v ? other : v;
  }
  return v[0];
}

// The lanes' sum, by the tree above.
OFLITE_LANES_INLINE float LaneSum(Floats v) {
  for (int step = 8; step >= 1; step /= 2) v = v + Partner(v, step);
  return v[0];
}

#undef OFLITE_LANES_INLINE

}  // namespace lanes
}  // namespace nn
}  // namespace oflite

#endif  // ONEFLOW_LITE_KERNELS_CPU_NN_FLOAT_LANES_H_
