//===- MatmulAccumulate.cpp - additions folded into matrix products -------===//
//
// A matrix product accumulates into its output (C += A B), and the BLAS call
// it becomes does so for free (beta = 1). So `add(matmul(A, B), X)`, with the
// product's output a zero fill, is `matmul(A, B)` accumulating into X. That
// saves the addition's loop and buffer when X is computed and read by
// nothing else (the sum of two gradient contributions: X another product),
// so the product can write it in place. A broadcast X (a linear layer's
// bias) is left alone: the addition fuses into its consumer, reading the
// bias in the same pass, where accumulating would first write the broadcast
// out in full.
//
//===----------------------------------------------------------------------===//

#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/Utils/Gemm.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace kiln {
#define GEN_PASS_DEF_KILNMATMULACCUMULATE
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

/// Whether accumulating into `v` saves work: it is computed (not an
/// argument, nor a broadcast or transposition) and read only by the
/// addition, so the product can write it in place.
bool worthAccumulatingInto(Value v) {
  Operation *def = v.getDefiningOp();
  if (!def || !v.hasOneUse() ||
      isa<linalg::BroadcastOp, linalg::TransposeOp>(def))
    return false;
  auto generic = dyn_cast<linalg::GenericOp>(def);
  return !generic || !generic.getBody()->without_terminator().empty();
}

/// Whether `op` is `x + y` elementwise over tensors of one shape: both
/// inputs and the output indexed by the identity, only parallel loops, and
/// the body one addf of the two inputs.
bool isPlainAddition(linalg::GenericOp op) {
  if (!op.hasPureTensorSemantics() || op.getNumDpsInputs() != 2 ||
      op.getNumDpsInits() != 1 ||
      op.getNumLoops() != op.getNumParallelLoops() ||
      !llvm::all_of(op.getIndexingMapsArray(),
                    [](AffineMap map) { return map.isIdentity(); }))
    return false;
  Block *body = op.getBody();
  if (body->getOperations().size() != 2)
    return false;
  auto add = dyn_cast<arith::AddFOp>(body->front());
  auto yield = dyn_cast<linalg::YieldOp>(body->getTerminator());
  if (!add || !yield || yield.getValues().size() != 1 ||
      yield.getValues()[0] != add.getResult())
    return false;
  Value a = body->getArgument(0), b = body->getArgument(1);
  return (add.getLhs() == a && add.getRhs() == b) ||
         (add.getLhs() == b && add.getRhs() == a);
}

struct KilnMatmulAccumulatePass
    : kiln::impl::KilnMatmulAccumulateBase<KilnMatmulAccumulatePass> {
  void runOnOperation() override {
    SmallVector<linalg::GenericOp> additions;
    getOperation().walk([&](linalg::GenericOp op) {
      if (isPlainAddition(op))
        additions.push_back(op);
    });
    for (linalg::GenericOp add : additions) {
      Value lhs = add.getDpsInputs()[0], rhs = add.getDpsInputs()[1];
      if (lhs.getType() != add.getResult(0).getType() ||
          rhs.getType() != lhs.getType())
        continue;
      // Accumulate into the other operand; when both are products, the
      // later one accumulates into the earlier.
      tensor::ExpandShapeOp lhsExpand, rhsExpand;
      linalg::GenericOp lhsProduct = kiln::zeroFilledProduct(lhs, lhsExpand);
      linalg::GenericOp rhsProduct = kiln::zeroFilledProduct(rhs, rhsExpand);
      linalg::GenericOp product = rhsProduct;
      tensor::ExpandShapeOp expand = rhsExpand;
      Value into = lhs;
      if (!product || (lhsProduct && rhsProduct->isBeforeInBlock(lhsProduct))) {
        product = lhsProduct;
        expand = lhsExpand;
        into = rhs;
      }
      if (!product || !worthAccumulatingInto(into))
        continue;
      // At the addition, where both the product's inputs and `into` are
      // defined; `into` seen in the product's shape.
      OpBuilder b(add);
      Location loc = add.getLoc();
      if (expand)
        into = tensor::CollapseShapeOp::create(
            b, loc, product.getResult(0).getType(), into,
            expand.getReassociationIndices());
      auto accumulating = cast<linalg::GenericOp>(b.clone(*product));
      accumulating.getDpsInitsMutable()[0].set(into);
      accumulating->setLoc(loc);
      Value result = accumulating.getResult(0);
      if (expand)
        result = tensor::ExpandShapeOp::create(
            b, loc, add.getResult(0).getType(), result,
            expand.getReassociationIndices());
      add.getResult(0).replaceAllUsesWith(result);
      add.erase();
      if (expand)
        expand.erase();
      Operation *fill = product.getDpsInits()[0].getDefiningOp();
      product.erase();
      if (fill->use_empty())
        fill->erase();
      ++numFolded;
    }
  }
};

} // namespace
