#include "oneflow_lite/common/trace/trace.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <new>
#include <sstream>
#include <type_traits>

namespace oflite {
namespace trace {
namespace {

// A JSON number (JSON has no NaN or infinity: those become null).
std::string JsonNumber(double value) {
  if (!std::isfinite(value)) return "null";
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

thread_local Track* current_track = nullptr;

// Serial numbers of tracks (InternedName), unique in the process so that a
// memo never matches a later track built where a destroyed one was.
uint64_t NextTrackSerial() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

// Microseconds with nanosecond digits, as trace-event "ts" and "dur" want.
std::string Micros(int64_t ns) {
  char text[40];
  std::snprintf(text, sizeof(text), "%.3f", static_cast<double>(ns) / 1000.0);
  return text;
}

void AppendEvent(const Track& track, size_t index, int64_t origin_ns, int64_t pid,
                 std::string* name, std::string* args, std::ostream& os) {
  const EventRecord& event = track.record(index);
  track.FormatEvent(event, name, args);
  os << "{\"ph\":\"" << event.phase << "\",\"cat\":\"" << event.category << "\",\"name\":\""
     << JsonEscape(*name) << "\",\"pid\":" << pid << ",\"tid\":" << track.id()
     << ",\"ts\":" << Micros(event.begin_ns - origin_ns);
  if (event.phase == 'X') {
    os << ",\"dur\":" << Micros(event.end_ns - event.begin_ns);
  } else {
    os << ",\"id\":" << event.flow_id();
    if (event.phase == 'f') os << ",\"bp\":\"e\"";
  }
  if (!args->empty()) os << ",\"args\":{" << *args << "}";
  os << "}";
}

void AppendName(const char* what, int64_t pid, int64_t tid, const std::string& name,
                std::ostream& os) {
  os << "{\"ph\":\"M\",\"name\":\"" << what << "\",\"pid\":" << pid << ",\"tid\":" << tid
     << ",\"args\":{\"name\":\"" << JsonEscape(name) << "\"}}";
}

}  // namespace

std::string JsonEscape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      char code[8];
      std::snprintf(code, sizeof(code), "\\u%04x", u);
      out += code;
    } else {
      out += c;
    }
  }
  return out;
}

uint64_t FlowId(std::initializer_list<int64_t> parts) {
  uint64_t hash = 0x9e3779b97f4a7c15ULL;
  for (int64_t part : parts) {
    hash ^= static_cast<uint64_t>(part) + 0x9e3779b97f4a7c15ULL + (hash << 6) + (hash >> 2);
    hash *= 0xbf58476d1ce4e5b9ULL;
    hash ^= hash >> 31;
  }
  return hash & ((uint64_t{1} << 52) - 1);
}

// Interned strings by the address they were given at (std::string or
// char array), each checked against the content on a hit: an address that
// now holds other text gets a new copy. Open addressing, linear probing,
// at most half full.
class Track::NameTable {
 public:
  NameTable() : slots_(256) {}

  const std::string* Find(const void* key, const char* text, size_t size) const {
    for (size_t i = Hash(key);; i = (i + 1) & (slots_.size() - 1)) {
      const Slot& slot = slots_[i];
      if (slot.key == nullptr) return nullptr;
      if (slot.key == key) {
        const std::string& value = *slot.value;
        const bool same = value.size() == size && std::memcmp(value.data(), text, size) == 0;
        return same ? slot.value : nullptr;
      }
    }
  }
  void Put(const void* key, const std::string* value) {
    if (2 * (used_ + 1) > slots_.size()) Grow();
    size_t i = Hash(key);
    while (slots_[i].key != nullptr && slots_[i].key != key) i = (i + 1) & (slots_.size() - 1);
    if (slots_[i].key == nullptr) ++used_;
    slots_[i] = Slot{key, value};
  }

 private:
  struct Slot {
    const void* key = nullptr;
    const std::string* value = nullptr;
  };
  size_t Hash(const void* key) const {
    const uint64_t mixed = (reinterpret_cast<uintptr_t>(key) >> 3) * 0x9e3779b97f4a7c15ULL;
    return static_cast<size_t>(mixed >> 32) & (slots_.size() - 1);
  }
  void Grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    used_ = 0;
    for (const Slot& slot : old) {
      if (slot.key != nullptr) Put(slot.key, slot.value);
    }
  }

  std::vector<Slot> slots_;  // size a power of two
  size_t used_ = 0;
};

