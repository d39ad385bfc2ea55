//===- KilnFold.cpp - constant folding of kiln ops ------------------------===//
//
// Folders evaluate ops whose operands are constants (this is how the importer
// turns the shape sub-graphs of dynamic-axis exports into constants) and
// remove ops that do nothing (identity transposes, reshapes to the same type).
// Only tensors of at most kMaxFoldElements elements are folded, so compile
// time never explodes on large constants.
//
//===----------------------------------------------------------------------===//

#include "kiln/KilnOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/APInt.h"

#include <cmath>

using namespace mlir;
using namespace kiln;

namespace {

constexpr int64_t kMaxFoldElements = 1 << 16;

DenseElementsAttr foldableConstant(Attribute attr) {
  auto dense = dyn_cast_or_null<DenseElementsAttr>(attr);
  if (!dense || dense.getNumElements() > kMaxFoldElements)
    return nullptr;
  // Integers are evaluated as int64_t, which holds every value but uint64's;
  // the narrow types are the lowering's alone.
  if (dense.getElementType().isUnsignedInteger(64) ||
      isNarrowType(dense.getElementType()))
    return nullptr;
  return dense;
}

bool isFloatTensor(ShapedType type) {
  return isa<FloatType>(type.getElementType());
}

double toDouble(APFloat value) {
  bool lost = false;
  value.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
  return value.convertToDouble();
}

APFloat fromDouble(double value, Type elementType) {
  APFloat result(value);
  bool lost = false;
  result.convert(cast<FloatType>(elementType).getFloatSemantics(),
                 APFloat::rmNearestTiesToEven, &lost);
  return result;
}

SmallVector<double> floatValues(DenseElementsAttr dense) {
  SmallVector<double> values;
  values.reserve(dense.getNumElements());
  for (APFloat value : dense.getValues<APFloat>())
    values.push_back(toDouble(value));
  return values;
}

/// Whether `type`'s integers extend with zeros (booleans and unsigned).
bool zeroExtends(Type type) {
  return type.isInteger(1) || type.isUnsignedInteger();
}

/// Integers (and booleans) as 64-bit values; unsigned ones (never uint64:
/// see foldableConstant) are zero-extended.
SmallVector<int64_t> intValues(DenseElementsAttr dense) {
  SmallVector<int64_t> values;
  values.reserve(dense.getNumElements());
  bool zext = zeroExtends(dense.getElementType());
  for (APInt value : dense.getValues<APInt>())
    values.push_back(zext ? static_cast<int64_t>(value.getZExtValue())
                          : value.getSExtValue());
  return values;
}

DenseElementsAttr makeFloats(ShapedType type, ArrayRef<double> values) {
  SmallVector<APFloat> elements;
  elements.reserve(values.size());
  for (double value : values)
    elements.push_back(fromDouble(value, type.getElementType()));
  return DenseElementsAttr::get(type, elements);
}

DenseElementsAttr makeInts(ShapedType type, ArrayRef<int64_t> values) {
  unsigned width = type.getElementType().getIntOrFloatBitWidth();
  SmallVector<APInt> elements;
  elements.reserve(values.size());
  for (int64_t value : values)
    elements.push_back(APInt(width, static_cast<uint64_t>(value),
                             /*isSigned=*/width > 1, /*implicitTrunc=*/true));
  return DenseElementsAttr::get(type, elements);
}

/// Row-major strides of a shape.
SmallVector<int64_t> stridesOf(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

/// Builds a result whose element `i` is `source[sourceIndex(i)]`.
DenseElementsAttr
permuteElements(DenseElementsAttr source, ShapedType resultType,
                llvm::function_ref<int64_t(ArrayRef<int64_t>)> sourceIndex) {
  ArrayRef<int64_t> shape = resultType.getShape();
  SmallVector<int64_t> index(shape.size(), 0);
  int64_t count = resultType.getNumElements();
  SmallVector<int64_t> picks;
  picks.reserve(count);
  for (int64_t linear = 0; linear < count; ++linear) {
    picks.push_back(sourceIndex(index));
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      if (++index[d] < shape[d])
        break;
      index[d] = 0;
    }
  }
  if (isFloatTensor(resultType)) {
    auto values = llvm::to_vector(source.getValues<APFloat>());
    SmallVector<APFloat> out;
    out.reserve(count);
    for (int64_t pick : picks)
      out.push_back(values[pick]);
    return DenseElementsAttr::get(resultType, out);
  }
  auto values = llvm::to_vector(source.getValues<APInt>());
  SmallVector<APInt> out;
  out.reserve(count);
  for (int64_t pick : picks)
    out.push_back(values[pick]);
  return DenseElementsAttr::get(resultType, out);
}

template <typename FloatFn>
OpFoldResult foldUnaryFloat(Attribute operand, ShapedType type, FloatFn fn) {
  DenseElementsAttr dense = foldableConstant(operand);
  if (!dense || !isFloatTensor(type))
    return {};
  SmallVector<double> values = floatValues(dense);
  for (double &value : values)
    value = fn(value);
  return makeFloats(type, values);
}

template <typename FloatFn, typename IntFn>
OpFoldResult foldUnaryNumeric(Attribute operand, ShapedType type, FloatFn ffn,
                              IntFn ifn) {
  DenseElementsAttr dense = foldableConstant(operand);
  if (!dense)
    return {};
  if (isFloatTensor(type))
    return foldUnaryFloat(operand, type, ffn);
  SmallVector<int64_t> values = intValues(dense);
  for (int64_t &value : values)
    value = ifn(value);
  return makeInts(type, values);
}

/// Folds a binary op; `ifn` returns nullopt where integer evaluation is
/// undefined (division by zero), which cancels the fold.
template <typename FloatFn, typename IntFn>
OpFoldResult foldBinary(Attribute lhsAttr, Attribute rhsAttr,
                        ShapedType resultType, FloatFn ffn, IntFn ifn) {
  DenseElementsAttr lhs = foldableConstant(lhsAttr);
  DenseElementsAttr rhs = foldableConstant(rhsAttr);
  if (!lhs || !rhs)
    return {};
  if (isFloatTensor(lhs.getType())) {
    SmallVector<double> a = floatValues(lhs), b = floatValues(rhs), out;
    for (auto [x, y] : llvm::zip(a, b))
      out.push_back(ffn(x, y));
    return makeFloats(resultType, out);
  }
  SmallVector<int64_t> a = intValues(lhs), b = intValues(rhs), out;
  for (auto [x, y] : llvm::zip(a, b)) {
    std::optional<int64_t> value = ifn(x, y);
    if (!value)
      return {};
    out.push_back(*value);
  }
  return makeInts(resultType, out);
}

bool isSplatOf(Attribute attr, double value) {
  auto dense = dyn_cast_or_null<DenseElementsAttr>(attr);
  if (!dense || !dense.isSplat())
    return false;
  if (isFloatTensor(dense.getType()))
    return toDouble(dense.getSplatValue<APFloat>()) == value;
  APInt splat = dense.getSplatValue<APInt>();
  int64_t bits = zeroExtends(dense.getElementType())
                     ? static_cast<int64_t>(splat.getZExtValue())
                     : splat.getSExtValue();
  return bits == static_cast<int64_t>(value);
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

} // namespace

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValueAttr(); }

