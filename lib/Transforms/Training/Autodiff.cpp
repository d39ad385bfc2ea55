//===- Autodiff.cpp - reverse-mode differentiation of kiln functions ------===//

#include "kiln/KilnInterfaces.h"
#include "kiln/KilnOps.h"
#include "kiln/Transforms/Training/Passes.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/Support/Regex.h"

namespace kiln {
#define GEN_PASS_DEF_KILNAUTODIFF
#include "kiln/Transforms/Training/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

struct KilnAutodiffPass : kiln::impl::KilnAutodiffBase<KilnAutodiffPass> {
  using KilnAutodiffBase::KilnAutodiffBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>(function);
    if (!forward || forward.isExternal()) {
      module.emitError("kiln-autodiff: no function '") << function << "'";
      return signalPassFailure();
    }
    if (failed(differentiate(module, forward)))
      signalPassFailure();
  }

  /// The index of the result named `loss`.
  FailureOr<unsigned> lossIndex(func::FuncOp forward) {
    for (unsigned i = 0; i < forward.getNumResults(); ++i) {
      auto name = forward.getResultAttrOfType<StringAttr>(i, "kiln.name");
      if (name && name.getValue() == loss) {
        Type resultType = forward.getResultTypes()[i];
        auto type = dyn_cast<RankedTensorType>(resultType);
        if (!type || !isa<FloatType>(type.getElementType()) ||
            type.getNumElements() != 1)
          return forward.emitError("kiln-autodiff: the loss '")
                 << loss << "' must be a float scalar, not " << resultType;
        return i;
      }
    }
    return forward.emitError("kiln-autodiff: '")
           << function << "' has no result named '" << loss << "'";
  }

  LogicalResult differentiate(ModuleOp module, func::FuncOp forward) {
    FailureOr<unsigned> lossResult = lossIndex(forward);
    if (failed(lossResult))
      return failure();
    llvm::Regex frozen(freeze);
    std::string regexError;
    if (!freeze.empty() && !frozen.isValid(regexError))
      return module.emitError("kiln-autodiff: freeze pattern: ") << regexError;

    if (module.lookupSymbol((function + "_grad")))
      return module.emitError("kiln-autodiff: '")
             << function << "_grad' already exists";
    func::FuncOp grad = forward.clone();
    grad.setName((function + "_grad"));
    module.insert(std::next(Block::iterator(forward)), grad);
    Block &block = grad.getBody().front();
    auto ret = cast<func::ReturnOp>(block.getTerminator());
    Value lossValue = ret.getOperand(*lossResult);

    // Parameters, in first-read order, with every read of each; those with
    // no gradient (integers, buffers) are dropped below.
    llvm::MapVector<StringAttr, SmallVector<Value>> params;
    SmallVector<Value> reads;
    SmallVector<Operation *> ops;
    for (Operation &op : block.without_terminator()) {
      ops.push_back(&op);
      auto read = dyn_cast<GetParamOp>(op);
      if (!read || (!freeze.empty() && frozen.match(read.getName())))
        continue;
      auto param = module.lookupSymbol<ParamOp>(read.getNameAttr().getAttr());
      if (param && param->hasAttr("kiln.buffer"))
        continue;
      params[read.getNameAttr().getAttr()].push_back(read.getResult());
      reads.push_back(read.getResult());
    }

    OpBuilder b(ret);
    Location loc = grad.getLoc();
    auto lossType = cast<RankedTensorType>(lossValue.getType());
    Value seed = ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(lossType,
                               b.getFloatAttr(lossType.getElementType(), 1.0)));
    // kiln-train-step's loss scaling starts the backward pass from the scale.
    seed.getDefiningOp()->setAttr("kiln.grad_seed", b.getUnitAttr());
    FailureOr<SmallVector<Value>> readGrads =
        buildGradients(b, loc, ops, reads, {{lossValue, seed}});
    if (failed(readGrads))
      return failure();
    DenseMap<Value, Value> grads;
    for (auto [read, g] : llvm::zip(reads, *readGrads))
      if (g)
        grads[read] = g;

    // loss, then one gradient per trainable parameter. A float parameter
    // with no differentiable path to the loss is a buffer (a mask, running
    // statistics): like a torch parameter whose .grad stays None, it gets no
    // gradient, so no optimizer touches it.
    b.setInsertionPoint(ret);
    SmallVector<Value> results{lossValue};
    SmallVector<std::string> names{loss};
    for (auto &[name, reads] : params) {
      Value total;
      for (Value read : reads)
        if (Value g = grads.lookup(read))
          total = total ? AddOp::create(b, loc, total, g).getResult() : g;
      if (!total)
        continue;
      if (auto param = module.lookupSymbol<ParamOp>(name))
        param->setAttr("kiln.trained", b.getUnitAttr());
      results.push_back(total);
      names.push_back((name.getValue() + ".grad").str());
    }
    // Even when nothing trains (--freeze of everything), the bundle then
    // knows that what is not marked kiln.trained does not train.
    module->setAttr("kiln.differentiated", b.getUnitAttr());
    ret->setOperands(results);
    grad.setType(FunctionType::get(grad.getContext(), grad.getArgumentTypes(),
                                   ValueRange(results).getTypes()));
    for (auto [i, name] : llvm::enumerate(names))
      grad.setResultAttrs(i, b.getDictionaryAttr(b.getNamedAttr(
                                 "kiln.name", b.getStringAttr(name))));
    return success();
  }
};

} // namespace
