//===- ElementwiseOps.cpp - importers of elementwise ONNX ops -------------===//

#include "NodeContext.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::onnx_import;

namespace {

template <typename OpTy> LogicalResult importUnary(NodeContext &n) {
  if (failed(n.expectInputs(1, 1)))
    return failure();
  return n.setResult(n.create<OpTy>(n.input(0)));
}

/// Unary ops with float attributes copied from the node (name, default).
template <typename OpTy>
LogicalResult
importUnaryWithAttrs(NodeContext &n,
                     ArrayRef<std::pair<StringRef, double>> attributes) {
  if (failed(n.expectInputs(1, 1)))
    return failure();
  SmallVector<NamedAttribute> attrs;
  for (auto [name, defaultValue] : attributes)
    attrs.push_back(n.f64(name, n.getFloat(name, defaultValue)));
  return n.setResult(n.create<OpTy>(n.input(0), attrs));
}

LogicalResult checkSameElementType(NodeContext &n, ArrayRef<Value> values) {
  for (Value value : values)
    if (cast<RankedTensorType>(value.getType()).getElementType() !=
        cast<RankedTensorType>(values.front().getType()).getElementType())
      return n.fail("operands have different element types");
  return success();
}

/// Inputs 0..count-1, required, of one element type, numpy-broadcast to
/// their common shape.
LogicalResult broadcastInputs(NodeContext &n, unsigned count,
                              SmallVectorImpl<Value> &operands) {
  if (failed(n.expectInputs(count, count)))
    return failure();
  for (unsigned i = 0; i < count; ++i)
    operands.push_back(n.input(i));
  if (failed(checkSameElementType(n, operands)) ||
      failed(n.broadcastAll(operands)))
    return failure();
  return success();
}

/// A broadcasting binary op over inputs 0 and 1.
template <typename OpTy> LogicalResult importBinary(NodeContext &n) {
  SmallVector<Value> operands;
  if (failed(broadcastInputs(n, 2, operands)))
    return failure();
  return n.setResult(n.create<OpTy>(operands));
}

template <ComparePredicate predicate>
LogicalResult importCompare(NodeContext &n) {
  SmallVector<Value> operands;
  if (failed(broadcastInputs(n, 2, operands)))
    return failure();
  return n.setResult(n.create<CompareOp>(
      operands,
      {n.named("predicate", ComparePredicateAttr::get(n.ctx, predicate))}));
}

/// Sum, Mean, Max, Min: a chain over any number of broadcast inputs.
template <typename OpTy, bool isMean = false>
LogicalResult importVariadic(NodeContext &n) {
  if (n.numInputs() < 1)
    return n.fail("expected at least one input");
  SmallVector<Value> operands;
  for (unsigned i = 0; i < n.numInputs(); ++i) {
    if (!n.hasInput(i))
      return n.fail("input " + Twine(i) + " is missing");
    operands.push_back(n.input(i));
  }
  if (failed(checkSameElementType(n, operands)) ||
      failed(n.broadcastAll(operands)))
    return failure();
  Value result = operands.front();
  for (Value operand : ArrayRef<Value>(operands).drop_front()) {
    FailureOr<Value> next = n.create<OpTy>(ValueRange{result, operand});
    if (failed(next))
      return failure();
    result = *next;
  }
  if constexpr (isMean) {
    auto type = cast<RankedTensorType>(result.getType());
    FailureOr<Value> mean = n.create<DivOp>(ValueRange{
        result, n.splat(type, static_cast<double>(operands.size()))});
    if (failed(mean))
      return failure();
    result = *mean;
  }
  n.setOutput(0, result);
  return success();
}

LogicalResult importIdentity(NodeContext &n) {
  if (failed(n.expectInputs(1, 1)))
    return failure();
  n.setOutput(0, n.input(0));
  return success();
}

LogicalResult importPow(NodeContext &n) {
  if (failed(n.expectInputs(2, 2)))
    return failure();
  auto baseType = n.inputType(0);
  // Since opset 12 the exponent may have another type than the base.
  FailureOr<Value> exponent = n.cast(n.input(1), baseType.getElementType());
  if (failed(exponent))
    return failure();
  SmallVector<Value> operands{n.input(0), *exponent};
  if (failed(n.broadcastAll(operands)))
    return failure();
  return n.setResult(n.create<PowOp>(operands));
}

LogicalResult importMod(NodeContext &n) {
  SmallVector<Value> operands;
  if (failed(broadcastInputs(n, 2, operands)))
    return failure();
  bool fmod = n.getInt("fmod", 0) != 0;
  // Floored remainders of floats are defined since opset 28.
  if (!fmod && n.opset < 28 && isa<FloatType>(n.inputType(0).getElementType()))
    return n.fail("fmod must be 1 for floating-point inputs before opset 28");
  SmallVector<NamedAttribute> attrs;
  if (fmod)
    attrs.push_back(n.unit("fmod"));
  return n.setResult(n.create<RemOp>(operands, attrs));
}

LogicalResult importWhere(NodeContext &n) {
  if (failed(n.expectInputs(3, 3)))
    return failure();
  SmallVector<Value> operands{n.input(0), n.input(1), n.input(2)};
  if (failed(checkSameElementType(n, {operands[1], operands[2]})) ||
      failed(n.broadcastAll(operands)))
    return failure();
  return n.setResult(n.create<SelectOp>(operands, {}, {operands[1].getType()}));
}

LogicalResult importClip(NodeContext &n) {
  if (failed(n.expectInputs(1, 3)))
    return failure();
  Value x = n.input(0);
  auto type = n.inputType(0);
  Value low, high;
  if (n.opset < 11) {
    if (n.attr("min"))
      low = n.splat(type, n.getFloat("min", 0));
    if (n.attr("max"))
      high = n.splat(type, n.getFloat("max", 0));
  } else {
    low = n.input(1);
    high = n.input(2);
  }
  for (auto [bound, isMax] : {std::pair{low, true}, std::pair{high, false}}) {
    if (!bound)
      continue;
    SmallVector<Value> operands{x, bound};
    if (failed(checkSameElementType(n, operands)) ||
        failed(n.broadcastAll(operands)))
      return failure();
    FailureOr<Value> clipped =
        isMax ? n.create<MaxOp>(operands) : n.create<MinOp>(operands);
    if (failed(clipped))
      return failure();
    x = *clipped;
  }
  n.setOutput(0, x);
  return success();
}

/// The element type of a Cast or BitCast node's `to` attribute.
FailureOr<Type> castTarget(NodeContext &n, StringRef what) {
  if (failed(n.expectInputs(1, 1)))
    return failure();
  auto to = static_cast<int32_t>(n.getInt("to", 0));
  Type element = elementTypeOf(to, n.ctx);
  if (!element)
    return n.fail(what + " to " + onnxTypeName(to) + " is not supported");
  return element;
}

/// Cast and CastLike to `element`, with their `saturate` (opset 19) and
/// `round_mode` (opset 24) attributes, which matter for the narrow floats.
LogicalResult importCastTo(NodeContext &n, Type element) {
  RankedTensorType type = n.inputType(0);
  if (type.getElementType() == element) {
    n.setOutput(0, n.input(0));
    return success();
  }
  SmallVector<NamedAttribute> attrs;
  attrs.push_back(n.b.getNamedAttr(
      "saturate", n.b.getBoolAttr(n.getInt("saturate", 1) != 0)));
  std::string mode = n.getString("round_mode", "up");
  std::optional<RoundMode> roundMode = symbolizeRoundMode(mode);
  if (!roundMode)
    return n.fail("round_mode '" + mode + "' is not up, down or nearest");
  attrs.push_back(
      n.b.getNamedAttr("round_mode", RoundModeAttr::get(n.ctx, *roundMode)));
  return n.setResult(
      n.create<CastOp>(n.input(0), attrs, {type.clone(element)}));
}

LogicalResult importCast(NodeContext &n) {
  FailureOr<Type> element = castTarget(n, "cast");
  if (failed(element))
    return failure();
  return importCastTo(n, *element);
}

LogicalResult importBitCast(NodeContext &n) {
  FailureOr<Type> element = castTarget(n, "bitcast");
  if (failed(element))
    return failure();
  RankedTensorType type = n.inputType(0);
  return n.setResult(
      n.create<BitcastOp>(n.input(0), {}, {type.clone(*element)}));
}

LogicalResult importBitShift(NodeContext &n) {
  std::string direction = n.getString("direction", "");
  SmallVector<Value> operands;
  if (failed(broadcastInputs(n, 2, operands)))
    return failure();
  if (direction == "LEFT")
    return n.setResult(n.create<ShiftLeftOp>(operands));
  if (direction == "RIGHT")
    return n.setResult(n.create<ShiftRightOp>(operands));
  return n.fail("direction '" + direction + "' is not LEFT or RIGHT");
}

LogicalResult importCastLike(NodeContext &n) {
  if (failed(n.expectInputs(2, 2)))
    return failure();
  return importCastTo(n, n.inputType(1).getElementType());
}

LogicalResult importConstant(NodeContext &n) {
  if (failed(n.expectInputs(0, 0)))
    return failure();
  if (n.node.attribute_size() != 1)
    return n.fail("expected exactly one value attribute");
  const onnx::AttributeProto &a = n.node.attribute(0);
  Builder &b = n.b;
  DenseElementsAttr value;
  if (a.name() == "value") {
    FailureOr<DenseElementsAttr> tensor = n.tensorAttr(a.t());
    if (failed(tensor))
      return failure();
    value = *tensor;
  } else if (a.name() == "value_float") {
    value = DenseElementsAttr::get(RankedTensorType::get({}, b.getF32Type()),
                                   a.f());
  } else if (a.name() == "value_floats") {
    SmallVector<float> floats(a.floats().begin(), a.floats().end());
    value = DenseElementsAttr::get(
        RankedTensorType::get({static_cast<int64_t>(floats.size())},
                              b.getF32Type()),
        ArrayRef<float>(floats));
  } else if (a.name() == "value_int") {
    value = DenseElementsAttr::get(RankedTensorType::get({}, b.getI64Type()),
                                   static_cast<int64_t>(a.i()));
  } else if (a.name() == "value_ints") {
    SmallVector<int64_t> ints(a.ints().begin(), a.ints().end());
    value = DenseElementsAttr::get(
        RankedTensorType::get({static_cast<int64_t>(ints.size())},
                              b.getI64Type()),
        ArrayRef<int64_t>(ints));
  } else {
    return n.fail("constant attribute '" + a.name() + "' is not supported");
  }
  n.setOutput(0, n.constant(value));
  return success();
}

LogicalResult importIsInf(NodeContext &n) {
  if (failed(n.expectInputs(1, 1)))
    return failure();
  bool positive = n.getInt("detect_positive", 1) != 0;
  bool negative = n.getInt("detect_negative", 1) != 0;
  FailureOr<Value> inf = n.create<IsInfOp>(n.input(0));
  if (failed(inf))
    return failure();
  Value result = *inf;
  if (positive != negative) {
    auto type = n.inputType(0);
    FailureOr<Value> side = n.create<CompareOp>(
        ValueRange{n.input(0), n.splat(type, 0)},
        {n.named("predicate", ComparePredicateAttr::get(
                                  n.ctx, positive ? ComparePredicate::gt
                                                  : ComparePredicate::lt))});
    if (failed(side))
      return failure();
    FailureOr<Value> both = n.create<AndOp>(ValueRange{result, *side});
    if (failed(both))
      return failure();
    result = *both;
  } else if (!positive) {
    result = n.splat(cast<RankedTensorType>(result.getType()), 0);
  }
  n.setOutput(0, result);
  return success();
}

LogicalResult importPRelu(NodeContext &n) {
  SmallVector<Value> operands;
  if (failed(broadcastInputs(n, 2, operands)))
    return failure();
  auto type = cast<RankedTensorType>(operands[0].getType());
  FailureOr<Value> scaled = n.create<MulOp>(operands);
  FailureOr<Value> negative = n.create<CompareOp>(
      ValueRange{operands[0], n.splat(type, 0)},
      {n.named("predicate",
               ComparePredicateAttr::get(n.ctx, ComparePredicate::lt))});
  if (failed(scaled) || failed(negative))
    return failure();
  return n.setResult(n.create<SelectOp>(
      ValueRange{*negative, *scaled, operands[0]}, {}, {type}));
}

LogicalResult importShrink(NodeContext &n) {
  if (failed(n.expectInputs(1, 1)))
    return failure();
  Value x = n.input(0);
  auto type = n.inputType(0);
  double bias = n.getFloat("bias", 0.0), lambd = n.getFloat("lambd", 0.5);
  auto compare = [&](ComparePredicate p, double bound) {
    return n.create<CompareOp>(
        ValueRange{x, n.splat(type, bound)},
        {n.named("predicate", ComparePredicateAttr::get(n.ctx, p))});
  };
  FailureOr<Value> below = compare(ComparePredicate::lt, -lambd);
  FailureOr<Value> above = compare(ComparePredicate::gt, lambd);
  FailureOr<Value> plus = n.create<AddOp>(ValueRange{x, n.splat(type, bias)});
  FailureOr<Value> minus = n.create<SubOp>(ValueRange{x, n.splat(type, bias)});
  if (failed(below) || failed(above) || failed(plus) || failed(minus))
    return failure();
  FailureOr<Value> inner = n.create<SelectOp>(
      ValueRange{*above, *minus, n.splat(type, 0)}, {}, {type});
  if (failed(inner))
    return failure();
  FailureOr<Value> result =
      n.create<SelectOp>(ValueRange{*below, *plus, *inner}, {}, {type});
  if (failed(result))
    return failure();
  n.setOutput(0, *result);
  return success();
}

LogicalResult importGelu(NodeContext &n) {
  if (failed(n.expectInputs(1, 1)))
    return failure();
  std::string approximate = n.getString("approximate", "none");
  GeluApproximation kind;
  if (approximate == "none")
    kind = GeluApproximation::none;
  else if (approximate == "tanh")
    kind = GeluApproximation::tanh;
  else
    return n.fail("approximate '" + approximate + "' is not none or tanh");
  return n.setResult(n.create<GeluOp>(
      n.input(0),
      {n.named("approximate", GeluApproximationAttr::get(n.ctx, kind))}));
}

/// x * sigmoid(alpha * x): Swish (opset 24) and the gate of SwiGLU (28).
FailureOr<Value> swish(NodeContext &n, Value x, double alpha) {
  Value scaled = x;
  if (alpha != 1.0) {
    FailureOr<Value> s = n.create<MulOp>(
        ValueRange{x, n.splat(cast<RankedTensorType>(x.getType()), alpha)});
    if (failed(s))
      return failure();
    scaled = *s;
  }
  FailureOr<Value> gate = n.create<SigmoidOp>(scaled);
  if (failed(gate))
    return failure();
  return n.create<MulOp>(ValueRange{x, *gate});
}

LogicalResult importSwish(NodeContext &n) {
  if (n.opset < 24)
    return n.fail("Swish is an operator of opset 24 and later");
  if (failed(n.expectInputs(1, 1)))
    return failure();
  return n.setResult(swish(n, n.input(0), n.getFloat("alpha", 1.0)));
}

/// SwiGLU (opset 28): Swish(A) * B, A and B of one shape.
LogicalResult importSwiGLU(NodeContext &n) {
  if (n.opset < 28)
    return n.fail("SwiGLU is an operator of opset 28 and later");
  if (failed(n.expectInputs(2, 2)))
    return failure();
  if (n.inputType(0) != n.inputType(1))
    return n.fail("A and B must have the same type and shape");
  FailureOr<Value> gate = swish(n, n.input(0), n.getFloat("alpha", 1.0));
  if (failed(gate))
    return failure();
  return n.setResult(n.create<MulOp>(ValueRange{*gate, n.input(1)}));
}

/// Mish (opset 18): x * tanh(softplus(x)).
LogicalResult importMish(NodeContext &n) {
  if (n.opset < 18)
    return n.fail("Mish is an operator of opset 18 and later");
  if (failed(n.expectInputs(1, 1)))
    return failure();
  FailureOr<Value> soft = n.create<SoftplusOp>(n.input(0));
  if (failed(soft))
    return failure();
  FailureOr<Value> gate = n.create<TanhOp>(*soft);
  if (failed(gate))
    return failure();
  return n.setResult(n.create<MulOp>(ValueRange{n.input(0), *gate}));
}

} // namespace

