// Timeline tracing: per-thread event buffers written as Chrome trace-event
// JSON (docs/tracing.md), which Perfetto and chrome://tracing open.
//
// A Tracer belongs to one rank's run (one per process, or one per rank
// inside a test process: nothing here is global except the thread-local
// "current track" pointer, which a thread sets for itself). It owns Tracks:
// one per runtime stream thread, plus virtual tracks (a collective's worker,
// a CommNet actor's READs). A Track is written by one thread at a time and
// never locked: its events are a plain vector appended to by the thread that
// holds it (ScopedCurrentTrack), so recording costs a clock read and a
// push_back. The Tracer reads the tracks only after those threads stopped
// (ToJson/WriteJson after the runtime's Run returned and joined them).
//
// Off by default: code that may record asks CurrentTrack(), which is null on
// every thread unless a Tracer handed it a track; that null check is the
// whole cost when tracing is off.
//
// Window: only iterations in [first_iteration, end_iteration) are recorded
// (--trace-iters A:B). A Track is "active" while the work it runs belongs
// to an iteration in the window (the runtime sets it per message and per
// act); kernel and collective slices are recorded only while it is.
//
// Events: complete slices (ph "X": begin, end, category, name, args) and
// flow ends (ph "s"/"f", linking a slice on one track, possibly on another
// rank, to a slice on another). Flow ids are chosen by the caller so both
// ends (two processes) compute the same id from what they both know.
#ifndef ONEFLOW_LITE_COMMON_TRACE_TRACE_H_
#define ONEFLOW_LITE_COMMON_TRACE_TRACE_H_

#include <array>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "oneflow_lite/common/status.h"

namespace oflite {
namespace trace {

// The clock every event uses: steady (monotonic) time in nanoseconds.
int64_t NowNs();

// Escapes `text` as the inside of a JSON string.
std::string JsonEscape(const std::string& text);

// A 52-bit id (exact in a JSON double) mixed from `parts`; both ends of a
// flow call it with the same parts.
uint64_t FlowId(std::initializer_list<int64_t> parts);

// Arguments formatted only when the trace is written, so recording stays a
// copy of a few numbers: appends JSON object members (no braces, no
// leading comma) made from `numbers` to `out`.
using DeferredArgs = void (*)(const std::array<int64_t, 8>& numbers, std::string* out);

struct TraceEvent {
  char phase = 'X';           // 'X' slice, 's' flow start, 'f' flow end
  const char* category = "";  // static string: "act", "kernel", ...
  std::string name;
  int64_t begin_ns = 0;
  int64_t end_ns = 0;  // == begin_ns for flow events
  uint64_t flow_id = 0;
  std::string args;                 // JSON object members without braces, or ""
  DeferredArgs deferred = nullptr;  // more args, from `numbers`, at write time
  std::array<int64_t, 8> numbers{};
};

class Tracer;

// One timeline row. Not thread-safe: one writer at a time (see above).
class Track {
 public:
  Track(Tracer* tracer, int64_t id, std::string name)
      : tracer_(tracer), id_(id), name_(std::move(name)) {}
  int64_t id() const { return id_; }
  const std::string& name() const { return name_; }
  Tracer* tracer() const { return tracer_; }

  bool InWindow(int64_t iteration) const;
  // Whether slices inside the current unit of work are recorded.
  bool active() const { return active_; }
  // Sets active(), returning the previous value (callers restore it).
  bool SetActive(bool active) {
    const bool previous = active_;
    active_ = active;
    return previous;
  }

  void AddSlice(const char* category, std::string name, int64_t begin_ns, int64_t end_ns,
                std::string args = "", DeferredArgs deferred = nullptr,
                const std::array<int64_t, 8>& numbers = {});
  // One end of flow `id` at `at_ns`, bound to the slice around it on this
  // track ('s' start, 'f' end).
  void AddFlow(char phase, uint64_t id, const char* name, int64_t at_ns);
  size_t event_count() const { return events_.size(); }
  const std::vector<TraceEvent>& events() const { return events_; }

 private:
  Tracer* const tracer_;
  const int64_t id_;
  const std::string name_;
  bool active_ = false;
  std::vector<TraceEvent> events_;
};

struct TracerOptions {
  int64_t rank = 0;
  int64_t first_iteration = 0;
  int64_t end_iteration = std::numeric_limits<int64_t>::max();
};

// What the JSON file states about its clock (see docs/tracing.md).
struct TraceClock {
  // rank 0's clock minus this rank's, in ns (0 for rank 0 or one process),
  // and half the round trip it was measured with (-1: not measured).
  int64_t offset_ns = 0;
  int64_t uncertainty_ns = -1;
};

class Tracer {
 public:
  explicit Tracer(const TracerOptions& options);
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  const TracerOptions& options() const { return options_; }
  bool InWindow(int64_t iteration) const {
    return iteration >= options_.first_iteration && iteration < options_.end_iteration;
  }
  // A new track named `name` (e.g. "m0/cpu0/s0"); owned by the tracer.
  // Thread-safe.
  Track* AddTrack(const std::string& name);
  // Every track so far, in creation order; read their events only once no
  // thread records any more. Thread-safe.
  std::vector<const Track*> tracks() const;
  // Steady-clock time at construction: timestamps in the JSON are relative
  // to it (in microseconds).
  int64_t origin_ns() const { return origin_ns_; }

  // The trace as one JSON object; call when no thread records any more.
  std::string ToJson(const TraceClock& clock) const;
  // ToJson into `path`; errors name the file.
  Status WriteJson(const std::string& path, const TraceClock& clock) const;

 private:
  const TracerOptions options_;
  const int64_t origin_ns_;
  mutable std::mutex mutex_;
  std::deque<std::unique_ptr<Track>> tracks_;  // guarded by mutex_ (the list)
};

// The calling thread's track, or null (tracing off).
Track* CurrentTrack();

// Makes `track` (may be null) the calling thread's track for its lifetime,
// then restores the previous one. With `iteration` >= 0 also sets the
// track active for that iteration's window.
class ScopedCurrentTrack {
 public:
  explicit ScopedCurrentTrack(Track* track, int64_t iteration = -1);
  ~ScopedCurrentTrack();
  ScopedCurrentTrack(const ScopedCurrentTrack&) = delete;
  ScopedCurrentTrack& operator=(const ScopedCurrentTrack&) = delete;

 private:
  Track* previous_;
  Track* track_;
  bool was_active_ = false;
};

// A slice on the current track covering this object's lifetime, recorded
// only when the track is active. Args may be set while it lives.
class Slice {
 public:
  Slice(const char* category, const std::string& name) {
    Track* track = CurrentTrack();
    if (track != nullptr && track->active()) Begin(track, category, name);
  }
  Slice(const char* category, const char* name) {
    Track* track = CurrentTrack();
    if (track != nullptr && track->active()) Begin(track, category, name);
  }
  ~Slice() {
    if (track_ != nullptr) End();
  }
  Slice(const Slice&) = delete;
  Slice& operator=(const Slice&) = delete;
  bool recording() const { return track_ != nullptr; }
  // Appends `"key":value` (value already JSON) to the args.
  void AddArg(const char* key, const std::string& json_value);
  void AddArg(const char* key, int64_t value) { AddArg(key, std::to_string(value)); }

 private:
  void Begin(Track* track, const char* category, const std::string& name);
  void End();

  Track* track_ = nullptr;
  const char* category_ = "";
  std::string name_;
  int64_t begin_ns_ = 0;
  std::string args_;
};

}  // namespace trace
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMMON_TRACE_TRACE_H_
