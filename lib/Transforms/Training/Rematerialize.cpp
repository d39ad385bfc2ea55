//===- Rematerialize.cpp - recompute cheap activations in the backward ----===//
//
// A training step keeps every forward value the backward pass reads alive
// from the forward pass until that read. For a value an elementwise loop (or
// a broadcast or transposition) computes from values the step keeps anyway,
// recomputing it where the backward pass first needs it costs one cheap
// loop, usually fused into its consumer, and frees its buffer for the whole
// stretch in between. It runs on linalg on tensors after CSE, which would
// merge the copies back into the forward ops.
//
//===----------------------------------------------------------------------===//

#include "kiln/KilnInterfaces.h"
#include "kiln/Transforms/Training/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"

namespace kiln {
#define GEN_PASS_DEF_KILNREMATERIALIZE
#include "kiln/Transforms/Training/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

bool isBackward(Operation *op) {
  return phaseOf(op->getLoc()) == StepPhase::Backward;
}

/// Whether recomputing `op` costs one pass over its result: a loop nest
/// with only parallel loops into a fresh tensor.
bool isCheap(linalg::LinalgOp op) {
  if (!op.hasPureTensorSemantics() || op->getNumResults() != 1 ||
      op.getNumDpsInits() != 1 || op.getNumLoops() != op.getNumParallelLoops())
    return false;
  return op.getDpsInitOperand(0)->get().getDefiningOp<tensor::EmptyOp>() !=
         nullptr;
}

/// Whether the backward pass has `v` at hand without keeping anything more
/// alive: an argument (parameters are arguments by now), a constant, or a
/// value the backward pass reads itself.
bool keptAnyway(Value v) {
  Operation *def = v.getDefiningOp();
  if (!def || def->hasTrait<OpTrait::ConstantLike>())
    return true;
  return llvm::any_of(v.getUsers(), isBackward);
}

struct KilnRematerializePass
    : kiln::impl::KilnRematerializeBase<KilnRematerializePass> {
  void runOnOperation() override {
    for (auto function : getOperation().getOps<func::FuncOp>())
      if (!function.isExternal())
        rematerialize(function.getBody().front());
  }

  void rematerialize(Block &block) {
    // Forward ops, last first: a value recomputed for the backward pass
    // stops counting as kept for the ops that compute its operands.
    SmallVector<linalg::LinalgOp> forward;
    for (Operation &op : block)
      if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op))
        if (phaseOf(op.getLoc()) == StepPhase::Forward)
          forward.push_back(linalgOp);
    for (linalg::LinalgOp op : llvm::reverse(forward)) {
      if (!isCheap(op))
        continue;
      Value result = op->getResult(0);
      SmallVector<OpOperand *> backwardUses;
      for (OpOperand &use : result.getUses())
        if (isBackward(use.getOwner()))
          backwardUses.push_back(&use);
      if (backwardUses.empty() || !llvm::all_of(op.getDpsInputs(), keptAnyway))
        continue;
      // Just before the first backward op that reads it, into a tensor of
      // its own.
      Operation *first = nullptr;
      for (OpOperand *use : backwardUses) {
        Operation *user = block.findAncestorOpInBlock(*use->getOwner());
        if (user && (!first || user->isBeforeInBlock(first)))
          first = user;
      }
      if (!first)
        continue;
      OpBuilder b(first);
      Location loc = withPhase(op->getLoc(), StepPhase::Backward);
      IRMapping mapping;
      Operation *init = op.getDpsInitOperand(0)->get().getDefiningOp();
      Operation *initCopy = b.clone(*init);
      initCopy->setLoc(loc);
      mapping.map(init->getResult(0), initCopy->getResult(0));
      Operation *copy = b.clone(*op, mapping);
      copy->setLoc(loc);
      for (OpOperand *use : backwardUses)
        use->set(copy->getResult(0));
      ++numRecomputed;
    }
  }
};

} // namespace
