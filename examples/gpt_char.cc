// A character-level GPT (nanoGPT's CPU configuration by default: 4 layers,
// 4 heads, 128 channels, a 64-character context, batch 12, AdamW with a
// cosine schedule), trained on text through the training driver.
//
//   bazel run //examples:gpt_char                      # train on the fortunes corpus
//   # your text, with checkpoints:
//   bazel run //examples:gpt_char -- --text my.txt --iters 5000 --
//       --save-every 500 --checkpoint-dir ckpt
//   # text from a checkpoint:
//   bazel run //examples:gpt_char -- --generate-from ckpt/iter-2000
//       --prompt "The " --tokens 300 --temperature 0.8
//   (each command is one line; it is broken here to fit)
//
// The text (default: Debian's `fortunes`, installed by tools/install_deps.sh)
// is tokenized byte by byte into <data-dir>/tokens.npy and vocab.txt; the
// last --val-fraction of it is the validation split, whose loss is printed
// every --eval-every iterations and at the end. --init-out DIR writes the
// initial weights as .npy (the PyTorch twin, tools/bench/gpt_torch.py,
// starts from them). After `--` come `oflite run`'s flags (--metrics-out,
// --save-every, --checkpoint-dir, --resume, --eval-every, --trace, ...).
//
// Layouts (docs/examples.md): --tp T splits every block Megatron-style over
// T devices (one all-reduce per attention and per MLP sub-block forward),
// --stages K puts the blocks in K pipeline stages (stage s on its own
// machines, or devices when the machines do not split), and the devices of
// --machines x --devices left over, --dp D = M x D / (T x K), take the batch
// (data parallel; with T > 1 a [D, T] hierarchy and 2-D hints).
//
// Generation compiles a forward-only plan over a [1, block] window fed
// from this process (HostInput): the window holds the last `block` tokens,
// left-aligned; the logits at the last real token give the next one, so a
// prompt shorter than the context is read exactly as in training.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "oneflow_lite/api/data_sources.h"
#include "oneflow_lite/api/layers.h"
#include "oneflow_lite/api/transformer.h"
#include "tools/driver/trainer.h"

namespace {

using oflite::driver::ModelFlag;
using oflite::driver::TrainerConfig;

// Where the model runs: the parallel degrees and each pipeline stage's
// placement (empty: the driver's placement, data parallel over it).
struct GptLayout {
  int64_t data_parallel = 1;
  int64_t tensor_parallel = 1;
  std::vector<oflite::Placement> stages;

