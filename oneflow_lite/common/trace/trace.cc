#include "oneflow_lite/common/trace/trace.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace oflite {
namespace trace {
namespace {

thread_local Track* current_track = nullptr;

// Microseconds with nanosecond digits, as trace-event "ts" and "dur" want.
std::string Micros(int64_t ns) {
  char text[40];
  std::snprintf(text, sizeof(text), "%.3f", static_cast<double>(ns) / 1000.0);
  return text;
}

void AppendEvent(const TraceEvent& event, int64_t origin_ns, int64_t pid, int64_t tid,
                 std::ostream& os) {
  os << "{\"ph\":\"" << event.phase << "\",\"cat\":\"" << event.category << "\",\"name\":\""
     << JsonEscape(event.name) << "\",\"pid\":" << pid << ",\"tid\":" << tid
     << ",\"ts\":" << Micros(event.begin_ns - origin_ns);
  if (event.phase == 'X') {
    os << ",\"dur\":" << Micros(event.end_ns - event.begin_ns);
  } else {
    os << ",\"id\":" << event.flow_id;
    if (event.phase == 'f') os << ",\"bp\":\"e\"";
  }
  std::string deferred;
  if (event.deferred != nullptr) event.deferred(event.numbers, &deferred);
  if (!event.args.empty() || !deferred.empty()) {
    os << ",\"args\":{" << event.args << (!event.args.empty() && !deferred.empty() ? "," : "")
       << deferred << "}";
  }
  os << "}";
}

void AppendName(const char* what, int64_t pid, int64_t tid, const std::string& name,
                std::ostream& os) {
  os << "{\"ph\":\"M\",\"name\":\"" << what << "\",\"pid\":" << pid << ",\"tid\":" << tid
     << ",\"args\":{\"name\":\"" << JsonEscape(name) << "\"}}";
}

}  // namespace

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

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

bool Track::InWindow(int64_t iteration) const { return tracer_->InWindow(iteration); }

void Track::AddSlice(const char* category, std::string name, int64_t begin_ns, int64_t end_ns,
                     std::string args, DeferredArgs deferred,
                     const std::array<int64_t, 8>& numbers) {
  TraceEvent event;
  event.category = category;
  event.name = std::move(name);
  event.begin_ns = begin_ns;
  event.end_ns = end_ns;
  event.args = std::move(args);
  event.deferred = deferred;
  event.numbers = numbers;
  events_.push_back(std::move(event));
}

void Track::AddFlow(char phase, uint64_t id, const char* name, int64_t at_ns) {
  TraceEvent event;
  event.phase = phase;
  event.category = "flow";
  event.name = name;
  event.begin_ns = at_ns;
  event.end_ns = at_ns;
  event.flow_id = id;
  events_.push_back(std::move(event));
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

std::string Tracer::ToJson(const TraceClock& clock) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const int64_t pid = options_.rank;
  std::ostringstream os;
  os << "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"oflite_trace_version\":1,\"rank\":" << pid
     << ",\"origin_ns\":" << origin_ns_ << ",\"clock_offset_ns\":" << clock.offset_ns
     << ",\"clock_uncertainty_ns\":" << clock.uncertainty_ns
     << ",\"first_iteration\":" << options_.first_iteration
     << ",\"end_iteration\":" << options_.end_iteration << "},\"traceEvents\":[\n";
  AppendName("process_name", pid, 0, "rank " + std::to_string(pid), os);
  for (const auto& track : tracks_) {
    os << ",\n";
    AppendName("thread_name", pid, track->id(), track->name(), os);
    for (const TraceEvent& event : track->events()) {
      os << ",\n";
      AppendEvent(event, origin_ns_, pid, track->id(), os);
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

void Slice::Begin(Track* track, const char* category, const std::string& name) {
  track_ = track;
  category_ = category;
  name_ = name;
  begin_ns_ = NowNs();
}

void Slice::End() {
  track_->AddSlice(category_, std::move(name_), begin_ns_, NowNs(), std::move(args_));
}

}  // namespace trace
}  // namespace oflite
