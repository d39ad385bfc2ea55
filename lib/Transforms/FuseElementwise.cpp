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

#include "kiln/KilnInterfaces.h"
#include "kiln/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <map>

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

/// Whether `op`'s payload is a few arithmetic operations (at most four of
/// arith's, or a square root or its reciprocal): recomputing it for every
/// element of a broadcast costs less than a kernel launch and a round trip
/// through memory.
bool isCheap(linalg::GenericOp op) {
  int64_t count = 0;
  for (Operation &inner : op.getBody()->without_terminator()) {
    if (!isa<arith::ArithDialect>(inner.getDialect()) &&
        !isa<math::SqrtOp, math::RsqrtOp>(inner))
      return false;
    ++count;
  }
  return count <= 4;
}

/// A loop of the optimizer update (marked with its phase) on tensors, with
/// only parallel loops.
bool isOptimizerLoop(linalg::GenericOp op) {
  return op && op.hasPureTensorSemantics() &&
         op.getNumLoops() == op.getNumParallelLoops() &&
         kiln::phaseOf(op->getLoc()) == kiln::StepPhase::Optimizer;
}

/// Whether `value` is computed by a cheap optimizer loop (isCheap) and read
/// only by other optimizer loops, element for element (not broadcast):
/// with `--amp=fp16` a parameter's update reads each new moment for the
/// step and again to keep it or the old one. Recomputing its few operations
/// in each reader costs less than writing it to memory from a kernel of its
/// own, and this pass then merges the readers, one parameter's, into one
/// loop.
bool onlyOptimizerLoopsRead(Value value) {
  auto producer = value.getDefiningOp<linalg::GenericOp>();
  return isOptimizerLoop(producer) && isCheap(producer) &&
         llvm::all_of(value.getUses(), [](OpOperand &use) {
           auto user = dyn_cast<linalg::GenericOp>(use.getOwner());
           return isOptimizerLoop(user) &&
                  user.getMatchingIndexingMap(&use).isPermutation();
         });
}

/// Whether the producer of `operand` may be fused into its owner; with
/// `cheapBroadcasts`, a cheap producer (isCheap) with one use also fuses
/// into a consumer that broadcasts it.
bool shouldFuse(OpOperand *operand, bool cheapBroadcasts) {
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
  if (!value.hasOneUse() && !onlyOptimizerLoopsRead(value))
    return false;
  // Fusing into a consumer that broadcasts the value would redo the
  // producer's work for every element of the broadcast (a 0-d bias
  // correction computed per parameter element).
  auto fused = dyn_cast<linalg::GenericOp>(consumer);
  if (!fused || fused.getMatchingIndexingMap(operand).isPermutation())
    return true;
  return cheapBroadcasts && isCheap(producer) &&
         producer.getNumLoops() == producer.getNumParallelLoops();
}

/// The operand of `update` whose producer writes a new optimizer state it
/// reads element for element, when that state is read by nothing else but
/// the return: Adam's moments, read by the parameter's update.
OpOperand *mergeableState(linalg::GenericOp update) {
  if (!isOptimizerLoop(update))
    return nullptr;
  for (OpOperand *operand : update.getDpsInputOperands()) {
    auto state = operand->get().getDefiningOp<linalg::GenericOp>();
    if (!isOptimizerLoop(state) || state.getNumResults() != 1 ||
        state.getNumLoops() != update.getNumLoops() ||
        !update.getMatchingIndexingMap(operand).isIdentity() ||
        !state.getIndexingMapMatchingResult(state->getResult(0)).isIdentity())
      continue;
    bool onlyReturned =
        llvm::all_of(operand->get().getUses(), [&](OpOperand &use) {
          return &use == operand || isa<func::ReturnOp>(use.getOwner());
        });
    if (onlyReturned && operand->get().getNumUses() == 2)
      return operand;
  }
  return nullptr;
}

/// Whether `op` is a finished optimizer update: a loop of the optimizer
/// with only parallel loops, identity-indexed outputs, and results only the
/// return reads (the new parameters and states).
bool isFinishedUpdate(linalg::GenericOp op) {
  if (!isOptimizerLoop(op))
    return false;
  for (OpOperand &init : op.getDpsInitsMutable())
    if (!op.getMatchingIndexingMap(&init).isIdentity())
      return false;
  return llvm::all_of(op->getUsers(), [](Operation *user) {
    return isa<func::ReturnOp>(user);
  });
}

