// Timeline tracing: per-thread event buffers written as Chrome trace-event
// JSON (docs/tracing.md), which Perfetto and chrome://tracing open.
//
// A Tracer belongs to one rank's run (one per process, or one per rank
// inside a test process: nothing here is global except the thread-local
// "current track" pointer, which a thread sets for itself). It owns Tracks:
// one per runtime stream thread, plus virtual tracks (a collective's worker,
// a CommNet actor's READs). A Track is written by one thread at a time and
// never locked: the thread that holds it (ScopedCurrentTrack) appends its
// events, so recording costs a clock read and filling in an EventRecord:
// names are pointers to strings the track interned once, arguments are raw
// numbers (only as many as the event uses, stored right after its record)
// that a Formatter turns into JSON only when the trace is written.
// Memory: 56 bytes per event plus 8 per number (docs/tracing.md, "How
// events are stored"), appended to 64 KiB chunks that never move. The
// Tracer reads the tracks only after those threads stopped (ToJson/WriteJson
// after the runtime's Run returned and joined them).
//
// Off by default: code that may record asks CurrentTrack(), which is null on
// every thread unless a Tracer handed it a track; that null check is the
// whole cost when tracing is off.
//
// Level: the runtime records every act, kernel, transfer and collective
// step, and the handling of messages that cross machines (flows) or go to
// actors that record no acts (CommNet, collectives). TracerOptions.messages
// (--trace-level messages) adds a slice for every message any actor
// handles, e.g. a "returned" that only frees a register: about four times
// the events, to see the runtime's own bookkeeping (docs/tracing.md).
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
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include <time.h>

#include "oneflow_lite/common/status.h"

namespace oflite {
namespace trace {

// The clock every event uses: steady (monotonic) time in nanoseconds, the
// clock std::chrono::steady_clock reads, read directly (through the vDSO,
// no system call): two reads per slice are a good part of what recording
// costs.
inline int64_t NowNs() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

// Escapes `text` as the inside of a JSON string.
std::string JsonEscape(const std::string& text);

// A 52-bit id (exact in a JSON double) mixed from `parts`; both ends of a
// flow call it with the same parts.
uint64_t FlowId(std::initializer_list<int64_t> parts);

struct EventRecord;

// Turns what was recorded into text when the trace is written, so recording
// stays a copy of a few numbers: appends the event's arguments (JSON object
// members, no braces, no leading comma) to `args`, and sets `name` when the
// event was recorded without one. The event's numbers are
// record.numbers()[0 .. record.number_count).
using Formatter = void (*)(const EventRecord& record, std::string* name, std::string* args);

// One recorded event as it is stored: a fixed-size header with no
// allocation of its own, followed in the track's memory by its
// `number_count` numbers (numbers()). Strings are pointers to text that
// lives as long as the Tracer (interned or owned by the track). Records are
// created only by Track::Append (the numbers need the room behind them).
struct EventRecord {
  int64_t begin_ns = 0;
  int64_t end_ns = 0;                 // == begin_ns for flow events
  const char* category = "";          // static string: "act", "kernel", ...
  const std::string* name = nullptr;  // null: `format` names the event
  const std::string* text = nullptr;  // args fixed at record time, or text `format` reads
  Formatter format = nullptr;         // null: the args are `text` (or none)
  uint32_t number_count = 0;          // set by Append
  char phase = 'X';                   // 'X' slice, 's' flow start, 'f' flow end

  int64_t* numbers() { return reinterpret_cast<int64_t*>(this + 1); }
  const int64_t* numbers() const { return reinterpret_cast<const int64_t*>(this + 1); }
  // A flow event's id (its first number, see Track::AddFlow); 0 for a slice.
  uint64_t flow_id() const {
    return phase != 'X' && number_count > 0 ? static_cast<uint64_t>(numbers()[0]) : 0;
  }
  // Bytes the record and its numbers take in the track.
  size_t stored_size() const { return sizeof(EventRecord) + number_count * sizeof(int64_t); }
};
static_assert(sizeof(EventRecord) % alignof(int64_t) == 0, "numbers follow a record aligned");

// An event decoded into text (Track::events(), for tests and tools).
struct TraceEvent {
  char phase = 'X';
  const char* category = "";
  std::string name;
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
  uint64_t flow_id = 0;
  std::string args;  // JSON object members without braces, or ""
};

class Tracer;

// A caller's memo of one name interned on a track (an op's or an actor's,
// recorded again and again), so that recording it again costs a compare
// instead of a lookup: see Track::Intern(text, memo). Starts empty; owned by
// the caller, used by one thread at a time.
struct InternedName {
  uint64_t track_serial = 0;  // the track it was interned on (0: none yet)
  const std::string* name = nullptr;
};

// One timeline row. Not thread-safe: one writer at a time (see above), and
// no lock on the recording path. Events are appended to chunks that never
// move (no copy as the track grows), each record followed by its numbers;
// names are interned once per track, so an event holds pointers, not
// strings. Cache-line aligned: the tracks of two threads, allocated one
// after the other, share no line that both write.
class alignas(64) Track {
 public:
  Track(Tracer* tracer, int64_t id, std::string name);
  ~Track();
  Track(const Track&) = delete;
  Track& operator=(const Track&) = delete;
  int64_t id() const { return id_; }
  const std::string& name() const { return name_; }
  Tracer* tracer() const { return tracer_; }

