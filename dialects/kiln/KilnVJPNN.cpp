//===- KilnVJPNN.cpp - vector-Jacobian products of neural network ops -----===//
//
// Rules for kiln.conv, kiln.conv_transpose, kiln.max_pool, kiln.avg_pool,
// kiln.cumsum, kiln.attention, kiln.layer_norm and kiln.cross_entropy, built
// from kiln ops: a convolution's gradients are a transposed convolution and a
// convolution with the batch and channel roles swapped; a pool's gradient
// goes back through the windows it read; attention recomputes its
// probabilities from the query and key; layer norms and cross-entropy have
// gradient ops of their own.
//
//===----------------------------------------------------------------------===//

#include "KilnVJPRules.h"

#include <limits>

using namespace mlir;
using namespace kiln;
using namespace kiln::vjp;

namespace {

SmallVector<int64_t> spatialShape(Value v) {
  return SmallVector<int64_t>(RuleBuilder::typeOf(v).getShape().drop_front(2));
}

/// The permutation that swaps dimensions 0 and 1 of a rank-`rank` tensor.
SmallVector<int64_t> swapFirstTwo(int64_t rank) {
  SmallVector<int64_t> perm{1, 0};
  for (int64_t d = 2; d < rank; ++d)
    perm.push_back(d);
  return perm;
}

/// [N, G * P, S...] as [P, G * N, S...]: the channels of group g become the
/// batch, and the batch becomes group g's channels.
Value swapBatchAndGroupChannels(RuleBuilder &k, Value v, int64_t groups) {
  auto type = RuleBuilder::typeOf(v);
  int64_t rank = type.getRank();
  if (groups == 1)
    return k.transpose(v, swapFirstTwo(rank));
  int64_t n = type.getDimSize(0), perGroup = type.getDimSize(1) / groups;
  SmallVector<int64_t> grouped{n, groups, perGroup};
  llvm::append_range(grouped, type.getShape().drop_front(2));
  SmallVector<int64_t> perm{2, 1, 0};
  for (int64_t d = 3; d < rank + 1; ++d)
    perm.push_back(d);
  Value moved = k.transpose(k.reshape(v, grouped), perm);
  SmallVector<int64_t> result{perGroup, groups * n};
  llvm::append_range(result, type.getShape().drop_front(2));
  return k.reshape(moved, result);
}

/// [N, G * P, S...] as [G * P, N, S...].
Value channelsFirst(RuleBuilder &k, Value v) {
  return k.transpose(v, swapFirstTwo(RuleBuilder::typeOf(v).getRank()));
}

/// The gradient of `filterType` in y = conv(x, filter): for filter element
/// [g * Fg + f, c, k] the sum over n and o of
/// x_padded[n, g * Cg + c, o * stride + k * dilation] * gy[n, g * Fg + f, o].
/// That is a convolution too: with the batch as the channels and the output
/// gradient as the filter, strides and dilations trade places.
Value filterGradient(RuleBuilder &k, Value x, Value gy,
                     RankedTensorType filterType, ArrayRef<int64_t> strides,
                     ArrayRef<int64_t> padding, ArrayRef<int64_t> dilations,
                     int64_t groups) {
  Value input = swapBatchAndGroupChannels(k, x, groups); // [Cg, G * N, I...]
  Value filter = channelsFirst(k, gy);                   // [F, N, O...]
  Value grad = ConvOp::create(
      k.b, k.loc, input, filter, k.b.getDenseI64ArrayAttr(dilations),
      k.b.getDenseI64ArrayAttr(padding), k.b.getDenseI64ArrayAttr(strides),
      k.b.getI64IntegerAttr(groups));
  // [Cg, F, K'...]: K' exceeds K where the last window left input unread.
  auto type = RuleBuilder::typeOf(grad);
  SmallVector<int64_t> start(type.getRank(), 0), limit(type.getShape()),
      step(type.getRank(), 1);
  for (int64_t d = 2; d < type.getRank(); ++d)
    limit[d] = filterType.getDimSize(d);
  return k.transpose(k.slice(grad, start, limit, step),
                     swapFirstTwo(type.getRank()));
}

/// The attribute-free form of the window parameters of a conv or pool.
struct Window {
  SmallVector<int64_t> kernel, strides, padding, dilations;
  int64_t spatial() const { return kernel.size(); }
  int64_t span(int64_t i) const { return (kernel[i] - 1) * dilations[i] + 1; }
};

/// conv_transpose(g, filter) with the window's strides, dilations and begin
/// padding, its end padding and output padding chosen so that the result has
/// the spatial shape `outSpatial`.
Value transposedConv(RuleBuilder &k, Value g, Value filter, const Window &w,
                     ArrayRef<int64_t> outSpatial, int64_t groups) {
  SmallVector<int64_t> spatialIn = spatialShape(g);
  int64_t spatial = w.spatial();
  SmallVector<int64_t> padding(w.padding.begin(), w.padding.begin() + spatial);
  SmallVector<int64_t> outputPadding;
  for (int64_t i = 0; i < spatial; ++i) {
    // stride * (in - 1) + output_padding + span - begin - end = out.
    int64_t excess = w.strides[i] * (spatialIn[i] - 1) + w.span(i) -
                     w.padding[i] - outSpatial[i];
    padding.push_back(std::max<int64_t>(excess, 0));
    outputPadding.push_back(std::max<int64_t>(-excess, 0));
  }
  return ConvTransposeOp::create(
      k.b, k.loc, g, filter, k.b.getDenseI64ArrayAttr(w.strides),
      k.b.getDenseI64ArrayAttr(padding), k.b.getDenseI64ArrayAttr(w.dilations),
      k.b.getDenseI64ArrayAttr(outputPadding), k.b.getI64IntegerAttr(groups));
}

} // namespace