//===----------------------------------------------------------------------===//
// Unary elementwise.
//===----------------------------------------------------------------------===//

#define KILN_FOLD_UNARY_FLOAT(OP, EXPR)                                        \
  OpFoldResult OP::fold(FoldAdaptor adaptor) {                                 \
    return foldUnaryFloat(adaptor.getInput(), getType(),                       \
                          [&](double x) { return EXPR; });                     \
  }
KILN_FOLD_UNARY_FLOAT(ExpOp, std::exp(x))
KILN_FOLD_UNARY_FLOAT(LogOp, std::log(x))
KILN_FOLD_UNARY_FLOAT(SqrtOp, std::sqrt(x))
KILN_FOLD_UNARY_FLOAT(RsqrtOp, 1.0 / std::sqrt(x))
KILN_FOLD_UNARY_FLOAT(ReciprocalOp, 1.0 / x)
KILN_FOLD_UNARY_FLOAT(TanhOp, std::tanh(x))
KILN_FOLD_UNARY_FLOAT(SigmoidOp, sigmoid(x))
// Written so that exp cannot overflow for large x (softplus(x) ~ x there).
KILN_FOLD_UNARY_FLOAT(SoftplusOp, x > 0 ? x + std::log1p(std::exp(-x))
                                        : std::log1p(std::exp(x)))
