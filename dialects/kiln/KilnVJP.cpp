//===- KilnVJP.cpp - vector-Jacobian products of kiln ops -----------------===//
//
// Each rule builds, out of kiln ops, the gradients of an op's operands from
// the gradient `g` of its result. The rules cover the core ops that
// kiln-decompose leaves (softmax, batch normalization and most losses are
// differentiated through their decompositions); those of convolutions,
// pools, cumulative sums, attention, layer norms and cross-entropy are in
// KilnVJPNN.cpp.
//
//===----------------------------------------------------------------------===//

#include "KilnVJPRules.h"

#include <cmath>

#include "kiln/KilnInterfaces.cpp.inc"

using namespace mlir;
using namespace kiln;
using namespace kiln::vjp;

namespace kiln::vjp {

Value RuleBuilder::splat(RankedTensorType type, double value) {
  auto f = mlir::cast<FloatType>(type.getElementType());
  APFloat v(value);
  bool lost;
  v.convert(f.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
  return ConstantOp::create(b, loc, DenseElementsAttr::get(type, v));
}

Value RuleBuilder::reshape(Value v, ArrayRef<int64_t> shape) {
  if (typeOf(v).getShape() == shape)
    return v;
  return ReshapeOp::create(b, loc, typeOf(v).clone(shape), v);
}

Value RuleBuilder::broadcast(Value v, ArrayRef<int64_t> shape) {
  if (typeOf(v).getShape() == shape)
    return v;
  return BroadcastOp::create(b, loc, typeOf(v).clone(shape), v);
}

Value RuleBuilder::transpose(Value v, ArrayRef<int64_t> permutation) {
  if (llvm::equal(permutation, llvm::seq<int64_t>(0, permutation.size())))
    return v;
  return TransposeOp::create(b, loc, v, b.getDenseI64ArrayAttr(permutation));
}

Value RuleBuilder::sum(Value v, ArrayRef<int64_t> dims, bool keepdims) {
  if (dims.empty())
    return v;
  return ReduceSumOp::create(b, loc, v, b.getDenseI64ArrayAttr(dims),
                             keepdims ? b.getUnitAttr() : nullptr);
}

Value RuleBuilder::unbroadcast(Value g, ArrayRef<int64_t> shape) {
  ArrayRef<int64_t> from = typeOf(g).getShape();
  if (from == shape)
    return g;
  int64_t offset = from.size() - shape.size();
  SmallVector<int64_t> dims;
  for (int64_t d = 0; d < static_cast<int64_t>(from.size()); ++d)
    if (d < offset || (shape[d - offset] == 1 && from[d] != 1))
      dims.push_back(d);
  return reshape(sum(g, dims, false), shape);
}

Value RuleBuilder::pad(Value v, ArrayRef<int64_t> low, ArrayRef<int64_t> high,
                       double value) {
  if (llvm::all_of(low, [](int64_t p) { return p == 0; }) &&
      llvm::all_of(high, [](int64_t p) { return p == 0; }))
    return v;
  return PadOp::create(b, loc, v, b.getDenseI64ArrayAttr(low),
                       b.getDenseI64ArrayAttr(high),
                       PadModeAttr::get(b.getContext(), PadMode::constant),
                       b.getF64FloatAttr(value));
}

Value RuleBuilder::slice(Value v, ArrayRef<int64_t> start,
                         ArrayRef<int64_t> limit, ArrayRef<int64_t> stride) {
  auto type = typeOf(v);
  if (llvm::all_of(start, [](int64_t s) { return s == 0; }) &&
      limit == type.getShape() &&
      llvm::all_of(stride, [](int64_t s) { return s == 1; }))
    return v;
  return SliceOp::create(b, loc, v, start, limit, stride);
}

Value RuleBuilder::unslice(Value g, ArrayRef<int64_t> shape,
                           ArrayRef<int64_t> start, ArrayRef<int64_t> stride) {
  // Spread the strided dimensions: each [.., n, ..] becomes [.., n, 1, ..],
  // padded to [.., n, stride, ..] and flattened to [.., n * stride, ..].
  auto type = typeOf(g);
  int64_t rank = type.getRank();
  SmallVector<int64_t> split, splitHigh, spread;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t n = type.getDimSize(d);
    split.push_back(n);
    splitHigh.push_back(0);
    spread.push_back(n);
    if (stride[d] == 1 || n <= 1)
      continue;
    split.push_back(1);
    splitHigh.push_back(stride[d] - 1);
    spread.back() *= stride[d];
  }
  if (split.size() != static_cast<size_t>(rank))
    g = reshape(pad(reshape(g, split), SmallVector<int64_t>(split.size(), 0),
                    splitHigh),
                spread);
  // Place it at `start`, cutting the zeros that follow the last element
  // where they would run past the end.
  SmallVector<int64_t> low(rank, 0), limit(spread), high(rank, 0),
      unit(rank, 1);
  for (int64_t d = 0; d < rank; ++d) {
    int64_t room = shape[d] - start[d] - spread[d];
    limit[d] += std::min<int64_t>(room, 0);
    high[d] = std::max<int64_t>(room, 0);
  }
  return pad(slice(g, low, limit, unit), start, high);
}

bool isFloatTensor(Value v) {
  return isa<FloatType>(
      mlir::cast<RankedTensorType>(v.getType()).getElementType());
}

#define KILN_UNARY_VJP(OP, EXPR)                                               \
  template <>                                                                  \
  LogicalResult rule(OP op, RuleBuilder &k, ArrayRef<Value> grads,             \
                     SmallVectorImpl<Value> &out) {                            \
    Value g = grads[0], x = op.getInput(), y = op.getResult();                 \
    (void)x;                                                                   \
    (void)y;                                                                   \
    out.push_back(EXPR);                                                       \
    return success();                                                          \
  }

KILN_UNARY_VJP(NegOp, k.neg(g))
KILN_UNARY_VJP(ExpOp, k.mul(g, y))
KILN_UNARY_VJP(LogOp, k.div(g, x))
KILN_UNARY_VJP(SqrtOp, k.div(k.mul(g, k.like(y, 0.5)), y))
KILN_UNARY_VJP(RsqrtOp, k.mul(k.mul(g, k.like(y, -0.5)), k.mul(y, k.mul(y, y))))
KILN_UNARY_VJP(ReciprocalOp, k.neg(k.mul(g, k.mul(y, y))))
KILN_UNARY_VJP(TanhOp, k.mul(g, k.sub(k.like(y, 1), k.mul(y, y))))
KILN_UNARY_VJP(SigmoidOp, k.mul(g, k.mul(y, k.sub(k.like(y, 1), y))))
KILN_UNARY_VJP(SoftplusOp, k.mul(g, SigmoidOp::create(k.b, k.loc, x)))
KILN_UNARY_VJP(ErfOp, k.mul(g, k.mul(k.like(x, 2.0 / std::sqrt(M_PI)),
                                     k.exp(k.neg(k.mul(x, x))))))
KILN_UNARY_VJP(SinOp, k.mul(g, CosOp::create(k.b, k.loc, x)))
KILN_UNARY_VJP(CosOp, k.neg(k.mul(g, SinOp::create(k.b, k.loc, x))))
KILN_UNARY_VJP(ReluOp, k.select(k.cmp(ComparePredicate::gt, x, k.like(x, 0)), g,
                                k.like(g, 0)))
KILN_UNARY_VJP(AbsOp, k.mul(g, SignOp::create(k.b, k.loc, x)))
#undef KILN_UNARY_VJP

template <>
LogicalResult rule(LeakyReluOp op, RuleBuilder &k, ArrayRef<Value> grads,
                   SmallVectorImpl<Value> &out) {
  Value g = grads[0], x = op.getInput();
  Value scaled = k.mul(g, k.like(g, op.getAlpha().convertToDouble()));
  out.push_back(
      k.select(k.cmp(ComparePredicate::ge, x, k.like(x, 0)), g, scaled));
  return success();
}

template <>
LogicalResult rule(GeluOp op, RuleBuilder &k, ArrayRef<Value> grads,
                   SmallVectorImpl<Value> &out) {
  Value g = grads[0], x = op.getInput();
  Value derivative;
  if (op.getApproximate() == GeluApproximation::tanh) {
    // d/dx 0.5 x (1 + tanh(u)), u = c (x + 0.044715 x^3)
    double c = std::sqrt(2.0 / M_PI);
    Value x2 = k.mul(x, x);
    Value u =
        k.mul(k.like(x, c), k.add(x, k.mul(k.like(x, 0.044715), k.mul(x2, x))));
    Value t = TanhOp::create(k.b, k.loc, u);
    Value du = k.mul(k.like(x, c),
                     k.add(k.like(x, 1), k.mul(k.like(x, 3 * 0.044715), x2)));
    Value first = k.mul(k.like(x, 0.5), k.add(k.like(x, 1), t));
    Value second = k.mul(k.mul(k.like(x, 0.5), x),
                         k.mul(k.sub(k.like(x, 1), k.mul(t, t)), du));
    derivative = k.add(first, second);
  } else {
    // Phi(x) + x phi(x)
    Value cdf =
        k.mul(k.like(x, 0.5),
              k.add(k.like(x, 1),
                    ErfOp::create(k.b, k.loc, k.mul(x, k.like(x, M_SQRT1_2)))));
    Value pdf = k.mul(k.like(x, 1.0 / std::sqrt(2 * M_PI)),
                      k.exp(k.mul(k.like(x, -0.5), k.mul(x, x))));
    derivative = k.add(cdf, k.mul(x, pdf));
  }
  out.push_back(k.mul(g, derivative));
  return success();
}

template <>
LogicalResult rule(AddOp op, RuleBuilder &k, ArrayRef<Value> grads,
                   SmallVectorImpl<Value> &out) {
  out.append({grads[0], grads[0]});
  return success();
}

template <>
LogicalResult rule(SubOp op, RuleBuilder &k, ArrayRef<Value> grads,
                   SmallVectorImpl<Value> &out) {
  out.append({grads[0], k.neg(grads[0])});
  return success();
}

template <>
LogicalResult rule(MulOp op, RuleBuilder &k, ArrayRef<Value> grads,
                   SmallVectorImpl<Value> &out) {
  out.append({k.mul(grads[0], op.getRhs()), k.mul(grads[0], op.getLhs())});
  return success();
}

template <>
LogicalResult rule(DivOp op, RuleBuilder &k, ArrayRef<Value> grads,
                   SmallVectorImpl<Value> &out) {
  Value g = grads[0];
  Value dx = k.div(g, op.getRhs());
  out.append({dx, k.neg(k.mul(dx, op.getResult()))});
  return success();
}

template <>
LogicalResult rule(PowOp op, RuleBuilder &k, ArrayRef<Value> grads,
                   SmallVectorImpl<Value> &out) {
  Value g = grads[0], x = op.getLhs(), y = op.getRhs(), r = op.getResult();
  // d/dx = y x^(y-1); d/dy = x^y ln x.
  Value dx =
      k.mul(g, k.mul(y, PowOp::create(k.b, k.loc, x, k.sub(y, k.like(y, 1)))));
  Value dy = k.mul(g, k.mul(r, LogOp::create(k.b, k.loc, x)));
  out.append({dx, dy});
  return success();
}

template <typename OpTy>
LogicalResult minMaxVjp(OpTy op, RuleBuilder &k, ArrayRef<Value> grads,
                        SmallVectorImpl<Value> &out, ComparePredicate p) {
  Value g = grads[0];
  Value lhsWins = k.cmp(p, op.getLhs(), op.getRhs());
  Value zero = k.like(g, 0);
  out.append({k.select(lhsWins, g, zero), k.select(lhsWins, zero, g)});
  return success();
}

template <>
LogicalResult rule(MaxOp op, RuleBuilder &k, ArrayRef<Value> grads,
                   SmallVectorImpl<Value> &out) {
  return minMaxVjp(op, k, grads, out, ComparePredicate::ge);
}

template <>
LogicalResult rule(MinOp op, RuleBuilder &k, ArrayRef<Value> grads,
                   SmallVectorImpl<Value> &out) {
  return minMaxVjp(op, k, grads, out, ComparePredicate::le);
}

template <>
LogicalResult rule(SelectOp op, RuleBuilder &k, ArrayRef<Value> grads,
                   SmallVectorImpl<Value> &out) {
  Value g = grads[0], zero = k.like(grads[0], 0);
  out.append({Value(), k.select(op.getCond(), g, zero),
              k.select(op.getCond(), zero, g)});
  return success();
}

template <>
LogicalResult rule(CastOp op, RuleBuilder &k, ArrayRef<Value> grads,
                   SmallVectorImpl<Value> &out) {
  // Rounding through a narrow type would need a straight-through rule. (Only
  // ops between a parameter and the loss get here: a cast of narrow data
  // does not.)
  if (isNarrowType(op.getType().getElementType()) ||
      isNarrowType(op.getInput().getType().getElementType()))
    return op.emitOpError("has no gradient: a parameter rounded through a "
                          "narrow type (float8, float4, int4, int2) is not "
                          "differentiable yet");
  if (!isFloatTensor(op.getInput())) {
    out.push_back(Value());
    return success();
  }
  out.push_back(CastOp::create(k.b, k.loc, op.getInput().getType(), grads[0]));
  return success();
}

template <>
LogicalResult rule(ReshapeOp op, RuleBuilder &k, ArrayRef<Value> grads,
                   SmallVectorImpl<Value> &out) {
  out.push_back(
      k.reshape(grads[0], RuleBuilder::typeOf(op.getInput()).getShape()));
  return success();
}

template <>
LogicalResult rule(BroadcastOp op, RuleBuilder &k, ArrayRef<Value> grads,
                   SmallVectorImpl<Value> &out) {
  out.push_back(
      k.unbroadcast(grads[0], RuleBuilder::typeOf(op.getInput()).getShape()));
  return success();
}

template <>
LogicalResult rule(TransposeOp op, RuleBuilder &k, ArrayRef<Value> grads,
                   SmallVectorImpl<Value> &out) {
  ArrayRef<int64_t> perm = op.getPermutation();
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inverse[p] = i;
  out.push_back(TransposeOp::create(k.b, k.loc, grads[0],
                                    k.b.getDenseI64ArrayAttr(inverse)));
  return success();
}

template <>
LogicalResult rule(SliceOp op, RuleBuilder &k, ArrayRef<Value> grads,
                   SmallVectorImpl<Value> &out) {
  out.push_back(k.unslice(grads[0],
                          RuleBuilder::typeOf(op.getInput()).getShape(),
                          op.getStart(), op.getStride()));
  return success();
}

template <>
LogicalResult rule(ConcatOp op, RuleBuilder &k, ArrayRef<Value> grads,
                   SmallVectorImpl<Value> &out) {
  int64_t axis = op.getAxis(), offset = 0;
  auto type = RuleBuilder::typeOf(grads[0]);
  for (Value input : op.getInputs()) {
    auto in = RuleBuilder::typeOf(input);
    SmallVector<int64_t> start(type.getRank(), 0), limit(type.getShape()),
        stride(type.getRank(), 1);
    start[axis] = offset;
    limit[axis] = offset + in.getDimSize(axis);
    offset = limit[axis];
    out.push_back(SliceOp::create(k.b, k.loc, grads[0], start, limit, stride));
  }
  return success();
}

template <>
LogicalResult rule(SplitOp op, RuleBuilder &k, ArrayRef<Value> grads,
                   SmallVectorImpl<Value> &out) {
  SmallVector<Value> pieces;
  for (auto [result, g] : llvm::zip(op.getResults(), grads))
    pieces.push_back(g ? g : k.like(result, 0));
  out.push_back(ConcatOp::create(k.b, k.loc, pieces,
                                 k.b.getI64IntegerAttr(op.getAxis())));
  return success();
}

/// The result gradient of a reduction, with the reduced dims restored as
/// size 1 and broadcast back to the input shape.
static Value spreadReduction(RuleBuilder &k, Value g, Value input,
                             ArrayRef<int64_t> dims) {
  auto in = RuleBuilder::typeOf(input);
  SmallVector<int64_t> kept(in.getShape());
  for (int64_t d : dims)
    kept[d] = 1;
  return k.broadcast(k.reshape(g, kept), in.getShape());
}

template <>
LogicalResult rule(ReduceSumOp op, RuleBuilder &k, ArrayRef<Value> grads,
                   SmallVectorImpl<Value> &out) {
  out.push_back(
      spreadReduction(k, grads[0], op.getInput(), op.getDimensions()));
  return success();
}

template <>
LogicalResult rule(ReduceMeanOp op, RuleBuilder &k, ArrayRef<Value> grads,
                   SmallVectorImpl<Value> &out) {
  int64_t count = 1;
  for (int64_t d : op.getDimensions())
    count *= RuleBuilder::typeOf(op.getInput()).getDimSize(d);
  Value g = spreadReduction(k, grads[0], op.getInput(), op.getDimensions());
  out.push_back(k.div(g, k.like(g, static_cast<double>(count))));
  return success();
}

template <typename OpTy>
LogicalResult extremumVjp(OpTy op, RuleBuilder &k, ArrayRef<Value> grads,
                          SmallVectorImpl<Value> &out) {
  // The gradient goes to the elements equal to the extremum.
  Value g = spreadReduction(k, grads[0], op.getInput(), op.getDimensions());
  Value extremum =
      spreadReduction(k, op.getResult(), op.getInput(), op.getDimensions());
  Value hit = k.cmp(ComparePredicate::eq, op.getInput(), extremum);
  out.push_back(k.select(hit, g, k.like(g, 0)));
  return success();
}

template <>
LogicalResult rule(ReduceMaxOp op, RuleBuilder &k, ArrayRef<Value> grads,
                   SmallVectorImpl<Value> &out) {
  return extremumVjp(op, k, grads, out);
}

template <>
LogicalResult rule(ReduceMinOp op, RuleBuilder &k, ArrayRef<Value> grads,
                   SmallVectorImpl<Value> &out) {
  return extremumVjp(op, k, grads, out);
}

template <>
LogicalResult rule(MatmulOp op, RuleBuilder &k, ArrayRef<Value> grads,
                   SmallVectorImpl<Value> &out) {
  Value g = grads[0], a = op.getLhs(), b = op.getRhs();
  bool ta = op.getTransposeLhs(), tb = op.getTransposeRhs();
  Value da, db;
  if (!ta && !tb) {
    da = k.matmul(g, b, false, true);
    db = k.matmul(a, g, true, false);
  } else if (!ta && tb) {
    da = k.matmul(g, b, false, false);
    db = k.matmul(g, a, true, false);
  } else if (ta && !tb) {
    da = k.matmul(b, g, false, true);
    db = k.matmul(a, g, false, false);
  } else {
    da = k.matmul(b, g, true, true);
    db = k.matmul(g, a, true, true);
  }
  out.append({da, db});
  return success();
}

template <>
LogicalResult rule(GatherElementsOp op, RuleBuilder &k, ArrayRef<Value> grads,
                   SmallVectorImpl<Value> &out) {
  Value zeros = k.like(op.getInput(), 0);
  out.push_back(ScatterElementsOp::create(
      k.b, k.loc, op.getInput().getType(), zeros, op.getIndices(), grads[0],
      op.getAxisAttr(), ReductionAttr::get(k.b.getContext(), Reduction::add)));
  out.push_back(Value());
  return success();
}

template <>
LogicalResult rule(GatherOp op, RuleBuilder &k, ArrayRef<Value> grads,
                   SmallVectorImpl<Value> &out) {
  // Scatter-add the gradient rows back: move the gathered axis first, then
  // scatter_nd with the indices as one-element index vectors.
  auto in = RuleBuilder::typeOf(op.getInput());
  int64_t axis = op.getAxis(), rank = in.getRank();
  auto indexType = RuleBuilder::typeOf(op.getIndices());
  int64_t q = indexType.getRank(), count = indexType.getNumElements();
  Value g = grads[0];
  // g is [pre..., idx..., post...]: bring the idx dims to the front.
  SmallVector<int64_t> perm;
  for (int64_t d = 0; d < q; ++d)
    perm.push_back(axis + d);
  for (int64_t d = 0; d < axis; ++d)
    perm.push_back(d);
  for (int64_t d = axis + q; d < RuleBuilder::typeOf(g).getRank(); ++d)
    perm.push_back(d);
  Value moved =
      TransposeOp::create(k.b, k.loc, g, k.b.getDenseI64ArrayAttr(perm));
  SmallVector<int64_t> rows{count};
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis)
      rows.push_back(in.getDimSize(d));
  Value updates = k.reshape(moved, rows);
  // The input with the gathered axis first.
  SmallVector<int64_t> inPerm{axis};
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis)
      inPerm.push_back(d);
  SmallVector<int64_t> movedShape;
  for (int64_t d : inPerm)
    movedShape.push_back(in.getDimSize(d));
  Value zeros = k.splat(in.clone(movedShape), 0);
  // Negative indices wrap, as in the forward gather.
  Value indices = op.getIndices();
  auto wrappedType = indexType;
  Value negative =
      k.cmp(ComparePredicate::lt, indices,
            ConstantOp::create(
                k.b, k.loc,
                DenseElementsAttr::get(
                    wrappedType,
                    k.b.getIntegerAttr(wrappedType.getElementType(), 0))));
  Value shifted = AddOp::create(
      k.b, k.loc, indices,
      ConstantOp::create(
          k.b, k.loc,
          DenseElementsAttr::get(
              wrappedType, k.b.getIntegerAttr(wrappedType.getElementType(),
                                              in.getDimSize(axis)))));
  indices =
      SelectOp::create(k.b, k.loc, wrappedType, negative, shifted, indices);
  Value index =
      ReshapeOp::create(k.b, k.loc, indexType.clone({count, 1}), indices);
  Value scattered =
      ScatterNdOp::create(k.b, k.loc, zeros.getType(), zeros, index, updates,
                          ReductionAttr::get(k.b.getContext(), Reduction::add));
  SmallVector<int64_t> inverse(rank);
  for (auto [i, p] : llvm::enumerate(inPerm))
    inverse[p] = i;
  out.push_back(TransposeOp::create(k.b, k.loc, scattered,
                                    k.b.getDenseI64ArrayAttr(inverse)));
  out.push_back(Value());
  return success();
}

