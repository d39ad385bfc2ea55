//===- ComputeIntoSlices.cpp - elementwise results written into their slot ===//
//
// A concatenation on tensors is a chain of tensor.insert_slice ops. When
// what is inserted was computed by an elementwise kernel into a fresh
// tensor, bufferization gives the kernel a buffer of its own and copies it
// into the concatenation afterwards: a second kernel, and a second write
// and read of every element. Computing it into the slice of the
// destination instead (bufferized as a view) leaves no copy.
//
//===----------------------------------------------------------------------===//

#include "kiln/Target/CUDA/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace kiln {
#define GEN_PASS_DEF_KILNCOMPUTEINTOSLICES
#include "kiln/Target/CUDA/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {

/// The elementwise op whose result `insert` inserts (directly or through a
/// tensor.collapse_shape, returned in `collapse`) when it can compute into
/// the slice instead: all loops parallel, one result written through a
/// permutation of them (every element), into a tensor.empty its payload
/// does not read, and read by nothing else. Null otherwise.
linalg::GenericOp computedForSlice(tensor::InsertSliceOp insert,
                                   tensor::CollapseShapeOp &collapse) {
  if (!insert.hasUnitStride() || !insert.getSourceType().hasStaticShape())
    return {};
  Value source = insert.getSource();
  collapse = source.getDefiningOp<tensor::CollapseShapeOp>();
  if (collapse) {
    if (!source.hasOneUse())
      return {};
    source = collapse.getSrc();
  }
  auto op = source.getDefiningOp<linalg::GenericOp>();
  if (!op || !op.hasPureTensorSemantics() || op.getNumResults() != 1 ||
      op.getNumDpsInits() != 1 || !source.hasOneUse() ||
      op.getNumLoops() != op.getNumParallelLoops() ||
      op->getBlock() != insert->getBlock())
    return {};
  OpOperand *init = op.getDpsInitOperand(0);
  if (!init->get().getDefiningOp<tensor::EmptyOp>() ||
      op.payloadUsesValueFromOperand(init) ||
      !op.getMatchingIndexingMap(init).isPermutation())
    return {};
  return op;
}

struct KilnComputeIntoSlicesPass
    : kiln::impl::KilnComputeIntoSlicesBase<KilnComputeIntoSlicesPass> {
  void runOnOperation() override {
    SmallVector<tensor::InsertSliceOp> inserts;
    getOperation().walk(
        [&](tensor::InsertSliceOp insert) { inserts.push_back(insert); });
    for (tensor::InsertSliceOp insert : inserts) {
      tensor::CollapseShapeOp collapse;
      linalg::GenericOp op = computedForSlice(insert, collapse);
      if (!op)
        continue;
      // The op moves to just before the insertion, where the destination
      // is (its inputs were there before it), and writes into the slice.
      OpBuilder b(insert);
      Location loc = op.getLoc();
      Value slice = tensor::ExtractSliceOp::create(
          b, loc, insert.getSourceType(), insert.getDest(),
          insert.getMixedOffsets(), insert.getMixedSizes(),
          insert.getMixedStrides());
      Value init = slice;
      if (collapse)
        init =
            tensor::ExpandShapeOp::create(b, loc, collapse.getSrcType(), slice,
                                          collapse.getReassociationIndices());
      op->moveBefore(insert);
      op.getDpsInitOperand(0)->set(init);
      if (collapse)
        collapse->moveBefore(insert);
      ++numComputed;
    }
  }
};

} // namespace
