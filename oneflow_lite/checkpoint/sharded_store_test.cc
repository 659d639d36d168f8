// Part-wise saving/restoring: assembly from split parts (from several
// threads), re-slicing for another device count, latest-checkpoint lookup.
#include "oneflow_lite/checkpoint/sharded_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <numeric>
#include <thread>
#include <vector>

#include "oneflow_lite/checkpoint/checkpoint.h"
#include "oneflow_lite/common/testing/fake_env.h"

namespace oflite {
namespace {

std::string TempDir(const std::string& name) {
  const char* root = std::getenv("TEST_TMPDIR");
  return std::string(root != nullptr ? root : "/tmp") + "/sharded_" + name;
}

HostTensor Iota(const Shape& shape, float start = 0.0f) {
  std::vector<float> values(shape.elem_count());
  std::iota(values.begin(), values.end(), start);
  return HostTensor::FromVector<float>(shape, values);
}

// Part k of `logical` under `layout`.
HostTensor Part(const HostTensor& logical, PartLayout layout) {
  StatusOr<TensorDesc> desc = PartDesc("v", logical.desc(), layout);
  CHECK_OK(desc.status());
  HostTensor part(*desc);
  Blob blob = part.AsBlob();
  CopyPartFromLogical(logical, layout, &blob);
  return part;
}

std::map<std::string, HostTensor> TwoVariables(const HostTensor& w, const HostTensor& b) {
  std::map<std::string, HostTensor> variables;
  variables.emplace("w", w.Clone());
  variables.emplace("b", b.Clone());
  return variables;
}

TEST(PartDescTest, BalancedSplitShapes) {
  const TensorDesc logical(Shape{5, 3}, DT_FLOAT);
  EXPECT_EQ(PartDesc("v", logical, {0, 2, 0})->shape, (Shape{3, 3}));
  EXPECT_EQ(PartDesc("v", logical, {1, 2, 0})->shape, (Shape{2, 3}));
  EXPECT_EQ(PartDesc("v", logical, {1, 2, -1})->shape, (Shape{5, 3}));
  EXPECT_EQ(PartDesc("v", logical, {2, 3, 1})->shape, (Shape{5, 1}));
  EXPECT_FALSE(PartDesc("v", logical, {0, 4, 1}).ok());  // 3 columns, 4 devices
  EXPECT_FALSE(PartDesc("v", logical, {0, 2, 2}).ok());
  EXPECT_FALSE(PartDesc("v", logical, {2, 2, 0}).ok());
  HostTensor part = Part(Iota(Shape{5, 3}), {1, 2, 0});
  EXPECT_EQ(part.ToVector<float>(), (std::vector<float>{9, 10, 11, 12, 13, 14}));
  HostTensor column = Part(Iota(Shape{2, 3}), {1, 2, 1});
  EXPECT_EQ(column.ToVector<float>(), (std::vector<float>{2, 5}));
}

ShardedCheckpointStore::Options StoreOptions(const std::string& root) {
  ShardedCheckpointStore::Options options;
  options.save_root = root;
  options.variables["w"] = TensorDesc(Shape{7, 4}, DT_FLOAT);
  options.variables["b"] = TensorDesc(Shape{4}, DT_FLOAT);
  return options;
}

TEST(ShardedCheckpointStoreTest, AssemblesPartsFromThreadsThenWrites) {
  const std::string root = TempDir("assemble");
  ShardedCheckpointStore store(StoreOptions(root));
  const HostTensor w = Iota(Shape{7, 4});
  const HostTensor b = Iota(Shape{4}, 100.0f);
  // w split S(0) over 3 devices, b broadcast over the same 3.
  std::vector<HostTensor> w_parts, b_parts;
  for (int64_t k = 0; k < 3; ++k) {
    w_parts.push_back(Part(w, {k, 3, 0}));
    b_parts.push_back(b.Clone());
  }
  ASSERT_TRUE(store.SavePart("b", {2, 3, -1}, 10, b_parts[2].AsBlob()).ok());
  ASSERT_TRUE(store.SavePart("w", {1, 3, 0}, 10, w_parts[1].AsBlob()).ok());
  EXPECT_FALSE(IsCheckpoint(ShardedCheckpointStore::CheckpointDir(root, 10)));
  std::vector<std::thread> threads;
  std::vector<Status> results(4);
  threads.emplace_back([&] {
    results[0] = store.SavePart("w", {0, 3, 0}, 10, w_parts[0].AsBlob());
  });
  threads.emplace_back([&] {
    results[1] = store.SavePart("b", {0, 3, -1}, 10, b_parts[0].AsBlob());
  });
  threads.emplace_back([&] {
    results[2] = store.SavePart("w", {2, 3, 0}, 10, w_parts[2].AsBlob());
  });
  threads.emplace_back([&] {
    results[3] = store.SavePart("b", {1, 3, -1}, 10, b_parts[1].AsBlob());
  });
  for (std::thread& t : threads) t.join();
  for (const Status& status : results) ASSERT_TRUE(status.ok()) << status;
  const std::string dir = ShardedCheckpointStore::CheckpointDir(root, 10);
  ASSERT_TRUE(IsCheckpoint(dir));
  StatusOr<LoadedVariables> loaded = LoadVariables(dir, {{"w", w.desc()}, {"b", b.desc()}});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->iteration, 10);
  EXPECT_EQ(loaded->tensors.at("w").ToVector<float>(), w.ToVector<float>());
  EXPECT_EQ(loaded->tensors.at("b").ToVector<float>(), b.ToVector<float>());
}

TEST(ShardedCheckpointStoreTest, RestoresIntoAnotherDeviceCount) {
  const std::string root = TempDir("restore");
  const HostTensor w = Iota(Shape{7, 4});
  const HostTensor b = Iota(Shape{4}, 100.0f);
  ASSERT_TRUE(
      SaveVariables(ShardedCheckpointStore::CheckpointDir(root, 3), 3, TwoVariables(w, b)).ok());
  StatusOr<std::string> latest = ShardedCheckpointStore::LatestCheckpoint(root);
  ASSERT_TRUE(latest.ok()) << latest.status();
  ShardedCheckpointStore::Options options = StoreOptions("");
  options.restore_dir = *latest;
  ShardedCheckpointStore store(options);
  for (int64_t k = 0; k < 2; ++k) {  // w now split S(1) over 2 devices
    HostTensor part(TensorDesc(Shape{7, 2}, DT_FLOAT));
    Blob blob = part.AsBlob();
    StatusOr<bool> restored = store.RestorePart("w", {k, 2, 1}, &blob);
    ASSERT_TRUE(restored.ok()) << restored.status();
    EXPECT_TRUE(*restored);
    EXPECT_EQ(part.ToVector<float>(), Part(w, {k, 2, 1}).ToVector<float>());
  }
  HostTensor wrong(TensorDesc(Shape{7, 4}, DT_FLOAT));
  Blob wrong_blob = wrong.AsBlob();
  StatusOr<bool> mismatch = store.RestorePart("w", {0, 2, 0}, &wrong_blob);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.status().message().find("variable 'w' part 0 of 2"), std::string::npos)
      << mismatch.status();
  EXPECT_FALSE(store.RestorePart("unknown", {0, 1, -1}, &wrong_blob).ok());
  EXPECT_FALSE(store.SavePart("w", {0, 1, -1}, 4, wrong.AsBlob()).ok());  // no save root

