//===- InitAll.cpp - registration of every dialect and pass ---------------===//

#include "kiln/InitAll.h"

#include "kiln/KilnDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/Passes.h"

void kiln::registerAllDialects(mlir::DialectRegistry &registry) {
  registry.insert<KilnDialect, mlir::func::FuncDialect, mlir::arith::ArithDialect,
                  mlir::math::MathDialect, mlir::tensor::TensorDialect,
                  mlir::linalg::LinalgDialect, mlir::scf::SCFDialect>();
}

void kiln::registerAllPasses() {
  // Upstream passes useful on kiln IR: canonicalize, cse, inline, symbol-dce...
  mlir::registerTransformsPasses();
}
