//===- CudaErrors.cpp - CUDA driver, cuBLASLt and NCCL results as Status --===//

#include "CudaErrors.h"

namespace kiln::runtime::cuda {

namespace {

/// The status code of a driver error: what the caller can do about it.
StatusCode codeOf(CUresult result) {
  switch (result) {
  case CUDA_ERROR_OUT_OF_MEMORY:
    return StatusCode::OutOfMemory;
  case CUDA_ERROR_NOT_FOUND:
    return StatusCode::NotFound;
  // The machine cannot run this: no usable device or driver, or code the
  // device or driver does not take.
  case CUDA_ERROR_NO_DEVICE:
  case CUDA_ERROR_INVALID_DEVICE:
  case CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER:
  case CUDA_ERROR_STUB_LIBRARY:
  case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
  case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
  case CUDA_ERROR_DEVICE_UNAVAILABLE:
  case CUDA_ERROR_NO_BINARY_FOR_GPU:
  case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
  case CUDA_ERROR_JIT_COMPILER_NOT_FOUND:
  case CUDA_ERROR_NOT_SUPPORTED:
    return StatusCode::Unsupported;
  default:
    return StatusCode::Internal;
  }
}

} // namespace

Status checkCu(CUresult result, const char *call) {
  if (result == CUDA_SUCCESS)
    return Status();
  const char *name = nullptr, *description = nullptr;
  if (cuGetErrorName(result, &name) != CUDA_SUCCESS || !name)
    name = "an unknown CUDA error";
  if (cuGetErrorString(result, &description) != CUDA_SUCCESS || !description)
    description = "no description";
  return Status(codeOf(result),
                strCat(call, ": ", name, " (", description, ", code ",
                       static_cast<int>(result), ")"));
}

Status checkCublas(cublasStatus_t result, const char *call) {
  if (result == CUBLAS_STATUS_SUCCESS)
    return Status();
  StatusCode code = StatusCode::Internal;
  if (result == CUBLAS_STATUS_ALLOC_FAILED)
    code = StatusCode::OutOfMemory;
  else if (result == CUBLAS_STATUS_NOT_SUPPORTED ||
           result == CUBLAS_STATUS_ARCH_MISMATCH)
    code = StatusCode::Unsupported;
  return Status(code, strCat(call, ": ", cublasLtGetStatusName(result), " (",
                             cublasLtGetStatusString(result), ")"));
}

Status checkNccl(ncclResult_t result, const char *call, ncclComm_t comm) {
  if (result == ncclSuccess)
    return Status();
  std::string message = strCat(call, ": ", ncclGetErrorString(result),
                               " (NCCL result ", static_cast<int>(result), ")");
  const char *detail = ncclGetLastError(comm);
  if (detail && *detail)
    message += strCat(": ", detail);
  return collectiveError(message);
}

} // namespace kiln::runtime::cuda
