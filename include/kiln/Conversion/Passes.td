//===- Passes.td - kiln ops to linalg ----------------------*- tablegen -*-===//
//
// The lowering of kiln ops to linalg on tensors (lib/Conversion/).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CONVERSION_PASSES_TD
#define KILN_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertKilnToLinalg : Pass<"convert-kiln-to-linalg", "mlir::ModuleOp"> {
  let summary = "Lowers core kiln ops to linalg, tensor, arith and math";
  let description = [{
    Elementwise ops become `linalg.generic` over identical shapes, broadcasts
    and reversals `linalg.generic` with affine maps, reshapes
    `tensor.collapse_shape` / `tensor.expand_shape`, slices and concatenation
    tensor slice ops, reductions `linalg.generic` with reduction iterators,
    matrix products contractions marked `kiln.matmul`, convolutions and
    pooling windowed `linalg.generic`s. Run kiln-decompose first.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::scf::SCFDialect"];
}

#endif // KILN_CONVERSION_PASSES_TD