  bool two_dimensional() const { return data_parallel > 1 && tensor_parallel > 1; }
};

// The model's shape from the flags (validated in Prepare).
struct GptFlags {
  GptLayout layout;
  oflite::GptConfig model;
  int64_t block = 64;
  std::string tokens_path;
  double val_fraction = 0.1;
  int64_t eval_batches = 20;
  int64_t warmup = 100;
  double min_lr = 1e-4;
  double beta2 = 0.99;
  double weight_decay = 0.1;
  double grad_clip = 1.0;
};

// The largest divisor of `n` that is at most `limit` (at least 1).
int64_t DivisorAtMost(int64_t n, int64_t limit) {
  for (int64_t d = std::min(n, limit); d > 1; --d) {
    if (n % d == 0) return d;
  }
  return 1;
}

std::string Range(int64_t first, int64_t count) {
  return count == 1 ? std::to_string(first)
                    : std::to_string(first) + "-" + std::to_string(first + count - 1);
}

// Stage s's placement: its share of the machines when they split into
// `stages`, else its share of every machine's devices; a [data, tensor]
// hierarchy when both degrees exceed 1.
oflite::StatusOr<std::vector<oflite::Placement>> StagePlacements(const TrainerConfig& c,
                                                                 const GptLayout& layout,
                                                                 int64_t stages) {
  std::vector<oflite::Placement> placements;
  const bool by_machine = c.machines % stages == 0;
  if (!by_machine && c.devices % stages != 0) {
    return oflite::InvalidArgumentError(
        "--stages ", stages, " splits neither --machines ", c.machines, " nor --devices ",
        c.devices, " into equal stages; e.g. --machines ", stages * c.machines, " (one stage per ",
        c.machines, " machines) or --devices ", stages * c.devices);
  }
  const int64_t machines = by_machine ? c.machines / stages : c.machines;
  const int64_t devices = by_machine ? c.devices : c.devices / stages;
  for (int64_t s = 0; s < stages; ++s) {
    std::string text = Range(by_machine ? s * machines : 0, machines) + ":cpu:" +
                       Range(by_machine ? 0 : s * devices, devices);
    if (layout.two_dimensional()) {
      text += "@" + std::to_string(layout.data_parallel) + "x" +
              std::to_string(layout.tensor_parallel);
    }
    ASSIGN_OR_RETURN(oflite::Placement placement, oflite::Placement::Parse(text));
    placements.push_back(placement);
  }
  return placements;
}

// --tp, --stages and --dp against the model and --machines x --devices.
oflite::StatusOr<GptLayout> ReadLayout(const TrainerConfig& c, const oflite::GptConfig& model) {
  ASSIGN_OR_RETURN(int64_t tp, c.IntFlag("tp"));
  ASSIGN_OR_RETURN(int64_t stages, c.IntFlag("stages"));
  ASSIGN_OR_RETURN(int64_t dp, c.IntFlag("dp"));
  if (tp < 1 || stages < 1 || dp < 0) {
    return oflite::InvalidArgumentError("--tp and --stages must be positive and --dp >= 0 (0: "
                                        "the devices left over); got --tp ", tp, ", --stages ",
                                        stages, ", --dp ", dp);
  }
  if (model.heads % tp != 0) {
    return oflite::InvalidArgumentError(
        "--tp ", tp, " does not divide --heads ", model.heads, " (each device takes whole heads, "
        "and so ", model.channels, " / ", tp, " channels and ", 4 * model.channels, " / ", tp,
        " MLP units); e.g. --tp ", DivisorAtMost(model.heads, tp));
  }
  if (stages > model.layers || model.layers % stages != 0) {
    return oflite::InvalidArgumentError(
        "--stages ", stages, " does not split --layers ", model.layers, " into equal stages; "
        "e.g. --stages ", DivisorAtMost(model.layers, stages), ", or --layers ",
        stages * ((model.layers + stages - 1) / stages));
  }
  const int64_t devices = c.machines * c.devices;
  if (devices % (tp * stages) != 0 || (dp > 0 && dp * tp * stages != devices)) {
    const int64_t want = std::max<int64_t>(dp, 1) * tp * stages;
    const std::string asked = dp > 0 ? "--dp " + std::to_string(dp) + " x " : "";
    return oflite::InvalidArgumentError(
        asked, "--tp ", tp, " x --stages ", stages, " (", want, " devices) does not fit the ",
        devices, " devices of --machines ", c.machines, " x --devices ", c.devices,
        "; e.g. --machines ", stages, " --devices ", want / stages);
  }
  GptLayout layout;
  layout.tensor_parallel = tp;
  layout.data_parallel = devices / (tp * stages);
  if (tp > 1 || stages > 1) {
    ASSIGN_OR_RETURN(layout.stages, StagePlacements(c, layout, stages));
  }
  return layout;
}

oflite::StatusOr<GptFlags> ReadGptFlags(const TrainerConfig& c) {
  GptFlags f;
  ASSIGN_OR_RETURN(f.model.layers, c.IntFlag("layers"));
  ASSIGN_OR_RETURN(f.model.heads, c.IntFlag("heads"));
  ASSIGN_OR_RETURN(f.model.channels, c.IntFlag("channels"));
  ASSIGN_OR_RETURN(f.block, c.IntFlag("block"));
  ASSIGN_OR_RETURN(f.val_fraction, c.DoubleFlag("val-fraction"));
  ASSIGN_OR_RETURN(f.eval_batches, c.IntFlag("eval-batches"));
  ASSIGN_OR_RETURN(f.model.tie_weights, c.BoolFlag("tie-weights"));
  ASSIGN_OR_RETURN(f.warmup, c.IntFlag("warmup"));
  ASSIGN_OR_RETURN(f.min_lr, c.DoubleFlag("min-lr"));
  ASSIGN_OR_RETURN(f.beta2, c.DoubleFlag("beta2"));
  ASSIGN_OR_RETURN(f.weight_decay, c.DoubleFlag("weight-decay"));
  ASSIGN_OR_RETURN(f.grad_clip, c.DoubleFlag("grad-clip"));
  f.model.activation = c.StringFlag("activation");
  f.model.block_size = f.block;
  f.model.vocab_size = c.classes;
  f.model.name = "gpt";
  f.tokens_path = c.data_dir + "/tokens.npy";
  if (f.model.layers < 1 || f.model.heads < 1 || f.model.channels < 1 || f.block < 1 ||
      f.model.channels % f.model.heads != 0) {
    return oflite::InvalidArgumentError(
        "--layers, --heads, --channels and --block must be positive and --heads must divide "
        "--channels; got layers ", f.model.layers, ", heads ", f.model.heads, ", channels ",
        f.model.channels, ", block ", f.block);
  }
  if (f.warmup < 0 || f.min_lr < 0 || !(f.beta2 >= 0 && f.beta2 < 1) || f.weight_decay < 0 ||
      f.grad_clip < 0) {
    return oflite::InvalidArgumentError(
        "--warmup, --min-lr, --weight-decay and --grad-clip must be >= 0 and --beta2 in [0, 1); "
        "got ", f.warmup, ", ", f.min_lr, ", ", f.weight_decay, ", ", f.grad_clip, " and ",
        f.beta2);
  }
  if (!(f.val_fraction > 0 && f.val_fraction < 1) || f.eval_batches < 1) {
    return oflite::InvalidArgumentError("--val-fraction must be in (0, 1) and --eval-batches "
                                        "positive; got ", f.val_fraction, " and ",
                                        f.eval_batches);
  }
  ASSIGN_OR_RETURN(f.layout, ReadLayout(c, f.model));
  return f;
}

void Model(const TrainerConfig& c, oflite::Graph* g) {
  oflite::StatusOr<GptFlags> f = ReadGptFlags(c);
  if (!f.ok()) {
    g->RecordError(f.status());
    return;
  }
  const GptLayout& layout = f->layout;
  auto stage = [&](size_t s) -> std::unique_ptr<oflite::Graph::PlacementScope> {
    if (layout.stages.empty()) return nullptr;
    return std::make_unique<oflite::Graph::PlacementScope>(g->WithPlacement(layout.stages[s]));
  };
  oflite::TokenWindowOptions data_options;
  data_options.val_fraction = f->val_fraction;
  data_options.eval_batches = f->eval_batches;
  // The batch splits over the data-parallel devices; a tensor-parallel
  // group reads all of it.
  data_options.sbp = layout.tensor_parallel > 1 ? oflite::Broadcast() : oflite::Split(0);
  data_options.seed = c.seed;  // the PyTorch twin draws the same windows from --seed
  oflite::TokenWindowData data;
  {
    auto scope = stage(0);
    data = oflite::TokenWindows(g, f->tokens_path, c.batch, f->block, c.classes, data_options);
    if (layout.two_dimensional()) {  // (S(0), B): batch over the data axis, whole in a group
      oflite::NdSbp batch_split;
      *batch_split.add_sbp() = oflite::Split(0);
      *batch_split.add_sbp() = oflite::Broadcast();
      g->HintSbp(data.input, batch_split);
      g->HintSbp(data.target, batch_split);
    }
  }
  oflite::GptConfig model = f->model;
  model.tensor_parallel = {.degree = layout.tensor_parallel,
                           .data_axis = layout.two_dimensional()};
  model.stages = layout.stages;
  oflite::GptModel gpt = oflite::Gpt(g, data.input, model);
  auto scope = stage(layout.stages.empty() ? 0 : layout.stages.size() - 1);
  g->Minimize(g->SparseSoftmaxCrossEntropy(gpt.logits, data.target),
              oflite::AdamW{.learning_rate = c.lr,
                            .beta1 = 0.9,
                            .beta2 = f->beta2,
                            .weight_decay = f->weight_decay},
              {.schedule = oflite::LrScheduleOptions::Cosine(f->warmup, f->min_lr),
               .clip_global_norm = f->grad_clip,
               .weight_decay_min_rank = 2});
}

// Samples `count` characters after `prompt` from the checkpoint.
oflite::StatusOr<int> Generate(const TrainerConfig& c, const GptFlags& f,
                               const oflite::CharTokenizer& tokenizer) {
  const std::string checkpoint = c.StringFlag("generate-from");
  ASSIGN_OR_RETURN(int64_t count, c.IntFlag("tokens"));
  ASSIGN_OR_RETURN(double temperature, c.DoubleFlag("temperature"));
  ASSIGN_OR_RETURN(int64_t seed, c.IntFlag("sample-seed"));
  if (count < 1 || !(temperature > 0)) {
    return oflite::InvalidArgumentError("--tokens must be positive and --temperature > 0; got ",
                                        count, " and ", temperature);
  }
  std::string prompt = c.StringFlag("prompt");
  if (prompt.empty()) prompt = "\n";
  ASSIGN_OR_RETURN(std::vector<int32_t> tokens, tokenizer.Encode(prompt));

  oflite::Graph g("gpt_char_generate", c.seed);
  oflite::Tensor window =
      oflite::HostInput(&g, "window", oflite::Shape{1, f.block}, oflite::DT_INT32);
  oflite::GptModel gpt = oflite::Gpt(&g, window, f.model);
  g.AddOutput("logits", gpt.logits);
  g.SetIterations(count);
  ASSIGN_OR_RETURN(oflite::Job job, g.Build());
  ASSIGN_OR_RETURN(oflite::Plan plan, oflite::driver::CompileInferencePlan(job));

  // The window of the last `block` tokens, left-aligned and padded with 0;
  // returns the position whose logits predict the next token.
  auto push_window = [&]() {
    const int64_t length = std::min<int64_t>(static_cast<int64_t>(tokens.size()), f.block);
    std::vector<int32_t> values(static_cast<size_t>(f.block), 0);
    std::copy(tokens.end() - length, tokens.end(), values.begin());
    oflite::Status pushed = oflite::HostFeed::Push(
        "window", oflite::HostTensor::FromVector<int32_t>(oflite::Shape{1, f.block}, values));
    if (!pushed.ok()) std::fprintf(stderr, "gpt_char: %s\n", pushed.ToString().c_str());
    return length - 1;
  };
  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  int64_t position = push_window();
  std::printf("%s", prompt.c_str());
  const int64_t vocab = tokenizer.vocab_size();
  std::vector<double> probabilities(static_cast<size_t>(vocab));
  oflite::session::NodeOptions node;
  node.command = "gpt_char";
  const int code = oflite::driver::RunInference(
      plan, checkpoint, count,
      [&](int64_t iteration, const std::string& name, const oflite::HostTensor& logits) {
        if (name != "logits") return;
        const float* row = logits.data<float>() + position * vocab;
        double max = row[0];
        for (int64_t v = 1; v < vocab; ++v) max = std::max<double>(max, row[v]);
        double sum = 0;
        for (int64_t v = 0; v < vocab; ++v) {
          probabilities[v] = std::exp((row[v] - max) / temperature);
          sum += probabilities[v];
        }
        double pick = std::uniform_real_distribution<double>(0, sum)(rng);
        int32_t next = static_cast<int32_t>(vocab - 1);
        for (int64_t v = 0; v < vocab; ++v) {
          pick -= probabilities[v];
          if (pick < 0) {
            next = static_cast<int32_t>(v);
            break;
          }
        }
        tokens.push_back(next);
        std::putchar(tokenizer.byte(next));
        std::fflush(stdout);
        if (iteration + 1 < count) position = push_window();
      },
      node);
  std::printf("\n");
  return code;
}

// Tokenizes the text (unless --data-dir already holds this corpus), sets
// the vocabulary size, and runs generation instead of training when asked.
oflite::StatusOr<std::optional<int>> Prepare(TrainerConfig* c) {
  std::vector<std::string> files;
  const std::string text = c->StringFlag("text");
  if (!text.empty()) {
    files.push_back(text);
  } else {
    ASSIGN_OR_RETURN(files, oflite::DefaultCorpusFiles());
  }
  const bool generating = !c->StringFlag("generate-from").empty();
  oflite::StatusOr<oflite::CharTokenizer> tokenizer =
      oflite::CharTokenizer::ReadVocabulary(c->data_dir + "/vocab.txt");
  if (!generating || !tokenizer.ok()) {
    ASSIGN_OR_RETURN(oflite::PreparedCorpus corpus, oflite::PrepareCorpus(files, c->data_dir));
    std::printf("corpus: %lld characters, vocabulary %lld, in %s\n",
                static_cast<long long>(corpus.token_count),
                static_cast<long long>(corpus.vocab_size), corpus.tokens_path.c_str());
    ASSIGN_OR_RETURN(tokenizer, oflite::CharTokenizer::ReadVocabulary(corpus.vocab_path));
  }
  c->classes = tokenizer->vocab_size();
  ASSIGN_OR_RETURN(GptFlags f, ReadGptFlags(*c));
  if (generating) return std::optional<int>(*Generate(*c, f, *tokenizer));
  oflite::TokenWindowOptions check;
  check.val_fraction = f.val_fraction;
  RETURN_IF_ERROR(oflite::CheckTokenWindows(f.tokens_path, f.block, c->classes, check));
  return std::optional<int>();
}

oflite::Status AfterBuild(const TrainerConfig& c, const oflite::Job& job) {
  const std::string dir = c.StringFlag("init-out");
  if (dir.empty()) return oflite::Status::OK();
  RETURN_IF_ERROR(oflite::driver::WriteInitialVariables(job, dir));
  std::printf("initial weights written to %s\n", dir.c_str());
  return oflite::Status::OK();
}

}  // namespace