  // Whether every handled message gets a slice (TracerOptions.messages).
  bool records_messages() const { return records_messages_; }
  // Whether slices that ask (MeasureCpu) record CPU time (TracerOptions.cpu_time).
  bool records_cpu_time() const { return records_cpu_time_; }
  bool InWindow(int64_t iteration) const {
    return iteration >= first_iteration_ && iteration < end_iteration_;
  }
  // Whether slices inside the current unit of work are recorded.
  bool active() const { return active_; }
  // Sets active(), returning the previous value (callers restore it).
  bool SetActive(bool active) {
    const bool previous = active_;
    active_ = active;
    return previous;
  }

  // `text`'s content as a string that lives as long as the tracer. The
  // first call for a given object copies it; later calls for the same
  // address and content return the same copy (a pointer lookup and a
  // compare, no allocation). `text` may be a temporary.
  const std::string* Intern(const std::string& text);
  const std::string* Intern(const char* text);
  // `text` interned through `memo`: the first call on this track interns
  // it (as above), later ones return memo's copy without reading `text`,
  // whose content must therefore not change while `memo` is in use (an
  // op's or an actor's name from the loaded plan).
  const std::string* Intern(const std::string& text, InternedName* memo) {
    if (memo->track_serial != serial_) {
      memo->name = Intern(text);
      memo->track_serial = serial_;
    }
    return memo->name;
  }
  // A record for one more event with room for `numbers` numbers behind it:
  // EventRecord's defaults, number_count set, the numbers zero; to fill in.
  // The pointer stays valid as long as the track.
  EventRecord* Append(size_t numbers = 0) {
    const size_t bytes = sizeof(EventRecord) + numbers * sizeof(int64_t);
    if (static_cast<size_t>(chunk_end_ - next_) < bytes) AddChunk(bytes);
    EventRecord* record = new (next_) EventRecord();
    record->number_count = static_cast<uint32_t>(numbers);
    for (size_t i = 0; i < numbers; ++i) record->numbers()[i] = 0;
    next_ += bytes;
    ++count_;
    return record;
  }

  // A complete slice with its arguments as text (copied; the convenient,
  // slower way: the runtime's recorders use Append and a Formatter).
  void AddSlice(const char* category, const std::string& name, int64_t begin_ns, int64_t end_ns,
                const std::string& args = "");
  // One end of flow `id` at `at_ns`, bound to the slice around it on this
  // track ('s' start, 'f' end). `name` is a static string.
  void AddFlow(char phase, uint64_t id, const char* name, int64_t at_ns);

  size_t event_count() const { return count_; }
  // Record `index` (in the order appended). Reading: call only once no
  // thread records on this track (the first call after more events were
  // recorded indexes them). Not thread-safe.
  const EventRecord& record(size_t index) const;
  // The events decoded; the same conditions as record() (the decoding is
  // cached until more events are recorded).
  const std::vector<TraceEvent>& events() const;
  // Record `index` with its name and arguments formatted.
  TraceEvent Decode(size_t index) const;
  // `record`'s (one of this track's) name and arguments (JSON object
  // members), replacing the strings' contents.
  void FormatEvent(const EventRecord& record, std::string* name, std::string* args) const;

 private:
  // 16 pages, mapped with their pages populated in one call: a page fault
  // per 4 KB of records cost more than the recording itself, and a small
  // chunk is written soon after the kernel zeroed it, while those lines
  // are still in the core's cache (docs/tracing.md).
  static constexpr size_t kChunkBytes = 64 * 1024;
  class NameTable;
  // A chunk's memory: an anonymous mapping, or operator new[] when mapping
  // fails. Records are trivially destructible.
  struct Chunk {
    char* begin = nullptr;
    size_t capacity = 0;
    size_t used = 0;  // of a chunk before the last; the last one's is next_
    bool mapped = false;
  };

