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

#include <functional>
#include <memory>
#include <string>

namespace kiln::runtime::cuda {

/// The device memory the gemms of a session share as cuBLASLt's scratch.
struct GemmWorkspace {
  CUdeviceptr pointer = 0;
  size_t bytes = 0;
};

/// Where a gemm's matrices and vectors are: device addresses, fixed for the
/// session's life; 0 for a vector the command does not have.
struct GemmAddresses {
  /// `aux`: a GELU epilogue's auxiliary matrix (0: none).
  CUdeviceptr a = 0, b = 0, c = 0, bias = 0, biasGrad = 0, aux = 0;
};

/// How a gemm's bias gradient is computed.
struct BiasGradOptions {
  /// Sets `out` to `count` ones of element type `elementType` (a
  /// bundle::ElementType) in device memory that lives as long as the
  /// session: the vector a separate product sums with.
  std::function<Status(int elementType, int64_t count, CUdeviceptr &out)> ones;
  /// Compute it as that separate product even where cuBLASLt has an
  /// algorithm for the epilogue (KILN_CUDA_BIAS_GRAD=product), so the two
  /// can be compared.
  bool separateProduct = false;
};

class GemmPlan {
public:
  /// Plans `gemm` at `addresses`. A bias gradient is cuBLASLt's epilogue
  /// where its heuristic has an algorithm for it; otherwise (or as
  /// `biasGrad` asks) the product runs without it and a second product
  /// sums the operand with a vector of ones.
  static Status create(cublasLtHandle_t handle, const bundle::Gemm &gemm,
                       const GemmAddresses &addresses,
                       const GemmWorkspace &workspace,
                       const BiasGradOptions &biasGrad,
                       std::unique_ptr<GemmPlan> &out);
  ~GemmPlan();
  GemmPlan(const GemmPlan &) = delete;
  GemmPlan &operator=(const GemmPlan &) = delete;

  /// Enqueues the matmul (and the bias gradient's, if separate) on
  /// `stream` (also while capturing a graph).
  Status enqueue(cublasLtHandle_t handle, const GemmWorkspace &workspace,
                 CUstream stream) const;

  /// "gemm (m 8, n 32, k 16, batch 2, f32 x f32 -> f32)", for messages.
  const std::string &description() const { return text; }

  /// Whether the bias gradient is a product of its own.
  bool separateBiasGrad() const { return biasGradProduct != nullptr; }

private:
  GemmPlan() = default;
  /// Describes and plans the matmul, with the bias-gradient epilogue when
  /// `epilogueBiasGrad`; `found` is whether the heuristic had an algorithm.
  Status plan(cublasLtHandle_t handle, const bundle::Gemm &gemm,
              const GemmWorkspace &workspace, bool epilogueBiasGrad,
              bool &found);
  void destroyDescriptors();

  cublasLtMatmulDesc_t operation = nullptr;
  /// cuBLASLt is column-major: the planned product is the transposed one,
  /// C^T = op(B)^T op(A)^T, whose first operand is B's storage.
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, result = nullptr;
  cublasLtMatmulAlgo_t algorithm = {};
  GemmAddresses addresses;
  float alpha = 1, beta = 0;
  std::string text;
  /// The bias gradient as a product of its own, run after this one.
  std::unique_ptr<GemmPlan> biasGradProduct;
};

} // namespace kiln::runtime::cuda

#endif // KILN_RUNTIME_SRC_CUDA_GEMM_H
