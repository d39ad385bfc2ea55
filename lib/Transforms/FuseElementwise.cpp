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

/// An elementwise loop of the optimizer update: only parallel loops, every
/// operand and result indexed by the identity.
bool isIdentityOptimizerLoop(linalg::GenericOp op) {
  return op && op.hasPureTensorSemantics() &&
         op.getNumLoops() == op.getNumParallelLoops() &&
         kiln::phaseOf(op->getLoc()) == kiln::StepPhase::Optimizer;
}

/// The operand of `update` whose producer writes a new optimizer state it
/// reads element for element, when that state is read by nothing else but
/// the return: Adam's moments, read by the parameter's update.
OpOperand *mergeableState(linalg::GenericOp update) {
  if (!isIdentityOptimizerLoop(update))
    return nullptr;
  for (OpOperand *operand : update.getDpsInputOperands()) {
    auto state = operand->get().getDefiningOp<linalg::GenericOp>();
    if (!isIdentityOptimizerLoop(state) || state.getNumResults() != 1 ||
        state.getNumLoops() != update.getNumLoops() ||
        !update.getMatchingIndexingMap(operand).isIdentity() ||
        !state.getIndexingMapMatchingResult(state->getResult(0)).isIdentity())
      continue;
    bool onlyReturned = llvm::all_of(operand->get().getUses(), [&](OpOperand &use) {
      return &use == operand || isa<func::ReturnOp>(use.getOwner());
    });
    if (onlyReturned && operand->get().getNumUses() == 2)
      return operand;
  }
  return nullptr;
}

/// Merges the loop that computes `operand` (a new state) into `update`, its
/// reader: one loop computes the state once, writes it as the first result
/// and uses it for the others.
void mergeState(linalg::GenericOp update, OpOperand *operand) {
  auto state = operand->get().getDefiningOp<linalg::GenericOp>();
  SmallVector<Value> inputs(state.getDpsInputs());
  SmallVector<AffineMap> maps;
  for (OpOperand *input : state.getDpsInputOperands())
    maps.push_back(state.getMatchingIndexingMap(input));
  for (OpOperand *input : update.getDpsInputOperands())
    if (input != operand) {
      inputs.push_back(input->get());
      maps.push_back(update.getMatchingIndexingMap(input));
    }
  SmallVector<Value> outputs{state.getDpsInits()[0]};
  maps.push_back(state.getMatchingIndexingMap(&state.getDpsInitsMutable()[0]));
  for (OpOperand &init : update.getDpsInitsMutable()) {
    outputs.push_back(init.get());
    maps.push_back(update.getMatchingIndexingMap(&init));
  }
  SmallVector<Type> types{state->getResult(0).getType()};
  llvm::append_range(types, update->getResultTypes());

  OpBuilder b(update);
  auto merged = linalg::GenericOp::create(
      b, update.getLoc(), types, inputs, outputs, maps,
      update.getIteratorTypesArray(),
      [&](OpBuilder &nb, Location loc, ValueRange args) {
        // Block arguments: the state's inputs, the update's other inputs,
        // the state's output, the update's outputs.
        unsigned stateInputs = state.getNumDpsInputs();
        unsigned updateInputs = update.getNumDpsInputs() - 1;
        IRMapping mapping;
        Block *stateBody = state.getBody();
        for (unsigned i = 0; i < stateInputs; ++i)
          mapping.map(stateBody->getArgument(i), args[i]);
        mapping.map(stateBody->getArgument(stateInputs),
                    args[stateInputs + updateInputs]);
        for (Operation &op : stateBody->without_terminator())
          nb.clone(op, mapping);
        Value newState = mapping.lookupOrDefault(
            cast<linalg::YieldOp>(stateBody->getTerminator()).getValues()[0]);
        Block *updateBody = update.getBody();
        unsigned next = stateInputs;
        for (OpOperand *input : update.getDpsInputOperands()) {
          BlockArgument arg = updateBody->getArgument(input->getOperandNumber());
          mapping.map(arg, input == operand ? newState : args[next++]);
        }
        for (unsigned i = 0; i < update.getNumDpsInits(); ++i)
          mapping.map(updateBody->getArgument(update.getNumDpsInputs() + i),
                      args[stateInputs + updateInputs + 1 + i]);
        for (Operation &op : updateBody->without_terminator())
          nb.clone(op, mapping);
        SmallVector<Value> yields{newState};
        for (Value v :
             cast<linalg::YieldOp>(updateBody->getTerminator()).getValues())
          yields.push_back(mapping.lookupOrDefault(v));
        linalg::YieldOp::create(nb, loc, yields);
      });
  state->getResult(0).replaceAllUsesWith(merged->getResult(0));
  for (unsigned i = 0; i < update->getNumResults(); ++i)
    update->getResult(i).replaceAllUsesWith(merged->getResult(i + 1));
  update.erase();
  state.erase();
}

