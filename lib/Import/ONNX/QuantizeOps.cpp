//===- QuantizeOps.cpp - importers of QuantizeLinear, DequantizeLinear ----===//
//
// Linear quantization to and from the 16-, 8-, 4- and 2-bit integer types and
// the float8 and float4 types, per tensor, per axis or per block, written out
// as kiln elementwise ops:
//   QuantizeLinear:   y = saturate(round_half_even(x / scale) + zero_point)
//                     (to a float type: cast(x / scale + zero_point), which
//                     rounds, saturating as the `saturate` attribute says)
//   DequantizeLinear: y = (x - zero_point) * scale
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"

#include <numeric>

using namespace mlir;
using namespace kiln;
using namespace kiln::onnx_import;

namespace {

/// Spreads a scale or zero point over `shape`: a scalar everywhere, a 1-D
/// tensor along `axis`, or (with `blockSize`) a tensor of `shape`'s rank
/// whose element i along `axis` covers elements [i * blockSize, (i + 1) *
/// blockSize) there.
FailureOr<Value> spread(NodeContext &n, Value v, ArrayRef<int64_t> shape,
                        int64_t axis, int64_t blockSize, StringRef what) {
  auto type = cast<RankedTensorType>(v.getType());
  int64_t rank = shape.size();
  if (type.getRank() == 0 || type.getNumElements() == 1) {
    FailureOr<Value> flat = n.reshape(v, {});
    if (failed(flat))
      return failure();
    return n.broadcastTo(*flat, shape);
  }
  if (blockSize <= 0) {
    if (type.getRank() != 1 || type.getDimSize(0) != shape[axis])
      return n.fail(what +
                    " must be a scalar or hold one value per element "
                    "of axis " +
                    std::to_string(axis) + " (" + std::to_string(shape[axis]) +
                    ")");
    SmallVector<int64_t> column(rank, 1);
    column[axis] = shape[axis];
    FailureOr<Value> shaped = n.reshape(v, column);
    if (failed(shaped))
      return failure();
    return n.broadcastTo(*shaped, shape);
  }
  int64_t blocks = (shape[axis] + blockSize - 1) / blockSize;
  if (type.getRank() != rank || type.getDimSize(axis) != blocks)
    return n.fail(what + " must have the input's rank and " +
                  std::to_string(blocks) + " blocks along axis " +
                  std::to_string(axis));
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis && type.getDimSize(d) != shape[d])
      return n.fail(what + " must match the input's shape off axis " +
                    std::to_string(axis));
  // [.., blocks, ..] -> [.., blocks, 1, ..] -> [.., blocks, size, ..] ->
  // [.., blocks * size, ..], cut to the input's extent.
  SmallVector<int64_t> split(type.getShape());
  split.insert(split.begin() + axis + 1, 1);
  FailureOr<Value> expanded = n.reshape(v, split);
  if (failed(expanded))
    return failure();
  split[axis + 1] = blockSize;
  FailureOr<Value> repeated = n.broadcastTo(*expanded, split);
  if (failed(repeated))
    return failure();
  SmallVector<int64_t> joined(shape);
  joined[axis] = blocks * blockSize;
  FailureOr<Value> flat = n.reshape(*repeated, joined);
  if (failed(flat) || blocks * blockSize == shape[axis])
    return flat;
  SmallVector<int64_t> start(rank, 0), stride(rank, 1);
  return n.create<SliceOp>(*flat,
                           {n.array("start", start), n.array("limit", shape),
                            n.array("stride", stride)});
}

/// The smallest and largest values of an integer type.
std::pair<double, double> integerRange(Type type) {
  unsigned width = type.getIntOrFloatBitWidth();
  if (type.isUnsignedInteger())
    return {0.0, std::ldexp(1.0, width) - 1};
  return {-std::ldexp(1.0, width - 1), std::ldexp(1.0, width - 1) - 1};
}

/// The axis and block size of a (De)QuantizeLinear node; the axis matters
/// only where the scale holds more than one value.
LogicalResult quantizationAxis(NodeContext &n, int64_t rank, int64_t &axis,
                               int64_t &blockSize) {
  blockSize = n.getInt("block_size", 0);
  if (blockSize < 0)
    return n.fail("block_size must not be negative");
  if (rank == 0 || n.inputType(1).getNumElements() == 1) {
    axis = 0;
    return success();
  }
  FailureOr<int64_t> normalized = n.normalizeAxis(n.getInt("axis", 1), rank);
  if (failed(normalized))
    return failure();
  axis = *normalized;
  return success();
}

