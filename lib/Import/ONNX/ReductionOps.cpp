//===- ReductionOps.cpp - importers of reductions, softmax, norms, losses -===//

#include "NodeContext.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::onnx_import;

namespace {

template <typename OpTy>
FailureOr<Value> reduce(NodeContext &n, Value x, ArrayRef<int64_t> dims,
                        bool keepdims) {
  SmallVector<NamedAttribute> attrs{n.array("dimensions", dims)};
  if (keepdims)
    attrs.push_back(n.unit("keepdims"));
  return n.create<OpTy>(x, attrs);
}

/// The sorted, normalized dimensions a Reduce* node reduces; nullopt means
/// "none" (noop_with_empty_axes).
FailureOr<std::optional<SmallVector<int64_t>>> reductionDims(NodeContext &n,
                                                             bool axesInput) {
  int64_t rank = n.inputType(0).getRank();
  SmallVector<int64_t> axes;
  if (axesInput) {
    // An attribute the op no longer has would be ignored: refuse it.
    if (n.attr("axes"))
      return n.fail("axes is an input at opset " + Twine(n.opset) +
                    ", not an attribute");
    if (n.hasInput(1)) {
      FailureOr<SmallVector<int64_t>> a = n.constInts(1, "axes");
      if (failed(a))
        return failure();
      axes = *a;
    }
  } else {
    axes = n.getInts("axes").value_or(SmallVector<int64_t>{});
  }
  if (axes.empty()) {
    if (n.getInt("noop_with_empty_axes", 0))
      return std::optional<SmallVector<int64_t>>();
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  }
  for (int64_t &axis : axes) {
    FailureOr<int64_t> a = n.normalizeAxis(axis, rank);
    if (failed(a))
      return failure();
    axis = *a;
  }
  llvm::sort(axes);
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  return std::optional<SmallVector<int64_t>>(axes);
}

enum class Prep { None, Abs, Square };
enum class Post { None, Log };

/// ReduceX ops; `prep`/`post` compose ReduceL1, ReduceSumSquare, ReduceLogSum.
template <typename OpTy, Prep prep = Prep::None, Post post = Post::None>
LogicalResult importReduce(NodeContext &n) {
  // ReduceSum takes axes as an input since opset 13, the others since 18.
  bool plainSum = std::is_same_v<OpTy, ReduceSumOp> && prep == Prep::None &&
                  post == Post::None;
  bool axesInput = n.opset >= 18 || (plainSum && n.opset >= 13);
  if (failed(n.expectInputs(1, axesInput ? 2 : 1)))
    return failure();
  FailureOr<std::optional<SmallVector<int64_t>>> dims =
      reductionDims(n, axesInput);
  if (failed(dims))
    return failure();
  Value x = n.input(0);
  if (prep == Prep::Abs) {
    FailureOr<Value> a = n.create<AbsOp>(x);
    if (failed(a))
      return failure();
    x = *a;
  } else if (prep == Prep::Square) {
    FailureOr<Value> s = n.create<MulOp>(ValueRange{x, x});
    if (failed(s))
      return failure();
    x = *s;
  }
  if (!*dims) {
    n.setOutput(0, x);
    return success();
  }
  FailureOr<Value> result = reduce<OpTy>(n, x, **dims, n.getInt("keepdims", 1));
  if (failed(result))
    return failure();
  if (post == Post::Log)
    result = n.create<LogOp>(*result);
  return n.setResult(result);
}

/// Softmax-like ops: before opset 13 the input is treated as a 2-D matrix
/// split at `axis` (default 1); since 13 the op works along one axis
/// (default -1).
template <typename Build>
LogicalResult importSoftmaxLike(NodeContext &n, Build build) {
  if (failed(n.expectInputs(1, 1)))
    return failure();
  auto type = n.inputType(0);
  int64_t rank = type.getRank();
  if (rank == 0)
    return n.fail("input must not be a scalar");
  if (n.opset >= 13) {
    FailureOr<int64_t> axis = n.normalizeAxis(n.getInt("axis", -1), rank);
    if (failed(axis))
      return failure();
    return n.setResult(build(n.input(0), *axis));
  }
  int64_t axis = n.getInt("axis", 1);
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis > rank)
    return n.fail("axis is out of range");
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= type.getDimSize(d);
  int64_t inner = outer == 0 ? 0 : type.getNumElements() / outer;
  FailureOr<Value> matrix = n.reshape(n.input(0), {outer, inner});
  if (failed(matrix))
    return failure();
  FailureOr<Value> result = build(*matrix, 1);
  if (failed(result))
    return failure();
  return n.setResult(n.reshape(*result, type.getShape()));
}

