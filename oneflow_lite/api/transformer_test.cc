// The transformer layers (api/transformer.h) on the reference executor:
// causality of the whole GPT (a later token changes nothing before it),
// Linear over the last axis, the variables a GPT creates, tied weights,
// and errors naming the layer.
#include "oneflow_lite/api/transformer.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "oneflow_lite/api/data_sources.h"
#include "oneflow_lite/api/graph.h"
#include "oneflow_lite/reference/reference_executor.h"

namespace oflite {
namespace {

constexpr int64_t kBatch = 2, kTime = 8, kVocab = 11;

GptConfig TinyGpt() {
  GptConfig config;
  config.vocab_size = kVocab;
  config.block_size = kTime;
  config.layers = 2;
  config.heads = 2;
  config.channels = 8;
  return config;
}

// Runs one forward iteration of `job` on `tokens` and returns the logits.
std::vector<float> Logits(ReferenceExecutor* executor, const std::string& feed,
                          const std::string& logits_lbn, const std::vector<int32_t>& tokens) {
  EXPECT_TRUE(
      HostFeed::Push(feed, HostTensor::FromVector<int32_t>(Shape{kBatch, kTime}, tokens)).ok());
  StatusOr<std::vector<IterationMetrics>> run = executor->Run(1, {logits_lbn});
  EXPECT_TRUE(run.ok()) << run.status();
  if (!run.ok()) return {};
  return run->back().fetched.at(logits_lbn).ToVector<float>();
}

TEST(TransformerTest, ALaterTokenChangesNothingBeforeIt) {
  for (bool tied : {false, true}) {
    Graph g("causal", /*seed=*/5);
    const std::string feed = tied ? "causal_tied" : "causal";
    Tensor tokens = HostInput(&g, feed, Shape{kBatch, kTime}, DT_INT32);
    GptConfig config = TinyGpt();
    config.tie_weights = tied;
    config.activation = tied ? "gelu_tanh" : "gelu";
    GptModel gpt = Gpt(&g, tokens, config);
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_EQ(gpt.logits.shape(), (Shape{kBatch, kTime, kVocab}));
    g.AddOutput("logits", gpt.logits);
    g.SetIterations(2);
    StatusOr<Job> job = g.BuildForward();
    ASSERT_TRUE(job.ok()) << job.status();
    auto executor = ReferenceExecutor::Create(*job);
    ASSERT_TRUE(executor.ok()) << executor.status();
    std::vector<int32_t> a(kBatch * kTime), b;
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<int32_t>((3 * i + 1) % kVocab);
    b = a;
    const int64_t changed = 5;  // every row's token at position 5 and after differs
    for (int64_t r = 0; r < kBatch; ++r) {
      for (int64_t t = changed; t < kTime; ++t) {
        b[r * kTime + t] = (b[r * kTime + t] + 4) % kVocab;
      }
    }
    std::vector<float> la = Logits(executor->get(), feed, gpt.logits.lbn, a);
    std::vector<float> lb = Logits(executor->get(), feed, gpt.logits.lbn, b);
    ASSERT_EQ(la.size(), static_cast<size_t>(kBatch * kTime * kVocab));
    ASSERT_EQ(lb.size(), la.size());
    for (int64_t r = 0; r < kBatch; ++r) {
      for (int64_t t = 0; t < kTime; ++t) {
        bool same = true;
        for (int64_t v = 0; v < kVocab; ++v) {
          const size_t i = static_cast<size_t>((r * kTime + t) * kVocab + v);
          same = same && la[i] == lb[i];
        }
        // Bit-identical before the change; different from it on.
        EXPECT_EQ(same, t < changed) << "row " << r << " position " << t << " tied " << tied;
      }
    }
  }
}

TEST(TransformerTest, GptVariablesAndLinearOverTheLastAxis) {
  Graph g("names", /*seed=*/1);
  Tensor tokens = HostInput(&g, "names", Shape{kBatch, 6}, DT_INT32);
  GptModel gpt = Gpt(&g, tokens, TinyGpt());  // T = 6 < block 8: the table is sliced
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(gpt.logits.shape(), (Shape{kBatch, 6, kVocab}));
  ASSERT_EQ(gpt.blocks.size(), 2u);
  EXPECT_EQ(gpt.blocks[1].attention.query.weight.shape(), (Shape{8, 8}));
  EXPECT_EQ(gpt.blocks[0].mlp.fc.weight.shape(), (Shape{8, 32}));
  EXPECT_EQ(gpt.position_embedding.shape(), (Shape{kTime, 8}));
  Layer linear = Linear(&g, gpt.ln_f.output, 3);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(linear.output.shape(), (Shape{kBatch, 6, 3}));
  StatusOr<Job> job = g.BuildForward();
  ASSERT_TRUE(job.ok()) << job.status();
  std::set<std::string> variables;
  for (const OpConf& op : job->op()) {
    if (op.op_type() == "variable") variables.insert(op.name());
  }
  for (const char* name :
       {"gpt-wte-weight", "gpt-wpe", "gpt-h0-ln_1-gamma", "gpt-h0-attn-query-weight",
        "gpt-h0-attn-key-bias", "gpt-h0-attn-value-weight", "gpt-h0-attn-proj-weight",
        "gpt-h1-ln_2-beta", "gpt-h1-mlp-fc-bias", "gpt-h1-mlp-proj-weight", "gpt-ln_f-gamma",
        "gpt-lm_head-weight", "linear-weight", "linear-bias"}) {
    EXPECT_TRUE(variables.count(name)) << name;
  }
  // 2 embeddings + per block (2 LN x 2 + 4 attention x 2 + 2 MLP x 2) + LN_f x 2 + head
  // + the extra Linear's 2.
  EXPECT_EQ(variables.size(), 2u + 2 * 16 + 2 + 1 + 2);
}

TEST(TransformerTest, BadArgumentsNameTheLayer) {
  {
    Graph g("heads");
    Tensor tokens = HostInput(&g, "heads", Shape{kBatch, kTime}, DT_INT32);
    GptConfig config = TinyGpt();
    config.heads = 3;
    Gpt(&g, tokens, config);
    ASSERT_FALSE(g.ok());
    EXPECT_NE(g.status().message().find("gpt 'gpt'"), std::string::npos) << g.status();
    EXPECT_NE(g.status().message().find("heads 3"), std::string::npos) << g.status();
  }
  {
    Graph g("long");
    Tensor tokens = HostInput(&g, "long", Shape{kBatch, kTime + 1}, DT_INT32);
    Gpt(&g, tokens, TinyGpt());
    ASSERT_FALSE(g.ok());
    EXPECT_NE(g.status().message().find("block_size 8"), std::string::npos) << g.status();
  }
  {
    Graph g("attention");
    Tensor x = g.Variable("x", Shape{2, 4, 6});
    CausalSelfAttention(&g, x, {.heads = 4, .name = "attn"});
    ASSERT_FALSE(g.ok());
    EXPECT_NE(g.status().message().find("attention 'attn': 4 heads do not divide 6 channels"),
              std::string::npos)
        << g.status();
  }
  {
    Graph g("mlp");
    Tensor x = g.Variable("x", Shape{2, 4, 6});
    MlpBlock(&g, x, {.activation = "swish"});
    ASSERT_FALSE(g.ok());
    EXPECT_NE(g.status().message().find("mlp 'mlp'"), std::string::npos) << g.status();
    EXPECT_NE(g.status().message().find("'swish'"), std::string::npos) << g.status();
  }
}

}  // namespace
}  // namespace oflite