KILN_FOLD_UNARY_FLOAT(SoftsignOp, x / (1.0 + std::fabs(x)))
KILN_FOLD_UNARY_FLOAT(ErfOp, std::erf(x))
KILN_FOLD_UNARY_FLOAT(SinOp, std::sin(x))
KILN_FOLD_UNARY_FLOAT(CosOp, std::cos(x))
KILN_FOLD_UNARY_FLOAT(TanOp, std::tan(x))
KILN_FOLD_UNARY_FLOAT(AsinOp, std::asin(x))
KILN_FOLD_UNARY_FLOAT(AcosOp, std::acos(x))
KILN_FOLD_UNARY_FLOAT(AtanOp, std::atan(x))
KILN_FOLD_UNARY_FLOAT(SinhOp, std::sinh(x))
KILN_FOLD_UNARY_FLOAT(CoshOp, std::cosh(x))
KILN_FOLD_UNARY_FLOAT(AsinhOp, std::asinh(x))
KILN_FOLD_UNARY_FLOAT(AcoshOp, std::acosh(x))
KILN_FOLD_UNARY_FLOAT(AtanhOp, std::atanh(x))
KILN_FOLD_UNARY_FLOAT(FloorOp, std::floor(x))
KILN_FOLD_UNARY_FLOAT(CeilOp, std::ceil(x))
KILN_FOLD_UNARY_FLOAT(RoundOp, std::nearbyint(x))
KILN_FOLD_UNARY_FLOAT(HardSwishOp,
                      x *std::max(0.0, std::min(1.0, x / 6.0 + 0.5)))
KILN_FOLD_UNARY_FLOAT(GeluOp,
                      getApproximate() == GeluApproximation::tanh
                          ? 0.5 * x *
                                (1.0 + std::tanh(0.7978845608028654 *
                                                 (x + 0.044715 * x * x * x)))
                          : 0.5 * x * (1.0 + std::erf(x * M_SQRT1_2)))
KILN_FOLD_UNARY_FLOAT(LeakyReluOp,
                      x >= 0 ? x : getAlpha().convertToDouble() * x)
KILN_FOLD_UNARY_FLOAT(EluOp,
                      x > 0 ? x
                            : getAlpha().convertToDouble() * (std::exp(x) - 1))
KILN_FOLD_UNARY_FLOAT(
    CeluOp,
    std::max(0.0, x) +
        std::min(0.0, getAlpha().convertToDouble() *
                          (std::exp(x / getAlpha().convertToDouble()) - 1)))
KILN_FOLD_UNARY_FLOAT(
    SeluOp, getGamma().convertToDouble() *
                (x > 0 ? x : getAlpha().convertToDouble() * (std::exp(x) - 1)))
KILN_FOLD_UNARY_FLOAT(HardSigmoidOp,
                      std::max(0.0,
                               std::min(1.0, getAlpha().convertToDouble() * x +
                                                 getBeta().convertToDouble())))
KILN_FOLD_UNARY_FLOAT(ThresholdedReluOp,
                      x > getAlpha().convertToDouble() ? x : 0.0)
#undef KILN_FOLD_UNARY_FLOAT

OpFoldResult NegOp::fold(FoldAdaptor adaptor) {
  return foldUnaryNumeric(
      adaptor.getInput(), getType(), [](double x) { return -x; },
      [](int64_t x) { return -x; });
}

OpFoldResult AbsOp::fold(FoldAdaptor adaptor) {
  return foldUnaryNumeric(
      adaptor.getInput(), getType(), [](double x) { return std::fabs(x); },
      [](int64_t x) { return x < 0 ? -x : x; });
}

OpFoldResult SignOp::fold(FoldAdaptor adaptor) {
  return foldUnaryNumeric(
      adaptor.getInput(), getType(),
      [](double x) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0); },
      [](int64_t x) -> int64_t { return x > 0 ? 1 : (x < 0 ? -1 : 0); });
}

OpFoldResult ReluOp::fold(FoldAdaptor adaptor) {
  return foldUnaryNumeric(
      adaptor.getInput(), getType(), [](double x) { return x > 0 ? x : 0.0; },
      [](int64_t x) -> int64_t { return x > 0 ? x : 0; });
}

OpFoldResult NotOp::fold(FoldAdaptor adaptor) {
  DenseElementsAttr dense = foldableConstant(adaptor.getInput());
  if (!dense)
    return {};
  bool isBool = getType().getElementType().isInteger(1);
  SmallVector<int64_t> values = intValues(dense);
  for (int64_t &value : values)
    value = isBool ? !value : ~value;
  return makeInts(getType(), values);
}

//===----------------------------------------------------------------------===//
// Binary elementwise.
//===----------------------------------------------------------------------===//