/// Merges `first` into `second`, a later loop over the same iteration
/// space: one loop computes both and yields first's results, then second's.
/// With `feed`, an input of `second` that reads first's (only) result, that
/// input takes the value the loop just computed instead of reading it back.
linalg::GenericOp mergeLoops(linalg::GenericOp first, linalg::GenericOp second,
                             OpOperand *feed = nullptr) {
  SmallVector<Value> inputs, outputs;
  SmallVector<AffineMap> maps;
  for (OpOperand *input : first.getDpsInputOperands()) {
    inputs.push_back(input->get());
    maps.push_back(first.getMatchingIndexingMap(input));
  }
  for (OpOperand *input : second.getDpsInputOperands())
    if (input != feed) {
      inputs.push_back(input->get());
      maps.push_back(second.getMatchingIndexingMap(input));
    }
  for (linalg::GenericOp loop : {first, second})
    for (OpOperand &init : loop.getDpsInitsMutable()) {
      outputs.push_back(init.get());
      maps.push_back(loop.getMatchingIndexingMap(&init));
    }
  SmallVector<Type> types(first->getResultTypes());
  llvm::append_range(types, second->getResultTypes());

  OpBuilder b(second);
  auto merged = linalg::GenericOp::create(
      b, second.getLoc(), types, inputs, outputs, maps,
      second.getIteratorTypesArray(),
      [&](OpBuilder &nb, Location loc, ValueRange args) {
        // Block arguments in the order of `inputs`, then of `outputs`.
        unsigned nextInput = 0, nextOutput = inputs.size();
        IRMapping mapping;
        SmallVector<Value> yields;
        for (linalg::GenericOp loop : {first, second}) {
          Block *body = loop.getBody();
          for (OpOperand *input : loop.getDpsInputOperands())
            mapping.map(body->getArgument(input->getOperandNumber()),
                        input == feed ? yields.front() : args[nextInput++]);
          for (OpOperand &init : loop.getDpsInitsMutable())
            mapping.map(body->getArgument(init.getOperandNumber()),
                        args[nextOutput++]);
          for (Operation &op : body->without_terminator())
            nb.clone(op, mapping);
          for (Value v :
               cast<linalg::YieldOp>(body->getTerminator()).getValues())
            yields.push_back(mapping.lookupOrDefault(v));
        }
        linalg::YieldOp::create(nb, loc, yields);
      });
  unsigned firstResults = first->getNumResults();
  for (unsigned i = 0; i < firstResults; ++i)
    first->getResult(i).replaceAllUsesWith(merged->getResult(i));
  for (unsigned i = 0; i < second->getNumResults(); ++i)
    second->getResult(i).replaceAllUsesWith(
        merged->getResult(firstResults + i));
  second.erase();
  first.erase();
  return merged;
}

/// Merges the finished updates of parameters of the same shape, up to
/// `perLoop` at a time, into one loop each: an optimizer step takes a few
/// loops (one per shape) instead of one per parameter.
void mergeUpdatesByShape(func::FuncOp function, unsigned perLoop) {
  // Loop ranges -> the merged loop being grown, and how many updates it has.
  std::map<SmallVector<int64_t>, std::pair<linalg::GenericOp, unsigned>> open;
  SmallVector<linalg::GenericOp> updates;
  for (Operation &op : function.getBody().front())
    if (auto generic = dyn_cast<linalg::GenericOp>(op))
      if (isFinishedUpdate(generic))
        updates.push_back(generic);
  for (linalg::GenericOp update : updates) {
    SmallVector<int64_t> ranges = update.getStaticLoopRanges();
    if (llvm::any_of(ranges, ShapedType::isDynamic))
      continue;
    auto found = open.find(ranges);
    if (found == open.end() || found->second.second >= perLoop) {
      open[ranges] = {update, 1};
      continue;
    }
    found->second = {mergeLoops(found->second.first, update),
                     found->second.second + 1};
  }
}

struct KilnFuseElementwisePass
    : kiln::impl::KilnFuseElementwiseBase<KilnFuseElementwisePass> {
  using KilnFuseElementwiseBase::KilnFuseElementwiseBase;

  void runOnOperation() override {
    if (transposes) {
      SmallVector<linalg::TransposeOp> ops;
      getOperation().walk([&](linalg::TransposeOp op) {
        if (op.hasPureTensorSemantics())
          ops.push_back(op);
      });
      IRRewriter rewriter(&getContext());
      for (linalg::TransposeOp op : ops) {
        rewriter.setInsertionPoint(op);
        if (failed(linalg::generalizeNamedOp(rewriter, op)))
          return signalPassFailure();
      }
    }
    RewritePatternSet patterns(&getContext());
    linalg::populateElementwiseOpsFusionPatterns(
        patterns, [&](OpOperand *operand) {
          return shouldFuse(operand, cheapBroadcasts);
        });
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    // Then each parameter's update takes in the new optimizer states it
    // reads, so that one loop per parameter writes all of them.
    bool changed = true;
    while (changed) {
      changed = false;
      SmallVector<linalg::GenericOp> updates;
      getOperation().walk([&](linalg::GenericOp op) { updates.push_back(op); });
      for (linalg::GenericOp update : updates)
        if (OpOperand *operand = mergeableState(update)) {
          mergeLoops(operand->get().getDefiningOp<linalg::GenericOp>(), update,
                     operand);
          changed = true;
          break;
        }
    }
    for (auto function : getOperation().getOps<func::FuncOp>())
      if (!function.isExternal())
        mergeUpdatesByShape(function, updatesPerLoop);
  }
};

} // namespace
