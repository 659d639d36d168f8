#include "oneflow_lite/data/npy.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "oneflow_lite/common/data_type.h"

namespace oflite {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
constexpr size_t kAlignment = 64;

struct Descr {
  const char* text;
  DataType dtype;
};
constexpr Descr kDescrs[] = {{"<f4", DT_FLOAT}, {"<f8", DT_DOUBLE}, {"<i4", DT_INT32},
                             {"<i8", DT_INT64}, {"|i1", DT_INT8},   {"|u1", DT_UINT8},
                             {"|b1", DT_BOOL}};

std::string KnownDescrs() {
  std::string list;
  for (const Descr& d : kDescrs) {
    if (!list.empty()) list += ", ";
    list += std::string(DataTypeName(d.dtype)) + " '" + d.text + "'";
  }
  return list;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(shape[i]);
  }
  if (shape.size() == 1) text += ",";
  return text + ")";
}

// The text after `'key':` in the header dict, trimmed of leading spaces;
// NotFound-style DataLoss when absent.
StatusOr<std::string> ValueAfter(const std::string& dict, const std::string& key,
                                 const std::string& source) {
  const std::string quoted = "'" + key + "'";
  size_t at = dict.find(quoted);
  if (at == std::string::npos) at = dict.find("\"" + key + "\"");
  if (at == std::string::npos) {
    return DataLossError(source, ": the .npy header has no '", key, "': ", dict);
  }
  at = dict.find(':', at + quoted.size());
  if (at == std::string::npos) return DataLossError(source, ": malformed .npy header: ", dict);
  ++at;
  while (at < dict.size() && dict[at] == ' ') ++at;
  return dict.substr(at);
}

StatusOr<DataType> ParseDescr(const std::string& dict, const std::string& source) {
  ASSIGN_OR_RETURN(std::string value, ValueAfter(dict, "descr", source));
  if (value.empty() || (value[0] != '\'' && value[0] != '"')) {
    return DataLossError(source, ": the .npy header's descr is not a string: ", dict);
  }
  const size_t end = value.find(value[0], 1);
  if (end == std::string::npos) return DataLossError(source, ": malformed .npy descr: ", dict);
  std::string descr = value.substr(1, end - 1);
  // Byte-sized types may be written '<u1' or '=u1' too; '=' is native
  // (little-endian on every machine we run on).
  if (descr.size() == 3 && descr[0] == '=') descr[0] = '<';
  for (const Descr& d : kDescrs) {
    if (descr == d.text) return d.dtype;
    if (descr.size() == 3 && descr[0] == '<' && d.text[0] == '|' && descr.substr(1) == d.text + 1) {
      return d.dtype;
    }
  }
  return InvalidArgumentError(source, ": .npy dtype '", descr, "' is not supported (",
                              KnownDescrs(), "; save with arr.astype(...) first)");
}

StatusOr<std::vector<int64_t>> ParseShape(const std::string& dict, const std::string& source) {
  ASSIGN_OR_RETURN(std::string value, ValueAfter(dict, "shape", source));
  const size_t close = value.find(')');
  if (value.empty() || value[0] != '(' || close == std::string::npos) {
    return DataLossError(source, ": the .npy header's shape is not a tuple: ", dict);
  }
  std::vector<int64_t> shape;
  std::stringstream items(value.substr(1, close - 1));
  std::string item;
  while (std::getline(items, item, ',')) {
    const size_t first = item.find_first_not_of(' ');
    if (first == std::string::npos) continue;  // "(3,)"
    char* end = nullptr;
    const long long dim = std::strtoll(item.c_str() + first, &end, 10);
    while (end != nullptr && *end == ' ') ++end;
    if (end == item.c_str() + first || *end != '\0' || dim < 0) {
      return DataLossError(source, ": the .npy shape has a bad dimension '", item, "': ", dict);
    }
    shape.push_back(dim);
  }
  return shape;
}

int64_t ElemCount(const std::vector<int64_t>& shape) {
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  return count;
}

// The data after the header must be exactly what the header declares.
Status CheckDataSize(const NpyArray& array, size_t have, const std::string& source) {
  const size_t want = static_cast<size_t>(ElemCount(array.shape) * SizeOf(array.dtype));
  if (have < want) {
    return DataLossError(source, ": truncated: holds ", have, " of the ", want,
                         " data bytes its header ", ShapeText(array.shape), " ",
                         DataTypeName(array.dtype), " declares");
  }
  if (have > want) {
    return DataLossError(source, ": ", have - want, " bytes after the data its header ",
                         ShapeText(array.shape), " ", DataTypeName(array.dtype), " declares");
  }
  return Status::OK();
}

}  // namespace

int64_t NpyArray::elem_count() const { return ElemCount(shape); }

StatusOr<std::string> NpyHeaderDict(DataType dtype, const std::vector<int64_t>& shape) {
  for (const Descr& d : kDescrs) {
    if (d.dtype == dtype) {
      return "{'descr': '" + std::string(d.text) +
             "', 'fortran_order': False, 'shape': " + ShapeText(shape) + ", }";
    }
  }
  return InvalidArgumentError(".npy cannot hold dtype ", DataTypeName(dtype));
}