template <>
LogicalResult rule(DropoutOp op, RuleBuilder &k, ArrayRef<Value> grads,
                   SmallVectorImpl<Value> &out) {
  Value g = grads[0] ? grads[0] : k.like(op.getResult(), 0);
  double keep = 1.0 / (1.0 - op.getRatio().convertToDouble());
  out.push_back(
      k.select(op.getMask(), k.mul(g, k.like(g, keep)), k.like(g, 0)));
  out.push_back(Value());
  return success();
}

} // namespace kiln::vjp

void kiln::attachDifferentiationRules(KilnDialect &dialect) {
  attachNNRules(dialect.getContext());
  attach<NegOp, ExpOp, LogOp, SqrtOp, RsqrtOp, ReciprocalOp, TanhOp, SigmoidOp,
         SoftplusOp, ErfOp, SinOp, CosOp, ReluOp, AbsOp, LeakyReluOp, GeluOp,
         AddOp, SubOp, MulOp, DivOp, PowOp, MaxOp, MinOp, SelectOp, CastOp,
         ReshapeOp, BroadcastOp, TransposeOp, SliceOp, ConcatOp, SplitOp,
         ReduceSumOp, ReduceMeanOp, ReduceMaxOp, ReduceMinOp, MatmulOp,
         GatherElementsOp, GatherOp, DropoutOp>(dialect.getContext());
}
