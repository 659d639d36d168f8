#include "oneflow_lite/session/checkpoint_gather.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "oneflow_lite/common/little_endian.h"
#include "oneflow_lite/common/nd_sbp_view.h"
#include "oneflow_lite/common/thread_name.h"
#include "oneflow_lite/runtime/variable_stores.h"

namespace oflite {
namespace session {
namespace {

using little_endian::AppendBytes;
using little_endian::AppendU32;
using little_endian::AppendU64;
using little_endian::Reader;

constexpr uint32_t kPartsMagic = 0x4B43464Fu;  // "OFCK"
constexpr uint32_t kPartsVersion = 1;
constexpr int64_t kMaxRank = 32;
constexpr size_t kMaxNameBytes = 4096;

// The part the runtime saves for a variable task (as VariableBody::Create
// describes it): the 1-D view of a hierarchical layout when there is one.
VariablePart PartOfTask(const TaskProto& task, bool* first_replica) {
  VariablePart part;
  part.op_name = task.kernel(0).op().name();
  part.parallel_id = task.parallel_ctx().parallel_id();
  part.parallel_num = std::max<int64_t>(1, task.parallel_ctx().parallel_num());
  if (task.kernel(0).output_sbp_size() > 0) part.sbp = task.kernel(0).output_sbp(0);
  *first_replica = true;
  const ShapeProto& hierarchy = task.parallel_ctx().hierarchy();
  OneDimView view;
  if (hierarchy.dim_size() >= 2 && task.kernel(0).output_sbp_size() > 0 &&
      NdSbpOneDimView({hierarchy.dim().begin(), hierarchy.dim().end()}, part.parallel_id,
                      task.kernel(0).output_sbp(0), &view)) {
    part.parallel_id = view.parallel_id;
    part.parallel_num = view.parallel_num;
    part.sbp.Clear();
    *part.sbp.add_sbp() = view.sbp;
    *first_replica = view.first_replica;
  }
  return part;
}

// A part the checkpoint needs: a split part, or part 0 of a whole one.
bool Needed(const PartLayout& layout) { return layout.split_axis >= 0 || layout.parallel_id == 0; }

std::string HeaderKey(int64_t iteration, int64_t rank) {
  return "oflite/checkpoint/iter-" + std::to_string(iteration) + "/rank-" + std::to_string(rank);
}
std::string ChunkKey(int64_t iteration, int64_t rank, int64_t chunk) {
  return HeaderKey(iteration, rank) + "/chunk-" + std::to_string(chunk);
}

std::string Describe(const std::set<PartKey>& keys) {
  std::string text;
  for (const PartKey& key : keys) {
    if (!text.empty()) text += ", ";
    text += "'" + key.first + "' part " + std::to_string(key.second);
    if (text.size() > 200) return text + ", ...";
  }
  return text;
}

}  // namespace

StatusOr<std::map<PartKey, OwnedPart>> CheckpointPartOwners(const Plan& plan) {
  std::map<PartKey, OwnedPart> owners;
  std::map<PartKey, int64_t> owner_placement_id;
  for (const MachinePlan& machine : plan.machine()) {
    for (const TaskProto& task : machine.task()) {
      if (task.type() != TASK_VARIABLE) continue;
      if (task.kernel_size() == 0) {
        return InvalidArgumentError("variable task '", task.name(), "' has no kernel");
      }
      bool first_replica = true;
      const VariablePart part = PartOfTask(task, &first_replica);
      const PartLayout layout = LayoutOf(part);
      if (!Needed(layout)) continue;
      const PartKey key{part.op_name, layout.parallel_id};
      const int64_t placement_id = task.parallel_ctx().parallel_id();
      auto it = owner_placement_id.find(key);
      if (it != owner_placement_id.end() && it->second <= placement_id) continue;
      owner_placement_id[key] = placement_id;
      owners[key] = OwnedPart{layout, task.machine_id()};
    }
  }
  return owners;
}

std::string EncodeCheckpointParts(int64_t iteration, int64_t rank,
                                  const std::vector<CarriedPart>& parts) {
  std::string out;
  AppendU32(&out, kPartsMagic);
  AppendU32(&out, kPartsVersion);
  AppendU64(&out, static_cast<uint64_t>(iteration));
  AppendU32(&out, static_cast<uint32_t>(rank));
  AppendU32(&out, static_cast<uint32_t>(parts.size()));
  for (const CarriedPart& part : parts) {
    AppendBytes(&out, part.variable);
    AppendU64(&out, static_cast<uint64_t>(part.layout.parallel_id));
    AppendU64(&out, static_cast<uint64_t>(part.layout.parallel_num));
    AppendU64(&out, static_cast<uint64_t>(part.layout.split_axis));
    const TensorDesc& desc = part.value.desc();
    AppendU32(&out, static_cast<uint32_t>(desc.dtype));
    AppendU32(&out, static_cast<uint32_t>(desc.shape.rank()));
    for (int64_t d = 0; d < desc.shape.rank(); ++d) {
      AppendU64(&out, static_cast<uint64_t>(desc.shape.dim(d)));
    }
    AppendU64(&out, static_cast<uint64_t>(part.value.ByteSize()));
    out.append(static_cast<const char*>(part.value.raw()),
               static_cast<size_t>(part.value.ByteSize()));
  }
  return out;
}

Status DecodeCheckpointParts(const std::string& bytes, const std::string& source,
                             int64_t* iteration, int64_t* rank, std::vector<CarriedPart>* parts) {
  size_t offset = 0;  // where `reader` starts in `bytes`
  Reader reader(bytes.data(), bytes.size());
  uint32_t magic = 0, version = 0, sender = 0, count = 0;
  uint64_t iter = 0;
  reader.ReadU32(&magic);
  reader.ReadU32(&version);
  reader.ReadU64(&iter);
  reader.ReadU32(&sender);
  reader.ReadU32(&count);
  RETURN_IF_ERROR(reader.status(source));
  if (magic != kPartsMagic || version != kPartsVersion) {
    return DataLossError(source, ": not checkpoint parts of version ", kPartsVersion,
                         " (magic ", magic, ", version ", version, ")");
  }
  *iteration = static_cast<int64_t>(iter);
  *rank = sender;
  parts->clear();
  for (uint32_t i = 0; i < count; ++i) {
    CarriedPart part;
    uint64_t parallel_id = 0, parallel_num = 0, split_axis = 0, byte_count = 0;
    uint32_t dtype = 0, dims = 0;
    reader.ReadBytes(&part.variable, kMaxNameBytes);
    reader.ReadU64(&parallel_id);
    reader.ReadU64(&parallel_num);
    reader.ReadU64(&split_axis);
    reader.ReadU32(&dtype);
    reader.ReadU32(&dims);
    RETURN_IF_ERROR(reader.status(source));
    if (dims > kMaxRank || !DataType_IsValid(static_cast<int>(dtype))) {
      return DataLossError(source, ": part ", i, " ('", part.variable, "') has rank ", dims,
                           " and dtype ", dtype);
    }
    std::vector<int64_t> shape(dims);
    for (int64_t& d : shape) {
      uint64_t value = 0;
      reader.ReadU64(&value);
      d = static_cast<int64_t>(value);
      if (d < 0) return DataLossError(source, ": part ", i, " has a negative dimension");
    }
    reader.ReadU64(&byte_count);
    RETURN_IF_ERROR(reader.status(source));
    const TensorDesc desc(Shape(shape), static_cast<DataType>(dtype));
    if (byte_count != static_cast<uint64_t>(desc.ByteSize()) || byte_count > reader.remaining()) {
      return DataLossError(source, ": part ", i, " ('", part.variable, "', ", desc.ToString(),
                           ") carries ", byte_count, " bytes, ", reader.remaining(), " left");
    }
    part.layout = PartLayout{static_cast<int64_t>(parallel_id),
                             static_cast<int64_t>(parallel_num), static_cast<int64_t>(split_axis)};
    part.value = HostTensor(desc);
    const size_t data_at = offset + reader.position();
    if (byte_count > 0) std::memcpy(part.value.raw(), bytes.data() + data_at, byte_count);
    offset = data_at + byte_count;  // a fresh reader after the data
    reader = Reader(bytes.data() + offset, bytes.size() - offset);
    parts->push_back(std::move(part));
  }
  if (reader.remaining() != 0) {
    return DataLossError(source, ": ", reader.remaining(), " trailing bytes after ", count,
                         " parts");
  }
  return Status::OK();
}

GatheredCheckpointStore::GatheredCheckpointStore(VariableStore* inner, Options options)
    : inner_(inner), options_(std::move(options)) {
  for (const auto& [key, owned] : options_.owners) {
    if (owned.machine == options_.rank) mine_.insert(key);
    if (options_.rank == 0 && owned.machine != 0) senders_[owned.machine].insert(key);
  }
  worker_ = std::thread([this] {
    NameThisThread("oflite-ckpt");
    WorkerLoop();
  });
}

GatheredCheckpointStore::~GatheredCheckpointStore() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  worker_.join();
}

Status GatheredCheckpointStore::Error() {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

Status GatheredCheckpointStore::Save(const VariablePart& part, int64_t completed_iters,
                                     const Blob& blob) {
  RETURN_IF_ERROR(inner_->Save(part, completed_iters, blob));
  const PartLayout layout = LayoutOf(part);
  const PartKey key{part.op_name, layout.parallel_id};
  const bool owned = Needed(layout) && mine_.count(key) > 0;
  // Copied outside the lock: actor threads of other variables go on.
  CarriedPart copy;
  if (owned) {
    copy.variable = part.op_name;
    copy.layout = layout;
    copy.value = HostTensor(blob.desc());
    if (blob.ByteSize() > 0) std::memcpy(copy.value.raw(), blob.raw(), blob.ByteSize());
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!error_.ok()) return error_;
    if (finished_.count(completed_iters) > 0) return Status::OK();  // a late replica
    Iteration& iteration = iterations_[completed_iters];
    if (owned) iteration.parts.emplace(key, std::move(copy));  // a replica's twin is dropped
    // Rank 0 gathers from the first save of an iteration on; other ranks
    // send once they hold every part they own.
    const bool ready = options_.rank == 0 || iteration.parts.size() == mine_.size();
    if (iteration.queued || !ready || (options_.rank != 0 && mine_.empty())) {
      changed_.notify_all();
      return Status::OK();
    }
    iteration.queued = true;
    queue_.push_back(completed_iters);
  }
  changed_.notify_all();
  return Status::OK();
}

Status GatheredCheckpointStore::Flush() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] { return (queue_.empty() && !busy_) || stop_; });
  return error_;
}