template <typename OpTy> LogicalResult importSoftmax(NodeContext &n) {
  return importSoftmaxLike(n, [&](Value x, int64_t axis) {
    return n.create<OpTy>(x, {n.i64("axis", axis)});
  });
}

/// x / ||x||_p along one axis, p 1 or 2.
LogicalResult importLpNormalization(NodeContext &n) {
  if (failed(n.expectInputs(1, 1)))
    return failure();
  Value x = n.input(0);
  RankedTensorType type = n.inputType(0);
  FailureOr<int64_t> axis =
      n.normalizeAxis(n.getInt("axis", -1), type.getRank());
  if (failed(axis))
    return failure();
  int64_t p = n.getInt("p", 2);
  if (p != 1 && p != 2)
    return n.fail("p must be 1 or 2, not " + std::to_string(p));
  if (!isa<FloatType>(type.getElementType()))
    return n.fail("expected a float input");
  FailureOr<Value> norm;
  if (p == 2) {
    norm = reduce<ReduceL2Op>(n, x, {*axis}, /*keepdims=*/true);
  } else {
    FailureOr<Value> magnitude = n.create<AbsOp>(x);
    if (failed(magnitude))
      return failure();
    norm = reduce<ReduceSumOp>(n, *magnitude, {*axis}, /*keepdims=*/true);
  }
  if (failed(norm))
    return failure();
  FailureOr<Value> spread = n.broadcastTo(*norm, type.getShape());
  if (failed(spread))
    return failure();
  FailureOr<Value> quotient = n.create<DivOp>(ValueRange{x, *spread});
  if (failed(quotient))
    return failure();
  // A zero norm gives 0, not 0 / 0 (the spec's reference).
  Value zero = n.splat(type, 0.0);
  FailureOr<Value> isZero = n.create<CompareOp>(
      ValueRange{*spread, zero},
      {n.named("predicate",
               ComparePredicateAttr::get(n.ctx, ComparePredicate::eq))});
  if (failed(isZero))
    return failure();
  return n.setResult(
      n.create<SelectOp>(ValueRange{*isZero, zero, *quotient}, {}, {type}));
}

LogicalResult importHardmax(NodeContext &n) {
  return importSoftmaxLike(n, [&](Value x, int64_t axis) -> FailureOr<Value> {
    auto type = cast<RankedTensorType>(x.getType());
    FailureOr<Value> index =
        n.create<ArgMaxOp>(x, {n.i64("axis", axis), n.unit("keepdims")});
    if (failed(index))
      return failure();
    auto i64Type = type.clone(n.b.getI64Type());
    FailureOr<Value> expanded = n.broadcastTo(*index, type.getShape());
    FailureOr<Value> counter =
        n.create<IotaOp>(ValueRange{}, {n.i64("dimension", axis)}, {i64Type});
    if (failed(expanded) || failed(counter))
      return failure();
    FailureOr<Value> hit = n.create<CompareOp>(
        ValueRange{*expanded, *counter},
        {n.named("predicate",
                 ComparePredicateAttr::get(n.ctx, ComparePredicate::eq))});
    if (failed(hit))
      return failure();
    return n.create<SelectOp>(
        ValueRange{*hit, n.splat(type, 1), n.splat(type, 0)}, {}, {type});
  });
}

