// Typed access to an op's attributes (OpConf.attr, a list sorted by key).
//
// AttrView reads; it holds a pointer to the OpConf, which must outlive it.
// Getters return an InvalidArgument error naming the op and the key when an
// attribute is missing or has another type; the *Or variants return the
// default when it is missing or has another type (op inference validates the
// types of optional attributes up front, so kernels may rely on *Or).
// SetAttr keeps the list sorted so serialization stays deterministic.
#ifndef ONEFLOW_LITE_COMMON_ATTR_H_
#define ONEFLOW_LITE_COMMON_ATTR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "oneflow_lite/common/shape.h"
#include "oneflow_lite/common/status.h"
#include "proto/job.pb.h"

namespace oflite {

class AttrView {
 public:
  explicit AttrView(const OpConf& op) : op_(&op) {}

  bool Has(const std::string& key) const { return Find(key) != nullptr; }

  StatusOr<int64_t> GetInt(const std::string& key) const;
  StatusOr<double> GetFloat(const std::string& key) const;
  StatusOr<bool> GetBool(const std::string& key) const;
  StatusOr<std::string> GetString(const std::string& key) const;
  StatusOr<std::vector<int64_t>> GetInts(const std::string& key) const;
  StatusOr<std::vector<double>> GetFloats(const std::string& key) const;
  StatusOr<Shape> GetShape(const std::string& key) const;
  StatusOr<DataType> GetDataType(const std::string& key) const;

  int64_t GetIntOr(const std::string& key, int64_t def) const;
  double GetFloatOr(const std::string& key, double def) const;
  bool GetBoolOr(const std::string& key, bool def) const;
  std::string GetStringOr(const std::string& key, const std::string& def) const;
  std::vector<int64_t> GetIntsOr(const std::string& key, std::vector<int64_t> def) const;

 private:
  const AttrValue* Find(const std::string& key) const;
  Status Missing(const std::string& key, const char* type) const;

  const OpConf* op_;
};

// Sets (or replaces) an attribute, keeping OpConf.attr sorted by key.
void SetAttr(OpConf* op, const std::string& key, const AttrValue& value);
void SetIntAttr(OpConf* op, const std::string& key, int64_t v);
void SetFloatAttr(OpConf* op, const std::string& key, double v);
void SetBoolAttr(OpConf* op, const std::string& key, bool v);
void SetStringAttr(OpConf* op, const std::string& key, const std::string& v);
void SetIntsAttr(OpConf* op, const std::string& key, const std::vector<int64_t>& v);
void SetFloatsAttr(OpConf* op, const std::string& key, const std::vector<double>& v);
void SetShapeAttr(OpConf* op, const std::string& key, const Shape& v);
void SetDataTypeAttr(OpConf* op, const std::string& key, DataType v);

}  // namespace oflite

#endif  // ONEFLOW_LITE_COMMON_ATTR_H_
