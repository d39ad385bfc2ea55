//===- NarrowTypes.cpp - scalar code of the float8/float4/int4/int2 types -===//
//
// The narrow types are stored one element per byte, the element's bits in the
// low bits (ml_dtypes' layout, which ONNX's and PyTorch's Python packages
// use). No target computes on them: kiln.cast converts them to and from f32
// (floats) or i32 (integers) with the integer code below, built on the byte
// (reached through an unrealized cast), and storeNarrowAsBytes then rewrites
// every narrow type to i8, which leaves those casts as identities to drop.
//
// The conversions follow ONNX's Cast (and its reference, ml_dtypes):
// rounding to nearest even, saturating or not; the f8E8M0FNU rounding modes;
// floats to 4- and 2-bit integers by truncation, 0 when out of range.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "mlir/IR/AttrTypeSubElements.h"
#include "mlir/IR/BuiltinOps.h"

#include "llvm/ADT/bit.h"
#include <cmath>

using namespace mlir;
using namespace kiln;
using namespace kiln::lowering;

namespace {

/// Where a narrow float keeps its special values.
enum class Specials {
  IEEE,      // e5m2: infinities and NaNs at the largest exponent.
  NanOnly,   // e4m3fn: NaN is S.1111.111; no infinity.
  Unsigned0, // the fnuz types: NaN is 1000.0000; no infinity, no -0.
  None,      // f4e2m1fn: every code is finite; NaN and infinity saturate.
};

/// A sign-exponent-mantissa float of `exponent` + `mantissa` + 1 bits.
struct MiniFloat {
  unsigned exponent, mantissa;
  int bias;
  Specials specials;

  unsigned signShift() const { return exponent + mantissa; }
  uint32_t magnitudeMask() const { return (1u << signShift()) - 1; }
  /// The code of the largest finite magnitude.
  uint32_t maxCode() const {
    switch (specials) {
    case Specials::IEEE:
      return (((1u << exponent) - 2) << mantissa) | ((1u << mantissa) - 1);
    case Specials::NanOnly:
      return magnitudeMask() - 1;
    case Specials::Unsigned0:
    case Specials::None:
      return magnitudeMask();
    }
    return 0;
  }
  /// The f32 bits of the largest finite value.
  uint32_t maxFiniteBits() const {
    uint32_t code = maxCode();
    int e = static_cast<int>(code >> mantissa) - bias;
    double m = 1.0 + double(code & ((1u << mantissa) - 1)) / (1u << mantissa);
    return llvm::bit_cast<uint32_t>(static_cast<float>(std::ldexp(m, e)));
  }
};

std::optional<MiniFloat> miniFloatOf(Type type) {
  if (isa<Float8E4M3FNType>(type))
    return MiniFloat{4, 3, 7, Specials::NanOnly};
  if (isa<Float8E4M3FNUZType>(type))
    return MiniFloat{4, 3, 8, Specials::Unsigned0};
  if (isa<Float8E5M2Type>(type))
    return MiniFloat{5, 2, 15, Specials::IEEE};
  if (isa<Float8E5M2FNUZType>(type))
    return MiniFloat{5, 2, 16, Specials::Unsigned0};
  if (isa<Float4E2M1FNType>(type))
    return MiniFloat{2, 1, 1, Specials::None};
  return std::nullopt;
}

/// Integer code on i32 (and the i1 conditions it selects on).
struct Bits {
  OpBuilder &b;
  Location loc;

  Type i32() { return b.getI32Type(); }
  Value c(int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v));
  }
  Value band(Value x, Value y) { return arith::AndIOp::create(b, loc, x, y); }
  Value bor(Value x, Value y) { return arith::OrIOp::create(b, loc, x, y); }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return arith::SubIOp::create(b, loc, x, y); }
  Value shl(Value x, Value y) { return arith::ShLIOp::create(b, loc, x, y); }
  Value shr(Value x, Value y) { return arith::ShRUIOp::create(b, loc, x, y); }
  Value cmp(arith::CmpIPredicate p, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, p, x, y);
  }
  Value eq(Value x, Value y) { return cmp(arith::CmpIPredicate::eq, x, y); }
  Value ugt(Value x, Value y) { return cmp(arith::CmpIPredicate::ugt, x, y); }
  Value select(Value cond, Value x, Value y) {
    return arith::SelectOp::create(b, loc, cond, x, y);
  }
  Value boolOr(Value x, Value y) { return arith::OrIOp::create(b, loc, x, y); }
  Value boolAnd(Value x, Value y) {
    return arith::AndIOp::create(b, loc, x, y);
  }
};

