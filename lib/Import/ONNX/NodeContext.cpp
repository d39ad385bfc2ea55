//===- NodeContext.cpp - helpers shared by the ONNX op importers ----------===//

#include "NodeContext.h"

#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::onnx_import;

LogicalResult NodeContext::expectInputs(unsigned min, unsigned max) {
  if (numInputs() < min || numInputs() > max) {
    if (min == max)
      return fail("expected " + Twine(min) + " inputs, got " +
                  Twine(numInputs()));
    return fail("expected " + Twine(min) + " to " + Twine(max) +
                " inputs, got " + Twine(numInputs()));
  }
  for (unsigned i = 0; i < min; ++i)
    if (!hasInput(i))
      return fail("required input " + Twine(i) + " is missing");
  return success();
}

const onnx::AttributeProto *NodeContext::attr(StringRef name) const {
  for (const onnx::AttributeProto &attribute : node.attribute())
    if (attribute.name() == name)
      return &attribute;
  return nullptr;
}

int64_t NodeContext::getInt(StringRef name, int64_t defaultValue) const {
  return getOptionalInt(name).value_or(defaultValue);
}

std::optional<int64_t> NodeContext::getOptionalInt(StringRef name) const {
  if (const onnx::AttributeProto *a = attr(name))
    return a->i();
  return std::nullopt;
}

double NodeContext::getFloat(StringRef name, double defaultValue) const {
  if (const onnx::AttributeProto *a = attr(name))
    return a->f();
  return defaultValue;
}

std::string NodeContext::getString(StringRef name,
                                   StringRef defaultValue) const {
  if (const onnx::AttributeProto *a = attr(name))
    return a->s();
  return defaultValue.str();
}

std::optional<SmallVector<int64_t>> NodeContext::getInts(StringRef name) const {
  const onnx::AttributeProto *a = attr(name);
  if (!a)
    return std::nullopt;
  return SmallVector<int64_t>(a->ints().begin(), a->ints().end());
}

std::optional<SmallVector<double>>
NodeContext::getFloats(StringRef name) const {
  const onnx::AttributeProto *a = attr(name);
  if (!a)
    return std::nullopt;
  return SmallVector<double>(a->floats().begin(), a->floats().end());
}

LogicalResult NodeContext::fail(const Twine &reason) {
  if (error.empty())
    error = reason.str();
  return failure();
}

DenseElementsAttr NodeContext::constantOf(Value value) const {
  DenseElementsAttr attr;
  if (value && matchPattern(value, m_Constant(&attr)))
    return attr;
  // A parameter read where a constant is required (a Pad value or Dropout
  // ratio stored as an initializer) stands for its initial value.
  if (auto read = value ? value.getDefiningOp<GetParamOp>() : nullptr) {
    Operation *symbol = SymbolTable::lookupSymbolIn(module, read.getNameAttr());
    if (auto param = dyn_cast_or_null<ParamOp>(symbol))
      return dyn_cast_or_null<DenseElementsAttr>(param.getInitialValueAttr());
  }
  return nullptr;
}

FailureOr<SmallVector<int64_t>> NodeContext::constInts(unsigned i,
                                                       StringRef what) {
  DenseElementsAttr attr = constantOf(input(i));
  if (!attr)
    return fail("input '" + node.input(i) + "' (" + what +
                ") must be a constant: Kiln compiles for static shapes; bind "
                "it with --bind-input " +
                node.input(i) + "=FILE if it is a graph input");
  if (!isa<IntegerType>(attr.getElementType()))
    return fail("input '" + node.input(i) + "' (" + what +
                ") must hold integers");
  bool isUnsigned = attr.getElementType().isUnsignedInteger();
  SmallVector<int64_t> values;
  for (APInt value : attr.getValues<APInt>()) {
    if (isUnsigned && value.getActiveBits() > 63)
      return fail("input '" + node.input(i) + "' (" + what +
                  ") holds an unsigned value above 2^63");
    values.push_back(isUnsigned ? static_cast<int64_t>(value.getZExtValue())
                                : value.getSExtValue());
  }
  return values;
}

FailureOr<SmallVector<double>> NodeContext::constFloats(unsigned i,
                                                        StringRef what) {
  DenseElementsAttr attr = constantOf(input(i));
  if (!attr)
    return fail("input '" + node.input(i) + "' (" + what +
                ") must be a constant");
  SmallVector<double> values;
  if (isa<FloatType>(attr.getElementType())) {
    for (APFloat value : attr.getValues<APFloat>()) {
      bool lost;
      value.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
      values.push_back(value.convertToDouble());
    }
  } else {
    bool isUnsigned = attr.getElementType().isUnsignedInteger();
    for (APInt value : attr.getValues<APInt>())
      values.push_back(isUnsigned ? static_cast<double>(value.getZExtValue())
                                  : static_cast<double>(value.getSExtValue()));
  }
  return values;
}

FailureOr<DenseElementsAttr>
NodeContext::tensorAttr(const onnx::TensorProto &tensor) {
  std::string message;
  FailureOr<DenseElementsAttr> attr =
      convertTensor(tensor, ctx, baseDir, message);
  if (failed(attr))
    return fail(message);
  return attr;
}

