//===- Decompose.cpp - composite kiln ops into core kiln ops --------------===//

#include "kiln/KilnOps.h"
#include "kiln/Transforms/Attention.h"
#include "kiln/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace kiln {
#define GEN_PASS_DEF_KILNDECOMPOSE
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

/// Builds core kiln ops at one location.
struct Builder {
  PatternRewriter &r;
  Location loc;

  RankedTensorType typeOf(Value v) {
    return mlir::cast<RankedTensorType>(v.getType());
  }
  Value splat(RankedTensorType type, double value) {
    Type element = type.getElementType();
    if (auto f = dyn_cast<FloatType>(element)) {
      APFloat v(value);
      bool lost;
      v.convert(f.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
      return ConstantOp::create(r, loc, DenseElementsAttr::get(type, v));
    }
    if (element.isInteger(1))
      return ConstantOp::create(r, loc,
                                DenseElementsAttr::get(type, value != 0));
    return ConstantOp::create(
        r, loc,
        DenseElementsAttr::get(
            type, APInt(element.getIntOrFloatBitWidth(),
                        static_cast<uint64_t>(static_cast<int64_t>(value)),
                        /*isSigned=*/true, /*implicitTrunc=*/true)));
  }
  /// Broadcasts `v` (whose rank may be lower or which has size-1 dims) to
  /// `shape`.
  Value bcast(Value v, ArrayRef<int64_t> shape) {
    auto type = typeOf(v);
    if (type.getShape() == shape)
      return v;
    return BroadcastOp::create(r, loc, type.clone(shape), v);
  }
  Value reshape(Value v, ArrayRef<int64_t> shape) {
    auto type = typeOf(v);
    if (type.getShape() == shape)
      return v;
    return ReshapeOp::create(r, loc, type.clone(shape), v);
  }
  template <typename OpTy> Value binary(Value a, Value b) {
    return OpTy::create(r, loc, a, b);
  }
  template <typename OpTy> Value unary(Value a) {
    return OpTy::create(r, loc, a);
  }
  template <typename OpTy>
  Value reduce(Value x, ArrayRef<int64_t> dims, bool keepdims) {
    return OpTy::create(r, loc, x, r.getDenseI64ArrayAttr(dims),
                        keepdims ? r.getUnitAttr() : nullptr);
  }
  Value compare(ComparePredicate p, Value a, Value b) {
    return CompareOp::create(
        r, loc, ComparePredicateAttr::get(r.getContext(), p), a, b);
  }
  Value select(Value c, Value a, Value b) {
    return SelectOp::create(r, loc, a.getType(), c, a, b);
  }
  Value cast(Value v, Type element) {
    auto type = typeOf(v);
    if (type.getElementType() == element)
      return v;
    return CastOp::create(r, loc, type.clone(element), v);
  }
  int64_t count(Value x, ArrayRef<int64_t> dims) {
    int64_t n = 1;
    for (int64_t d : dims)
      n *= typeOf(x).getDimSize(d);
    return n;
  }
  /// x - max(x) along `dims`, the max kept as size-1 dimensions.
  Value shiftByMax(Value x, ArrayRef<int64_t> dims, Value *maxOut = nullptr) {
    Value max = reduce<ReduceMaxOp>(x, dims, true);
    if (maxOut)
      *maxOut = max;
    return binary<SubOp>(x, bcast(max, typeOf(x).getShape()));
  }
  Value mean(Value x, ArrayRef<int64_t> dims, bool keepdims) {
    Value sum = reduce<ReduceSumOp>(x, dims, keepdims);
    return binary<DivOp>(
        sum, splat(typeOf(sum), static_cast<double>(count(x, dims))));
  }
};

SmallVector<int64_t> range(int64_t begin, int64_t end) {
  SmallVector<int64_t> dims;
  for (int64_t d = begin; d < end; ++d)
    dims.push_back(d);
  return dims;
}

struct DecomposeSoftmax : OpRewritePattern<SoftmaxOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SoftmaxOp op,
                                PatternRewriter &r) const override {
    Builder b{r, op.getLoc()};
    SmallVector<int64_t> dims{static_cast<int64_t>(op.getAxis())};
    Value e = b.unary<ExpOp>(b.shiftByMax(op.getInput(), dims));
    Value sum = b.reduce<ReduceSumOp>(e, dims, true);
    r.replaceOp(op, b.binary<DivOp>(e, b.bcast(sum, b.typeOf(e).getShape())));
    return success();
  }
};

