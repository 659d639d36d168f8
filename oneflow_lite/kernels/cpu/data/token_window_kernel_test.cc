// token_window: window contents and targets, the splits, determinism,
// sharding over 2 and 3 devices, and every Init error naming the file.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "oneflow_lite/data/npy.h"
#include "oneflow_lite/data/token_file.h"
#include "oneflow_lite/device/device_context.h"
#include "oneflow_lite/kernels/kernel.h"
#include "oneflow_lite/ops/op_builder.h"
#include "oneflow_lite/ops/op_def.h"
#include "oneflow_lite/testing/op_runner.h"

namespace oflite {
namespace {

constexpr int64_t kTokens = 1000;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

// A uint16 .npy whose token i is i: a window shows where it starts.
std::string CountingFile() {
  static const std::string path = [] {
    std::vector<uint16_t> ids(kTokens);
    for (int64_t i = 0; i < kTokens; ++i) ids[i] = static_cast<uint16_t>(i);
    const std::string file = TempPath("counting.npy");
    CHECK_OK(WriteNpyUint16(file, {kTokens}, ids.data()));
    return file;
  }();
  return path;
}

// seed < 0: no seed attribute (the job's seed).
OpConf TokenWindow(const std::string& path, int64_t batch, int64_t block,
                   const std::string& split = "train", int64_t seed = 3) {
  OpConfBuilder builder("token_window", "data");
  builder.Output("input")
      .Output("target")
      .Attr("path", path)
      .Attr("batch_size", batch)
      .Attr("block_size", block)
      .Attr("vocab_size", kTokens)
      .Attr("split", split);
  if (seed >= 0) builder.Attr("seed", seed);
  return builder.Build();
}

struct Windows {
  std::vector<int32_t> input;
  std::vector<int32_t> target;
};

// The kernel on device `parallel_id` of `parallel_num` with `rows`
// physical rows (the even S(0) shard unless given).
class WindowRunner {
 public:
  WindowRunner(const OpConf& op, int64_t parallel_id, int64_t parallel_num, int64_t rows = -1)
      : op_(op) {
    StatusOr<ArgDescs> logical = InferOp(op_, {});
    CHECK_OK(logical.status());
    KernelInitContext init;
    init.op = &op_;
    for (const char* arg : {"input", "target"}) {
      TensorDesc desc = logical->at(arg).at(0);
      desc.shape.mutable_dim(0) = rows >= 0 ? rows : desc.shape.dim(0) / parallel_num;
      init.outputs[arg] = {desc};
      descs_.push_back(desc);
    }
    init.parallel_id = parallel_id;
    init.parallel_num = parallel_num;
    init.device = &device_;
    StatusOr<std::unique_ptr<Kernel>> kernel = CreateAndInitKernel(init, DEVICE_CPU, DT_INT32);
    status_ = kernel.status();
    if (kernel.ok()) kernel_ = std::move(kernel).value();
  }

  const Status& init_status() const { return status_; }

  Windows Run(int64_t iteration) {
    HostTensor input(descs_[0]);
    HostTensor target(descs_[1]);
    Blob input_blob = input.AsBlob();
    Blob target_blob = target.AsBlob();
    KernelContext ctx(op_, &device_, iteration);
    ctx.BindOutput("input", &input_blob);
    ctx.BindOutput("target", &target_blob);
    CHECK_OK(kernel_->Forward(&ctx));
    return Windows{input.ToVector<int32_t>(), target.ToVector<int32_t>()};
  }