OpFoldResult AddOp::fold(FoldAdaptor adaptor) {
  if (isSplatOf(adaptor.getRhs(), 0))
    return getLhs();
  if (isSplatOf(adaptor.getLhs(), 0))
    return getRhs();
  return foldBinary(
      adaptor.getLhs(), adaptor.getRhs(), getType(),
      [](double a, double b) { return a + b; },
      [](int64_t a, int64_t b) -> std::optional<int64_t> { return a + b; });
}

OpFoldResult SubOp::fold(FoldAdaptor adaptor) {
  if (isSplatOf(adaptor.getRhs(), 0))
    return getLhs();
  return foldBinary(
      adaptor.getLhs(), adaptor.getRhs(), getType(),
      [](double a, double b) { return a - b; },
      [](int64_t a, int64_t b) -> std::optional<int64_t> { return a - b; });
}

OpFoldResult MulOp::fold(FoldAdaptor adaptor) {
  if (isSplatOf(adaptor.getRhs(), 1))
    return getLhs();
  if (isSplatOf(adaptor.getLhs(), 1))
    return getRhs();
  return foldBinary(
      adaptor.getLhs(), adaptor.getRhs(), getType(),
      [](double a, double b) { return a * b; },
      [](int64_t a, int64_t b) -> std::optional<int64_t> { return a * b; });
}

OpFoldResult DivOp::fold(FoldAdaptor adaptor) {
  if (isSplatOf(adaptor.getRhs(), 1))
    return getLhs();
  return foldBinary(
      adaptor.getLhs(), adaptor.getRhs(), getType(),
      [](double a, double b) { return a / b; },
      [](int64_t a, int64_t b) -> std::optional<int64_t> {
        if (b == 0)
          return std::nullopt;
        return a / b;
      });
}

OpFoldResult PowOp::fold(FoldAdaptor adaptor) {
  if (isSplatOf(adaptor.getRhs(), 1))
    return getLhs();
  return foldBinary(
      adaptor.getLhs(), adaptor.getRhs(), getType(),
      [](double a, double b) { return std::pow(a, b); },
      [](int64_t a, int64_t b) -> std::optional<int64_t> {
        if (b < 0)
          return std::nullopt;
        // Square and multiply, wrapping like the element type does: a loop of
        // b multiplications would hang on large exponents.
        uint64_t result = 1, base = static_cast<uint64_t>(a);
        for (uint64_t e = static_cast<uint64_t>(b); e; e >>= 1) {
          if (e & 1)
            result *= base;
          base *= base;
        }
        return static_cast<int64_t>(result);
      });
}

OpFoldResult MaxOp::fold(FoldAdaptor adaptor) {
  return foldBinary(
      adaptor.getLhs(), adaptor.getRhs(), getType(),
      [](double a, double b) { return std::isnan(a) || a > b ? a : b; },
      [](int64_t a, int64_t b) -> std::optional<int64_t> {
        return std::max(a, b);
      });
}

OpFoldResult MinOp::fold(FoldAdaptor adaptor) {
  return foldBinary(
      adaptor.getLhs(), adaptor.getRhs(), getType(),
      [](double a, double b) { return std::isnan(a) || a < b ? a : b; },
      [](int64_t a, int64_t b) -> std::optional<int64_t> {
        return std::min(a, b);
      });
}

OpFoldResult RemOp::fold(FoldAdaptor adaptor) {
  bool fmod = getFmod();
  return foldBinary(
      adaptor.getLhs(), adaptor.getRhs(), getType(),
      [fmod](double a, double b) {
        double r = std::fmod(a, b);
        if (!fmod && r != 0 && ((r < 0) != (b < 0)))
          r += b;
        return r;
      },
      [fmod](int64_t a, int64_t b) -> std::optional<int64_t> {
        if (b == 0)
          return std::nullopt;
        int64_t r = a % b;
        if (!fmod && r != 0 && ((r < 0) != (b < 0)))
          r += b;
        return r;
      });
}

OpFoldResult AndOp::fold(FoldAdaptor adaptor) {
  return foldBinary(
      adaptor.getLhs(), adaptor.getRhs(), getType(),
      [](double a, double b) { return a && b; },
      [](int64_t a, int64_t b) -> std::optional<int64_t> { return a & b; });
}

OpFoldResult OrOp::fold(FoldAdaptor adaptor) {
  return foldBinary(
      adaptor.getLhs(), adaptor.getRhs(), getType(),
      [](double a, double b) { return a || b; },
      [](int64_t a, int64_t b) -> std::optional<int64_t> { return a | b; });
}