/// Mean and biased variance over `dims`, kept as size-1 dimensions.
LogicalResult meanAndVariance(NodeContext &n, Value x, ArrayRef<int64_t> dims,
                              Value &mean, Value &variance) {
  auto type = cast<RankedTensorType>(x.getType());
  FailureOr<Value> m = reduce<ReduceMeanOp>(n, x, dims, true);
  if (failed(m))
    return failure();
  FailureOr<Value> mb = n.broadcastTo(*m, type.getShape());
  if (failed(mb))
    return failure();
  FailureOr<Value> centered = n.create<SubOp>(ValueRange{x, *mb});
  if (failed(centered))
    return failure();
  FailureOr<Value> squared = n.create<MulOp>(ValueRange{*centered, *centered});
  if (failed(squared))
    return failure();
  FailureOr<Value> v = reduce<ReduceMeanOp>(n, *squared, dims, true);
  if (failed(v))
    return failure();
  mean = *m;
  variance = *v;
  return success();
}

LogicalResult importLayerNormalization(NodeContext &n) {
  if (failed(n.expectInputs(2, 3)))
    return failure();
  auto type = n.inputType(0);
  FailureOr<int64_t> axis =
      n.normalizeAxis(n.getInt("axis", -1), type.getRank());
  if (failed(axis))
    return failure();
  double epsilon = n.getFloat("epsilon", 1e-5);
  ArrayRef<int64_t> normalized = type.getShape().drop_front(*axis);
  FailureOr<Value> scale = n.broadcastTo(n.input(1), normalized);
  if (failed(scale))
    return failure();
  SmallVector<Value> operands{n.input(0), *scale};
  if (n.hasInput(2)) {
    FailureOr<Value> bias = n.broadcastTo(n.input(2), normalized);
    if (failed(bias))
      return failure();
    operands.push_back(*bias);
  }
  FailureOr<Value> y = n.create<LayerNormOp>(
      operands, {n.i64("axis", *axis), n.f64("epsilon", epsilon)}, {type});
  if (failed(y))
    return failure();
  n.setOutput(0, *y);
  if (n.wantsOutput(1) || n.wantsOutput(2)) {
    SmallVector<int64_t> dims;
    for (int64_t d = *axis; d < type.getRank(); ++d)
      dims.push_back(d);
    Value mean, variance;
    if (failed(meanAndVariance(n, n.input(0), dims, mean, variance)))
      return failure();
    auto statType = cast<RankedTensorType>(variance.getType());
    FailureOr<Value> shifted =
        n.create<AddOp>(ValueRange{variance, n.splat(statType, epsilon)});
    if (failed(shifted))
      return failure();
    FailureOr<Value> invStd = n.create<RsqrtOp>(*shifted);
    if (failed(invStd))
      return failure();
    n.setOutput(1, mean);
    n.setOutput(2, *invStd);
  }
  return success();
}

LogicalResult importBatchNormalization(NodeContext &n) {
  if (failed(n.expectInputs(5, 5)))
    return failure();
  if (n.getInt("spatial", 1) == 0)
    return n.fail("non-spatial batch normalization is not supported");
  double epsilon = n.getFloat("epsilon", 1e-5);
  double momentum = n.getFloat("momentum", 0.9);
  bool training =
      n.opset >= 14
          ? n.getInt("training_mode", 0) != 0
          : n.wantsOutput(1) || (n.opset < 7 && n.getInt("is_test", 0) == 0);
  if (!training) {
    // PyTorch's dynamo exporter writes a training-mode batch norm
    // (aten._native_batch_norm_legit_functional; an eval-mode one is
    // _legit_no_training) as this inference form: noted for kilnc's
    // warning when it compiles for training.
    if (StringRef(n.node.name())
            .contains("_native_batch_norm_legit_functional"))
      n.noteOnModule("kiln.training_batch_norms_as_inference",
                     n.b.getStringAttr(n.node.name()));
    return n.setResult(n.create<BatchNormOp>(
        ValueRange{n.input(0), n.input(1), n.input(2), n.input(3), n.input(4)},
        {n.f64("epsilon", epsilon)}, {n.input(0).getType()}));
  }
  if (n.opset < 14)
    return n.fail("training-mode batch normalization needs opset 14 or newer");
  FailureOr<Operation *> op = n.createOp<BatchNormTrainOp>(
      ValueRange{n.input(0), n.input(1), n.input(2)},
      {n.f64("epsilon", epsilon)});
  if (failed(op))
    return failure();
  n.setOutput(0, (*op)->getResult(0));
  // running = running * momentum + batch * (1 - momentum)
  for (unsigned i = 1; i <= 2; ++i) {
    Value running = n.input(2 + i), batch = (*op)->getResult(i);
    auto type = cast<RankedTensorType>(batch.getType());
    FailureOr<Value> kept =
        n.create<MulOp>(ValueRange{running, n.splat(type, momentum)});
    FailureOr<Value> fresh =
        n.create<MulOp>(ValueRange{batch, n.splat(type, 1 - momentum)});
    if (failed(kept) || failed(fresh))
      return failure();
    FailureOr<Value> updated = n.create<AddOp>(ValueRange{*kept, *fresh});
    if (failed(updated))
      return failure();
    n.setOutput(i, *updated);
  }
  return success();
}

