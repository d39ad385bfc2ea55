//===- FuseElementwise.cpp - linalg elementwise fusion, Kiln's way --------===//
//
// Upstream elementwise fusion fuses every producer it can into its
// consumers. In a training step that would recompute forward values inside
// each backward kernel that reads them, break matrix products out of the
// form BLAS calls take, and redo scalar work per element of a broadcast.
// This pass runs the same patterns under a control function that refuses
// those fusions.
//
//===----------------------------------------------------------------------===//

#include "kiln/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace kiln {
#define GEN_PASS_DEF_KILNFUSEELEMENTWISE
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {

/// Whether the payload of `op` only forwards its inputs (a broadcast or a
/// transposition): it costs nothing to recompute.
bool onlyMovesData(linalg::GenericOp op) {
  return op.getBody()->without_terminator().empty();
}

/// Whether the producer of `operand` may be fused into its owner.
bool shouldFuse(OpOperand *operand) {
  // Matrix products must stay plain contractions to become BLAS calls.
  Operation *consumer = operand->getOwner();
  if (consumer->hasAttr("kiln.matmul"))
    return false;
  // A returned value is materialized anyway, and reading it beats
  // recomputing it (and lets an optimizer update write its state in place,
  // kiln-update-in-place).
  Value value = operand->get();
  if (llvm::any_of(value.getUsers(),
                   [](Operation *user) { return isa<func::ReturnOp>(user); }))
    return false;
  auto producer = value.getDefiningOp<linalg::GenericOp>();
  if (!producer || onlyMovesData(producer))
    return true;
  // A computing producer with several users is materialized anyway (a
  // training step keeps forward values for the backward pass): fusing it
  // would only recompute it in each user, and grow the fused kernels without
  // bound.
  if (!value.hasOneUse())
    return false;
  // Fusing into a consumer that broadcasts the value would redo the
  // producer's work for every element of the broadcast (a 0-d bias
  // correction computed per parameter element).
  auto fused = dyn_cast<linalg::GenericOp>(consumer);
  return !fused || fused.getMatchingIndexingMap(operand).isPermutation();
}

struct KilnFuseElementwisePass
    : kiln::impl::KilnFuseElementwiseBase<KilnFuseElementwisePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    linalg::populateElementwiseOpsFusionPatterns(patterns, shouldFuse);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
