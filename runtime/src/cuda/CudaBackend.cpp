//===- CudaBackend.cpp - the entry points of libkilnrt-cuda ---------------===//
//
// The only symbols libkilnrt-cuda.so exports: its interface version and the
// factory libkilnrt calls to create a CUDA session (src/Backend.h). No
// exception leaves the library.
//
//===----------------------------------------------------------------------===//

#include "CudaSession.h"
#include "core/Backend.h"

#include <exception>
#include <new>

using namespace kiln::runtime;

#define KILN_BACKEND_EXPORT extern "C" __attribute__((visibility("default")))

KILN_BACKEND_EXPORT int kiln_backend_abi_version(void) {
  return kBackendAbiVersion;
}

KILN_BACKEND_EXPORT void kiln_backend_create(const BackendBundle *bundle,
                                             const char *targetName,
                                             const BackendHost *host,
                                             Backend **out, Status *status) {
  *out = nullptr;
  try {
    cuda::CudaOptions options;
    std::unique_ptr<cuda::CudaSession> session;
    Status result = cuda::CudaOptions::fromEnvironment(options);
    if (result.ok())
      result = cuda::CudaSession::create(*bundle, targetName, options, *host,
                                         session);
    if (result.ok())
      *out = session.release();
    *status = result;
  } catch (const std::bad_alloc &) {
    *status = outOfMemory("out of memory creating a CUDA session");
  } catch (const std::exception &error) {
    *status = internalError("unexpected error creating a CUDA session: ",
                            error.what());
  }
}
