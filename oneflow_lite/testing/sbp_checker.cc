#include "oneflow_lite/testing/sbp_checker.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "oneflow_lite/common/partition.h"
#include "oneflow_lite/device/device_context.h"
#include "oneflow_lite/kernels/kernel.h"
#include "oneflow_lite/ops/op_def.h"

namespace oflite {
namespace {

struct FlatArg {
  std::string arg;
  int index;
  std::string lbn;
};

std::vector<FlatArg> Flatten(const google::protobuf::RepeatedPtrField<ArgProto>& args) {
  std::vector<FlatArg> flat;
  for (const ArgProto& a : args) {
    for (int i = 0; i < a.lbn_size(); ++i) flat.push_back({a.name(), i, a.lbn(i)});
  }
  return flat;
}

double ValueAt(const HostTensor& t, int64_t i) {
  switch (t.dtype()) {
    case DT_FLOAT:
      return t.data<float>()[i];
    case DT_DOUBLE:
      return t.data<double>()[i];
    case DT_INT32:
      return t.data<int32_t>()[i];
    case DT_INT64:
      return static_cast<double>(t.data<int64_t>()[i]);
    case DT_UINT8:
      return t.data<uint8_t>()[i];
    default:
      LOG(FATAL) << "unsupported dtype " << DataTypeName(t.dtype());
  }
  return 0;
}

// The slab `range` of `t` along `axis`, and the inverse (parts in order).
HostTensor SliceAlong(const HostTensor& t, int64_t axis, PartRange range) {
  std::vector<int64_t> dims = t.shape().dims();
  dims[axis] = range.size;
  HostTensor out(TensorDesc(Shape(dims), t.dtype()));
  CopyWholeToPart(t.shape(), axis, range, SizeOf(t.dtype()), t.raw(), out.raw());
  return out;
}

HostTensor ConcatAlong(const std::vector<HostTensor>& parts, int64_t axis) {
  std::vector<int64_t> dims = parts[0].shape().dims();
  dims[axis] = 0;
  for (const HostTensor& part : parts) dims[axis] += part.shape().dim(axis);
  HostTensor out(TensorDesc(Shape(dims), parts[0].dtype()));
  PartRange range;
  for (const HostTensor& part : parts) {
    range.size = part.shape().dim(axis);
    CopyPartToWhole(out.shape(), axis, range, SizeOf(out.dtype()), part.raw(), out.raw());
    range.begin = range.end();
  }
  return out;
}

Shape PhysicalShape(const Shape& logical, const SbpParallel& sbp, int64_t n, int64_t p) {
  if (!IsSplit(sbp)) return logical;
  return BalancedPartShape(logical, sbp.split_axis(), n, p);
}

// Per-device parts of a logical input.
StatusOr<std::vector<HostTensor>> SplitInput(const HostTensor& full, const SbpParallel& sbp,
                                             int64_t n, uint64_t seed) {
  std::vector<HostTensor> parts;
  if (IsSplit(sbp)) {
    if (sbp.split_axis() < 0 || sbp.split_axis() >= full.shape().rank()) {
      return InvalidArgumentError("split axis ", sbp.split_axis(), " out of range for ",
                                  full.shape());
    }
    for (int64_t p = 0; p < n; ++p) {
      parts.push_back(
          SliceAlong(full, sbp.split_axis(), BalancedPart(full.shape().dim(sbp.split_axis()), n, p)));
    }
  } else if (IsBroadcast(sbp)) {
    for (int64_t p = 0; p < n; ++p) parts.push_back(full.Clone());
  } else {
    if (full.dtype() != DT_DOUBLE) return InvalidArgumentError("P input must be float64");
    HostTensor last = full.Clone();
    for (int64_t p = 0; p + 1 < n; ++p) {
      parts.push_back(RandomTensor(full.desc(), seed + p));
      for (int64_t i = 0; i < full.elem_count(); ++i) {
        last.data<double>()[i] -= parts.back().data<double>()[i];
      }
    }
    parts.push_back(std::move(last));
  }
  return parts;
}

template <typename T>
void AddInto(const T* part, T* sum, int64_t n) {
  for (int64_t i = 0; i < n; ++i) sum[i] += part[i];
}

HostTensor Combine(std::vector<HostTensor> parts, const SbpParallel& sbp) {
  if (IsSplit(sbp)) return ConcatAlong(parts, sbp.split_axis());
  HostTensor sum = parts[0].Clone();
  if (IsPartialSum(sbp)) {
    for (size_t p = 1; p < parts.size(); ++p) {
      if (sum.dtype() == DT_FLOAT) {
        AddInto(parts[p].data<float>(), sum.data<float>(), sum.elem_count());
      } else {
        AddInto(parts[p].data<double>(), sum.data<double>(), sum.elem_count());
      }
    }
  }
  return sum;
}

Status Compare(const HostTensor& got, const HostTensor& want, double tolerance,
               const std::string& what) {
  if (got.shape() != want.shape()) {
    return InternalError(what, ": shape ", got.shape(), " vs ", want.shape());
  }
  // float32 results carry float32 rounding of differently ordered sums.
  if (got.dtype() == DT_FLOAT) tolerance = std::max(tolerance, 1e-5);
  for (int64_t i = 0; i < got.elem_count(); ++i) {
    const double g = ValueAt(got, i), w = ValueAt(want, i);
    if (std::isnan(g) && std::isnan(w)) continue;
    if (!(std::fabs(g - w) <= tolerance * (1 + std::fabs(w)))) {
      return InternalError(what, ": element ", i, " got ", g, ", expected ", w);
    }
  }
  return Status::OK();
}

// Runs the kernel of `op` on one device's physical inputs.
StatusOr<std::vector<HostTensor>> RunDevice(const OpConf& op, const std::vector<FlatArg>& ins,
                                            std::vector<HostTensor>& inputs,
                                            const std::vector<FlatArg>& outs,
                                            const std::vector<TensorDesc>& out_descs, int64_t p,
                                            int64_t n) {
  static const CpuDeviceContext* const kCpu = new CpuDeviceContext();
  KernelInitContext init;
  init.op = &op;
  for (size_t i = 0; i < ins.size(); ++i) init.inputs[ins[i].arg].push_back(inputs[i].desc());
  for (size_t i = 0; i < outs.size(); ++i) init.outputs[outs[i].arg].push_back(out_descs[i]);
  init.parallel_id = p;
  init.parallel_num = n;
  init.device = kCpu;
  ASSIGN_OR_RETURN(auto kernel, CreateAndInitKernel(init, DEVICE_CPU, inputs[0].dtype()));
  std::vector<HostTensor> results;
  for (const TensorDesc& d : out_descs) results.emplace_back(d);
  std::vector<Blob> blobs;
  blobs.reserve(inputs.size() + results.size());
  KernelContext ctx(op, kCpu, 0);
  for (size_t i = 0; i < ins.size(); ++i) {
    blobs.push_back(inputs[i].AsBlob());
    ctx.BindInput(ins[i].arg, &blobs.back());
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    blobs.push_back(results[i].AsBlob());
    ctx.BindOutput(outs[i].arg, &blobs.back());
  }
  RETURN_IF_ERROR(kernel->Forward(&ctx));
  return results;
}

Status CheckOne(const OpConf& op, const TensorMap& env, const SbpSignature& sig,
                const std::vector<FlatArg>& ins, const std::vector<FlatArg>& outs,
                const std::vector<TensorDesc>& logical_outs, const TensorMap& reference, int64_t n,
                double tolerance, uint64_t seed) {
  if (sig.inputs.size() != ins.size() || sig.outputs.size() != outs.size()) {
    return InternalError("signature has ", sig.inputs.size(), "/", sig.outputs.size(),
                         " entries for ", ins.size(), "/", outs.size(), " args");
  }
  std::vector<std::vector<HostTensor>> per_input;
  for (size_t i = 0; i < ins.size(); ++i) {
    ASSIGN_OR_RETURN(auto parts, SplitInput(env.at(ins[i].lbn), sig.inputs[i], n, seed + 97 * i));
    per_input.push_back(std::move(parts));
  }
  std::vector<std::vector<HostTensor>> per_output(outs.size());
  for (int64_t p = 0; p < n; ++p) {
    std::vector<HostTensor> inputs;
    for (auto& parts : per_input) inputs.push_back(std::move(parts[p]));
    std::vector<TensorDesc> out_descs;
    for (size_t o = 0; o < outs.size(); ++o) {
      out_descs.emplace_back(PhysicalShape(logical_outs[o].shape, sig.outputs[o], n, p),
                             logical_outs[o].dtype);
    }
    auto results = RunDevice(op, ins, inputs, outs, out_descs, p, n);
    if (!results.ok()) {
      return results.status().WithContext("device " + std::to_string(p));
    }
    for (size_t o = 0; o < outs.size(); ++o) per_output[o].push_back(std::move((*results)[o]));
  }
  for (size_t o = 0; o < outs.size(); ++o) {
    const HostTensor& want = reference.at(outs[o].lbn);
    if (IsBroadcast(sig.outputs[o])) {
      for (int64_t p = 0; p < n; ++p) {
        RETURN_IF_ERROR(Compare(per_output[o][p], want, tolerance,
                                outs[o].lbn + " on device " + std::to_string(p)));
      }
      continue;
    }
    RETURN_IF_ERROR(Compare(Combine(std::move(per_output[o]), sig.outputs[o]), want, tolerance,
                            outs[o].lbn + " combined"));
  }
  return Status::OK();
}

struct Prepared {
  std::vector<FlatArg> ins, outs;
  std::vector<TensorDesc> flat_in, flat_out;
  TensorMap reference;
};

StatusOr<Prepared> Prepare(const OpConf& op, const TensorMap& env) {
  Prepared prepared;
  prepared.ins = Flatten(op.input());
  prepared.outs = Flatten(op.output());
  ArgDescs in_descs;
  for (const FlatArg& a : prepared.ins) {
    auto it = env.find(a.lbn);
    if (it == env.end()) return NotFoundError("input ", a.lbn, " not in environment");
    in_descs[a.arg].push_back(it->second.desc());
    prepared.flat_in.push_back(it->second.desc());
  }
  ASSIGN_OR_RETURN(ArgDescs out_descs, InferOp(op, in_descs));
  for (const FlatArg& a : prepared.outs)
    prepared.flat_out.push_back(out_descs.at(a.arg).at(a.index));
  TensorMap scratch;
  for (const auto& [lbn, t] : env) scratch.emplace(lbn, t.Clone());
  ASSIGN_OR_RETURN(prepared.reference, RunOp(op, &scratch));
  return prepared;
}

Status CheckPrepared(const OpConf& op, const TensorMap& env, const Prepared& prepared,
                     const SbpSignature& sig, int64_t parallel_num, double tolerance,
                     uint64_t seed) {
  Status s = CheckOne(op, env, sig, prepared.ins, prepared.outs, prepared.flat_out,
                      prepared.reference, parallel_num, tolerance, seed);
  if (s.ok()) return s;
  return s.WithContext("op '" + op.name() + "' (" + op.op_type() + ") signature [" +
                       sig.ToString() + "] on " + std::to_string(parallel_num) + " devices");
}

}  // namespace

Status CheckSbpSignature(const OpConf& op, const TensorMap& env, const SbpSignature& sig,
                         int64_t parallel_num, double tolerance, uint64_t seed) {
  ASSIGN_OR_RETURN(Prepared prepared, Prepare(op, env));
  return CheckPrepared(op, env, prepared, sig, parallel_num, tolerance, seed);
}

StatusOr<SbpCheckResult> CheckSbpSignatures(const OpConf& op, const TensorMap& env,
                                            int64_t parallel_num, double tolerance, uint64_t seed) {
  ASSIGN_OR_RETURN(const OpDef* def, LookupOpDef(op.op_type(), op.name()));
  ASSIGN_OR_RETURN(Prepared prepared, Prepare(op, env));
  SbpContext ctx(op, prepared.flat_in, prepared.flat_out, parallel_num);
  if (def->sbp) RETURN_IF_ERROR(def->sbp(&ctx));
  SbpCheckResult result;
  result.signatures = ctx.signatures();
  for (const SbpSignature& sig : result.signatures) {
    RETURN_IF_ERROR(CheckPrepared(op, env, prepared, sig, parallel_num, tolerance, seed));
  }
  return result;
}

}  // namespace oflite