Track::Track(Tracer* tracer, int64_t id, std::string name)
    : tracer_(tracer),
      id_(id),
      name_(std::move(name)),
      serial_(NextTrackSerial()),
      first_iteration_(tracer->options().first_iteration),
      end_iteration_(tracer->options().end_iteration),
      records_messages_(tracer->options().messages),
      records_cpu_time_(tracer->options().cpu_time),
      names_(std::make_unique<NameTable>()) {}

Track::~Track() {
  for (const Chunk& chunk : chunks_) {
    if (chunk.mapped) {
      ::munmap(chunk.begin, chunk.capacity);
    } else {
      delete[] chunk.begin;
    }
  }
}

const std::string* Track::Intern(const std::string& text) {
  const std::string* found = names_->Find(&text, text.data(), text.size());
  if (found != nullptr) return found;
  texts_.push_back(text);
  names_->Put(&text, &texts_.back());
  return &texts_.back();
}

const std::string* Track::Intern(const char* text) {
  const size_t size = std::strlen(text);
  const std::string* found = names_->Find(text, text, size);
  if (found != nullptr) return found;
  texts_.emplace_back(text, size);
  names_->Put(text, &texts_.back());
  return &texts_.back();
}

static_assert(std::is_trivially_destructible<EventRecord>::value,
              "chunks are unmapped without running destructors");

void Track::AddChunk(size_t bytes) {
  if (!chunks_.empty()) chunks_.back().used = static_cast<size_t>(next_ - chunks_.back().begin);
  Chunk chunk;
  chunk.capacity = std::max(kChunkBytes, (bytes + kChunkBytes - 1) / kChunkBytes * kChunkBytes);
  // MAP_POPULATE: the kernel provides every page in this one call instead
  // of a fault on the first touch of each. Nothing is written here: Append
  // writes each record once, into lines the kernel just zeroed.
  void* memory = ::mmap(nullptr, chunk.capacity, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (memory == MAP_FAILED) {
    chunk.begin = new char[chunk.capacity];  // malloc's alignment suits the records
  } else {
    chunk.begin = static_cast<char*>(memory);
    chunk.mapped = true;
  }
  chunks_.push_back(chunk);
  next_ = chunk.begin;
  chunk_end_ = chunk.begin + chunk.capacity;
}

void Track::IndexRecords() const {
  index_.clear();
  index_.reserve(count_);
  for (size_t c = 0; c < chunks_.size(); ++c) {
    const char* at = chunks_[c].begin;
    const char* end = c + 1 < chunks_.size() ? at + chunks_[c].used : next_;
    while (at < end) {
      const EventRecord* record = reinterpret_cast<const EventRecord*>(at);
      index_.push_back(record);
      at += record->stored_size();
    }
  }
}

const EventRecord& Track::record(size_t index) const {
  if (index_.size() != count_) IndexRecords();
  return *index_[index];
}

void Track::AddSlice(const char* category, const std::string& name, int64_t begin_ns,
                     int64_t end_ns, const std::string& args) {
  EventRecord* event = Append();
  event->category = category;
  texts_.push_back(name);
  event->name = &texts_.back();
  event->begin_ns = begin_ns;
  event->end_ns = end_ns;
  if (!args.empty()) {
    texts_.push_back(args);
    event->text = &texts_.back();
  }
}

void Track::AddFlow(char phase, uint64_t id, const char* name, int64_t at_ns) {
  EventRecord* event = Append(1);
  event->phase = phase;
  event->category = "flow";
  event->name = Intern(name);
  event->begin_ns = at_ns;
  event->end_ns = at_ns;
  event->numbers()[0] = static_cast<int64_t>(id);
}

TraceEvent Track::Decode(size_t index) const {
  const EventRecord& record = this->record(index);
  TraceEvent event;
  event.phase = record.phase;
  event.category = record.category;
  event.begin_ns = record.begin_ns;
  event.end_ns = record.end_ns;
  event.flow_id = record.flow_id();
  FormatEvent(record, &event.name, &event.args);
  return event;
}

void Track::FormatEvent(const EventRecord& record, std::string* name, std::string* args) const {
  name->clear();
  args->clear();
  if (record.name != nullptr) *name = *record.name;
  if (record.format != nullptr) {
    record.format(record, name, args);
  } else if (record.text != nullptr) {
    *args = *record.text;
  }
}

const std::vector<TraceEvent>& Track::events() const {
  if (decoded_.size() != count_) {
    decoded_.clear();
    decoded_.reserve(count_);
    for (size_t i = 0; i < count_; ++i) decoded_.push_back(Decode(i));
  }
  return decoded_;
}

Tracer::Tracer(const TracerOptions& options) : options_(options), origin_ns_(NowNs()) {}

Track* Tracer::AddTrack(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  tracks_.push_back(std::make_unique<Track>(this, static_cast<int64_t>(tracks_.size()), name));
  return tracks_.back().get();
}

std::vector<const Track*> Tracer::tracks() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<const Track*> out;
  for (const auto& track : tracks_) out.push_back(track.get());
  return out;
}

