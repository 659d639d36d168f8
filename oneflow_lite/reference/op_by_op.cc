#include "oneflow_lite/reference/op_by_op.h"

namespace oflite {

DataType KernelDtypeOf(const OpConf& op, const BlobDescMap& descs) {
  if (op.input_size() > 0) return descs.at(op.input(0).lbn(0)).dtype;
  if (op.output_size() > 0) return descs.at(op.output(0).lbn(0)).dtype;
  return DT_INVALID;
}

StatusOr<KernelInitContext> MakeKernelInitContext(const OpConf& op, const BlobDescMap& descs,
                                                  int64_t seed, const DeviceContext* device) {
  KernelInitContext init;
  init.op = &op;
  ASSIGN_OR_RETURN(init.inputs, InputDescsOf(op, descs));
  for (const ArgProto& arg : op.output()) {
    for (const std::string& lbn : arg.lbn()) init.outputs[arg.name()].push_back(descs.at(lbn));
  }
  init.seed = seed;
  init.device = device;
  return init;
}

void BindOpBlobs(const OpConf& op,
                 const std::function<Blob(const std::string& lbn, bool is_output)>& blob_of,
                 std::deque<Blob>* blobs, KernelContext* context) {
  for (const ArgProto& arg : op.input()) {
    for (const std::string& lbn : arg.lbn()) {
      blobs->push_back(blob_of(lbn, /*is_output=*/false));
      context->BindInput(arg.name(), &blobs->back());
    }
  }
  for (const ArgProto& arg : op.output()) {
    for (const std::string& lbn : arg.lbn()) {
      blobs->push_back(blob_of(lbn, /*is_output=*/true));
      context->BindOutput(arg.name(), &blobs->back());
    }
  }
}

StatusOr<double> MetricValue(const std::string& name, const HostTensor& tensor) {
  if (tensor.elem_count() != 1) {
    return InvalidArgumentError("metric '", name, "' is not a scalar: ", tensor.desc().ToString());
  }
  switch (tensor.dtype()) {
    case DT_FLOAT:
      return static_cast<double>(tensor.data<float>()[0]);
    case DT_DOUBLE:
      return tensor.data<double>()[0];
    case DT_INT32:
      return static_cast<double>(tensor.data<int32_t>()[0]);
    case DT_INT64:
      return static_cast<double>(tensor.data<int64_t>()[0]);
    default:
      return InvalidArgumentError("metric '", name, "' has unsupported dtype ",
                                  DataTypeName(tensor.dtype()));
  }
}

}  // namespace oflite
