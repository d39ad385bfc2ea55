//===- BackendLoader.h - sessions in backend libraries ----------*- C++ -*-===//
//
// libkilnrt links no CUDA library: a session for a CUDA target loads
// libkilnrt-cuda.so from the directory libkilnrt.so lives in, the first
// time one is asked for. Where the library or the NVIDIA driver it needs is
// missing, creating the session fails with Unsupported and says which.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SRC_BACKENDLOADER_H
#define KILN_RUNTIME_SRC_BACKENDLOADER_H

#include "core/Backend.h"
#include "kiln/runtime/BundleReader.h"

#include <memory>

namespace kiln::runtime {

/// Creates a session of `reader` on its CUDA target `targetName`.
Status createCudaSession(const BundleReader &reader,
                         const std::string &targetName,
                         std::unique_ptr<Backend> &out);

} // namespace kiln::runtime

#endif // KILN_RUNTIME_SRC_BACKENDLOADER_H
