// The op SBP rules Megatron-style tensor parallelism of the GPT relies on
// (api/transformer.h, TensorParallelOptions), checked on the ops of a real
// tiny GPT training job (forward and backward, float64):
//  - every signature each op offers agrees with its CPU kernel on 2 and 4
//    devices (testing/sbp_checker.h: shards in, outputs combined, compared
//    with one device), with the job's own shapes;
//  - the signatures the tensor-parallel layout needs are offered: column
//    split projections B, S(1) -> S(2), the head axis split through
//    reshape / transpose / batched matmul / causal_softmax (S(1)), row split
//    projections S(2), S(0) -> P with the bias added to P once, and the
//    backward ops' mirror images;
//  - a head count the devices do not divide offers no head split.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "oneflow_lite/api/data_sources.h"
#include "oneflow_lite/api/graph.h"
#include "oneflow_lite/api/transformer.h"
#include "oneflow_lite/ops/op_builder.h"
#include "oneflow_lite/testing/sbp_checker.h"

namespace oflite {
namespace {

constexpr int64_t kBatch = 2, kTime = 4, kVocab = 5, kChannels = 8;

// A one-block GPT in float64 with its backward ops (SGD).
Job TinyGptJob() {
  Graph g("tp", /*seed=*/3);
  Tensor tokens = HostInput(&g, "tp_tokens", Shape{kBatch, kTime}, DT_INT32);
  Tensor targets = HostInput(&g, "tp_targets", Shape{kBatch, kTime}, DT_INT32);
  GptConfig config;
  config.vocab_size = kVocab;
  config.block_size = kTime;
  config.layers = 1;
  config.heads = 4;
  config.channels = kChannels;
  config.dtype = DT_DOUBLE;
  config.tensor_parallel.degree = 2;
  GptModel gpt = Gpt(&g, tokens, config);
  g.Minimize(g.SparseSoftmaxCrossEntropy(gpt.logits, targets), Sgd{.learning_rate = 0.1});
  StatusOr<Job> job = g.Build();
  EXPECT_TRUE(job.ok()) << job.status();
  return job.ok() ? *job : Job();
}

// Random inputs of `op` with the job's descs: floats in [0.5, 2), integers
// (token ids, labels) in [0, vocab).
TensorMap InputsOf(const OpConf& op, const std::map<std::string, TensorDesc>& descs) {
  TensorMap env;
  uint64_t seed = 1;
  for (const ArgProto& arg : op.input()) {
    for (const std::string& lbn : arg.lbn()) {
      const TensorDesc& desc = descs.at(lbn);
      const bool integer = desc.dtype == DT_INT32 || desc.dtype == DT_INT64;
      env.emplace(lbn, RandomTensor(desc, ++seed, integer ? 0 : 0.5, integer ? kVocab : 2.0));
    }
  }
  return env;
}

std::vector<std::string> Texts(const std::vector<SbpSignature>& signatures) {
  std::vector<std::string> texts;
  for (const SbpSignature& s : signatures) texts.push_back(s.ToString());
  return texts;
}

bool IsModelOp(const OpConf& op) {
  return op.name().rfind("gpt-", 0) == 0 && op.input_size() > 0 && op.op_type() != "variable";
}

TEST(TensorParallelSbpTest, EveryOfferedSignatureOfTheGptAgreesWithItsKernel) {
  const Job job = TinyGptJob();
  ASSERT_GT(job.op_size(), 0);
  std::map<std::string, TensorDesc> descs;
  for (const LogicalBlobDesc& blob : job.blob()) descs[blob.lbn()] = TensorDesc(blob.desc());
  int checked = 0;
  size_t signatures = 0;
  for (const OpConf& op : job.op()) {
    if (!IsModelOp(op)) continue;
    for (int64_t devices : {2, 4}) {
      StatusOr<SbpCheckResult> result = CheckSbpSignatures(op, InputsOf(op, descs), devices);
      EXPECT_TRUE(result.ok()) << op.name() << " (" << op.op_type() << ") on " << devices
                               << " devices: " << result.status();
      if (result.ok()) signatures += result->signatures.size();
    }
    ++checked;
  }
  // Forward and backward of the embeddings, a block and the head.
  EXPECT_GT(checked, 60);
  EXPECT_GT(signatures, 300u);
  std::printf("%d ops, %zu signatures checked\n", checked, signatures);
}

TEST(TensorParallelSbpTest, TheMegatronSignaturesAreOffered) {
  const Job job = TinyGptJob();
  std::map<std::string, TensorDesc> descs;
  for (const LogicalBlobDesc& blob : job.blob()) descs[blob.lbn()] = TensorDesc(blob.desc());
  std::map<std::string, const OpConf*> ops;
  for (const OpConf& op : job.op()) ops[op.name()] = &op;
  // Forward: op -> the signature the layout needs.
  const std::vector<std::pair<std::string, std::string>> wanted = {
      {"gpt-h0-attn-query-matmul", "B, S(1) -> S(2)"},
      {"gpt-h0-attn-query-bias_add", "S(2), S(0) -> S(2)"},
      {"gpt-h0-attn-query-heads", "S(2) -> S(2)"},
      {"gpt-h0-attn-query-transpose", "S(2) -> S(1)"},
      {"gpt-h0-attn-scores", "S(1), S(1) -> S(1)"},
      {"gpt-h0-attn-softmax", "S(1) -> S(1)"},
      {"gpt-h0-attn-mix", "S(1), S(1) -> S(1)"},
      {"gpt-h0-attn-merge-transpose", "S(1) -> S(2)"},
      {"gpt-h0-attn-merge", "S(2) -> S(2)"},
      {"gpt-h0-attn-proj-matmul", "S(2), S(0) -> P"},
      {"gpt-h0-attn-proj-bias_add", "P, P -> P"},
      {"gpt-h0-mlp-fc-matmul", "B, S(1) -> S(2)"},
      {"gpt-h0-mlp-gelu", "S(2) -> S(2)"},
      {"gpt-h0-mlp-proj-matmul", "S(2), S(0) -> P"},
      {"gpt-h0-residual_1", "P, P -> P"},
  };
  for (const auto& [name, signature] : wanted) {
    ASSERT_TRUE(ops.count(name)) << name;
    StatusOr<SbpCheckResult> result = CheckSbpSignatures(*ops[name], InputsOf(*ops[name], descs), 2);
    ASSERT_TRUE(result.ok()) << name << ": " << result.status();
    std::vector<std::string> texts = Texts(result->signatures);
    EXPECT_NE(std::find(texts.begin(), texts.end(), signature), texts.end())
        << name << " does not offer " << signature;
  }
  // Backward: the head-split chain runs back on S(1) and the column-split
  // weights' gradients stay S(1) (no collective for them).
  std::map<std::string, std::string> backward_wanted = {
      {"causal_softmax_grad", "S(1), S(1) -> S(1)"},
  };
  int found = 0;
  for (const OpConf& op : job.op()) {
    auto it = backward_wanted.find(op.op_type());
    if (it == backward_wanted.end()) continue;
    StatusOr<SbpCheckResult> result = CheckSbpSignatures(op, InputsOf(op, descs), 2);
    ASSERT_TRUE(result.ok()) << op.name() << ": " << result.status();
    std::vector<std::string> texts = Texts(result->signatures);
    EXPECT_NE(std::find(texts.begin(), texts.end(), it->second), texts.end())
        << op.name() << " does not offer " << it->second;
    ++found;
  }
  EXPECT_EQ(found, 1);
}

TEST(TensorParallelSbpTest, HeadsTheDevicesDoNotDivideOfferNoHeadSplit) {
  // [B, T, 6] -> [B, T, 3, 2] on 2 devices: 3 heads do not split in two, so
  // a channel split (3 channels each) is no split of the head axis.
  OpConf reshape = OpConfBuilder("reshape", "heads")
                       .Input("x", "x")
                       .Output("y")
                       .Attr("shape", Shape{2, 4, 3, 2})
                       .Build();
  TensorMap env;
  env.emplace("x", RandomTensor(TensorDesc(Shape{2, 4, 6}, DT_DOUBLE), 5));
  StatusOr<SbpCheckResult> result = CheckSbpSignatures(reshape, env, 2);
  ASSERT_TRUE(result.ok()) << result.status();
  std::vector<std::string> texts = Texts(result->signatures);
  EXPECT_EQ(std::find(texts.begin(), texts.end(), "S(2) -> S(2)"), texts.end());
  // ... and had it been offered, the checker would refuse it.
  SbpSignature head_split{{SplitSbp(2)}, {SplitSbp(2)}};
  EXPECT_FALSE(CheckSbpSignature(reshape, env, head_split, 2).ok());
  // 4 heads on 2 devices: offered and consistent.
  reshape = OpConfBuilder("reshape", "heads4")
                .Input("x", "x")
                .Output("y")
                .Attr("shape", Shape{2, 4, 4, 2})
                .Build();
  env.clear();
  env.emplace("x", RandomTensor(TensorDesc(Shape{2, 4, 8}, DT_DOUBLE), 5));
  EXPECT_TRUE(CheckSbpSignature(reshape, env, head_split, 2).ok());
}

}  // namespace
}  // namespace oflite