void GatheredCheckpointStore::WorkerLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    changed_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    const int64_t iteration = queue_.front();
    queue_.pop_front();
    busy_ = true;
    const bool failed = !error_.ok();
    lock.unlock();
    Status done = Status::OK();
    if (!failed) done = options_.rank == 0 ? GatherIteration(iteration) : SendIteration(iteration);
    lock.lock();
    if (!done.ok() && error_.ok()) error_ = std::move(done);
    iterations_.erase(iteration);
    busy_ = false;
    changed_.notify_all();
  }
}

Status GatheredCheckpointStore::SendIteration(int64_t iteration) {
  std::vector<CarriedPart> parts;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [key, part] : iterations_[iteration].parts) parts.push_back(std::move(part));
    finished_.insert(iteration);
  }
  const std::string bytes = EncodeCheckpointParts(iteration, options_.rank, parts);
  const std::string what = "checkpoint of iteration " + std::to_string(iteration) + ": rank " +
                           std::to_string(options_.rank) + " sending its parts";
  int64_t chunks = 0;
  for (size_t at = 0; at < bytes.size() || chunks == 0; at += kCheckpointChunkBytes) {
    const std::string chunk = bytes.substr(at, kCheckpointChunkBytes);
    RETURN_IF_ERROR(
        options_.channel->Put(ChunkKey(iteration, options_.rank, chunks++), chunk).WithContext(what));
  }
  return options_.channel
      ->Put(HeaderKey(iteration, options_.rank),
            std::to_string(chunks) + " " + std::to_string(bytes.size()))
      .WithContext(what);
}

