// Multi-machine saves in one process: two or three "ranks" (a
// GatheredCheckpointStore each) over an in-memory key-value channel. The
// checkpoint rank 0 writes equals, byte for byte, the one a single process
// writes from the same logical tensors; a silent or departed rank fails the
// save naming it and leaves no checkpoint; malformed messages are DataLoss.
#include "oneflow_lite/session/checkpoint_gather.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <set>
#include <sstream>

#include "oneflow_lite/checkpoint/checkpoint.h"

namespace oflite {
namespace session {
namespace {

std::string TempDir(const std::string& name) {
  const char* root = std::getenv("TEST_TMPDIR");
  return std::string(root != nullptr ? root : "/tmp") + "/gather_" + name;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The control plane's key-value store, in memory; a departed publisher
// fails its waiters at once.
class FakeChannel final : public KeyValueChannel {
 public:
  Status Put(const std::string& key, const std::string& value) override {
    std::lock_guard<std::mutex> lock(mutex_);
    values_[key] = value;
    changed_.notify_all();
    return Status::OK();
  }
  StatusOr<std::string> Get(const std::string& key, std::chrono::milliseconds timeout,
                            int publisher_rank) override {
    std::unique_lock<std::mutex> lock(mutex_);
    const bool found = changed_.wait_for(lock, timeout, [&] {
      return values_.count(key) > 0 || departed_.count(publisher_rank) > 0;
    });
    if (values_.count(key) > 0) return values_.at(key);
    if (found) return UnavailableError("rank ", publisher_rank, " left the job");
    return DeadlineExceededError("key '", key, "' not put within ", timeout.count(), " ms");
  }
  void Depart(int rank) {
    std::lock_guard<std::mutex> lock(mutex_);
    departed_.insert(rank);
    changed_.notify_all();
  }
  size_t BytesHeld() {
    std::lock_guard<std::mutex> lock(mutex_);
    size_t bytes = 0;
    for (const auto& [key, value] : values_) bytes += value.size();
    return bytes;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::string> values_;
  std::set<int> departed_;
};

// A store that ignores everything (the run's own CheckpointVariableStore).
class NullStore final : public VariableStore {
 public:
  StatusOr<bool> Restore(const VariablePart&, Blob*) override { return false; }
  Status Save(const VariablePart&, int64_t, const Blob&) override { return Status::OK(); }
};

HostTensor Iota(const Shape& shape, float start) {
  std::vector<float> values(shape.elem_count());
  std::iota(values.begin(), values.end(), start);
  return HostTensor::FromVector<float>(shape, values);
}

HostTensor PartOf(const HostTensor& logical, const PartLayout& layout) {
  StatusOr<TensorDesc> desc = PartDesc("v", logical.desc(), layout);
  CHECK_OK(desc.status());
  HostTensor part(*desc);
  Blob blob = part.AsBlob();
  CopyPartFromLogical(logical, layout, &blob);
  return part;
}

VariablePart Describe(const std::string& name, const PartLayout& layout) {
  VariablePart part;
  part.op_name = name;
  part.parallel_id = layout.parallel_id;
  part.parallel_num = layout.parallel_num;
  SbpParallel* sbp = part.sbp.add_sbp();
  if (layout.split_axis >= 0) {
    sbp->set_split_axis(layout.split_axis);
  } else {
    sbp->set_broadcast(true);
  }
  return part;
}

// `w` (7 x 3) split on axis 0 over `ranks` machines (part k on machine k),
// `b` (5) whole on every machine: what each rank saves.
struct Job {
  std::map<std::string, HostTensor> logical;
  std::map<PartKey, OwnedPart> owners;
  std::map<std::string, TensorDesc> descs;
};

Job MakeJob(int ranks) {
  Job job;
  job.logical.emplace("w", Iota(Shape({7, 3}), 1.0f));
  job.logical.emplace("b", Iota(Shape({5}), 100.0f));
  for (const auto& [name, value] : job.logical) job.descs[name] = value.desc();
  for (int k = 0; k < ranks; ++k) job.owners[{"w", k}] = OwnedPart{PartLayout{k, ranks, 0}, k};
  job.owners[{"b", 0}] = OwnedPart{PartLayout{0, ranks, -1}, 0};
  return job;
}

// Rank `rank` saves its parts of iteration `iteration` (b's replica too).
void SaveRank(const Job& job, int rank, int ranks, int64_t iteration,
              GatheredCheckpointStore* store) {
  const PartLayout w{rank, ranks, 0};
  HostTensor w_part = PartOf(job.logical.at("w"), w);
  ASSERT_TRUE(store->Save(Describe("w", w), iteration, w_part.AsBlob()).ok());
  const PartLayout b{rank, ranks, -1};
  HostTensor b_part = job.logical.at("b").Clone();
  ASSERT_TRUE(store->Save(Describe("b", b), iteration, b_part.AsBlob()).ok());
}

GatheredCheckpointStore::Options Options(const Job& job, const std::string& root, int rank,
                                         KeyValueChannel* channel) {
  GatheredCheckpointStore::Options options;
  options.save_root = root;
  options.variables = job.descs;
  options.owners = job.owners;
  options.rank = rank;
  options.channel = channel;
  options.timeout = std::chrono::milliseconds(2000);
  return options;
}

TEST(CheckpointGather, EqualsOneProcessByteForByte) {
  for (int ranks : {2, 3}) {
    SCOPED_TRACE(ranks);
    const Job job = MakeJob(ranks);
    const std::string root = TempDir("equal" + std::to_string(ranks));
    const std::string reference = TempDir("reference" + std::to_string(ranks));
    ASSERT_TRUE(SaveVariables(reference, 10, job.logical).ok());
    FakeChannel channel;
    NullStore inner;
    std::vector<std::unique_ptr<GatheredCheckpointStore>> stores;
    for (int r = 0; r < ranks; ++r) {
      stores.push_back(std::make_unique<GatheredCheckpointStore>(
          &inner, Options(job, root, r, &channel)));
    }
    // The last rank first: rank 0's gather waits for the others.
    std::vector<std::thread> threads;
    for (int r = ranks - 1; r >= 0; --r) {
      threads.emplace_back([&, r] { SaveRank(job, r, ranks, 10, stores[r].get()); });
    }
    for (std::thread& thread : threads) thread.join();
    for (int r = ranks - 1; r >= 0; --r) ASSERT_TRUE(stores[r]->Flush().ok()) << r;
    for (const char* file : {"MANIFEST", "w.var", "b.var"}) {
      EXPECT_EQ(ReadAll(root + "/iter-10/" + file), ReadAll(reference + "/" + file)) << file;
    }
    EXPECT_EQ(channel.BytesHeld() < 64, true);  // chunks emptied after reading
  }
}

TEST(CheckpointGather, SilentRankFailsNamingItAndWritesNothing) {
  const Job job = MakeJob(2);
  const std::string root = TempDir("silent");
  FakeChannel channel;
  NullStore inner;
  GatheredCheckpointStore::Options options = Options(job, root, 0, &channel);
  options.timeout = std::chrono::milliseconds(200);
  GatheredCheckpointStore rank0(&inner, options);
  SaveRank(job, 0, 2, 4, &rank0);
  const Status flushed = rank0.Flush();
  EXPECT_EQ(flushed.code(), StatusCode::kDeadlineExceeded) << flushed.ToString();
  EXPECT_NE(flushed.message().find("iteration 4: the parts of rank 1"), std::string::npos)
      << flushed.ToString();
  EXPECT_FALSE(IsCheckpoint(root + "/iter-4"));
  // The error is sticky: a later save reports it.
  HostTensor b = job.logical.at("b").Clone();
  EXPECT_FALSE(rank0.Save(Describe("b", PartLayout{0, 2, -1}), 8, b.AsBlob()).ok());
}

TEST(CheckpointGather, DepartedRankFailsAtOnce) {
  const Job job = MakeJob(2);
  FakeChannel channel;
  NullStore inner;
  GatheredCheckpointStore rank0(&inner, Options(job, TempDir("departed"), 0, &channel));
  SaveRank(job, 0, 2, 6, &rank0);
  channel.Depart(1);
  const Status flushed = rank0.Flush();
  EXPECT_EQ(flushed.code(), StatusCode::kUnavailable) << flushed.ToString();
  EXPECT_NE(flushed.message().find("rank 1 left the job"), std::string::npos);
}

TEST(CheckpointGather, EncodeDecodeAndMalformed) {
  CarriedPart part{"dense/weight", PartLayout{1, 2, 0}, Iota(Shape({2, 3}), 0.5f)};
  std::vector<CarriedPart> parts;
  parts.push_back(std::move(part));
  const std::string bytes = EncodeCheckpointParts(12, 3, parts);
  int64_t iteration = 0, rank = 0;
  std::vector<CarriedPart> decoded;
  ASSERT_TRUE(DecodeCheckpointParts(bytes, "m", &iteration, &rank, &decoded).ok());
  EXPECT_EQ(iteration, 12);
  EXPECT_EQ(rank, 3);
  ASSERT_EQ(decoded.size(), 1u);
  EXPECT_EQ(decoded[0].variable, "dense/weight");
  EXPECT_EQ(decoded[0].layout.parallel_id, 1);
  EXPECT_EQ(decoded[0].value.shape(), Shape({2, 3}));
  EXPECT_EQ(decoded[0].value.data<float>()[5], 5.5f);
  for (size_t cut : {size_t{0}, size_t{7}, bytes.size() - 1}) {
    EXPECT_EQ(DecodeCheckpointParts(bytes.substr(0, cut), "m", &iteration, &rank, &decoded).code(),
              StatusCode::kDataLoss)
        << cut;
  }
  EXPECT_EQ(DecodeCheckpointParts(bytes + "x", "m", &iteration, &rank, &decoded).code(),
            StatusCode::kDataLoss);
  std::string bad_magic = bytes;
  bad_magic[0] ^= 1;
  EXPECT_EQ(DecodeCheckpointParts(bad_magic, "m", &iteration, &rank, &decoded).code(),
            StatusCode::kDataLoss);
}

}  // namespace
}  // namespace session
}  // namespace oflite
