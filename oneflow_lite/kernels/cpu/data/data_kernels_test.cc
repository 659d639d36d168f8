// Data source kernels: contents, shuffling determinism, epochs and sharding.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "oneflow_lite/data/counter_rng.h"
#include "oneflow_lite/device/device_context.h"
#include "oneflow_lite/kernels/kernel.h"
#include "oneflow_lite/ops/op_builder.h"
#include "oneflow_lite/ops/op_def.h"
#include "oneflow_lite/testing/op_runner.h"

namespace oflite {
namespace {

struct Batch {
  std::vector<float> image;
  std::vector<int32_t> label;
};

OpConf FashionMnist(const std::string& split, int64_t batch, bool shuffle, int64_t seed = 1) {
  return OpConfBuilder("fashion_mnist", "data")
      .Output("image")
      .Output("label")
      .Attr("split", split)
      .Attr("batch_size", batch)
      .Attr("shuffle", shuffle)
      .Attr("seed", seed)
      .Build();
}

OpConf RandomBatch(const Shape& shape, int64_t num_classes) {
  return OpConfBuilder("random_batch", "data")
      .Output("image")
      .Output("label")
      .Attr("shape", shape)
      .Attr("num_classes", num_classes)
      .Attr("seed", 5)
      .Build();
}

// A kernel instance on device `parallel_id` of `parallel_num`, with the
// physical outputs the plan would give an S(0) split (the whole logical
// batch when parallel_num is 1). Runs iterations on demand.
class SourceRunner {
 public:
  SourceRunner(const OpConf& op, int64_t parallel_id, int64_t parallel_num) : op_(op) {
    StatusOr<ArgDescs> logical = InferOp(op_, {});
    CHECK_OK(logical.status());
    KernelInitContext init;
    init.op = &op_;
    for (const char* arg : {"image", "label"}) {
      TensorDesc desc = logical->at(arg).at(0);
      desc.shape.mutable_dim(0) /= parallel_num;
      init.outputs[arg] = {desc};
      descs_.push_back(desc);
    }
    init.parallel_id = parallel_id;
    init.parallel_num = parallel_num;
    init.device = &device_;
    StatusOr<std::unique_ptr<Kernel>> kernel = CreateAndInitKernel(init, DEVICE_CPU, DT_FLOAT);
    status_ = kernel.status();
    if (kernel.ok()) kernel_ = std::move(kernel).value();
  }

  const Status& init_status() const { return status_; }

  Batch Run(int64_t iteration) {
    HostTensor image(descs_[0]);
    HostTensor label(descs_[1]);
    Blob image_blob = image.AsBlob();
    Blob label_blob = label.AsBlob();
    KernelContext ctx(op_, &device_, iteration);
    ctx.BindOutput("image", &image_blob);
    ctx.BindOutput("label", &label_blob);
    CHECK_OK(kernel_->Forward(&ctx));
    return Batch{image.ToVector<float>(), label.ToVector<int32_t>()};
  }