/// Whether `op` is a finished optimizer update: a loop of the optimizer
/// with only parallel loops, identity-indexed outputs, and results only the
/// return reads (the new parameters and states).
bool isFinishedUpdate(linalg::GenericOp op) {
  if (!isIdentityOptimizerLoop(op))
    return false;
  for (OpOperand &init : op.getDpsInitsMutable())
    if (!op.getMatchingIndexingMap(&init).isIdentity())
      return false;
  return llvm::all_of(op->getUsers(),
                      [](Operation *user) { return isa<func::ReturnOp>(user); });
}

/// Merges `first` into `second`, a later loop over the same iteration space
/// that shares nothing with it: one loop computes both.
linalg::GenericOp mergeSideBySide(linalg::GenericOp first,
                                  linalg::GenericOp second) {
  SmallVector<Value> inputs(first.getDpsInputs());
  llvm::append_range(inputs, second.getDpsInputs());
  SmallVector<Value> outputs(first.getDpsInits());
  llvm::append_range(outputs, second.getDpsInits());
  SmallVector<AffineMap> maps;
  for (OpOperand *input : first.getDpsInputOperands())
    maps.push_back(first.getMatchingIndexingMap(input));
  for (OpOperand *input : second.getDpsInputOperands())
    maps.push_back(second.getMatchingIndexingMap(input));
  for (OpOperand &init : first.getDpsInitsMutable())
    maps.push_back(first.getMatchingIndexingMap(&init));
  for (OpOperand &init : second.getDpsInitsMutable())
    maps.push_back(second.getMatchingIndexingMap(&init));
  SmallVector<Type> types(first->getResultTypes());
  llvm::append_range(types, second->getResultTypes());

  OpBuilder b(second);
  auto merged = linalg::GenericOp::create(
      b, second.getLoc(), types, inputs, outputs, maps,
      second.getIteratorTypesArray(),
      [&](OpBuilder &nb, Location loc, ValueRange args) {
        // Block arguments: first's inputs, second's inputs, first's
        // outputs, second's outputs.
        unsigned firstIn = first.getNumDpsInputs(),
                 secondIn = second.getNumDpsInputs(),
                 firstOut = first.getNumDpsInits();
        IRMapping mapping;
        Block *one = first.getBody(), *two = second.getBody();
        for (unsigned i = 0; i < firstIn; ++i)
          mapping.map(one->getArgument(i), args[i]);
        for (unsigned i = 0; i < secondIn; ++i)
          mapping.map(two->getArgument(i), args[firstIn + i]);
        for (unsigned i = 0; i < firstOut; ++i)
          mapping.map(one->getArgument(firstIn + i),
                      args[firstIn + secondIn + i]);
        for (unsigned i = 0; i < second.getNumDpsInits(); ++i)
          mapping.map(two->getArgument(secondIn + i),
                      args[firstIn + secondIn + firstOut + i]);
        SmallVector<Value> yields;
        for (Block *body : {one, two}) {
          for (Operation &op : body->without_terminator())
            nb.clone(op, mapping);
          for (Value v : cast<linalg::YieldOp>(body->getTerminator()).getValues())
            yields.push_back(mapping.lookupOrDefault(v));
        }
        linalg::YieldOp::create(nb, loc, yields);
      });
  unsigned firstResults = first->getNumResults();
  for (unsigned i = 0; i < firstResults; ++i)
    first->getResult(i).replaceAllUsesWith(merged->getResult(i));
  for (unsigned i = 0; i < second->getNumResults(); ++i)
    second->getResult(i).replaceAllUsesWith(merged->getResult(firstResults + i));
  first.erase();
  second.erase();
  return merged;
}

/// How many parameters' updates one merged loop takes at most, to keep the
/// kernels' argument lists reasonable.
constexpr unsigned kUpdatesPerLoop = 8;

/// Merges the finished updates of parameters of the same shape, up to
/// kUpdatesPerLoop at a time, into one loop each: an optimizer step takes a
/// few loops (one per shape) instead of one per parameter.
void mergeUpdatesByShape(func::FuncOp function) {
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
    if (found == open.end() || found->second.second == kUpdatesPerLoop) {
      open[ranges] = {update, 1};
      continue;
    }
    found->second = {mergeSideBySide(found->second.first, update),
                     found->second.second + 1};
  }
}

struct KilnFuseElementwisePass
    : kiln::impl::KilnFuseElementwiseBase<KilnFuseElementwisePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    linalg::populateElementwiseOpsFusionPatterns(patterns, shouldFuse);
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
          mergeState(update, operand);
          changed = true;
          break;
        }
    }
    for (auto function : getOperation().getOps<func::FuncOp>())
      if (!function.isExternal())
        mergeUpdatesByShape(function);
  }
};

} // namespace
