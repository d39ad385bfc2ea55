//===- KilnVJP.cpp - vector-Jacobian products of kiln ops -----------------===//
//
// Each rule builds, out of kiln ops, the gradients of an op's operands from
// the gradient `g` of its result. The rules cover the core ops that
// kiln-decompose leaves (softmax, normalizations and losses are
// differentiated through their decompositions).
//
//===----------------------------------------------------------------------===//

#include "kiln/KilnInterfaces.h"
#include "kiln/KilnOps.h"

#include <cmath>

#include "kiln/KilnInterfaces.cpp.inc"

using namespace mlir;
using namespace kiln;

namespace {

/// Builds kiln ops at one location.
struct G {
  OpBuilder &b;
  Location loc;

  static RankedTensorType typeOf(Value v) {
    return mlir::cast<RankedTensorType>(v.getType());
  }
  Value splat(RankedTensorType type, double value) {
    auto f = mlir::cast<FloatType>(type.getElementType());
    APFloat v(value);
    bool lost;
    v.convert(f.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
    return ConstantOp::create(b, loc, DenseElementsAttr::get(type, v));
  }
  Value like(Value v, double value) { return splat(typeOf(v), value); }
  Value add(Value x, Value y) { return AddOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return SubOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return MulOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return DivOp::create(b, loc, x, y); }
  Value neg(Value x) { return NegOp::create(b, loc, x); }
  Value exp(Value x) { return ExpOp::create(b, loc, x); }
  Value cmp(ComparePredicate p, Value x, Value y) {
    return CompareOp::create(b, loc, ComparePredicateAttr::get(b.getContext(), p),
                             x, y);
  }
  Value select(Value c, Value x, Value y) {
    return SelectOp::create(b, loc, x.getType(), c, x, y);
  }
  Value reshape(Value v, ArrayRef<int64_t> shape) {
    if (typeOf(v).getShape() == shape)
      return v;
    return ReshapeOp::create(b, loc, typeOf(v).clone(shape), v);
  }
  Value broadcast(Value v, ArrayRef<int64_t> shape) {
    if (typeOf(v).getShape() == shape)
      return v;
    return BroadcastOp::create(b, loc, typeOf(v).clone(shape), v);
  }
  Value sum(Value v, ArrayRef<int64_t> dims, bool keepdims) {
    if (dims.empty())
      return v;
    return ReduceSumOp::create(b, loc, v, b.getDenseI64ArrayAttr(dims),
                               keepdims ? b.getUnitAttr() : nullptr);
  }
  /// Sums `g` down to `shape`, undoing a numpy broadcast.
  Value unbroadcast(Value g, ArrayRef<int64_t> shape) {
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
  Value matmul(Value x, Value y, bool tx, bool ty) {
    return MatmulOp::create(b, loc, x, y, tx ? b.getUnitAttr() : nullptr,
                            ty ? b.getUnitAttr() : nullptr);
  }
};

bool isFloatTensor(Value v) {
  return isa<FloatType>(mlir::cast<RankedTensorType>(v.getType()).getElementType());
}

template <typename OpTy>
LogicalResult vjp(OpTy op, G &g, ArrayRef<Value> grads, SmallVectorImpl<Value> &out);

#define KILN_UNARY_VJP(OP, EXPR)                                               \
  template <>                                                                  \
  LogicalResult vjp(OP op, G &k, ArrayRef<Value> grads,                        \
                    SmallVectorImpl<Value> &out) {                             \
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
KILN_UNARY_VJP(ReluOp, k.select(k.cmp(ComparePredicate::gt, x, k.like(x, 0)),
                                g, k.like(g, 0)))
KILN_UNARY_VJP(AbsOp, k.mul(g, SignOp::create(k.b, k.loc, x)))
#undef KILN_UNARY_VJP

template <>
LogicalResult vjp(LeakyReluOp op, G &k, ArrayRef<Value> grads,
                  SmallVectorImpl<Value> &out) {
  Value g = grads[0], x = op.getInput();
  Value scaled = k.mul(g, k.like(g, op.getAlpha().convertToDouble()));
  out.push_back(k.select(k.cmp(ComparePredicate::ge, x, k.like(x, 0)), g, scaled));
  return success();
}

template <>
LogicalResult vjp(GeluOp op, G &k, ArrayRef<Value> grads,
                  SmallVectorImpl<Value> &out) {
  Value g = grads[0], x = op.getInput();
  Value derivative;
  if (op.getApproximate() == GeluApproximation::tanh) {
    // d/dx 0.5 x (1 + tanh(u)), u = c (x + 0.044715 x^3)
    double c = std::sqrt(2.0 / M_PI);
    Value x2 = k.mul(x, x);
    Value u = k.mul(k.like(x, c), k.add(x, k.mul(k.like(x, 0.044715), k.mul(x2, x))));
    Value t = TanhOp::create(k.b, k.loc, u);
    Value du = k.mul(k.like(x, c), k.add(k.like(x, 1), k.mul(k.like(x, 3 * 0.044715), x2)));
    Value first = k.mul(k.like(x, 0.5), k.add(k.like(x, 1), t));
    Value second = k.mul(k.mul(k.like(x, 0.5), x),
                         k.mul(k.sub(k.like(x, 1), k.mul(t, t)), du));
    derivative = k.add(first, second);
  } else {
    // Phi(x) + x phi(x)
    Value cdf = k.mul(k.like(x, 0.5),
                      k.add(k.like(x, 1), ErfOp::create(k.b, k.loc,
                                                        k.mul(x, k.like(x, M_SQRT1_2)))));
    Value pdf = k.mul(k.like(x, 1.0 / std::sqrt(2 * M_PI)),
                      k.exp(k.mul(k.like(x, -0.5), k.mul(x, x))));
    derivative = k.add(cdf, k.mul(x, pdf));
  }
  out.push_back(k.mul(g, derivative));
  return success();
}

template <>
LogicalResult vjp(AddOp op, G &k, ArrayRef<Value> grads, SmallVectorImpl<Value> &out) {
  out.append({grads[0], grads[0]});
  return success();
}

template <>
LogicalResult vjp(SubOp op, G &k, ArrayRef<Value> grads, SmallVectorImpl<Value> &out) {
  out.append({grads[0], k.neg(grads[0])});
  return success();
}

template <>
LogicalResult vjp(MulOp op, G &k, ArrayRef<Value> grads, SmallVectorImpl<Value> &out) {
  out.append({k.mul(grads[0], op.getRhs()), k.mul(grads[0], op.getLhs())});
  return success();
}

template <>
LogicalResult vjp(DivOp op, G &k, ArrayRef<Value> grads, SmallVectorImpl<Value> &out) {
  Value g = grads[0];
  Value dx = k.div(g, op.getRhs());
  out.append({dx, k.neg(k.mul(dx, op.getResult()))});
  return success();
}

template <>
LogicalResult vjp(PowOp op, G &k, ArrayRef<Value> grads, SmallVectorImpl<Value> &out) {
  Value g = grads[0], x = op.getLhs(), y = op.getRhs(), r = op.getResult();
  // d/dx = y x^(y-1); d/dy = x^y ln x.
  Value dx = k.mul(g, k.mul(y, PowOp::create(k.b, k.loc, x, k.sub(y, k.like(y, 1)))));
  Value dy = k.mul(g, k.mul(r, LogOp::create(k.b, k.loc, x)));
  out.append({dx, dy});
  return success();
}

template <typename OpTy>
LogicalResult minMaxVjp(OpTy op, G &k, ArrayRef<Value> grads,
                        SmallVectorImpl<Value> &out, ComparePredicate p) {
  Value g = grads[0];
  Value lhsWins = k.cmp(p, op.getLhs(), op.getRhs());
  Value zero = k.like(g, 0);
  out.append({k.select(lhsWins, g, zero), k.select(lhsWins, zero, g)});
  return success();
}

template <>
LogicalResult vjp(MaxOp op, G &k, ArrayRef<Value> grads, SmallVectorImpl<Value> &out) {
  return minMaxVjp(op, k, grads, out, ComparePredicate::ge);
}

template <>
LogicalResult vjp(MinOp op, G &k, ArrayRef<Value> grads, SmallVectorImpl<Value> &out) {
  return minMaxVjp(op, k, grads, out, ComparePredicate::le);
}

template <>
LogicalResult vjp(SelectOp op, G &k, ArrayRef<Value> grads, SmallVectorImpl<Value> &out) {
  Value g = grads[0], zero = k.like(grads[0], 0);
  out.append({Value(), k.select(op.getCond(), g, zero),
              k.select(op.getCond(), zero, g)});
  return success();
}

template <>
LogicalResult vjp(CastOp op, G &k, ArrayRef<Value> grads, SmallVectorImpl<Value> &out) {
  if (!isFloatTensor(op.getInput())) {
    out.push_back(Value());
    return success();
  }
  out.push_back(CastOp::create(k.b, k.loc, op.getInput().getType(), grads[0]));
  return success();
}

template <>
LogicalResult vjp(ReshapeOp op, G &k, ArrayRef<Value> grads, SmallVectorImpl<Value> &out) {
  out.push_back(k.reshape(grads[0], G::typeOf(op.getInput()).getShape()));
  return success();
}

template <>
LogicalResult vjp(BroadcastOp op, G &k, ArrayRef<Value> grads, SmallVectorImpl<Value> &out) {
  out.push_back(k.unbroadcast(grads[0], G::typeOf(op.getInput()).getShape()));
  return success();
}

template <>
LogicalResult vjp(TransposeOp op, G &k, ArrayRef<Value> grads, SmallVectorImpl<Value> &out) {
  ArrayRef<int64_t> perm = op.getPermutation();
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inverse[p] = i;
  out.push_back(TransposeOp::create(k.b, k.loc, grads[0],
                                    k.b.getDenseI64ArrayAttr(inverse)));
  return success();
}

template <>
LogicalResult vjp(SliceOp op, G &k, ArrayRef<Value> grads, SmallVectorImpl<Value> &out) {
  if (llvm::any_of(op.getStride(), [](int64_t s) { return s != 1; }))
    return op.emitOpError("kiln-autodiff: no gradient rule for strided slices yet");
  auto in = G::typeOf(op.getInput());
  SmallVector<int64_t> high;
  for (int64_t d = 0; d < in.getRank(); ++d)
    high.push_back(in.getDimSize(d) - op.getLimit()[d]);
  out.push_back(PadOp::create(k.b, k.loc, grads[0],
                              k.b.getDenseI64ArrayAttr(op.getStart()),
                              k.b.getDenseI64ArrayAttr(high),
                              PadModeAttr::get(k.b.getContext(), PadMode::constant),
                              k.b.getF64FloatAttr(0.0)));
  return success();
}

template <>
LogicalResult vjp(ConcatOp op, G &k, ArrayRef<Value> grads, SmallVectorImpl<Value> &out) {
  int64_t axis = op.getAxis(), offset = 0;
  auto type = G::typeOf(grads[0]);
  for (Value input : op.getInputs()) {
    auto in = G::typeOf(input);
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
LogicalResult vjp(SplitOp op, G &k, ArrayRef<Value> grads, SmallVectorImpl<Value> &out) {
  SmallVector<Value> pieces;
  for (auto [result, g] : llvm::zip(op.getResults(), grads))
    pieces.push_back(g ? g : k.like(result, 0));
  out.push_back(ConcatOp::create(k.b, k.loc, pieces, k.b.getI64IntegerAttr(op.getAxis())));
  return success();
}

/// The result gradient of a reduction, with the reduced dims restored as
/// size 1 and broadcast back to the input shape.
Value spreadReduction(G &k, Value g, Value input, ArrayRef<int64_t> dims) {
  auto in = G::typeOf(input);
  SmallVector<int64_t> kept(in.getShape());
  for (int64_t d : dims)
    kept[d] = 1;
  return k.broadcast(k.reshape(g, kept), in.getShape());
}

template <>
LogicalResult vjp(ReduceSumOp op, G &k, ArrayRef<Value> grads, SmallVectorImpl<Value> &out) {
  out.push_back(spreadReduction(k, grads[0], op.getInput(), op.getDimensions()));
  return success();
}

template <>
LogicalResult vjp(ReduceMeanOp op, G &k, ArrayRef<Value> grads, SmallVectorImpl<Value> &out) {
  int64_t count = 1;
  for (int64_t d : op.getDimensions())
    count *= G::typeOf(op.getInput()).getDimSize(d);
  Value g = spreadReduction(k, grads[0], op.getInput(), op.getDimensions());
  out.push_back(k.div(g, k.like(g, static_cast<double>(count))));
  return success();
}

template <typename OpTy>
LogicalResult extremumVjp(OpTy op, G &k, ArrayRef<Value> grads,
                          SmallVectorImpl<Value> &out) {
  // The gradient goes to the elements equal to the extremum.
  Value g = spreadReduction(k, grads[0], op.getInput(), op.getDimensions());
  Value extremum = spreadReduction(k, op.getResult(), op.getInput(), op.getDimensions());
  Value hit = k.cmp(ComparePredicate::eq, op.getInput(), extremum);
  out.push_back(k.select(hit, g, k.like(g, 0)));
  return success();
}

template <>
LogicalResult vjp(ReduceMaxOp op, G &k, ArrayRef<Value> grads, SmallVectorImpl<Value> &out) {
  return extremumVjp(op, k, grads, out);
}

template <>
LogicalResult vjp(ReduceMinOp op, G &k, ArrayRef<Value> grads, SmallVectorImpl<Value> &out) {
  return extremumVjp(op, k, grads, out);
}

template <>
LogicalResult vjp(MatmulOp op, G &k, ArrayRef<Value> grads, SmallVectorImpl<Value> &out) {
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
LogicalResult vjp(GatherElementsOp op, G &k, ArrayRef<Value> grads,
                  SmallVectorImpl<Value> &out) {
  Value zeros = k.like(op.getInput(), 0);
  out.push_back(ScatterElementsOp::create(
      k.b, k.loc, op.getInput().getType(), zeros, op.getIndices(), grads[0],
      op.getAxisAttr(), ReductionAttr::get(k.b.getContext(), Reduction::add)));
  out.push_back(Value());
  return success();
}

template <>
LogicalResult vjp(GatherOp op, G &k, ArrayRef<Value> grads, SmallVectorImpl<Value> &out) {
  // Scatter-add the gradient rows back: move the gathered axis first, then
  // scatter_nd with the indices as one-element index vectors.
  auto in = G::typeOf(op.getInput());
  int64_t axis = op.getAxis(), rank = in.getRank();
  auto indexType = G::typeOf(op.getIndices());
  int64_t q = indexType.getRank(), count = indexType.getNumElements();
  Value g = grads[0];
  // g is [pre..., idx..., post...]: bring the idx dims to the front.
  SmallVector<int64_t> perm;
  for (int64_t d = 0; d < q; ++d)
    perm.push_back(axis + d);
  for (int64_t d = 0; d < axis; ++d)
    perm.push_back(d);
  for (int64_t d = axis + q; d < G::typeOf(g).getRank(); ++d)
    perm.push_back(d);
  Value moved = TransposeOp::create(k.b, k.loc, g, k.b.getDenseI64ArrayAttr(perm));
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
  Value negative = k.cmp(ComparePredicate::lt, indices,
                         ConstantOp::create(k.b, k.loc,
                                            DenseElementsAttr::get(
                                                wrappedType, k.b.getIntegerAttr(
                                                    wrappedType.getElementType(), 0))));
  Value shifted = AddOp::create(
      k.b, k.loc, indices,
      ConstantOp::create(k.b, k.loc,
                         DenseElementsAttr::get(wrappedType,
                                                k.b.getIntegerAttr(wrappedType.getElementType(),
                                                                   in.getDimSize(axis)))));
  indices = SelectOp::create(k.b, k.loc, wrappedType, negative, shifted, indices);
  Value index = ReshapeOp::create(k.b, k.loc, indexType.clone({count, 1}), indices);
  Value scattered = ScatterNdOp::create(
      k.b, k.loc, zeros.getType(), zeros, index, updates,
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
LogicalResult vjp(DropoutOp op, G &k, ArrayRef<Value> grads, SmallVectorImpl<Value> &out) {
  Value g = grads[0] ? grads[0] : k.like(op.getResult(), 0);
  double keep = 1.0 / (1.0 - op.getRatio().convertToDouble());
  out.push_back(k.select(op.getMask(), k.mul(g, k.like(g, keep)), k.like(g, 0)));
  out.push_back(Value());
  return success();
}

template <typename OpTy>
struct VJPModel
    : DifferentiableOpInterface::ExternalModel<VJPModel<OpTy>, OpTy> {
  LogicalResult buildVJP(Operation *op, OpBuilder &builder,
                         ArrayRef<Value> resultGradients,
                         SmallVectorImpl<Value> &operandGradients) const {
    G k{builder, op->getLoc()};
    return vjp(mlir::cast<OpTy>(op), k, resultGradients, operandGradients);
  }
};

template <typename... Ops>
void attach(MLIRContext *context) {
  (Ops::template attachInterface<VJPModel<Ops>>(*context), ...);
}

} // namespace

void kiln::attachDifferentiationRules(KilnDialect &dialect) {
  attach<NegOp, ExpOp, LogOp, SqrtOp, RsqrtOp, ReciprocalOp, TanhOp,
         SigmoidOp, SoftplusOp, ErfOp, SinOp, CosOp, ReluOp, AbsOp,
         LeakyReluOp, GeluOp, AddOp, SubOp, MulOp, DivOp, PowOp, MaxOp, MinOp,
         SelectOp, CastOp, ReshapeOp, BroadcastOp, TransposeOp, SliceOp,
         ConcatOp, SplitOp, ReduceSumOp, ReduceMeanOp, ReduceMaxOp,
         ReduceMinOp, MatmulOp, GatherElementsOp, GatherOp, DropoutOp>(
      dialect.getContext());
}
