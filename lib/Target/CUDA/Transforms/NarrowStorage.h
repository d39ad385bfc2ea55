//===- NarrowStorage.h - products that store in 16 bits ---------*- C++ -*-===//

#ifndef KILN_TARGET_CUDA_TRANSFORMS_NARROWSTORAGE_H
#define KILN_TARGET_CUDA_TRANSFORMS_NARROWSTORAGE_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace kiln {

/// `value` (a block argument or an op's result, f32) retyped to `element`,
/// the 16-bit type it now holds, and widened back to f32 where it is
/// defined (at the block's start, or just after the op), exactly: its uses
/// read the widened value.
void widenWhereDefined(mlir::Value value, mlir::FloatType element);

/// Has the products of `function` whose operands are `element` (kiln-amp
/// rounded them) and whose results are activations or their gradients
/// store those results in `element`: each sums in f32 and rounds once
/// (`round_once` in its kiln.matmul flags), and every linalg.generic that
/// reads the result widens the element it reads. A bias broadcast into
/// such a product reads `round(bias)`, the bias rounded to `element`.
/// Returns how many products it narrowed.
unsigned
narrowProductStorage(mlir::func::FuncOp function, mlir::FloatType element,
                     llvm::function_ref<mlir::Value(mlir::Value)> round);

} // namespace kiln

#endif // KILN_TARGET_CUDA_TRANSFORMS_NARROWSTORAGE_H
