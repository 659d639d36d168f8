#include "oneflow_lite/common/attr.h"

#include <algorithm>

namespace oflite {

const AttrValue* AttrView::Find(const std::string& key) const {
  for (const AttrEntry& e : op_->attr()) {
    if (e.key() == key) return &e.value();
  }
  return nullptr;
}

Status AttrView::Missing(const std::string& key, const char* type) const {
  return InvalidArgumentError("op '", op_->name(), "' (", op_->op_type(), "): attribute '", key,
                              "' of type ", type, " is missing or has another type");
}

#define OFLITE_ATTR_GETTER(Method, Ret, Case, Expr, TypeName)      \
  StatusOr<Ret> AttrView::Method(const std::string& key) const {   \
    const AttrValue* v = Find(key);                                \
    if (v == nullptr || v->value_case() != AttrValue::Case) {      \
      return Missing(key, TypeName);                               \
    }                                                              \
    return Expr;                                                   \
  }
OFLITE_ATTR_GETTER(GetInt, int64_t, kI, v->i(), "int")
OFLITE_ATTR_GETTER(GetFloat, double, kF, v->f(), "float")
OFLITE_ATTR_GETTER(GetBool, bool, kB, v->b(), "bool")
OFLITE_ATTR_GETTER(GetString, std::string, kS, v->s(), "string")
OFLITE_ATTR_GETTER(GetInts, std::vector<int64_t>, kInts,
                   std::vector<int64_t>(v->ints().value().begin(), v->ints().value().end()),
                   "int list")
OFLITE_ATTR_GETTER(GetFloats, std::vector<double>, kFloats,
                   std::vector<double>(v->floats().value().begin(), v->floats().value().end()),
                   "float list")
OFLITE_ATTR_GETTER(GetShape, Shape, kShape, Shape(v->shape()), "shape")
OFLITE_ATTR_GETTER(GetDataType, DataType, kDtype, v->dtype(), "dtype")
#undef OFLITE_ATTR_GETTER

int64_t AttrView::GetIntOr(const std::string& key, int64_t def) const {
  auto v = GetInt(key);
  return v.ok() ? *v : def;
}
double AttrView::GetFloatOr(const std::string& key, double def) const {
  auto v = GetFloat(key);
  return v.ok() ? *v : def;
}
bool AttrView::GetBoolOr(const std::string& key, bool def) const {
  auto v = GetBool(key);
  return v.ok() ? *v : def;
}
std::string AttrView::GetStringOr(const std::string& key, const std::string& def) const {
  auto v = GetString(key);
  return v.ok() ? *v : def;
}
std::vector<int64_t> AttrView::GetIntsOr(const std::string& key,
                                         std::vector<int64_t> def) const {
  auto v = GetInts(key);
  return v.ok() ? *v : def;
}

void SetAttr(OpConf* op, const std::string& key, const AttrValue& value) {
  auto* attrs = op->mutable_attr();
  for (AttrEntry& e : *attrs) {
    if (e.key() == key) {
      *e.mutable_value() = value;
      return;
    }
  }
  AttrEntry* e = attrs->Add();
  e->set_key(key);
  *e->mutable_value() = value;
  std::sort(attrs->begin(), attrs->end(),
            [](const AttrEntry& a, const AttrEntry& b) { return a.key() < b.key(); });
}

void SetIntAttr(OpConf* op, const std::string& key, int64_t v) {
  AttrValue a;
  a.set_i(v);
  SetAttr(op, key, a);
}
void SetFloatAttr(OpConf* op, const std::string& key, double v) {
  AttrValue a;
  a.set_f(v);
  SetAttr(op, key, a);
}
void SetBoolAttr(OpConf* op, const std::string& key, bool v) {
  AttrValue a;
  a.set_b(v);
  SetAttr(op, key, a);
}
void SetStringAttr(OpConf* op, const std::string& key, const std::string& v) {
  AttrValue a;
  a.set_s(v);
  SetAttr(op, key, a);
}
void SetIntsAttr(OpConf* op, const std::string& key, const std::vector<int64_t>& v) {
  AttrValue a;
  a.mutable_ints();  // an empty list is still a list
  for (int64_t x : v) a.mutable_ints()->add_value(x);
  SetAttr(op, key, a);
}
void SetFloatsAttr(OpConf* op, const std::string& key, const std::vector<double>& v) {
  AttrValue a;
  a.mutable_floats();
  for (double x : v) a.mutable_floats()->add_value(x);
  SetAttr(op, key, a);
}
void SetShapeAttr(OpConf* op, const std::string& key, const Shape& v) {
  AttrValue a;
  v.ToProto(a.mutable_shape());
  SetAttr(op, key, a);
}
void SetDataTypeAttr(OpConf* op, const std::string& key, DataType v) {
  AttrValue a;
  a.set_dtype(v);
  SetAttr(op, key, a);
}

}  // namespace oflite