OpFoldResult XorOp::fold(FoldAdaptor adaptor) {
  return foldBinary(
      adaptor.getLhs(), adaptor.getRhs(), getType(),
      [](double a, double b) { return (a != 0) != (b != 0); },
      [](int64_t a, int64_t b) -> std::optional<int64_t> { return a ^ b; });
}

/// Whether `shift` lies outside [0, bit width of `type`).
static bool shiftOutOfRange(Type type, int64_t shift) {
  return shift < 0 ||
         shift >= static_cast<int64_t>(type.getIntOrFloatBitWidth());
}

OpFoldResult ShiftLeftOp::fold(FoldAdaptor adaptor) {
  Type element = getType().getElementType();
  return foldBinary(
      adaptor.getLhs(), adaptor.getRhs(), getType(),
      [](double, double) { return 0.0; },
      [element](int64_t a, int64_t b) -> std::optional<int64_t> {
        if (shiftOutOfRange(element, b))
          return 0;
        return static_cast<int64_t>(static_cast<uint64_t>(a) << b);
      });
}

OpFoldResult ShiftRightOp::fold(FoldAdaptor adaptor) {
  Type element = getType().getElementType();
  // intValues sign-extends signed integers and zero-extends unsigned ones,
  // so an arithmetic shift of the int64_t is right for both.
  return foldBinary(
      adaptor.getLhs(), adaptor.getRhs(), getType(),
      [](double, double) { return 0.0; },
      [element](int64_t a, int64_t b) -> std::optional<int64_t> {
        if (shiftOutOfRange(element, b))
          return a < 0 ? -1 : 0;
        return a >> b;
      });
}

OpFoldResult CompareOp::fold(FoldAdaptor adaptor) {
  DenseElementsAttr lhs = foldableConstant(adaptor.getLhs());
  DenseElementsAttr rhs = foldableConstant(adaptor.getRhs());
  if (!lhs || !rhs)
    return {};
  ComparePredicate predicate = getPredicate();
  auto compare = [predicate](auto a, auto b) -> int64_t {
    return comparisonHolds(predicate, a, b);
  };
  SmallVector<int64_t> out;
  if (isFloatTensor(lhs.getType())) {
    for (auto [a, b] : llvm::zip(floatValues(lhs), floatValues(rhs)))
      out.push_back(compare(a, b));
  } else {
    for (auto [a, b] : llvm::zip(intValues(lhs), intValues(rhs)))
      out.push_back(compare(a, b));
  }
  return makeInts(getType(), out);
}

OpFoldResult SelectOp::fold(FoldAdaptor adaptor) {
  if (getOnTrue() == getOnFalse())
    return getOnTrue();
  auto cond = dyn_cast_or_null<DenseElementsAttr>(adaptor.getCond());
  if (cond && cond.isSplat())
    return cond.getSplatValue<bool>() ? getOnTrue() : getOnFalse();
  DenseElementsAttr onTrue = foldableConstant(adaptor.getOnTrue());
  DenseElementsAttr onFalse = foldableConstant(adaptor.getOnFalse());
  if (!cond || !onTrue || !onFalse)
    return {};
  SmallVector<int64_t> picks = intValues(cond);
  if (isFloatTensor(getType())) {
    SmallVector<double> a = floatValues(onTrue), b = floatValues(onFalse), out;
    for (auto [i, pick] : llvm::enumerate(picks))
      out.push_back(pick ? a[i] : b[i]);
    return makeFloats(getType(), out);
  }
  SmallVector<int64_t> a = intValues(onTrue), b = intValues(onFalse), out;
  for (auto [i, pick] : llvm::enumerate(picks))
    out.push_back(pick ? a[i] : b[i]);
  return makeInts(getType(), out);
}

OpFoldResult CastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  // The narrow types' conversions are the lowering's alone.
  if (isNarrowType(getInput().getType().getElementType()) ||
      isNarrowType(getType().getElementType()))
    return {};
  DenseElementsAttr dense = foldableConstant(adaptor.getInput());
  if (!dense)
    return {};
  bool fromFloat = isFloatTensor(dense.getType());
  bool toFloat = isFloatTensor(getType());
  bool toBool = getType().getElementType().isInteger(1);
  if (fromFloat) {
    SmallVector<double> values = floatValues(dense);
    if (toFloat)
      return makeFloats(getType(), values);
    SmallVector<int64_t> out;
    for (double value : values) {
      if (toBool) {
        out.push_back(value != 0);
        continue;
      }
      if (!std::isfinite(value))
        return {};
      out.push_back(static_cast<int64_t>(std::trunc(value)));
    }
    return makeInts(getType(), out);
  }
  SmallVector<int64_t> values = intValues(dense);
  if (toFloat) {
    SmallVector<double> out(values.begin(), values.end());
    return makeFloats(getType(), out);
  }
  if (toBool)
    for (int64_t &value : values)
      value = value != 0;
  return makeInts(getType(), values);
}