void kiln::onnx_import::registerElementwiseOps(OpImporterTable &t) {
  t["Abs"] = importUnary<AbsOp>;
  t["Neg"] = importUnary<NegOp>;
  t["Sign"] = importUnary<SignOp>;
  t["Relu"] = importUnary<ReluOp>;
  t["Exp"] = importUnary<ExpOp>;
  t["Log"] = importUnary<LogOp>;
  t["Sqrt"] = importUnary<SqrtOp>;
  t["Reciprocal"] = importUnary<ReciprocalOp>;
  t["Tanh"] = importUnary<TanhOp>;
  t["Sigmoid"] = importUnary<SigmoidOp>;
  t["Softplus"] = importUnary<SoftplusOp>;
  t["Softsign"] = importUnary<SoftsignOp>;
  t["Erf"] = importUnary<ErfOp>;
  t["Sin"] = importUnary<SinOp>;
  t["Cos"] = importUnary<CosOp>;
  t["Tan"] = importUnary<TanOp>;
  t["Asin"] = importUnary<AsinOp>;
  t["Acos"] = importUnary<AcosOp>;
  t["Atan"] = importUnary<AtanOp>;
  t["Sinh"] = importUnary<SinhOp>;
  t["Cosh"] = importUnary<CoshOp>;
  t["Asinh"] = importUnary<AsinhOp>;
  t["Acosh"] = importUnary<AcoshOp>;
  t["Atanh"] = importUnary<AtanhOp>;
  t["Floor"] = importUnary<FloorOp>;
  t["Ceil"] = importUnary<CeilOp>;
  t["Round"] = importUnary<RoundOp>;
  t["HardSwish"] = importUnary<HardSwishOp>;
  t["Not"] = importUnary<NotOp>;
  t["BitwiseNot"] = importUnary<NotOp>;
  t["IsNaN"] = importUnary<IsNanOp>;
  t["IsInf"] = importIsInf;
  t["Gelu"] = importGelu;
  t["Swish"] = importSwish;
  t["SwiGLU"] = importSwiGLU;
  t["Mish"] = importMish;
  t["LeakyRelu"] = [](NodeContext &n) {
    return importUnaryWithAttrs<LeakyReluOp>(n, {{"alpha", 0.01}});
  };
  t["Elu"] = [](NodeContext &n) {
    return importUnaryWithAttrs<EluOp>(n, {{"alpha", 1.0}});
  };
  t["Celu"] = [](NodeContext &n) {
    return importUnaryWithAttrs<CeluOp>(n, {{"alpha", 1.0}});
  };
  t["Selu"] = [](NodeContext &n) {
    return importUnaryWithAttrs<SeluOp>(n,
                                        {{"alpha", 1.67326319217681884765625},
                                         {"gamma", 1.05070102214813232421875}});
  };
  t["HardSigmoid"] = [](NodeContext &n) {
    return importUnaryWithAttrs<HardSigmoidOp>(n,
                                               {{"alpha", 0.2}, {"beta", 0.5}});
  };
  t["ThresholdedRelu"] = [](NodeContext &n) {
    return importUnaryWithAttrs<ThresholdedReluOp>(n, {{"alpha", 1.0}});
  };
  t["Identity"] = importIdentity;
  t["Add"] = importBinary<AddOp>;
  t["Sub"] = importBinary<SubOp>;
  t["Mul"] = importBinary<MulOp>;
  t["Div"] = importBinary<DivOp>;
  t["And"] = importBinary<AndOp>;
  t["Or"] = importBinary<OrOp>;
  t["Xor"] = importBinary<XorOp>;
  t["BitwiseAnd"] = importBinary<AndOp>;
  t["BitwiseOr"] = importBinary<OrOp>;
  t["BitwiseXor"] = importBinary<XorOp>;
  t["BitShift"] = importBitShift;
  t["BitCast"] = importBitCast;
  t["Pow"] = importPow;
  t["Mod"] = importMod;
  t["Equal"] = importCompare<ComparePredicate::eq>;
  t["Less"] = importCompare<ComparePredicate::lt>;
  t["LessOrEqual"] = importCompare<ComparePredicate::le>;
  t["Greater"] = importCompare<ComparePredicate::gt>;
  t["GreaterOrEqual"] = importCompare<ComparePredicate::ge>;
  t["Sum"] = importVariadic<AddOp>;
  t["Mean"] = importVariadic<AddOp, /*isMean=*/true>;
  t["Max"] = importVariadic<MaxOp>;
  t["Min"] = importVariadic<MinOp>;
  t["Where"] = importWhere;
  t["Clip"] = importClip;
  t["Cast"] = importCast;
  t["CastLike"] = importCastLike;
  t["Constant"] = importConstant;
  t["PRelu"] = importPRelu;
  t["Shrink"] = importShrink;
}
