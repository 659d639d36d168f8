// The function table of one instruction set (vec.h). Kept apart from
// vec.h so the per-ISA translation units (vec_impl.inc) include no header
// with inline functions.
#ifndef ONEFLOW_LITE_KERNELS_CPU_VEC_VEC_TABLE_H_
#define ONEFLOW_LITE_KERNELS_CPU_VEC_VEC_TABLE_H_

#include <cstdint>

namespace oflite {
namespace vec {

enum class Isa { kBaseline = 0, kAvx2 = 1, kAvx512 = 2 };

// The loops of one instruction set; each computes exactly what its comment says,
// element by element, in float32 without fused multiply-adds.
struct Table {
  Isa isa;
  // y = max(x, 0) (NaN -> 0, like the reference functor).
  void (*relu)(const float* x, float* y, int64_t n);
  // dx = y > 0 ? dy : 0.
  void (*relu_grad)(const float* dy, const float* y, float* dx, int64_t n);
  // y[r, c] = x[r, c] + bias[c] for rows x channels, then ReLU when `relu`.
  void (*bias_add_rows)(const float* x, const float* bias, float* y, int64_t rows,
                        int64_t channels, bool relu);
  // y[o, c, i] = x[o, c, i] + bias[c] (inner > 1: NCHW), ReLU when `relu`.
  void (*bias_add_inner)(const float* x, const float* bias, float* y, int64_t outer,
                         int64_t channels, int64_t inner, bool relu);
  // out = a + b.
  void (*add)(const float* a, const float* b, float* out, int64_t n);
  // out += a.
  void (*add_into)(const float* a, float* out, int64_t n);
  // model -= lr * (scale * diff + decay * model).
  void (*sgd)(float* model, const float* diff, int64_t n, float scale, float lr, float decay);
  // momentum = beta * momentum + (scale * diff + decay * model);
  // model -= lr * momentum.
  void (*momentum)(float* model, float* momentum, const float* diff, int64_t n, float scale,
                   float lr, float decay, float beta);
  // Adam/AdamW (formula: kernels/cpu/train/optimizer_kernels.cc).
  void (*adam)(float* model, float* m, float* v, const float* diff, int64_t n, float scale,
               float lr, float beta1, float beta2, float epsilon, float correction1,
               float correction2, float coupled_decay, float decoupled_decay);
  // GELU, tanh form: y = 0.5 x (1 + tanh(u)) = x / (1 + exp(-2u)),
  // u = sqrt(2/pi) (x + 0.044715 x^3). exp is a branch-free polynomial
  // (relative error about 1e-7; vec_impl.inc), the same on every table.
  void (*gelu_tanh)(const float* x, float* y, int64_t n);
  // dx = dy * d/dx gelu_tanh(x).
  void (*gelu_tanh_grad)(const float* dy, const float* x, float* dx, int64_t n);
  // y[0, n) = softmax(scale * x[0, n)), n >= 1 (max-subtracted, the exp above).
  // The sum runs in 16 interleaved partial sums combined in a fixed order, so
  // every table still gives the same bits.
  void (*softmax_row)(const float* x, float* y, int64_t n, float scale);
  // dx[0, n) = scale * y * (dy - sum(dy * y)), the sum as in softmax_row.
  void (*softmax_grad_row)(const float* dy, const float* y, float* dx, int64_t n, float scale);
  // GELU, erf form: y = x Phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2 the
  // standard normal CDF, by a branch-free approximation (NormalCdf in
  // vec_impl.inc, the same bits on every table): Phi within 8e-8 absolute
  // of the exact value (so erf within 1.6e-7); in the left tail relative
  // error below 2e-6 down to x = -6 and 6e-6 down to -12.6, 0 below.
  void (*gelu_erf)(const float* x, float* y, int64_t n);
  // dx = dy * (Phi(x) + x phi(x)), phi the normal density (its exp is a
  // polynomial too, relative error about 1e-7 plus the rounding of x^2 / 2).
  void (*gelu_erf_grad)(const float* dy, const float* x, float* dx, int64_t n);
  // y = Phi(x), the function gelu_erf uses (NaN stays NaN).
  void (*normal_cdf)(const float* x, float* y, int64_t n);
  // sum(x[i]^2) over [0, n): each square is exact in double; 16 double
  // partial sums combined pairwise in a fixed order (the same bits on every
  // table; the order differs from a plain sequential loop).
  double (*sum_of_squares)(const float* x, int64_t n);
  // gelu_erf's y and d = Phi(x) + x phi(x), the bits gelu_erf_grad gives for
  // dy = 1: dy * d is gelu_erf_grad's dx bit for bit (the compiler's
  // gelu_and_derivative fusion, compiler/fusion.h).
  void (*gelu_erf_and_derivative)(const float* x, float* y, float* d, int64_t n);
};

}  // namespace vec
}  // namespace oflite

#endif  // ONEFLOW_LITE_KERNELS_CPU_VEC_VEC_TABLE_H_
