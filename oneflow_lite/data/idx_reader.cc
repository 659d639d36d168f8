#include "oneflow_lite/data/idx_reader.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <memory>

namespace oflite {
namespace {

constexpr int64_t kMaxIdxBytes = int64_t{1} << 30;
constexpr uint8_t kUnsignedByteType = 0x08;
constexpr int kMaxDims = 4;

struct GzCloser {
  void operator()(gzFile_s* file) const { gzclose(file); }
};

uint32_t ReadBigEndian32(const std::string& bytes, size_t offset) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data() + offset);
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

}  // namespace

StatusOr<std::string> ReadMaybeGzipFile(const std::string& path, int64_t max_bytes) {
  errno = 0;
  std::unique_ptr<gzFile_s, GzCloser> file(gzopen(path.c_str(), "rb"));
  if (file == nullptr) {
    const int error = errno;
    const std::string reason = error != 0 ? std::strerror(error) : "zlib could not allocate";
    if (error == ENOENT || error == ENOTDIR)
      return NotFoundError("cannot open '", path, "': ", reason);
    return UnavailableError("cannot open '", path, "': ", reason);
  }
  std::string contents;
  char buffer[1 << 16];
  while (true) {
    const int read = gzread(file.get(), buffer, sizeof(buffer));
    if (read < 0) {
      int code = Z_OK;
      const char* message = gzerror(file.get(), &code);
      return DataLossError("'", path, "' is not a valid gzip/idx stream: ", message);
    }
    if (read == 0) break;
    contents.append(buffer, read);
    if (static_cast<int64_t>(contents.size()) > max_bytes) {
      return ResourceExhaustedError("'", path, "' decompresses to more than ", max_bytes, " bytes");
    }
  }
  int code = Z_OK;
  const char* message = gzerror(file.get(), &code);
  if (code != Z_OK && code != Z_STREAM_END) {
    return DataLossError("'", path, "' is corrupt or truncated: ", message);
  }
  return contents;
}

StatusOr<IdxArray> ParseIdx(const std::string& bytes, const std::string& name) {
  if (bytes.size() < 4) {
    return InvalidArgumentError("'", name, "' is not an idx file: ", bytes.size(),
                                " bytes, shorter than the 4-byte magic");
  }
  const auto* header = reinterpret_cast<const unsigned char*>(bytes.data());
  if (header[0] != 0 || header[1] != 0) {
    return InvalidArgumentError("'", name, "' is not an idx file: bad magic number 0x", std::hex,
                                ReadBigEndian32(bytes, 0));
  }
  if (header[2] != kUnsignedByteType) {
    return UnimplementedError("'", name, "': idx element type 0x", std::hex, int{header[2]},
                              " is not supported (only unsigned byte, 0x08)");
  }
  const int num_dims = header[3];
  if (num_dims < 1 || num_dims > kMaxDims) {
    return InvalidArgumentError("'", name, "': idx header declares ", num_dims,
                                " dimensions (expected 1 to ", kMaxDims, ")");
  }
  const size_t data_offset = 4 + 4 * static_cast<size_t>(num_dims);
  if (bytes.size() < data_offset) {
    return DataLossError("'", name, "' is truncated inside its header (", bytes.size(),
                         " bytes, header needs ", data_offset, ")");
  }
  IdxArray array;
  int64_t count = 1;
  for (int d = 0; d < num_dims; ++d) {
    const int64_t dim = ReadBigEndian32(bytes, 4 + 4 * d);
    if (dim == 0) return InvalidArgumentError("'", name, "': dimension ", d, " is 0");
    array.dims.push_back(dim);
    count *= dim;
    if (count > kMaxIdxBytes) {
      return InvalidArgumentError("'", name, "': declared size exceeds ", kMaxIdxBytes, " bytes");
    }
  }
  const int64_t available = static_cast<int64_t>(bytes.size() - data_offset);
  if (available != count) {
    return DataLossError("'", name, "': header declares ", count, " bytes of data, file has ",
                         available, available < count ? " (truncated)" : " (trailing bytes)");
  }
  array.data.assign(bytes.begin() + data_offset, bytes.end());
  return array;
}

StatusOr<IdxArray> ReadIdxFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string bytes, ReadMaybeGzipFile(path, kMaxIdxBytes + 64));
  return ParseIdx(bytes, path);
}

}  // namespace oflite
