// The one little-endian codec of OneFlow-Lite: explicit little-endian
// integers stored into / loaded from byte arrays, appended to strings, and a
// bounds-checked Reader. Every byte format (CommNet frames and control
// messages, actor messages, CommNet register payloads, checkpoint headers)
// encodes integers with these functions, never with memcpy of structs, so the
// formats do not depend on the host's byte order or padding.
//
// Reader: a read past the end (or a length prefix above its bound) sets a
// sticky failure and yields zeros/empty, so a decoder reads every field and
// checks ok() or status(what) once at the end; status names the byte offset
// where the first failed read started.
//
// Header-only value types and free functions; thread-compatible (a Reader
// belongs to one thread; it does not own the bytes it reads, which must
// outlive it).
#ifndef ONEFLOW_LITE_COMMON_LITTLE_ENDIAN_H_
#define ONEFLOW_LITE_COMMON_LITTLE_ENDIAN_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "oneflow_lite/common/status.h"

namespace oflite {
namespace little_endian {

inline void StoreU16(uint8_t* out, uint16_t value) {
  out[0] = static_cast<uint8_t>(value);
  out[1] = static_cast<uint8_t>(value >> 8);
}
inline void StoreU32(uint8_t* out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<uint8_t>(value >> (8 * i));
}
inline void StoreU64(uint8_t* out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(value >> (8 * i));
}
inline uint16_t LoadU16(const uint8_t* in) {
  return static_cast<uint16_t>(in[0] | (in[1] << 8));
}
inline uint32_t LoadU32(const uint8_t* in) {
  uint32_t value = 0;
  for (int i = 3; i >= 0; --i) value = (value << 8) | in[i];
  return value;
}
inline uint64_t LoadU64(const uint8_t* in) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | in[i];
  return value;
}

inline void AppendU8(std::string* out, uint8_t value) {
  out->push_back(static_cast<char>(value));
}
inline void AppendU16(std::string* out, uint16_t value) {
  uint8_t bytes[2];
  StoreU16(bytes, value);
  out->append(reinterpret_cast<char*>(bytes), 2);
}
inline void AppendU32(std::string* out, uint32_t value) {
  uint8_t bytes[4];
  StoreU32(bytes, value);
  out->append(reinterpret_cast<char*>(bytes), 4);
}
inline void AppendU64(std::string* out, uint64_t value) {
  uint8_t bytes[8];
  StoreU64(bytes, value);
  out->append(reinterpret_cast<char*>(bytes), 8);
}
// A u32 length followed by the bytes.
inline void AppendBytes(std::string* out, const std::string& bytes) {
  AppendU32(out, static_cast<uint32_t>(bytes.size()));
  out->append(bytes);
}

class Reader {
 public:
  Reader(const void* data, size_t size)
      : data_(static_cast<const uint8_t*>(data)), size_(size) {}

  bool ok() const { return ok_; }
  size_t remaining() const { return size_ - position_; }
  size_t position() const { return position_; }
  // OK, or DataLoss "<what>: truncated ..." naming the byte where the first
  // failed read started and the input size.
  Status status(const std::string& what) const {
    if (ok_) return Status::OK();
    return DataLossError(what, ": truncated or oversized field at byte ", failed_at_, " of ",
                         size_);
  }

  void ReadU8(uint8_t* value) {
    *value = Take(1) ? data_[position_ - 1] : 0;
  }
  void ReadU16(uint16_t* value) {
    *value = Take(2) ? LoadU16(data_ + position_ - 2) : 0;
  }
  void ReadU32(uint32_t* value) {
    *value = Take(4) ? LoadU32(data_ + position_ - 4) : 0;
  }
  void ReadU64(uint64_t* value) {
    *value = Take(8) ? LoadU64(data_ + position_ - 8) : 0;
  }
  // Reads a u32 length then that many bytes; fails if the length exceeds
  // `max_size` or the remaining input.
  void ReadBytes(std::string* value, size_t max_size) {
    uint32_t length = 0;
    ReadU32(&length);
    value->clear();
    if (!ok_) return;
    if (length > max_size) {
      Fail(position_ - 4);
      return;
    }
    if (!Take(length)) return;
    value->assign(reinterpret_cast<const char*>(data_ + position_ - length),
                  length);
  }

 private:
  bool Take(size_t count) {
    if (!ok_) return false;
    if (count > size_ - position_) {
      Fail(position_);
      return false;
    }
    position_ += count;
    return true;
  }
  void Fail(size_t at) {
    ok_ = false;
    failed_at_ = at;
  }

  const uint8_t* data_;
  size_t size_;
  size_t position_ = 0;
  bool ok_ = true;
  size_t failed_at_ = 0;
};

}  // namespace little_endian
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMMON_LITTLE_ENDIAN_H_
