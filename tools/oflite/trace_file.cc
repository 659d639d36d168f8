#include "tools/oflite/trace_file.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "oneflow_lite/common/trace/trace.h"

namespace oflite {
namespace cli {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

const Value* Field(const Struct& object, const std::string& key) {
  auto it = object.fields().find(key);
  return it == object.fields().end() ? nullptr : &it->second;
}

double NumberOf(const Struct& object, const std::string& key, double fallback) {
  const Value* value = Field(object, key);
  return value != nullptr && value->kind_case() == Value::kNumberValue ? value->number_value()
                                                                       : fallback;
}

std::string StringOf(const Struct& object, const std::string& key) {
  const Value* value = Field(object, key);
  return value != nullptr && value->kind_case() == Value::kStringValue ? value->string_value() : "";
}

// Flow ids may be numbers or strings ("0x1f" or decimal) in trace-event JSON.
bool FlowIdOf(const Struct& event, uint64_t* id) {
  const Value* value = Field(event, "id");
  if (value == nullptr) return false;
  if (value->kind_case() == Value::kNumberValue) {
    *id = static_cast<uint64_t>(value->number_value());
    return true;
  }
  if (value->kind_case() != Value::kStringValue) return false;
  *id = std::stoull(value->string_value(), nullptr, 0);
  return true;
}

Status ParseEvent(const Struct& event, size_t index, const std::string& path, TraceFile* file) {
  const std::string phase = StringOf(event, "ph");
  const int64_t pid = static_cast<int64_t>(NumberOf(event, "pid", 0));
  const int64_t tid = static_cast<int64_t>(NumberOf(event, "tid", 0));
  const Value* args = Field(event, "args");
  if (phase.empty()) {
    return InvalidArgumentError("trace '", path, "': event ", index, " has no \"ph\"");
  }
  if (phase == "M") {
    const std::string name =
        args != nullptr && args->has_struct_value() ? StringOf(args->struct_value(), "name") : "";
    if (StringOf(event, "name") == "thread_name") file->thread_names[{pid, tid}] = name;
    if (StringOf(event, "name") == "process_name") file->process_names[pid] = name;
    return Status::OK();
  }
  TraceRecord record;
  record.phase = phase;
  record.category = StringOf(event, "cat");
  record.name = StringOf(event, "name");
  record.pid = pid;
  record.tid = tid;
  record.ts_us = NumberOf(event, "ts", -1);
  record.dur_us = NumberOf(event, "dur", 0);
  if (record.ts_us < 0 || record.dur_us < 0) {
    return InvalidArgumentError("trace '", path, "': event ", index, " ('", record.name,
                                "') has no valid \"ts\"/\"dur\"");
  }
  record.has_flow_id = FlowIdOf(event, &record.flow_id);
  if (args != nullptr && args->has_struct_value()) record.args = args->struct_value();
  file->events.push_back(std::move(record));
  return Status::OK();
}

std::string Micros(double us) {
  char text[48];
  std::snprintf(text, sizeof(text), "%.3f", us);
  return text;
}

void AppendRecord(const TraceRecord& record, std::ostream& os) {
  os << "{\"ph\":\"" << trace::JsonEscape(record.phase) << "\",\"cat\":\""
     << trace::JsonEscape(record.category) << "\",\"name\":\"" << trace::JsonEscape(record.name)
     << "\",\"pid\":" << record.pid << ",\"tid\":" << record.tid
     << ",\"ts\":" << Micros(record.ts_us);
  if (record.phase == "X") os << ",\"dur\":" << Micros(record.dur_us);
  if (record.has_flow_id) os << ",\"id\":" << record.flow_id;
  if (record.phase == "f") os << ",\"bp\":\"e\"";
  if (!record.args.fields().empty()) {
    std::string args;
    google::protobuf::util::MessageToJsonString(record.args, &args);
    os << ",\"args\":" << args;
  }
  os << "}";
}

void AppendName(const char* what, int64_t pid, int64_t tid, const std::string& name,
                std::ostream& os) {
  os << "{\"ph\":\"M\",\"name\":\"" << what << "\",\"pid\":" << pid << ",\"tid\":" << tid
     << ",\"args\":{\"name\":\"" << trace::JsonEscape(name) << "\"}}";
}

}  // namespace

double TraceRecord::NumberArg(const std::string& key, double fallback) const {
  return NumberOf(args, key, fallback);
}

std::string TraceRecord::StringArg(const std::string& key) const { return StringOf(args, key); }

double TraceFile::OtherNumber(const std::string& key, double fallback) const {
  return NumberOf(other_data, key, fallback);
}

std::string TraceFile::OtherString(const std::string& key, const std::string& fallback) const {
  auto it = other_data.fields().find(key);
  return it != other_data.fields().end() && it->second.has_string_value()
             ? it->second.string_value()
             : fallback;
}

StatusOr<TraceFile> ReadTraceFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("cannot read the trace file '", path, "'");
  std::stringstream text;
  text << in.rdbuf();
  Struct root;
  auto parsed = google::protobuf::util::JsonStringToMessage(text.str(), &root);
  if (!parsed.ok()) {
    return InvalidArgumentError("trace '", path, "' is not JSON: ", parsed.ToString());
  }
  const Value* events = Field(root, "traceEvents");
  if (events == nullptr || !events->has_list_value()) {
    return InvalidArgumentError("trace '", path, "' has no \"traceEvents\" array");
  }
  TraceFile file;
  const Value* other = Field(root, "otherData");
  if (other != nullptr && other->has_struct_value()) file.other_data = other->struct_value();
  for (int i = 0; i < events->list_value().values_size(); ++i) {
    const Value& event = events->list_value().values(i);
    if (!event.has_struct_value()) {
      return InvalidArgumentError("trace '", path, "': event ", i, " is not an object");
    }
    RETURN_IF_ERROR(ParseEvent(event.struct_value(), i, path, &file));
  }
  return file;
}

