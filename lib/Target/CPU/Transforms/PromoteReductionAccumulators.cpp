//===- PromoteReductionAccumulators.cpp - reductions in registers ---------===//

#include "kiln/Target/CPU/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace kiln {
#define GEN_PASS_DEF_KILNPROMOTEREDUCTIONACCUMULATORS
#include "kiln/Target/CPU/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {

bool promote(scf::ForOp loop) {
  if (loop.getNumRegionIterArgs() != 0)
    return false;
  memref::StoreOp store;
  bool clean = true;
  loop.getBody()->walk([&](Operation *op) {
    if (isa<memref::LoadOp, scf::YieldOp, scf::ForOp, scf::IfOp>(op))
      return WalkResult::advance();
    if (auto s = dyn_cast<memref::StoreOp>(op)) {
      if (store)
        clean = false;
      store = s;
      return clean ? WalkResult::advance() : WalkResult::interrupt();
    }
    if (!isMemoryEffectFree(op)) {
      clean = false;
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (!clean || !store || store->getBlock() != loop.getBody())
    return false;
  Value buffer = store.getMemRef();
  if (!loop.isDefinedOutsideOfLoop(buffer) ||
      !llvm::all_of(store.getIndices(), [&](Value index) {
        return loop.isDefinedOutsideOfLoop(index);
      }))
    return false;
  memref::LoadOp load;
  bool otherRead = false;
  loop.getBody()->walk([&](memref::LoadOp l) {
    if (l.getMemRef() != buffer)
      return;
    if (load || l->getBlock() != loop.getBody() ||
        l.getIndices() != store.getIndices())
      otherRead = true;
    load = l;
  });
  if (otherRead || !load || !load->isBeforeInBlock(store))
    return false;

  OpBuilder b(loop);
  Value initial =
      memref::LoadOp::create(b, load.getLoc(), buffer, load.getIndices());
  IRRewriter rewriter(b);
  FailureOr<LoopLikeOpInterface> grown = loop.replaceWithAdditionalYields(
      rewriter, ValueRange{initial}, /*replaceInitOperandUsesInLoop=*/false,
      [&](OpBuilder &, Location, ArrayRef<BlockArgument>) {
        return SmallVector<Value>{store.getValueToStore()};
      });
  if (failed(grown))
    return false;
  auto promoted = cast<scf::ForOp>(grown->getOperation());
  BlockArgument carried = promoted.getRegionIterArgs().back();
  Value combined = store.getValueToStore();
  load.getResult().replaceAllUsesWith(carried);
  load.erase();
  store.erase();
  if (Operation *combiner = combined.getDefiningOp())
    if (isa<arith::AddFOp, arith::MulFOp>(combiner) &&
        llvm::is_contained(combiner->getOperands(), Value(carried)))
      if (auto fastmath = dyn_cast<arith::ArithFastMathInterface>(combiner))
        combiner->setAttr(fastmath.getFastMathAttrName(),
                          arith::FastMathFlagsAttr::get(
                              combiner->getContext(),
                              fastmath.getFastMathFlagsAttr().getValue() |
                                  arith::FastMathFlags::reassoc));
  b.setInsertionPointAfter(promoted);
  memref::StoreOp::create(b, promoted.getLoc(), promoted.getResults().back(),
                          buffer, store.getIndices());
  return true;
}

struct KilnPromoteReductionAccumulatorsPass
    : kiln::impl::KilnPromoteReductionAccumulatorsBase<
          KilnPromoteReductionAccumulatorsPass> {
  void runOnOperation() override {
    // Inner loops first: a promoted inner loop leaves its load and store in
    // the loop around it, which may then be promoted in turn.
    SmallVector<scf::ForOp> loops;
    getOperation().walk([&](scf::ForOp loop) { loops.push_back(loop); });
    for (scf::ForOp loop : loops)
      (void)promote(loop);
  }
};

} // namespace