namespace kiln::vjp {

template <>
LogicalResult rule(ConvOp op, RuleBuilder &k, ArrayRef<Value> grads,
                   SmallVectorImpl<Value> &out) {
  Value g = grads[0];
  auto filterType = RuleBuilder::typeOf(op.getFilter());
  Window w{SmallVector<int64_t>(filterType.getShape().drop_front(2)),
           SmallVector<int64_t>(op.getStrides()),
           SmallVector<int64_t>(op.getPadding()),
           SmallVector<int64_t>(op.getDilations())};
  // The input's gradient: the filter's transpose applied to g, which is
  // what conv_transpose computes with the conv's own filter.
  out.push_back(transposedConv(k, g, op.getFilter(), w,
                               spatialShape(op.getInput()), op.getGroups()));
  out.push_back(filterGradient(k, op.getInput(), g, filterType, w.strides,
                               w.padding, w.dilations, op.getGroups()));
  return success();
}

template <>
LogicalResult rule(ConvTransposeOp op, RuleBuilder &k, ArrayRef<Value> grads,
                   SmallVectorImpl<Value> &out) {
  // y = conv_transpose(x, w) is the input gradient of z -> conv(z, w), so
  // x's gradient is conv(gy, w), and w's is the filter gradient of that conv
  // with gy as its input and x as its output gradient.
  Value g = grads[0], x = op.getInput();
  auto inType = RuleBuilder::typeOf(x);
  Value dx = ConvOp::create(k.b, k.loc, g, op.getFilter(), op.getStridesAttr(),
                            op.getPaddingAttr(), op.getDilationsAttr(),
                            op.getGroupsAttr());
  // With output_padding of a stride or more, the conv sees more windows.
  auto dxType = RuleBuilder::typeOf(dx);
  SmallVector<int64_t> start(inType.getRank(), 0), step(inType.getRank(), 1);
  SmallVector<int64_t> limit(dxType.getShape());
  for (int64_t d = 2; d < inType.getRank(); ++d)
    limit[d] = inType.getDimSize(d);
  out.push_back(k.slice(dx, start, limit, step));
  out.push_back(filterGradient(k, g, x, RuleBuilder::typeOf(op.getFilter()),
                               op.getStrides(), op.getPadding(),
                               op.getDilations(), op.getGroups()));
  return success();
}

/// The padding a pool reads: its begin padding, and at the end at least
/// enough for the last window (ceil mode may run past the end padding).
static void poolPadding(const Window &w, ArrayRef<int64_t> in,
                        ArrayRef<int64_t> outSpatial,
                        SmallVectorImpl<int64_t> &low,
                        SmallVectorImpl<int64_t> &high) {
  int64_t spatial = w.spatial();
  low.assign({0, 0});
  high.assign({0, 0});
  for (int64_t i = 0; i < spatial; ++i) {
    int64_t needed = (outSpatial[i] - 1) * w.strides[i] + w.span(i) -
                     in[i + 2] - w.padding[i];
    low.push_back(w.padding[i]);
    high.push_back(std::max(needed, w.padding[i + spatial]));
  }
}

template <>
LogicalResult rule(MaxPoolOp op, RuleBuilder &k, ArrayRef<Value> grads,
                   SmallVectorImpl<Value> &out) {
  // Each output's gradient goes to the first element of its window (in
  // row-major window order) equal to the maximum, as in PyTorch. The windows
  // are read as strided slices of the padded input, one per window offset;
  // the padding is NaN, which equals nothing, so it never takes a gradient.
  Value g = grads[0], x = op.getInput(), y = op.getResult();
  auto inType = RuleBuilder::typeOf(x);
  SmallVector<int64_t> outSpatial = spatialShape(y);
  int64_t spatial = outSpatial.size();
  Window w{SmallVector<int64_t>(op.getKernel()),
           SmallVector<int64_t>(op.getStrides()),
           SmallVector<int64_t>(op.getPadding()),
           SmallVector<int64_t>(spatial, 1)};
  if (auto dilations = op.getDilations())
    w.dilations.assign(dilations->begin(), dilations->end());
  SmallVector<int64_t> low, high;
  poolPadding(w, inType.getShape(), outSpatial, low, high);
  Value padded = k.pad(x, low, high, std::numeric_limits<double>::quiet_NaN());
  ArrayRef<int64_t> paddedShape = RuleBuilder::typeOf(padded).getShape();

  SmallVector<int64_t> stride{1, 1};
  llvm::append_range(stride, w.strides);
  Value zero = k.like(g, 0), taken, total;
  SmallVector<int64_t> offset(spatial, 0);
  int64_t windows = 1;
  for (int64_t size : w.kernel)
    windows *= size;
  for (int64_t index = 0; index < windows; ++index) {
    // offset: the index-th window position, the last dimension fastest.
    for (int64_t i = spatial - 1, rest = index; i >= 0; --i) {
      offset[i] = rest % w.kernel[i];
      rest /= w.kernel[i];
    }
    SmallVector<int64_t> start{0, 0}, limit(paddedShape.take_front(2));
    for (int64_t i = 0; i < spatial; ++i) {
      start.push_back(offset[i] * w.dilations[i]);
      limit.push_back(start.back() + (outSpatial[i] - 1) * w.strides[i] + 1);
    }
    Value hit =
        k.cmp(ComparePredicate::eq, k.slice(padded, start, limit, stride), y);
    Value first = hit;
    if (taken) {
      first = AndOp::create(k.b, k.loc, hit, NotOp::create(k.b, k.loc, taken));
      if (index + 1 < windows)
        taken = OrOp::create(k.b, k.loc, taken, hit);
    } else {
      taken = hit;
    }
    Value part =
        k.unslice(k.select(first, g, zero), paddedShape, start, stride);
    total = total ? k.add(total, part) : part;
  }
  SmallVector<int64_t> start(low), limit(inType.getShape()),
      unit(inType.getRank(), 1);
  for (int64_t d = 2; d < inType.getRank(); ++d)
    limit[d] += low[d];
  out.push_back(k.slice(total, start, limit, unit));
  return success();
}

template <>
LogicalResult rule(AvgPoolOp op, RuleBuilder &k, ArrayRef<Value> grads,
                   SmallVectorImpl<Value> &out) {
  // The pool is a depthwise convolution with a filter of ones followed by a
  // division by each window's count, so the gradient divides by the count
  // and applies the transposed convolution.
  Value g = grads[0], x = op.getInput();
  auto inType = RuleBuilder::typeOf(x);
  auto outType = RuleBuilder::typeOf(g);
  SmallVector<int64_t> in = spatialShape(x);
  Window w{SmallVector<int64_t>(op.getKernel()),
           SmallVector<int64_t>(op.getStrides()),
           SmallVector<int64_t>(op.getPadding()), op.getDilationsOrOnes()};
  Value divisor = ConstantOp::create(k.b, k.loc, op.getDivisors());
  Value scaled = k.div(g, k.broadcast(divisor, outType.getShape()));
  int64_t channels = inType.getDimSize(1);
  SmallVector<int64_t> filterShape{channels, 1};
  llvm::append_range(filterShape, w.kernel);
  Value ones = k.splat(outType.clone(filterShape), 1.0);
  out.push_back(transposedConv(k, scaled, ones, w, in, channels));
  return success();
}

template <>
LogicalResult rule(CumsumOp op, RuleBuilder &k, ArrayRef<Value> grads,
                   SmallVectorImpl<Value> &out) {
  // Each input element feeds the outputs after it (or before it, reversed):
  // its gradient is the cumulative sum of g the other way round.
  out.push_back(CumsumOp::create(
      k.b, k.loc, grads[0].getType(), grads[0], op.getAxisAttr(),
      op.getExclusiveAttr(), op.getReverse() ? nullptr : k.b.getUnitAttr()));
  return success();
}

template <>
LogicalResult rule(AttentionOp op, RuleBuilder &k, ArrayRef<Value> grads,
                   SmallVectorImpl<Value> &out) {
  // The query, key and value gradients are one kiln.attention_grad, which a
  // target may compute without storing the probabilities (its semantics and
  // kiln-decompose's expansion are in KilnOps.td). The forward keeps q, k, v
  // and its result.
  Value g = grads[0], q = op.getQuery(), key = op.getKey(),
        value = op.getValue(), mask = op.getMask();
  auto grad = AttentionGradOp::create(
      k.b, k.loc, q, key, value, op.getResult(), g, mask, op.getScaleAttr(),
      op.getMaskedFillAttr(), op.getCausalFillAttr());
  out.append({grad.getQueryGrad(), grad.getKeyGrad(), grad.getValueGrad()});
  if (!mask)
    return success();
  // A mask that needs a gradient (a learned bias) gets dS summed over its
  // broadcast dimensions, with S = q kᵀ scale + mask, P = softmax(S),
  // dP = dO vᵀ and dS = P (dP - rowsum(dP P)); unused otherwise. With
  // masked_fill too: a filled score is the mask's value itself.
  double scale = op.getScale().convertToDouble();
  Value scores = k.matmul(q, key, false, true);
  ArrayRef<int64_t> shape = RuleBuilder::typeOf(scores).getShape();
  int64_t last = shape.size() - 1;
  if (scale != 1.0)
    scores = k.mul(scores, k.like(scores, scale));
  scores = k.add(scores, k.broadcast(mask, shape));
  Value p = SoftmaxOp::create(k.b, k.loc, scores, k.b.getI64IntegerAttr(last));
  Value dp = k.matmul(g, value, false, true);
  Value rowSum = k.broadcast(k.sum(k.mul(dp, p), {last}, true), shape);
  Value ds = k.mul(p, k.sub(dp, rowSum));
  out.push_back(k.unbroadcast(ds, RuleBuilder::typeOf(mask).getShape()));
  return success();
}

template <>
LogicalResult rule(LayerNormOp op, RuleBuilder &k, ArrayRef<Value> grads,
                   SmallVectorImpl<Value> &out) {
  // One kiln.layer_norm_grad, which recomputes the statistics from the
  // input (its semantics and kiln-decompose's expansion are in KilnOps.td):
  // the forward keeps only its input.
  auto grad =
      LayerNormGradOp::create(k.b, k.loc, op.getInput(), op.getScale(),
                              grads[0], op.getAxisAttr(), op.getEpsilonAttr());
  out.append({grad.getInputGrad(), grad.getScaleGrad()});
  if (op.getBias())
    out.push_back(grad.getBiasGrad());
  return success();
}

template <>
LogicalResult rule(CrossEntropyOp op, RuleBuilder &k, ArrayRef<Value> grads,
                   SmallVectorImpl<Value> &out) {
  // One kiln.cross_entropy_grad (its semantics and expansion are in
  // KilnOps.td): the softmax minus the smoothed one-hot target, read from
  // the logits, instead of the log-softmax's expansion differentiated term
  // by term. The class weights get no gradient: kiln-decompose keeps for
  // autodiff only the ops whose weights are constants.
  Value weight = op.getWeight();
  if (weight && !weight.getDefiningOp<ConstantOp>())
    return op.emitError("kiln-autodiff: kiln.cross_entropy's class weights "
                        "are not a constant; expand the op first "
                        "(kiln-decompose) to differentiate them");
  out.push_back(CrossEntropyGradOp::create(
      k.b, k.loc, op.getLogits().getType(), op.getLogits(), op.getLabels(),
      grads[0], weight, op.getReductionAttr(), op.getIgnoreIndexAttr(),
      op.getLabelSmoothingAttr()));
  out.push_back(Value());
  if (weight)
    out.push_back(Value());
  return success();
}

void attachNNRules(MLIRContext *context) {
  attach<ConvOp, ConvTransposeOp, MaxPoolOp, AvgPoolOp, CumsumOp, AttentionOp,
         LayerNormOp, CrossEntropyOp>(context);
}

} // namespace kiln::vjp