/// Input `i` (a scale or zero point) as `floatType`, spread over `shape`.
FailureOr<Value> spreadInput(NodeContext &n, unsigned i, Type floatType,
                             ArrayRef<int64_t> shape, int64_t axis,
                             int64_t blockSize, StringRef what) {
  FailureOr<Value> value = n.cast(n.input(i), floatType);
  if (failed(value))
    return failure();
  return spread(n, *value, shape, axis, blockSize, what);
}

LogicalResult importQuantizeLinear(NodeContext &n) {
  if (failed(n.expectInputs(2, 3)))
    return failure();
  RankedTensorType type = n.inputType(0);
  Type floatType = type.getElementType();
  if (!isa<FloatType>(floatType))
    return n.fail("expected a float input");
  Type quantized;
  if (n.hasInput(2))
    quantized = n.inputType(2).getElementType();
  else if (int64_t dtype = n.getInt("output_dtype", 0))
    quantized = elementTypeOf(static_cast<int32_t>(dtype), n.ctx);
  else
    quantized = IntegerType::get(n.ctx, 8, IntegerType::Unsigned);
  bool toFloat =
      quantized && isNarrowType(quantized) && isa<FloatType>(quantized);
  if (!quantized || (!toFloat && (!isa<IntegerType>(quantized) ||
                                  quantized.getIntOrFloatBitWidth() > 16 ||
                                  quantized.isInteger(1))))
    return n.fail("quantizing to other than 16-, 8-, 4- and 2-bit integers "
                  "and float8 and float4 types is not supported yet");
  if (isa<Float8E8M0FNUType>(quantized))
    return n.fail("quantizing to float8e8m0 is not supported yet");
  int64_t axis, blockSize;
  if (failed(quantizationAxis(n, type.getRank(), axis, blockSize)))
    return failure();
  FailureOr<Value> scale =
      spreadInput(n, 1, floatType, type.getShape(), axis, blockSize, "y_scale");
  if (failed(scale))
    return failure();
  FailureOr<Value> scaled = n.create<DivOp>(ValueRange{n.input(0), *scale});
  if (failed(scaled))
    return failure();
  FailureOr<Value> q = toFloat ? scaled : n.create<RoundOp>(*scaled);
  if (failed(q))
    return failure();
  if (n.hasInput(2)) {
    FailureOr<Value> zero = spreadInput(n, 2, floatType, type.getShape(), axis,
                                        blockSize, "y_zero_point");
    if (failed(zero))
      return failure();
    q = n.create<AddOp>(ValueRange{*q, *zero});
    if (failed(q))
      return failure();
  }
  if (toFloat) {
    auto saturate =
        n.b.getNamedAttr("saturate", n.b.getBoolAttr(n.getInt("saturate", 1)));
    return n.setResult(
        n.create<CastOp>(*q, {saturate}, {type.clone(quantized)}));
  }
  auto [lowest, highest] = integerRange(quantized);
  q = n.create<MaxOp>(ValueRange{*q, n.splat(type, lowest)});
  if (failed(q))
    return failure();
  q = n.create<MinOp>(ValueRange{*q, n.splat(type, highest)});
  if (failed(q))
    return failure();
  return n.setResult(n.cast(*q, quantized));
}

LogicalResult importDequantizeLinear(NodeContext &n) {
  if (failed(n.expectInputs(2, 3)))
    return failure();
  RankedTensorType type = n.inputType(0);
  Type quantized = type.getElementType();
  if ((!isa<IntegerType>(quantized) && !isNarrowType(quantized)) ||
      quantized.isInteger(1))
    return n.fail("dequantizing other than integers and the float8 and "
                  "float4 types is not supported yet");
  Type floatType = n.inputType(1).getElementType();
  if (int64_t dtype = n.getInt("output_dtype", 0))
    floatType = elementTypeOf(static_cast<int32_t>(dtype), n.ctx);
  if (!floatType || !isa<FloatType>(floatType))
    return n.fail("expected a float scale");
  int64_t axis, blockSize;
  if (failed(quantizationAxis(n, type.getRank(), axis, blockSize)))
    return failure();
  FailureOr<Value> x = n.cast(n.input(0), floatType);
  if (failed(x))
    return failure();
  if (n.hasInput(2)) {
    FailureOr<Value> zero = spreadInput(n, 2, floatType, type.getShape(), axis,
                                        blockSize, "x_zero_point");
    if (failed(zero))
      return failure();
    x = n.create<SubOp>(ValueRange{*x, *zero});
    if (failed(x))
      return failure();
  }
  FailureOr<Value> scale =
      spreadInput(n, 1, floatType, type.getShape(), axis, blockSize, "x_scale");
  if (failed(scale))
    return failure();
  return n.setResult(n.create<MulOp>(ValueRange{*x, *scale}));
}

