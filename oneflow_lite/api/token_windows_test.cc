// TokenWindows (data_sources.h): the op it adds, its evaluation job, its
// build-time errors, CheckTokenWindows, and a bigram model that trains on
// it and reports a validation loss over eval_batches batches.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "oneflow_lite/api/data_sources.h"
#include "oneflow_lite/api/eval_job.h"
#include "oneflow_lite/api/graph.h"
#include "oneflow_lite/api/job_util.h"
#include "oneflow_lite/api/layers.h"
#include "oneflow_lite/common/attr.h"
#include "oneflow_lite/data/npy.h"
#include "oneflow_lite/reference/reference_executor.h"

namespace oflite {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

// `count` tokens of a cyclic text over `vocab` symbols ("abcabc..."): a
// bigram model can learn it exactly.
std::string CyclicTokens(const std::string& name, int64_t count, int64_t vocab) {
  std::vector<uint16_t> ids(count);
  for (int64_t i = 0; i < count; ++i) ids[i] = static_cast<uint16_t>(i % vocab);
  const std::string path = TempPath(name);
  CHECK_OK(WriteNpyUint16(path, {count}, ids.data()));
  return path;
}

TEST(TokenWindowsTest, AddsTheSourceAndItsEvaluationReadsEvalBatches) {
  const std::string path = CyclicTokens("cyclic.npy", 1000, 5);
  Graph g("lm", /*seed=*/3);
  TokenWindowData data = TokenWindows(&g, path, 12, 16, 5, {.eval_batches = 7});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(data.input.desc, TensorDesc(Shape{12, 16}, DT_INT32));
  EXPECT_EQ(data.target.desc, TensorDesc(Shape{12, 16}, DT_INT32));
  g.AddOutput("input", data.input);
  g.SetIterations(5);
  StatusOr<Job> job = g.Build();
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->conf().batch_size(), 12);
  EXPECT_EQ(job->conf().total_iters(), 5);
  const OpConf* op = FindOp(*job, "token_window");
  ASSERT_NE(op, nullptr);
  const AttrView attrs(*op);
  EXPECT_EQ(attrs.GetStringOr("path", ""), path);
  EXPECT_EQ(attrs.GetIntOr("block_size", 0), 16);
  EXPECT_EQ(attrs.GetIntOr("vocab_size", 0), 5);
  EXPECT_EQ(attrs.GetIntOr("test_count", 0), 7 * 12);
  EXPECT_TRUE(attrs.Has("seed"));
  StatusOr<Job> eval = MakeEvalJob(*job);
  ASSERT_TRUE(eval.ok()) << eval.status();
  EXPECT_EQ(eval->conf().total_iters(), 7);
  EXPECT_EQ(AttrView(*FindOp(*eval, "token_window")).GetStringOr("split", ""), "test");
  // A given seed is kept as is (the PyTorch twin reads the same windows).
  Graph seeded("lm");
  TokenWindows(&seeded, path, 12, 16, 5, {.seed = 1234, .name = "text"});
  StatusOr<Job> seeded_job = seeded.BuildForward();
  ASSERT_TRUE(seeded_job.ok()) << seeded_job.status();
  EXPECT_EQ(AttrView(*FindOp(*seeded_job, "text")).GetIntOr("seed", 0), 1234);
  // No evaluation without a test split or eval batches.
  for (TokenWindowOptions none :
       {TokenWindowOptions{.val_fraction = 0.0}, TokenWindowOptions{.eval_batches = 0}}) {
    Graph h("lm");
    TokenWindows(&h, path, 4, 16, 5, none);
    h.SetIterations(1);
    StatusOr<Job> built = h.Build();
    ASSERT_TRUE(built.ok()) << built.status();
    StatusOr<Job> no_eval = MakeEvalJob(*built);
    ASSERT_TRUE(no_eval.ok()) << no_eval.status();
    EXPECT_EQ(no_eval->conf().total_iters(), 0);
  }
}