/// The byte holding a narrow scalar, and back.
Value storageOf(OpBuilder &b, Location loc, Value narrow) {
  return UnrealizedConversionCastOp::create(b, loc, b.getI8Type(), narrow)
      .getResult(0);
}
Value narrowOf(OpBuilder &b, Location loc, Value byte, Type narrow) {
  return UnrealizedConversionCastOp::create(b, loc, narrow, byte).getResult(0);
}

Value toF32(OpBuilder &b, Location loc, Value bits) {
  return arith::BitcastOp::create(b, loc, b.getF32Type(), bits);
}

/// The f32 value of a narrow float's code `code` (i32, high bits zero).
Value decodeMiniFloat(Bits &k, const MiniFloat &f, Value code) {
  Value sign = k.shl(k.shr(code, k.c(f.signShift())), k.c(31));
  Value magnitude = k.band(code, k.c(f.magnitudeMask()));
  Value exponent = k.shr(magnitude, k.c(f.mantissa));
  Value mantissa = k.band(magnitude, k.c((1 << f.mantissa) - 1));
  // Normal: the fields moved to f32's places, the exponent rebiased.
  Value normal = k.add(k.shl(magnitude, k.c(23 - f.mantissa)),
                       k.c(int64_t(127 - f.bias) << 23));
  // Subnormal: mantissa * 2^(1 - bias - mantissa bits), exactly.
  Value scaled = arith::MulFOp::create(
      k.b, k.loc,
      arith::UIToFPOp::create(k.b, k.loc, k.b.getF32Type(), mantissa),
      arith::ConstantOp::create(
          k.b, k.loc,
          k.b.getF32FloatAttr(std::ldexp(1.0f, 1 - f.bias - f.mantissa))));
  Value subnormal =
      arith::BitcastOp::create(k.b, k.loc, k.i32(), scaled).getResult();
  Value bits = k.bor(k.select(k.eq(exponent, k.c(0)), subnormal, normal), sign);
  Value nan = k.bor(k.c(0x7FC00000), sign);
  switch (f.specials) {
  case Specials::IEEE: {
    Value top = k.eq(exponent, k.c((1 << f.exponent) - 1));
    Value special =
        k.select(k.eq(mantissa, k.c(0)), k.bor(k.c(0x7F800000), sign), nan);
    bits = k.select(top, special, bits);
    break;
  }
  case Specials::NanOnly:
    bits = k.select(k.eq(magnitude, k.c(f.magnitudeMask())), nan, bits);
    break;
  case Specials::Unsigned0:
    bits = k.select(k.eq(code, k.c(1 << f.signShift())), k.c(0x7FC00000), bits);
    break;
  case Specials::None:
    break;
  }
  return toF32(k.b, k.loc, bits);
}

/// The code (i32) of f32 `x` in the narrow float `f`.
Value encodeMiniFloat(Bits &k, const MiniFloat &f, Value x, bool saturate) {
  Value u = arith::BitcastOp::create(k.b, k.loc, k.i32(), x);
  Value sign = k.shr(u, k.c(31));
  Value a = k.band(u, k.c(0x7FFFFFFF));
  Value isNan = k.ugt(a, k.c(0x7F800000));
  // Without infinities or NaNs to go to, f4e2m1fn always saturates.
  if (saturate || f.specials == Specials::None)
    a = arith::MinUIOp::create(k.b, k.loc, a, k.c(f.maxFiniteBits()));
  int shift = 23 - f.mantissa;
  int minNormal = 128 - f.bias; // f32's biased exponent of the least normal
  Value exponent = k.shr(a, k.c(23));
  // Normal: round the f32 bits to `mantissa` bits (to nearest, ties to even;
  // a carry moves into the exponent), then rebias the exponent.
  Value rounded = k.add(k.add(a, k.c((1 << (shift - 1)) - 1)),
                        k.band(k.shr(a, k.c(shift)), k.c(1)));
  Value normal = k.sub(k.shr(rounded, k.c(shift)),
                       k.c(int64_t(127 - f.bias) << f.mantissa));
  // Subnormal: the significand shifted to the least subnormal's place,
  // rounded to nearest even (reaching 1 << mantissa makes the least normal).
  Value significand = k.bor(k.band(a, k.c(0x7FFFFF)), k.c(0x800000));
  Value amount = arith::MinSIOp::create(
      k.b, k.loc, k.add(k.sub(k.c(minNormal), exponent), k.c(shift)), k.c(31));
  Value q = k.shr(significand, amount);
  Value remainder = k.band(significand, k.sub(k.shl(k.c(1), amount), k.c(1)));
  Value half = k.shl(k.c(1), k.sub(amount, k.c(1)));
  Value roundUp = k.boolOr(
      k.ugt(remainder, half),
      k.boolAnd(k.eq(remainder, half), k.eq(k.band(q, k.c(1)), k.c(1))));
  Value subnormal =
      k.add(q, arith::ExtUIOp::create(k.b, k.loc, k.i32(), roundUp));
  Value isNormal = k.cmp(arith::CmpIPredicate::uge, exponent, k.c(minNormal));
  Value code = k.select(isNormal, normal, subnormal);
  Value overflow = k.ugt(code, k.c(f.maxCode()));
  Value signBit = k.shl(sign, k.c(f.signShift()));
  switch (f.specials) {
  case Specials::IEEE: {
    Value inf = k.c(((1 << f.exponent) - 1) << f.mantissa);
    Value nan = k.c(f.magnitudeMask() - 1); // 0x7E, as ml_dtypes writes it
    code = k.select(isNan, nan, k.select(overflow, inf, code));
    return k.bor(code, signBit);
  }
  case Specials::NanOnly:
    code = k.select(k.boolOr(isNan, overflow), k.c(f.magnitudeMask()), code);
    return k.bor(code, signBit);
  case Specials::Unsigned0: {
    Value nan = k.c(1 << f.signShift());
    Value signed_ = k.select(k.eq(code, k.c(0)), k.c(0), k.bor(code, signBit));
    return k.select(k.boolOr(isNan, overflow), nan, signed_);
  }
  case Specials::None:
    // NaN becomes a zero of the opposite sign, as ml_dtypes converts it.
    return k.select(isNan, k.shl(k.sub(k.c(1), sign), k.c(f.signShift())),
                    k.bor(code, signBit));
  }
  return code;
}

