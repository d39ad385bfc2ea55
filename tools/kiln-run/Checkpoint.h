//===- Checkpoint.h - kiln-run's training checkpoints -----------*- C++ -*-===//
//
// A checkpoint directory holds, for each checkpointed step N,
//   step-N.safetensors  every parameter and optimizer state tensor,
//   step-N.json         the sidecar: the step, the bundle's fingerprint, the
//                       data stream's cursor and how to continue it,
// and `latest`, the name of the newest complete sidecar. Each file is
// written to a temporary file, flushed to disk and renamed into place, the
// parameters before the sidecar and the sidecar before `latest`, so a run
// killed at any moment leaves `latest` naming a complete checkpoint.
// `kiln-run.lock`, locked while a run uses the directory, names that run.
// docs/runtime.md describes the layout.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TOOLS_KILN_RUN_CHECKPOINT_H
#define KILN_TOOLS_KILN_RUN_CHECKPOINT_H

#include <cstdint>
#include <string>

namespace kiln::run {

/// Where the data stream stands: the epoch and the index, in that epoch's
/// order of this rank's shard, of the next sample.
struct StreamCursor {
  int64_t epoch = 0;
  int64_t position = 0;
};

/// What a sidecar records.
struct CheckpointInfo {
  /// Optimizer steps done.
  int64_t step = 0;
  uint64_t bundleFingerprint = 0;
  std::string bundlePath;
  std::string kilnRunVersion;
  /// The data set and how the stream walks it.
  std::string dataPath;
  int64_t samples = 0;
  int64_t batchSize = 0;
  int64_t gradAccum = 1;
  int64_t seed = 0;
  bool shuffle = true;
  bool dropLast = false;
  /// The ranks that trained; the cursor is in each one's shard. Sidecars
  /// from before data parallelism lack it: 1.
  int64_t worldSize = 1;
  StreamCursor cursor;
  /// The parameter file's name (in the directory), size and FNV-1a hash.
  std::string parametersFile;
  uint64_t parametersBytes = 0;
  uint64_t parametersHash = 0;
};

/// 64-bit FNV-1a of `bytes`.
uint64_t fnv1a64(const std::string &bytes);

/// "0x0123456789abcdef".
std::string hex64(uint64_t value);

/// The lock a run holds on its checkpoint directory: an flock on
/// `dir`/kiln-run.lock, which the kernel drops when the process ends, however
/// it ends, so a killed run leaves no stale lock.
class CheckpointLock {
public:
  CheckpointLock() = default;
  CheckpointLock(const CheckpointLock &) = delete;
  CheckpointLock &operator=(const CheckpointLock &) = delete;
  ~CheckpointLock();

  /// Creates `dir` (and its parents) if missing and locks it; a directory
  /// another run holds is refused, naming that run's process and host.
  bool acquire(const std::string &dir);

private:
  int fd = -1;
};

/// Removes the temporary files (`step-N.json.tmp.PID.K` and the like) that a
/// run killed while writing a checkpoint left in `dir`; call it holding the
/// directory's lock, so that no running writer owns them. Prints how many it
/// removed.
bool removeStaleTemporaries(const std::string &dir);

/// Refuses a directory that already holds checkpoints, for a run that does
/// not resume, so that no earlier run's files are overwritten.
bool checkNoCheckpoints(const std::string &dir);

/// Removes the checkpoints of `dir` older than the `keep` newest up to
/// `step` (the one `latest` names), the sidecar before its parameter file,
/// so that `latest` always names a complete checkpoint.
bool rotateCheckpoints(const std::string &dir, int64_t step, int64_t keep);

/// Writes step-N.safetensors (`parameters`), step-N.json (from `info`, whose
/// parameter file fields it fills) and then `latest`, each atomically.
bool writeCheckpoint(const std::string &dir, CheckpointInfo &info,
                     const std::string &parameters);

/// Reads the checkpoint `dir`/latest names: the sidecar into `info` (its path
/// into `sidecarPath`) and the parameter file into `parameters`, checked
/// against the size and hash the sidecar records. A missing `latest`, a
/// corrupt or truncated sidecar or parameter file is an error naming it.
bool readLatestCheckpoint(const std::string &dir, CheckpointInfo &info,
                          std::string &sidecarPath, std::string &parameters);

} // namespace kiln::run

#endif // KILN_TOOLS_KILN_RUN_CHECKPOINT_H
