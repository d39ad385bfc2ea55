//===- Elementwise.cpp - elementwise kiln ops to linalg.generic -----------===//

#include "LoweringUtils.h"

#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace kiln;
using namespace kiln::lowering;

bool kiln::lowering::isFloat(Type type) { return isa<FloatType>(type); }

bool kiln::lowering::isUnsignedLike(Type type) {
  return type.isInteger(1) || type.isUnsignedInteger();
}

arith::CmpIPredicate kiln::lowering::orderFor(Type type,
                                              arith::CmpIPredicate predicate) {
  if (!isUnsignedLike(type))
    return predicate;
  switch (predicate) {
  case arith::CmpIPredicate::slt:
    return arith::CmpIPredicate::ult;
  case arith::CmpIPredicate::sle:
    return arith::CmpIPredicate::ule;
  case arith::CmpIPredicate::sgt:
    return arith::CmpIPredicate::ugt;
  case arith::CmpIPredicate::sge:
    return arith::CmpIPredicate::uge;
  default:
    return predicate;
  }
}

Value kiln::lowering::scalarConstant(OpBuilder &b, Location loc, Type type,
                                     double value) {
  if (auto f = dyn_cast<FloatType>(type))
    return arith::ConstantOp::create(b, loc, b.getFloatAttr(f, value));
  if (type.isInteger(1))
    return arith::ConstantOp::create(b, loc, b.getBoolAttr(value != 0));
  if (type.isIndex())
    return arith::ConstantIndexOp::create(b, loc, static_cast<int64_t>(value));
  return arith::ConstantOp::create(
      b, loc, b.getIntegerAttr(type, static_cast<int64_t>(value)));
}

Value kiln::lowering::emptyTensor(OpBuilder &b, Location loc,
                                  RankedTensorType type) {
  return tensor::EmptyOp::create(b, loc, type.getShape(),
                                 type.getElementType());
}

Value kiln::lowering::buildMap(OpBuilder &b, Location loc, ValueRange inputs,
                               RankedTensorType resultType, BodyBuilder body,
                               ArrayRef<AffineMap> inputMaps) {
  unsigned rank = resultType.getRank();
  SmallVector<AffineMap> maps(inputMaps.begin(), inputMaps.end());
  if (maps.empty())
    maps.assign(inputs.size(), b.getMultiDimIdentityMap(rank));
  maps.push_back(b.getMultiDimIdentityMap(rank));
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{resultType}, inputs,
      ValueRange{emptyTensor(b, loc, resultType)}, maps, iterators,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        Value result = body(nb, nloc, args.drop_back());
        linalg::YieldOp::create(nb, nloc, result);
      });
  return generic.getResult(0);
}

Value kiln::lowering::castScalar(OpBuilder &b, Location loc, Value value,
                                 Type to, bool saturate, RoundMode roundMode) {
  Type from = value.getType();
  if (from == to)
    return value;
  if (isNarrowType(from)) {
    value = widenNarrow(b, loc, value);
    from = value.getType();
    if (from == to)
      return value;
  }
  if (isNarrowType(to))
    return narrowScalar(b, loc, value, to, saturate, roundMode);
  if (to.isInteger(1)) {
    if (isFloat(from))
      return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE, value,
                                   scalarConstant(b, loc, from, 0));
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, value,
                                 scalarConstant(b, loc, from, 0));
  }
  if (isFloat(from) && isFloat(to)) {
    if (from.getIntOrFloatBitWidth() < to.getIntOrFloatBitWidth())
      return arith::ExtFOp::create(b, loc, to, value);
    if (from.getIntOrFloatBitWidth() > to.getIntOrFloatBitWidth())
      return arith::TruncFOp::create(b, loc, to, value);
    // f16 <-> bf16 go through f32.
    Value wide = arith::ExtFOp::create(b, loc, b.getF32Type(), value);
    return arith::TruncFOp::create(b, loc, to, wide);
  }
  if (isFloat(from)) {
    if (to.isUnsignedInteger())
      return arith::FPToUIOp::create(b, loc, to, value);
    return arith::FPToSIOp::create(b, loc, to, value);
  }
  if (isFloat(to)) {
    if (isUnsignedLike(from))
      return arith::UIToFPOp::create(b, loc, to, value);
    return arith::SIToFPOp::create(b, loc, to, value);
  }
  unsigned fromWidth = from.getIntOrFloatBitWidth();
  unsigned toWidth = to.getIntOrFloatBitWidth();
  // Integers of one width but another signedness (i8 <-> ui8) keep their
  // bits: the types are made signless at the end of the lowering.
  if (fromWidth < toWidth)
    return isUnsignedLike(from)
               ? arith::ExtUIOp::create(b, loc, to, value)
               : arith::ExtSIOp::create(b, loc, to, value).getResult();
  if (fromWidth == toWidth)
    return arith::BitcastOp::create(b, loc, to, value);
  return arith::TruncIOp::create(b, loc, to, value);
}

