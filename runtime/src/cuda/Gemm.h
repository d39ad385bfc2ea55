//===- Gemm.h - a manifest gemm as a planned cuBLASLt matmul ----*- C++ -*-===//
//
// A Gemm command (row-major C = alpha op(A) op(B) + beta C, f32
// accumulation, strided batches) becomes one cublasLtMatmul. Everything
// cuBLASLt needs (the operation and layout descriptors and the algorithm its
// heuristic picks for these pointers' alignment) is made once, when the
// session is created; running it only enqueues the matmul.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SRC_CUDA_GEMM_H
#define KILN_RUNTIME_SRC_CUDA_GEMM_H

#include "kiln/runtime/Status.h"
#include "kiln/runtime/bundle.pb.h"

#include <cublasLt.h>
#include <cuda.h>

#include <memory>
#include <string>

namespace kiln::runtime::cuda {

/// The device memory the gemms of a session share as cuBLASLt's scratch.
struct GemmWorkspace {
  CUdeviceptr pointer = 0;
  size_t bytes = 0;
};

class GemmPlan {
public:
  /// Plans `gemm` on the matrices at `a`, `b` and `c` and the bias vector
  /// at `bias` (0: none; device addresses, fixed for the session's life).
  static Status create(cublasLtHandle_t handle, const bundle::Gemm &gemm,
                       CUdeviceptr a, CUdeviceptr b, CUdeviceptr c,
                       CUdeviceptr bias, const GemmWorkspace &workspace,
                       std::unique_ptr<GemmPlan> &out);
  ~GemmPlan();
  GemmPlan(const GemmPlan &) = delete;
  GemmPlan &operator=(const GemmPlan &) = delete;

  /// Enqueues the matmul on `stream` (also while capturing a graph).
  Status enqueue(cublasLtHandle_t handle, const GemmWorkspace &workspace,
                 CUstream stream) const;

  /// "gemm (m 8, n 32, k 16, batch 2, f32 x f32 -> f32)", for messages.
  const std::string &description() const { return text; }

private:
  GemmPlan() = default;
  Status plan(cublasLtHandle_t handle, const bundle::Gemm &gemm,
              const GemmWorkspace &workspace);

  cublasLtMatmulDesc_t operation = nullptr;
  /// cuBLASLt is column-major: the planned product is the transposed one,
  /// C^T = op(B)^T op(A)^T, whose first operand is B's storage.
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, result = nullptr;
  cublasLtMatmulAlgo_t algorithm = {};
  CUdeviceptr a = 0, b = 0, c = 0, bias = 0;
  float alpha = 1, beta = 0;
  std::string text;
};

} // namespace kiln::runtime::cuda

#endif // KILN_RUNTIME_SRC_CUDA_GEMM_H