/// softmax(query keyᵀ scale + mask) along the last dimension: attention's
/// probabilities, as kiln.attention and kiln.attention_grad expand them.
Value attentionProbabilities(Builder &b, Value query, Value key, Value mask,
                             double scale) {
  Value scores = MatmulOp::create(b.r, b.loc, query, key,
                                  /*transpose_lhs=*/false,
                                  /*transpose_rhs=*/true);
  ArrayRef<int64_t> shape = b.typeOf(scores).getShape();
  if (scale != 1.0)
    scores = b.binary<MulOp>(scores, b.splat(b.typeOf(scores), scale));
  if (mask)
    scores = b.binary<AddOp>(scores, b.bcast(mask, shape));
  return SoftmaxOp::create(b.r, b.loc, scores,
                           b.r.getI64IntegerAttr(shape.size() - 1));
}

struct DecomposeAttention : OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &r) const override {
    Builder b{r, op.getLoc()};
    Value probs =
        attentionProbabilities(b, op.getQuery(), op.getKey(), op.getMask(),
                               op.getScale().convertToDouble());
    r.replaceOpWithNewOp<MatmulOp>(op, probs, op.getValue(), false, false);
    return success();
  }
};

/// kiln.attention_grad as products and a softmax recomputing the
/// probabilities: P = softmax(q kᵀ scale + mask), dv = Pᵀ dO, dP = dO vᵀ,
/// dS = P (dP - rowsum(dP P)) scale (0 where a masked_fill mask fills the
/// score, and with causal_fill after each query's position), dq = dS k,
/// dk = dSᵀ q.
struct DecomposeAttentionGrad : OpRewritePattern<AttentionGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionGradOp op,
                                PatternRewriter &r) const override {
    Builder b{r, op.getLoc()};
    Location loc = op.getLoc();
    Value q = op.getQuery(), key = op.getKey(), value = op.getValue(),
          g = op.getGrad();
    double scale = op.getScale().convertToDouble();
    Value p = attentionProbabilities(b, q, key, op.getMask(), scale);
    ArrayRef<int64_t> shape = b.typeOf(p).getShape();
    Value dv = MatmulOp::create(r, loc, p, g, true, false);
    Value dp = MatmulOp::create(r, loc, g, value, false, true);
    SmallVector<int64_t> dims{static_cast<int64_t>(shape.size()) - 1};
    Value rowSum = b.bcast(
        b.reduce<ReduceSumOp>(b.binary<MulOp>(dp, p), dims, true), shape);
    Value ds = b.binary<MulOp>(p, b.binary<SubOp>(dp, rowSum));
    if (op.getMaskedFill()) {
      // The scores the mask fills get no gradient.
      Value mask = b.bcast(op.getMask(), shape);
      Value filled = b.compare(ComparePredicate::le, mask,
                               b.splat(b.typeOf(mask), kMaskedFillAtMost));
      ds = b.select(filled, b.splat(b.typeOf(ds), 0.0), ds);
    }
    if (op.getCausalFill()) {
      // Nor do those after each query's position.
      int64_t queries = shape[shape.size() - 2], keys = shape.back();
      SmallVector<bool> after;
      for (int64_t index = 0; index < queries * keys; ++index)
        after.push_back(isAfterDiagonal(index, queries, keys));
      auto type = RankedTensorType::get({queries, keys}, r.getI1Type());
      Value filled = b.bcast(
          ConstantOp::create(r, loc, DenseElementsAttr::get(type, after)),
          shape);
      ds = b.select(filled, b.splat(b.typeOf(ds), 0.0), ds);
    }
    if (scale != 1.0)
      ds = b.binary<MulOp>(ds, b.splat(b.typeOf(ds), scale));
    Value dq = MatmulOp::create(r, loc, ds, key, false, false);
    Value dk = MatmulOp::create(r, loc, ds, q, true, false);
    r.replaceOp(op, {dq, dk, dv});
    return success();
  }
};