namespace {

/// x^y for integers, by squaring over every bit of y (no branches, so it
/// vectorizes, and no call: the CUDA target has no math.ipowi); products
/// wrap as integer products do. A negative exponent gives x^y truncated
/// toward zero: 1 for x = 1, +-1 for x = -1, 0 otherwise.
Value integerPower(OpBuilder &b, Location loc, Value x, Value y) {
  Type type = x.getType();
  unsigned width = type.getIntOrFloatBitWidth();
  auto c = [&](int64_t v) { return scalarConstant(b, loc, type, v); };
  auto eq = [&](Value l, Value r) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, l, r);
  };
  Value result = c(1), base = x;
  for (unsigned bit = 0; bit < width; ++bit) {
    Value set = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::ne,
        arith::AndIOp::create(b, loc, arith::ShRUIOp::create(b, loc, y, c(bit)),
                              c(1)),
        c(0));
    result = arith::SelectOp::create(
        b, loc, set, arith::MulIOp::create(b, loc, result, base), result);
    if (bit + 1 < width)
      base = arith::MulIOp::create(b, loc, base, base);
  }
  if (isUnsignedLike(type))
    return result;
  Value odd = eq(arith::AndIOp::create(b, loc, y, c(1)), c(1));
  Value negative = arith::SelectOp::create(
      b, loc, eq(x, c(1)), c(1),
      arith::SelectOp::create(b, loc, eq(x, c(-1)),
                              arith::SelectOp::create(b, loc, odd, c(-1), c(1)),
                              c(0)));
  Value below =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, y, c(0));
  return arith::SelectOp::create(b, loc, below, negative, result);
}

Value constantLike(OpBuilder &b, Location loc, Value like, double value) {
  return scalarConstant(b, loc, like.getType(), value);
}

Value cmpf(OpBuilder &b, Location loc, arith::CmpFPredicate p, Value x,
           Value y) {
  return arith::CmpFOp::create(b, loc, p, x, y);
}

Value selectOf(OpBuilder &b, Location loc, Value c, Value x, Value y) {
  return arith::SelectOp::create(b, loc, c, x, y);
}

Value clamp01(OpBuilder &b, Location loc, Value x) {
  Value zero = constantLike(b, loc, x, 0), one = constantLike(b, loc, x, 1);
  return arith::MinimumFOp::create(
      b, loc, arith::MaximumFOp::create(b, loc, x, zero), one);
}

double attrValue(FloatAttr attr) { return attr.getValueAsDouble(); }

Value signOf(OpBuilder &b, Location loc, Value x) {
  Value zero = constantLike(b, loc, x, 0);
  Value one = constantLike(b, loc, x, 1),
        minusOne = constantLike(b, loc, x, -1);
  Value positive, negative;
  if (isFloat(x.getType())) {
    positive = cmpf(b, loc, arith::CmpFPredicate::OGT, x, zero);
    negative = cmpf(b, loc, arith::CmpFPredicate::OLT, x, zero);
  } else {
    Type type = x.getType();
    positive = arith::CmpIOp::create(
        b, loc, orderFor(type, arith::CmpIPredicate::sgt), x, zero);
    negative = arith::CmpIOp::create(
        b, loc, orderFor(type, arith::CmpIPredicate::slt), x, zero);
  }
  return selectOf(b, loc, positive, one,
                  selectOf(b, loc, negative, minusOne, zero));
}

