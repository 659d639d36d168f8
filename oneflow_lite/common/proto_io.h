// Reading and writing protobuf files with errors that name the file.
//
// Writes are atomic: the message goes to "<path>.tmp.<pid>" and is renamed
// over <path>, so a crash or an error never leaves a half-written file.
// All functions block on file I/O and are thread-compatible.
#ifndef ONEFLOW_LITE_COMMON_PROTO_IO_H_
#define ONEFLOW_LITE_COMMON_PROTO_IO_H_

#include <string>

#include <google/protobuf/message.h>

#include "oneflow_lite/common/status.h"
#include "proto/job.pb.h"
#include "proto/plan.pb.h"

namespace oflite {

// Binary wire format. NotFound if the file is missing, DataLoss if it is
// empty or does not parse as `msg`'s type.
Status ReadBinaryProto(const std::string& path, google::protobuf::Message* msg);
// Deterministic serialization (byte-identical output for equal messages).
Status WriteBinaryProto(const std::string& path, const google::protobuf::Message& msg);

// Text format (e.g. cluster.pbtxt); parse errors give line and column.
Status ReadTextProto(const std::string& path, google::protobuf::Message* msg);
Status WriteTextProto(const std::string& path, const google::protobuf::Message& msg);

// Writes `data` to `path` atomically (temporary file + rename).
Status WriteFileAtomically(const std::string& path, const std::string& data);
StatusOr<std::string> ReadFileToString(const std::string& path);

// Reads a plan file and checks its version against [kMinPlanVersion,
// kPlanVersion]: a plan of a future version, or of an older one (which lacks
// fields this oflite reads), gets FailedPrecondition naming both versions
// (an old one: "recompile it with `oflite compile`").
StatusOr<Plan> LoadPlan(const std::string& path);
Status SavePlan(const std::string& path, Plan plan);  // stamps kPlanVersion

StatusOr<Job> LoadJob(const std::string& path);
Status SaveJob(const std::string& path, Job job);  // stamps kJobVersion

}  // namespace oflite

#endif  // ONEFLOW_LITE_COMMON_PROTO_IO_H_
