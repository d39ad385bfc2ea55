//===- SplitSharedFills.cpp - one tensor fill per user --------------------===//
//
// CSE merges the identical zero inits of reductions and matrix products into
// one fill. Bufferizing that shared value would allocate it once and copy it
// into a fresh buffer for every user that writes it; a fill per user writes
// each buffer once.
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
      if (fill.hasPureTensorSemantics() && !fill->getResult(0).hasOneUse())
        fills.push_back(fill);
    });
    for (linalg::FillOp fill : fills) {
      auto empty = fill.getDpsInits()[0].getDefiningOp<tensor::EmptyOp>();
      if (!empty)
        continue;
      SmallVector<OpOperand *> uses;
      for (OpOperand &use : fill->getResult(0).getUses())
        uses.push_back(&use);
      // Every user gets a copy of the fill and of its tensor.empty, just
      // before it: a library call that overwrites its output finds its
      // fill there (and makes it dead), and the buffer lives from there.
      for (OpOperand *use : uses) {
        OpBuilder b(use->getOwner());
        Operation *init = b.clone(*empty);
        IRMapping mapping;
        mapping.map(empty.getResult(), init->getResult(0));
        use->set(b.clone(*fill, mapping)->getResult(0));
      }
      fill.erase();
      if (empty->use_empty())
        empty.erase();
    }
  }
};

} // namespace
