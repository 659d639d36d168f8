#include "oneflow_lite/common/proto_io.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/text_format.h>

#include <climits>
#include <sstream>

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

Status ReadBinaryProto(const std::string& path, google::protobuf::Message* msg, Env* env) {
  ASSIGN_OR_RETURN(std::string data, env->ReadFileToString(path, kMaxProtoFileBytes));
  if (data.empty()) {
    return DataLossError("'", path, "' is empty, expected a ", msg->GetTypeName());
  }
  static_assert(kMaxProtoFileBytes <= INT_MAX, "protobuf parses at most INT_MAX bytes");
  google::protobuf::io::ArrayInputStream raw(data.data(), static_cast<int>(data.size()));
  google::protobuf::io::CodedInputStream coded(&raw);
  if (!msg->ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage()) {
    return DataLossError("'", path, "' is not a valid ", msg->GetTypeName(),
                         " (corrupt or truncated, ", data.size(), " bytes)");
  }
  return Status::OK();
}

Status WriteBinaryProto(const std::string& path, const google::protobuf::Message& msg, Env* env) {
  std::string data;
  {
    google::protobuf::io::StringOutputStream raw(&data);
    google::protobuf::io::CodedOutputStream coded(&raw);
    coded.SetSerializationDeterministic(true);
    if (!msg.SerializeToCodedStream(&coded)) {
      return InternalError("cannot serialize ", msg.GetTypeName(), " for '", path, "'");
    }
  }
  return env->WriteFileAtomically(path, data);
}

Status ReadTextProto(const std::string& path, google::protobuf::Message* msg, Env* env) {
  ASSIGN_OR_RETURN(std::string data, env->ReadFileToString(path, kMaxProtoFileBytes));
  google::protobuf::TextFormat::Parser parser;
  CollectingErrorPrinter errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(data, msg)) {
    return InvalidArgumentError("'", path, "' is not a valid text ", msg->GetTypeName(), ": ",
                                errors.first());
  }
  return Status::OK();
}

Status WriteTextProto(const std::string& path, const google::protobuf::Message& msg, Env* env) {
  std::string data;
  if (!google::protobuf::TextFormat::PrintToString(msg, &data)) {
    return InternalError("cannot print ", msg.GetTypeName(), " for '", path, "'");
  }
  return env->WriteFileAtomically(path, data);
}

StatusOr<Plan> LoadPlan(const std::string& path, Env* env) {
  Plan plan;
  RETURN_IF_ERROR(ReadBinaryProto(path, &plan, env));
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

Status SavePlan(const std::string& path, Plan plan, Env* env) {
  plan.set_version(kPlanVersion);
  return WriteBinaryProto(path, plan, env);
}

StatusOr<Job> LoadJob(const std::string& path, Env* env) {
  Job job;
  RETURN_IF_ERROR(ReadBinaryProto(path, &job, env));
  if (job.version() == 0 || job.version() > kJobVersion) {
    return FailedPreconditionError("'", path, "' has job version ", job.version(),
                                   "; this oflite reads version ", kJobVersion);
  }
  return job;
}

Status SaveJob(const std::string& path, Job job, Env* env) {
  job.set_version(kJobVersion);
  return WriteBinaryProto(path, job, env);
}

}  // namespace oflite
