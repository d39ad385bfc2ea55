//===- BackendLoader.cpp - sessions in backend libraries ------------------===//

#include "core/BackendLoader.h"

#include "collectives/Collectives.h"

#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <string>
#include <unistd.h>
#include <vector>

namespace kiln::runtime {

#ifdef KILN_RUNTIME_WITH_CUDA

namespace {

constexpr const char *kCudaLibraryName = "libkilnrt-cuda.so";

/// The outcome of loading the CUDA backend, once per process: the library
/// stays loaded for good, since unloading CUDA libraries is unsafe.
struct CudaLibrary {
  KilnBackendCreateFn create = nullptr;
  std::string path;
  /// Why the library could not be used; empty when `create` is set.
  std::string missingFile;   // the backend library itself is not there
  std::string missingDriver; // dlopen's message about libcuda
  std::string otherError;
};

/// libkilnrt-cuda.so next to the libkilnrt.so this code is in, so that a
/// build tree and an installation both find their own copy.
std::string cudaLibraryPath() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void *>(&createCudaSession), &info) == 0 ||
      !info.dli_fname)
    return kCudaLibraryName;
  std::string self = info.dli_fname;
  size_t slash = self.rfind('/');
  if (slash == std::string::npos)
    return kCudaLibraryName;
  return self.substr(0, slash + 1) + kCudaLibraryName;
}

/// dlerror() without the "PATH: " it starts with, which names our library
/// rather than the one that is missing.
std::string loaderMessage(const std::string &path) {
  const char *error = dlerror();
  std::string message = error ? error : "unknown dynamic loader error";
  if (message.rfind(path + ": ", 0) == 0)
    message.erase(0, path.size() + 2);
  return message;
}

CudaLibrary loadCudaLibrary() {
  CudaLibrary library;
  library.path = cudaLibraryPath();
  if (library.path.find('/') != std::string::npos &&
      access(library.path.c_str(), F_OK) != 0) {
    library.missingFile = library.path;
    return library;
  }
  void *handle = dlopen(library.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    std::string message = loaderMessage(library.path);
    if (message.find("libcuda.so") != std::string::npos)
      library.missingDriver = message;
    else
      library.otherError = strCat("cannot load ", library.path, ": ", message);
    return library;
  }
  auto version = reinterpret_cast<KilnBackendAbiVersionFn>(
      dlsym(handle, "kiln_backend_abi_version"));
  auto create = reinterpret_cast<KilnBackendCreateFn>(
      dlsym(handle, "kiln_backend_create"));
  if (!version || !create) {
    library.otherError =
        strCat(library.path, " does not export the backend entry points");
    return library;
  }
  if (version() != kBackendAbiVersion) {
    library.otherError =
        strCat(library.path, " is of backend interface version ", version(),
               ", but this libkilnrt needs version ", kBackendAbiVersion,
               " (a stale library from another build?)");
    return library;
  }
  library.create = create;
  return library;
}

const CudaLibrary &cudaLibrary() {
  static const CudaLibrary library = loadCudaLibrary();
  return library;
}

/// BackendHost::broadcast: the process-wide communicator's broadcast. No
/// exception crosses back into the backend.
int hostBroadcast(void *data, size_t bytes, int root, char *error,
                  size_t errorSize) noexcept {
  try {
    Status status = broadcast(data, bytes, root);
    if (status.ok())
      return 0;
    if (errorSize > 0)
      std::snprintf(error, errorSize, "%s", status.message().c_str());
  } catch (...) {
    if (errorSize > 0)
      std::snprintf(error, errorSize, "out of memory in a broadcast");
  }
  return 1;
}

/// This process's place in the run, for the backend.
BackendHost currentHost() {
  DistributedInfo info = distributedInfo();
  return {info.rank,
          info.worldSize,
          info.localRank,
          info.localSize,
          collectiveTimeoutSeconds(),
          hostBroadcast};
}

} // namespace

Status createCudaSession(const BundleReader &reader,
                         const std::string &targetName,
                         std::unique_ptr<Backend> &out) {
  const CudaLibrary &library = cudaLibrary();
  if (!library.missingFile.empty())
    return unsupported("target '", targetName, "' needs the CUDA backend, but ",
                       library.missingFile,
                       " is missing (was kiln built without CUDA?)");
  if (!library.missingDriver.empty())
    return unsupported("target '", targetName,
                       "' needs an NVIDIA driver: ", library.missingDriver);
  if (!library.otherError.empty())
    return unsupported("target '", targetName, "': ", library.otherError);

  std::vector<BackendSection> sections;
  const uint8_t *manifest = nullptr;
  size_t manifestSize = 0;
  for (uint32_t i = 0; i < reader.sections().size(); ++i) {
    ByteSpan bytes = reader.sectionBytes(i);
    sections.push_back({reader.sections()[i].kind, bytes.data, bytes.size});
    if (reader.sections()[i].kind ==
        static_cast<uint32_t>(SectionKind::Manifest)) {
      manifest = bytes.data;
      manifestSize = bytes.size;
    }
  }
  BackendBundle bundle{reader.name().c_str(), manifest, manifestSize,
                       sections.data(), sections.size()};
  BackendHost host = currentHost();
  Backend *backend = nullptr;
  Status status;
  library.create(&bundle, targetName.c_str(), &host, &backend, &status);
  out.reset(backend);
  if (!backend && status.ok())
    return internalError(library.path, " created no session and no error");
  return status;
}

#else // !KILN_RUNTIME_WITH_CUDA

Status createCudaSession(const BundleReader &reader,
                         const std::string &targetName,
                         std::unique_ptr<Backend> &out) {
  return unsupported("target '", targetName,
                     "' is CUDA code, but this libkilnrt was built without "
                     "CUDA support (configure with a CUDA toolkit and "
                     "KILN_ENABLE_CUDA=AUTO or ON)");
}

#endif // KILN_RUNTIME_WITH_CUDA

} // namespace kiln::runtime
