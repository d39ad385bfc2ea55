//===- Gemm.h - matrix products on buffers, described for libraries -*- C++
//-*-===//
//
// After bufferization a matrix product is a linalg.generic marked
// `kiln.matmul` (with its transpose flags) that accumulates into its output.
// Each target hands it to its own library (OpenBLAS on the CPU, cuBLASLt on
// CUDA); both read the same description.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TRANSFORMS_GEMM_H
#define KILN_TRANSFORMS_GEMM_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <optional>

namespace kiln {

/// C[b] = op(A[b]) op(B[b]) + beta C[b] for b < batch, row-major. op(A) is
/// m x k (A is stored k x m when transposeLhs), op(B) k x n.
struct GemmDescription {
  mlir::Value lhs, rhs, out;
  bool transposeLhs = false, transposeRhs = false;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  /// Each matrix's leading dimension (elements from one stored row to the
  /// next: at least its columns, more in a row-padded view) and batch
  /// stride (elements from one product's matrix to the next), in the
  /// order A, B, C.
  int64_t ld[3] = {0, 0, 0};
  int64_t batchStride[3] = {0, 0, 0};
  /// The zero fill of `out` the product makes dead (beta 0): the nearest
  /// earlier write of `out` when nothing else touches it in between. Null
  /// when the product accumulates into what `out` holds (beta 1).
  mlir::linalg::FillOp zeroFill;
  /// The product overwrites `out` (beta 0) although no fill precedes it:
  /// `kiln.matmul` carries `overwrite`, which kiln-gpu-outline-kernels sets
  /// when it erases the zero fill. Only library lowerings read it.
  bool overwrite = false;
  /// The bias broadcast that fills `out` just before the product when
  /// nothing touches `out` in between: a linalg.generic marked
  /// `kiln.gemm_bias` (kiln-gemm-bias) whose input, `bias`, holds one value
  /// per column. The product is then `bias[j] + op(A) op(B)`, which a
  /// library's bias epilogue computes with beta 0. Null otherwise.
  mlir::linalg::GenericOp biasInit;
  mlir::Value bias;
  /// The product's second output when its `kiln.matmul` flags have
  /// `bias_grad` (kiln-gemm-bias-grad; unbatched products only): the sums
  /// over k of op(B), one per column of `out`, or with `biasGradOfLhs` of
  /// op(A), one per row, which a library's bias-gradient epilogue computes.
  /// It is overwritten: `biasGradFill` is its zero fill just before the
  /// product, null once kiln-gpu-outline-kernels erased it and set the flag
  /// `bias_grad_overwrite`.
  mlir::Value biasGrad;
  bool biasGradOfLhs = false;
  mlir::linalg::FillOp biasGradFill;
};

/// The product behind `v` on tensors: a `kiln.matmul` contraction into a
/// zero fill, read only through `v`, possibly through a tensor.expand_shape
/// (a [batch * rows, n] product seen as [batch, rows, n]) returned in
/// `expand`; null otherwise.
mlir::linalg::GenericOp zeroFilledProduct(mlir::Value v,
                                          mlir::tensor::ExpandShapeOp &expand);

/// Where a matrix, or a batch of them, lies in its buffer: rows
/// `leadingDim` elements apart (the last dimension's stride is 1), the
/// batch's matrices `batchStride` apart, from element `offset` of the
/// buffer the view starts in.
struct MatrixLayout {
  int64_t leadingDim = 0, batchStride = 0, offset = 0;
};

/// The layout of `type` when it is a statically shaped memref of rank 2 or
/// more stored as matrices: static strides and offset, the last dimension
/// contiguous, rows no closer than a row's length, and the batch
/// dimensions evenly spaced (one stride for them all). A contiguous buffer
/// has one, and so does a view of its rows' first columns.
std::optional<MatrixLayout> matrixLayout(mlir::MemRefType type);

/// Describes `op` when it is a `kiln.matmul` on statically shaped buffers
/// stored as matrices (matrixLayout) whose operands have the output's
/// element type, or are bf16 or f16 with an f32 output, and whose
/// bias-gradient output, if any, is contiguous and overwritten;
/// std::nullopt otherwise.
std::optional<GemmDescription> describeGemm(mlir::linalg::GenericOp op);

/// Whether `op` is a product with a bias-gradient output (kiln-gemm-bias-grad:
/// the `kiln.matmul` flag `bias_grad` and a second output).
bool hasBiasGradOutput(mlir::linalg::GenericOp op);

/// `op`, a product on buffers with a bias-gradient output (`kiln.matmul`
/// flag `bias_grad`), as the product alone and, after it, the sum the
/// epilogue computes: over the k rows of the operand as stored (k x n for
/// the right operand, k x m for the transposed left one), widened to the
/// vector's type, into the vector (zero-filled first when the flag
/// `bias_grad_overwrite` says its fill was erased). Returns the product;
/// `op` is erased. For whoever cannot hand the product to a library with
/// the epilogue: the second output's map leaves out a parallel loop, which
/// only a sequential loop nest computes as meant.
mlir::linalg::GenericOp splitBiasGrad(mlir::linalg::GenericOp op);

/// A product's GELU epilogue on buffers (kiln-gemm-gelu): the first op
/// after `product` (whose `kiln.matmul` flags have `gelu` or `dgelu`) in its
/// block marked `kiln.gemm_epilogue` that reads the product's output;
/// `aux` receives the buffer the epilogue reads or writes besides its
/// output: the product's own output under `gelu_aux`, the derivative's
/// other input under `dgelu`, null under plain `gelu`; `between`, if given,
/// the ops between the two that are not pure. Null when there is no such
/// op.
mlir::linalg::GenericOp
geluEpilogueOf(mlir::linalg::GenericOp product, mlir::Value &aux,
               llvm::SmallVectorImpl<mlir::Operation *> *between = nullptr);

/// Drops `product`'s GELU epilogue flags and its epilogue's mark: the two
/// run as they are.
void dropGeluEpilogue(mlir::linalg::GenericOp product,
                      mlir::linalg::GenericOp epilogue);

} // namespace kiln

#endif // KILN_TRANSFORMS_GEMM_H