//===----------------------------------------------------------------------===//
// Shape and data movement.
//===----------------------------------------------------------------------===//

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  if (auto producer = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(producer.getInput());
    return getResult();
  }
  if (auto dense = dyn_cast_or_null<DenseElementsAttr>(adaptor.getInput()))
    return dense.reshape(getType());
  return {};
}

OpFoldResult BroadcastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  auto dense = dyn_cast_or_null<DenseElementsAttr>(adaptor.getInput());
  if (dense && dense.isSplat())
    return dense.resizeSplat(getType());
  if (!foldableConstant(dense) || getType().getNumElements() > kMaxFoldElements)
    return {};
  ArrayRef<int64_t> inShape = dense.getType().getShape();
  SmallVector<int64_t> inStrides = stridesOf(inShape);
  int64_t offset = getType().getRank() - static_cast<int64_t>(inShape.size());
  return permuteElements(dense, getType(), [&](ArrayRef<int64_t> index) {
    int64_t linear = 0;
    for (size_t d = 0; d < inShape.size(); ++d)
      if (inShape[d] != 1)
        linear += index[d + offset] * inStrides[d];
    return linear;
  });
}

OpFoldResult TransposeOp::fold(FoldAdaptor adaptor) {
  ArrayRef<int64_t> perm = getPermutation();
  bool identity = true;
  for (auto [i, p] : llvm::enumerate(perm))
    identity &= static_cast<int64_t>(i) == p;
  if (identity)
    return getInput();
  DenseElementsAttr dense = foldableConstant(adaptor.getInput());
  if (!dense)
    return {};
  SmallVector<int64_t> inStrides = stridesOf(dense.getType().getShape());
  return permuteElements(dense, getType(), [&](ArrayRef<int64_t> index) {
    int64_t linear = 0;
    for (auto [i, p] : llvm::enumerate(perm))
      linear += index[i] * inStrides[p];
    return linear;
  });
}

OpFoldResult SliceOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  DenseElementsAttr dense = foldableConstant(adaptor.getInput());
  if (!dense)
    return {};
  if (dense.isSplat())
    return dense.resizeSplat(getType());
  SmallVector<int64_t> inStrides = stridesOf(dense.getType().getShape());
  ArrayRef<int64_t> start = getStart(), stride = getStride();
  return permuteElements(dense, getType(), [&](ArrayRef<int64_t> index) {
    int64_t linear = 0;
    for (size_t d = 0; d < index.size(); ++d)
      linear += (start[d] + index[d] * stride[d]) * inStrides[d];
    return linear;
  });
}

OpFoldResult ReverseOp::fold(FoldAdaptor adaptor) {
  ArrayRef<int64_t> dims = getDimensions();
  if (dims.empty())
    return getInput();
  DenseElementsAttr dense = foldableConstant(adaptor.getInput());
  if (!dense)
    return {};
  ArrayRef<int64_t> shape = getType().getShape();
  SmallVector<int64_t> strides = stridesOf(shape);
  return permuteElements(dense, getType(), [&](ArrayRef<int64_t> index) {
    int64_t linear = 0;
    for (size_t d = 0; d < index.size(); ++d) {
      bool flip = llvm::is_contained(dims, static_cast<int64_t>(d));
      linear += (flip ? shape[d] - 1 - index[d] : index[d]) * strides[d];
    }
    return linear;
  });
}

