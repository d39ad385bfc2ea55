//===- AddLoss.cpp - a loss over a model output and a labels input --------===//

#include "kiln/KilnOps.h"
#include "kiln/Transforms/Training/Passes.h"

namespace kiln {
#define GEN_PASS_DEF_KILNADDLOSS
#include "kiln/Transforms/Training/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

struct KilnAddLossPass : kiln::impl::KilnAddLossBase<KilnAddLossPass> {
  using KilnAddLossBase::KilnAddLossBase;

  /// The index of the result named `on`, or of the only result.
  FailureOr<unsigned> outputIndex(func::FuncOp f) {
    SmallVector<std::string> names;
    for (unsigned i = 0; i < f.getNumResults(); ++i) {
      auto name = f.getResultAttrOfType<StringAttr>(i, "kiln.name");
      names.push_back(name ? name.str() : "#" + std::to_string(i));
      if (!on.empty() && name && name.getValue() == on)
        return i;
    }
    if (on.empty() && f.getNumResults() == 1)
      return 0u;
    InFlightDiagnostic error =
        on.empty() ? f.emitError("kiln-add-loss: the model has ")
                         << f.getNumResults()
                         << " outputs; name the one the loss is computed "
                            "from (--loss-on)"
                   : f.emitError("kiln-add-loss: the model has no output '")
                         << on.getValue() << "'";
    error << "; its outputs: " << llvm::join(names, ", ");
    return error;
  }

  Value meanOfAll(OpBuilder &b, Location loc, Value v) {
    auto type = cast<RankedTensorType>(v.getType());
    SmallVector<int64_t> dims =
        llvm::to_vector(llvm::seq<int64_t>(0, type.getRank()));
    if (dims.empty())
      return v;
    return ReduceMeanOp::create(b, loc, v, b.getDenseI64ArrayAttr(dims),
                                nullptr);
  }

  /// Appends the labels argument.
  Value addLabels(OpBuilder &b, func::FuncOp f, Type type) {
    unsigned index = f.getNumArguments();
    (void)f.insertArgument(index, type,
                           b.getDictionaryAttr(b.getNamedAttr(
                               "kiln.name", b.getStringAttr(labels))),
                           f.getLoc());
    return f.getArgument(index);
  }

  /// The cross-entropy of `logits` against new int64 labels.
  FailureOr<Value> crossEntropy(OpBuilder &b, Location loc, func::FuncOp f,
                                Value logits, StringRef outputName) {
    auto type = cast<RankedTensorType>(logits.getType());
    int64_t rank = type.getRank();
    int64_t axis = classAxis < 0 ? classAxis + rank : classAxis;
    if (rank < 2 || axis < 1 || axis >= rank)
      return f.emitError("kiln-add-loss: cross_entropy needs logits of rank "
                         "2 or more with the classes on an axis after the "
                         "batch axis; output '")
             << outputName << "' is " << type << " and the class axis is "
             << classAxis.getValue();
    if (labelSmoothing < 0 || labelSmoothing >= 1)
      return f.emitError("kiln-add-loss: label smoothing must lie in [0, 1), "
                         "not ")
             << labelSmoothing.getValue();
    SmallVector<int64_t> labelShape;
    for (int64_t d = 0; d < rank; ++d)
      if (d != axis)
        labelShape.push_back(type.getDimSize(d));
    auto labelType = RankedTensorType::get(labelShape, b.getI64Type());
    if (axis != 1) {
      // kiln.cross_entropy takes the classes on axis 1, as PyTorch does.
      SmallVector<int64_t> perm{0, axis};
      for (int64_t d = 1; d < rank; ++d)
        if (d != axis)
          perm.push_back(d);
      logits =
          TransposeOp::create(b, loc, logits, b.getDenseI64ArrayAttr(perm));
    }
    Value labels = addLabels(b, f, labelType);
    return CrossEntropyOp::create(
               b, loc, logits, labels, /*weight=*/nullptr,
               ReductionAttr::get(b.getContext(), Reduction::mean),
               b.getI64IntegerAttr(ignoreIndex),
               b.getF64FloatAttr(labelSmoothing))
        .getResult();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto f = module.lookupSymbol<func::FuncOp>(function);
    if (!f || f.isExternal()) {
      module.emitError("kiln-add-loss: no function '")
          << function.getValue() << "'";
      return signalPassFailure();
    }
    if (kind != "cross_entropy" && kind != "mse" && kind != "bce_with_logits") {
      f.emitError("kiln-add-loss: unknown loss '")
          << kind.getValue()
          << "' (expected cross_entropy, mse or bce_with_logits)";
      return signalPassFailure();
    }
    for (unsigned i = 0; i < f.getNumResults(); ++i)
      if (auto n = f.getResultAttrOfType<StringAttr>(i, "kiln.name");
          n && n.getValue() == name) {
        f.emitError("kiln-add-loss: the model already has an output named '")
            << name.getValue()
            << "'; use it as the loss (--loss-output) instead of "
               "building one";
        return signalPassFailure();
      }
    for (unsigned i = 0; i < f.getNumArguments(); ++i)
      if (auto n = f.getArgAttrOfType<StringAttr>(i, "kiln.name");
          n && n.getValue() == labels) {
        f.emitError("kiln-add-loss: the model already has an input named '")
            << labels.getValue()
            << "'; name the labels input differently (--labels)";
        return signalPassFailure();
      }
    FailureOr<unsigned> index = outputIndex(f);
    if (failed(index))
      return signalPassFailure();
    std::string outputName = on;
    if (auto n = f.getResultAttrOfType<StringAttr>(*index, "kiln.name"))
      outputName = n.str();

    Block &block = f.getBody().front();
    auto ret = cast<func::ReturnOp>(block.getTerminator());
    Value output = ret.getOperand(*index);
    auto outputType = dyn_cast<RankedTensorType>(output.getType());
    if (!outputType || !isa<FloatType>(outputType.getElementType())) {
      f.emitError("kiln-add-loss: output '")
          << outputName << "' is " << output.getType()
          << ", not a float tensor";
      return signalPassFailure();
    }
    OpBuilder b(ret);
    Location loc = f.getLoc();
    Value loss;
    if (kind == "cross_entropy") {
      FailureOr<Value> ce = crossEntropy(b, loc, f, output, outputName);
      if (failed(ce))
        return signalPassFailure();
      loss = *ce;
    } else {
      Value target = addLabels(b, f, outputType);
      if (kind == "mse") {
        Value diff = SubOp::create(b, loc, output, target);
        loss = meanOfAll(b, loc, MulOp::create(b, loc, diff, diff));
      } else {
        // max(x, 0) - x * t + log(1 + exp(-|x|)), as PyTorch computes it.
        Value negAbs = NegOp::create(b, loc, AbsOp::create(b, loc, output));
        Value terms =
            AddOp::create(b, loc,
                          SubOp::create(b, loc, ReluOp::create(b, loc, output),
                                        MulOp::create(b, loc, output, target)),
                          SoftplusOp::create(b, loc, negAbs));
        loss = meanOfAll(b, loc, terms);
      }
    }

    (void)f.insertResult(f.getNumResults(), loss.getType(),
                         b.getDictionaryAttr(b.getNamedAttr(
                             "kiln.name", b.getStringAttr(name))));
    ret.getOperandsMutable().append(loss);
  }
};

} // namespace