/// (x - mean) / sqrt(variance + epsilon) over `dims` (biased variance), as
/// InstanceNormalization and GroupNormalization normalize.
FailureOr<Value> standardize(NodeContext &n, Value x, ArrayRef<int64_t> dims,
                             double epsilon) {
  auto type = cast<RankedTensorType>(x.getType());
  Value mean, variance;
  if (failed(meanAndVariance(n, x, dims, mean, variance)))
    return failure();
  auto statType = cast<RankedTensorType>(variance.getType());
  FailureOr<Value> shifted =
      n.create<AddOp>(ValueRange{variance, n.splat(statType, epsilon)});
  if (failed(shifted))
    return failure();
  FailureOr<Value> invStd = n.create<RsqrtOp>(*shifted);
  FailureOr<Value> meanB = n.broadcastTo(mean, type.getShape());
  if (failed(invStd) || failed(meanB))
    return failure();
  FailureOr<Value> invStdB = n.broadcastTo(*invStd, type.getShape());
  if (failed(invStdB))
    return failure();
  FailureOr<Value> centered = n.create<SubOp>(ValueRange{x, *meanB});
  if (failed(centered))
    return failure();
  return n.create<MulOp>(ValueRange{*centered, *invStdB});
}

LogicalResult importInstanceNormalization(NodeContext &n) {
  if (failed(n.expectInputs(3, 3)))
    return failure();
  auto type = n.inputType(0);
  if (type.getRank() < 3)
    return n.fail("input needs rank 3 or more");
  SmallVector<int64_t> dims;
  for (int64_t d = 2; d < type.getRank(); ++d)
    dims.push_back(d);
  FailureOr<Value> normalized =
      standardize(n, n.input(0), dims, n.getFloat("epsilon", 1e-5));
  if (failed(normalized))
    return failure();
  SmallVector<int64_t> channelShape(type.getRank(), 1);
  channelShape[1] = type.getDimSize(1);
  auto perChannel = [&](Value v) -> FailureOr<Value> {
    FailureOr<Value> r = n.reshape(v, channelShape);
    if (failed(r))
      return failure();
    return n.broadcastTo(*r, type.getShape());
  };
  FailureOr<Value> scale = perChannel(n.input(1));
  FailureOr<Value> bias = perChannel(n.input(2));
  if (failed(scale) || failed(bias))
    return failure();
  FailureOr<Value> scaled = n.create<MulOp>(ValueRange{*normalized, *scale});
  if (failed(scaled))
    return failure();
  return n.setResult(n.create<AddOp>(ValueRange{*scaled, *bias}));
}

/// The type stage one of RMSNormalization and GroupNormalization computes
/// in: f32 for 16-bit inputs with stash_type 1 (the default), else the
/// input's.
FailureOr<Type> stashType(NodeContext &n, Type element) {
  int64_t stash = n.getInt("stash_type", 1);
  if (stash == 1)
    return isa<Float16Type, BFloat16Type>(element) ? n.b.getF32Type() : element;
  if (stash == 11)
    return element;
  return n.fail("stash_type " + Twine(stash) + " is not supported yet");
}