  ShardedCheckpointStore fresh(StoreOptions(root));  // no restore dir
  StatusOr<bool> none = fresh.RestorePart("w", {0, 1, -1}, &wrong_blob);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(*none);
}

TEST(ShardedCheckpointStoreTest, LatestSkipsIncompleteCheckpoints) {
  const std::string root = TempDir("latest");
  EXPECT_EQ(ShardedCheckpointStore::LatestCheckpoint(root).status().code(), StatusCode::kNotFound);
  std::map<std::string, HostTensor> variables;
  variables.emplace("x", Iota(Shape{2}));
  ASSERT_TRUE(SaveVariables(ShardedCheckpointStore::CheckpointDir(root, 5), 5, variables).ok());
  ASSERT_TRUE(SaveVariables(ShardedCheckpointStore::CheckpointDir(root, 20), 20, variables).ok());
  ASSERT_EQ(mkdir(ShardedCheckpointStore::CheckpointDir(root, 30).c_str(), 0755),
            0);  // no MANIFEST
  ASSERT_EQ(mkdir((root + "/iter-abc").c_str(), 0755), 0);
  StatusOr<std::string> latest = ShardedCheckpointStore::LatestCheckpoint(root);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(*latest, root + "/iter-20");
}

TEST(ShardedCheckpointStoreTest, ListsCompleteCheckpointsNewestFirst) {
  const std::string root = TempDir("list");
  EXPECT_EQ(ShardedCheckpointStore::ListCheckpoints(root).status().code(), StatusCode::kNotFound);
  std::map<std::string, HostTensor> variables;
  variables.emplace("x", Iota(Shape{2}));
  for (int64_t iteration : {5, 100, 20}) {
    ASSERT_TRUE(SaveVariables(ShardedCheckpointStore::CheckpointDir(root, iteration), iteration,
                              variables)
                    .ok());
  }
  ASSERT_EQ(mkdir(ShardedCheckpointStore::CheckpointDir(root, 300).c_str(), 0755), 0);
  // A name no save writes, too large for int64_t: skipped, not a crash.
  ASSERT_EQ(mkdir((root + "/iter-99999999999999999999999").c_str(), 0755), 0);
  StatusOr<std::vector<std::string>> listed = ShardedCheckpointStore::ListCheckpoints(root);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(*listed, (std::vector<std::string>{root + "/iter-100", root + "/iter-20",
                                               root + "/iter-5"}));
}

