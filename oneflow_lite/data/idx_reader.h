// Reader for the idx format of (Fashion-)MNIST, optionally gzip-compressed.
//
// An idx file is a big-endian header followed by the raw elements:
//   bytes 0-1  zero
//   byte  2    element type (0x08 = unsigned byte; the only type supported)
//   byte  3    number of dimensions (1-4)
//   then one uint32 per dimension (big-endian), then the elements in
//   row-major order.
// The reader checks the magic, the dimension count, each dimension (> 0),
// and that the data is exactly prod(dims) bytes (a truncated file or trailing
// garbage is an error). Every error is a Status naming the file's path:
//   NotFound (missing file), Unavailable (unreadable, e.g. permissions),
//   DataLoss (corrupt gzip, truncated data),
//   InvalidArgument (bad magic or header), Unimplemented (other types).
// Whether the file is gzip'd is detected from its content (zlib's gzread
// reads plain files too). Decompressed files above 1 GiB are rejected.
//
// Functions are thread-safe (no shared state); results are owned by the
// caller.
#ifndef ONEFLOW_LITE_DATA_IDX_READER_H_
#define ONEFLOW_LITE_DATA_IDX_READER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "oneflow_lite/common/status.h"

namespace oflite {

struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;  // prod(dims) unsigned bytes, row-major
};

// Reads and validates one (gzip'd or plain) idx file.
StatusOr<IdxArray> ReadIdxFile(const std::string& path);

// Parses the decompressed bytes of an idx file; `name` (a path) is used in
// error messages.
StatusOr<IdxArray> ParseIdx(const std::string& bytes, const std::string& name);

// Reads a whole file through zlib (gzip or plain) into memory. NotFound if it
// cannot be opened, DataLoss on a corrupt or truncated gzip stream,
// ResourceExhausted above `max_bytes`.
StatusOr<std::string> ReadMaybeGzipFile(const std::string& path, int64_t max_bytes);

}  // namespace oflite

#endif  // ONEFLOW_LITE_DATA_IDX_READER_H_