/// RMSNormalization (opset 23): x / sqrt(mean(x^2) + epsilon) * scale over
/// the dimensions from `axis`, written as PyTorch's RMSNorm writes it out
/// (the reciprocal square root times x), so that it is the same chain of
/// ops a model that spells RMSNorm out gets.
LogicalResult importRMSNormalization(NodeContext &n) {
  if (n.opset < 23)
    return n.fail("RMSNormalization is an operator of opset 23 and later");
  if (failed(n.expectInputs(2, 2)))
    return failure();
  auto type = n.inputType(0);
  FailureOr<int64_t> axis =
      n.normalizeAxis(n.getInt("axis", -1), type.getRank());
  FailureOr<Type> stash = stashType(n, type.getElementType());
  if (failed(axis) || failed(stash))
    return failure();
  FailureOr<Value> x = n.cast(n.input(0), *stash);
  if (failed(x))
    return failure();
  SmallVector<int64_t> dims;
  for (int64_t d = *axis; d < type.getRank(); ++d)
    dims.push_back(d);
  FailureOr<Value> squares = n.create<MulOp>(ValueRange{*x, *x});
  if (failed(squares))
    return failure();
  FailureOr<Value> meanSquare = reduce<ReduceMeanOp>(n, *squares, dims, true);
  if (failed(meanSquare))
    return failure();
  auto statType = cast<RankedTensorType>(meanSquare->getType());
  FailureOr<Value> shifted = n.create<AddOp>(
      ValueRange{*meanSquare, n.splat(statType, n.getFloat("epsilon", 1e-5))});
  if (failed(shifted))
    return failure();
  FailureOr<Value> inverse = n.create<RsqrtOp>(*shifted);
  if (failed(inverse))
    return failure();
  FailureOr<Value> inverseB = n.broadcastTo(*inverse, type.getShape());
  if (failed(inverseB))
    return failure();
  FailureOr<Value> normalized = n.create<MulOp>(ValueRange{*x, *inverseB});
  if (failed(normalized))
    return failure();
  normalized = n.cast(*normalized, type.getElementType());
  if (failed(normalized))
    return failure();
  FailureOr<Value> scale = n.broadcastTo(n.input(1), type.getShape());
  if (failed(scale))
    return failure();
  return n.setResult(n.create<MulOp>(ValueRange{*normalized, *scale}));
}

/// GroupNormalization (opsets 18 and 21): each group of channels
/// ([N, G, C/G * spatial]) normalized as InstanceNormalization normalizes
/// a channel, then the per-channel scale and bias. At opset 18 scale and bias
/// hold one value a group, since 21 one a channel.
LogicalResult importGroupNormalization(NodeContext &n) {
  if (n.opset < 18)
    return n.fail("GroupNormalization is an operator of opset 18 and later");
  if (failed(n.expectInputs(3, 3)))
    return failure();
  auto type = n.inputType(0);
  if (type.getRank() < 2)
    return n.fail("input needs rank 2 or more");
  int64_t groups = n.getInt("num_groups", 0);
  int64_t N = type.getDimSize(0), C = type.getDimSize(1);
  if (groups < 1 || C % groups != 0)
    return n.fail("num_groups " + Twine(groups) + " does not divide the " +
                  Twine(C) + " channels");
  FailureOr<Type> stash = n.opset >= 21
                              ? stashType(n, type.getElementType())
                              : FailureOr<Type>(type.getElementType());
  if (failed(stash))
    return failure();
  int64_t perGroup = type.getNumElements() / std::max<int64_t>(N * groups, 1);
  FailureOr<Value> x = n.cast(n.input(0), *stash);
  if (failed(x))
    return failure();
  FailureOr<Value> rows = n.reshape(*x, {N, groups, perGroup});
  if (failed(rows))
    return failure();
  FailureOr<Value> normalized =
      standardize(n, *rows, {2}, n.getFloat("epsilon", 1e-5));
  if (failed(normalized))
    return failure();
  normalized = n.reshape(*normalized, type.getShape());
  if (failed(normalized))
    return failure();
  normalized = n.cast(*normalized, type.getElementType());
  if (failed(normalized))
    return failure();
  SmallVector<int64_t> channelShape(type.getRank(), 1);
  channelShape[1] = C;
  int64_t expected = n.opset >= 21 ? C : groups;
  auto perChannel = [&](unsigned input) -> FailureOr<Value> {
    Value v = n.input(input);
    auto vType = n.inputType(input);
    if (vType.getRank() != 1 || vType.getDimSize(0) != expected)
      return n.fail(Twine(input == 1 ? "scale" : "bias") + " must have " +
                    Twine(expected) +
                    (n.opset >= 21 ? " values (one a channel)"
                                   : " values (one a group)"));
    if (n.opset < 21) {
      FailureOr<Value> column = n.reshape(v, {groups, 1});
      if (failed(column))
        return failure();
      FailureOr<Value> spread = n.broadcastTo(*column, {groups, C / groups});
      if (failed(spread))
        return failure();
      v = *spread;
    }
    FailureOr<Value> shaped = n.reshape(v, channelShape);
    if (failed(shaped))
      return failure();
    return n.broadcastTo(*shaped, type.getShape());
  };
  FailureOr<Value> scale = perChannel(1);
  if (failed(scale))
    return failure();
  FailureOr<Value> bias = perChannel(2);
  if (failed(bias))
    return failure();
  FailureOr<Value> scaled = n.create<MulOp>(ValueRange{*normalized, *scale});
  if (failed(scaled))
    return failure();
  return n.setResult(n.create<AddOp>(ValueRange{*scaled, *bias}));
}

