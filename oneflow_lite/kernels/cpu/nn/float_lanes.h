// 16 float32 lanes written with GCC vector extensions, for the row loops of
// the nn kernels (cross-entropy, causal softmax, layer norm): four SSE2, two
// AVX2 or one AVX-512 register, whichever instruction set the calling
// function is compiled for (the kernels clone their row functions per set
// with target_clones; these helpers are always inlined into each clone).
//
// A 16-lane value is two 8-lane GCC vectors (one AVX2 register each), with
// the arithmetic written out per half below, and comparisons and
// selections go through Greater, Less, FirstLanes and Select. As one
// 16-lane GCC vector, the AVX2 clones ran at scalar speed: GCC 12 splits
// arithmetic on a vector wider than the target's registers into pieces,
// but compiles a comparison, a lane-wise `?:` or a shuffle on one into a
// loop over lanes through the stack (the causal softmax took 2.2 ms for
// the GPT's 12x8x64x64 scores on the AMD EPYC Zen 3 VM, 5.6 ns a value).
// The AVX-512 clones take two 256-bit operations per 16 lanes (one 512-bit
// operation before).
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
constexpr int kHalf = kLanes / 2;
typedef float HalfFloats __attribute__((vector_size(kHalf * sizeof(float))));
typedef int32_t HalfInts __attribute__((vector_size(kHalf * sizeof(int32_t))));
typedef uint32_t HalfBits __attribute__((vector_size(kHalf * sizeof(uint32_t))));

#define OFLITE_LANES_INLINE inline __attribute__((always_inline))

// Lanes [0, 8) in lo, [8, 16) in hi.
struct Floats {
  HalfFloats lo, hi;
  float operator[](int lane) const { return lane < kHalf ? lo[lane] : hi[lane - kHalf]; }
};
// Per-lane masks: -1 (every bit) true, 0 false.
struct Ints {
  HalfInts lo, hi;
};

OFLITE_LANES_INLINE Floats Splat(float v) { return {HalfFloats{} + v, HalfFloats{} + v}; }

#define OFLITE_LANES_ARITHMETIC(op)                                            \
  OFLITE_LANES_INLINE Floats operator op(Floats a, Floats b) {                 \
    return {a.lo op b.lo, a.hi op b.hi};                                       \
  }                                                                            \
  OFLITE_LANES_INLINE Floats operator op(Floats a, float b) { return a op Splat(b); } \
  OFLITE_LANES_INLINE Floats operator op(float a, Floats b) { return Splat(a) op b; } \
  OFLITE_LANES_INLINE Floats& operator op##=(Floats& a, Floats b) { return a = a op b; }
OFLITE_LANES_ARITHMETIC(+)
OFLITE_LANES_ARITHMETIC(-)
OFLITE_LANES_ARITHMETIC(*)
OFLITE_LANES_ARITHMETIC(/)
#undef OFLITE_LANES_ARITHMETIC

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

// Half by half: a copy of the whole struct is an aggregate copy, which GCC
// does in 16-byte pieces through the stack.
OFLITE_LANES_INLINE Floats Load(const float* p) {
  Floats v;
  std::memcpy(&v.lo, p, sizeof(v.lo));
  std::memcpy(&v.hi, p + kHalf, sizeof(v.hi));
  return v;
}

OFLITE_LANES_INLINE void Store(float* p, Floats v) {
  std::memcpy(p, &v.lo, sizeof(v.lo));
  std::memcpy(p + kHalf, &v.hi, sizeof(v.hi));
}

// a > b per lane (false where either is NaN).
OFLITE_LANES_INLINE Ints Greater(Floats a, Floats b) { return {a.lo > b.lo, a.hi > b.hi}; }

// a < b per lane (false where either is NaN).
OFLITE_LANES_INLINE Ints Less(Floats a, Floats b) { return Greater(b, a); }

// mask ? a : b per lane.
OFLITE_LANES_INLINE Floats Select(Ints mask, Floats a, Floats b) {
  return {mask.lo ? a.lo : b.lo, mask.hi ? a.hi : b.hi};
}

// True in lanes [0, count), false in the others.
OFLITE_LANES_INLINE Ints FirstLanes(int64_t count) {
  const HalfInts index = {0, 1, 2, 3, 4, 5, 6, 7};
  const HalfInts bound = HalfInts{} + static_cast<int32_t>(count);
  return {index < bound, index + kHalf < bound};
}

// p[0, count) (count < kLanes) in the first lanes, `fill` in the others,
// reading all of p[0, kLanes) (the caller knows it is readable): one load,
// no trip through memory.
OFLITE_LANES_INLINE Floats LoadMasked(const float* p, int64_t count, float fill) {
  return Select(FirstLanes(count), Load(p), Splat(fill));
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

// 2^n per lane for whole numbers n in [-126, 127], from the exponent bits.
OFLITE_LANES_INLINE HalfFloats PowerOfTwo(HalfFloats n) {
  const HalfBits bits =
      (reinterpret_cast<HalfBits>(__builtin_convertvector(n, HalfInts)) + 127u) << 23;
  HalfFloats out;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

// exp(x) for x <= 0 (a value minus its row's maximum); 0 below -87 and for
// -inf, NaN for NaN. A Cody-Waite reduction and a degree-6 polynomial:
// relative error below 1.5 ulp over the range used.
OFLITE_LANES_INLINE Floats ExpNonPositive(Floats x) {
  const Floats low = Splat(-87.0f);
  const Ints underflow = Less(x, low);
  x = Select(underflow, low, x);
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
  const Floats scale = {PowerOfTwo(n.lo), PowerOfTwo(n.hi)};
  return Select(underflow, Splat(0.0f), p * scale);
}

// Lanes reduce by a fixed tree: lane l meets lane l ^ 8, then l ^ 4, l ^ 2
// and l ^ 1 (four steps instead of fifteen dependent ones).
OFLITE_LANES_INLINE Floats Partner(Floats v, int step) {
  switch (step) {
    case 8:
      return {v.hi, v.lo};
    case 4:
      return {__builtin_shuffle(v.lo, HalfInts{4, 5, 6, 7, 0, 1, 2, 3}),
              __builtin_shuffle(v.hi, HalfInts{4, 5, 6, 7, 0, 1, 2, 3})};
    case 2:
      return {__builtin_shuffle(v.lo, HalfInts{2, 3, 0, 1, 6, 7, 4, 5}),
              __builtin_shuffle(v.hi, HalfInts{2, 3, 0, 1, 6, 7, 4, 5})};
    default:
      return {__builtin_shuffle(v.lo, HalfInts{1, 0, 3, 2, 5, 4, 7, 6}),
              __builtin_shuffle(v.hi, HalfInts{1, 0, 3, 2, 5, 4, 7, 6})};
  }
}

// The largest lane (with a NaN lane, some lane's value; callers' later
// arithmetic turns NaN rows into NaN anyway).
OFLITE_LANES_INLINE float LaneMax(Floats v) {
  for (int step = 8; step >= 1; step /= 2) {
    const Floats other = Partner(v, step);
    v = Select(Greater(other, v), other, v);
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
