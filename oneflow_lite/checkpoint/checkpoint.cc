#include "oneflow_lite/checkpoint/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <sstream>

#include "oneflow_lite/common/data_type.h"
#include "oneflow_lite/common/little_endian.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "checkpoints store raw little-endian data");

namespace oflite {
namespace {

constexpr int64_t kMaxRank = 32;

std::string JoinPath(const std::string& dir, const std::string& file) {
  return dir.empty() || dir.back() == '/' ? dir + file : dir + "/" + file;
}

std::string ErrnoText() { return std::strerror(errno); }

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

// --- files ---

Status MakeDirectories(const std::string& dir) {
  std::string partial;
  std::stringstream parts(dir);
  std::string part;
  if (!dir.empty() && dir[0] == '/') partial = "/";
  while (std::getline(parts, part, '/')) {
    if (part.empty()) continue;
    partial += part + "/";
    if (mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
      return PermissionDeniedError("cannot create checkpoint directory '", partial,
                                   "': ", ErrnoText());
    }
  }
  struct stat info;
  if (stat(dir.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
    return FailedPreconditionError("checkpoint path '", dir, "' is not a directory");
  }
  return Status::OK();
}

Status WriteAll(int fd, const void* data, uint64_t size, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t written = write(fd, p, std::min<uint64_t>(size, 1u << 30));
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return UnavailableError("cannot write '", path, "': ", ErrnoText());
    p += written;
    size -= static_cast<uint64_t>(written);
  }
  return Status::OK();
}

// Writes pieces to `path` via "<path>.tmp", fsync, rename.
Status WriteFileAtomically(const std::string& path,
                           const std::vector<std::pair<const void*, uint64_t>>& pieces) {
  const std::string temp = path + ".tmp";
  const int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return UnavailableError("cannot create '", temp, "': ", ErrnoText());
  Status status;
  for (const auto& [data, size] : pieces) {
    status = WriteAll(fd, data, size, temp);
    if (!status.ok()) break;
  }
  if (status.ok() && fsync(fd) != 0)
    status = UnavailableError("cannot fsync '", temp, "': ", ErrnoText());
  if (close(fd) != 0 && status.ok())
    status = UnavailableError("cannot close '", temp, "': ", ErrnoText());
  if (status.ok() && rename(temp.c_str(), path.c_str()) != 0) {
    status = UnavailableError("cannot rename '", temp, "' to '", path, "': ", ErrnoText());
  }
  if (!status.ok()) unlink(temp.c_str());
  return status;
}

void SyncDirectory(const std::string& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  fsync(fd);  // best effort: some file systems refuse directory fsync
  close(fd);
}

StatusOr<std::string> ReadWholeFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return errno == ENOENT ? NotFoundError("'", path, "' does not exist")
                           : UnavailableError("cannot open '", path, "': ", ErrnoText());
  }
  std::string contents;
  char buffer[1 << 16];
  while (true) {
    const ssize_t got = read(fd, buffer, sizeof(buffer));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      const std::string error = ErrnoText();
      close(fd);
      return UnavailableError("cannot read '", path, "': ", error);
    }
    if (got == 0) break;
    contents.append(buffer, got);
  }
  close(fd);
  return contents;
}

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
StatusOr<std::string> ReadVariableData(const std::string& dir, const CheckpointEntry& entry) {
  const std::string path = JoinPath(dir, entry.file);
  const std::string where = "variable '" + entry.name + "' in '" + path + "': ";
  StatusOr<std::string> read = ReadWholeFile(path);
  if (!read.ok()) return read.status().WithContext("variable '" + entry.name + "'");
  std::string contents = std::move(read).value();
  const size_t header_size = HeaderSize(entry.desc.shape.rank());
  if (contents.size() != header_size + entry.byte_count) {
    return DataLossError(where, "file has ", contents.size(), " bytes, expected ",
                         header_size + entry.byte_count, " (truncated or overwritten)");
  }
  if (contents.compare(0, 4, kVariableFileMagic, 4) != 0) {
    return DataLossError(where, "bad magic (not a variable file)");
  }
  if (Crc32(contents.data(), header_size - 4) != little_endian::LoadU32(
                     reinterpret_cast<const uint8_t*>(contents.data()) + header_size - 4)) {
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
                     const std::map<std::string, Blob>& variables) {
  RETURN_IF_ERROR(MakeDirectories(dir));
  const std::string manifest_path = JoinPath(dir, kCheckpointManifestName);
  if (unlink(manifest_path.c_str()) != 0 && errno != ENOENT) {
    return UnavailableError("cannot remove old '", manifest_path, "': ", ErrnoText());
  }
  CheckpointManifest manifest;
  manifest.iteration = iteration;
  for (const auto& [name, blob] : variables) {
    if (name.empty()) return InvalidArgumentError("empty variable name (checkpoint '", dir, "')");
    CheckpointEntry entry;
    entry.name = name;
    entry.file = VariableFileName(name);
    entry.desc = TensorDesc(blob.shape(), blob.dtype());
    entry.byte_count = static_cast<uint64_t>(blob.ByteSize());
    entry.crc32 = Crc32(blob.raw(), entry.byte_count);
    const std::string header = EncodeHeader(entry.desc, entry.byte_count, entry.crc32);
    Status status =
        WriteFileAtomically(JoinPath(dir, entry.file),
                            {{header.data(), header.size()}, {blob.raw(), entry.byte_count}});
    if (!status.ok()) return status.WithContext("saving variable '" + name + "'");
    manifest.variables.push_back(std::move(entry));
  }
  SyncDirectory(dir);
  const std::string text = EncodeManifest(manifest);
  RETURN_IF_ERROR(WriteFileAtomically(manifest_path, {{text.data(), text.size()}}));
  SyncDirectory(dir);
  return Status::OK();
}

Status SaveVariables(const std::string& dir, int64_t iteration,
                     const std::map<std::string, HostTensor>& variables) {
  std::map<std::string, Blob> views;
  for (const auto& [name, tensor] : variables) {
    views.emplace(name, Blob(const_cast<void*>(tensor.raw()), tensor.desc()));
  }
  return SaveVariables(dir, iteration, views);
}

bool IsCheckpoint(const std::string& dir) {
  struct stat info;
  return stat(JoinPath(dir, kCheckpointManifestName).c_str(), &info) == 0;
}

StatusOr<CheckpointManifest> ReadCheckpointManifest(const std::string& dir) {
  const std::string path = JoinPath(dir, kCheckpointManifestName);
  StatusOr<std::string> text = ReadWholeFile(path);
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
                                        const std::map<std::string, TensorDesc>& expected) {
  ASSIGN_OR_RETURN(CheckpointManifest manifest, ReadCheckpointManifest(dir));
  LoadedVariables loaded;
  loaded.iteration = manifest.iteration;
  for (const auto& [name, desc] : expected) {
    ASSIGN_OR_RETURN(const CheckpointEntry* entry, FindEntry(dir, manifest, name, desc));
    ASSIGN_OR_RETURN(std::string data, ReadVariableData(dir, *entry));
    HostTensor tensor(entry->desc);
    if (!data.empty()) std::memcpy(tensor.raw(), data.data(), data.size());
    loaded.tensors.emplace(name, std::move(tensor));
  }
  return loaded;
}

StatusOr<CheckpointManifest> VerifyCheckpoint(const std::string& dir,
                                              const std::map<std::string, TensorDesc>& expected) {
  ASSIGN_OR_RETURN(CheckpointManifest manifest, ReadCheckpointManifest(dir));
  for (const auto& [name, desc] : expected) {
    ASSIGN_OR_RETURN(const CheckpointEntry* entry, FindEntry(dir, manifest, name, desc));
    RETURN_IF_ERROR(ReadVariableData(dir, *entry).status());
  }
  return manifest;
}

StatusOr<int64_t> LoadVariablesInto(const std::string& dir,
                                    const std::map<std::string, Blob>& targets) {
  ASSIGN_OR_RETURN(CheckpointManifest manifest, ReadCheckpointManifest(dir));
  for (const auto& [name, blob] : targets) {
    ASSIGN_OR_RETURN(const CheckpointEntry* entry, FindEntry(dir, manifest, name, blob.desc()));
    ASSIGN_OR_RETURN(std::string data, ReadVariableData(dir, *entry));
    Blob view = blob;  // a copy of the view; the memory is the caller's
    if (!data.empty()) std::memcpy(view.raw(), data.data(), data.size());
  }
  return manifest.iteration;
}

}  // namespace oflite