Status WriteNpy(const std::string& path, DataType dtype, const std::vector<int64_t>& shape,
                const void* data) {
  ASSIGN_OR_RETURN(std::string dict, NpyHeaderDict(dtype, shape));
  // magic + version + length field + dict + padding + '\n', a multiple of 64.
  const bool wide = kMagicSize + 2 + 2 + dict.size() + 1 > 65535;
  const size_t prefix = kMagicSize + 2 + (wide ? 4 : 2);
  const size_t total = (prefix + dict.size() + 1 + kAlignment - 1) / kAlignment * kAlignment;
  dict.append(total - prefix - dict.size() - 1, ' ');
  dict += '\n';
  std::string header(kMagic, kMagicSize);
  header += static_cast<char>(wide ? 2 : 1);
  header += '\0';
  const uint32_t length = static_cast<uint32_t>(dict.size());
  for (int i = 0; i < (wide ? 4 : 2); ++i) header += static_cast<char>((length >> (8 * i)) & 0xff);
  header += dict;
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) {
    return InvalidArgumentError("cannot write '", path, "': ", std::strerror(errno));
  }
  const size_t bytes = static_cast<size_t>(ElemCount(shape) * SizeOf(dtype));
  bool written = std::fwrite(header.data(), 1, header.size(), file) == header.size();
  if (written && bytes > 0) written = std::fwrite(data, 1, bytes, file) == bytes;
  if (std::fclose(file) != 0 || !written) return DataLossError("writing '", path, "' failed");
  return Status::OK();
}

namespace {

// The header of `bytes` (at least the whole header): dtype and shape in
// `array`, the offset of the data in `data_begin`.
Status ParseHeader(const std::string& bytes, const std::string& source, NpyArray* array,
                   size_t* data_begin);

}  // namespace

StatusOr<NpyArray> ParseNpy(const std::string& bytes, const std::string& source) {
  NpyArray array;
  size_t data_begin = 0;
  RETURN_IF_ERROR(ParseHeader(bytes, source, &array, &data_begin));
  RETURN_IF_ERROR(CheckDataSize(array, bytes.size() - data_begin, source));
  array.data.assign(bytes.begin() + data_begin, bytes.end());
  return array;
}

StatusOr<NpyArray> ReadNpyHeader(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("cannot open .npy file '", path, "'");
  std::string prefix(kMagicSize + 2 + 4, '\0');
  in.read(&prefix[0], prefix.size());
  prefix.resize(static_cast<size_t>(in.gcount()));
  const std::string source = "'" + path + "'";
  size_t length = 0;
  if (prefix.size() >= kMagicSize + 4) {
    const size_t field = static_cast<unsigned char>(prefix[kMagicSize]) == 1 ? 2 : 4;
    for (size_t i = 0; i < field && kMagicSize + 2 + i < prefix.size(); ++i) {
      length |= static_cast<size_t>(static_cast<unsigned char>(prefix[kMagicSize + 2 + i]))
                << (8 * i);
    }
  }
  std::string header(std::min<size_t>(length, 1 << 20), '\0');
  in.read(&header[0], header.size());
  header.resize(static_cast<size_t>(in.gcount()));
  NpyArray array;
  size_t data_begin = 0;
  RETURN_IF_ERROR(ParseHeader(prefix + header, source, &array, &data_begin));
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  RETURN_IF_ERROR(CheckDataSize(array, static_cast<size_t>(size) - data_begin, source));
  return array;
}

namespace {

Status ParseHeader(const std::string& bytes, const std::string& source, NpyArray* array,
                   size_t* data_begin_out) {
  if (bytes.size() < kMagicSize + 4 || bytes.compare(0, kMagicSize, kMagic, kMagicSize) != 0) {
    return InvalidArgumentError(source, ": not a .npy file (no \\x93NUMPY magic)");
  }
  const int major = static_cast<unsigned char>(bytes[kMagicSize]);
  if (major < 1 || major > 3) {
    return InvalidArgumentError(source, ": .npy format version ", major, " is not supported (1-3)");
  }
  const size_t field = major == 1 ? 2 : 4;
  if (bytes.size() < kMagicSize + 2 + field) {
    return DataLossError(source, ": truncated .npy header");
  }
  size_t length = 0;
  for (size_t i = 0; i < field; ++i) {
    length |= static_cast<size_t>(static_cast<unsigned char>(bytes[kMagicSize + 2 + i])) << (8 * i);
  }
  const size_t data_begin = kMagicSize + 2 + field + length;
  if (bytes.size() < data_begin) {
    return DataLossError(source, ": truncated .npy header (", length, " bytes declared, ",
                         bytes.size() - kMagicSize - 2 - field, " present)");
  }
  const std::string dict = bytes.substr(kMagicSize + 2 + field, length);
  ASSIGN_OR_RETURN(array->dtype, ParseDescr(dict, source));
  ASSIGN_OR_RETURN(std::string order, ValueAfter(dict, "fortran_order", source));
  if (order.compare(0, 4, "True") == 0) {
    return InvalidArgumentError(source,
                                ": Fortran-order .npy arrays are not supported (save "
                                "numpy.ascontiguousarray(a))");
  }
  ASSIGN_OR_RETURN(array->shape, ParseShape(dict, source));
  *data_begin_out = data_begin;
  return Status::OK();
}

}  // namespace

StatusOr<NpyArray> ReadNpy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("cannot open .npy file '", path, "'");
  std::ostringstream content;
  content << in.rdbuf();
  return ParseNpy(content.str(), "'" + path + "'");
}

}  // namespace oflite
