//===- Backend.h - what a session runs on: the CPU or a device --*- C++ -*-===//
//
// The C API's session handle holds one Backend: the CPU session of
// libkilnrt, or a session of a backend library that libkilnrt loads only when
// a session asks for its target (libkilnrt-cuda.so, so that libkilnrt itself
// needs no CUDA library). The two libraries are built together from this
// tree; the bundle crosses the boundary as plain bytes (BackendBundle), so
// each parses the manifest with its own copy of the generated code. What a
// backend needs of libkilnrt's process-wide communicator (its rank, a
// broadcast to bootstrap a device communicator such as NCCL's) crosses as
// plain values and function pointers (BackendHost), since the backend links
// neither MPI nor libkilnrt.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SRC_BACKEND_H
#define KILN_RUNTIME_SRC_BACKEND_H

#include "kiln/runtime.h"
#include "kiln/runtime/Status.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace kiln::runtime {

/// A bundle made ready to run on one target. Implementations serialize the
/// calls on one object themselves.
class Backend {
public:
  virtual ~Backend() = default;

  /// Validates the caller's tensors against entry point `entryName`, runs its
  /// commands and leaves the outputs in the caller's tensors.
  virtual Status run(const std::string &entryName, const kiln_tensor_t *inputs,
                     size_t inputCount, const kiln_tensor_t *outputs,
                     size_t outputCount) = 0;

  /// Checks inputs as run() does and copies them for a later runStaged() of
  /// entry point `entryName`, behind the sets already waiting (at most
  /// InputStager::kMaxWaiting); may run beside a run of the same session
  /// (stages are serialized with each other).
  virtual Status stageInputs(const std::string &entryName,
                             const kiln_tensor_t *inputs,
                             size_t inputCount) = 0;

  /// Runs entry point `entryName` as run() does, on the oldest staged set of
  /// its inputs, which the run uses up.
  virtual Status runStaged(const std::string &entryName,
                           const kiln_tensor_t *outputs,
                           size_t outputCount) = 0;

  /// The bytes of the arena allocated at creation.
  virtual uint64_t arenaBytes() const = 0;

  virtual Status getParameter(const std::string &name, void *data,
                              size_t byteSize) = 0;
  virtual Status setParameter(const std::string &name, const void *data,
                              size_t byteSize) = 0;
};

/// One section of an opened bundle, as the section table describes it.
struct BackendSection {
  uint32_t kind;
  const uint8_t *data;
  uint64_t size;
};

/// An opened, validated bundle as a backend library receives it. The bytes
/// live until the factory returns; a backend copies what it keeps.
struct BackendBundle {
  const char *name;
  const uint8_t *manifest;
  size_t manifestSize;
  const BackendSection *sections;
  size_t sectionCount;
};

/// Where the process stands among the ranks of the run and what libkilnrt's
/// communicator does for a backend, as kiln_distributed_init set it up (a
/// single rank, 0 of 1, without it). Valid for the factory call only.
struct BackendHost {
  int rank;
  int worldSize;
  /// Among the ranks on this node.
  int localRank;
  int localSize;
  /// The longest a rank waits for the others in one collective; <= 0 means
  /// no limit.
  double collectiveTimeoutSeconds;
  /// Sends `bytes` bytes at `data` on rank `root` to `data` on every rank,
  /// bounded by the collective timeout; every rank must call it. Returns 0,
  /// or nonzero with a NUL-terminated message naming the rank in `error`
  /// (truncated to `errorSize` bytes).
  int (*broadcast)(void *data, size_t bytes, int root, char *error,
                   size_t errorSize);
};

/// Raised whenever BackendBundle, BackendHost, Backend or the factory's
/// signature changes, so that a stale libkilnrt-cuda.so next to a newer
/// libkilnrt.so is refused instead of misread.
inline constexpr int kBackendAbiVersion = 3;

} // namespace kiln::runtime

extern "C" {
/// Exported by a backend library as "kiln_backend_abi_version".
typedef int (*KilnBackendAbiVersionFn)(void);
/// Exported by a backend library as "kiln_backend_create": creates a session
/// of `bundle` on the target `targetName` for the rank `host` describes; on
/// success stores it in `*out` (the caller deletes it), else leaves `*out`
/// NULL and the failure in `*status`.
typedef void (*KilnBackendCreateFn)(const kiln::runtime::BackendBundle *bundle,
                                    const char *targetName,
                                    const kiln::runtime::BackendHost *host,
                                    kiln::runtime::Backend **out,
                                    kiln::runtime::Status *status);
}

#endif // KILN_RUNTIME_SRC_BACKEND_H