 private:
  OpConf op_;
  CpuDeviceContext device_;
  std::vector<TensorDesc> descs_;
  Status status_;
  std::unique_ptr<Kernel> kernel_;
};

Batch RunOnce(const OpConf& op, int64_t iteration) {
  SourceRunner runner(op, 0, 1);
  EXPECT_TRUE(runner.init_status().ok()) << runner.init_status();
  return runner.Run(iteration);
}

// The shards of `parallel_num` devices, concatenated in device order.
Batch RunSharded(const OpConf& op, int64_t parallel_num, int64_t iteration) {
  Batch all;
  for (int64_t k = 0; k < parallel_num; ++k) {
    SourceRunner runner(op, k, parallel_num);
    EXPECT_TRUE(runner.init_status().ok()) << runner.init_status();
    Batch part = runner.Run(iteration);
    all.image.insert(all.image.end(), part.image.begin(), part.image.end());
    all.label.insert(all.label.end(), part.label.begin(), part.label.end());
  }
  return all;
}

TEST(FashionMnistKernelTest, UnshuffledFirstBatchIsTheFirstSamples) {
  OpConf op = FashionMnist("train", 4, false);
  SetFloatAttr(&op, "mean", 0.5);
  SetFloatAttr(&op, "std", 0.25);
  TensorMap env;
  StatusOr<TensorMap> out = RunOp(op, &env);
  ASSERT_TRUE(out.ok()) << out.status();
  const HostTensor& image = out->at("data/image_0");
  EXPECT_EQ(image.shape(), (Shape{4, 1, 28, 28}));
  EXPECT_EQ(out->at("data/label_0").ToVector<int32_t>(), (std::vector<int32_t>{9, 0, 0, 3}));
  const float* pixels = image.data<float>();
  EXPECT_NEAR(pixels[14 * 28 + 14], (217.0 / 255.0 - 0.5) / 0.25, 1e-6);
  EXPECT_NEAR(pixels[0], -2.0, 1e-6);
}

TEST(FashionMnistKernelTest, FlattenAndTestSplit) {
  OpConf op = FashionMnist("test", 2, false);
  SetBoolAttr(&op, "flatten", true);
  TensorMap env;
  StatusOr<TensorMap> out = RunOp(op, &env);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->at("data/image_0").shape(), (Shape{2, 784}));
  EXPECT_EQ(out->at("data/label_0").ToVector<int32_t>(), (std::vector<int32_t>{9, 2}));
  EXPECT_NEAR(out->at("data/image_0").data<float>()[14 * 28 + 14], 110.0 / 255.0, 1e-6);
}

TEST(FashionMnistKernelTest, ShuffleIsDeterministicAndCoversTheEpoch) {
  OpConf op = FashionMnist("test", 2500, true, 7);  // 4 batches per epoch
  SourceRunner runner(op, 0, 1);
  ASSERT_TRUE(runner.init_status().ok()) << runner.init_status();
  std::vector<int> class_counts(10, 0);
  std::vector<Batch> epoch0;
  for (int64_t t = 0; t < 4; ++t) {
    epoch0.push_back(runner.Run(t));
    for (int32_t label : epoch0.back().label) ++class_counts[label];
  }
  EXPECT_EQ(class_counts, std::vector<int>(10, 250 * 4));  // every sample once
  EXPECT_EQ(RunOnce(op, 2).label, epoch0[2].label);        // fresh kernel, same batch
  EXPECT_EQ(RunOnce(op, 2).image, epoch0[2].image);
  EXPECT_NE(runner.Run(4).label, epoch0[0].label);  // epoch 1 reshuffles
  EXPECT_NE(RunOnce(FashionMnist("test", 2500, true, 8), 0).label, epoch0[0].label);
  // Unshuffled, epoch 1 repeats epoch 0.
  OpConf ordered = FashionMnist("test", 3000, false);  // 3 batches, 1000 dropped
  EXPECT_EQ(RunOnce(ordered, 3).label, RunOnce(ordered, 0).label);
}

TEST(FashionMnistKernelTest, ShardsConcatenateToTheOneDeviceBatch) {
  OpConf op = FashionMnist("test", 64, true, 3);
  for (int64_t t : {0, 5, 200}) {
    Batch single = RunOnce(op, t);
    for (int64_t devices : {2, 4}) {
      Batch sharded = RunSharded(op, devices, t);
      EXPECT_EQ(sharded.label, single.label) << devices << " devices, iteration " << t;
      EXPECT_EQ(sharded.image, single.image) << devices << " devices, iteration " << t;
    }
  }
}

TEST(FashionMnistKernelTest, ErrorsNameTheOpAndFile) {
  OpConf op = FashionMnist("test", 64, false);
  SetStringAttr(&op, "path", "/nonexistent/fmnist");
  SourceRunner missing(op, 0, 1);
  ASSERT_FALSE(missing.init_status().ok());
  EXPECT_NE(missing.init_status().message().find("op 'data' (fashion_mnist)"), std::string::npos);
  EXPECT_NE(missing.init_status().message().find("/nonexistent/fmnist/t10k-images-idx3-ubyte.gz"),
            std::string::npos)
      << missing.init_status();
  SourceRunner too_big(FashionMnist("test", 10001, false), 0, 1);
  EXPECT_FALSE(too_big.init_status().ok());
  SourceRunner uneven(FashionMnist("test", 64, false), 1, 3);  // 64 / 3 rows
  ASSERT_FALSE(uneven.init_status().ok());
  EXPECT_NE(uneven.init_status().message().find("parallel_id 1 of 3"), std::string::npos)
      << uneven.init_status();
  TensorMap env;
  StatusOr<TensorMap> zero = RunOp(FashionMnist("test", 0, false), &env);
  EXPECT_FALSE(zero.ok());
}

TEST(RandomBatchKernelTest, DeterministicLearnableAndSharded) {
  OpConf op = RandomBatch(Shape{6, 1, 2, 3}, 3);
  Batch a = RunOnce(op, 4);
  ASSERT_EQ(a.image.size(), 36u);
  EXPECT_EQ(a.image, RunOnce(op, 4).image);
  EXPECT_EQ(a.label, RunOnce(op, 4).label);
  EXPECT_NE(a.image, RunOnce(op, 5).image);
  for (size_t row = 0; row < 6; ++row) {
    ASSERT_GE(a.label[row], 0);
    ASSERT_LT(a.label[row], 3);
    for (size_t j = 0; j < 6; ++j) {
      const float value = a.image[row * 6 + j];
      const bool signal = static_cast<int32_t>(j % 3) == a.label[row];
      EXPECT_GE(value, signal ? 0.5f : -0.5f);
      EXPECT_LT(value, signal ? 1.5f : 0.5f);
    }
  }
  Batch sharded = RunSharded(op, 3, 4);
  EXPECT_EQ(sharded.image, a.image);
  EXPECT_EQ(sharded.label, a.label);
  TensorMap env;
  EXPECT_FALSE(RunOp(RandomBatch(Shape{4, 2}, 0), &env).ok());
}

// The values are the documented formula, computed here one at a time: rows
// longer than the kernel's chunk of uniforms drawn together (512), classes
// that do not divide the chunk, so the signal's position carries across.
TEST(RandomBatchKernelTest, ValuesAreTheDocumentedFormula) {
  const int64_t rows = 3, features = 1100, classes = 7, iteration = 2;
  const Batch batch = RunOnce(RandomBatch(Shape{rows, features}, classes), iteration);
  ASSERT_EQ(batch.image.size(), static_cast<size_t>(rows * features));
  const uint64_t stream = DeriveStreamSeed(/*seed attr=*/5, iteration);
  for (int64_t row = 0; row < rows; ++row) {
    CounterRng rng(DeriveStreamSeed(stream, static_cast<uint64_t>(row)));
    const int64_t label = static_cast<int64_t>(rng.NextBelow(classes));
    ASSERT_EQ(batch.label[static_cast<size_t>(row)], label) << "row " << row;
    for (int64_t j = 0; j < features; ++j) {
      const double signal = j % classes == label ? 1.0 : 0.0;
      const float expected = static_cast<float>(rng.NextUniform() - 0.5 + signal);
      ASSERT_EQ(batch.image[static_cast<size_t>(row * features + j)], expected)
          << "row " << row << " feature " << j;
    }
  }
}

// A plan whose attribute disagrees with its planned outputs (a corrupt or
// hand-edited plan: the shape attribute says 2^40 features, the blob holds
// 6) is refused at Init naming the op; before, Forward wrote past the blob.
TEST(RandomBatchKernelTest, OutputsThatCannotHoldTheBatchAreRefusedAtInit) {
  const OpConf op = RandomBatch(Shape{6, int64_t{1} << 40}, 3);
  CpuDeviceContext device;
  for (const auto& [image, label] :
       {std::make_pair(Shape{6, 6}, Shape{6}), std::make_pair(Shape{6, int64_t{1} << 40}, Shape{6, 2})}) {
    KernelInitContext init;
    init.op = &op;
    init.device = &device;
    init.outputs["image"] = {TensorDesc(image, DT_FLOAT)};
    init.outputs["label"] = {TensorDesc(label, DT_INT32)};
    StatusOr<std::unique_ptr<Kernel>> kernel = CreateAndInitKernel(init, DEVICE_CPU, DT_FLOAT);
    ASSERT_FALSE(kernel.ok()) << image << " " << label;
    EXPECT_NE(kernel.status().message().find("op 'data' (random_batch)"), std::string::npos)
        << kernel.status();
    EXPECT_NE(kernel.status().message().find("do not hold"), std::string::npos)
        << kernel.status();
  }
}

TEST(DataOpsTest, SbpSplitsTheBatchWhenItDivides) {
  StatusOr<const OpDef*> def = LookupOpDef("fashion_mnist");
  ASSERT_TRUE(def.ok());
  OpConf op = FashionMnist("train", 6, true);
  std::vector<TensorDesc> outputs = {TensorDesc(Shape{6, 1, 28, 28}, DT_FLOAT),
                                     TensorDesc(Shape{6}, DT_INT32)};
  SbpContext two(op, {}, outputs, 2);
  ASSERT_TRUE((*def)->sbp(&two).ok());
  ASSERT_EQ(two.signatures().size(), 1u);
  EXPECT_EQ(two.signatures()[0].ToString(), " -> S(0), S(0)");
  SbpContext four(op, {}, outputs, 4);
  ASSERT_TRUE((*def)->sbp(&four).ok());
  EXPECT_TRUE(four.signatures().empty());
}

}  // namespace
}  // namespace oflite