int main(int argc, char** argv) {
  TrainerConfig defaults;
  const char* workspace = std::getenv("BUILD_WORKSPACE_DIRECTORY");
  defaults.data_dir = std::string(workspace != nullptr ? workspace : ".") + "/out/gpt_char_data";
  defaults.batch = 12;
  defaults.iters = 2000;
  defaults.lr = 1e-3;
  oflite::driver::TrainMainOptions options;
  options.flags = {
      {"text", "train on this text file (default: the fortunes corpus)", ""},
      {"layers", "transformer blocks", "4"},
      {"heads", "attention heads per block", "4"},
      {"channels", "embedding channels", "128"},
      {"block", "context length in characters", "64"},
      {"activation", "MLP activation: gelu, gelu_tanh or relu", "gelu"},
      {"tie-weights", "output logits through the token embedding table", "false", true},
      {"tp", "tensor-parallel degree: each block split Megatron-style over this many devices",
       "1"},
      {"stages", "pipeline stages: the blocks in this many contiguous groups, one per stage",
       "1"},
      {"dp", "data-parallel degree (0: --machines x --devices / (--tp x --stages))", "0"},
      {"val-fraction", "the last fraction of the text that is the validation split", "0.1"},
      {"eval-batches", "validation batches per evaluation", "20"},
      {"warmup", "linear learning-rate warm-up iterations", "100"},
      {"min-lr", "the cosine schedule's final learning rate", "1e-4"},
      {"beta2", "AdamW's beta2", "0.99"},
      {"weight-decay", "AdamW's decoupled weight decay (matrices and tables only)", "0.1"},
      {"grad-clip", "clip the global gradient norm to this (0: off)", "1.0"},
      {"init-out", "write the initial weights as .npy files to this folder", ""},
      {"generate-from", "generate text from this checkpoint instead of training", ""},
      {"prompt", "the text generation starts from", ""},
      {"tokens", "characters to generate", "300"},
      {"temperature", "sampling temperature", "0.8"},
      {"sample-seed", "the sampling seed", "1"},
  };
  options.prepare = Prepare;
  options.after_build = AfterBuild;
  // Validation every 250 iterations unless the run flags say otherwise.
  std::vector<char*> args(argv, argv + argc);
  bool has_run_flags = false, has_eval_every = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) has_run_flags = true;
    if (has_run_flags && std::strncmp(argv[i], "--eval", 6) == 0) has_eval_every = true;
  }
  static char separator[] = "--", eval_every[] = "--eval-every", every[] = "250";
  if (!has_eval_every) {
    if (!has_run_flags) args.push_back(separator);
    args.push_back(eval_every);
    args.push_back(every);
  }
  return oflite::driver::TrainMain("gpt_char", defaults, Model, static_cast<int>(args.size()),
                                   args.data(), options);
}
