#include "oneflow_lite/api/micro_batches.h"

#include <limits>
#include <map>
#include <set>

#include "oneflow_lite/api/job_util.h"
#include "oneflow_lite/ops/op_builder.h"
#include "oneflow_lite/ops/op_def.h"

namespace oflite {
namespace {

std::string JoinInts(const std::vector<int64_t>& values, const std::string& separator) {
  std::string out;
  for (int64_t v : values) out += (out.empty() ? "" : separator) + std::to_string(v);
  return out;
}

// The number of devices of `op`'s placement (the job's default when unset).
int64_t DeviceCount(const Job& job, const OpConf& op) {
  const PlacementProto& p = op.has_placement() ? op.placement() : job.conf().default_placement();
  const int64_t count = static_cast<int64_t>(p.machine_id_size()) * p.device_id_size();
  return count > 0 ? count : 1;
}

// Whether output `flat_index` of `op` is hinted S(0) (every hierarchy level).
bool HintedSplit0(const OpConf& op, int flat_index) {
  if (flat_index >= op.output_sbp_hint_size()) return false;
  const NdSbp& hint = op.output_sbp_hint(flat_index);
  if (hint.sbp_size() == 0) return false;
  for (const SbpParallel& sbp : hint.sbp()) {
    if (!sbp.has_split_axis() || sbp.split_axis() != 0) return false;
  }
  return true;
}

class Unroller {
 public:
  Unroller(const Job& forward, int64_t micro_batches)
      : forward_(forward), micro_batches_(micro_batches), descs_(BlobDescsOf(forward)) {
    for (const OpConf& op : forward.op()) used_names_.insert(op.name());
    job_ = forward;
    job_.clear_op();
  }

  StatusOr<MicroBatchedJob> Run(PipelineSchedule schedule);

 private:
  Status CheckSourceBatch(const OpConf& op, int flat_index, const std::string& lbn) const;
  // The lbn of micro-batch k's part of a batch-dependent blob.
  std::string PartOf(const std::string& lbn, int64_t k);
  Status CloneOp(const OpConf& op);
  Status ScaleBatchAttrs(OpConf* clone) const;
  // The placement of the op producing `lbn` (unset: the job's default).
  const OpConf& ProducerOf(const std::string& lbn) const;
  std::string Emit(OpConf op, const OpConf& like);
  StatusOr<std::string> MeanOfParts(const std::string& lbn);
  StatusOr<std::string> RowsInBatchOrder(const std::string& lbn);
  std::string Where() const {
    return "micro-batches " + std::to_string(micro_batches_) + " (graph '" +
           forward_.conf().name() + "')";
  }