OpFoldResult ConcatOp::fold(FoldAdaptor adaptor) {
  if (getInputs().size() == 1)
    return getInputs().front();
  SmallVector<DenseElementsAttr> parts;
  for (Attribute attr : adaptor.getInputs()) {
    DenseElementsAttr dense = foldableConstant(attr);
    if (!dense)
      return {};
    parts.push_back(dense);
  }
  int64_t axis = getAxis();
  // Each result index along `axis` maps to one part and an offset in it.
  SmallVector<int64_t> partOf, offsetIn;
  for (auto [p, part] : llvm::enumerate(parts))
    for (int64_t i = 0; i < part.getType().getDimSize(axis); ++i) {
      partOf.push_back(p);
      offsetIn.push_back(i);
    }
  // Address the parts as one flat array laid out part after part.
  SmallVector<int64_t> base;
  int64_t total = 0;
  for (DenseElementsAttr part : parts) {
    base.push_back(total);
    total += part.getNumElements();
  }
  SmallVector<SmallVector<int64_t>> partStrides;
  for (DenseElementsAttr part : parts)
    partStrides.push_back(stridesOf(part.getType().getShape()));
  auto flatIndex = [&](ArrayRef<int64_t> index) {
    int64_t p = partOf[index[axis]];
    int64_t linear = base[p];
    for (size_t d = 0; d < index.size(); ++d)
      linear +=
          (static_cast<int64_t>(d) == axis ? offsetIn[index[axis]] : index[d]) *
          partStrides[p][d];
    return linear;
  };
  // Join the parts into one flat source, then pick from it.
  auto flatType = RankedTensorType::get({total}, getType().getElementType());
  DenseElementsAttr flat;
  if (isFloatTensor(getType())) {
    SmallVector<APFloat> values;
    for (DenseElementsAttr part : parts)
      llvm::append_range(values, part.getValues<APFloat>());
    flat = DenseElementsAttr::get(flatType, values);
  } else {
    SmallVector<APInt> values;
    for (DenseElementsAttr part : parts)
      llvm::append_range(values, part.getValues<APInt>());
    flat = DenseElementsAttr::get(flatType, values);
  }
  return permuteElements(flat, getType(), flatIndex);
}

OpFoldResult IotaOp::fold(FoldAdaptor) {
  if (getType().getNumElements() > kMaxFoldElements)
    return {};
  int64_t dim = getDimension();
  double start = getStart().convertToDouble();
  double step = getStep().convertToDouble();
  ArrayRef<int64_t> shape = getType().getShape();
  SmallVector<int64_t> index(shape.size(), 0);
  SmallVector<double> values;
  for (int64_t linear = 0; linear < getType().getNumElements(); ++linear) {
    values.push_back(start + step * static_cast<double>(index[dim]));
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      if (++index[d] < shape[d])
        break;
      index[d] = 0;
    }
  }
  if (isFloatTensor(getType()))
    return makeFloats(getType(), values);
  SmallVector<int64_t> ints(values.begin(), values.end());
  return makeInts(getType(), ints);
}

OpFoldResult GatherOp::fold(FoldAdaptor adaptor) {
  DenseElementsAttr dense = foldableConstant(adaptor.getInput());
  DenseElementsAttr indices = foldableConstant(adaptor.getIndices());
  if (!dense || !indices || getType().getNumElements() > kMaxFoldElements)
    return {};
  int64_t axis = getAxis();
  ArrayRef<int64_t> inShape = dense.getType().getShape();
  SmallVector<int64_t> inStrides = stridesOf(inShape);
  SmallVector<int64_t> picks = intValues(indices);
  for (int64_t &pick : picks) {
    if (pick < 0)
      pick += inShape[axis];
    if (pick < 0 || pick >= inShape[axis])
      return {};
  }
  SmallVector<int64_t> indexStrides = stridesOf(indices.getType().getShape());
  int64_t indexRank = indices.getType().getRank();
  return permuteElements(dense, getType(), [&](ArrayRef<int64_t> index) {
    int64_t which = 0;
    for (int64_t d = 0; d < indexRank; ++d)
      which += index[axis + d] * indexStrides[d];
    int64_t linear = picks[which] * inStrides[axis];
    for (int64_t d = 0; d < axis; ++d)
      linear += index[d] * inStrides[d];
    for (int64_t d = axis + 1; d < static_cast<int64_t>(inShape.size()); ++d)
      linear += index[d - 1 + indexRank] * inStrides[d];
    return linear;
  });
}

//===----------------------------------------------------------------------===//
// Reductions.
//===----------------------------------------------------------------------===//

