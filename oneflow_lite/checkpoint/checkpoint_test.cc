// Checkpoint round trips and every failure the loader must name.
#include "oneflow_lite/checkpoint/checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "oneflow_lite/common/testing/fake_env.h"

namespace oflite {
namespace {

std::string TempDir(const std::string& name) {
  const char* root = std::getenv("TEST_TMPDIR");
  return std::string(root != nullptr ? root : "/tmp") + "/ckpt_" + name;
}

std::map<std::string, HostTensor> SampleVariables(float offset = 0.0f) {
  std::map<std::string, HostTensor> variables;
  variables["dense1/weight"] =
      HostTensor::FromVector<float>(Shape{2, 3}, {1, 2, 3, 4, 5, 6.5f + offset});
  variables["step count"] = HostTensor::FromVector<double>(Shape{}, {0.125});
  variables["empty"] = HostTensor(TensorDesc(Shape{0, 4}, DT_INT32));
  return variables;
}

std::map<std::string, TensorDesc> Descs(const std::map<std::string, HostTensor>& variables) {
  std::map<std::string, TensorDesc> descs;
  for (const auto& [name, tensor] : variables) descs[name] = tensor.desc();
  return descs;
}

void ExpectError(const Status& status, StatusCode code, const std::vector<std::string>& fragments) {
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), code) << status;
  for (const std::string& fragment : fragments) {
    EXPECT_NE(status.message().find(fragment), std::string::npos) << fragment << " in " << status;
  }
}

void Truncate(const std::string& path, int drop_bytes) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GE(static_cast<int>(bytes.size()), drop_bytes);
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      << bytes.substr(0, bytes.size() - drop_bytes);
}

TEST(CheckpointTest, RoundTrip) {
  const std::string dir = TempDir("round_trip") + "/nested/dir";
  const auto variables = SampleVariables();
  ASSERT_TRUE(SaveVariables(dir, 42, variables).ok());
  EXPECT_TRUE(IsCheckpoint(dir));
  StatusOr<LoadedVariables> loaded = LoadVariables(dir, Descs(variables));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->iteration, 42);
  EXPECT_EQ(loaded->tensors.at("dense1/weight").ToVector<float>(),
            variables.at("dense1/weight").ToVector<float>());
  EXPECT_EQ(loaded->tensors.at("step count").ToVector<double>(), std::vector<double>{0.125});
  EXPECT_EQ(loaded->tensors.at("empty").desc(), TensorDesc(Shape{0, 4}, DT_INT32));
  EXPECT_EQ(access((dir + "/dense1%2Fweight.var").c_str(), F_OK), 0);
  StatusOr<CheckpointManifest> manifest = ReadCheckpointManifest(dir);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  ASSERT_EQ(manifest->variables.size(), 3u);
  EXPECT_EQ(manifest->variables[2].name, "step count");
  EXPECT_EQ(manifest->variables[2].file, "step%20count.var");
}

TEST(CheckpointTest, LoadIntoBlobsAndSubsets) {
  const std::string dir = TempDir("into");
  ASSERT_TRUE(SaveVariables(dir, 7, SampleVariables()).ok());
  HostTensor weight(TensorDesc(Shape{2, 3}, DT_FLOAT));
  StatusOr<int64_t> iteration = LoadVariablesInto(dir, {{"dense1/weight", weight.AsBlob()}});
  ASSERT_TRUE(iteration.ok()) << iteration.status();
  EXPECT_EQ(*iteration, 7);
  EXPECT_EQ(weight.ToVector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6.5f}));
}

TEST(CheckpointTest, SavingAgainReplacesTheCheckpoint) {
  const std::string dir = TempDir("replace");
  ASSERT_TRUE(SaveVariables(dir, 1, SampleVariables()).ok());
  ASSERT_TRUE(SaveVariables(dir, 2, SampleVariables(1.0f)).ok());
  StatusOr<LoadedVariables> loaded = LoadVariables(dir, Descs(SampleVariables()));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->iteration, 2);
  EXPECT_EQ(loaded->tensors.at("dense1/weight").ToVector<float>()[5], 7.5f);
}

TEST(CheckpointTest, ShapeAndDtypeMismatchNameVariableAndFile) {
  const std::string dir = TempDir("mismatch");
  ASSERT_TRUE(SaveVariables(dir, 1, SampleVariables()).ok());
  ExpectError(LoadVariables(dir, {{"dense1/weight", TensorDesc(Shape{3, 2}, DT_FLOAT)}}).status(),
              StatusCode::kInvalidArgument,
              {"variable 'dense1/weight'", dir + "/dense1%2Fweight.var", "float32(2, 3)",
               "expected float32(3, 2)"});
  ExpectError(LoadVariables(dir, {{"step count", TensorDesc(Shape{}, DT_FLOAT)}}).status(),
              StatusCode::kInvalidArgument, {"variable 'step count'", "float64()"});
  HostTensor wrong(TensorDesc(Shape{6}, DT_FLOAT));
  ExpectError(LoadVariablesInto(dir, {{"dense1/weight", wrong.AsBlob()}}).status(),
              StatusCode::kInvalidArgument, {"dense1/weight", "expected float32(6,)"});
  ExpectError(LoadVariables(dir, {{"dense2/bias", TensorDesc(Shape{3}, DT_FLOAT)}}).status(),
              StatusCode::kNotFound, {"variable 'dense2/bias'", dir});
}