Value NodeContext::constant(DenseElementsAttr value) {
  return ConstantOp::create(b, loc, value);
}

Value NodeContext::splat(RankedTensorType type, double value) {
  Type element = type.getElementType();
  if (auto floatType = dyn_cast<FloatType>(element)) {
    APFloat v(value);
    bool lost;
    v.convert(floatType.getFloatSemantics(), APFloat::rmNearestTiesToEven,
              &lost);
    return constant(DenseElementsAttr::get(type, v));
  }
  unsigned width = element.getIntOrFloatBitWidth();
  if (width == 1)
    return constant(DenseElementsAttr::get(type, value != 0));
  // Unsigned values above 2^63 do not fit an int64_t.
  uint64_t bits = element.isUnsignedInteger() && value >= 0x1p63
                      ? static_cast<uint64_t>(value)
                      : static_cast<uint64_t>(static_cast<int64_t>(value));
  return constant(DenseElementsAttr::get(
      type, APInt(width, bits, /*isSigned=*/!element.isUnsignedInteger(),
                  /*implicitTrunc=*/true)));
}

Value NodeContext::scalar(Type elementType, double value) {
  return splat(RankedTensorType::get({}, elementType), value);
}

Value NodeContext::i64Vector(ArrayRef<int64_t> values) {
  auto type = RankedTensorType::get({static_cast<int64_t>(values.size())},
                                    b.getI64Type());
  return constant(DenseElementsAttr::get(type, values));
}

FailureOr<Value> NodeContext::reshape(Value value, ArrayRef<int64_t> shape) {
  auto type = mlir::cast<RankedTensorType>(value.getType());
  if (type.getShape() == shape)
    return value;
  return create<ReshapeOp>(value, {}, {type.clone(shape)});
}

FailureOr<Value> NodeContext::broadcastTo(Value value,
                                          ArrayRef<int64_t> shape) {
  auto type = mlir::cast<RankedTensorType>(value.getType());
  if (type.getShape() == shape)
    return value;
  return create<BroadcastOp>(value, {}, {type.clone(shape)});
}

LogicalResult NodeContext::broadcastAll(MutableArrayRef<Value> values) {
  SmallVector<int64_t> shape;
  for (Value value : values) {
    ArrayRef<int64_t> s =
        mlir::cast<RankedTensorType>(value.getType()).getShape();
    if (s.size() > shape.size())
      shape.insert(shape.begin(), s.size() - shape.size(), 1);
    size_t offset = shape.size() - s.size();
    for (size_t d = 0; d < s.size(); ++d) {
      int64_t &target = shape[offset + d];
      if (target == 1)
        target = s[d];
      else if (s[d] != 1 && s[d] != target)
        return fail("operand shapes cannot be broadcast together (dimension "
                    "of size " +
                    Twine(s[d]) + " against " + Twine(target) + ")");
    }
  }
  for (Value &value : values) {
    FailureOr<Value> expanded = broadcastTo(value, shape);
    if (failed(expanded))
      return failure();
    value = *expanded;
  }
  return success();
}

FailureOr<Value> NodeContext::cast(Value value, Type elementType) {
  auto type = mlir::cast<RankedTensorType>(value.getType());
  if (type.getElementType() == elementType)
    return value;
  return create<CastOp>(value, {}, {type.clone(elementType)});
}

void NodeContext::noteOnModule(StringRef name, Attribute value) {
  SmallVector<Attribute> values;
  if (auto seen = module->getAttrOfType<ArrayAttr>(name))
    values.assign(seen.begin(), seen.end());
  values.push_back(value);
  module->setAttr(name, b.getArrayAttr(values));
}

FailureOr<int64_t> NodeContext::normalizeAxis(int64_t axis, int64_t rank) {
  int64_t normalized = axis < 0 ? axis + rank : axis;
  if (normalized < 0 || normalized >= rank)
    return fail("axis " + Twine(axis) + " is out of range for rank " +
                Twine(rank));
  return normalized;
}

FailureOr<Operation *>
NodeContext::buildVerified(StringRef name, ValueRange operands,
                           ArrayRef<NamedAttribute> attrs, TypeRange types) {
  OperationState state(loc, name);
  state.addOperands(operands);
  state.addAttributes(attrs);
  state.addTypes(types);
  Operation *op = b.create(state);
  if (failed(mlir::verify(op))) {
    op->erase();
    return failure();
  }
  return op;
}

Value NodeContext::foldSingleResult(Operation *op) {
  Value result = op->getResult(0);
  SmallVector<OpFoldResult> folded;
  if (failed(op->fold(folded)) || folded.size() != 1)
    return result;
  if (auto value = dyn_cast<Value>(folded.front())) {
    if (value != result)
      op->erase();
    return value;
  }
  auto attr =
      dyn_cast<DenseElementsAttr>(mlir::cast<Attribute>(folded.front()));
  if (!attr || attr.getType() != result.getType())
    return result;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(op);
  Value replacement = constant(attr);
  op->erase();
  return replacement;
}