// The store writes through the Env of its options: a save that crashes
// part way (the process dies between writing a file and renaming it)
// leaves the previous iteration's checkpoint the latest complete one, and
// a new store restores from it.
TEST(ShardedCheckpointStoreTest, ACrashedSaveLeavesThePreviousCheckpointLatest) {
  const std::string root = TempDir("crashed_save");
  FakeEnv env;
  ShardedCheckpointStore::Options options = StoreOptions(root);
  options.env = &env;
  ShardedCheckpointStore store(options);
  HostTensor w = Iota(Shape{7, 4});
  HostTensor b = Iota(Shape{4}, 100.0f);
  ASSERT_TRUE(store.SavePart("w", {0, 1, -1}, 3, w.AsBlob()).ok());
  ASSERT_TRUE(store.SavePart("b", {0, 1, -1}, 3, b.AsBlob()).ok());
  env.CrashAtNth(FileOp::kRename, 1);
  HostTensor w5 = Iota(Shape{7, 4}, 50.0f);
  ASSERT_TRUE(store.SavePart("w", {0, 1, -1}, 5, w5.AsBlob()).ok());  // not complete yet
  Status crashed = store.SavePart("b", {0, 1, -1}, 5, b.AsBlob());
  ASSERT_FALSE(crashed.ok());
  EXPECT_NE(crashed.message().find("simulated crash at rename"), std::string::npos) << crashed;
  EXPECT_NE(crashed.message().find(root + "/iter-5"), std::string::npos) << crashed;

  env.ClearFaults();  // the restarted job
  StatusOr<std::string> latest = ShardedCheckpointStore::LatestCheckpoint(root, &env);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(*latest, root + "/iter-3");
  ShardedCheckpointStore::Options restore = StoreOptions("");
  restore.restore_dir = *latest;
  restore.env = &env;
  ShardedCheckpointStore restarted(restore);
  HostTensor part(TensorDesc(Shape{7, 4}, DT_FLOAT));
  Blob blob = part.AsBlob();
  StatusOr<bool> restored = restarted.RestorePart("w", {0, 1, -1}, &blob);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_TRUE(*restored);
  EXPECT_EQ(part.ToVector<float>(), w.ToVector<float>());
}

}  // namespace
}  // namespace oflite
