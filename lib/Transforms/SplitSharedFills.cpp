//===- SplitSharedFills.cpp - one tensor fill per user --------------------===//
//
// CSE merges the identical zero inits of reductions and matrix products into
// one fill. Bufferizing that shared value would allocate it once and copy it
// into a fresh buffer for every user that writes it; a fill per user writes
// each buffer once. Each fill goes just before its user, where a product or
// a reduction can take it over (beta 0, or a sum that starts from the
// fill's value).
//
//===----------------------------------------------------------------------===//

#include "kiln/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"

namespace kiln {
#define GEN_PASS_DEF_KILNSPLITSHAREDFILLS
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {

struct KilnSplitSharedFillsPass
    : kiln::impl::KilnSplitSharedFillsBase<KilnSplitSharedFillsPass> {
  void runOnOperation() override {
    SmallVector<linalg::FillOp> fills;
    getOperation().walk([&](linalg::FillOp fill) {
      if (fill.hasPureTensorSemantics())
        fills.push_back(fill);
    });
    for (linalg::FillOp fill : fills) {
      auto empty = fill.getDpsInits()[0].getDefiningOp<tensor::EmptyOp>();
      if (!empty)
        continue;
      // Every user in the fill's block gets a fill of its own (of a
      // tensor.empty of its own) just before it, so the fill lands next to
      // the kernel that writes over it, which may then start from the
      // fill's value instead (kiln-gpu-outline-kernels). Users elsewhere
      // keep the original.
      SmallVector<OpOperand *> uses;
      for (OpOperand &use : fill->getResult(0).getUses())
        if (use.getOwner()->getBlock() == fill->getBlock())
          uses.push_back(&use);
      for (OpOperand *use : uses) {
        OpBuilder b(use->getOwner());
        Operation *init = b.clone(*empty);
        IRMapping mapping;
        mapping.map(empty.getResult(), init->getResult(0));
        use->set(b.clone(*fill, mapping)->getResult(0));
      }
      if (fill->use_empty()) {
        fill.erase();
        if (empty->use_empty())
          empty.erase();
      }
    }
  }
};

} // namespace