struct DecomposeLogSoftmax : OpRewritePattern<LogSoftmaxOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LogSoftmaxOp op,
                                PatternRewriter &r) const override {
    Builder b{r, op.getLoc()};
    SmallVector<int64_t> dims{static_cast<int64_t>(op.getAxis())};
    Value shifted = b.shiftByMax(op.getInput(), dims);
    Value sum = b.reduce<ReduceSumOp>(b.unary<ExpOp>(shifted), dims, true);
    Value logSum = b.unary<LogOp>(sum);
    r.replaceOp(op,
                b.binary<SubOp>(shifted,
                                b.bcast(logSum, b.typeOf(shifted).getShape())));
    return success();
  }
};

struct DecomposeReduceMean : OpRewritePattern<ReduceMeanOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReduceMeanOp op,
                                PatternRewriter &r) const override {
    Builder b{r, op.getLoc()};
    r.replaceOp(op,
                b.mean(op.getInput(), op.getDimensions(), op.getKeepdims()));
    return success();
  }
};

struct DecomposeReduceL2 : OpRewritePattern<ReduceL2Op> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReduceL2Op op,
                                PatternRewriter &r) const override {
    Builder b{r, op.getLoc()};
    Value squares = b.binary<MulOp>(op.getInput(), op.getInput());
    r.replaceOp(op, b.unary<SqrtOp>(b.reduce<ReduceSumOp>(
                        squares, op.getDimensions(), op.getKeepdims())));
    return success();
  }
};

struct DecomposeLogSumExp : OpRewritePattern<ReduceLogSumExpOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReduceLogSumExpOp op,
                                PatternRewriter &r) const override {
    Builder b{r, op.getLoc()};
    Value x = op.getInput();
    Value max = b.reduce<ReduceMaxOp>(x, op.getDimensions(), true);
    // Shift by the max only where it is finite: a slice that is all -inf (or
    // holds +inf) then gives log(0) = -inf (or log(inf) = inf), not NaN.
    auto maxType = b.typeOf(max);
    Value finite = b.compare(ComparePredicate::lt, b.unary<AbsOp>(max),
                             b.splat(maxType, INFINITY));
    Value safeMax = b.select(finite, max, b.splat(maxType, 0));
    Value shifted =
        b.binary<SubOp>(x, b.bcast(safeMax, b.typeOf(x).getShape()));
    Value sum = b.reduce<ReduceSumOp>(b.unary<ExpOp>(shifted),
                                      op.getDimensions(), true);
    Value result = b.binary<AddOp>(b.unary<LogOp>(sum), safeMax);
    r.replaceOp(op, b.reshape(result, op.getType().getShape()));
    return success();
  }
};

/// (x - mean) * rsqrt(var + eps), over `dims`.
Value normalize(Builder &b, Value x, ArrayRef<int64_t> dims, double epsilon,
                Value *meanOut = nullptr, Value *varOut = nullptr,
                Value *invStdOut = nullptr) {
  ArrayRef<int64_t> shape = b.typeOf(x).getShape();
  Value mean = b.mean(x, dims, true);
  Value centered = b.binary<SubOp>(x, b.bcast(mean, shape));
  Value var = b.mean(b.binary<MulOp>(centered, centered), dims, true);
  Value invStd =
      b.unary<RsqrtOp>(b.binary<AddOp>(var, b.splat(b.typeOf(var), epsilon)));
  if (meanOut)
    *meanOut = mean;
  if (varOut)
    *varOut = var;
  if (invStdOut)
    *invStdOut = invStd;
  return b.binary<MulOp>(centered, b.bcast(invStd, shape));
}

struct DecomposeLayerNorm : OpRewritePattern<LayerNormOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LayerNormOp op,
                                PatternRewriter &r) const override {
    Builder b{r, op.getLoc()};
    Value x = op.getInput();
    ArrayRef<int64_t> shape = b.typeOf(x).getShape();
    Value y = normalize(b, x, range(op.getAxis(), shape.size()),
                        op.getEpsilon().convertToDouble());
    y = b.binary<MulOp>(y, b.bcast(op.getScale(), shape));
    if (op.getBias())
      y = b.binary<AddOp>(y, b.bcast(op.getBias(), shape));
    r.replaceOp(op, y);
    return success();
  }
};

