// NumPy .npy files: the array format `numpy.save` writes and `numpy.load`
// (and `torch.from_numpy(numpy.load(...))`) reads
// (https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html).
//
// A file is the magic "\x93NUMPY", a version byte pair (1.0, 2.0 or 3.0),
// the header length (2 bytes little-endian for 1.0, 4 bytes after), a
// Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape':
// (N, 784), } padded with spaces and '\n' so the data starts at a multiple
// of 64 bytes, then the elements in C order.
//
// WriteNpy writes version 1.0 (2.0 when the header needs more than 65535
// bytes). ReadNpy accepts versions 1-3, little-endian or byte-sized
// descrs of the dtypes the framework has ('<f4' float32, '<f8' float64,
// '<i4' int32, '<i8' int64, '|i1' int8, '|u1' uint8, '|b1' bool), C order
// only, and data of exactly the declared size. Every error names the file:
// a wrong magic, an unsupported dtype ("... dtype '>f4' is not supported
// (float32 '<f4', ...)"), Fortran order, a malformed header, a truncated
// file ("holds 100 of the 3136 data bytes its header (4, 784) uint8
// declares"), trailing bytes. Thread-safe free functions.
//
// uint16 ('<u2', numpy.uint16: the token ids of a tokenized text) has no
// DataType, so ReadNpy refuses it; WriteNpyUint16 / ReadNpyUint16 write and
// read it, and ReadNpyElementType names any supported element type.
#ifndef ONEFLOW_LITE_DATA_NPY_H_
#define ONEFLOW_LITE_DATA_NPY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "oneflow_lite/common/status.h"
#include "proto/common.pb.h"

namespace oflite {

struct NpyArray {
  DataType dtype = DT_INVALID;
  std::vector<int64_t> shape;  // empty: a scalar
  std::vector<char> data;      // elements in C order, little-endian

  int64_t elem_count() const;
  template <typename T>
  const T* values() const {
    return reinterpret_cast<const T*>(data.data());
  }
};

// The header's dict text for `dtype` and `shape` (e.g. "{'descr': '<f4',
// 'fortran_order': False, 'shape': (3, 2), }"); InvalidArgument for a
// dtype .npy cannot name.
StatusOr<std::string> NpyHeaderDict(DataType dtype, const std::vector<int64_t>& shape);

// Writes `data` (elem_count(shape) elements of `dtype`, C order) to `path`.
Status WriteNpy(const std::string& path, DataType dtype, const std::vector<int64_t>& shape,
                const void* data);

// Reads `path` (see above for what is accepted).
StatusOr<NpyArray> ReadNpy(const std::string& path);

// The dtype and shape of `path` (data left empty) from its header alone,
// with the file's size checked against them: the same errors as ReadNpy
// without reading the data.
StatusOr<NpyArray> ReadNpyHeader(const std::string& path);

// 16-bit unsigned integers: numpy.load gives a uint16 array.
struct NpyUint16Array {
  std::vector<int64_t> shape;
  std::vector<uint16_t> values;  // C order, host byte order
};
Status WriteNpyUint16(const std::string& path, const std::vector<int64_t>& shape,
                      const uint16_t* data);
// Errors as ReadNpy, and InvalidArgument naming the file when it holds
// another element type.
StatusOr<NpyUint16Array> ReadNpyUint16(const std::string& path);

// The element type of `path` by name ("uint16", "int32", "float32", ...)
// and, when `shape` is not null, its shape, from the header alone; the
// file's size is checked against the header as by ReadNpyHeader.
StatusOr<std::string> ReadNpyElementType(const std::string& path,
                                         std::vector<int64_t>* shape = nullptr);

// Parses the bytes of a whole .npy file; `source` names it in errors.
StatusOr<NpyArray> ParseNpy(const std::string& bytes, const std::string& source);

}  // namespace oflite

#endif  // ONEFLOW_LITE_DATA_NPY_H_