  const Job& forward_;
  const int64_t micro_batches_;
  BlobDescMap descs_;
  std::set<std::string> used_names_;
  Job job_;
  std::set<std::string> source_lbns_;                    // outputs of data sources
  std::map<std::string, std::vector<std::string>> parts_;  // batch-dependent lbn -> M parts
  std::map<std::string, std::string> merged_;              // metric lbn -> its mean
};

Status Unroller::CheckSourceBatch(const OpConf& op, int flat_index, const std::string& lbn) const {
  const TensorDesc& desc = descs_.at(lbn);
  if (desc.shape.rank() == 0) {
    return InvalidArgumentError(Where(), ": data source '", op.name(), "' (", op.op_type(),
                                ") output '", lbn, "' is a scalar; there is no batch to split");
  }
  const int64_t batch = desc.shape.dim(0);
  const int64_t devices = HintedSplit0(op, flat_index) ? DeviceCount(forward_, op) : 1;
  if (batch % micro_batches_ != 0) {
    return InvalidArgumentError(Where(), " do not divide the batch ", batch, " of data source '",
                                op.name(), "' (", lbn, "); use ",
                                JoinInts(NearestDivisors(batch, micro_batches_), " or "),
                                " (divisors of ", batch, "), or change the batch");
  }
  if (devices > 1 && (batch / devices) % micro_batches_ != 0) {
    const int64_t local = batch / devices;
    return InvalidArgumentError(Where(), " do not divide the per-device batch ", local,
                                " of data source '", op.name(), "' (batch ", batch, " split S(0) over ",
                                devices, " devices); use ",
                                JoinInts(NearestDivisors(local, micro_batches_), " or "),
                                ", or a batch divisible by ", devices * micro_batches_);
  }
  return Status::OK();
}

const OpConf& Unroller::ProducerOf(const std::string& lbn) const {
  std::string name, arg;
  CHECK(SplitLbn(lbn, &name, &arg)) << lbn;
  const OpConf* op = FindOp(job_, name);
  CHECK(op != nullptr) << lbn;
  return *op;
}

std::string Unroller::Emit(OpConf op, const OpConf& like) {
  op.set_name(MakeUniqueName(op.name(), &used_names_));
  for (ArgProto& arg : *op.mutable_output()) {
    if (arg.lbn_size() == 0) arg.add_lbn();
    for (int i = 0; i < arg.lbn_size(); ++i) arg.set_lbn(i, OutputLbn(op.name(), arg.name(), i));
  }
  if (like.has_placement()) *op.mutable_placement() = like.placement();
  *job_.add_op() = op;
  return op.name();
}

std::string Unroller::PartOf(const std::string& lbn, int64_t k) {
  std::vector<std::string>& parts = parts_[lbn];
  if (!parts.empty()) return parts[k];
  // A source output: M strided row selections, made on first use.
  CHECK(source_lbns_.count(lbn)) << lbn;
  const OpConf& source = ProducerOf(lbn);
  const int64_t rank = descs_.at(lbn).shape.rank();
  std::vector<int64_t> start(rank, 0), stop(rank, std::numeric_limits<int64_t>::max()),
      step(rank, 1);
  step[0] = micro_batches_;
  std::string op_name, arg;
  CHECK(SplitLbn(lbn, &op_name, &arg));
  for (int64_t m = 0; m < micro_batches_; ++m) {
    start[0] = m;
    OpConf slice = OpConfBuilder("slice", op_name + "-" + arg + "-mb" + std::to_string(m))
                       .Input("x", lbn)
                       .Output("y")
                       .Attr("start", start)
                       .Attr("stop", stop)
                       .Attr("step", step)
                       .Build();
    slice.set_micro_batch(m);
    parts.push_back(OutputLbn(Emit(std::move(slice), source), "y"));
  }
  return parts[k];
}

// A reshape's target shape names the batch in its first dimension (e.g.
// [B, T, heads, head_dim] or [B x T, C]): a micro-batch has 1/M of it. An
// inferred first dimension (-1) is left alone.
Status Unroller::ScaleBatchAttrs(OpConf* clone) const {
  if (clone->op_type() != "reshape") return Status::OK();
  for (AttrEntry& entry : *clone->mutable_attr()) {
    if (entry.key() != "shape" || !entry.value().has_shape()) continue;
    ShapeProto* shape = entry.mutable_value()->mutable_shape();
    if (shape->dim_size() == 0 || shape->dim(0) == -1) continue;
    if (shape->dim(0) % micro_batches_ != 0) {
      return InvalidArgumentError(Where(), ": reshape '", clone->name(), "' makes a first dimension of ",
                                  shape->dim(0), ", which does not split into ",
                                  micro_batches_, " micro-batches; reshape the batch axis to -1");
    }
    shape->set_dim(0, shape->dim(0) / micro_batches_);
  }
  return Status::OK();
}

Status Unroller::CloneOp(const OpConf& op) {
  if (op.mutable_input_size() > 0) {
    return UnimplementedError(Where(), ": op '", op.name(), "' (", op.op_type(), ") writes '",
                              op.mutable_input(0),
                              "' in place from the batch; each micro-batch would update it "
                              "separately. Train it without micro-batches");
  }
  for (int64_t k = 0; k < micro_batches_; ++k) {
    OpConf clone = op;
    clone.set_name(op.name() + "-mb" + std::to_string(k));
    clone.clear_control_input();
    for (ArgProto& arg : *clone.mutable_input()) {
      for (int i = 0; i < arg.lbn_size(); ++i) {
        if (parts_.count(arg.lbn(i)) || source_lbns_.count(arg.lbn(i))) {
          arg.set_lbn(i, PartOf(arg.lbn(i), k));
        }
      }
    }
    RETURN_IF_ERROR(ScaleBatchAttrs(&clone));
    clone.set_micro_batch(k);
    const std::string name = Emit(std::move(clone), op);
    for (const ArgProto& arg : op.output()) {
      for (int i = 0; i < arg.lbn_size(); ++i) {
        parts_[arg.lbn(i)].push_back(OutputLbn(name, arg.name(), i));
      }
    }
  }
  return Status::OK();
}

StatusOr<std::string> Unroller::MeanOfParts(const std::string& lbn) {
  auto done = merged_.find(lbn);
  if (done != merged_.end()) return done->second;
  auto parts = parts_.find(lbn);
  if (parts == parts_.end()) return lbn;  // does not depend on the batch
  std::string op_name, arg;
  CHECK(SplitLbn(lbn, &op_name, &arg));
  const OpConf& like = ProducerOf(parts->second.front());
  const std::string sum = Emit(OpConfBuilder("add", op_name + "-" + arg + "-micro_sum")
                                   .Input("in", parts->second)
                                   .Output("out")
                                   .Build(),
                               like);
  const std::string mean =
      Emit(OpConfBuilder("scalar_mul", op_name + "-" + arg + "-micro_mean")
               .Input("in", OutputLbn(sum, "out"))
               .Output("out")
               .Attr("value", 1.0 / static_cast<double>(micro_batches_))
               .Build(),
           like);
  return merged_[lbn] = OutputLbn(mean, "out");
}

StatusOr<std::string> Unroller::RowsInBatchOrder(const std::string& lbn) {
  auto parts = parts_.find(lbn);
  if (parts == parts_.end()) return lbn;
  const Shape& shape = descs_.at(lbn).shape;
  if (shape.rank() == 0) return MeanOfParts(lbn);
  std::string op_name, arg;
  CHECK(SplitLbn(lbn, &op_name, &arg));
  const OpConf& like = ProducerOf(parts->second.front());
  const std::string base = op_name + "-" + arg + "-micro_rows";
  // [M x b, ...] (micro-batch major) -> [M, b, ...] -> [b, M, ...] -> [B, ...]:
  // row j of micro-batch k is row j * M + k of the batch.
  std::vector<int64_t> stacked = {micro_batches_, shape.dim(0) / micro_batches_};
  std::vector<int64_t> perm = {1, 0};
  for (int64_t d = 1; d < shape.rank(); ++d) {
    stacked.push_back(shape.dim(d));
    perm.push_back(d + 1);
  }
  std::string x = OutputLbn(
      Emit(OpConfBuilder("concat", base).Input("in", parts->second).Output("out").Attr("axis", int64_t{0}).Build(),
           like),
      "out");
  x = OutputLbn(Emit(OpConfBuilder("reshape", base).Input("x", x).Output("y")
                         .Attr("shape", Shape(stacked)).Build(), like), "y");
  x = OutputLbn(Emit(OpConfBuilder("transpose", base).Input("x", x).Output("y")
                         .Attr("perm", perm).Build(), like), "y");
  x = OutputLbn(Emit(OpConfBuilder("reshape", base).Input("x", x).Output("y")
                         .Attr("shape", shape).Build(), like), "y");
  return x;
}

StatusOr<MicroBatchedJob> Unroller::Run(PipelineSchedule schedule) {
  if (micro_batches_ < 2) {
    return InvalidArgumentError(Where(), ": want at least 2 (1 means no micro-batches)");
  }
  ASSIGN_OR_RETURN(std::vector<int> order, TopologicalOrder(forward_));
  for (int index : order) {
    const OpConf& op = forward_.op(index);
    ASSIGN_OR_RETURN(const OpDef* def, LookupOpDef(op.op_type(), op.name()));
    if (def->is_source && op.op_type() != "variable") {
      int flat = 0;
      for (const ArgProto& arg : op.output()) {
        for (const std::string& lbn : arg.lbn()) {
          RETURN_IF_ERROR(CheckSourceBatch(op, flat++, lbn));
          source_lbns_.insert(lbn);
        }
      }
      *job_.add_op() = op;
      continue;
    }
    bool batched = false;
    for (const ArgProto& arg : op.input()) {
      for (const std::string& lbn : arg.lbn()) {
        batched = batched || parts_.count(lbn) > 0 || source_lbns_.count(lbn) > 0;
      }
    }
    if (batched) {
      RETURN_IF_ERROR(CloneOp(op));
    } else {
      *job_.add_op() = op;
    }
  }
  MicroBatchedJob result;
  TrainConf* train = job_.mutable_conf()->mutable_train();
  const std::string loss = train->loss_lbn();
  if (!loss.empty()) {
    if (!parts_.count(loss)) {
      return FailedPreconditionError(Where(), ": the loss '", loss,
                                     "' does not depend on the data; nothing to split");
    }
    result.loss_parts = parts_.at(loss);
    ASSIGN_OR_RETURN(std::string mean, MeanOfParts(loss));
    train->set_loss_lbn(mean);
  }
  for (ArgProto& metric : *train->mutable_metric()) {
    for (int i = 0; i < metric.lbn_size(); ++i) {
      ASSIGN_OR_RETURN(std::string mean, MeanOfParts(metric.lbn(i)));
      metric.set_lbn(i, mean);
    }
  }
  for (ArgProto& output : *train->mutable_output()) {
    for (int i = 0; i < output.lbn_size(); ++i) {
      ASSIGN_OR_RETURN(std::string rows, RowsInBatchOrder(output.lbn(i)));
      output.set_lbn(i, rows);
    }
  }
  PipelineConf* pipeline = job_.mutable_conf()->mutable_pipeline();
  pipeline->set_micro_batches(micro_batches_);
  pipeline->set_schedule(schedule);
  RETURN_IF_ERROR(FillMutableInputs(&job_));
  RETURN_IF_ERROR(ReinferBlobDescs(&job_));
  result.job = std::move(job_);
  return result;
}

}  // namespace

std::vector<int64_t> NearestDivisors(int64_t n, int64_t wanted) {
  std::vector<int64_t> out;
  if (n < 1) return {1};
  int64_t below = std::min(std::max<int64_t>(wanted, 1), n);
  while (below > 1 && n % below != 0) --below;
  if (below > 1 || n == 1) out.push_back(below);
  int64_t above = std::max<int64_t>(wanted, 1);
  while (above <= n && n % above != 0) ++above;
  if (above <= n && above != below) out.push_back(above);
  if (out.empty()) out.push_back(1);
  return out;
}

StatusOr<MicroBatchedJob> UnrollMicroBatches(const Job& forward, int64_t micro_batches,
                                             PipelineSchedule schedule) {
  return Unroller(forward, micro_batches).Run(schedule);
}

}  // namespace oflite