/// f8E8M0FNU: an exponent alone, 2^(code - 127); 0xFF is NaN.
Value decodeE8M0(Bits &k, Value code) {
  Value bits =
      k.select(k.eq(code, k.c(0)), k.c(0x00400000), k.shl(code, k.c(23)));
  return toF32(k.b, k.loc,
               k.select(k.eq(code, k.c(0xFF)), k.c(0x7FC00000), bits));
}

Value encodeE8M0(Bits &k, Value x, bool saturate, RoundMode mode) {
  Value u = arith::BitcastOp::create(k.b, k.loc, k.i32(), x);
  Value exponent = k.band(k.shr(u, k.c(23)), k.c(0xFF));
  Value special = k.eq(exponent, k.c(0xFF));
  Value roundUp;
  auto nonZero = [&](int64_t mask) {
    return k.cmp(arith::CmpIPredicate::ne, k.band(u, k.c(mask)), k.c(0));
  };
  switch (mode) {
  case RoundMode::up:
    roundUp = nonZero(0x7FFFFF);
    break;
  case RoundMode::down:
    roundUp = arith::ConstantOp::create(k.b, k.loc, k.b.getBoolAttr(false));
    break;
  case RoundMode::nearest: {
    // The guard bit, and any bit below it or an odd exponent to break ties.
    Value lsb = k.ugt(exponent, k.c(0));
    roundUp = k.boolAnd(
        nonZero(0x400000),
        k.boolOr(k.boolOr(nonZero(0x200000), nonZero(0x1FFFFF)), lsb));
    break;
  }
  }
  if (saturate)
    roundUp = k.boolAnd(roundUp,
                        k.cmp(arith::CmpIPredicate::ne, exponent, k.c(0xFE)));
  Value code =
      k.add(exponent, arith::ExtUIOp::create(k.b, k.loc, k.i32(), roundUp));
  return k.select(special, k.c(0xFF), code);
}

/// `value` (any float, integer or boolean scalar) as f32.
Value asF32(OpBuilder &b, Location loc, Value value) {
  Type type = value.getType();
  Type f32 = b.getF32Type();
  if (type.isF32())
    return value;
  if (auto f = dyn_cast<FloatType>(type)) {
    if (f.getWidth() < 32)
      return arith::ExtFOp::create(b, loc, f32, value);
    return arith::TruncFOp::create(b, loc, f32, value);
  }
  if (isUnsignedLike(type))
    return arith::UIToFPOp::create(b, loc, f32, value);
  return arith::SIToFPOp::create(b, loc, f32, value);
}

} // namespace

