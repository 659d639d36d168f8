// Checkpoints: saving and loading named variables (logical tensors) to a
// directory. Format: docs/checkpoint_format.md (constants in this header).
//
// Layout of a checkpoint directory:
//   <dir>/<escaped name>.var   one file per variable: a versioned header
//                              (magic, version, dtype, shape, byte count,
//                              CRC-32 of the data, CRC-32 of the header),
//                              then the raw little-endian data
//   <dir>/MANIFEST             text: format version, iteration, one line per
//                              variable (name, file, dtype, shape, bytes,
//                              CRC-32), and an end marker with the count
// Names are escaped for file names: bytes outside [A-Za-z0-9._-] become %XX.
//
// Crash safety: SaveVariables first writes and fsyncs every variable file
// under a temporary name ("<file>.tmp"), leaving a previous checkpoint in
// the directory untouched: a failure or a crash while the data is written
// (the long part of a save) keeps the previous checkpoint loadable. Only
// then does it remove the MANIFEST, rename the files into place, fsync the
// directory and write the new MANIFEST atomically (Env::WriteFileAtomically).
// A failure in that short metadata-only switch leaves a directory without a
// MANIFEST, which is never a checkpoint, so a mix of two saves is never
// loaded; a file changed after its MANIFEST line was written fails its CRC.
//
// Files go through the Env given (common/env.h; Env::Default() unless a
// test passes a fake).
//
// Loading checks everything: the MANIFEST's syntax and version, each
// requested variable's presence, its dtype and shape against the caller's
// expectation, the file's size, header, and both checksums. Errors are
// Status values naming the variable and the file (NotFound, InvalidArgument
// for a mismatch with the expectation, DataLoss for corruption).
//
// Blocking file I/O on the calling thread. Functions are thread-safe for
// distinct directories; concurrent saves to one directory are not supported.
// Little-endian hosts only (checked at compile time).
#ifndef ONEFLOW_LITE_CHECKPOINT_CHECKPOINT_H_
#define ONEFLOW_LITE_CHECKPOINT_CHECKPOINT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "oneflow_lite/common/env.h"
#include "oneflow_lite/common/host_tensor.h"
#include "oneflow_lite/common/status.h"
#include "oneflow_lite/common/tensor.h"

namespace oflite {

inline constexpr char kCheckpointManifestName[] = "MANIFEST";
inline constexpr char kCheckpointManifestMagic[] = "oflite-checkpoint";
inline constexpr char kVariableFileMagic[4] = {'O', 'F', 'L', 'V'};
inline constexpr uint32_t kCheckpointVersion = 1;
inline constexpr char kVariableFileSuffix[] = ".var";

struct CheckpointEntry {
  std::string name;  // the variable name (unescaped)
  std::string file;  // file name inside the directory
  TensorDesc desc;
  uint64_t byte_count = 0;
  uint32_t crc32 = 0;  // CRC-32 (zlib) of the data
};

struct CheckpointManifest {
  uint32_t version = kCheckpointVersion;
  int64_t iteration = 0;
  std::vector<CheckpointEntry> variables;  // sorted by name
};

// Saves `variables` (name -> view of the data; the memory must stay valid and
// unchanged during the call) and `iteration` into `dir`, creating it (and
// missing parents) if needed. Replaces a previous checkpoint in `dir`.
// On error the previous checkpoint in `dir` is kept when the error came
// while writing the data (see "Crash safety" above).
Status SaveVariables(const std::string& dir, int64_t iteration,
                     const std::map<std::string, Blob>& variables, Env* env = Env::Default());
Status SaveVariables(const std::string& dir, int64_t iteration,
                     const std::map<std::string, HostTensor>& variables, Env* env = Env::Default());

// True when `dir` holds a MANIFEST (a complete save).
bool IsCheckpoint(const std::string& dir, Env* env = Env::Default());

// Reads and validates `dir`/MANIFEST.
StatusOr<CheckpointManifest> ReadCheckpointManifest(const std::string& dir,
                                                    Env* env = Env::Default());

struct LoadedVariables {
  int64_t iteration = 0;
  std::map<std::string, HostTensor> tensors;
};

// Loads the variables named in `expected` (name -> the desc the caller
// needs); variables in the checkpoint but not in `expected` are ignored.
StatusOr<LoadedVariables> LoadVariables(const std::string& dir,
                                        const std::map<std::string, TensorDesc>& expected,
                                        Env* env = Env::Default());

// Reads and checks every variable named in `expected` exactly as
// LoadVariables does (presence, dtype, shape, size, header, both CRCs),
// holding one variable's data at a time, and returns the manifest. Used
// before resuming so that a corrupt checkpoint is an error even when no
// variable would be restored (e.g. no iteration left to run).
StatusOr<CheckpointManifest> VerifyCheckpoint(const std::string& dir,
                                              const std::map<std::string, TensorDesc>& expected,
                                              Env* env = Env::Default());

// Loads straight into caller-owned memory: each target blob's desc is the
// expectation. Returns the checkpoint's iteration. On error some targets may
// have been written.
StatusOr<int64_t> LoadVariablesInto(const std::string& dir,
                                    const std::map<std::string, Blob>& targets,
                                    Env* env = Env::Default());

// The file name used for a variable ("dense1/weight" -> "dense1%2Fweight.var").
std::string VariableFileName(const std::string& name);

}  // namespace oflite

#endif  // ONEFLOW_LITE_CHECKPOINT_CHECKPOINT_H_
