//===- Gemm.cpp - a manifest gemm as a planned cuBLASLt matmul ------------===//

#include "Gemm.h"

#include "CudaErrors.h"
#include "kiln/runtime/ElementType.h"

#include <algorithm>

namespace kiln::runtime::cuda {

namespace bp = kiln::bundle;

namespace {

Status dataType(const char *matrix, int elementType, cudaDataType_t &out) {
  switch (elementType) {
  case bp::F32:
    out = CUDA_R_32F;
    return Status();
  case bp::F16:
    out = CUDA_R_16F;
    return Status();
  case bp::BF16:
    out = CUDA_R_16BF;
    return Status();
  default:
    return unsupported("matrix ", matrix, " has element type ",
                       elementTypeName(elementType),
                       "; gemms take f32, f16 or bf16");
  }
}

/// The largest power of two, up to 256, that divides `address`: what the
/// heuristic may assume about a pointer's alignment.
uint32_t alignmentOf(CUdeviceptr address) {
  if (address == 0)
    return 256;
  return static_cast<uint32_t>(std::min<CUdeviceptr>(256, address & -address));
}

/// A column-major layout for row-major storage of `rows` x `cols` with
/// leading dimension `ld`: the same bytes read as its transpose.
Status rowMajorLayout(cudaDataType_t type, int64_t rows, int64_t cols,
                      int64_t ld, int64_t batch, int64_t stride,
                      cublasLtMatrixLayout_t &out) {
  KILN_RETURN_IF_ERROR(checkCublas(
      cublasLtMatrixLayoutCreate(&out, type, static_cast<uint64_t>(cols),
                                 static_cast<uint64_t>(rows), ld),
      "cublasLtMatrixLayoutCreate"));
  if (batch <= 1)
    return Status();
  int32_t count = static_cast<int32_t>(batch);
  KILN_RETURN_IF_ERROR(checkCublas(
      cublasLtMatrixLayoutSetAttribute(out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                       &count, sizeof(count)),
      "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)"));
  return checkCublas(cublasLtMatrixLayoutSetAttribute(
                         out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                         &stride, sizeof(stride)),
                     "cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)");
}

Status setOperation(cublasLtMatmulDesc_t desc,
                    cublasLtMatmulDescAttributes_t attribute, bool transpose) {
  cublasOperation_t operation = transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
  return checkCublas(cublasLtMatmulDescSetAttribute(desc, attribute, &operation,
                                                    sizeof(operation)),
                     "cublasLtMatmulDescSetAttribute(TRANS)");
}

/// Owns a matmul preference for the heuristic's one call.
struct Preference {
  ~Preference() {
    if (handle)
      cublasLtMatmulPreferenceDestroy(handle);
  }
  Status set(cublasLtMatmulPreferenceAttributes_t attribute, const void *value,
             size_t size) {
    return checkCublas(
        cublasLtMatmulPreferenceSetAttribute(handle, attribute, value, size),
        "cublasLtMatmulPreferenceSetAttribute");
  }
  cublasLtMatmulPreference_t handle = nullptr;
};

Status setAttribute(cublasLtMatmulDesc_t desc,
                    cublasLtMatmulDescAttributes_t attribute, const void *value,
                    size_t size, const char *name) {
  return checkCublas(
      cublasLtMatmulDescSetAttribute(desc, attribute, value, size),
      strCat("cublasLtMatmulDescSetAttribute(", name, ")").c_str());
}

/// The product that computes `gemm`'s bias gradient with a vector of ones:
/// 1 x k times op(B) (its column sums), or op(A) times k x 1 (its row
/// sums), written to the bias gradient (beta 0, alpha 1).
bp::Gemm biasGradGemm(const bp::Gemm &gemm) {
  bp::Gemm sum;
  sum.set_c_type(gemm.c_type());
  sum.set_k(gemm.k());
  sum.set_batch(1);
  sum.set_alpha(1.0f);
  sum.set_beta(0.0f);
  if (gemm.bias_grad_of_a()) {
    sum.set_a_type(gemm.a_type());
    sum.set_b_type(gemm.a_type());
    sum.set_transpose_a(gemm.transpose_a());
    sum.set_m(gemm.m());
    sum.set_n(1);
    sum.set_lda(gemm.lda());
    sum.set_ldb(1);
    sum.set_ldc(1);
  } else {
    sum.set_a_type(gemm.b_type());
    sum.set_b_type(gemm.b_type());
    sum.set_transpose_b(gemm.transpose_b());
    sum.set_m(1);
    sum.set_n(gemm.n());
    sum.set_lda(gemm.k());
    sum.set_ldb(gemm.ldb());
    sum.set_ldc(gemm.n());
  }
  return sum;
}

} // namespace

Status GemmPlan::create(cublasLtHandle_t handle, const bp::Gemm &gemm,
                        const GemmAddresses &addresses,
                        const GemmWorkspace &workspace,
                        const BiasGradOptions &biasGrad,
                        std::unique_ptr<GemmPlan> &out) {
  std::unique_ptr<GemmPlan> plan(new GemmPlan());
  plan->addresses = addresses;
  plan->alpha = gemm.alpha();
  plan->beta = gemm.beta();
  plan->text = strCat(
      "gemm (m ", gemm.m(), ", n ", gemm.n(), ", k ", gemm.k(), ", batch ",
      gemm.batch() == 0 ? 1 : gemm.batch(), ", ",
      elementTypeName(gemm.a_type()), " x ", elementTypeName(gemm.b_type()),
      " -> ", elementTypeName(gemm.c_type()),
      gemm.transpose_a() ? ", A transposed" : "",
      gemm.transpose_b() ? ", B transposed" : "",
      gemm.beta() != 0 ? ", accumulating" : "",
      addresses.bias ? ", bias epilogue" : "",
      gemm.epilogue() == bp::GEMM_GELU
          ? (addresses.aux ? ", GELU epilogue storing its input"
                           : ", GELU epilogue")
      : gemm.epilogue() == bp::GEMM_DGELU ? ", GELU derivative epilogue"
                                          : "");
  bool wantsBiasGrad = addresses.biasGrad != 0;
  bool found = false;
  if (wantsBiasGrad && !biasGrad.separateProduct) {
    // Any refusal of the epilogue (an attribute, or the heuristic, for
    // these types and layouts) leaves the second product to do it; the
    // plain plan below reports real errors.
    Status attempt = plan->plan(handle, gemm, workspace, true, found);
    if (attempt.ok() && found) {
      plan->text += strCat(", bias gradient of ",
                           gemm.bias_grad_of_a() ? "A" : "B", " epilogue)");
      out = std::move(plan);
      return Status();
    }
    plan->destroyDescriptors();
  }
  KILN_RETURN_IF_ERROR(plan->plan(handle, gemm, workspace, false, found)
                           .withContext(plan->text + ")"));
  if (!found)
    return unsupported("cuBLASLt has no algorithm for it (element types, "
                       "layouts or alignment",
                       gemm.epilogue() != bp::GEMM_NONE
                           ? ", or its GELU epilogue: compile without "
                             "kilnc --cuda-gelu-epilogue"
                           : "",
                       ")")
        .withContext(plan->text + ")");
  if (wantsBiasGrad) {
    // cuBLASLt has no epilogue for this one, or it was asked not to use it.
    bp::Gemm sum = biasGradGemm(gemm);
    CUdeviceptr ones = 0;
    KILN_RETURN_IF_ERROR(biasGrad.ones(sum.a_type(), gemm.k(), ones)
                             .withContext(plan->text + ")'s bias gradient"));
    GemmAddresses sumAddresses;
    sumAddresses.a = gemm.bias_grad_of_a() ? addresses.a : ones;
    sumAddresses.b = gemm.bias_grad_of_a() ? ones : addresses.b;
    sumAddresses.c = addresses.biasGrad;
    KILN_RETURN_IF_ERROR(create(handle, sum, sumAddresses, workspace,
                                BiasGradOptions(), plan->biasGradProduct)
                             .withContext(plan->text + ")'s bias gradient"));
    plan->text +=
        strCat(", bias gradient of ", gemm.bias_grad_of_a() ? "A" : "B",
               " as a second product");
  }
  plan->text += ")";
  out = std::move(plan);
  return Status();
}

Status GemmPlan::plan(cublasLtHandle_t handle, const bp::Gemm &gemm,
                      const GemmWorkspace &workspace, bool epilogueBiasGrad,
                      bool &found) {
  found = false;
  cudaDataType_t aType, bType, cType;
  KILN_RETURN_IF_ERROR(dataType("A", gemm.a_type(), aType));
  KILN_RETURN_IF_ERROR(dataType("B", gemm.b_type(), bType));
  KILN_RETURN_IF_ERROR(dataType("C", gemm.c_type(), cType));
  int64_t batch = gemm.batch() == 0 ? 1 : gemm.batch();

  // Row-major C (m x n) is column-major C^T (n x m), and
  // C^T = op(B)^T op(A)^T: cuBLASLt's first operand is B's storage, read
  // column-major (the transpose of B as stored), transposed once more
  // exactly when the command transposes B; likewise A second.
  KILN_RETURN_IF_ERROR(checkCublas(
      cublasLtMatmulDescCreate(&operation, CUBLAS_COMPUTE_32F, CUDA_R_32F),
      "cublasLtMatmulDescCreate"));
  KILN_RETURN_IF_ERROR(
      setOperation(operation, CUBLASLT_MATMUL_DESC_TRANSA, gemm.transpose_b()));
  KILN_RETURN_IF_ERROR(
      setOperation(operation, CUBLASLT_MATMUL_DESC_TRANSB, gemm.transpose_a()));
  CUdeviceptr vector = 0;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  if (addresses.bias) {
    // The bias epilogue adds bias[i] to row i of the column-major result,
    // C^T: to column i of row-major C, as the command means. One vector
    // serves every product of a batch (batch stride 0).
    epilogue = CUBLASLT_EPILOGUE_BIAS;
    vector = addresses.bias;
    int64_t biasStride = 0;
    KILN_RETURN_IF_ERROR(
        setAttribute(operation, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE,
                     &biasStride, sizeof(biasStride), "BIAS_BATCH_STRIDE"));
  } else if (epilogueBiasGrad) {
    // cuBLASLt's first operand is B: the sums over k of op(B), one per row
    // of C^T (column of C), are its BGRADA; those of op(A) its BGRADB.
    epilogue = gemm.bias_grad_of_a() ? CUBLASLT_EPILOGUE_BGRADB
                                     : CUBLASLT_EPILOGUE_BGRADA;
    vector = addresses.biasGrad;
  }
  // The GELU epilogues (kiln-gemm-gelu), with the bias one if any. Their
  // auxiliary matrix is laid out as C (C^T column-major, ld n).
  if (gemm.epilogue() == bp::GEMM_GELU)
    epilogue = addresses.aux ? (vector ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                                       : CUBLASLT_EPILOGUE_GELU_AUX)
                             : (vector ? CUBLASLT_EPILOGUE_GELU_BIAS
                                       : CUBLASLT_EPILOGUE_GELU);
  else if (gemm.epilogue() == bp::GEMM_DGELU)
    epilogue = CUBLASLT_EPILOGUE_DGELU;
  if (addresses.aux) {
    int64_t auxLd = gemm.n();
    int32_t auxType = cType;
    KILN_RETURN_IF_ERROR(setAttribute(
        operation, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &addresses.aux,
        sizeof(addresses.aux), "EPILOGUE_AUX_POINTER"));
    KILN_RETURN_IF_ERROR(
        setAttribute(operation, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &auxLd,
                     sizeof(auxLd), "EPILOGUE_AUX_LD"));
    KILN_RETURN_IF_ERROR(
        setAttribute(operation, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE,
                     &auxType, sizeof(auxType), "EPILOGUE_AUX_DATA_TYPE"));
  }
  if (epilogue != CUBLASLT_EPILOGUE_DEFAULT)
    KILN_RETURN_IF_ERROR(setAttribute(operation, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                      &epilogue, sizeof(epilogue), "EPILOGUE"));
  if (vector) {
    KILN_RETURN_IF_ERROR(setAttribute(operation,
                                      CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                      &vector, sizeof(vector), "BIAS_POINTER"));
    KILN_RETURN_IF_ERROR(setAttribute(operation,
                                      CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                      &cType, sizeof(cType), "BIAS_DATA_TYPE"));
  }
  int64_t bRows = gemm.transpose_b() ? gemm.n() : gemm.k();
  int64_t bCols = gemm.transpose_b() ? gemm.k() : gemm.n();
  int64_t aRows = gemm.transpose_a() ? gemm.k() : gemm.m();
  int64_t aCols = gemm.transpose_a() ? gemm.m() : gemm.k();
  KILN_RETURN_IF_ERROR(rowMajorLayout(bType, bRows, bCols, gemm.ldb(), batch,
                                      gemm.stride_b(), first));
  KILN_RETURN_IF_ERROR(rowMajorLayout(aType, aRows, aCols, gemm.lda(), batch,
                                      gemm.stride_a(), second));
  KILN_RETURN_IF_ERROR(rowMajorLayout(cType, gemm.m(), gemm.n(), gemm.ldc(),
                                      batch, gemm.stride_c(), result));

  Preference preference;
  KILN_RETURN_IF_ERROR(
      checkCublas(cublasLtMatmulPreferenceCreate(&preference.handle),
                  "cublasLtMatmulPreferenceCreate"));
  uint64_t workspaceBytes = workspace.bytes;
  KILN_RETURN_IF_ERROR(preference.set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                      &workspaceBytes, sizeof(workspaceBytes)));
  // The addresses are fixed, so the heuristic may count on exactly their
  // alignment; it must not pick a kernel that needs more.
  const std::pair<cublasLtMatmulPreferenceAttributes_t, CUdeviceptr>
      alignments[] = {
          {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, addresses.b},
          {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, addresses.a},
          {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, addresses.c},
          {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, addresses.c}};
  for (const auto &[attribute, address] : alignments) {
    uint32_t bytes = alignmentOf(address);
    KILN_RETURN_IF_ERROR(preference.set(attribute, &bytes, sizeof(bytes)));
  }
  cublasLtMatmulHeuristicResult_t heuristic = {};
  int count = 0;
  KILN_RETURN_IF_ERROR(checkCublas(
      cublasLtMatmulAlgoGetHeuristic(handle, operation, first, second, result,
                                     result, preference.handle, 1, &heuristic,
                                     &count),
      "cublasLtMatmulAlgoGetHeuristic"));
  found = count > 0;
  algorithm = heuristic.algo;
  return Status();
}