void Tracer::SetOtherNumber(const std::string& key, double value) {
  std::lock_guard<std::mutex> lock(mutex_);
  other_numbers_[key] = value;
}

std::string Tracer::ToJson(const TraceClock& clock) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const int64_t pid = options_.rank;
  std::ostringstream os;
  std::string name, args;  // reused for every event
  os << "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"oflite_trace_version\":1,\"rank\":" << pid
     << ",\"origin_ns\":" << origin_ns_ << ",\"clock_offset_ns\":" << clock.offset_ns
     << ",\"clock_uncertainty_ns\":" << clock.uncertainty_ns
     << ",\"first_iteration\":" << options_.first_iteration
     << ",\"end_iteration\":" << options_.end_iteration << ",\"trace_level\":\""
     << (options_.messages ? "messages" : "acts") << "\""
     << ",\"cpu_time\":" << (options_.cpu_time ? "true" : "false");
  for (const auto& [key, value] : other_numbers_) {
    os << ",\"" << JsonEscape(key) << "\":" << JsonNumber(value);
  }
  os << "},\"traceEvents\":[\n";
  AppendName("process_name", pid, 0, "rank " + std::to_string(pid), os);
  for (const auto& track : tracks_) {
    os << ",\n";
    AppendName("thread_name", pid, track->id(), track->name(), os);
    for (size_t i = 0; i < track->event_count(); ++i) {
      os << ",\n";
      AppendEvent(*track, i, origin_ns_, pid, &name, &args, os);
    }
  }
  os << "\n]}\n";
  return os.str();
}

Status Tracer::WriteJson(const std::string& path, const TraceClock& clock) const {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return InvalidArgumentError("cannot write the trace file '", path, "'");
  out << ToJson(clock);
  out.close();
  if (!out) return DataLossError("writing the trace file '", path, "' failed");
  return Status::OK();
}

Track* CurrentTrack() { return current_track; }

ScopedCurrentTrack::ScopedCurrentTrack(Track* track, int64_t iteration)
    : previous_(current_track), track_(track) {
  current_track = track;
  if (track != nullptr) {
    was_active_ = track->active();
    if (iteration >= 0) track->SetActive(track->InWindow(iteration));
  }
}

ScopedCurrentTrack::~ScopedCurrentTrack() {
  if (track_ != nullptr) track_->SetActive(was_active_);
  current_track = previous_;
}

void Slice::AddArg(const char* key, const std::string& json_value) {
  if (track_ == nullptr) return;
  if (!args_.empty()) args_ += ',';
  args_ += '"';
  args_ += key;
  args_ += "\":";
  args_ += json_value;
}

namespace {

// A slice's arguments: its fixed text (if any), then "cpu_us" from its
// first number (MeasureCpu).
void FormatWithCpu(const EventRecord& record, std::string* /*name*/, std::string* args) {
  if (record.text != nullptr && !record.text->empty()) *args = *record.text + ",";
  char cpu[48];
  std::snprintf(cpu, sizeof(cpu), "\"cpu_us\":%.3f", record.numbers()[0] / 1e3);
  *args += cpu;
}

}  // namespace

void Slice::End() {
  const bool cpu = cpu_begin_ns_ >= 0;
  const int64_t cpu_ns = cpu ? ThreadCpuNs() - cpu_begin_ns_ : 0;
  EventRecord* event = track_->Append(cpu ? 1 : 0);
  event->category = category_;
  event->name = name_;
  event->begin_ns = begin_ns_;
  event->end_ns = NowNs();
  if (!args_.empty()) event->text = track_->Intern(args_);
  if (cpu) {
    event->numbers()[0] = cpu_ns;
    event->format = &FormatWithCpu;
  }
}

}  // namespace trace
}  // namespace oflite