TEST(CheckpointTest, TruncatedOrCorruptVariableFileIsDataLoss) {
  const std::string dir = TempDir("truncated");
  const auto variables = SampleVariables();
  ASSERT_TRUE(SaveVariables(dir, 1, variables).ok());
  const std::string file = dir + "/dense1%2Fweight.var";
  Truncate(file, 3);
  ExpectError(LoadVariables(dir, Descs(variables)).status(), StatusCode::kDataLoss,
              {"variable 'dense1/weight'", file, "truncated"});

  ASSERT_TRUE(SaveVariables(dir, 1, variables).ok());
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    f.put('\x7f');  // flips the last data byte
  }
  ExpectError(LoadVariables(dir, Descs(variables)).status(), StatusCode::kDataLoss,
              {"variable 'dense1/weight'", "data checksum mismatch"});

  ASSERT_TRUE(SaveVariables(dir, 1, variables).ok());
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(12);
    f.put('\x05');  // rank byte: header checksum no longer matches
  }
  ExpectError(LoadVariables(dir, Descs(variables)).status(), StatusCode::kDataLoss,
              {file, "header checksum mismatch"});
}

TEST(CheckpointTest, MissingVariableFileIsNamed) {
  const std::string dir = TempDir("missing_file");
  ASSERT_TRUE(SaveVariables(dir, 1, SampleVariables()).ok());
  ASSERT_EQ(unlink((dir + "/empty.var").c_str()), 0);
  ExpectError(LoadVariables(dir, Descs(SampleVariables())).status(), StatusCode::kNotFound,
              {"variable 'empty'", dir + "/empty.var"});
}

TEST(CheckpointTest, WithoutManifestThereIsNoCheckpoint) {
  const std::string dir = TempDir("half_written");
  ASSERT_TRUE(SaveVariables(dir, 1, SampleVariables()).ok());
  ASSERT_EQ(unlink((dir + "/MANIFEST").c_str()), 0);  // as if the save stopped before it
  EXPECT_FALSE(IsCheckpoint(dir));
  ExpectError(LoadVariables(dir, Descs(SampleVariables())).status(), StatusCode::kNotFound,
              {"no complete checkpoint", dir});
  ExpectError(ReadCheckpointManifest(TempDir("never_saved")).status(), StatusCode::kNotFound,
              {"MANIFEST"});
}

TEST(CheckpointTest, TruncatedOrForeignManifestIsDataLoss) {
  const std::string dir = TempDir("bad_manifest");
  ASSERT_TRUE(SaveVariables(dir, 1, SampleVariables()).ok());
  Truncate(dir + "/MANIFEST", 6);  // cuts the end line
  ExpectError(ReadCheckpointManifest(dir).status(), StatusCode::kDataLoss,
              {dir + "/MANIFEST", "missing end line"});
  std::ofstream(dir + "/MANIFEST", std::ios::trunc) << "hello world\n";
  ExpectError(ReadCheckpointManifest(dir).status(), StatusCode::kDataLoss,
              {"line 1", "not a checkpoint manifest"});
  std::ofstream(dir + "/MANIFEST", std::ios::trunc) << "oflite-checkpoint 99\n";
  ExpectError(ReadCheckpointManifest(dir).status(), StatusCode::kDataLoss, {"format version 99"});
}

TEST(CheckpointTest, SaveIntoAFileFails) {
  const std::string path = TempDir("plain_file");
  std::ofstream(path) << "x";
  ExpectError(SaveVariables(path, 1, SampleVariables()), StatusCode::kFailedPrecondition,
              {path, "not a directory"});
}

