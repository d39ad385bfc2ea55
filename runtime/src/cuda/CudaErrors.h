//===- CudaErrors.h - driver, cuBLASLt, NCCL results as Status --*- C++ -*-===//
//
// Every driver, cuBLASLt and NCCL call of the CUDA backend is checked; a
// failure becomes a Status naming the call, the error's name and its
// description, e.g. "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
// Callers add what they were doing (command, kernel, gemm, entry point) as
// context.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SRC_CUDA_CUDAERRORS_H
#define KILN_RUNTIME_SRC_CUDA_CUDAERRORS_H

#include "kiln/runtime/Status.h"

#include <cublasLt.h>
#include <cuda.h>
#include <nccl.h>

namespace kiln::runtime::cuda {

/// Success, or the failure of the driver call `call`.
Status checkCu(CUresult result, const char *call);

/// Success, or the failure of the cuBLASLt call `call`.
Status checkCublas(cublasStatus_t result, const char *call);

/// Success, or the failure of the NCCL call `call` (a Collective status),
/// with NCCL's own account of it (ncclGetLastError of `comm`, which may be
/// null).
Status checkNccl(ncclResult_t result, const char *call, ncclComm_t comm);

} // namespace kiln::runtime::cuda

#endif // KILN_RUNTIME_SRC_CUDA_CUDAERRORS_H