TEST(TokenWindowsTest, BuildErrorsNameTheFileSplitAndCounts) {
  const std::string path = CyclicTokens("short.npy", 100, 5);
  struct Case {
    std::string path;
    int64_t block;
    TokenWindowOptions options;
    std::vector<std::string> pieces;
  };
  const std::vector<Case> cases = {
      {"/nonexistent/tokens.npy", 8, {}, {"TokenWindows", "/nonexistent/tokens.npy"}},
      {path,
       10,
       {},
       {"TokenWindows", path, "test split", "holds 10 tokens", "block_size 10", "eval_batches"}},
      {path, 90, {.eval_batches = 0}, {path, "train split", "holds 90 tokens"}},
      {path, 10, {.split = "test", .eval_batches = 0}, {path, "test split", "holds 10 tokens"}},
      {path, 0, {}, {path, "block must be > 0"}},
      {path, 8, {.split = "dev"}, {"\"dev\""}},
      {path, 8, {.val_fraction = 1.5}, {"val_fraction"}},
      {path, 8, {.token_dtype = "int8"}, {"token_dtype", "'int8'"}},
  };
  for (const Case& c : cases) {
    Graph g("lm");
    TokenWindowData data = TokenWindows(&g, c.path, 4, c.block, 5, c.options);
    ASSERT_FALSE(g.ok()) << c.pieces.front();
    EXPECT_FALSE(data.input.valid());
    for (const std::string& piece : c.pieces) {
      EXPECT_THAT(g.status().message(), HasSubstr(piece));
    }
  }
}

TEST(TokenWindowsTest, CheckTokenWindowsReadsEveryId) {
  const std::string path = CyclicTokens("check.npy", 200, 7);
  EXPECT_TRUE(CheckTokenWindows(path, 19, 7).ok());
  Status bad_id = CheckTokenWindows(path, 8, 6);
  EXPECT_EQ(bad_id.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_id.message(), HasSubstr("'" + path + "': token 6 at position 6"));
  EXPECT_THAT(CheckTokenWindows(path, 20, 7).message(), HasSubstr("holds 20 tokens"));
  EXPECT_TRUE(CheckTokenWindows(path, 20, 7, {.eval_batches = 0}).ok());
  EXPECT_EQ(CheckTokenWindows("/nonexistent/t.bin", 8, 7).code(), StatusCode::kNotFound);
}

// A bigram model over [B, T] windows learns "abcde..." and its evaluation
// reports the validation loss over the test windows.
TEST(TokenWindowsTest, ABigramModelTrainsAndIsEvaluated) {
  constexpr int64_t kVocab = 5, kBatch = 4, kBlock = 8;
  const std::string path = CyclicTokens("bigram.npy", 2000, kVocab);
  Graph g("bigram", /*seed=*/1);
  TokenWindowData data = TokenWindows(&g, path, kBatch, kBlock, kVocab, {.eval_batches = 3});
  Tensor logits = Embedding(&g, data.input, kVocab, kVocab);
  Tensor loss = g.SparseSoftmaxCrossEntropy(g.Reshape(logits, Shape{kBatch * kBlock, kVocab}),
                                            g.Reshape(data.target, Shape{kBatch * kBlock}));
  g.Minimize(loss, Adam{.learning_rate = 0.1});
  g.SetIterations(60);
  StatusOr<Job> job = g.Build();
  ASSERT_TRUE(job.ok()) << job.status();
  StatusOr<ReferenceTrainResult> trained = TrainReference(*job);
  ASSERT_TRUE(trained.ok()) << trained.status();
  ASSERT_EQ(trained->losses.size(), 60u);
  EXPECT_NEAR(trained->losses.front(), std::log(5.0), 0.5);
  EXPECT_LT(trained->losses.back(), 0.1);
  StatusOr<std::map<std::string, double>> eval = EvaluateReference(*job, trained->variables);
  ASSERT_TRUE(eval.ok()) << eval.status();
  EXPECT_LT(eval->at("loss"), 0.1);
}

}  // namespace
}  // namespace oflite
