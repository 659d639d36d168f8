#include "oneflow_lite/common/proto_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/text_format.h>

#include "oneflow_lite/common/version.h"

namespace oflite {
namespace {

class CollectingErrorPrinter : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (!first_.empty()) return;
    std::ostringstream os;
    os << "line " << (line + 1) << ", column " << (column + 1) << ": " << message;
    first_ = os.str();
  }
  const std::string& first() const { return first_; }

 private:
  std::string first_;
};

}  // namespace

StatusOr<std::string> ReadFileToString(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return NotFoundError("cannot open '", path, "': ", std::strerror(errno));
  }
  std::ostringstream os;
  os << in.rdbuf();
  if (in.bad()) return DataLossError("error reading '", path, "'");
  return os.str();
}

Status WriteFileAtomically(const std::string& path, const std::string& data) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return PermissionDeniedError("cannot create '", tmp, "': ", std::strerror(errno));
  }
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return DataLossError("error writing '", tmp, "': ", std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return DataLossError("error flushing '", tmp, "': ", std::strerror(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return DataLossError("cannot rename '", tmp, "' to '", path, "': ", std::strerror(err));
  }
  return Status::OK();
}

Status ReadBinaryProto(const std::string& path, google::protobuf::Message* msg) {
  ASSIGN_OR_RETURN(std::string data, ReadFileToString(path));
  if (data.empty()) {
    return DataLossError("'", path, "' is empty, expected a ", msg->GetTypeName());
  }
  google::protobuf::io::ArrayInputStream raw(data.data(), static_cast<int>(data.size()));
  google::protobuf::io::CodedInputStream coded(&raw);
  if (!msg->ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage()) {
    return DataLossError("'", path, "' is not a valid ", msg->GetTypeName(),
                         " (corrupt or truncated, ", data.size(), " bytes)");
  }
  return Status::OK();
}

Status WriteBinaryProto(const std::string& path, const google::protobuf::Message& msg) {
  std::string data;
  {
    google::protobuf::io::StringOutputStream raw(&data);
    google::protobuf::io::CodedOutputStream coded(&raw);
    coded.SetSerializationDeterministic(true);
    if (!msg.SerializeToCodedStream(&coded)) {
      return InternalError("cannot serialize ", msg.GetTypeName(), " for '", path, "'");
    }
  }
  return WriteFileAtomically(path, data);
}

Status ReadTextProto(const std::string& path, google::protobuf::Message* msg) {
  ASSIGN_OR_RETURN(std::string data, ReadFileToString(path));
  google::protobuf::TextFormat::Parser parser;
  CollectingErrorPrinter errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(data, msg)) {
    return InvalidArgumentError("'", path, "' is not a valid text ", msg->GetTypeName(), ": ",
                                errors.first());
  }
  return Status::OK();
}

Status WriteTextProto(const std::string& path, const google::protobuf::Message& msg) {
  std::string data;
  if (!google::protobuf::TextFormat::PrintToString(msg, &data)) {
    return InternalError("cannot print ", msg.GetTypeName(), " for '", path, "'");
  }
  return WriteFileAtomically(path, data);
}

StatusOr<Plan> LoadPlan(const std::string& path) {
  Plan plan;
  RETURN_IF_ERROR(ReadBinaryProto(path, &plan));
  if (plan.version() == 0) {
    return DataLossError("'", path, "' has no plan version: not a OneFlow-Lite plan");
  }
  if (plan.version() > kPlanVersion) {
    return FailedPreconditionError("'", path, "' is a plan of version ", plan.version(),
                                   ", newer than this oflite supports (", kPlanVersion,
                                   "); use a newer oflite");
  }
  if (plan.version() < kMinPlanVersion) {
    return FailedPreconditionError("'", path, "' is a plan of version ", plan.version(),
                                   ", older than this oflite supports (", kMinPlanVersion,
                                   "): it lacks the run settings, evaluation plan and "
                                   "collective algorithms this oflite reads; recompile it "
                                   "with `oflite compile`");
  }
  return plan;
}

Status SavePlan(const std::string& path, Plan plan) {
  plan.set_version(kPlanVersion);
  return WriteBinaryProto(path, plan);
}

StatusOr<Job> LoadJob(const std::string& path) {
  Job job;
  RETURN_IF_ERROR(ReadBinaryProto(path, &job));
  if (job.version() == 0 || job.version() > kJobVersion) {
    return FailedPreconditionError("'", path, "' has job version ", job.version(),
                                   "; this oflite reads version ", kJobVersion);
  }
  return job;
}

Status SaveJob(const std::string& path, Job job) {
  job.set_version(kJobVersion);
  return WriteBinaryProto(path, job);
}

}  // namespace oflite
