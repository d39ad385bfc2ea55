//===- BlockOrder.h - where uses sit in a block -----------------*- C++ -*-===//

#ifndef KILN_TRANSFORMS_BLOCKORDER_H
#define KILN_TRANSFORMS_BLOCKORDER_H

#include "mlir/IR/Block.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/STLExtras.h"

namespace kiln {

/// Whether `user` is an op (or nested in one) that comes after `at` in
/// `at`'s block.
inline bool comesAfter(mlir::Operation *user, mlir::Operation *at) {
  mlir::Operation *ancestor = at->getBlock()->findAncestorOpInBlock(*user);
  return ancestor && at->isBeforeInBlock(ancestor);
}

/// Whether every use of `op`'s results is in an op (or nested in one) that
/// comes after `at` in `at`'s block: `op` may move to just after `at`
/// without a use coming before it.
inline bool usedOnlyAfter(mlir::Operation *op, mlir::Operation *at) {
  return llvm::all_of(op->getUsers(), [&](mlir::Operation *user) {
    return comesAfter(user, at);
  });
}

} // namespace kiln

#endif // KILN_TRANSFORMS_BLOCKORDER_H