/// kiln.layer_norm_grad from the recomputed statistics: with x̂ the
/// normalized input, r its rsqrt(var + eps) and gs = g · scale, dx = r (gs -
/// mean(gs) - x̂ mean(gs x̂)); the scale's and the bias's gradients sum g x̂
/// and g over the leading dimensions.
struct DecomposeLayerNormGrad : OpRewritePattern<LayerNormGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LayerNormGradOp op,
                                PatternRewriter &r) const override {
    Builder b{r, op.getLoc()};
    Value x = op.getInput(), g = op.getGrad();
    ArrayRef<int64_t> shape = b.typeOf(x).getShape();
    SmallVector<int64_t> rows = range(op.getAxis(), shape.size());
    Value invStd;
    Value xhat = normalize(b, x, rows, op.getEpsilon().convertToDouble(),
                           nullptr, nullptr, &invStd);
    Value gs = b.binary<MulOp>(g, b.bcast(op.getScale(), shape));
    Value meanGs = b.bcast(b.mean(gs, rows, true), shape);
    Value meanGsXhat =
        b.bcast(b.mean(b.binary<MulOp>(gs, xhat), rows, true), shape);
    Value dx =
        b.binary<MulOp>(b.bcast(invStd, shape),
                        b.binary<SubOp>(b.binary<SubOp>(gs, meanGs),
                                        b.binary<MulOp>(xhat, meanGsXhat)));
    // Over the leading dimensions; none when every dimension is normalized.
    SmallVector<int64_t> leading = range(0, op.getAxis());
    auto sumLeading = [&](Value v) {
      return leading.empty() ? v : b.reduce<ReduceSumOp>(v, leading, false);
    };
    Value scaleGrad = sumLeading(b.binary<MulOp>(g, xhat));
    Value biasGrad = sumLeading(g);
    r.replaceOp(op, {dx, scaleGrad, biasGrad});
    return success();
  }
};

/// Reshapes a per-channel [C] tensor to [1, C, 1, ...] and broadcasts it.
Value perChannel(Builder &b, Value v, ArrayRef<int64_t> shape) {
  SmallVector<int64_t> channelShape(shape.size(), 1);
  channelShape[1] = shape[1];
  return b.bcast(b.reshape(v, channelShape), shape);
}

struct DecomposeBatchNorm : OpRewritePattern<BatchNormOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(BatchNormOp op,
                                PatternRewriter &r) const override {
    Builder b{r, op.getLoc()};
    ArrayRef<int64_t> shape = b.typeOf(op.getInput()).getShape();
    Value var = op.getVariance();
    Value invStd = b.unary<RsqrtOp>(b.binary<AddOp>(
        var, b.splat(b.typeOf(var), op.getEpsilon().convertToDouble())));
    Value scale = b.binary<MulOp>(invStd, op.getScale());
    Value centered =
        b.binary<SubOp>(op.getInput(), perChannel(b, op.getMean(), shape));
    Value y =
        b.binary<AddOp>(b.binary<MulOp>(centered, perChannel(b, scale, shape)),
                        perChannel(b, op.getBias(), shape));
    r.replaceOp(op, y);
    return success();
  }
};

struct DecomposeBatchNormTrain : OpRewritePattern<BatchNormTrainOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(BatchNormTrainOp op,
                                PatternRewriter &r) const override {
    Builder b{r, op.getLoc()};
    Value x = op.getInput();
    ArrayRef<int64_t> shape = b.typeOf(x).getShape();
    SmallVector<int64_t> dims{0};
    llvm::append_range(dims, range(2, shape.size()));
    Value mean, var;
    Value y =
        normalize(b, x, dims, op.getEpsilon().convertToDouble(), &mean, &var);
    y = b.binary<AddOp>(b.binary<MulOp>(y, perChannel(b, op.getScale(), shape)),
                        perChannel(b, op.getBias(), shape));
    int64_t channels = shape[1];
    r.replaceOp(op,
                {y, b.reshape(mean, {channels}), b.reshape(var, {channels})});
    return success();
  }
};

