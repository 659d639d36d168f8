// OpConfBuilder: a fluent way to write an OpConf (used by the graph API,
// gradient rules and tests).
//
//   OpConf op = OpConfBuilder("relu_grad", "dense1-relu_grad")
//                   .Input("dy", dy_lbn).Input("y", y_lbn).Output("dx")
//                   .Attr("alpha", 0.1).Build();
//
// Output lbns are "<op name>/<arg>_<index>" (see OutputLbn).
#ifndef ONEFLOW_LITE_OPS_OP_BUILDER_H_
#define ONEFLOW_LITE_OPS_OP_BUILDER_H_

#include <set>
#include <string>
#include <vector>

#include "oneflow_lite/common/attr.h"
#include "proto/job.pb.h"

namespace oflite {

// "<op_name>/<arg>_<index>".
std::string OutputLbn(const std::string& op_name, const std::string& arg, int index = 0);
// Splits an lbn into op name and "<arg>_<index>"; false if malformed.
bool SplitLbn(const std::string& lbn, std::string* op_name, std::string* arg_and_index);

class OpConfBuilder {
 public:
  OpConfBuilder(const std::string& op_type, const std::string& name);

  OpConfBuilder& Input(const std::string& arg, const std::string& lbn);
  OpConfBuilder& Input(const std::string& arg, const std::vector<std::string>& lbns);
  // Declares `count` outputs named "<name>/<arg>_0..count-1".
  OpConfBuilder& Output(const std::string& arg, int count = 1);
  OpConfBuilder& Attr(const std::string& key, int64_t v);
  OpConfBuilder& Attr(const std::string& key, int v) { return Attr(key, int64_t{v}); }
  OpConfBuilder& Attr(const std::string& key, double v);
  OpConfBuilder& Attr(const std::string& key, bool v);
  OpConfBuilder& Attr(const std::string& key, const std::string& v);
  OpConfBuilder& Attr(const std::string& key, const char* v) { return Attr(key, std::string(v)); }
  OpConfBuilder& Attr(const std::string& key, const std::vector<int64_t>& v);
  OpConfBuilder& Attr(const std::string& key, const std::vector<double>& v);
  OpConfBuilder& Attr(const std::string& key, const Shape& v);
  OpConfBuilder& Attr(const std::string& key, DataType v);

  OpConf Build() const { return op_; }

 private:
  OpConf op_;
};

// Returns `base` if it is not in `used`, else the first "<base>_<k>" (k = 1,
// 2, ...) that is not; inserts the result into `used`.
std::string MakeUniqueName(const std::string& base, std::set<std::string>* used);

}  // namespace oflite

#endif  // ONEFLOW_LITE_OPS_OP_BUILDER_H_
