// CPU embedding (row gather) and embedding_grad (scatter-add into a zeroed
// table). Every index is checked against the vocabulary size V; a bad one
// fails the call with the op, the index, its flat position and V.
#include <algorithm>
#include <cstring>

#include "oneflow_lite/kernels/cpu/nn/cpu_nn_util.h"
#include "oneflow_lite/kernels/kernel.h"

namespace oflite {
namespace nn {
namespace {

StatusOr<int64_t> CheckedIndex(KernelContext* ctx, const Blob& indices, int64_t position,
                               int64_t vocabulary) {
  const int64_t index = IndexAt(indices, position);
  if (index < 0 || index >= vocabulary) {
    return ctx->Error("index ", index, " at position ", position,
                      " is out of range for vocabulary size ", vocabulary);
  }
  return index;
}

template <typename T>
class EmbeddingKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    const Blob& weight = ctx->Input("weight");
    const Blob& indices = ctx->Input("indices");
    const int64_t vocabulary = weight.shape().dim(0), depth = weight.shape().dim(1);
    T* out = ctx->Output("out")->data<T>();
    for (int64_t p = 0; p < indices.elem_count(); ++p) {
      ASSIGN_OR_RETURN(int64_t index, CheckedIndex(ctx, indices, p, vocabulary));
      if (depth > 0) {
        std::memcpy(out + p * depth, weight.data<T>() + index * depth, depth * sizeof(T));
      }
    }
    return Status::OK();
  }
};

template <typename T>
class EmbeddingGradKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    const Blob& indices = ctx->Input("indices");
    const T* dy = ctx->Input("dy").data<T>();
    Blob* dweight_blob = ctx->Output("dweight");
    const int64_t vocabulary = dweight_blob->shape().dim(0);
    const int64_t depth = dweight_blob->shape().dim(1);
    T* dweight = dweight_blob->data<T>();
    std::fill(dweight, dweight + dweight_blob->elem_count(), T(0));
    for (int64_t p = 0; p < indices.elem_count(); ++p) {
      ASSIGN_OR_RETURN(int64_t index, CheckedIndex(ctx, indices, p, vocabulary));
      T* row = dweight + index * depth;
      const T* grad = dy + p * depth;
      for (int64_t d = 0; d < depth; ++d) row[d] += grad[d];
    }
    return Status::OK();
  }
};

REGISTER_NN_CPU_KERNELS("embedding", EmbeddingKernel);
REGISTER_NN_CPU_KERNELS("embedding_grad", EmbeddingGradKernel);

}  // namespace
}  // namespace nn
}  // namespace oflite