/// Which elements count and how much, shared by the losses and the
/// cross-entropy gradient.
struct LabelWeights {
  Value safeLabels; // [N, D...]: the labels, 0 where ignored
  Value weight;     // [N, D...]: weight[label] (or 1), 0 where ignored
  Value counted;    // [N, D...] i1: not ignored; null without ignore_index
};

LabelWeights weighLabels(Builder &b, Value labels, Value classWeight,
                         std::optional<int64_t> ignoreIndex, Type element) {
  auto labelType = b.typeOf(labels);
  LabelWeights w{labels, Value(), Value()};
  if (ignoreIndex) {
    Value ignore = b.splat(labelType, static_cast<double>(*ignoreIndex));
    w.counted = b.compare(ComparePredicate::ne, labels, ignore);
    w.safeLabels = b.select(w.counted, labels, b.splat(labelType, 0));
  }
  auto valueType = labelType.clone(element);
  if (classWeight) {
    w.weight = GatherOp::create(b.r, b.loc, classWeight, w.safeLabels,
                                b.r.getI64IntegerAttr(0));
  } else {
    w.weight = b.splat(valueType, 1);
  }
  if (w.counted)
    w.weight = b.select(w.counted, w.weight, b.splat(valueType, 0));
  return w;
}

/// `perElement` where the element counts, 0 where its label is ignored:
/// selected, not multiplied by a zero weight, so that neither the value nor
/// (through kiln.select's gradient) the gradient of an ignored element is
/// NaN when the mean divides by a total weight of 0 (a batch whose every
/// label is ignored, whose loss is NaN as in PyTorch).
Value keepCounted(Builder &b, const LabelWeights &w, Value perElement) {
  if (!w.counted)
    return perElement;
  return b.select(w.counted, perElement, b.splat(b.typeOf(perElement), 0));
}

/// scores[n, label, d...] ([N, D...]) with gather_elements on [N, 1, D...].
Value pickLabels(Builder &b, Value scores, Value safeLabels) {
  auto labelType = b.typeOf(safeLabels);
  SmallVector<int64_t> indexShape(labelType.getShape());
  indexShape.insert(indexShape.begin() + 1, 1);
  Value index = b.reshape(safeLabels, indexShape);
  Value picked = GatherElementsOp::create(b.r, b.loc, scores, index,
                                          b.r.getI64IntegerAttr(1));
  return b.reshape(picked, labelType.getShape());
}

Value reduceLoss(Builder &b, Value perElement, Value weight,
                 Reduction reduction) {
  auto type = b.typeOf(perElement);
  if (reduction == Reduction::none)
    return perElement;
  SmallVector<int64_t> all = range(0, type.getRank());
  Value sum = b.reduce<ReduceSumOp>(perElement, all, false);
  if (reduction == Reduction::sum)
    return sum;
  return b.binary<DivOp>(sum, b.reduce<ReduceSumOp>(weight, all, false));
}

/// max + log(sum(exp(x - max))) of the logits over the class dimension 1,
/// kept as a size-1 dimension. The cross-entropy and its gradient build it
/// with the same ops, so CSE computes it once for both.
Value logSumExp(Builder &b, Value logits) {
  SmallVector<int64_t> dims{1};
  Value max;
  Value shifted = b.shiftByMax(logits, dims, &max);
  Value sum = b.reduce<ReduceSumOp>(b.unary<ExpOp>(shifted), dims, true);
  return b.binary<AddOp>(max, b.unary<LogOp>(sum));
}

struct DecomposeNllLoss : OpRewritePattern<NllLossOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(NllLossOp op,
                                PatternRewriter &r) const override {
    Builder b{r, op.getLoc()};
    LabelWeights w =
        weighLabels(b, op.getLabels(), op.getWeight(), op.getIgnoreIndex(),
                    b.typeOf(op.getInput()).getElementType());
    Value picked = pickLabels(b, op.getInput(), w.safeLabels);
    Value loss = b.unary<NegOp>(b.binary<MulOp>(picked, w.weight));
    r.replaceOp(op, reduceLoss(b, keepCounted(b, w, loss), w.weight,
                               op.getReduction()));
    return success();
  }
};