FailureOr<Reduction> lossReduction(NodeContext &n) {
  std::string reduction = n.getString("reduction", "mean");
  if (reduction == "mean")
    return Reduction::mean;
  if (reduction == "sum")
    return Reduction::sum;
  if (reduction == "none")
    return Reduction::none;
  return n.fail("reduction '" + reduction + "' is not supported");
}

template <typename OpTy> LogicalResult importLoss(NodeContext &n) {
  if (failed(n.expectInputs(2, 3)))
    return failure();
  FailureOr<Reduction> reduction = lossReduction(n);
  if (failed(reduction))
    return failure();
  SmallVector<NamedAttribute> attrs{
      n.named("reduction", ReductionAttr::get(n.ctx, *reduction))};
  if (auto ignore = n.getOptionalInt("ignore_index"))
    attrs.push_back(n.i64("ignore_index", *ignore));
  SmallVector<Value> operands{n.input(0), n.input(1)};
  if (n.hasInput(2))
    operands.push_back(n.input(2));
  FailureOr<Value> loss = n.create<OpTy>(operands, attrs);
  if (failed(loss))
    return failure();
  n.setOutput(0, *loss);
  if constexpr (std::is_same_v<OpTy, CrossEntropyOp>) {
    if (n.wantsOutput(1)) {
      FailureOr<Value> logProb =
          n.create<LogSoftmaxOp>(n.input(0), {n.i64("axis", 1)});
      if (failed(logProb))
        return failure();
      n.setOutput(1, *logProb);
    }
  }
  return success();
}

} // namespace

void kiln::onnx_import::registerReductionOps(OpImporterTable &t) {
  t["ReduceSum"] = importReduce<ReduceSumOp>;
  t["ReduceMean"] = importReduce<ReduceMeanOp>;
  t["ReduceMax"] = importReduce<ReduceMaxOp>;
  t["ReduceMin"] = importReduce<ReduceMinOp>;
  t["ReduceProd"] = importReduce<ReduceProdOp>;
  t["ReduceL2"] = importReduce<ReduceL2Op>;
  t["ReduceLogSumExp"] = importReduce<ReduceLogSumExpOp>;
  t["ReduceL1"] = importReduce<ReduceSumOp, Prep::Abs>;
  t["ReduceSumSquare"] = importReduce<ReduceSumOp, Prep::Square>;
  t["ReduceLogSum"] = importReduce<ReduceSumOp, Prep::None, Post::Log>;
  t["Softmax"] = importSoftmax<SoftmaxOp>;
  t["LogSoftmax"] = importSoftmax<LogSoftmaxOp>;
  t["Hardmax"] = importHardmax;
  t["LpNormalization"] = importLpNormalization;
  t["LayerNormalization"] = importLayerNormalization;
  t["BatchNormalization"] = importBatchNormalization;
  t["InstanceNormalization"] = importInstanceNormalization;
  t["RMSNormalization"] = importRMSNormalization;
  t["GroupNormalization"] = importGroupNormalization;
  t["SoftmaxCrossEntropyLoss"] = importLoss<CrossEntropyOp>;
  t["NegativeLogLikelihoodLoss"] = importLoss<NllLossOp>;
}
