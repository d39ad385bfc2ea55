//===- TrainStep.cpp - the train_step entry point from gradients ----------===//

#include "kiln/KilnOps.h"
#include "kiln/Transforms/Passes.h"

namespace kiln {
#define GEN_PASS_DEF_KILNTRAINSTEP
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

struct KilnTrainStepPass : kiln::impl::KilnTrainStepBase<KilnTrainStepPass> {
  using KilnTrainStepBase::KilnTrainStepBase;

  Value splat(OpBuilder &b, Location loc, Type type, double value) {
    auto tensor = cast<RankedTensorType>(type);
    return ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(tensor,
                               b.getFloatAttr(tensor.getElementType(), value)));
  }

  /// A zero-initialized optimizer state symbol, read in `block`.
  Value stateParam(OpBuilder &b, ModuleOp module, Location loc,
                   StringRef name, Type type, Block &block) {
    auto tensor = cast<RankedTensorType>(type);
    if (!module.lookupSymbol(name)) {
      OpBuilder mb(module.getBodyRegion());
      mb.setInsertionPointToEnd(module.getBody());
      auto state = ParamOp::create(
          mb, loc, mb.getStringAttr(name), TypeAttr::get(tensor),
          cast<ElementsAttr>(DenseElementsAttr::get(
              tensor, mb.getFloatAttr(tensor.getElementType(), 0.0))));
      state->setAttr("kiln.optimizer_state", mb.getUnitAttr());
    }
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&block);
    return GetParamOp::create(b, loc, type, name);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::string gradName = function + "_grad";
    auto grad = module.lookupSymbol<func::FuncOp>(gradName);
    if (!grad) {
      module.emitError("kiln-train-step: no gradient function '")
          << gradName << "'; run kiln-autodiff first";
      return signalPassFailure();
    }
    if (optimizer != "sgd" && optimizer != "adamw") {
      module.emitError("kiln-train-step: unknown optimizer '")
          << optimizer << "' (expected sgd or adamw)";
      return signalPassFailure();
    }
    if (module.lookupSymbol("train_step")) {
      module.emitError("kiln-train-step: 'train_step' already exists");
      return signalPassFailure();
    }
    func::FuncOp step = grad.clone();
    step.setName("train_step");
    module.insert(std::next(Block::iterator(grad)), step);
    Block &block = step.getBody().front();
    auto ret = cast<func::ReturnOp>(block.getTerminator());
    Location loc = step.getLoc();
    OpBuilder b(ret);

    // The parameter read for each "<param>.grad" result.
    DenseMap<StringAttr, Value> reads;
    for (auto read : block.getOps<GetParamOp>())
      reads.try_emplace(read.getNameAttr().getAttr(), read.getResult());

    SmallVector<Value> results{ret.getOperand(0)};
    SmallVector<std::pair<std::string, std::string>> names{{"loss", ""}};
    Value stepCount, newStepCount;
    if (optimizer == "adamw") {
      auto scalar = RankedTensorType::get({}, b.getF32Type());
      stepCount = stateParam(b, module, loc, "optimizer.step", scalar, block);
      newStepCount = AddOp::create(b, loc, stepCount, splat(b, loc, scalar, 1));
      results.push_back(newStepCount);
      names.push_back({"optimizer.step", "optimizer.step"});
    }
    for (unsigned i = 1; i < ret.getNumOperands(); ++i) {
      auto name = step.getResultAttrOfType<StringAttr>(i, "kiln.name");
      StringRef param = name.getValue().drop_back(strlen(".grad"));
      Value p = reads.lookup(b.getStringAttr(param));
      Value g = ret.getOperand(i);
      if (!p)
        continue;
      Type type = p.getType();
      auto c = [&](double v) { return splat(b, loc, type, v); };
      if (optimizer == "sgd") {
        if (weightDecay != 0)
          g = AddOp::create(b, loc, g, MulOp::create(b, loc, p, c(weightDecay)));
        if (momentum != 0) {
          std::string bufName = (param + ".momentum_buffer").str();
          Value buf = stateParam(b, module, loc, bufName, type, block);
          g = AddOp::create(b, loc, MulOp::create(b, loc, buf, c(momentum)), g);
          results.push_back(g);
          names.push_back({bufName, bufName});
        }
        results.push_back(
            SubOp::create(b, loc, p, MulOp::create(b, loc, g, c(lr))));
        names.push_back({param.str(), param.str()});
        continue;
      }
      // AdamW.
      std::string mName = (param + ".exp_avg").str();
      std::string vName = (param + ".exp_avg_sq").str();
      Value m = stateParam(b, module, loc, mName, type, block);
      Value v = stateParam(b, module, loc, vName, type, block);
      Value m2 = AddOp::create(b, loc, MulOp::create(b, loc, m, c(beta1)),
                               MulOp::create(b, loc, g, c(1 - beta1)));
      Value v2 = AddOp::create(
          b, loc, MulOp::create(b, loc, v, c(beta2)),
          MulOp::create(b, loc, MulOp::create(b, loc, g, g), c(1 - beta2)));
      // Bias corrections 1 - beta^t, broadcast from the scalar step count.
      auto tensor = cast<RankedTensorType>(type);
      auto scalarType = cast<RankedTensorType>(newStepCount.getType());
      auto correction = [&](double beta) -> Value {
        Value power = PowOp::create(b, loc, splat(b, loc, scalarType, beta),
                                    newStepCount);
        Value one = SubOp::create(b, loc, splat(b, loc, scalarType, 1), power);
        Value cast = one;
        if (tensor.getElementType() != scalarType.getElementType())
          cast = CastOp::create(b, loc, scalarType.clone(tensor.getElementType()),
                                one);
        return BroadcastOp::create(b, loc, tensor, cast);
      };
      Value mHat = DivOp::create(b, loc, m2, correction(beta1));
      Value vHat = DivOp::create(b, loc, v2, correction(beta2));
      Value decayed = p;
      if (weightDecay != 0)
        decayed = SubOp::create(b, loc, p, MulOp::create(b, loc, p, c(lr * weightDecay)));
      Value denom = AddOp::create(b, loc, SqrtOp::create(b, loc, vHat), c(eps));
      Value update = MulOp::create(b, loc, DivOp::create(b, loc, mHat, denom), c(lr));
      results.push_back(m2);
      names.push_back({mName, mName});
      results.push_back(v2);
      names.push_back({vName, vName});
      results.push_back(SubOp::create(b, loc, decayed, update));
      names.push_back({param.str(), param.str()});
    }
    ret->setOperands(results);
    step.setType(FunctionType::get(step.getContext(), step.getArgumentTypes(),
                                   ValueRange(results).getTypes()));
    for (auto [i, name] : llvm::enumerate(names)) {
      SmallVector<NamedAttribute> attrs{b.getNamedAttr(
          "kiln.name", b.getStringAttr(name.second.empty()
                                           ? name.first
                                           : name.first + ".next"))};
      if (!name.second.empty())
        attrs.push_back(b.getNamedAttr("kiln.update", b.getStringAttr(name.second)));
      step.setResultAttrs(i, b.getDictionaryAttr(attrs));
    }
  }
};

} // namespace
