// Counter-based random numbers: the same (seed, counter) gives the same bits
// on every machine, compiler and standard library.
//
// std::*_distribution results are implementation-defined, so OneFlow-Lite
// never uses them for anything that must agree across machines (variable
// initial values, shuffling orders, synthetic data). Instead each value is a
// pure function of (seed, counter): a SplitMix64 finalizer applied to the
// seed and to the counter. Because values depend only on their index, a
// device holding a shard of a tensor computes its elements directly, without
// generating the rest.
//
// Floating-point helpers compute in double using only IEEE-754 basic
// operations (+, -, *, /, sqrt, exact scaling by powers of two), which are
// correctly rounded everywhere: NormalFromBits uses its own log and cosine
// (PortableLog, PortableCosTurns) instead of libm's, whose last bit differs
// between library versions. counter_rng.cc is compiled with
// -ffp-contract=off so no fused multiply-add changes a rounding.
//
// All functions are pure and thread-safe; CounterRng is a tiny value type
// (one object per thread).
#ifndef ONEFLOW_LITE_DATA_COUNTER_RNG_H_
#define ONEFLOW_LITE_DATA_COUNTER_RNG_H_

#include <cstdint>
#include <string>

namespace oflite {

// The SplitMix64 output function: a bijective 64-bit mixer.
inline uint64_t MixBits(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// Random bits for element `counter` of the stream `seed`.
// CounterBits given MixBits(seed) (a stream mixes its seed once).
inline uint64_t CounterBitsOfMixed(uint64_t mixed_seed, uint64_t counter) {
  return MixBits(mixed_seed ^ MixBits(counter * 0xD1B54A32D192ED03ULL + 0x8CB92BA72F3D8DD7ULL));
}
inline uint64_t CounterBits(uint64_t seed, uint64_t counter) {
  return CounterBitsOfMixed(MixBits(seed), counter);
}

// Derives an independent stream seed from a seed and a tag (e.g. an epoch,
// an iteration or a device index).
inline uint64_t DeriveStreamSeed(uint64_t seed, uint64_t tag) {
  return MixBits(seed ^ MixBits(tag + 0x632BE59BD9B4E019ULL));
}

// 64-bit FNV-1a of a string: a stable hash for names (op names).
inline uint64_t StableHash(const std::string& text) {
  uint64_t hash = 0xCBF29CE484222325ULL;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 0x100000001B3ULL;
  }
  return hash;
}

// Uniform in [0, 1), 53 bits of precision.
inline double UniformFromBits(uint64_t bits) {
  return static_cast<double>(bits >> 11) * (1.0 / 9007199254740992.0);
}

// Uniform in (0, 1]: never 0, safe for log.
inline double OpenUniformFromBits(uint64_t bits) {
  return static_cast<double>((bits >> 11) + 1) * (1.0 / 9007199254740992.0);
}

// Natural logarithm of x > 0 (finite), within 4e-16 relative + 2.5e-16
// absolute of the exact value.
double PortableLog(double x);

// cos(2 * pi * turns) for finite `turns`, within ~2e-16 absolute.
double PortableCosTurns(double turns);

// Standard normal by Box-Muller from two independent words:
// sqrt(-2 ln u) * cos(2 pi v), u in (0, 1], v in [0, 1).
double NormalFromBits(uint64_t bits_a, uint64_t bits_b);

// out[i] = UniformFromBits(CounterBitsOfMixed(mixed_seed, first + i)) for
// i in [0, n): the values of n NextUniform() calls, the same bits, computed
// eight at a time where the CPU has AVX2, the last n % 8 one by one
// (synthetic data draws a value per element, and the scalar mixer's chain
// of multiplies takes about 6 ns a value on a Zen 3 core).
void FillCounterUniforms(uint64_t mixed_seed, uint64_t first, int64_t n, double* out);

// A sequential stream over CounterBits(seed, 0), (seed, 1), ...
class CounterRng {
 public:
  explicit CounterRng(uint64_t seed, uint64_t counter = 0)
      : mixed_seed_(MixBits(seed)), counter_(counter) {}

  // CounterBits(seed, counter++).
  uint64_t Next() { return CounterBitsOfMixed(mixed_seed_, counter_++); }
  double NextUniform() { return UniformFromBits(Next()); }
  // n NextUniform() calls into out[0, n).
  void NextUniforms(int64_t n, double* out) {
    FillCounterUniforms(mixed_seed_, counter_, n, out);
    counter_ += static_cast<uint64_t>(n);
  }
  // Uniform integer in [0, bound), bound > 0, without modulo bias
  // (rejection sampling).
  uint64_t NextBelow(uint64_t bound) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    uint64_t bits = Next();
    while (bits >= limit) bits = Next();
    return bits % bound;
  }

 private:
  uint64_t mixed_seed_;
  uint64_t counter_;
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_DATA_COUNTER_RNG_H_
