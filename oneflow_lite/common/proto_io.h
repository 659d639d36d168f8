// Reading and writing protobuf files with errors that name the file.
//
// Every function takes the Env to use (common/env.h; the POSIX one by
// default). Writes are atomic (Env::WriteFileAtomically: a temporary file
// in the same directory, fsync, rename, directory fsync), so a crash or an
// error never leaves a half-written file; a missing output directory is
// InvalidArgument naming it. Reads refuse what is not a regular file
// (/dev/zero, a FIFO, a directory: InvalidArgument naming it) and files
// larger than kMaxProtoFileBytes (OutOfRange naming the file and the
// limit) before holding more than that in memory.
// All functions block on file I/O and are thread-compatible.
#ifndef ONEFLOW_LITE_COMMON_PROTO_IO_H_
#define ONEFLOW_LITE_COMMON_PROTO_IO_H_

#include <google/protobuf/message.h>

#include <cstdint>
#include <string>

#include "oneflow_lite/common/env.h"
#include "oneflow_lite/common/status.h"
#include "proto/job.pb.h"
#include "proto/plan.pb.h"

namespace oflite {

// The largest protobuf file read: 2 GiB - 1, the most protobuf parses from
// one buffer (its sizes are ints). Plans can be large, so the bound is
// protobuf's own; what it guards against is a file that is no message at
// all (a device, a huge unrelated file) growing memory without bound.
inline constexpr uint64_t kMaxProtoFileBytes = 2147483647;

// Binary wire format. NotFound if the file is missing, DataLoss if it is
// empty or does not parse as `msg`'s type.
Status ReadBinaryProto(const std::string& path, google::protobuf::Message* msg,
                       Env* env = Env::Default());
// Deterministic serialization (byte-identical output for equal messages).
Status WriteBinaryProto(const std::string& path, const google::protobuf::Message& msg,
                        Env* env = Env::Default());

// Text format (e.g. cluster.pbtxt); parse errors give line and column.
Status ReadTextProto(const std::string& path, google::protobuf::Message* msg,
                     Env* env = Env::Default());
Status WriteTextProto(const std::string& path, const google::protobuf::Message& msg,
                      Env* env = Env::Default());

// Reads a plan file and checks its version against [kMinPlanVersion,
// kPlanVersion]: a plan of a future version, or of an older one (which lacks
// fields this oflite reads), gets FailedPrecondition naming both versions
// (an old one: "recompile it with `oflite compile`").
StatusOr<Plan> LoadPlan(const std::string& path, Env* env = Env::Default());
// Stamps kPlanVersion.
Status SavePlan(const std::string& path, Plan plan, Env* env = Env::Default());

StatusOr<Job> LoadJob(const std::string& path, Env* env = Env::Default());
Status SaveJob(const std::string& path, Job job, Env* env = Env::Default());  // stamps kJobVersion

}  // namespace oflite

#endif  // ONEFLOW_LITE_COMMON_PROTO_IO_H_
