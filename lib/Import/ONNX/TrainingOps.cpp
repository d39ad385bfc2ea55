//===- TrainingOps.cpp - importers of the ai.onnx.preview.training ops ----===//
//
// Gradient becomes the reverse-mode derivative of the ops imported so far
// (kiln::buildGradients); Adam, Adagrad and Momentum become their update
// formulas, as the operator specification (version 1) writes them, in core
// elementwise ops.
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"

#include "kiln/KilnInterfaces.h"

#include "mlir/IR/Diagnostics.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::onnx_import;

namespace {

std::string typeString(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  type.print(os);
  return text;
}

bool isFloatTensor(Value value) {
  return isa<FloatType>(
      cast<RankedTensorType>(value.getType()).getElementType());
}

//===----------------------------------------------------------------------===//
// Gradient.
//===----------------------------------------------------------------------===//

/// Where a differentiation error points: the ONNX node the failing op came
/// from.
std::string describeDiagnostic(Diagnostic &diag) {
  std::string where;
  if (auto name = dyn_cast<NameLoc>(diag.getLocation()))
    where = "node '" + name.getName().str() + "': ";
  return where + diag.str();
}

LogicalResult importGradient(NodeContext &n) {
  const onnx::AttributeProto *xsAttr = n.attr("xs");
  const onnx::AttributeProto *yAttr = n.attr("y");
  const onnx::AttributeProto *zsAttr = n.attr("zs");
  if (!xsAttr || xsAttr->strings_size() == 0)
    return n.fail("attribute 'xs' (the names to differentiate with respect "
                  "to) is required");
  if (!yAttr || yAttr->s().empty())
    return n.fail("attribute 'y' (the name of the differentiated tensor) is "
                  "required");
  SmallVector<std::string> names(xsAttr->strings().begin(),
                                 xsAttr->strings().end());
  unsigned numXs = names.size();
  if (zsAttr)
    names.append(zsAttr->strings().begin(), zsAttr->strings().end());
  if (n.numInputs() != names.size())
    return n.fail("expected one input for each name in xs and zs (" +
                  Twine(names.size()) + "), got " + Twine(n.numInputs()));
  if (n.numOutputs() > numXs)
    return n.fail("expected at most one output for each name in xs (" +
                  Twine(numXs) + "), got " + Twine(n.numOutputs()));
  for (auto [i, name] : llvm::enumerate(names))
    if (!n.hasInput(i) || n.node.input(i) != name)
      return n.fail("input " + Twine(i) + " ('" + n.node.input(i) +
                    "') is not the tensor it feeds ('" + name +
                    "'): differentiating at other values than the graph's "
                    "is not supported yet");
  if (!n.lookupValue)
    return n.fail("internal error: no value lookup for Gradient");
  const std::string &yName = yAttr->s();
  Value y = n.lookupValue(yName);
  if (!y)
    return n.fail("y names '" + yName +
                  "', which is not computed before this node");
  if (!isFloatTensor(y))
    return n.fail("y ('" + yName + "') is not a floating-point tensor");
  SmallVector<Value> wrt;
  for (unsigned i = 0; i < numXs; ++i) {
    if (!isFloatTensor(n.input(i)))
      return n.fail("xs '" + names[i] + "' is not a floating-point tensor");
    wrt.push_back(n.input(i));
  }

  // Everything imported so far, in program order: the forward computation.
  Block *block = n.b.getInsertionBlock();
  SmallVector<Operation *> ops;
  for (Operation &op :
       llvm::make_range(block->begin(), n.b.getInsertionPoint()))
    ops.push_back(&op);
  Value seed = n.splat(cast<RankedTensorType>(y.getType()), 1.0);
  std::string reason;
  FailureOr<SmallVector<Value>> gradients = failure();
  {
    ScopedDiagnosticHandler handler(n.ctx, [&](Diagnostic &diag) {
      if (reason.empty())
        reason = describeDiagnostic(diag);
      return success();
    });
    gradients = buildGradients(n.b, n.loc, ops, wrt, {{y, seed}});
  }
  if (failed(gradients))
    return n.fail("cannot differentiate '" + yName + "': " + reason);
  for (unsigned i = 0; i < n.numOutputs(); ++i) {
    if (!n.wantsOutput(i))
      continue;
    Value gradient = (*gradients)[i];
    // y does not depend on this x.
    if (!gradient)
      gradient = n.splat(n.inputType(i), 0.0);
    n.setOutput(i, gradient);
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Optimizers.
//===----------------------------------------------------------------------===//

/// An optimizer node's inputs: R, T, then `groups` groups (X..., G..., V...)
/// of one tensor per optimized variable.
struct OptimizerInputs {
  /// The learning rate and the update count, as rank-0 tensors.
  Value rate, count;
  /// tensors[g][i]: group g (X, G, ...) of variable i.
  SmallVector<SmallVector<Value>> tensors;
  unsigned numVariables = 0;
};

/// Reads and checks the inputs and outputs of an optimizer node;
/// `groupNames` are the input groups after R and T, `numOutputGroups` the
/// number of output groups (X_new, then the new states).
FailureOr<OptimizerInputs> readOptimizerInputs(NodeContext &n,
                                               ArrayRef<StringRef> groupNames,
                                               unsigned numOutputGroups) {
  unsigned numGroups = groupNames.size();
  std::string layout = "R, T, then";
  for (StringRef group : groupNames)
    layout += " " + group.str() + "...";
  if (n.numInputs() < 2 + numGroups || (n.numInputs() - 2) % numGroups != 0)
    return n.fail("expected the inputs " + layout + " (2 + " +
                  Twine(numGroups) + "k inputs for k optimized tensors), got " +
                  Twine(n.numInputs()));
  for (unsigned i = 0; i < n.numInputs(); ++i)
    if (!n.hasInput(i))
      return n.fail("input " + Twine(i) + " is missing");
  OptimizerInputs result;
  result.numVariables = (n.numInputs() - 2) / numGroups;
  if (n.numOutputs() != numOutputGroups * result.numVariables)
    return n.fail("expected " + Twine(numOutputGroups * result.numVariables) +
                  " outputs (" + Twine(numOutputGroups) + " for each of the " +
                  Twine(result.numVariables) + " optimized tensors), got " +
                  Twine(n.numOutputs()));

  auto scalar = [&](unsigned i, StringRef what,
                    bool isFloat) -> FailureOr<Value> {
    auto type = n.inputType(i);
    bool typeFits = isFloat ? (type.getElementType().isF32() ||
                               type.getElementType().isF64())
                            : type.getElementType().isInteger(64);
    if (!typeFits || type.getNumElements() != 1)
      return n.fail("input '" + n.node.input(i) + "' (" + what +
                    ") must be a scalar " +
                    (isFloat ? "float or double" : "int64") + ", not " +
                    typeString(type));
    if (type.getRank() == 0)
      return n.input(i);
    return ReshapeOp::create(n.b, n.loc, type.clone(ArrayRef<int64_t>{}),
                             n.input(i))
        .getResult();
  };
  FailureOr<Value> rate = scalar(0, "R, the learning rate", true);
  if (failed(rate))
    return failure();
  FailureOr<Value> count = scalar(1, "T, the update count", false);
  if (failed(count))
    return failure();
  result.rate = *rate;
  result.count = *count;

  result.tensors.resize(numGroups);
  for (unsigned g = 0; g < numGroups; ++g) {
    for (unsigned v = 0; v < result.numVariables; ++v) {
      unsigned index = 2 + g * result.numVariables + v;
      unsigned xIndex = 2 + v;
      auto type = n.inputType(index);
      if (g == 0 && !type.getElementType().isF32() &&
          !type.getElementType().isF64())
        return n.fail("input '" + n.node.input(index) +
                      "' (an optimized tensor) must be float or double, not " +
                      typeString(type));
      if (type != n.inputType(xIndex))
        return n.fail("input '" + n.node.input(index) + "' (" + groupNames[g] +
                      " of '" + n.node.input(xIndex) + "') has the type " +
                      typeString(type) + ", not " +
                      typeString(n.inputType(xIndex)));
      result.tensors[g].push_back(n.input(index));
    }
  }
  return result;
}

/// Elementwise arithmetic on the tensors of one optimizer node. Operands
/// have one type; scalars (rank 0) are converted and broadcast with `like`.
class Arithmetic {
public:
  explicit Arithmetic(NodeContext &n) : n(n) {}

  Value add(Value a, Value b) { return AddOp::create(n.b, n.loc, a, b); }
  Value sub(Value a, Value b) { return SubOp::create(n.b, n.loc, a, b); }
  Value mul(Value a, Value b) { return MulOp::create(n.b, n.loc, a, b); }
  Value div(Value a, Value b) { return DivOp::create(n.b, n.loc, a, b); }
  Value pow(Value a, Value b) { return PowOp::create(n.b, n.loc, a, b); }
  Value sqrt(Value a) { return SqrtOp::create(n.b, n.loc, a); }
  /// `value` * x, skipping the product by 1.
  Value scale(double value, Value x) {
    return value == 1.0 ? x : mul(like(x, value), x);
  }
  /// A tensor of `value`'s type filled with `constant`.
  Value like(Value value, double constant) {
    return n.splat(cast<RankedTensorType>(value.getType()), constant);
  }
  /// `cond ? onTrue : onFalse`, elementwise.
  Value select(Value cond, Value onTrue, Value onFalse) {
    return SelectOp::create(n.b, n.loc, onTrue.getType(), cond, onTrue,
                            onFalse);
  }
  /// Whether the (int64) update count is positive.
  Value positive(Value count) {
    return CompareOp::create(
        n.b, n.loc, ComparePredicateAttr::get(n.ctx, ComparePredicate::gt),
        count, like(count, 0));
  }
  /// The rank-0 `scalar` converted to `element` type.
  Value convert(Value scalar, Type element) {
    auto type = cast<RankedTensorType>(scalar.getType());
    if (type.getElementType() == element)
      return scalar;
    return CastOp::create(n.b, n.loc, type.clone(element), scalar);
  }
  /// The rank-0 `scalar` converted and broadcast to `like`'s type.
  Value expand(Value scalar, Value like) {
    auto type = cast<RankedTensorType>(like.getType());
    Value converted = convert(scalar, type.getElementType());
    if (type.getRank() == 0)
      return converted;
    return BroadcastOp::create(n.b, n.loc, type, converted);
  }
  /// norm_coefficient * X + G.
  Value regularize(double normCoefficient, Value x, Value g) {
    if (normCoefficient == 0.0)
      return g;
    return add(scale(normCoefficient, x), g);
  }

private:
  NodeContext &n;
};

LogicalResult requireAttributes(NodeContext &n, ArrayRef<StringRef> names) {
  for (StringRef name : names)
    if (!n.attr(name))
      return n.fail("attribute '" + name + "' is required");
  return success();
}

/// Adam: inputs R, T, X..., G..., V..., H...; outputs X_new..., V_new...,
/// H_new....
LogicalResult importAdam(NodeContext &n) {
  FailureOr<OptimizerInputs> in =
      readOptimizerInputs(n, {"X", "G", "V", "H"}, 3);
  if (failed(in))
    return failure();
  double alpha = n.getFloat("alpha", 0.9f), beta = n.getFloat("beta", 0.999f);
  double epsilon = n.getFloat("epsilon", 1e-6f);
  double norm = n.getFloat("norm_coefficient", 0.0);
  double normPost = n.getFloat("norm_coefficient_post", 0.0);
  Arithmetic a(n);
  // R_adjusted = T > 0 ? R * sqrt(1 - beta^T) / (1 - alpha^T) : R.
  Value rate = in->rate;
  Value count = a.convert(
      in->count, cast<RankedTensorType>(rate.getType()).getElementType());
  Value alphaT = a.pow(a.like(rate, alpha), count);
  Value betaT = a.pow(a.like(rate, beta), count);
  Value corrected = a.div(a.mul(rate, a.sqrt(a.sub(a.like(rate, 1), betaT))),
                          a.sub(a.like(rate, 1), alphaT));
  Value adjusted = a.select(a.positive(in->count), corrected, rate);
  unsigned k = in->numVariables;
  for (unsigned v = 0; v < k; ++v) {
    Value x = in->tensors[0][v], g = in->tensors[1][v];
    Value m = in->tensors[2][v], h = in->tensors[3][v];
    Value gReg = a.regularize(norm, x, g);
    Value mNew = a.add(a.scale(alpha, m), a.scale(1 - alpha, gReg));
    Value hNew = a.add(a.scale(beta, h), a.scale(1 - beta, a.mul(gReg, gReg)));
    Value hSqrt = a.add(a.sqrt(hNew), a.like(hNew, epsilon));
    Value xNew = a.sub(x, a.mul(a.expand(adjusted, x), a.div(mNew, hSqrt)));
    if (normPost != 0.0)
      xNew = a.scale(1 - normPost, xNew);
    n.setOutput(v, xNew);
    n.setOutput(k + v, mNew);
    n.setOutput(2 * k + v, hNew);
  }
  return success();
}

/// Adagrad: inputs R, T, X..., G..., H...; outputs X_new..., H_new....
LogicalResult importAdagrad(NodeContext &n) {
  FailureOr<OptimizerInputs> in = readOptimizerInputs(n, {"X", "G", "H"}, 2);
  if (failed(in))
    return failure();
  double decay = n.getFloat("decay_factor", 0.0);
  double epsilon = n.getFloat("epsilon", 1e-6f);
  double norm = n.getFloat("norm_coefficient", 0.0);
  Arithmetic a(n);
  // r = R / (1 + T * decay_factor).
  Value rate = in->rate;
  Value count = a.convert(
      in->count, cast<RankedTensorType>(rate.getType()).getElementType());
  Value decayed =
      a.div(rate, a.add(a.like(rate, 1), a.mul(count, a.like(rate, decay))));
  unsigned k = in->numVariables;
  for (unsigned v = 0; v < k; ++v) {
    Value x = in->tensors[0][v], g = in->tensors[1][v], h = in->tensors[2][v];
    Value gReg = a.regularize(norm, x, g);
    Value hNew = a.add(h, a.mul(gReg, gReg));
    Value hAdaptive = a.add(a.sqrt(hNew), a.like(hNew, epsilon));
    Value xNew = a.sub(x, a.div(a.mul(a.expand(decayed, x), gReg), hAdaptive));
    n.setOutput(v, xNew);
    n.setOutput(k + v, hNew);
  }
  return success();
}

/// Momentum ("standard" or "nesterov"): inputs R, T, X..., G..., V...;
/// outputs X_new..., V_new....
LogicalResult importMomentum(NodeContext &n) {
  if (failed(
          requireAttributes(n, {"alpha", "beta", "mode", "norm_coefficient"})))
    return failure();
  std::string mode = n.getString("mode", "");
  if (mode != "standard" && mode != "nesterov")
    return n.fail("mode '" + mode + "' is not 'standard' or 'nesterov'");
  FailureOr<OptimizerInputs> in = readOptimizerInputs(n, {"X", "G", "V"}, 2);
  if (failed(in))
    return failure();
  double alpha = n.getFloat("alpha", 0), beta = n.getFloat("beta", 0);
  double norm = n.getFloat("norm_coefficient", 0);
  Arithmetic a(n);
  // beta_adjusted = T > 0 ? beta : 1 (always 1 when beta is).
  Value rate = in->rate;
  Value betaAdjusted;
  if (beta != 1.0)
    betaAdjusted =
        a.select(a.positive(in->count), a.like(rate, beta), a.like(rate, 1));
  unsigned k = in->numVariables;
  for (unsigned v = 0; v < k; ++v) {
    Value x = in->tensors[0][v], g = in->tensors[1][v], m = in->tensors[2][v];
    Value gReg = a.regularize(norm, x, g);
    Value kept = a.scale(alpha, m);
    Value added = betaAdjusted ? a.mul(a.expand(betaAdjusted, x), gReg) : gReg;
    Value mNew = a.add(kept, added);
    Value direction =
        mode == "standard" ? mNew : a.add(gReg, a.scale(alpha, mNew));
    Value xNew = a.sub(x, a.mul(a.expand(rate, x), direction));
    n.setOutput(v, xNew);
    n.setOutput(k + v, mNew);
  }
  return success();
}

} // namespace

void kiln::onnx_import::registerTrainingOps(OpImporterTable &t) {
  t["Gradient"] = importGradient;
  t["Adam"] = importAdam;
  t["Adagrad"] = importAdagrad;
  t["Momentum"] = importMomentum;
}