/// Without keep, every kiln.cross_entropy; with it (kilnc before
/// kiln-autodiff, whose rule for the op reads no class weights that need a
/// gradient), only those whose class weights are not a constant.
struct DecomposeCrossEntropy : OpRewritePattern<CrossEntropyOp> {
  DecomposeCrossEntropy(MLIRContext *context, bool keep)
      : OpRewritePattern(context), keep(keep) {}
  LogicalResult matchAndRewrite(CrossEntropyOp op,
                                PatternRewriter &r) const override {
    Value classWeight = op.getWeight();
    if (keep && (!classWeight || classWeight.getDefiningOp<ConstantOp>()))
      return failure();
    Builder b{r, op.getLoc()};
    // -logp[label] = lse - logits[label]: the logits are read by the two
    // reductions of lse and at the labels, and no [N, C, D...]
    // log-probabilities are computed.
    Value logits = op.getLogits();
    auto scoreType = b.typeOf(logits);
    Type element = scoreType.getElementType();
    LabelWeights w = weighLabels(b, op.getLabels(), classWeight,
                                 op.getIgnoreIndex(), element);
    ArrayRef<int64_t> rows = b.typeOf(w.weight).getShape();
    Value lse = b.reshape(logSumExp(b, logits), rows);
    Value loss = b.binary<MulOp>(
        b.binary<SubOp>(lse, pickLabels(b, logits, w.safeLabels)), w.weight);
    double smoothing = op.getLabelSmoothing().convertToDouble();
    if (smoothing > 0) {
      // PyTorch: (1 - s) * nll + s * (-sum_c w_c logp_c) / C, where the
      // smoothing term is zero for ignored elements; -sum_c w_c logp_c =
      // lse * sum_c w_c - sum_c w_c logits_c.
      int64_t classes = scoreType.getDimSize(1);
      auto valueType = b.typeOf(loss);
      Value weighted = logits, totalWeight = b.splat(valueType, classes);
      if (classWeight) {
        weighted = b.binary<MulOp>(
            logits, perChannel(b, classWeight, scoreType.getShape()));
        totalWeight =
            b.bcast(b.reduce<ReduceSumOp>(classWeight, {0}, false), rows);
      }
      Value smooth =
          b.binary<SubOp>(b.binary<MulOp>(lse, totalWeight),
                          b.reduce<ReduceSumOp>(weighted, {1}, false));
      smooth = b.binary<DivOp>(smooth, b.splat(valueType, classes));
      if (w.counted)
        smooth = b.select(w.counted, smooth, b.splat(valueType, 0));
      loss = b.binary<AddOp>(
          b.binary<MulOp>(loss, b.splat(valueType, 1 - smoothing)),
          b.binary<MulOp>(smooth, b.splat(valueType, smoothing)));
    }
    r.replaceOp(op, reduceLoss(b, keepCounted(b, w, loss), w.weight,
                               op.getReduction()));
    return success();
  }
  bool keep;
};