  // Starts a chunk with room for at least `bytes` (an event larger than a
  // chunk gets one of its own size).
  void AddChunk(size_t bytes);
  void IndexRecords() const;

  Tracer* const tracer_;
  const int64_t id_;
  const std::string name_;
  const uint64_t serial_;  // unique in the process, never 0 (InternedName)
  const int64_t first_iteration_;  // the tracer's window
  const int64_t end_iteration_;
  const bool records_messages_;
  const bool records_cpu_time_;
  bool active_ = false;
  std::vector<Chunk> chunks_;
  char* next_ = nullptr;  // the next free byte in the last chunk
  char* chunk_end_ = nullptr;
  size_t count_ = 0;
  std::deque<std::string> texts_;  // interned names and text args (stable addresses)
  std::unique_ptr<NameTable> names_;
  mutable std::vector<const EventRecord*> index_;  // built by record()
  mutable std::vector<TraceEvent> decoded_;
};

struct TracerOptions {
  int64_t rank = 0;
  int64_t first_iteration = 0;
  int64_t end_iteration = std::numeric_limits<int64_t>::max();
  // A slice for every message handled, not only for those that cross
  // machines or reach actors without acts (see "Level" above). The file
  // states it: otherData.trace_level "messages" or "acts".
  bool messages = false;
  // Kernel slices also record their thread's CPU time (Slice::MeasureCpu,
  // args "cpu_us"; --trace-cpu). The file states it: otherData.cpu_time.
  bool cpu_time = false;
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

  // A number stated in the file's "otherData" (e.g. "measured_step_us",
  // the step time the session timed itself, which `oflite trace summary`
  // prints beside the trace's own). Thread-safe; the last value wins.
  void SetOtherNumber(const std::string& key, double value);

  // The trace as one JSON object; call when no thread records any more.
  std::string ToJson(const TraceClock& clock) const;
  // ToJson into `path`; errors name the file.
  Status WriteJson(const std::string& path, const TraceClock& clock) const;

 private:
  const TracerOptions options_;
  const int64_t origin_ns_;
  mutable std::mutex mutex_;
  std::deque<std::unique_ptr<Track>> tracks_;  // guarded by mutex_ (the list)
  std::map<std::string, double> other_numbers_;  // guarded by mutex_
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
// only when the track is active. Args may be set while it lives (they are
// copied as text; a name is interned, see Track::Intern).
class Slice {
 public:
  Slice(const char* category, const std::string& name) {
    Track* track = CurrentTrack();
    if (track != nullptr && track->active()) Begin(track, category, track->Intern(name));
  }
  Slice(const char* category, const char* name) {
    Track* track = CurrentTrack();
    if (track != nullptr && track->active()) Begin(track, category, track->Intern(name));
  }
  // The same for a name that does not change while `memo` is used (see
  // Track::Intern(text, memo)): no lookup once it was interned.
  Slice(const char* category, const std::string& name, InternedName* memo) {
    Track* track = CurrentTrack();
    if (track != nullptr && track->active()) Begin(track, category, track->Intern(name, memo));
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
  // Also records the calling thread's CPU time over the slice (args
  // "cpu_us"), beside its wall time: a slice whose CPU time falls short of
  // its length spent the rest off its core (preempted by another thread
  // of the core, or waiting in the kernel). Reading the thread's CPU clock
  // is a system call (about 0.56 us on the 2-core VMs), so only the kernel
  // slices ask for it.
  // Call right after construction, on the thread that ends the slice; a
  // no-op unless the track records CPU time (TracerOptions.cpu_time).
  void MeasureCpu() {
    if (track_ != nullptr && track_->records_cpu_time()) cpu_begin_ns_ = ThreadCpuNs();
  }
  static int64_t ThreadCpuNs() {
    timespec now;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
  }

 private:
  void Begin(Track* track, const char* category, const std::string* name) {
    track_ = track;
    category_ = category;
    name_ = name;
    begin_ns_ = NowNs();
  }
  void End();

  Track* track_ = nullptr;
  const char* category_ = "";
  const std::string* name_ = nullptr;  // interned by the track
  int64_t begin_ns_ = 0;
  int64_t cpu_begin_ns_ = -1;  // MeasureCpu's reading; -1: not asked
  std::string args_;
};

}  // namespace trace
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMMON_TRACE_TRACE_H_