Status WriteTraceFile(const TraceFile& file, const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return InvalidArgumentError("cannot write the trace file '", path, "'");
  std::string other;
  google::protobuf::util::MessageToJsonString(file.other_data, &other);
  out << "{\"displayTimeUnit\":\"ms\",\"otherData\":" << other << ",\"traceEvents\":[\n";
  bool first = true;
  auto separate = [&] {
    if (!first) out << ",\n";
    first = false;
  };
  for (const auto& [pid, name] : file.process_names) {
    separate();
    AppendName("process_name", pid, 0, name, out);
  }
  for (const auto& [key, name] : file.thread_names) {
    separate();
    AppendName("thread_name", key.first, key.second, name, out);
  }
  for (const TraceRecord& record : file.events) {
    separate();
    AppendRecord(record, out);
  }
  out << "\n]}\n";
  out.close();
  if (!out) return DataLossError("writing the trace file '", path, "' failed");
  return Status::OK();
}

Status MergeRankTraces(const std::vector<std::string>& inputs, const std::string& output) {
  std::vector<TraceFile> files;
  std::set<int64_t> ranks;
  double base_ns = 0;
  for (const std::string& path : inputs) {
    ASSIGN_OR_RETURN(TraceFile file, ReadTraceFile(path));
    const double rank = file.OtherNumber("rank", -1);
    if (rank < 0 || file.OtherNumber("origin_ns", -1) < 0) {
      return InvalidArgumentError("trace '", path,
                                  "' is not a rank trace of `oflite run "
                                  "--trace` (no rank/origin_ns in otherData)");
    }
    if (!ranks.insert(static_cast<int64_t>(rank)).second) {
      return InvalidArgumentError("trace '", path, "': a second trace of rank ", rank);
    }
    const double start = file.OtherNumber("origin_ns", 0) + file.OtherNumber("clock_offset_ns", 0);
    base_ns = files.empty() ? start : std::min(base_ns, start);
    files.push_back(std::move(file));
  }
  TraceFile merged;
  auto& other = *merged.other_data.mutable_fields();
  other["oflite_trace_version"].set_number_value(1);
  other["merged_ranks"].set_number_value(static_cast<double>(files.size()));
  other["clock"].set_string_value(
      "each rank's timestamps shifted onto rank 0's steady clock by the offset measured "
      "through the control plane at start (ranks[].clock_offset_ns, +- clock_uncertainty_ns)");
  auto* rank_list = other["ranks"].mutable_list_value();
  for (TraceFile& file : files) {
    const double shift_us =
        (file.OtherNumber("origin_ns", 0) + file.OtherNumber("clock_offset_ns", 0) - base_ns) /
        1000.0;
    Struct rank_info;
    for (const char* key :
         {"rank", "clock_offset_ns", "clock_uncertainty_ns", "first_iteration", "end_iteration",
          "measured_step_us"}) {
      (*rank_info.mutable_fields())[key].set_number_value(file.OtherNumber(key, -1));
    }
    (*rank_info.mutable_fields())["trace_level"].set_string_value(
        file.OtherString("trace_level", "messages"));
    *rank_list->add_values()->mutable_struct_value() = rank_info;
    for (TraceRecord& record : file.events) {
      record.ts_us += shift_us;
      merged.events.push_back(std::move(record));
    }
    merged.thread_names.insert(file.thread_names.begin(), file.thread_names.end());
    merged.process_names.insert(file.process_names.begin(), file.process_names.end());
  }
  return WriteTraceFile(merged, output);
}

}  // namespace cli
}  // namespace oflite
