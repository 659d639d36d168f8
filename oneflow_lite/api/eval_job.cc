#include "oneflow_lite/api/eval_job.h"

#include <map>
#include <set>
#include <vector>

#include "oneflow_lite/api/job_util.h"
#include "oneflow_lite/common/attr.h"
#include "oneflow_lite/ops/op_builder.h"

namespace oflite {
namespace {

constexpr int64_t kFashionMnistTrainExamples = 60000;
constexpr int64_t kFashionMnistTestExamples = 10000;

OpConf DropoutToIdentity(const OpConf& dropout) {
  OpConf identity = OpConfBuilder("identity", dropout.name())
                        .Input("in", dropout.input(0).lbn(0))
                        .Output("out")
                        .Build();
  if (dropout.has_placement()) *identity.mutable_placement() = dropout.placement();
  identity.mutable_control_input()->CopyFrom(dropout.control_input());
  return identity;
}

}  // namespace

StatusOr<Job> MakeEvalJob(const Job& train_job, const EvalJobOptions& options) {
  if (options.split != "train" && options.split != "test") {
    return InvalidArgumentError("MakeEvalJob: split must be \"train\" or \"test\", got \"",
                                options.split, "\"");
  }
  if (options.batch_size < 0) {
    return InvalidArgumentError("MakeEvalJob: negative batch size ", options.batch_size);
  }
  Job job;
  job.set_version(train_job.version());
  *job.mutable_conf() = train_job.conf();
  std::map<std::string, std::string> renamed;  // dropout y lbn -> identity out lbn
  std::set<std::string> dropped;               // dropout mask lbns
  int64_t total_iters = 0;
  for (const OpConf& original : train_job.op()) {
    if (original.is_backward() || original.is_optimizer()) continue;
    OpConf op = original;
    op.clear_control_input();  // control edges only order reads before updates
    if (op.op_type() == "dropout") {
      renamed[OutputLbn(op.name(), "y")] = OutputLbn(op.name(), "out");
      dropped.insert(OutputLbn(op.name(), "mask"));
      op = DropoutToIdentity(original);
      op.clear_control_input();
    }
    for (ArgProto& arg : *op.mutable_input()) {
      for (int i = 0; i < arg.lbn_size(); ++i) {
        if (dropped.count(arg.lbn(i))) {
          return FailedPreconditionError("MakeEvalJob: op '", op.name(),
                                         "' reads the dropout mask '", arg.lbn(i), "'");
        }
        auto it = renamed.find(arg.lbn(i));
        if (it != renamed.end()) arg.set_lbn(i, it->second);
      }
    }
    if (op.op_type() == "batch_norm") SetBoolAttr(&op, "training", false);
    if (op.op_type() == "fashion_mnist") {
      SetStringAttr(&op, "split", options.split);
      SetBoolAttr(&op, "shuffle", false);
      if (options.batch_size > 0) SetIntAttr(&op, "batch_size", options.batch_size);
      ASSIGN_OR_RETURN(int64_t batch, AttrView(op).GetInt("batch_size"));
      if (batch <= 0) return InvalidArgumentError("op '", op.name(), "': batch_size ", batch);
      int64_t size =
          options.split == "train" ? kFashionMnistTrainExamples : kFashionMnistTestExamples;
      if (total_iters == 0) total_iters = size / batch;
      job.mutable_conf()->set_batch_size(batch);
    }
    if (op.op_type() == "npy_dataset" || op.op_type() == "token_window") {
      // Recorded by NpyData (data_sources.h) from the .npy headers (0: no
      // test split); by TokenWindows as eval_batches * batch windows.
      const int64_t size = AttrView(op).GetIntOr(options.split == "train" ? "count" : "test_count",
                                                 0);
      SetStringAttr(&op, "split", options.split);
      if (op.op_type() == "npy_dataset") SetBoolAttr(&op, "shuffle", false);
      if (options.batch_size > 0) SetIntAttr(&op, "batch_size", options.batch_size);
      ASSIGN_OR_RETURN(int64_t batch, AttrView(op).GetInt("batch_size"));
      if (batch <= 0) return InvalidArgumentError("op '", op.name(), "': batch_size ", batch);
      if (total_iters == 0) total_iters = size / batch;
      job.mutable_conf()->set_batch_size(batch);
    }
    *job.add_op() = std::move(op);
  }
  JobConf* conf = job.mutable_conf();
  conf->set_name(conf->name() + "-eval");
  conf->set_is_train(false);
  conf->set_total_iters(total_iters);
  TrainConf* train = conf->mutable_train();
  train->clear_loss_lbn();
  train->clear_optimizer();
  std::vector<ArgProto*> named;  // metrics and outputs: rewired like consumers
  for (ArgProto& metric : *train->mutable_metric()) named.push_back(&metric);
  for (ArgProto& output : *train->mutable_output()) named.push_back(&output);
  for (ArgProto* metric_pointer : named) {
    ArgProto& metric = *metric_pointer;
    for (int i = 0; i < metric.lbn_size(); ++i) {
      auto it = renamed.find(metric.lbn(i));
      if (it != renamed.end()) metric.set_lbn(i, it->second);
    }
  }
  RETURN_IF_ERROR(ReinferBlobDescs(&job).WithContext("MakeEvalJob"));
  return job;
}

}  // namespace oflite