void GemmPlan::destroyDescriptors() {
  if (result)
    cublasLtMatrixLayoutDestroy(result);
  if (second)
    cublasLtMatrixLayoutDestroy(second);
  if (first)
    cublasLtMatrixLayoutDestroy(first);
  if (operation)
    cublasLtMatmulDescDestroy(operation);
  result = second = first = nullptr;
  operation = nullptr;
}

GemmPlan::~GemmPlan() { destroyDescriptors(); }

Status GemmPlan::enqueue(cublasLtHandle_t handle,
                         const GemmWorkspace &workspace,
                         CUstream stream) const {
  // C is read (beta) and written in place: cuBLASLt allows D == C when their
  // layouts are the same.
  auto *cPointer = reinterpret_cast<void *>(addresses.c);
  KILN_RETURN_IF_ERROR(checkCublas(
      cublasLtMatmul(
          handle, operation, &alpha, reinterpret_cast<void *>(addresses.b),
          first, reinterpret_cast<void *>(addresses.a), second, &beta, cPointer,
          result, cPointer, result, &algorithm,
          reinterpret_cast<void *>(workspace.pointer), workspace.bytes, stream),
      "cublasLtMatmul"));
  if (biasGradProduct)
    return biasGradProduct->enqueue(handle, workspace, stream);
  return Status();
}

} // namespace kiln::runtime::cuda