// VerifyCheckpoint reads every expected variable as a load would, so
// corruption is found without restoring anything (a resume with no
// iteration left); it names the variable and the file.
TEST(CheckpointTest, VerifyFindsCorruptionInAnyVariable) {
  const std::string dir = TempDir("verify");
  const auto variables = SampleVariables();
  ASSERT_TRUE(SaveVariables(dir, 8, variables).ok());
  StatusOr<CheckpointManifest> verified = VerifyCheckpoint(dir, Descs(variables));
  ASSERT_TRUE(verified.ok()) << verified.status();
  EXPECT_EQ(verified->iteration, 8);
  const std::string path = dir + "/" + VariableFileName("dense1/weight");
  {
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(-1, std::ios::end);
    const char last = static_cast<char>(file.get());
    file.seekp(-1, std::ios::end);
    file.put(static_cast<char>(last ^ 0x01));
  }
  ExpectError(VerifyCheckpoint(dir, Descs(variables)).status(), StatusCode::kDataLoss,
              {"variable 'dense1/weight'", path, "data checksum mismatch"});
  Truncate(dir + "/" + VariableFileName("step count"), 3);
  std::map<std::string, TensorDesc> only_step = {{"step count", variables.at("step count").desc()}};
  ExpectError(VerifyCheckpoint(dir, only_step).status(), StatusCode::kDataLoss,
              {"variable 'step count'", "truncated"});
  ExpectError(VerifyCheckpoint(dir, {{"missing", TensorDesc(Shape{1}, DT_FLOAT)}}).status(),
              StatusCode::kNotFound, {"variable 'missing'"});
}

// A save into a directory that holds a checkpoint fails part way through
// writing the data (an I/O error, a full disk, a crash): the previous
// checkpoint is still complete and loads with its own iteration and values.
TEST(CheckpointTest, AFailureWhileWritingKeepsThePreviousCheckpoint) {
  struct Fault {
    const char* what;
    FileOp op;
    int nth;
    bool crash;
  };
  // Per variable file: create, 2 appends (header, data), sync, close.
  const Fault faults[] = {
      {"second variable's header", FileOp::kAppend, 3, false},
      {"third variable's data", FileOp::kAppend, 6, false},
      {"second variable's fsync", FileOp::kSync, 2, false},
      {"crash creating the third file", FileOp::kCreate, 3, true},
      {"crash after the last data, before any rename", FileOp::kRemove, 1, true},
  };
  const auto old_variables = SampleVariables();
  for (const Fault& fault : faults) {
    SCOPED_TRACE(fault.what);
    const std::string dir =
        TempDir(std::string("keep_previous_") + std::to_string(&fault - faults));
    ASSERT_TRUE(SaveVariables(dir, 1, old_variables).ok());
    FakeEnv env;
    if (fault.crash) {
      env.CrashAtNth(fault.op, fault.nth);
    } else {
      env.FailNth(fault.op, fault.nth);
    }
    Status saved = SaveVariables(dir, 2, SampleVariables(1.0f), &env);
    ASSERT_FALSE(saved.ok());
    EXPECT_NE(saved.message().find(fault.crash ? "simulated crash" : "injected failure"),
              std::string::npos)
        << saved;
    EXPECT_TRUE(IsCheckpoint(dir, &env));
    StatusOr<LoadedVariables> loaded = LoadVariables(dir, Descs(old_variables), &env);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    EXPECT_EQ(loaded->iteration, 1);
    EXPECT_EQ(loaded->tensors.at("dense1/weight").ToVector<float>(),
              old_variables.at("dense1/weight").ToVector<float>());
    ASSERT_TRUE(VerifyCheckpoint(dir, Descs(old_variables)).ok());
    // The "restarted" process saves again over whatever the failure left.
    env.ClearFaults();
    ASSERT_TRUE(SaveVariables(dir, 3, SampleVariables(1.0f), &env).ok());
    loaded = LoadVariables(dir, Descs(old_variables));
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    EXPECT_EQ(loaded->iteration, 3);
    EXPECT_EQ(loaded->tensors.at("dense1/weight").ToVector<float>()[5], 7.5f);
  }
}

// A failure in the switch (renaming the written files into place) leaves a
// directory without a MANIFEST: not a checkpoint, never a mix of the two
// saves. A failed write leaves no temporary file behind.
TEST(CheckpointTest, AFailureDuringTheSwitchLeavesNoCheckpoint) {
  const std::string dir = TempDir("switch");
  ASSERT_TRUE(SaveVariables(dir, 1, SampleVariables()).ok());
  FakeEnv env;
  env.FailNth(FileOp::kRename, 2);
  ExpectError(SaveVariables(dir, 2, SampleVariables(1.0f), &env), StatusCode::kUnavailable,
              {"saving checkpoint '" + dir + "'", "injected failure: rename"});
  EXPECT_FALSE(IsCheckpoint(dir, &env));
  ExpectError(LoadVariables(dir, Descs(SampleVariables()), &env).status(), StatusCode::kNotFound,
              {"no complete checkpoint", dir});
  StatusOr<std::vector<std::string>> left = env.GetChildren(dir);
  ASSERT_TRUE(left.ok());
  for (const std::string& name : *left) EXPECT_EQ(name.find(".tmp"), std::string::npos) << name;
}

}  // namespace
}  // namespace oflite
