// Shared driver of the example programs: builds the model's Job, compiles it
// for a one-machine cluster, writes <name>.job.pb and <name>.plan.pb, prints
// the plan summary and trains it with the same code path as `oflite run`.
//
// Flags (each example): --data-dir, --batch, --epochs, --iters, --lr,
// --devices (CPU devices per machine), --machines (data parallel over all of
// them), --out-dir, --compile-only, plus any `oflite run` flag after `--`.
// A plan for several machines is written and not run here: start it with
// `oflite launch --plan <out>/<name>.plan.pb --nproc <machines>`.
#ifndef ONEFLOW_LITE_EXAMPLES_EXAMPLE_MAIN_H_
#define ONEFLOW_LITE_EXAMPLES_EXAMPLE_MAIN_H_

#include <functional>
#include <string>

#include "oneflow_lite/api/graph.h"

namespace oflite {
namespace examples {

struct ExampleConfig {
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  int64_t batch = 64;
  int64_t epochs = 1;
  int64_t iters = 0;  // 0: epochs
  double lr = 0.1;
  int64_t devices = 1;   // CPU devices per machine
  int64_t machines = 1;  // machines of the cluster (127.0.0.1, 127.0.0.2, ...)
  int64_t seed = 1;
};

// Adds the model to `g` (data source, layers, loss, metrics, optimizer).
using ModelFn = std::function<void(const ExampleConfig& config, Graph* g)>;

// Parses argv over `defaults`, builds, compiles, saves and trains. Returns the
// process exit code.
int RunExample(const std::string& name, ExampleConfig defaults, const ModelFn& model, int argc,
               char** argv);

}  // namespace examples
}  // namespace oflite

#endif  // ONEFLOW_LITE_EXAMPLES_EXAMPLE_MAIN_H_
