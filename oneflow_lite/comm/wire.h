// Byte-level codec for CommNet wire formats: explicit little-endian integers
// appended to / read from byte buffers, never memcpy of structs. Reader is
// bounds-checked: a read past the end sets a sticky failure and yields zeros,
// so decoders check ok() once at the end. Value types, thread-compatible.
#ifndef ONEFLOW_LITE_COMM_WIRE_H_
#define ONEFLOW_LITE_COMM_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace oflite {
namespace comm {
namespace wire {

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
    if (!ok_ || length > max_size || !Take(length)) {
      ok_ = false;
      return;
    }
    value->assign(reinterpret_cast<const char*>(data_ + position_ - length),
                  length);
  }

 private:
  bool Take(size_t count) {
    if (!ok_ || count > size_ - position_) {
      ok_ = false;
      return false;
    }
    position_ += count;
    return true;
  }

  const uint8_t* data_;
  size_t size_;
  size_t position_ = 0;
  bool ok_ = true;
};

}  // namespace wire
}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_WIRE_H_