/// DynamicQuantizeLinear: uint8 quantization whose scale and zero point
/// come from the input's range (widened to hold 0), as the spec computes
/// them: scale = (max - min) / 255 (1 / 255 for a constant input), zero
/// point = round(clamp(-min / scale, 0, 255)).
LogicalResult importDynamicQuantizeLinear(NodeContext &n) {
  if (failed(n.expectInputs(1, 1)))
    return failure();
  RankedTensorType type = n.inputType(0);
  if (!type.getElementType().isF32())
    return n.fail("expected an f32 input");
  auto scalar = RankedTensorType::get({}, type.getElementType());
  SmallVector<int64_t> all(type.getRank());
  std::iota(all.begin(), all.end(), 0);
  auto dims = n.array("dimensions", all);
  auto zero = n.splat(scalar, 0);
  FailureOr<Value> high = n.create<ReduceMaxOp>(n.input(0), {dims});
  FailureOr<Value> low = n.create<ReduceMinOp>(n.input(0), {dims});
  if (failed(high) || failed(low))
    return failure();
  high = n.create<MaxOp>(ValueRange{*high, zero});
  low = n.create<MinOp>(ValueRange{*low, zero});
  if (failed(high) || failed(low))
    return failure();
  FailureOr<Value> range = n.create<SubOp>(ValueRange{*high, *low});
  if (failed(range))
    return failure();
  FailureOr<Value> constant = n.create<CompareOp>(
      ValueRange{*range, zero},
      {n.named("predicate",
               ComparePredicateAttr::get(n.ctx, ComparePredicate::eq))});
  if (failed(constant))
    return failure();
  range = n.create<SelectOp>(ValueRange{*constant, n.splat(scalar, 1), *range});
  if (failed(range))
    return failure();
  FailureOr<Value> scale =
      n.create<DivOp>(ValueRange{*range, n.splat(scalar, 255)});
  if (failed(scale))
    return failure();
  FailureOr<Value> point = n.create<DivOp>(ValueRange{*low, *scale});
  if (failed(point))
    return failure();
  point = n.create<SubOp>(ValueRange{zero, *point});
  if (failed(point))
    return failure();
  auto clamp = [&](Value v, RankedTensorType t) -> FailureOr<Value> {
    FailureOr<Value> c = n.create<MaxOp>(ValueRange{v, n.splat(t, 0)});
    if (failed(c))
      return failure();
    return n.create<MinOp>(ValueRange{*c, n.splat(t, 255)});
  };
  point = clamp(*point, scalar);
  if (failed(point))
    return failure();
  point = n.create<RoundOp>(*point);
  if (failed(point))
    return failure();
  FailureOr<Value> spreadScale = n.broadcastTo(*scale, type.getShape());
  FailureOr<Value> spreadPoint = n.broadcastTo(*point, type.getShape());
  if (failed(spreadScale) || failed(spreadPoint))
    return failure();
  FailureOr<Value> q = n.create<DivOp>(ValueRange{n.input(0), *spreadScale});
  if (failed(q))
    return failure();
  q = n.create<RoundOp>(*q);
  if (failed(q))
    return failure();
  q = n.create<AddOp>(ValueRange{*q, *spreadPoint});
  if (failed(q))
    return failure();
  q = clamp(*q, type);
  if (failed(q))
    return failure();
  Type u8 = IntegerType::get(n.ctx, 8, IntegerType::Unsigned);
  FailureOr<Value> y = n.cast(*q, u8);
  FailureOr<Value> zeroPoint = n.cast(*point, u8);
  if (failed(y) || failed(zeroPoint))
    return failure();
  n.setOutput(0, *y);
  n.setOutput(1, *scale);
  n.setOutput(2, *zeroPoint);
  return success();
}

} // namespace

void kiln::onnx_import::registerQuantizeOps(OpImporterTable &t) {
  t["DynamicQuantizeLinear"] = importDynamicQuantizeLinear;
  t["QuantizeLinear"] = importQuantizeLinear;
  t["DequantizeLinear"] = importDequantizeLinear;
}
