//===- Backend.h - what a session runs on: the CPU or a device --*- C++ -*-===//
//
// The C API's session handle holds one Backend: the CPU session of
// libkilnrt, or a session of a backend library that libkilnrt loads only when
// a session asks for its target (libkilnrt-cuda.so, so that libkilnrt itself
// needs no CUDA library). The two libraries are built together from this
// tree; the bundle crosses the boundary as plain bytes (BackendBundle), so
// each parses the manifest with its own copy of the generated code.
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

/// Raised whenever BackendBundle, Backend or the factory's signature
/// changes, so that a stale libkilnrt-cuda.so next to a newer libkilnrt.so
/// is refused instead of misread.
inline constexpr int kBackendAbiVersion = 1;

} // namespace kiln::runtime

extern "C" {
/// Exported by a backend library as "kiln_backend_abi_version".
typedef int (*KilnBackendAbiVersionFn)(void);
/// Exported by a backend library as "kiln_backend_create": creates a session
/// of `bundle` on the target `targetName`; on success stores it in `*out`
/// (the caller deletes it), else leaves `*out` NULL and the failure in
/// `*status`.
typedef void (*KilnBackendCreateFn)(const kiln::runtime::BackendBundle *bundle,
                                    const char *targetName,
                                    kiln::runtime::Backend **out,
                                    kiln::runtime::Status *status);
}

#endif // KILN_RUNTIME_SRC_BACKEND_H