/// Python-style remainder: the result takes the divisor's sign.
Value floorMod(OpBuilder &b, Location loc, Value x, Value y) {
  // Unsigned remainders are never negative.
  if (x.getType().isUnsignedInteger())
    return arith::RemUIOp::create(b, loc, x, y);
  bool f = isFloat(x.getType());
  Value r = f ? arith::RemFOp::create(b, loc, x, y).getResult()
              : arith::RemSIOp::create(b, loc, x, y).getResult();
  Value zero = constantLike(b, loc, x, 0);
  Value rNonZero, rNeg, yNeg;
  if (f) {
    rNonZero = cmpf(b, loc, arith::CmpFPredicate::UNE, r, zero);
    rNeg = cmpf(b, loc, arith::CmpFPredicate::OLT, r, zero);
    yNeg = cmpf(b, loc, arith::CmpFPredicate::OLT, y, zero);
  } else {
    rNonZero = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, r, zero);
    rNeg = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, r, zero);
    yNeg = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, y, zero);
  }
  Value differ = arith::XOrIOp::create(b, loc, rNeg, yNeg);
  Value fix = arith::AndIOp::create(b, loc, rNonZero, differ);
  Value adjusted = f ? arith::AddFOp::create(b, loc, r, y).getResult()
                     : arith::AddIOp::create(b, loc, r, y).getResult();
  return selectOf(b, loc, fix, adjusted, r);
}

Value compareScalars(OpBuilder &b, Location loc, ComparePredicate p, Value x,
                     Value y) {
  if (isFloat(x.getType())) {
    arith::CmpFPredicate fp;
    switch (p) {
    case ComparePredicate::eq:
      fp = arith::CmpFPredicate::OEQ;
      break;
    case ComparePredicate::ne:
      fp = arith::CmpFPredicate::UNE;
      break;
    case ComparePredicate::lt:
      fp = arith::CmpFPredicate::OLT;
      break;
    case ComparePredicate::le:
      fp = arith::CmpFPredicate::OLE;
      break;
    case ComparePredicate::gt:
      fp = arith::CmpFPredicate::OGT;
      break;
    case ComparePredicate::ge:
      fp = arith::CmpFPredicate::OGE;
      break;
    }
    return cmpf(b, loc, fp, x, y);
  }
  arith::CmpIPredicate ip;
  switch (p) {
  case ComparePredicate::eq:
    ip = arith::CmpIPredicate::eq;
    break;
  case ComparePredicate::ne:
    ip = arith::CmpIPredicate::ne;
    break;
  case ComparePredicate::lt:
    ip = arith::CmpIPredicate::slt;
    break;
  case ComparePredicate::le:
    ip = arith::CmpIPredicate::sle;
    break;
  case ComparePredicate::gt:
    ip = arith::CmpIPredicate::sgt;
    break;
  case ComparePredicate::ge:
    ip = arith::CmpIPredicate::sge;
    break;
  }
  return arith::CmpIOp::create(b, loc, orderFor(x.getType(), ip), x, y);
}

template <typename FloatOp, typename IntOp>
Value numeric(OpBuilder &b, Location loc, Value x, Value y) {
  if (isFloat(x.getType()))
    return FloatOp::create(b, loc, x, y);
  return IntOp::create(b, loc, x, y);
}

/// Like numeric, with `UnsignedOp` for unsigned integers.
template <typename FloatOp, typename SignedOp, typename UnsignedOp>
Value ordered(OpBuilder &b, Location loc, Value x, Value y) {
  if (x.getType().isUnsignedInteger())
    return UnsignedOp::create(b, loc, x, y);
  return numeric<FloatOp, SignedOp>(b, loc, x, y);
}

Value expMinusOne(OpBuilder &b, Location loc, Value x) {
  return math::ExpM1Op::create(b, loc, x);
}

} // namespace