 private:
  OpConf op_;
  CpuDeviceContext device_;
  std::vector<TensorDesc> descs_;
  Status status_;
  std::unique_ptr<Kernel> kernel_;
};

Windows RunOnce(const OpConf& op, int64_t iteration) {
  WindowRunner runner(op, 0, 1);
  EXPECT_TRUE(runner.init_status().ok()) << runner.init_status();
  return runner.Run(iteration);
}

Windows RunSharded(const OpConf& op, int64_t parallel_num, int64_t iteration) {
  Windows all;
  for (int64_t k = 0; k < parallel_num; ++k) {
    WindowRunner runner(op, k, parallel_num);
    EXPECT_TRUE(runner.init_status().ok()) << runner.init_status();
    Windows part = runner.Run(iteration);
    all.input.insert(all.input.end(), part.input.begin(), part.input.end());
    all.target.insert(all.target.end(), part.target.begin(), part.target.end());
  }
  return all;
}

void ExpectInitError(const OpConf& op, const std::vector<std::string>& pieces) {
  WindowRunner runner(op, 0, 1);
  ASSERT_FALSE(runner.init_status().ok()) << pieces.front();
  for (const std::string& piece : pieces) {
    EXPECT_NE(runner.init_status().message().find(piece), std::string::npos)
        << "'" << piece << "' not in: " << runner.init_status();
  }
}

TEST(TokenWindowKernelTest, WindowsAreContiguousAndTargetsShiftedByOne) {
  // Sizes 1 and odd.
  for (auto [batch, block] : {std::pair<int64_t, int64_t>{1, 1}, {5, 3}, {6, 64}}) {
    const OpConf op = TokenWindow(CountingFile(), batch, block);
    for (int64_t t : {0, 1, 17}) {
      const Windows w = RunOnce(op, t);
      ASSERT_EQ(w.input.size(), static_cast<size_t>(batch * block));
      for (int64_t row = 0; row < batch; ++row) {
        const int32_t start = w.input[row * block];
        // The documented start; the train split is the first 900 tokens.
        EXPECT_EQ(start, TokenWindowStart(3, t, row, 900, block));
        for (int64_t j = 0; j < block; ++j) {
          EXPECT_EQ(w.input[row * block + j], start + j);
          EXPECT_EQ(w.target[row * block + j], start + j + 1);
        }
        EXPECT_LE(start + block, 899);  // the target stays inside the split
      }
    }
  }
}

TEST(TokenWindowKernelTest, TheTestSplitIsTheLastTenPercent) {
  const OpConf op = TokenWindow(CountingFile(), 8, 4, "test");
  for (int64_t t = 0; t < 50; ++t) {
    const Windows w = RunOnce(op, t);
    for (size_t i = 0; i < w.input.size(); ++i) {
      ASSERT_GE(w.input[i], 900);
      ASSERT_LT(w.target[i], kTokens);
    }
    EXPECT_EQ(w.input[0], 900 + TokenWindowStart(3, t, 0, 100, 4));
  }
  OpConf half = TokenWindow(CountingFile(), 2, 4, "test");
  SetFloatAttr(&half, "val_fraction", 0.5);
  EXPECT_GE(RunOnce(half, 0).input[0], 500);
}

TEST(TokenWindowKernelTest, ABatchDependsOnlyOnSeedAndIteration) {
  const OpConf op = TokenWindow(CountingFile(), 6, 8);
  WindowRunner runner(op, 0, 1);
  ASSERT_TRUE(runner.init_status().ok()) << runner.init_status();
  const Windows first = runner.Run(5);
  runner.Run(6);
  EXPECT_EQ(runner.Run(5).input, first.input);   // no hidden state
  EXPECT_EQ(RunOnce(op, 5).input, first.input);  // a fresh kernel (a resume)
  EXPECT_NE(RunOnce(op, 6).input, first.input);
  EXPECT_NE(RunOnce(TokenWindow(CountingFile(), 6, 8, "train", 4), 5).input, first.input);
  // Without a seed attribute, the job's seed.
  const OpConf unseeded = TokenWindow(CountingFile(), 6, 8, "train", -1);
  ASSERT_FALSE(AttrView(unseeded).Has("seed"));
  EXPECT_NE(RunOnce(unseeded, 5).input, first.input);
}

TEST(TokenWindowKernelTest, ShardsOfTwoAndThreeDevicesAreTheOneDeviceBatch) {
  const OpConf op = TokenWindow(CountingFile(), 6, 5);
  for (int64_t t : {0, 3, 1000}) {
    const Windows single = RunOnce(op, t);
    for (int64_t devices : {2, 3}) {
      const Windows sharded = RunSharded(op, devices, t);
      EXPECT_EQ(sharded.input, single.input) << devices << " devices, iteration " << t;
      EXPECT_EQ(sharded.target, single.target) << devices << " devices, iteration " << t;
    }
    // Broadcast: every device produces the whole batch.
    WindowRunner broadcast(op, 1, 2, /*rows=*/6);
    ASSERT_TRUE(broadcast.init_status().ok()) << broadcast.init_status();
    EXPECT_EQ(broadcast.Run(t).input, single.input);
  }
  // uneven_split: 7 rows over 3 devices as 3 + 2 + 2.
  OpConf uneven = TokenWindow(CountingFile(), 7, 5);
  SetBoolAttr(&uneven, "uneven_split", true);
  const Windows single = RunOnce(uneven, 2);
  Windows all;
  for (int64_t k = 0; k < 3; ++k) {
    WindowRunner runner(uneven, k, 3, k == 0 ? 3 : 2);
    ASSERT_TRUE(runner.init_status().ok()) << runner.init_status();
    const Windows part = runner.Run(2);
    all.input.insert(all.input.end(), part.input.begin(), part.input.end());
  }
  EXPECT_EQ(all.input, single.input);
  // A physical batch that is no shard is refused naming the device.
  WindowRunner wrong(op, 1, 3, /*rows=*/4);
  ASSERT_FALSE(wrong.init_status().ok());
  EXPECT_NE(wrong.init_status().message().find("parallel_id 1 of 3"), std::string::npos)
      << wrong.init_status();
}

TEST(TokenWindowKernelTest, RawFilesOfEachIdType) {
  std::vector<int32_t> ids(300);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  const std::vector<uint16_t> u16(ids.begin(), ids.end());
  const std::string bin32 = TempPath("ids.bin"), bin16 = TempPath("ids16.bin");
  std::ofstream(bin32, std::ios::binary)
      .write(reinterpret_cast<const char*>(ids.data()), ids.size() * 4);
  std::ofstream(bin16, std::ios::binary)
      .write(reinterpret_cast<const char*>(u16.data()), u16.size() * 2);
  OpConf op32 = TokenWindow(bin32, 3, 4);
  SetStringAttr(&op32, "token_dtype", "int32");
  const Windows a = RunOnce(op32, 9);
  const Windows b = RunOnce(TokenWindow(bin16, 3, 4), 9);  // uint16 by default
  EXPECT_EQ(a.input, b.input);
  EXPECT_EQ(a.input[0], TokenWindowStart(3, 9, 0, 270, 4));
}

TEST(TokenWindowKernelTest, InitErrorsNameTheOpAndTheFile) {
  ExpectInitError(TokenWindow("/nonexistent/tokens.npy", 2, 4),
                  {"op 'data' (token_window)", "/nonexistent/tokens.npy"});
  // Corrupt: a truncated .npy.
  std::ifstream in(CountingFile(), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string cut = TempPath("cut.npy");
  std::ofstream(cut, std::ios::binary).write(bytes.data(), bytes.size() - 10);
  ExpectInitError(TokenWindow(cut, 2, 4), {"op 'data' (token_window)", cut, "truncated"});
  // An id outside the vocabulary: the file and the position.
  OpConf small_vocab = TokenWindow(CountingFile(), 2, 4);
  SetIntAttr(&small_vocab, "vocab_size", 500);
  ExpectInitError(small_vocab, {"op 'data' (token_window)", CountingFile(),
                                "token 500 at position 500", "[0, 500)"});
  // A split shorter than one window: the file, the split, its count and T.
  ExpectInitError(TokenWindow(CountingFile(), 2, 100, "test"),
                  {"op 'data' (token_window)", CountingFile(), "test split", "holds 100 tokens",
                   "block_size 100"});
  ExpectInitError(TokenWindow(CountingFile(), 2, 900),
                  {"train split", "holds 900 tokens", "block_size 900"});
  EXPECT_TRUE(WindowRunner(TokenWindow(CountingFile(), 2, 99, "test"), 0, 1).init_status().ok());
}

TEST(TokenWindowOpTest, ShapesAndAttributeErrorsNameTheOp) {
  StatusOr<ArgDescs> descs = InferOp(TokenWindow(CountingFile(), 12, 64), {});
  ASSERT_TRUE(descs.ok()) << descs.status();
  EXPECT_EQ(descs->at("input").at(0), TensorDesc(Shape{12, 64}, DT_INT32));
  EXPECT_EQ(descs->at("target").at(0), TensorDesc(Shape{12, 64}, DT_INT32));
  std::vector<OpConf> bad(7, TokenWindow(CountingFile(), 12, 64));
  SetIntAttr(&bad[0], "batch_size", 0);
  SetIntAttr(&bad[1], "block_size", 0);
  SetIntAttr(&bad[2], "vocab_size", 0);
  SetStringAttr(&bad[3], "split", "dev");
  SetStringAttr(&bad[4], "token_dtype", "float32");
  SetFloatAttr(&bad[5], "val_fraction", 1.0);
  SetIntAttr(&bad[6], "eval_batches", -1);
  for (const OpConf& op : bad) {
    StatusOr<ArgDescs> inferred = InferOp(op, {});
    ASSERT_FALSE(inferred.ok());
    EXPECT_NE(inferred.status().message().find("op 'data' (token_window)"), std::string::npos)
        << inferred.status();
  }
}

TEST(TokenWindowOpTest, SbpSplitsTheBatchWhenItDivides) {
  StatusOr<const OpDef*> def = LookupOpDef("token_window");
  ASSERT_TRUE(def.ok());
  const OpConf op = TokenWindow(CountingFile(), 6, 4);
  const std::vector<TensorDesc> outputs = {TensorDesc(Shape{6, 4}, DT_INT32),
                                           TensorDesc(Shape{6, 4}, DT_INT32)};
  for (int64_t devices : {2, 3}) {
    SbpContext ctx(op, {}, outputs, devices);
    ASSERT_TRUE((*def)->sbp(&ctx).ok());
    ASSERT_EQ(ctx.signatures().size(), 1u);
    EXPECT_EQ(ctx.signatures()[0].ToString(), " -> S(0), S(0)");
  }
  SbpContext four(op, {}, outputs, 4);
  ASSERT_TRUE((*def)->sbp(&four).ok());
  EXPECT_TRUE(four.signatures().empty());
  ASSERT_FALSE(four.withheld().empty());
  EXPECT_NE(four.withheld()[0].find("not divisible by 4"), std::string::npos);
}

}  // namespace
}  // namespace oflite
