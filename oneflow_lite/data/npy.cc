#include "oneflow_lite/data/npy.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

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

// uint16 has no DataType; only the *Uint16 functions accept it.
constexpr char kUint16Descr[] = "<u2";

// The element type of a header: a DataType, or uint16 (dtype DT_INVALID).
struct Element {
  DataType dtype = DT_INVALID;
  bool uint16 = false;
  int64_t size() const { return uint16 ? 2 : SizeOf(dtype); }
  std::string name() const { return uint16 ? "uint16" : DataTypeName(dtype); }
};

StatusOr<Element> ParseDescr(const std::string& dict, const std::string& source,
                             bool allow_uint16) {
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
    if (descr == d.text) return Element{d.dtype, false};
    if (descr.size() == 3 && descr[0] == '<' && d.text[0] == '|' && descr.substr(1) == d.text + 1) {
      return Element{d.dtype, false};
    }
  }
  if (allow_uint16 && descr == kUint16Descr) return Element{DT_INVALID, true};
  return InvalidArgumentError(source, ": .npy dtype '", descr, "' is not supported (",
                              allow_uint16 ? "uint16 '<u2', " : "", KnownDescrs(),
                              "; save with arr.astype(...) first)");
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
Status CheckDataSize(const std::vector<int64_t>& shape, const Element& element, size_t have,
                     const std::string& source) {
  const size_t want = static_cast<size_t>(ElemCount(shape) * element.size());
  if (have < want) {
    return DataLossError(source, ": truncated: holds ", have, " of the ", want,
                         " data bytes its header ", ShapeText(shape), " ", element.name(),
                         " declares");
  }
  if (have > want) {
    return DataLossError(source, ": ", have - want, " bytes after the data its header ",
                         ShapeText(shape), " ", element.name(), " declares");
  }
  return Status::OK();
}

// The header at the start of `bytes` (at least the whole header): its element
// type, shape and the offset of the data.
Status ParseHeader(const std::string& bytes, const std::string& source, bool allow_uint16,
                   Element* element, std::vector<int64_t>* shape, size_t* data_begin_out) {
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
  ASSIGN_OR_RETURN(*element, ParseDescr(dict, source, allow_uint16));
  ASSIGN_OR_RETURN(std::string order, ValueAfter(dict, "fortran_order", source));
  if (order.compare(0, 4, "True") == 0) {
    return InvalidArgumentError(source,
                                ": Fortran-order .npy arrays are not supported (save "
                                "numpy.ascontiguousarray(a))");
  }
  ASSIGN_OR_RETURN(*shape, ParseShape(dict, source));
  *data_begin_out = data_begin;
  return Status::OK();
}

// The header of the file `in` (opened from `path`), the data size checked
// against the file's size.
Status ReadHeader(std::ifstream& in, const std::string& path, bool allow_uint16, Element* element,
                  std::vector<int64_t>* shape, size_t* data_begin_out) {
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
  size_t data_begin = 0;
  RETURN_IF_ERROR(ParseHeader(prefix + header, source, allow_uint16, element, shape, &data_begin));
  in.clear();
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  RETURN_IF_ERROR(CheckDataSize(*shape, *element, static_cast<size_t>(size) - data_begin, source));
  *data_begin_out = data_begin;
  return Status::OK();
}

// Writes the header for `dict` and then `bytes` bytes of `data`.
Status WriteNpyFile(const std::string& path, std::string dict, const void* data, size_t bytes) {
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
  bool written = std::fwrite(header.data(), 1, header.size(), file) == header.size();
  if (written && bytes > 0) written = std::fwrite(data, 1, bytes, file) == bytes;
  if (std::fclose(file) != 0 || !written) return DataLossError("writing '", path, "' failed");
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
  return WriteNpyFile(path, std::move(dict), data,
                      static_cast<size_t>(ElemCount(shape) * SizeOf(dtype)));
}

Status WriteNpyUint16(const std::string& path, const std::vector<int64_t>& shape,
                      const uint16_t* data) {
  std::string dict = "{'descr': '" + std::string(kUint16Descr) +
                     "', 'fortran_order': False, 'shape': " + ShapeText(shape) + ", }";
  return WriteNpyFile(path, std::move(dict), data, static_cast<size_t>(ElemCount(shape) * 2));
}

StatusOr<NpyArray> ParseNpy(const std::string& bytes, const std::string& source) {
  NpyArray array;
  Element element;
  size_t data_begin = 0;
  RETURN_IF_ERROR(ParseHeader(bytes, source, false, &element, &array.shape, &data_begin));
  array.dtype = element.dtype;
  RETURN_IF_ERROR(CheckDataSize(array.shape, element, bytes.size() - data_begin, source));
  array.data.assign(bytes.begin() + data_begin, bytes.end());
  return array;
}

StatusOr<NpyArray> ReadNpyHeader(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("cannot open .npy file '", path, "'");
  NpyArray array;
  Element element;
  size_t data_begin = 0;
  RETURN_IF_ERROR(ReadHeader(in, path, false, &element, &array.shape, &data_begin));
  array.dtype = element.dtype;
  return array;
}

StatusOr<std::string> ReadNpyElementType(const std::string& path, std::vector<int64_t>* shape) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("cannot open .npy file '", path, "'");
  std::vector<int64_t> dims;
  Element element;
  size_t data_begin = 0;
  RETURN_IF_ERROR(ReadHeader(in, path, true, &element, &dims, &data_begin));
  if (shape != nullptr) *shape = std::move(dims);
  return element.name();
}

StatusOr<NpyUint16Array> ReadNpyUint16(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("cannot open .npy file '", path, "'");
  NpyUint16Array array;
  Element element;
  size_t data_begin = 0;
  RETURN_IF_ERROR(ReadHeader(in, path, true, &element, &array.shape, &data_begin));
  if (!element.uint16) {
    return InvalidArgumentError("'", path, "': holds ", element.name(), ", not uint16 ('<u2')");
  }
  array.values.resize(static_cast<size_t>(ElemCount(array.shape)));
  in.clear();
  in.seekg(static_cast<std::streamoff>(data_begin));
  in.read(reinterpret_cast<char*>(array.values.data()),
          static_cast<std::streamsize>(array.values.size() * 2));
  if (static_cast<size_t>(in.gcount()) != array.values.size() * 2) {
    return DataLossError("'", path, "': reading its data failed");
  }
  for (uint16_t& value : array.values) {  // little-endian bytes to host order
    const auto* bytes = reinterpret_cast<const unsigned char*>(&value);
    value = static_cast<uint16_t>(bytes[0] | (bytes[1] << 8));
  }
  return array;
}

StatusOr<NpyArray> ReadNpy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("cannot open .npy file '", path, "'");
  std::ostringstream content;
  content << in.rdbuf();
  return ParseNpy(content.str(), "'" + path + "'");
}

}  // namespace oflite