namespace {
enum class ReduceKind { Sum, Mean, Max, Min, Prod, L2, LogSumExp };

/// Folds a reduction over constants, computing in double (floats) or int64.
OpFoldResult foldReduce(Attribute operand, ShapedType resultType,
                        ArrayRef<int64_t> dims, ReduceKind kind) {
  if (dims.empty())
    return {};
  DenseElementsAttr dense = foldableConstant(operand);
  if (!dense)
    return {};
  ArrayRef<int64_t> shape = dense.getType().getShape();
  // Map every input element to its output slot.
  SmallVector<int64_t> outShape, outStrides;
  for (size_t d = 0; d < shape.size(); ++d)
    if (!llvm::is_contained(dims, static_cast<int64_t>(d)))
      outShape.push_back(shape[d]);
  outStrides = stridesOf(outShape);
  int64_t outCount = resultType.getNumElements();
  SmallVector<int64_t> slot;
  SmallVector<int64_t> index(shape.size(), 0);
  for (int64_t linear = 0; linear < dense.getNumElements(); ++linear) {
    int64_t out = 0, k = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      if (!llvm::is_contained(dims, static_cast<int64_t>(d)))
        out += index[d] * outStrides[k++];
    slot.push_back(out);
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      if (++index[d] < shape[d])
        break;
      index[d] = 0;
    }
  }
  int64_t groupSize = outCount ? dense.getNumElements() / outCount : 0;
  if (isFloatTensor(resultType)) {
    SmallVector<double> values = floatValues(dense);
    double init = 0;
    if (kind == ReduceKind::Max)
      init = -INFINITY;
    else if (kind == ReduceKind::Min)
      init = INFINITY;
    else if (kind == ReduceKind::Prod)
      init = 1;
    // LogSumExp subtracts each group's finite maximum so exp cannot overflow.
    SmallVector<double> shift(outCount, 0.0);
    if (kind == ReduceKind::LogSumExp) {
      SmallVector<double> peak(outCount, -INFINITY);
      for (auto [i, value] : llvm::enumerate(values))
        peak[slot[i]] = std::max(peak[slot[i]], value);
      for (auto [s, p] : llvm::zip(shift, peak))
        if (std::isfinite(p))
          s = p;
    }
    SmallVector<double> acc(outCount, init);
    for (auto [i, value] : llvm::enumerate(values)) {
      double &a = acc[slot[i]];
      switch (kind) {
      case ReduceKind::Sum:
      case ReduceKind::Mean:
        a += value;
        break;
      // NaN propagates, as in kiln.max and kiln.min.
      case ReduceKind::Max:
        a = std::isnan(a) || a > value ? a : value;
        break;
      case ReduceKind::Min:
        a = std::isnan(a) || a < value ? a : value;
        break;
      case ReduceKind::Prod:
        a *= value;
        break;
      case ReduceKind::L2:
        a += value * value;
        break;
      case ReduceKind::LogSumExp:
        a += std::exp(value - shift[slot[i]]);
        break;
      }
    }
    for (auto [a, s] : llvm::zip(acc, shift)) {
      if (kind == ReduceKind::Mean)
        a /= static_cast<double>(groupSize);
      else if (kind == ReduceKind::L2)
        a = std::sqrt(a);
      else if (kind == ReduceKind::LogSumExp)
        a = std::log(a) + s;
    }
    return makeFloats(resultType, acc);
  }
  if (kind != ReduceKind::Sum && kind != ReduceKind::Prod &&
      kind != ReduceKind::Max && kind != ReduceKind::Min)
    return {};
  SmallVector<int64_t> values = intValues(dense);
  int64_t init = kind == ReduceKind::Prod  ? 1
                 : kind == ReduceKind::Max ? INT64_MIN
                 : kind == ReduceKind::Min ? INT64_MAX
                                           : 0;
  SmallVector<int64_t> acc(outCount, init);
  for (auto [i, value] : llvm::enumerate(values)) {
    int64_t &a = acc[slot[i]];
    if (kind == ReduceKind::Sum)
      a += value;
    else if (kind == ReduceKind::Prod)
      a *= value;
    else if (kind == ReduceKind::Max)
      a = std::max(a, value);
    else
      a = std::min(a, value);
  }
  return makeInts(resultType, acc);
}
} // namespace

#define KILN_FOLD_REDUCE(OP, KIND)                                             \
  OpFoldResult OP::fold(FoldAdaptor adaptor) {                                 \
    return foldReduce(adaptor.getInput(), getType(), getDimensions(),          \
                      ReduceKind::KIND);                                       \
  }
KILN_FOLD_REDUCE(ReduceSumOp, Sum)
KILN_FOLD_REDUCE(ReduceMeanOp, Mean)
KILN_FOLD_REDUCE(ReduceMaxOp, Max)
KILN_FOLD_REDUCE(ReduceMinOp, Min)
KILN_FOLD_REDUCE(ReduceProdOp, Prod)
KILN_FOLD_REDUCE(ReduceL2Op, L2)
KILN_FOLD_REDUCE(ReduceLogSumExpOp, LogSumExp)
#undef KILN_FOLD_REDUCE
