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

// The hint on `op`'s output number `index` ("" when none), e.g. "S(1)" or
// "B,S(1)".
std::string HintOf(const Job& job, const std::string& op, int index = 0) {
  for (const OpConf& conf : job.op()) {
    if (conf.name() != op || conf.output_sbp_hint_size() <= index) continue;
    std::string text;
    for (const SbpParallel& sbp : conf.output_sbp_hint(index).sbp()) {
      text += (text.empty() ? "" : ",") + SbpToString(sbp);
    }
    return text;
  }
  return "";
}

Job TensorParallelJob(int64_t degree, bool data_axis, std::vector<Placement> stages = {}) {
  Graph g("tp", /*seed=*/5);
  Tensor tokens = HostInput(&g, "tp", Shape{kBatch, kTime}, DT_INT32);
  GptConfig config = TinyGpt();
  config.tensor_parallel = {.degree = degree, .data_axis = data_axis};
  config.stages = std::move(stages);
  GptModel gpt = Gpt(&g, tokens, config);
  g.AddOutput("logits", gpt.logits);
  StatusOr<Job> job = g.BuildForward();
  EXPECT_TRUE(job.ok()) << job.status();
  return job.ok() ? *job : Job();
}

TEST(TransformerTest, TensorParallelHintsAreMegatronLm) {
  const Job job = TensorParallelJob(2, false);
  for (const std::string part : {"attn-query", "attn-key", "attn-value", "mlp-fc"}) {
    EXPECT_EQ(HintOf(job, "gpt-h1-" + part + "-weight"), "S(1)") << part;
    EXPECT_EQ(HintOf(job, "gpt-h1-" + part + "-bias"), "S(0)") << part;
    EXPECT_EQ(HintOf(job, "gpt-h1-" + part + "-bias_add"), "S(2)") << part;
  }
  for (const std::string part : {"attn-proj", "mlp-proj"}) {
    EXPECT_EQ(HintOf(job, "gpt-h1-" + part + "-weight"), "S(0)") << part;
    EXPECT_EQ(HintOf(job, "gpt-h1-" + part + "-bias"), "B") << part;
    EXPECT_EQ(HintOf(job, "gpt-h1-" + part + "-bias_add"), "P") << part;
  }
  EXPECT_EQ(HintOf(job, "gpt-h1-attn-merge"), "S(2)");
  for (const std::string op : {"gpt-h1-residual_1", "gpt-h1-residual_2", "gpt-embed"}) {
    EXPECT_EQ(HintOf(job, op), "B") << op;
  }
  for (int output = 0; output < 3; ++output) {  // y, mean, inv_variance
    EXPECT_EQ(HintOf(job, "gpt-h0-ln_2-norm", output), "B");
    EXPECT_EQ(HintOf(job, "gpt-ln_f-norm", output), "B");
  }
  // On a [data, tensor] hierarchy: pairs, parameters B and activations S(0)
  // on the data axis.
  const Job two_d = TensorParallelJob(2, true);
  EXPECT_EQ(HintOf(two_d, "gpt-h0-attn-query-weight"), "B,S(1)");
  EXPECT_EQ(HintOf(two_d, "gpt-h0-mlp-proj-bias_add"), "S(0),P");
  EXPECT_EQ(HintOf(two_d, "gpt-h0-residual_2"), "S(0),B");
}

TEST(TransformerTest, DegreeOneAddsNoHint) {
  const Job plain = TensorParallelJob(1, false);
  for (const OpConf& op : plain.op()) {
    if (op.op_type() != "host_feed") {
      EXPECT_EQ(op.output_sbp_hint_size(), 0) << op.name();
    }
  }
}

TEST(TransformerTest, StagesPlaceContiguousBlocks) {
  EXPECT_EQ(GptBlockStage(0, 4, 2), 0);
  EXPECT_EQ(GptBlockStage(1, 4, 2), 0);
  EXPECT_EQ(GptBlockStage(2, 4, 2), 1);
  EXPECT_EQ(GptBlockStage(3, 4, 2), 1);
  // 5 blocks in 3 stages: 2, 2, 1.
  std::vector<int64_t> stages;
  for (int64_t i = 0; i < 5; ++i) stages.push_back(GptBlockStage(i, 5, 3));
  EXPECT_EQ(stages, (std::vector<int64_t>{0, 0, 1, 1, 2}));

  const Job job = TensorParallelJob(1, false, {*Placement::Parse("0:cpu:0"),
                                               *Placement::Parse("1:cpu:0")});
  auto machine_of = [&](const std::string& name) -> int64_t {
    for (const OpConf& op : job.op()) {
      if (op.name() != name) continue;
      if (!op.has_placement() || op.placement().machine_id_size() != 1) return -1;
      return op.placement().machine_id(0);
    }
    return -2;
  };
  EXPECT_EQ(machine_of("gpt-wte-weight"), 0);
  EXPECT_EQ(machine_of("gpt-wpe"), 0);
  EXPECT_EQ(machine_of("gpt-h0-attn-query-weight"), 0);
  EXPECT_EQ(machine_of("gpt-h1-attn-query-weight"), 1);
  EXPECT_EQ(machine_of("gpt-ln_f-norm"), 1);
  EXPECT_EQ(machine_of("gpt-lm_head-weight"), 1);
  // The names do not depend on the layout.
  std::set<std::string> plain, staged;
  const Job unstaged = TensorParallelJob(1, false);
  for (const OpConf& op : unstaged.op()) plain.insert(op.name());
  for (const OpConf& op : job.op()) staged.insert(op.name());
  EXPECT_EQ(plain, staged);
}

TEST(TransformerTest, LayoutErrorsNameTheNumbers) {
  auto error = [](int64_t degree, int64_t heads, int64_t stages) {
    Graph g("bad_layout", 1);
    Tensor tokens = HostInput(&g, "bad_layout", Shape{kBatch, kTime}, DT_INT32);
    GptConfig config = TinyGpt();
    config.heads = heads;
    config.tensor_parallel.degree = degree;
    config.stages.assign(stages, Placement());
    Gpt(&g, tokens, config);
    return g.status().ToString();
  };
  EXPECT_NE(error(3, 2, 0).find("tensor-parallel degree 3 does not divide the 2 heads"),
            std::string::npos)
      << error(3, 2, 0);
  EXPECT_NE(error(1, 2, 3).find("3 pipeline stages for 2 layers"), std::string::npos)
      << error(1, 2, 3);
  // The MLP's hidden units.
  Graph g("bad_mlp", 1);
  Tensor x = HostInput(&g, "bad_mlp", Shape{kBatch, kTime, 8}, DT_FLOAT);
  MlpOptions mlp;
  mlp.hidden = 10;
  mlp.tensor_parallel.degree = 4;
  MlpBlock(&g, x, mlp);
  EXPECT_NE(g.status().ToString().find("mlp 'mlp': tensor-parallel degree 4 does not divide the "
                                       "10 hidden units"),
            std::string::npos)
      << g.status();
}

}  // namespace
}  // namespace oflite
