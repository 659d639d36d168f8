#include "oneflow_lite/common/partition.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace oflite {
namespace {

// Shared walk of CopyWholeToPart / CopyPartToWhole: calls copy(whole_offset,
// part_offset, bytes) once per outer row of the slab.
template <typename Copy>
void ForEachSlabRow(const Shape& whole, int64_t axis, PartRange range, int64_t elem_bytes,
                    Copy copy) {
  CHECK(axis >= 0 && axis < whole.rank()) << "axis " << axis << " of " << whole;
  CHECK(range.begin >= 0 && range.size >= 0 && range.end() <= whole.dim(axis))
      << "slab [" << range.begin << ", " << range.end() << ") outside axis " << axis << " of "
      << whole;
  const int64_t inner_bytes = whole.Count(axis + 1) * elem_bytes;
  const int64_t row_bytes = range.size * inner_bytes;
  if (row_bytes == 0) return;
  const int64_t outer = whole.Count(0, axis);
  const int64_t whole_row = whole.dim(axis) * inner_bytes;
  for (int64_t o = 0; o < outer; ++o) {
    copy(o * whole_row + range.begin * inner_bytes, o * row_bytes, row_bytes);
  }
}

// Elements per block of the non-overlapping path: a fixed count the
// compiler turns into vector adds at -O2 (basic-block SLP), where a loop of
// unknown length stays scalar.
constexpr int64_t kAddBlock = 16;

template <typename T>
void AddDisjoint(const T* __restrict in, T* __restrict out, int64_t count) {
  int64_t i = 0;
  for (; i + kAddBlock <= count; i += kAddBlock) {
    for (int64_t j = 0; j < kAddBlock; ++j) out[i + j] += in[i + j];
  }
  for (; i < count; ++i) out[i] += in[i];
}

template <typename T>
void AddInto(const void* from, void* to, int64_t count) {
  const T* in = static_cast<const T*>(from);
  T* out = static_cast<T*>(to);
  const uintptr_t in_at = reinterpret_cast<uintptr_t>(in);
  const uintptr_t out_at = reinterpret_cast<uintptr_t>(out);
  const uintptr_t bytes = static_cast<uintptr_t>(count) * sizeof(T);
  if (in_at + bytes <= out_at || out_at + bytes <= in_at) {
    AddDisjoint(in, out, count);  // the collectives' case: scratch into buffer
    return;
  }
  for (int64_t i = 0; i < count; ++i) out[i] += in[i];
}

}  // namespace

PartRange BalancedPart(int64_t length, int64_t parts, int64_t index) {
  CHECK(parts >= 1 && index >= 0 && index < parts)
      << "balanced part " << index << " of " << parts << " over length " << length;
  const int64_t base = length / parts;
  const int64_t extra = length % parts;
  PartRange range;
  range.begin = index * base + std::min(index, extra);
  range.size = base + (index < extra ? 1 : 0);
  return range;
}

Shape BalancedPartShape(const Shape& whole, int64_t axis, int64_t parts, int64_t index) {
  CHECK(axis >= 0 && axis < whole.rank()) << "axis " << axis << " of " << whole;
  Shape part = whole;
  part.mutable_dim(axis) = BalancedPart(whole.dim(axis), parts, index).size;
  return part;
}

void CopyWholeToPart(const Shape& whole, int64_t axis, PartRange range, int64_t elem_bytes,
                     const void* whole_data, void* part_data) {
  const char* from = static_cast<const char*>(whole_data);
  char* to = static_cast<char*>(part_data);
  ForEachSlabRow(whole, axis, range, elem_bytes,
                 [&](int64_t whole_at, int64_t part_at, int64_t bytes) {
                   std::memcpy(to + part_at, from + whole_at, bytes);
                 });
}

void CopyPartToWhole(const Shape& whole, int64_t axis, PartRange range, int64_t elem_bytes,
                     const void* part_data, void* whole_data) {
  const char* from = static_cast<const char*>(part_data);
  char* to = static_cast<char*>(whole_data);
  ForEachSlabRow(whole, axis, range, elem_bytes,
                 [&](int64_t whole_at, int64_t part_at, int64_t bytes) {
                   std::memcpy(to + whole_at, from + part_at, bytes);
                 });
}

bool CanAccumulate(DataType dtype) {
  return dtype == DT_FLOAT || dtype == DT_DOUBLE || dtype == DT_INT32 || dtype == DT_INT64;
}

Status AccumulateInto(DataType dtype, const void* from, void* to, int64_t count) {
  switch (dtype) {
    case DT_FLOAT:
      AddInto<float>(from, to, count);
      return Status::OK();
    case DT_DOUBLE:
      AddInto<double>(from, to, count);
      return Status::OK();
    case DT_INT32:
      AddInto<int32_t>(from, to, count);
      return Status::OK();
    case DT_INT64:
      AddInto<int64_t>(from, to, count);
      return Status::OK();
    default:
      return UnimplementedError("sum of ", DataTypeName(dtype), " elements");
  }
}

bool SplitToSplitAxes(const SbpParallel& in, const SbpParallel& out, const TensorDesc& logical,
                      int64_t* in_axis, int64_t* out_axis) {
  const int64_t rank = logical.shape.rank();
  auto axis_ok = [rank](int64_t axis) { return axis >= 0 && axis < rank; };
  if (!in.has_split_axis() || !out.has_split_axis() || in.split_axis() == out.split_axis() ||
      !axis_ok(in.split_axis()) || !axis_ok(out.split_axis()) || logical.is_dynamic) {
    return false;
  }
  *in_axis = in.split_axis();
  *out_axis = out.split_axis();
  return true;
}

Status FillAdditiveIdentity(DataType dtype, void* data, int64_t count) {
  switch (dtype) {
    case DT_FLOAT:
      std::fill_n(static_cast<float*>(data), count, -0.0f);
      return Status::OK();
    case DT_DOUBLE:
      std::fill_n(static_cast<double*>(data), count, -0.0);
      return Status::OK();
    case DT_INT32:
      std::fill_n(static_cast<int32_t*>(data), count, 0);
      return Status::OK();
    case DT_INT64:
      std::fill_n(static_cast<int64_t*>(data), count, int64_t{0});
      return Status::OK();
    default:
      return UnimplementedError("additive identity of ", DataTypeName(dtype), " elements");
  }
}

}  // namespace oflite
