// Writes an MLP Job file for CLI tests and documentation examples:
//   write_test_job OUT.job.pb [--placement 0:cpu:0-1] [--stages 0:cpu:0,1:cpu:0]
//                  [--model_parallel columns|rows|megatron|dp_tp] [--batch 64] [--features 784]
//                  [--hidden 256,128] [--classes 10] [--iterations 100]
//                  [--accuracy] [--fashion_mnist DIR] [--optimizer sgd|momentum|adam]
//                  [--micro_batches 4 [--schedule gpipe|1f1b]]
// Test-only tool (the synthetic random_batch source, or Fashion-MNIST from
// DIR with --fashion_mnist so that the job can be evaluated).
// --model_parallel dp_tp: data x tensor parallel (n-D SBP) on a placement
// with a 2-axis hierarchy, e.g. --placement 0-1:cpu:0-1@2x2 (data (S(0), B),
// first weight (B, S(1)), second weight (B, S(0))); on one device (the
// reference run, --placement 0:cpu:0) every hint means the whole tensor.
// --model_parallel megatron: the same two weights' splits on a 1-axis
// placement (first S(1), second S(0): one all-reduce of activations a pass).
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>

#include "oneflow_lite/common/proto_io.h"
#include "oneflow_lite/testing/test_jobs.h"

namespace {

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  oflite::compiler::MlpSpec spec;
  std::string out;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (arg == "--placement") {
      spec.placement = value();
    } else if (arg == "--stages") {
      spec.stages = SplitList(value());
    } else if (arg == "--model_parallel") {
      std::string v = value();
      if (v == "rows") {
        spec.model_parallel = oflite::compiler::ModelParallel::kSplitRows;
      } else if (v == "columns") {
        spec.model_parallel = oflite::compiler::ModelParallel::kSplitColumns;
      } else if (v == "dp_tp") {
        spec.model_parallel = oflite::compiler::ModelParallel::kDataTensor2d;
      } else if (v == "megatron") {
        spec.model_parallel = oflite::compiler::ModelParallel::kMegatron;
      } else {
        std::fprintf(stderr,
                     "write_test_job: --model_parallel '%s': want columns, rows, megatron or dp_tp\n",
                     v.c_str());
        return 2;
      }
    } else if (arg == "--batch") {
      spec.batch = std::stoll(value());
    } else if (arg == "--features") {
      spec.features = std::stoll(value());
    } else if (arg == "--hidden") {
      spec.hidden.clear();
      for (const std::string& h : SplitList(value())) spec.hidden.push_back(std::stoll(h));
    } else if (arg == "--classes") {
      spec.classes = std::stoll(value());
    } else if (arg == "--iterations") {
      spec.iterations = std::stoll(value());
    } else if (arg == "--fashion_mnist") {
      spec.fashion_mnist_dir = value();
    } else if (arg == "--micro_batches") {
      spec.micro_batches = std::stoll(value());
    } else if (arg == "--schedule") {
      spec.schedule = value() == "gpipe" ? oflite::PIPELINE_GPIPE : oflite::PIPELINE_1F1B;
    } else if (arg == "--optimizer") {
      const std::string v = value();
      spec.optimizer = v == "adam"       ? oflite::compiler::MlpOptimizer::kAdam
                       : v == "momentum" ? oflite::compiler::MlpOptimizer::kMomentum
                                         : oflite::compiler::MlpOptimizer::kSgd;
    } else if (arg == "--accuracy") {
      spec.accuracy_metric = true;
    } else if (out.empty() && arg.rfind("--", 0) != 0) {
      out = arg;
    } else {
      std::fprintf(stderr, "write_test_job: unknown argument '%s'\n", arg.c_str());
      return 2;
    }
  }
  if (out.empty()) {
    std::fprintf(stderr, "usage: write_test_job OUT.job.pb [flags]\n");
    return 2;
  }
  oflite::StatusOr<oflite::Job> job = oflite::compiler::BuildMlpJob(spec);
  if (!job.ok()) {
    std::fprintf(stderr, "write_test_job: %s\n", job.status().ToString().c_str());
    return job.status().code() == oflite::StatusCode::kInvalidArgument ? 2 : 1;
  }
  oflite::Status s = oflite::SaveJob(out, *job);
  if (!s.ok()) {
    std::fprintf(stderr, "write_test_job: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