Value kiln::lowering::buildElementwiseScalar(Operation *op, OpBuilder &b,
                                             Location loc, ValueRange args) {
  Value x = args.empty() ? Value() : args[0];
  Value y = args.size() > 1 ? args[1] : Value();
  auto c = [&](double v) { return constantLike(b, loc, x, v); };
  return llvm::TypeSwitch<Operation *, Value>(op)
      .Case([&](NegOp) -> Value {
        if (isFloat(x.getType()))
          return arith::NegFOp::create(b, loc, x);
        return arith::SubIOp::create(b, loc, c(0), x);
      })
      .Case([&](AbsOp) -> Value {
        if (isFloat(x.getType()))
          return math::AbsFOp::create(b, loc, x);
        if (x.getType().isUnsignedInteger())
          return x;
        return math::AbsIOp::create(b, loc, x);
      })
      .Case([&](SignOp) { return signOf(b, loc, x); })
      .Case([&](ReluOp) -> Value {
        if (isFloat(x.getType()))
          return arith::MaximumFOp::create(b, loc, x, c(0));
        if (x.getType().isUnsignedInteger())
          return x;
        return arith::MaxSIOp::create(b, loc, x, c(0));
      })
      .Case([&](ExpOp) { return math::ExpOp::create(b, loc, x); })
      .Case([&](LogOp) { return math::LogOp::create(b, loc, x); })
      .Case([&](SqrtOp) { return math::SqrtOp::create(b, loc, x); })
      .Case([&](RsqrtOp) { return math::RsqrtOp::create(b, loc, x); })
      .Case(
          [&](ReciprocalOp) { return arith::DivFOp::create(b, loc, c(1), x); })
      .Case([&](TanhOp) { return math::TanhOp::create(b, loc, x); })
      .Case([&](SigmoidOp) -> Value {
        Value e = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, x));
        return arith::DivFOp::create(b, loc, c(1),
                                     arith::AddFOp::create(b, loc, c(1), e));
      })
      .Case([&](SoftplusOp) -> Value {
        // max(x, 0) + log1p(exp(-|x|)) never overflows.
        Value e = math::ExpOp::create(
            b, loc,
            arith::NegFOp::create(b, loc, math::AbsFOp::create(b, loc, x)));
        return arith::AddFOp::create(b, loc,
                                     arith::MaximumFOp::create(b, loc, x, c(0)),
                                     math::Log1pOp::create(b, loc, e));
      })
      .Case([&](SoftsignOp) -> Value {
        Value d = arith::AddFOp::create(b, loc, c(1),
                                        math::AbsFOp::create(b, loc, x));
        return arith::DivFOp::create(b, loc, x, d);
      })
      .Case([&](ErfOp) { return math::ErfOp::create(b, loc, x); })
      .Case([&](SinOp) { return math::SinOp::create(b, loc, x); })
      .Case([&](CosOp) { return math::CosOp::create(b, loc, x); })
      .Case([&](TanOp) { return math::TanOp::create(b, loc, x); })
      .Case([&](AsinOp) { return math::AsinOp::create(b, loc, x); })
      .Case([&](AcosOp) { return math::AcosOp::create(b, loc, x); })
      .Case([&](AtanOp) { return math::AtanOp::create(b, loc, x); })
      .Case([&](SinhOp) { return math::SinhOp::create(b, loc, x); })
      .Case([&](CoshOp) { return math::CoshOp::create(b, loc, x); })
      .Case([&](AsinhOp) { return math::AsinhOp::create(b, loc, x); })
      .Case([&](AcoshOp) { return math::AcoshOp::create(b, loc, x); })
      .Case([&](AtanhOp) { return math::AtanhOp::create(b, loc, x); })
      .Case([&](FloorOp) { return math::FloorOp::create(b, loc, x); })
      .Case([&](CeilOp) { return math::CeilOp::create(b, loc, x); })
      .Case([&](RoundOp) { return math::RoundEvenOp::create(b, loc, x); })
      .Case([&](HardSwishOp) -> Value {
        Value t = arith::AddFOp::create(
            b, loc, arith::DivFOp::create(b, loc, x, c(6)), c(0.5));
        return arith::MulFOp::create(b, loc, x, clamp01(b, loc, t));
      })
      .Case([&](NotOp) -> Value {
        unsigned width = x.getType().getIntOrFloatBitWidth();
        Value ones = arith::ConstantOp::create(
            b, loc, b.getIntegerAttr(x.getType(), APInt::getAllOnes(width)));
        return arith::XOrIOp::create(b, loc, x, ones);
      })
      .Case([&](GeluOp g) -> Value {
        Value half = arith::MulFOp::create(b, loc, x, c(0.5));
        Value inner;
        if (g.getApproximate() == GeluApproximation::tanh) {
          Value cube = arith::MulFOp::create(
              b, loc, x, arith::MulFOp::create(b, loc, x, x));
          Value poly = arith::AddFOp::create(
              b, loc, x, arith::MulFOp::create(b, loc, cube, c(0.044715)));
          inner = math::TanhOp::create(
              b, loc,
              arith::MulFOp::create(b, loc, poly, c(0.7978845608028654)));
        } else {
          inner = math::ErfOp::create(
              b, loc, arith::MulFOp::create(b, loc, x, c(M_SQRT1_2)));
        }
        return arith::MulFOp::create(
            b, loc, half, arith::AddFOp::create(b, loc, c(1), inner));
      })
      .Case([&](LeakyReluOp l) -> Value {
        Value scaled =
            arith::MulFOp::create(b, loc, x, c(attrValue(l.getAlphaAttr())));
        return selectOf(b, loc,
                        cmpf(b, loc, arith::CmpFPredicate::OGE, x, c(0)), x,
                        scaled);
      })
      .Case([&](EluOp e) -> Value {
        Value neg = arith::MulFOp::create(
            b, loc, c(attrValue(e.getAlphaAttr())), expMinusOne(b, loc, x));
        return selectOf(
            b, loc, cmpf(b, loc, arith::CmpFPredicate::OGT, x, c(0)), x, neg);
      })
      .Case([&](CeluOp e) -> Value {
        double alpha = attrValue(e.getAlphaAttr());
        Value neg = arith::MulFOp::create(
            b, loc, c(alpha),
            expMinusOne(b, loc, arith::DivFOp::create(b, loc, x, c(alpha))));
        return arith::AddFOp::create(
            b, loc, arith::MaximumFOp::create(b, loc, x, c(0)),
            arith::MinimumFOp::create(b, loc, neg, c(0)));
      })
      .Case([&](SeluOp s) -> Value {
        Value neg = arith::MulFOp::create(
            b, loc, c(attrValue(s.getAlphaAttr())), expMinusOne(b, loc, x));
        Value v = selectOf(
            b, loc, cmpf(b, loc, arith::CmpFPredicate::OGT, x, c(0)), x, neg);
        return arith::MulFOp::create(b, loc, v, c(attrValue(s.getGammaAttr())));
      })
      .Case([&](HardSigmoidOp h) -> Value {
        Value v = arith::AddFOp::create(
            b, loc,
            arith::MulFOp::create(b, loc, x, c(attrValue(h.getAlphaAttr()))),
            c(attrValue(h.getBetaAttr())));
        return clamp01(b, loc, v);
      })
      .Case([&](ThresholdedReluOp t) -> Value {
        Value above = cmpf(b, loc, arith::CmpFPredicate::OGT, x,
                           c(attrValue(t.getAlphaAttr())));
        return selectOf(b, loc, above, x, c(0));
      })
      .Case([&](IsNanOp) {
        return cmpf(b, loc, arith::CmpFPredicate::UNO, x, x);
      })
      .Case([&](IsInfOp) -> Value {
        return cmpf(b, loc, arith::CmpFPredicate::OEQ,
                    math::AbsFOp::create(b, loc, x), c(INFINITY));
      })
      .Case([&](AddOp) {
        return numeric<arith::AddFOp, arith::AddIOp>(b, loc, x, y);
      })
      .Case([&](SubOp) {
        return numeric<arith::SubFOp, arith::SubIOp>(b, loc, x, y);
      })
      .Case([&](MulOp) {
        return numeric<arith::MulFOp, arith::MulIOp>(b, loc, x, y);
      })
      .Case([&](DivOp) {
        return ordered<arith::DivFOp, arith::DivSIOp, arith::DivUIOp>(b, loc, x,
                                                                      y);
      })
      .Case([&](MaxOp) {
        return ordered<arith::MaximumFOp, arith::MaxSIOp, arith::MaxUIOp>(
            b, loc, x, y);
      })
      .Case([&](MinOp) {
        return ordered<arith::MinimumFOp, arith::MinSIOp, arith::MinUIOp>(
            b, loc, x, y);
      })
      .Case([&](PowOp) -> Value {
        if (isFloat(x.getType()))
          return math::PowFOp::create(b, loc, x, y);
        return integerPower(b, loc, x, y);
      })
      .Case([&](RemOp r) -> Value {
        if (!r.getFmod())
          return floorMod(b, loc, x, y);
        return ordered<arith::RemFOp, arith::RemSIOp, arith::RemUIOp>(b, loc, x,
                                                                      y);
      })
      .Case([&](AndOp) { return arith::AndIOp::create(b, loc, x, y); })
      .Case([&](OrOp) { return arith::OrIOp::create(b, loc, x, y); })
      .Case([&](XorOp) { return arith::XOrIOp::create(b, loc, x, y); })
      .Case([&](ShiftLeftOp) -> Value {
        // The amount compares as unsigned: a negative one is out of range.
        Value width = c(x.getType().getIntOrFloatBitWidth());
        Value inRange =
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, y, width);
        return selectOf(b, loc, inRange, arith::ShLIOp::create(b, loc, x, y),
                        c(0));
      })
      .Case([&](ShiftRightOp) -> Value {
        unsigned bits = x.getType().getIntOrFloatBitWidth();
        Value inRange = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                              y, c(bits));
        if (x.getType().isUnsignedInteger())
          return selectOf(b, loc, inRange, arith::ShRUIOp::create(b, loc, x, y),
                          c(0));
        // Out of range, a signed shift fills every bit with the sign.
        Value amount = selectOf(b, loc, inRange, y, c(bits - 1));
        return arith::ShRSIOp::create(b, loc, x, amount);
      })
      .Case([&](CompareOp cmp) {
        return compareScalars(b, loc, cmp.getPredicate(), x, y);
      })
      .Case(
          [&](SelectOp) { return selectOf(b, loc, args[0], args[1], args[2]); })
      .Case([&](BitcastOp bitcast) -> Value {
        Type to =
            mlir::cast<RankedTensorType>(bitcast.getType()).getElementType();
        // Between integers castScalar keeps the bits: a boolean (one byte)
        // zero-extends, a byte becomes a boolean by its bits being non-zero.
        if (isa<IntegerType>(x.getType()) && isa<IntegerType>(to))
          return castScalar(b, loc, x, to);
        // Float <-> integer of one width; the integer types are made
        // signless at the end of the lowering, as arith.bitcast wants.
        return arith::BitcastOp::create(b, loc, to, x);
      })
      .Case([&](CastOp castOp) {
        return castScalar(
            b, loc, x,
            mlir::cast<RankedTensorType>(castOp.getType()).getElementType(),
            castOp.getSaturate(), castOp.getRoundMode());
      })
      .Default([](Operation *) { return Value(); });
}

namespace {

/// Any op with the Elementwise trait whose scalar form is known.
struct LowerElementwise : RewritePattern {
  LowerElementwise(MLIRContext *context)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/1, context) {}

  LogicalResult matchAndRewrite(Operation *op,
                                PatternRewriter &r) const override {
    if (!isa<KilnDialect>(op->getDialect()) ||
        !op->hasTrait<OpTrait::Elementwise>() || op->getNumResults() != 1)
      return failure();
    auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
    bool supported = true;
    Value result =
        buildMap(r, op->getLoc(), op->getOperands(), resultType,
                 [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
                   Value v = buildElementwiseScalar(op, b, loc, args);
                   if (!v) {
                     supported = false;
                     return args.front();
                   }
                   return v;
                 });
    if (!supported)
      return r.notifyMatchFailure(op, "no scalar form");
    r.replaceOp(op, result);
    return success();
  }
};

} // namespace

void kiln::lowering::populateElementwiseLoweringPatterns(
    RewritePatternSet &patterns) {
  patterns.add<LowerElementwise>(patterns.getContext());
}
