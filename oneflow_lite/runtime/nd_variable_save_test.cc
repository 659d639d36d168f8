// Saves of variables on a hierarchical placement: every distinct part of a
// variable reaches the VariableStore exactly once per snapshot, from the
// first of its replicas (VariableBody; docs/runtime.md). A (B, S(1)) weight
// on 2x2 has two parts (its 1-D view: S(1) over 2), each held by two
// devices; a (B, B) bias is one part held by four.
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "oneflow_lite/compiler/compiler.h"
#include "oneflow_lite/runtime/runtime.h"
#include "oneflow_lite/testing/test_jobs.h"

namespace oflite {
namespace {

constexpr int64_t kIterations = 4;

// Counts saves by (variable, completed iterations, part) and remembers each
// variable's part count.
class SaveCounter : public VariableStore {
 public:
  StatusOr<bool> Restore(const VariablePart&, Blob*) override { return false; }
  Status Save(const VariablePart& part, int64_t completed, const Blob&) override {
    std::lock_guard<std::mutex> lock(mutex);
    ++saves[{part.op_name, completed, part.parallel_id}];
    // A broadcast part (the whole variable) is needed once, as part 0.
    parallel_num[part.op_name] =
        part.sbp.sbp_size() == 1 && part.sbp.sbp(0).has_broadcast() ? 1 : part.parallel_num;
    return Status::OK();
  }
  std::mutex mutex;
  std::map<std::tuple<std::string, int64_t, int64_t>, int> saves;
  std::map<std::string, int64_t> parallel_num;  // distinct parts of each variable
};

TEST(NdVariableSaveTest, EachPartIsSavedOncePerSnapshot) {
  compiler::MlpSpec spec;
  spec.placement = "0:cpu:0-3@2x2";
  spec.model_parallel = compiler::ModelParallel::kDataTensor2d;
  spec.batch = 8;
  spec.features = 6;
  spec.hidden = {4};
  spec.iterations = kIterations;
  StatusOr<Job> job = compiler::BuildMlpJob(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  StatusOr<Plan> plan = compiler::Compile(*job, compiler::MakeCluster(1, 4));
  ASSERT_TRUE(plan.ok()) << plan.status();
  SaveCounter store;
  RuntimeOptions options;
  options.variables = &store;
  options.save_every = 2;
  options.watchdog_timeout = std::chrono::milliseconds(20000);
  StatusOr<std::unique_ptr<Runtime>> runtime = Runtime::Create(*plan, options);
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  ASSERT_TRUE((*runtime)->Run().ok());
  // The column-split first layer: two parts; its row-split second weight too.
  EXPECT_EQ(store.parallel_num["w0"], 2);
  EXPECT_EQ(store.parallel_num["w1"], 2);
  ASSERT_FALSE(store.parallel_num.empty());
  for (const auto& [name, parts] : store.parallel_num) {
    for (int64_t completed : {int64_t{2}, kIterations}) {
      for (int64_t part = 0; part < parts; ++part) {
        EXPECT_EQ((store.saves[{name, completed, part}]), 1)
            << name << " part " << part << " after " << completed << " iterations";
      }
    }
  }
  int total = 0;
  for (const auto& [key, count] : store.saves) total += count;
  int expected = 0;
  for (const auto& [name, parts] : store.parallel_num) expected += 2 * parts;
  EXPECT_EQ(total, expected) << "saves by replicas that do not own their part";
}

}  // namespace
}  // namespace oflite
