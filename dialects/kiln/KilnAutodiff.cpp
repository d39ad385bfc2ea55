//===- KilnAutodiff.cpp - reverse-mode differentiation of op sequences ----===//
//
// The reverse sweep shared by the kiln-autodiff pass and the ONNX importer's
// `Gradient` operator: walks ops backwards from seeded outputs and asks each
// op's DifferentiableOpInterface for its vector-Jacobian product.
//
//===----------------------------------------------------------------------===//

#include "kiln/KilnInterfaces.h"
#include "kiln/KilnOps.h"

using namespace mlir;
using namespace kiln;

static bool isFloatTensor(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && isa<FloatType>(type.getElementType());
}

FailureOr<SmallVector<Value>>
kiln::buildGradients(OpBuilder &b, Location loc, ArrayRef<Operation *> ops,
                     ArrayRef<Value> wrt,
                     ArrayRef<std::pair<Value, Value>> seeds) {
  // Values that depend on a `wrt` value; only their gradients are built.
  DenseSet<Value> active;
  for (Value v : wrt)
    if (isFloatTensor(v))
      active.insert(v);
  for (Operation *op : ops) {
    bool dependent = llvm::any_of(op->getOperands(),
                                  [&](Value v) { return active.contains(v); });
    if (dependent)
      for (Value result : op->getResults())
        if (isFloatTensor(result))
          active.insert(result);
  }

  // Everything built below lands between these two points; it is marked
  // as the backward pass once built.
  Block *block = b.getInsertionBlock();
  Operation *before = b.getInsertionPoint() == block->begin()
                          ? nullptr
                          : &*std::prev(b.getInsertionPoint());
  auto markBackward = [&] {
    Block::iterator end = b.getInsertionPoint();
    Block::iterator it =
        before ? std::next(Block::iterator(before)) : block->begin();
    for (; it != end; ++it)
      it->setLoc(withPhase(it->getLoc(), StepPhase::Backward));
  };

  DenseMap<Value, Value> grads;
  auto accumulate = [&](Value v, Value g) {
    Value &slot = grads[v];
    slot = slot ? AddOp::create(b, loc, slot, g).getResult() : g;
  };
  for (auto [output, seed] : seeds)
    if (active.contains(output))
      accumulate(output, seed);

  for (Operation *op : llvm::reverse(ops)) {
    SmallVector<Value> resultGrads;
    bool reached = false;
    for (Value result : op->getResults()) {
      Value g = grads.lookup(result);
      resultGrads.push_back(g);
      reached |= static_cast<bool>(g);
    }
    bool needsGrad = llvm::any_of(op->getOperands(),
                                  [&](Value v) { return active.contains(v); });
    if (!reached || !needsGrad)
      continue;
    auto rule = dyn_cast<DifferentiableOpInterface>(op);
    if (!rule)
      return op->emitError("no differentiation rule for ")
             << op->getName()
             << ", which lies between a differentiated input and the output";
    SmallVector<Value> operandGrads;
    if (failed(rule.buildVJP(b, resultGrads, operandGrads)))
      return failure();
    for (auto [operand, g] : llvm::zip(op->getOperands(), operandGrads))
      if (g && active.contains(operand))
        accumulate(operand, g);
  }

  markBackward();
  SmallVector<Value> result;
  for (Value v : wrt)
    result.push_back(grads.lookup(v));
  return result;
}

static constexpr llvm::StringLiteral kBackwardMark = "kiln.backward";
static constexpr llvm::StringLiteral kOptimizerMark = "kiln.optimizer";

Location kiln::withPhase(Location loc, StepPhase phase) {
  if (phase == StepPhase::Forward || phaseOf(loc) == phase)
    return loc;
  StringRef mark =
      phase == StepPhase::Backward ? kBackwardMark : kOptimizerMark;
  return FusedLoc::get({loc}, StringAttr::get(loc.getContext(), mark),
                       loc.getContext());
}

static constexpr llvm::StringLiteral kKernelMark = "kiln.kernel.";

Location kiln::withKernelLabel(Location loc, StringRef label) {
  return FusedLoc::get({loc},
                       StringAttr::get(loc.getContext(), kKernelMark + label),
                       loc.getContext());
}

std::string kiln::kernelLabelOf(Location loc) {
  std::string label;
  loc->walk([&](Location inner) {
    auto fused = dyn_cast<FusedLoc>(inner);
    auto mark = fused ? dyn_cast_or_null<StringAttr>(fused.getMetadata())
                      : StringAttr();
    if (mark && mark.getValue().starts_with(kKernelMark))
      label = mark.getValue().drop_front(kKernelMark.size()).str();
    return WalkResult::advance();
  });
  return label;
}

StepPhase kiln::phaseOf(Location loc) {
  // The outermost mark wins: an optimizer op built from a cloned backward
  // op is part of the update.
  StepPhase phase = StepPhase::Forward;
  loc->walk([&](Location inner) {
    auto fused = dyn_cast<FusedLoc>(inner);
    auto mark = fused ? dyn_cast_or_null<StringAttr>(fused.getMetadata())
                      : StringAttr();
    if (mark && (mark.getValue() == kBackwardMark ||
                 mark.getValue() == kOptimizerMark)) {
      phase = mark.getValue() == kBackwardMark ? StepPhase::Backward
                                               : StepPhase::Optimizer;
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return phase;
}