/// KilnOps.td's formula: r ((1 - s) w_y (p - onehot(y)) + s / C (W p - w)),
/// with p = exp(logits - lse) from the same lse as the forward's expansion.
struct DecomposeCrossEntropyGrad : OpRewritePattern<CrossEntropyGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(CrossEntropyGradOp op,
                                PatternRewriter &r) const override {
    Builder b{r, op.getLoc()};
    Value logits = op.getLogits(), classWeight = op.getWeight();
    auto scoreType = b.typeOf(logits);
    ArrayRef<int64_t> shape = scoreType.getShape();
    Type element = scoreType.getElementType();
    LabelWeights w = weighLabels(b, op.getLabels(), classWeight,
                                 op.getIgnoreIndex(), element);
    auto rowType = b.typeOf(w.weight);
    ArrayRef<int64_t> rows = rowType.getShape();
    SmallVector<int64_t> kept(rows);
    kept.insert(kept.begin() + 1, 1);
    // r: the gradient of each element's loss.
    Value grad = op.getGrad();
    if (op.getReduction() == Reduction::mean)
      grad = b.binary<DivOp>(
          grad,
          b.reduce<ReduceSumOp>(w.weight, range(0, rowType.getRank()), false));
    grad = b.bcast(grad, rows);
    auto perRow = [&](Value v) { return b.bcast(b.reshape(v, kept), shape); };
    Value p = b.unary<ExpOp>(
        b.binary<SubOp>(logits, b.bcast(logSumExp(b, logits), shape)));
    Value classes = IotaOp::create(
        r, op.getLoc(),
        scoreType.clone(b.typeOf(op.getLabels()).getElementType()),
        r.getI64IntegerAttr(1), r.getF64FloatAttr(0), r.getF64FloatAttr(1));
    Value hit = b.compare(ComparePredicate::eq, classes, perRow(w.safeLabels));
    Value target = b.select(hit, b.splat(scoreType, 1), b.splat(scoreType, 0));
    double smoothing = op.getLabelSmoothing().convertToDouble();
    // A batch whose every label is ignored divides by a zero total weight:
    // as PyTorch, its ignored elements get no gradient (not 0 * inf).
    Value nll = keepCounted(b, w, b.binary<MulOp>(grad, w.weight));
    if (smoothing > 0)
      nll = b.binary<MulOp>(nll, b.splat(rowType, 1 - smoothing));
    Value dx = b.binary<MulOp>(perRow(nll), b.binary<SubOp>(p, target));
    if (smoothing > 0) {
      int64_t count = shape[1];
      Value counted = grad;
      if (w.counted)
        counted = b.select(w.counted, grad, b.splat(rowType, 0));
      // s / C (W p - w); without class weights W = C and w = 1.
      Value spread;
      if (classWeight) {
        Value total =
            b.bcast(b.reshape(b.reduce<ReduceSumOp>(classWeight, {0}, false),
                              SmallVector<int64_t>(shape.size(), 1)),
                    shape);
        spread =
            b.binary<MulOp>(b.binary<SubOp>(b.binary<MulOp>(total, p),
                                            perChannel(b, classWeight, shape)),
                            b.splat(scoreType, smoothing / count));
      } else {
        spread =
            b.binary<MulOp>(b.binary<SubOp>(p, b.splat(scoreType, 1.0 / count)),
                            b.splat(scoreType, smoothing));
      }
      dx = b.binary<AddOp>(dx, b.binary<MulOp>(perRow(counted), spread));
    }
    r.replaceOp(op, dx);
    return success();
  }
};

struct KilnDecomposePass : kiln::impl::KilnDecomposeBase<KilnDecomposePass> {
  using KilnDecomposeBase::KilnDecomposeBase;

  void runOnOperation() override {
    // nll_loss(log_softmax(x)) is kiln.cross_entropy first (its
    // canonicalization), before the log-softmax below could expand: the
    // loss then reads the logits at the labels, and with keep-cross-entropy
    // autodiff differentiates it by its own rule.
    RewritePatternSet folds(&getContext());
    NllLossOp::getCanonicalizationPatterns(folds, &getContext());
    GreedyRewriteConfig foldConfig;
    foldConfig.enableFolding(false);
    if (failed(applyPatternsGreedily(getOperation(), std::move(folds),
                                     foldConfig)))
      return signalPassFailure();

    RewritePatternSet patterns(&getContext());
    patterns.add<DecomposeSoftmax, DecomposeLogSoftmax, DecomposeReduceMean,
                 DecomposeReduceL2, DecomposeLogSumExp, DecomposeBatchNorm,
                 DecomposeBatchNormTrain, DecomposeNllLoss,
                 DecomposeCrossEntropyGrad>(&getContext());
    patterns.add<DecomposeCrossEntropy>(&getContext(), keepCrossEntropy);
    if (!keepAttention)
      patterns.add<DecomposeAttention, DecomposeAttentionGrad>(&getContext());
    if (!keepLayerNorm)
      patterns.add<DecomposeLayerNorm, DecomposeLayerNormGrad>(&getContext());
    GreedyRewriteConfig config;
    config.enableFolding(false);
    if (failed(
            applyPatternsGreedily(getOperation(), std::move(patterns), config)))
      signalPassFailure();
  }
};

} // namespace