Value kiln::lowering::widenNarrow(OpBuilder &b, Location loc, Value value) {
  Type type = value.getType();
  Bits k{b, loc};
  Value byte = storageOf(b, loc, value);
  if (auto integer = dyn_cast<IntegerType>(type)) {
    unsigned spare = 8 - integer.getWidth();
    Value shift = arith::ConstantOp::create(b, loc, b.getI8IntegerAttr(spare));
    if (integer.isUnsigned())
      return arith::ExtUIOp::create(
          b, loc, k.i32(),
          arith::ShRUIOp::create(
              b, loc, arith::ShLIOp::create(b, loc, byte, shift), shift));
    return arith::ExtSIOp::create(
        b, loc, k.i32(),
        arith::ShRSIOp::create(
            b, loc, arith::ShLIOp::create(b, loc, byte, shift), shift));
  }
  Value code = arith::ExtUIOp::create(b, loc, k.i32(), byte);
  if (isa<Float8E8M0FNUType>(type))
    return decodeE8M0(k, code);
  std::optional<MiniFloat> f = miniFloatOf(type);
  assert(f && "not a narrow type");
  return decodeMiniFloat(k, *f, k.band(code, k.c((2u << f->signShift()) - 1)));
}

Value kiln::lowering::narrowScalar(OpBuilder &b, Location loc, Value value,
                                   Type narrow, bool saturate,
                                   RoundMode roundMode) {
  Bits k{b, loc};
  Type from = value.getType();
  Value code;
  if (auto integer = dyn_cast<IntegerType>(narrow)) {
    unsigned width = integer.getWidth();
    int64_t lowest = integer.isUnsigned() ? 0 : -(int64_t(1) << (width - 1));
    int64_t highest = integer.isUnsigned() ? (int64_t(1) << width) - 1
                                           : (int64_t(1) << (width - 1)) - 1;
    if (isFloat(from)) {
      // Truncation toward zero; out of range (or NaN) gives 0.
      Value x = from.isF64() ? value : asF32(b, loc, value);
      auto bound = [&](double v) {
        return scalarConstant(b, loc, x.getType(), v);
      };
      Value inRange =
          k.boolAnd(arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, x,
                                          bound(double(lowest - 1))),
                    arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, x,
                                          bound(double(highest + 1))));
      x = arith::SelectOp::create(b, loc, inRange, x, bound(0));
      code = arith::FPToSIOp::create(b, loc, k.i32(), x);
    } else if (from.getIntOrFloatBitWidth() < 32) {
      // Other integers keep their low bits, as integer narrowing does.
      code = isUnsignedLike(from)
                 ? arith::ExtUIOp::create(b, loc, k.i32(), value).getResult()
                 : arith::ExtSIOp::create(b, loc, k.i32(), value).getResult();
    } else {
      code = from.isInteger(32)
                 ? value
                 : arith::TruncIOp::create(b, loc, k.i32(), value).getResult();
    }
    code = k.band(code, k.c((1 << width) - 1));
  } else if (isa<Float8E8M0FNUType>(narrow)) {
    code = encodeE8M0(k, asF32(b, loc, value), saturate, roundMode);
  } else {
    std::optional<MiniFloat> f = miniFloatOf(narrow);
    assert(f && "not a narrow type");
    code = encodeMiniFloat(k, *f, asF32(b, loc, value), saturate);
  }
  Value byte = arith::TruncIOp::create(b, loc, b.getI8Type(), code);
  return narrowOf(b, loc, byte, narrow);
}

void kiln::lowering::storeNarrowAsBytes(Operation *root) {
  MLIRContext *context = root->getContext();
  Type i8 = IntegerType::get(context, 8);
  AttrTypeReplacer replacer;
  replacer.addReplacement([&](Type type) -> std::optional<Type> {
    if (isNarrowType(type))
      return i8;
    return std::nullopt;
  });
  // Constants keep their bytes: a dense attribute stores a narrow element in
  // one byte, its bits in the low bits, as the i8 storage does.
  replacer.addReplacement(
      [&](DenseIntOrFPElementsAttr attr) -> std::optional<Attribute> {
        if (!isNarrowType(attr.getElementType()))
          return std::nullopt;
        auto type = RankedTensorType::get(attr.getType().getShape(), i8);
        return DenseElementsAttr::getFromRawBuffer(type, attr.getRawData());
      });
  replacer.recursivelyReplaceElementsIn(root, /*replaceAttrs=*/true,
                                        /*replaceLocs=*/false,
                                        /*replaceTypes=*/true);
  // The casts to and from the bytes are now identities.
  root->walk([](UnrealizedConversionCastOp cast) {
    if (cast->getNumOperands() == 1 && cast->getNumResults() == 1 &&
        cast.getOperand(0).getType() == cast.getResult(0).getType()) {
      cast.getResult(0).replaceAllUsesWith(cast.getOperand(0));
      cast.erase();
    }
  });
}