Status GatheredCheckpointStore::ReceiveFrom(int64_t rank, int64_t iteration,
                                            ShardedCheckpointStore* disk) {
  const std::string what = "checkpoint of iteration " + std::to_string(iteration) +
                           ": the parts of rank " + std::to_string(rank);
  const int publisher = static_cast<int>(rank);
  StatusOr<std::string> header =
      options_.channel->Get(HeaderKey(iteration, rank), options_.timeout, publisher);
  if (!header.ok()) return header.status().WithContext(what);
  long long chunks = 0, size = 0;
  if (std::sscanf(header->c_str(), "%lld %lld", &chunks, &size) != 2 || chunks < 1 || size < 0) {
    return DataLossError(what, ": malformed header '", *header, "'");
  }
  std::string bytes;
  bytes.reserve(static_cast<size_t>(size));
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    const std::string key = ChunkKey(iteration, rank, chunk);
    StatusOr<std::string> value = options_.channel->Get(key, options_.timeout, publisher);
    if (!value.ok()) return value.status().WithContext(what);
    bytes += *value;
    RETURN_IF_ERROR(options_.channel->Put(key, "").WithContext(what));  // frees the master's copy
  }
  if (static_cast<long long>(bytes.size()) != size) {
    return DataLossError(what, ": ", bytes.size(), " bytes arrived, the header says ", size);
  }
  int64_t sent_iteration = 0, sender = 0;
  std::vector<CarriedPart> parts;
  RETURN_IF_ERROR(DecodeCheckpointParts(bytes, what, &sent_iteration, &sender, &parts));
  if (sent_iteration != iteration || sender != rank) {
    return DataLossError(what, ": the message is rank ", sender, "'s for iteration ",
                         sent_iteration);
  }
  std::set<PartKey> expected = senders_.at(rank);
  for (const CarriedPart& part : parts) {
    const PartKey key{part.variable, part.layout.parallel_id};
    if (expected.erase(key) == 0) {
      return DataLossError(what, ": variable '", part.variable, "' part ",
                           part.layout.parallel_id, " was not expected from this rank");
    }
    Blob blob(const_cast<void*>(part.value.raw()), part.value.desc());
    RETURN_IF_ERROR(disk->SavePart(part.variable, part.layout, iteration, blob).WithContext(what));
  }
  if (!expected.empty()) {
    return DataLossError(what, ": missing ", Describe(expected));
  }
  return Status::OK();
}

