#include "oneflow_lite/runtime/boxing_body.h"

#include "oneflow_lite/common/partition.h"
#include "oneflow_lite/runtime/actor_bodies.h"

#include <algorithm>
#include <cstring>

namespace oflite {

const SbpParallel& FirstSbp(const NdSbp& sbp) {
  static const SbpParallel* broadcast = [] {
    auto* s = new SbpParallel();
    s->set_broadcast(true);
    return s;
  }();
  return sbp.sbp_size() > 0 ? sbp.sbp(0) : *broadcast;
}

void BalancedRange(int64_t dim, int64_t parts, int64_t index, int64_t* begin, int64_t* size) {
  const PartRange range = BalancedPart(dim, parts, index);
  *begin = range.begin;
  *size = range.size;
}

StatusOr<std::unique_ptr<ActBody>> BoxingBody::Create(const TaskProto& task,
                                                      const ActorEnv& env) {
  std::unique_ptr<BoxingBody> body(new BoxingBody(task));
  const BoxingConf& conf = task.boxing();
  const std::string what = "boxing task '" + task.name() + "'";
  std::vector<int64_t> inputs(conf.in_regst_desc_id().begin(), conf.in_regst_desc_id().end());
  if (inputs.empty()) {
    for (const ConsumedRegst& c : task.consumed()) {
      for (int64_t id : c.regst_desc_id()) inputs.push_back(id);
    }
  }
  if (conf.in_parallel_id_size() > 0 && conf.in_parallel_id_size() != (int)inputs.size()) {
    return InvalidArgumentError(what, ": ", conf.in_parallel_id_size(), " in_parallel_ids for ",
                                inputs.size(), " inputs");
  }
  for (size_t k = 0; k < inputs.size(); ++k) {
    const int64_t part = conf.in_parallel_id_size() > 0 ? conf.in_parallel_id(k) : k;
    body->inputs_.emplace_back(part, inputs[k]);
    const RegstDescProto* desc = env.regsts->FindDesc(inputs[k]);
    if (desc == nullptr || desc->blob_size() < 1) {
      return InvalidArgumentError(what, ": input register ", inputs[k], " missing or empty");
    }
  }
  std::sort(body->inputs_.begin(), body->inputs_.end());
  const std::vector<const RegstDescProto*> outputs = DataRegsts(task);
  if (body->inputs_.empty() || outputs.size() != 1 || outputs[0]->blob_size() < 1) {
    return InvalidArgumentError(what, ": needs inputs and exactly one produced data register");
  }
  body->output_ = outputs[0]->regst_desc_id();
  body->out_part_ = conf.out_parallel_id();
  body->parts_ = conf.parallel_num() > 0 ? conf.parallel_num()
                                         : static_cast<int64_t>(body->inputs_.size());
  body->logical_ = TensorDesc(conf.logical_desc());
  if (body->out_part_ < 0 || body->out_part_ >= body->parts_) {
    return InvalidArgumentError(what, ": out_parallel_id ", body->out_part_, " outside ",
                                body->parts_, " parts");
  }
  for (const auto& [part, desc_id] : body->inputs_) {
    if (part < 0 || part >= body->parts_) {
      return InvalidArgumentError(what, ": input register ", desc_id, " has in_parallel_id ", part,
                                  " outside ", body->parts_, " parts");
    }
  }
  for (const SbpParallel* sbp : {&FirstSbp(conf.in_sbp()), &FirstSbp(conf.out_sbp())}) {
    if (sbp->has_split_axis() &&
        (sbp->split_axis() < 0 || sbp->split_axis() >= body->logical_.shape.rank())) {
      return InvalidArgumentError(what, ": split axis ", sbp->split_axis(), " outside ",
                                  body->logical_.ToString());
    }
  }
  body->buffer_.resize(body->logical_.ByteSize());
  return std::unique_ptr<ActBody>(std::move(body));
}

Status BoxingBody::Act(ActContext* context) {
  RETURN_IF_ERROR(Assemble(context));
  return Scatter(context);
}

Status AssembleLogical(const SbpParallel& in, const TensorDesc& logical, int64_t num_parts,
                       const std::vector<PartBytes>& parts, char* whole, const std::string& who) {
  const int64_t elem_bytes = SizeOf(logical.dtype);
  bool first = true;
  for (const PartBytes& part : parts) {
    int64_t expect = logical.ByteSize();
    PartRange range;
    if (in.has_split_axis()) {
      const int64_t dim = logical.shape.dim(in.split_axis());
      range = BalancedPart(dim, num_parts, part.index);
      expect = (dim == 0 ? 0 : logical.ByteSize() / dim) * range.size;
    }
    if (part.bytes != expect) {
      return InvalidArgumentError(who, ": input part ", part.index, " has ", part.bytes,
                                  " bytes, expected ", expect, " (logical ", logical.ToString(),
                                  ")");
    }
    if (in.has_split_axis()) {
      CopyPartToWhole(logical.shape, in.split_axis(), range, elem_bytes, part.data, whole);
    } else if (first) {
      std::memcpy(whole, part.data, part.bytes);
    } else if (in.has_partial_sum()) {
      RETURN_IF_ERROR(AccumulateInto(logical.dtype, part.data, whole, logical.shape.elem_count())
                          .WithContext(who + ": partial sum"));
    }
    first = false;
  }
  return Status::OK();
}

Status CutLogical(const SbpParallel& out, const TensorDesc& logical, int64_t num_parts,
                  int64_t index, const char* whole, void* dst, int64_t dst_bytes,
                  const std::string& who) {
  int64_t expect = logical.ByteSize();
  PartRange range;
  if (out.has_split_axis()) {
    const int64_t dim = logical.shape.dim(out.split_axis());
    range = BalancedPart(dim, num_parts, index);
    expect = (dim == 0 ? 0 : logical.ByteSize() / dim) * range.size;
  }
  if (dst_bytes != expect) {
    return InvalidArgumentError(who, ": output part ", index, " has ", dst_bytes,
                                " bytes, expected ", expect, " (logical ", logical.ToString(),
                                ")");
  }
  if (out.has_split_axis()) {
    CopyWholeToPart(logical.shape, out.split_axis(), range, SizeOf(logical.dtype), whole, dst);
  } else if (out.has_partial_sum() && index > 0) {
    std::memset(dst, 0, dst_bytes);
  } else if (dst_bytes > 0) {
    std::memcpy(dst, whole, dst_bytes);
  }
  return Status::OK();
}

namespace {

// On one machine the parts come from the plan's own registers: a size that
// does not fit is the runtime's bug, not bad input.
Status AsInternal(const Status& status) {
  if (status.code() != StatusCode::kInvalidArgument) return status;
  return InternalError(status.message());
}

}  // namespace

Status BoxingBody::Assemble(ActContext* context) {
  std::vector<PartBytes> parts;
  for (const auto& [part_id, desc_id] : inputs_) {
    const Blob& part = context->consumed.at(desc_id)->blobs[0];
    if (part.dtype() != logical_.dtype) {
      return InternalError("boxing task '", task_->name(), "': input part ", part_id, " is ",
                           part.desc().ToString(), ", logical ", logical_.ToString());
    }
    parts.push_back({part_id, part.raw(), part.ByteSize()});
  }
  return AsInternal(AssembleLogical(FirstSbp(task_->boxing().in_sbp()), logical_, parts_, parts,
                                    buffer_.data(), "boxing task '" + task_->name() + "'"));
}

Status BoxingBody::Scatter(ActContext* context) {
  Blob& part = context->produced.at(output_)->blobs[0];
  return AsInternal(CutLogical(FirstSbp(task_->boxing().out_sbp()), logical_, parts_, out_part_,
                               buffer_.data(), part.raw(), part.ByteSize(),
                               "boxing task '" + task_->name() + "'"));
}

}  // namespace oflite
