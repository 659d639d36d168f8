// CPU kernel of `token_window`: reads the token file once in Init
// (data/token_file.h: every id checked against vocab_size; errors name the
// op and the file), keeps the tokens of its split, and at iteration t
// writes, for each of this device's rows g of the logical batch
// (batch_shard.h), the window starting at s = TokenWindowStart(seed, t, g,
// n, T) of the split's n tokens: input = tokens[s, s + T), target =
// tokens[s + 1, s + T + 1). A batch depends only on (seed, t, g), so the
// shards of a data-parallel run are the batch of one device, on every
// machine and after a resume.
#include <cstring>
#include <string>
#include <vector>

#include "oneflow_lite/data/token_file.h"
#include "oneflow_lite/kernels/cpu/data/batch_shard.h"
#include "oneflow_lite/kernels/kernel.h"

namespace oflite {
namespace {

class TokenWindowKernel final : public Kernel {
 public:
  Status Init(const KernelInitContext& ctx) override {
    const std::string where = "op '" + ctx.op->name() + "' (token_window)";
    const AttrView attrs = ctx.attrs();
    ASSIGN_OR_RETURN(std::string path, attrs.GetString("path"));
    ASSIGN_OR_RETURN(int64_t batch, attrs.GetInt("batch_size"));
    ASSIGN_OR_RETURN(block_, attrs.GetInt("block_size"));
    ASSIGN_OR_RETURN(int64_t vocab_size, attrs.GetInt("vocab_size"));
    const std::string dtype = attrs.GetStringOr("token_dtype", "uint16");
    const std::string split = attrs.GetStringOr("split", "train");
    const double val_fraction = attrs.GetFloatOr("val_fraction", kDefaultValFraction);
    seed_ = static_cast<uint64_t>(attrs.GetIntOr("seed", ctx.seed));
    if (batch <= 0 || block_ <= 0) {
      return InvalidArgumentError(where, ": batch_size ", batch, " and block_size ", block_,
                                  " must be > 0");
    }
    StatusOr<std::vector<int32_t>> tokens = ReadTokenFile(path, dtype, vocab_size);
    if (!tokens.ok()) return tokens.status().WithContext(where);
    StatusOr<TokenSplit> range =
        TokenSplitRange(static_cast<int64_t>(tokens->size()), split, val_fraction);
    if (!range.ok()) return range.status().WithContext(where);
    RETURN_IF_ERROR(CheckSplitHoldsWindow(path, split, range->size, block_).WithContext(where));
    tokens_.assign(tokens->begin() + range->begin, tokens->begin() + range->begin + range->size);
    ASSIGN_OR_RETURN(shard_, ResolveBatchShard(ctx, batch, "input", "target"));
    for (const char* output : {"input", "target"}) {
      const TensorDesc& desc = ctx.Output(output);
      if (desc.dtype != DT_INT32 || desc.shape != Shape{shard_.size, block_}) {
        return InvalidArgumentError(where, ": output ", output, " ", desc.ToString(),
                                    " is not int32 [", shard_.size, ", ", block_,
                                    "] as its attributes say");
      }
    }
    return Status::OK();
  }

  Status Forward(KernelContext* ctx) override {
    if (ctx->iteration() < 0) return ctx->Error("negative iteration");
    int32_t* input = ctx->Output("input")->data<int32_t>();
    int32_t* target = ctx->Output("target")->data<int32_t>();
    const int64_t split_size = static_cast<int64_t>(tokens_.size());
    const size_t row_bytes = static_cast<size_t>(block_) * sizeof(int32_t);
    for (int64_t row = 0; row < shard_.size; ++row) {
      const int64_t start =
          TokenWindowStart(seed_, ctx->iteration(), shard_.begin + row, split_size, block_);
      std::memcpy(input + row * block_, tokens_.data() + start, row_bytes);
      std::memcpy(target + row * block_, tokens_.data() + start + 1, row_bytes);
    }
    return Status::OK();
  }

 private:
  int64_t block_ = 1;
  uint64_t seed_ = 0;
  BatchShard shard_;
  std::vector<int32_t> tokens_;  // the split's tokens
};

REGISTER_KERNEL("token_window", DEVICE_CPU, DT_INT32, TokenWindowKernel);

}  // namespace
}  // namespace oflite
