#include "oneflow_lite/ops/op_builder.h"

namespace oflite {

std::string OutputLbn(const std::string& op_name, const std::string& arg, int index) {
  return op_name + "/" + arg + "_" + std::to_string(index);
}

bool SplitLbn(const std::string& lbn, std::string* op_name, std::string* arg_and_index) {
  size_t slash = lbn.rfind('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == lbn.size()) return false;
  *op_name = lbn.substr(0, slash);
  *arg_and_index = lbn.substr(slash + 1);
  return true;
}

OpConfBuilder::OpConfBuilder(const std::string& op_type, const std::string& name) {
  op_.set_op_type(op_type);
  op_.set_name(name);
}

OpConfBuilder& OpConfBuilder::Input(const std::string& arg, const std::string& lbn) {
  return Input(arg, std::vector<std::string>{lbn});
}

OpConfBuilder& OpConfBuilder::Input(const std::string& arg, const std::vector<std::string>& lbns) {
  ArgProto* a = op_.add_input();
  a->set_name(arg);
  for (const auto& l : lbns) a->add_lbn(l);
  return *this;
}

OpConfBuilder& OpConfBuilder::Output(const std::string& arg, int count) {
  ArgProto* a = op_.add_output();
  a->set_name(arg);
  for (int i = 0; i < count; ++i) a->add_lbn(OutputLbn(op_.name(), arg, i));
  return *this;
}

OpConfBuilder& OpConfBuilder::Attr(const std::string& key, int64_t v) {
  SetIntAttr(&op_, key, v);
  return *this;
}
OpConfBuilder& OpConfBuilder::Attr(const std::string& key, double v) {
  SetFloatAttr(&op_, key, v);
  return *this;
}
OpConfBuilder& OpConfBuilder::Attr(const std::string& key, bool v) {
  SetBoolAttr(&op_, key, v);
  return *this;
}
OpConfBuilder& OpConfBuilder::Attr(const std::string& key, const std::string& v) {
  SetStringAttr(&op_, key, v);
  return *this;
}
OpConfBuilder& OpConfBuilder::Attr(const std::string& key, const std::vector<int64_t>& v) {
  SetIntsAttr(&op_, key, v);
  return *this;
}
OpConfBuilder& OpConfBuilder::Attr(const std::string& key, const std::vector<double>& v) {
  SetFloatsAttr(&op_, key, v);
  return *this;
}
OpConfBuilder& OpConfBuilder::Attr(const std::string& key, const Shape& v) {
  SetShapeAttr(&op_, key, v);
  return *this;
}
OpConfBuilder& OpConfBuilder::Attr(const std::string& key, DataType v) {
  SetDataTypeAttr(&op_, key, v);
  return *this;
}

std::string MakeUniqueName(const std::string& base, std::set<std::string>* used) {
  std::string name = base;
  for (int k = 1; used->count(name); ++k) name = base + "_" + std::to_string(k);
  used->insert(name);
  return name;
}

}  // namespace oflite
