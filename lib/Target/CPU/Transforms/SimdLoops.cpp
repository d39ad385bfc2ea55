//===- SimdLoops.cpp - parallel innermost loops as omp.simd ---------------===//
//
// An elementwise kernel that updates its operands in place (the optimizer's
// update writes the parameter and moments where it reads them) passes the
// same buffer as an input and an output. LLVM cannot prove the arrays apart,
// would need a runtime overlap check per pair of them, and leaves such loops
// scalar (the AdamW updates were: vsqrtss, vdivss). A loop that came from a
// linalg op's parallel dimension has no dependence between its iterations
// whatever aliases what: each writes its own elements and reads an output
// only where it writes it. omp.simd says exactly that: its translation puts
// every access of the loop in one access group, marks the loop
// llvm.loop.parallel_accesses and asks for vectorization.
//
//===----------------------------------------------------------------------===//

#include "kiln/Target/CPU/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/OpenMP/OpenMPDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"

namespace kiln {
#define GEN_PASS_DEF_KILNSIMDLOOPS
#include "kiln/Target/CPU/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {

constexpr StringLiteral kParallel = "kiln.parallel";

/// Whether LLVM can vectorize `loop` once its iterations are known
/// independent: a body of loads, stores and arithmetic on scalars (no call,
/// no nested loop), every store at an element that moves with the loop.
bool vectorizable(scf::ForOp loop) {
  if (!loop.getInitArgs().empty())
    return false;
  Value iv = loop.getInductionVar();
  for (Operation &op : loop.getBody()->without_terminator()) {
    if (op.getNumRegions() != 0)
      return false;
    if (auto store = dyn_cast<memref::StoreOp>(op)) {
      if (!llvm::is_contained(store.getIndices(), iv))
        return false;
      continue;
    }
    if (isa<memref::LoadOp>(op))
      continue;
    if (!isa<arith::ArithDialect, math::MathDialect>(op.getDialect()))
      return false;
    for (Type type : op.getResultTypes())
      if (!type.isIntOrIndexOrFloat())
        return false;
  }
  return true;
}

struct KilnSimdLoopsPass : kiln::impl::KilnSimdLoopsBase<KilnSimdLoopsPass> {
  void runOnOperation() override {
    SmallVector<scf::ForOp> loops;
    getOperation().walk([&](scf::ForOp loop) {
      if (loop->removeAttr(kParallel) && vectorizable(loop))
        loops.push_back(loop);
    });
    for (scf::ForOp loop : loops) {
      OpBuilder b(loop);
      Location loc = loop.getLoc();
      auto simd = omp::SimdOp::create(b, loc, omp::SimdOperands());
      b.createBlock(&simd.getRegion());
      auto nest = omp::LoopNestOp::create(
          b, loc, /*collapse_num_loops=*/1, ValueRange{loop.getLowerBound()},
          ValueRange{loop.getUpperBound()}, ValueRange{loop.getStep()},
          /*loop_inclusive=*/false, /*tile_sizes=*/nullptr);
      Block *body = b.createBlock(&nest.getRegion(), {},
                                  {loop.getInductionVar().getType()}, {loc});
      IRMapping mapping;
      mapping.map(loop.getInductionVar(), body->getArgument(0));
      for (Operation &op : loop.getBody()->without_terminator())
        b.clone(op, mapping);
      omp::YieldOp::create(b, loc);
      loop.erase();
    }
  }
};

} // namespace