std::map<PartKey, CarriedPart> GatheredCheckpointStore::TakeLocalParts(int64_t iteration,
                                                                       Status* waited) {
  std::unique_lock<std::mutex> lock(mutex_);
  Iteration& local = iterations_[iteration];
  const bool complete = changed_.wait_for(lock, options_.timeout, [&] {
    return local.parts.size() == mine_.size() || stop_;
  });
  if (!complete || local.parts.size() != mine_.size()) {
    std::set<PartKey> missing = mine_;
    for (const auto& [key, part] : local.parts) missing.erase(key);
    *waited = DeadlineExceededError("checkpoint of iteration ", iteration, ": rank 0's own ",
                                    Describe(missing), " not saved within ",
                                    options_.timeout.count(), " ms");
    return {};
  }
  finished_.insert(iteration);
  return std::move(local.parts);
}

Status GatheredCheckpointStore::GatherIteration(int64_t iteration) {
  ShardedCheckpointStore disk(ShardedCheckpointStore::Options{
      options_.save_root, "", options_.variables, options_.env});
  for (const auto& [rank, keys] : senders_) {
    RETURN_IF_ERROR(ReceiveFrom(rank, iteration, &disk));
  }
  Status waited = Status::OK();
  std::map<PartKey, CarriedPart> local = TakeLocalParts(iteration, &waited);
  RETURN_IF_ERROR(waited);
  // The last part completes the checkpoint, and SavePart writes it here.
  for (auto& [key, part] : local) {
    Blob blob(part.value.raw(), part.value.desc());
    RETURN_IF_ERROR(disk.SavePart(part.variable, part.layout, iteration, blob));
  }
  return Status::OK();
}

}  // namespace session
}  // namespace oflite
