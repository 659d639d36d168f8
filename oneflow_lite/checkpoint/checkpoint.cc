#include "oneflow_lite/checkpoint/checkpoint.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <sstream>

#include "oneflow_lite/common/data_type.h"
#include "oneflow_lite/common/little_endian.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "checkpoints store raw little-endian data");

namespace oflite {
namespace {

constexpr int64_t kMaxRank = 32;
// A MANIFEST is one short line per variable; anything larger is not one.
constexpr uint64_t kMaxManifestBytes = uint64_t{64} << 20;
// Suffix of a variable file written but not yet renamed (SaveVariables).
constexpr char kStagedSuffix[] = ".tmp";

std::string JoinPath(const std::string& dir, const std::string& file) {
  return dir.empty() || dir.back() == '/' ? dir + file : dir + "/" + file;
}

uint32_t Crc32(const void* data, uint64_t size) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const auto* bytes = static_cast<const Bytef*>(data);
  while (size > 0) {
    const uInt chunk = static_cast<uInt>(std::min<uint64_t>(size, 1u << 30));
    crc = crc32(crc, bytes, chunk);
    bytes += chunk;
    size -= chunk;
  }
  return static_cast<uint32_t>(crc);
}

// --- the variable file header (integers through common/little_endian.h) ---

// magic[4] version:u32 dtype:u32 rank:u32 dims:i64[rank] bytes:u64
// data_crc:u32 header_crc:u32 (CRC-32 of everything before it).
std::string EncodeHeader(const TensorDesc& desc, uint64_t byte_count, uint32_t data_crc) {
  std::string header(kVariableFileMagic, 4);
  little_endian::AppendU32(&header, kCheckpointVersion);
  little_endian::AppendU32(&header, static_cast<uint32_t>(desc.dtype));
  little_endian::AppendU32(&header, static_cast<uint32_t>(desc.shape.rank()));
  for (int64_t d : desc.shape.dims()) little_endian::AppendU64(&header, static_cast<uint64_t>(d));
  little_endian::AppendU64(&header, byte_count);
  little_endian::AppendU32(&header, data_crc);
  little_endian::AppendU32(&header, Crc32(header.data(), header.size()));
  return header;
}

size_t HeaderSize(int64_t rank) { return 4 + 4 * 3 + 8 * rank + 8 + 4 + 4; }

// --- manifest ---

StatusOr<DataType> ParseDataTypeName(const std::string& name) {
  for (int t = DT_FLOAT; t <= DT_BOOL; ++t) {
    if (name == DataTypeName(static_cast<DataType>(t))) return static_cast<DataType>(t);
  }
  return InvalidArgumentError("unknown dtype '", name, "'");
}

std::string EncodeManifest(const CheckpointManifest& manifest) {
  std::ostringstream out;
  out << kCheckpointManifestMagic << " " << manifest.version << "\n";
  out << "iteration " << manifest.iteration << "\n";
  for (const CheckpointEntry& e : manifest.variables) {
    const std::string escaped = e.file.substr(0, e.file.size() - std::strlen(kVariableFileSuffix));
    out << "variable " << escaped << " " << e.file << " " << DataTypeName(e.desc.dtype) << " "
        << e.desc.shape.rank();
    for (int64_t d : e.desc.shape.dims()) out << " " << d;
    out << " " << e.byte_count << " " << e.crc32 << "\n";
  }
  out << "end " << manifest.variables.size() << "\n";
  return out.str();
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Inverse of the escaping in VariableFileName (invalid escapes are kept and
// then fail the file-name cross-check).
std::string Unescape(const std::string& escaped) {
  std::string name;
  for (size_t i = 0; i < escaped.size(); ++i) {
    if (escaped[i] == '%' && i + 2 < escaped.size() && HexValue(escaped[i + 1]) >= 0 &&
        HexValue(escaped[i + 2]) >= 0) {
      name.push_back(static_cast<char>(HexValue(escaped[i + 1]) * 16 + HexValue(escaped[i + 2])));
      i += 2;
    } else {
      name.push_back(escaped[i]);
    }
  }
  return name;
}

Status ParseVariableLine(std::istringstream* line, CheckpointEntry* entry) {
  std::string escaped, dtype_name;
  int64_t rank = -1;
  if (!(*line >> escaped >> entry->file >> dtype_name >> rank) || rank < 0 || rank > kMaxRank) {
    return InvalidArgumentError("malformed variable line");
  }
  entry->name = Unescape(escaped);
  if (VariableFileName(entry->name) != entry->file) {
    return InvalidArgumentError("file '", entry->file, "' does not match variable '", entry->name,
                                "'");
  }
  ASSIGN_OR_RETURN(entry->desc.dtype, ParseDataTypeName(dtype_name));
  std::vector<int64_t> dims(rank);
  for (int64_t& d : dims) {
    if (!(*line >> d) || d < 0) return InvalidArgumentError("bad dimension");
  }
  entry->desc.shape = Shape(dims);
  if (!(*line >> entry->byte_count >> entry->crc32))
    return InvalidArgumentError("missing size/crc");
  if (entry->byte_count != static_cast<uint64_t>(entry->desc.ByteSize())) {
    return InvalidArgumentError("byte count ", entry->byte_count, " does not match ",
                                entry->desc.ToString());
  }
  return Status::OK();
}

Status ParseManifest(const std::string& text, CheckpointManifest* manifest) {
  std::istringstream lines(text);
  std::string line_text;
  int line_number = 0;
  bool ended = false;
  while (std::getline(lines, line_text)) {
    ++line_number;
    std::istringstream line(line_text);
    std::string keyword;
    line >> keyword;
    Status status;
    if (ended) {
      status = InvalidArgumentError("text after the end line");
    } else if (line_number == 1) {
      if (keyword != kCheckpointManifestMagic || !(line >> manifest->version)) {
        status = InvalidArgumentError("not a checkpoint manifest (bad first line)");
      } else if (manifest->version != kCheckpointVersion) {
        status = UnimplementedError("format version ", manifest->version, " (this build reads ",
                                    kCheckpointVersion, ")");
      }
    } else if (keyword == "iteration" && line_number == 2) {
      if (!(line >> manifest->iteration)) status = InvalidArgumentError("bad iteration");
    } else if (keyword == "variable" && line_number > 2) {
      CheckpointEntry entry;
      status = ParseVariableLine(&line, &entry);
      if (status.ok()) manifest->variables.push_back(std::move(entry));
    } else if (keyword == "end" && line_number > 2) {
      size_t count = 0;
      if (!(line >> count) || count != manifest->variables.size()) {
        status = InvalidArgumentError("end line count does not match ", manifest->variables.size(),
                                      " variables");
      }
      ended = true;
    } else {
      status = InvalidArgumentError("unexpected '", keyword, "'");
    }
    if (!status.ok()) return status.WithContext("line " + std::to_string(line_number));
  }
  if (!ended) return InvalidArgumentError("missing end line (truncated)");
  return Status::OK();
}

// --- variable files ---

// Reads `entry`'s file and checks it against the manifest; returns the data.
StatusOr<std::string> ReadVariableData(const std::string& dir, const CheckpointEntry& entry,
                                       Env* env) {
  const std::string path = JoinPath(dir, entry.file);
  const std::string where = "variable '" + entry.name + "' in '" + path + "': ";
  const size_t header_size = HeaderSize(entry.desc.shape.rank());
  StatusOr<std::string> read = env->ReadFileToString(path, header_size + entry.byte_count);
  if (!read.ok() && read.status().code() == StatusCode::kOutOfRange) {
    return DataLossError(where, "file has more than ", header_size + entry.byte_count,
                         " bytes, the size its manifest line gives (overwritten)");
  }
  if (!read.ok()) return read.status().WithContext("variable '" + entry.name + "'");
  std::string contents = std::move(read).value();
  if (contents.size() != header_size + entry.byte_count) {
    return DataLossError(where, "file has ", contents.size(), " bytes, expected ",
                         header_size + entry.byte_count, " (truncated or overwritten)");
  }
  if (contents.compare(0, 4, kVariableFileMagic, 4) != 0) {
    return DataLossError(where, "bad magic (not a variable file)");
  }
  if (Crc32(contents.data(), header_size - 4) !=
      little_endian::LoadU32(reinterpret_cast<const uint8_t*>(contents.data()) + header_size - 4)) {
    return DataLossError(where, "header checksum mismatch");
  }
  const std::string expected_header = EncodeHeader(entry.desc, entry.byte_count, entry.crc32);
  if (contents.compare(0, header_size, expected_header) != 0) {
    return DataLossError(where, "header (version, dtype, shape, size or checksum) disagrees with ",
                         kCheckpointManifestName);
  }
  contents.erase(0, header_size);
  if (Crc32(contents.data(), contents.size()) != entry.crc32) {
    return DataLossError(where, "data checksum mismatch");
  }
  return contents;
}

// The manifest entry for `name`, checked against `expected`.
StatusOr<const CheckpointEntry*> FindEntry(const std::string& dir,
                                           const CheckpointManifest& manifest,
                                           const std::string& name, const TensorDesc& expected) {
  for (const CheckpointEntry& entry : manifest.variables) {
    if (entry.name != name) continue;
    if (entry.desc.shape != expected.shape || entry.desc.dtype != expected.dtype) {
      return InvalidArgumentError("variable '", name, "' in '", JoinPath(dir, entry.file), "' is ",
                                  entry.desc.ToString(), ", expected ", expected.ToString());
    }
    return &entry;
  }
  return NotFoundError("variable '", name, "' is not in checkpoint '", dir, "'");
}

}  // namespace

std::string VariableFileName(const std::string& name) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string file;
  for (unsigned char c : name) {
    if (std::isalnum(c) || c == '.' || c == '_' || c == '-') {
      file.push_back(static_cast<char>(c));
    } else {
      file += {'%', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return file + kVariableFileSuffix;
}

Status SaveVariables(const std::string& dir, int64_t iteration,
                     const std::map<std::string, Blob>& variables, Env* env) {
  for (const auto& [name, blob] : variables) {
    if (name.empty()) return InvalidArgumentError("empty variable name (checkpoint '", dir, "')");
  }
  RETURN_IF_ERROR(env->CreateDirectories(dir).WithContext("checkpoint '" + dir + "'"));
  CheckpointManifest manifest;
  manifest.iteration = iteration;
  std::vector<std::string> staged;  // written and synced, not yet renamed
  auto discard_staged = [&]() {
    for (const std::string& path : staged) env->RemoveFile(path).IgnoreError();
  };
  // 1. Every variable to "<file>.tmp": the previous checkpoint stays whole.
  for (const auto& [name, blob] : variables) {
    CheckpointEntry entry;
    entry.name = name;
    entry.file = VariableFileName(name);
    entry.desc = TensorDesc(blob.shape(), blob.dtype());
    entry.byte_count = static_cast<uint64_t>(blob.ByteSize());
    entry.crc32 = Crc32(blob.raw(), entry.byte_count);
    const std::string header = EncodeHeader(entry.desc, entry.byte_count, entry.crc32);
    const std::string temp = JoinPath(dir, entry.file) + kStagedSuffix;
    Status status = env->WriteSyncedFile(
        temp, {header, std::string_view(static_cast<const char*>(blob.raw()), entry.byte_count)});
    if (!status.ok()) {
      discard_staged();
      return status.WithContext("saving variable '" + name + "'");
    }
    staged.push_back(temp);
    manifest.variables.push_back(std::move(entry));
  }
  // 2. The switch: no MANIFEST while the files are renamed, then the new one.
  const std::string manifest_path = JoinPath(dir, kCheckpointManifestName);
  Status status = env->RemoveFile(manifest_path);
  if (status.code() == StatusCode::kNotFound) status = Status::OK();
  for (size_t i = 0; status.ok() && i < staged.size(); ++i) {
    status = env->RenameFile(staged[i], JoinPath(dir, manifest.variables[i].file));
  }
  if (status.ok()) status = env->SyncDirectory(dir);
  if (status.ok()) status = env->WriteFileAtomically(manifest_path, EncodeManifest(manifest));
  if (!status.ok()) {
    discard_staged();
    return status.WithContext("saving checkpoint '" + dir + "'");
  }
  return Status::OK();
}

Status SaveVariables(const std::string& dir, int64_t iteration,
                     const std::map<std::string, HostTensor>& variables, Env* env) {
  std::map<std::string, Blob> views;
  for (const auto& [name, tensor] : variables) {
    views.emplace(name, Blob(const_cast<void*>(tensor.raw()), tensor.desc()));
  }
  return SaveVariables(dir, iteration, views, env);
}

bool IsCheckpoint(const std::string& dir, Env* env) {
  return env->FileExists(JoinPath(dir, kCheckpointManifestName));
}

StatusOr<CheckpointManifest> ReadCheckpointManifest(const std::string& dir, Env* env) {
  const std::string path = JoinPath(dir, kCheckpointManifestName);
  StatusOr<std::string> text = env->ReadFileToString(path, kMaxManifestBytes);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) {
      return NotFoundError("no complete checkpoint in '", dir, "': '", path, "' does not exist");
    }
    return text.status();
  }
  CheckpointManifest manifest;
  Status status = ParseManifest(*text, &manifest);
  if (!status.ok()) return DataLossError("corrupt '", path, "': ", status.message());
  return manifest;
}

StatusOr<LoadedVariables> LoadVariables(const std::string& dir,
                                        const std::map<std::string, TensorDesc>& expected,
                                        Env* env) {
  ASSIGN_OR_RETURN(CheckpointManifest manifest, ReadCheckpointManifest(dir, env));
  LoadedVariables loaded;
  loaded.iteration = manifest.iteration;
  for (const auto& [name, desc] : expected) {
    ASSIGN_OR_RETURN(const CheckpointEntry* entry, FindEntry(dir, manifest, name, desc));
    ASSIGN_OR_RETURN(std::string data, ReadVariableData(dir, *entry, env));
    HostTensor tensor(entry->desc);
    if (!data.empty()) std::memcpy(tensor.raw(), data.data(), data.size());
    loaded.tensors.emplace(name, std::move(tensor));
  }
  return loaded;
}

StatusOr<CheckpointManifest> VerifyCheckpoint(const std::string& dir,
                                              const std::map<std::string, TensorDesc>& expected,
                                              Env* env) {
  ASSIGN_OR_RETURN(CheckpointManifest manifest, ReadCheckpointManifest(dir, env));
  for (const auto& [name, desc] : expected) {
    ASSIGN_OR_RETURN(const CheckpointEntry* entry, FindEntry(dir, manifest, name, desc));
    RETURN_IF_ERROR(ReadVariableData(dir, *entry, env).status());
  }
  return manifest;
}

StatusOr<int64_t> LoadVariablesInto(const std::string& dir,
                                    const std::map<std::string, Blob>& targets, Env* env) {
  ASSIGN_OR_RETURN(CheckpointManifest manifest, ReadCheckpointManifest(dir, env));
  for (const auto& [name, blob] : targets) {
    ASSIGN_OR_RETURN(const CheckpointEntry* entry, FindEntry(dir, manifest, name, blob.desc()));
    ASSIGN_OR_RETURN(std::string data, ReadVariableData(dir, *entry, env));
    Blob view = blob;  // a copy of the view; the memory is the caller's
    if (!data.empty()) std::memcpy(view.raw(), data.data(), data.size());
  }
  return manifest.iteration;
}

}  // namespace oflite
