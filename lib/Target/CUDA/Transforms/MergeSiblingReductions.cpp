//===- MergeSiblingReductions.cpp - independent reductions in one kernel --===//
//
// A layer norm's backward pass sums two things over the same rows (the
// gradients of its bias and of its weight) in two reduction kernels of the
// same shape, neither reading the other. One kernel with two outputs does
// both: a launch less, and the tensor both read is read once.
//
//===----------------------------------------------------------------------===//

#include "kiln/Target/CUDA/Passes.h"
#include "kiln/Transforms/Utils/BlockOrder.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/IRMapping.h"

namespace kiln {
#define GEN_PASS_DEF_KILNMERGESIBLINGREDUCTIONS
#include "kiln/Target/CUDA/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {

/// How far back, in ops of the block, a sibling is looked for: far enough
/// for the normalization gradients of neighbouring layers (BERT-base's bf16
/// step launches 742 kernels with 48, 690 with 128 or 400), near enough
/// that a merged sum's inputs do not live much longer (its arena grew by
/// 0.1% from 48 to 128, GPT-2 small's not at all).
constexpr int kWindow = 128;

/// Whether `op` is a reduction that may be merged: on tensors, not a
/// product, with a reduction loop, static loop ranges, and every output a
/// fill of a tensor.empty (its initial value is made anew wherever the op
/// goes).
bool isMergeable(linalg::GenericOp op) {
  if (!op || !op.hasPureTensorSemantics() || op->hasAttr("kiln.matmul") ||
      op.getNumReductionLoops() == 0 ||
      llvm::any_of(op.getStaticLoopRanges(), ShapedType::isDynamic))
    return false;
  return llvm::all_of(op.getDpsInits(), [](Value init) {
    auto fill = init.getDefiningOp<linalg::FillOp>();
    return fill && fill.hasPureTensorSemantics() &&
           fill.getDpsInits()[0].getDefiningOp<tensor::EmptyOp>() &&
           init.hasOneUse();
  });
}

/// Whether `later` (after `earlier` in their block) depends on `earlier`.
bool dependsOn(Operation *later, Operation *earlier) {
  BackwardSliceOptions options;
  Block *block = later->getBlock();
  options.filter = [&](Operation *op) {
    return op->getBlock() == block && !op->isBeforeInBlock(earlier);
  };
  options.omitBlockArguments = true;
  SetVector<Operation *> slice;
  (void)getBackwardSlice(later, &slice, options);
  return slice.contains(earlier);
}

struct KilnMergeSiblingReductionsPass
    : kiln::impl::KilnMergeSiblingReductionsBase<
          KilnMergeSiblingReductionsPass> {
  void runOnOperation() override {
    bool changed = true;
    while (changed) {
      changed = false;
      SmallVector<linalg::GenericOp> ops;
      getOperation().walk([&](linalg::GenericOp op) {
        if (isMergeable(op))
          ops.push_back(op);
      });
      for (linalg::GenericOp later : ops) {
        if (linalg::GenericOp earlier = siblingBefore(later)) {
          merge(earlier, later);
          ++numMerged;
          changed = true;
          break;
        }
      }
    }
  }

  /// The nearest mergeable reduction before `later` with its iteration
  /// space that `later` does not depend on, whose results are read only
  /// after `later` (the merged op goes where `later` is).
  linalg::GenericOp siblingBefore(linalg::GenericOp later) {
    int steps = 0;
    for (Operation *prev = later->getPrevNode(); prev && steps < kWindow;
         prev = prev->getPrevNode(), ++steps) {
      auto earlier = dyn_cast<linalg::GenericOp>(prev);
      if (!earlier || !isMergeable(earlier) ||
          earlier.getIteratorTypesArray() != later.getIteratorTypesArray() ||
          earlier.getStaticLoopRanges() != later.getStaticLoopRanges())
        continue;
      if (kiln::usedOnlyAfter(earlier, later) && !dependsOn(later, earlier))
        return earlier;
    }
    return {};
  }

  /// One op at `later`'s place computing both: `earlier`'s inputs and
  /// outputs first, then `later`'s; each output's fill made anew there.
  void merge(linalg::GenericOp earlier, linalg::GenericOp later) {
    OpBuilder b(later);
    Location loc = later.getLoc();
    SmallVector<Value> inputs, inits;
    SmallVector<AffineMap> maps;
    SmallVector<Type> types;
    for (linalg::GenericOp op : {earlier, later}) {
      for (OpOperand *input : op.getDpsInputOperands()) {
        inputs.push_back(input->get());
        maps.push_back(op.getMatchingIndexingMap(input));
      }
    }
    for (linalg::GenericOp op : {earlier, later}) {
      for (OpOperand &init : op.getDpsInitsMutable()) {
        auto fill = init.get().getDefiningOp<linalg::FillOp>();
        auto type = cast<RankedTensorType>(init.get().getType());
        Value empty = tensor::EmptyOp::create(b, loc, type.getShape(),
                                              type.getElementType());
        // The fill's value was there before `earlier`, so it is here.
        Value value = fill.getDpsInputs()[0];
        inits.push_back(
            linalg::FillOp::create(b, loc, value, empty).getResult(0));
        maps.push_back(op.getMatchingIndexingMap(&init));
        types.push_back(type);
      }
    }
    auto merged = linalg::GenericOp::create(b, loc, types, inputs, inits, maps,
                                            later.getIteratorTypesArray());
    Block *body = b.createBlock(&merged.getRegion());
    for (Value v : inputs)
      body->addArgument(getElementTypeOrSelf(v.getType()), loc);
    for (Value v : inits)
      body->addArgument(getElementTypeOrSelf(v.getType()), loc);
    // Block arguments: the inputs of both, then the outputs of both.
    unsigned inputCount = inputs.size();
    unsigned earlierInputs = earlier.getNumDpsInputs();
    unsigned earlierInits = earlier.getNumDpsInits();
    SmallVector<Value> yielded;
    b.setInsertionPointToStart(body);
    for (auto [index, op] :
         llvm::enumerate(SmallVector<linalg::GenericOp>{earlier, later})) {
      IRMapping mapping;
      Block *old = op.getBody();
      unsigned inputBase = index == 0 ? 0 : earlierInputs;
      unsigned initBase = inputCount + (index == 0 ? 0 : earlierInits);
      for (unsigned i = 0; i < op.getNumDpsInputs(); ++i)
        mapping.map(old->getArgument(i), body->getArgument(inputBase + i));
      for (unsigned i = 0; i < op.getNumDpsInits(); ++i)
        mapping.map(old->getArgument(op.getNumDpsInputs() + i),
                    body->getArgument(initBase + i));
      for (Operation &inner : old->without_terminator())
        b.clone(inner, mapping);
      for (Value v : cast<linalg::YieldOp>(old->getTerminator()).getValues())
        yielded.push_back(mapping.lookupOrDefault(v));
    }
    linalg::YieldOp::create(b, loc, yielded);
    ResultRange results = merged->getResults();
    earlier->replaceAllUsesWith(results.take_front(earlierInits));
    later->replaceAllUsesWith(results.drop_front(earlierInits));
    SmallVector<Operation *> fills;
    for (linalg::GenericOp op : {earlier, later})
      for (Value init : op.getDpsInits())
        fills.push_back(init.getDefiningOp());
    earlier.erase();
    later.erase();
    for (Operation *fill : fills)
      if (fill->use_empty())
        fill->erase();
  }
};

} // namespace
