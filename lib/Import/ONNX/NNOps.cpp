//===- NNOps.cpp - importers of matmul, convolution and pooling ops -------===//

#include "NodeContext.h"

#include "llvm/Support/xxhash.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace kiln;
using namespace kiln::onnx_import;

namespace {

/// numpy.matmul: 1-D operands are promoted, batch dimensions broadcast.
FailureOr<Value> numpyMatmul(NodeContext &n, Value lhs, Value rhs) {
  auto lhsType = cast<RankedTensorType>(lhs.getType());
  auto rhsType = cast<RankedTensorType>(rhs.getType());
  if (lhsType.getRank() == 0 || rhsType.getRank() == 0)
    return n.fail("matmul operands must not be scalars");
  bool lhsVector = lhsType.getRank() == 1, rhsVector = rhsType.getRank() == 1;
  if (lhsVector) {
    FailureOr<Value> r = n.reshape(lhs, {1, lhsType.getDimSize(0)});
    if (failed(r))
      return failure();
    lhs = *r;
  }
  if (rhsVector) {
    FailureOr<Value> r = n.reshape(rhs, {rhsType.getDimSize(0), 1});
    if (failed(r))
      return failure();
    rhs = *r;
  }
  lhsType = cast<RankedTensorType>(lhs.getType());
  rhsType = cast<RankedTensorType>(rhs.getType());
  // [B..., M, K] x [K, N]: one matrix product over B*M rows, no copies of
  // the right-hand side.
  if (lhsType.getRank() > 2 && rhsType.getRank() == 2 && !rhsVector) {
    ArrayRef<int64_t> shape = lhsType.getShape();
    int64_t rows = 1;
    for (int64_t d : shape.drop_back())
      rows *= d;
    FailureOr<Value> flat = n.reshape(lhs, {rows, shape.back()});
    if (failed(flat))
      return failure();
    FailureOr<Value> product = n.create<MatmulOp>(ValueRange{*flat, rhs});
    if (failed(product))
      return failure();
    SmallVector<int64_t> outShape(shape.drop_back());
    if (!lhsVector)
      outShape.push_back(rhsType.getDimSize(1));
    return n.reshape(*product, outShape);
  }
  // Broadcast the batch dimensions.
  ArrayRef<int64_t> lhsBatch = lhsType.getShape().drop_back(2);
  ArrayRef<int64_t> rhsBatch = rhsType.getShape().drop_back(2);
  size_t rank = std::max(lhsBatch.size(), rhsBatch.size());
  SmallVector<int64_t> batch(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t a =
        i < rank - lhsBatch.size() ? 1 : lhsBatch[i - (rank - lhsBatch.size())];
    int64_t b =
        i < rank - rhsBatch.size() ? 1 : rhsBatch[i - (rank - rhsBatch.size())];
    if (a != b && a != 1 && b != 1)
      return n.fail("matmul batch dimensions " + Twine(a) + " and " + Twine(b) +
                    " do not broadcast");
    batch[i] = std::max(a, b);
  }
  auto withBatch = [&](RankedTensorType type) {
    SmallVector<int64_t> shape(batch);
    llvm::append_range(shape, type.getShape().take_back(2));
    return shape;
  };
  FailureOr<Value> a = n.broadcastTo(lhs, withBatch(lhsType));
  FailureOr<Value> b = n.broadcastTo(rhs, withBatch(rhsType));
  if (failed(a) || failed(b))
    return failure();
  FailureOr<Value> product = n.create<MatmulOp>(ValueRange{*a, *b});
  if (failed(product))
    return failure();
  if (!lhsVector && !rhsVector)
    return product;
  SmallVector<int64_t> shape(batch);
  if (!lhsVector)
    shape.push_back(lhsType.getDimSize(lhsType.getRank() - 2));
  if (!rhsVector)
    shape.push_back(rhsType.getDimSize(rhsType.getRank() - 1));
  return n.reshape(*product, shape);
}

LogicalResult importMatMul(NodeContext &n) {
  if (failed(n.expectInputs(2, 2)))
    return failure();
  return n.setResult(numpyMatmul(n, n.input(0), n.input(1)));
}

/// Input `i` (8-bit integers) as i32, less zero point input `zeroPoint` when
/// the node has it (a scalar, or one per row of a / column of b).
FailureOr<Value> centered(NodeContext &n, unsigned i, unsigned zeroPoint) {
  Type i32 = n.b.getI32Type();
  FailureOr<Value> x = n.cast(n.input(i), i32);
  if (failed(x) || !n.hasInput(zeroPoint))
    return x;
  if (n.inputType(zeroPoint).getNumElements() != 1)
    return n.fail("zero points other than one per tensor are not supported "
                  "yet");
  FailureOr<Value> zero = n.cast(n.input(zeroPoint), i32);
  if (failed(zero))
    return failure();
  FailureOr<Value> flat = n.reshape(*zero, {});
  if (failed(flat))
    return failure();
  FailureOr<Value> spread =
      n.broadcastTo(*flat, cast<RankedTensorType>(x->getType()).getShape());
  if (failed(spread))
    return failure();
  return n.create<SubOp>(ValueRange{*x, *spread});
}

/// MatMulInteger: (a - a_zero_point) @ (b - b_zero_point) in i32.
LogicalResult importMatMulInteger(NodeContext &n) {
  if (failed(n.expectInputs(2, 4)))
    return failure();
  FailureOr<Value> a = centered(n, 0, 2);
  FailureOr<Value> b = failed(a) ? a : centered(n, 1, 3);
  if (failed(b))
    return failure();
  return n.setResult(numpyMatmul(n, *a, *b));
}

/// QLinearMatMul, as the reference computes it: the i32 product of the
/// centered inputs, scaled by a_scale * b_scale / y_scale (in the scales'
/// type) in f64, plus y_zero_point, rounded half to even and saturated.
LogicalResult importQLinearMatMul(NodeContext &n) {
  if (failed(n.expectInputs(8, 8)))
    return failure();
  for (unsigned i : {1u, 4u, 6u, 7u})
    if (n.inputType(i).getNumElements() != 1)
      return n.fail("scales and zero points other than one per tensor are "
                    "not supported yet");
  FailureOr<Value> a = centered(n, 0, 2);
  FailureOr<Value> b = failed(a) ? a : centered(n, 3, 5);
  if (failed(b))
    return failure();
  FailureOr<Value> product = numpyMatmul(n, *a, *b);
  if (failed(product))
    return failure();
  auto flat = [&](unsigned i) { return n.reshape(n.input(i), {}); };
  FailureOr<Value> aScale = flat(1), bScale = flat(4), yScale = flat(6);
  if (failed(aScale) || failed(bScale) || failed(yScale))
    return failure();
  FailureOr<Value> scale = n.create<MulOp>(ValueRange{*aScale, *bScale});
  if (failed(scale))
    return failure();
  scale = n.create<DivOp>(ValueRange{*scale, *yScale});
  if (failed(scale))
    return failure();
  Type f64 = n.b.getF64Type();
  auto shape = cast<RankedTensorType>(product->getType()).getShape();
  auto wide = [&](Value v) -> FailureOr<Value> {
    FailureOr<Value> cast = n.cast(v, f64);
    if (failed(cast))
      return failure();
    return n.broadcastTo(*cast, shape);
  };
  FailureOr<Value> y = n.cast(*product, f64);
  FailureOr<Value> factor = wide(*scale);
  FailureOr<Value> zeroPoint = flat(7);
  if (failed(y) || failed(factor) || failed(zeroPoint))
    return failure();
  FailureOr<Value> offset = wide(*zeroPoint);
  if (failed(offset))
    return failure();
  y = n.create<MulOp>(ValueRange{*y, *factor});
  if (failed(y))
    return failure();
  y = n.create<AddOp>(ValueRange{*y, *offset});
  if (failed(y))
    return failure();
  y = n.create<RoundOp>(*y);
  if (failed(y))
    return failure();
  Type quantized = n.inputType(7).getElementType();
  if (!isa<IntegerType>(quantized) || quantized.getIntOrFloatBitWidth() != 8)
    return n.fail("expected an 8-bit integer y_zero_point");
  auto type = cast<RankedTensorType>(y->getType());
  bool isUnsigned = quantized.isUnsignedInteger();
  y = n.create<MaxOp>(ValueRange{*y, n.splat(type, isUnsigned ? 0 : -128)});
  if (failed(y))
    return failure();
  y = n.create<MinOp>(ValueRange{*y, n.splat(type, isUnsigned ? 255 : 127)});
  if (failed(y))
    return failure();
  return n.setResult(n.cast(*y, quantized));
}

LogicalResult importGemm(NodeContext &n) {
  if (failed(n.expectInputs(2, 3)))
    return failure();
  if (n.inputType(0).getRank() != 2 || n.inputType(1).getRank() != 2)
    return n.fail("A and B must be matrices");
  SmallVector<NamedAttribute> attrs;
  if (n.getInt("transA", 0))
    attrs.push_back(n.unit("transpose_lhs"));
  if (n.getInt("transB", 0))
    attrs.push_back(n.unit("transpose_rhs"));
  FailureOr<Value> product =
      n.create<MatmulOp>(ValueRange{n.input(0), n.input(1)}, attrs);
  if (failed(product))
    return failure();
  Value y = *product;
  auto type = cast<RankedTensorType>(y.getType());
  double alpha = n.getFloat("alpha", 1.0), beta = n.getFloat("beta", 1.0);
  if (alpha != 1.0) {
    FailureOr<Value> scaled =
        n.create<MulOp>(ValueRange{y, n.splat(type, alpha)});
    if (failed(scaled))
      return failure();
    y = *scaled;
  }
  if (n.hasInput(2) && beta != 0.0) {
    FailureOr<Value> c = n.broadcastTo(n.input(2), type.getShape());
    if (failed(c))
      return failure();
    Value bias = *c;
    if (beta != 1.0) {
      FailureOr<Value> scaled =
          n.create<MulOp>(ValueRange{bias, n.splat(type, beta)});
      if (failed(scaled))
        return failure();
      bias = *scaled;
    }
    FailureOr<Value> sum = n.create<AddOp>(ValueRange{y, bias});
    if (failed(sum))
      return failure();
    y = *sum;
  }
  n.setOutput(0, y);
  return success();
}

/// Explicit begin-then-end paddings from `pads` or `auto_pad`, for windows
/// of `kernel` (already dilated) over `inputShape`.
FailureOr<SmallVector<int64_t>> windowPadding(NodeContext &n,
                                              ArrayRef<int64_t> inputShape,
                                              ArrayRef<int64_t> kernel,
                                              ArrayRef<int64_t> strides,
                                              ArrayRef<int64_t> dilations) {
  size_t spatial = kernel.size();
  std::string autoPad = n.getString("auto_pad", "NOTSET");
  SmallVector<int64_t> pads(2 * spatial, 0);
  if (autoPad == "NOTSET") {
    if (auto explicitPads = n.getInts("pads")) {
      if (explicitPads->size() != 2 * spatial)
        return n.fail("pads needs " + Twine(2 * spatial) + " entries");
      pads = *explicitPads;
    }
    return pads;
  }
  if (autoPad == "VALID")
    return pads;
  if (autoPad != "SAME_UPPER" && autoPad != "SAME_LOWER")
    return n.fail("auto_pad '" + autoPad + "' is not supported");
  for (size_t i = 0; i < spatial; ++i) {
    int64_t in = inputShape[i];
    int64_t out = llvm::divideCeil(in, strides[i]);
    int64_t span = (kernel[i] - 1) * dilations[i] + 1;
    int64_t total = std::max<int64_t>(0, (out - 1) * strides[i] + span - in);
    int64_t small = total / 2, large = total - small;
    pads[i] = autoPad == "SAME_UPPER" ? small : large;
    pads[i + spatial] = autoPad == "SAME_UPPER" ? large : small;
  }
  return pads;
}

SmallVector<int64_t> intsOr(NodeContext &n, StringRef name, size_t count,
                            int64_t fill) {
  SmallVector<int64_t> values =
      n.getInts(name).value_or(SmallVector<int64_t>{});
  if (values.empty())
    values.assign(count, fill);
  return values;
}

/// Adds a per-channel bias [C] to an NC... tensor.
FailureOr<Value> addChannelBias(NodeContext &n, Value x, Value bias) {
  auto type = cast<RankedTensorType>(x.getType());
  SmallVector<int64_t> shape(type.getRank(), 1);
  shape[1] = type.getDimSize(1);
  FailureOr<Value> reshaped = n.reshape(bias, shape);
  if (failed(reshaped))
    return failure();
  FailureOr<Value> expanded = n.broadcastTo(*reshaped, type.getShape());
  if (failed(expanded))
    return failure();
  return n.create<AddOp>(ValueRange{x, *expanded});
}

LogicalResult importConv(NodeContext &n) {
  if (failed(n.expectInputs(2, 3)))
    return failure();
  auto inputType = n.inputType(0), filterType = n.inputType(1);
  if (inputType.getRank() < 3 || filterType.getRank() != inputType.getRank())
    return n.fail("input and weight need the same rank, 3 or more");
  size_t spatial = inputType.getRank() - 2;
  SmallVector<int64_t> strides = intsOr(n, "strides", spatial, 1);
  SmallVector<int64_t> dilations = intsOr(n, "dilations", spatial, 1);
  if (strides.size() != spatial || dilations.size() != spatial)
    return n.fail("strides and dilations need " + Twine(spatial) + " entries");
  FailureOr<SmallVector<int64_t>> pads =
      windowPadding(n, inputType.getShape().drop_front(2),
                    filterType.getShape().drop_front(2), strides, dilations);
  if (failed(pads))
    return failure();
  FailureOr<Value> conv = n.create<ConvOp>(
      ValueRange{n.input(0), n.input(1)},
      {n.array("strides", strides), n.array("padding", *pads),
       n.array("dilations", dilations), n.i64("groups", n.getInt("group", 1))});
  if (failed(conv))
    return failure();
  if (!n.hasInput(2))
    return n.setResult(conv);
  return n.setResult(addChannelBias(n, *conv, n.input(2)));
}

LogicalResult importConvTranspose(NodeContext &n) {
  if (failed(n.expectInputs(2, 3)))
    return failure();
  auto inputType = n.inputType(0), filterType = n.inputType(1);
  if (inputType.getRank() < 3 || filterType.getRank() != inputType.getRank())
    return n.fail("input and weight need the same rank, 3 or more");
  size_t spatial = inputType.getRank() - 2;
  SmallVector<int64_t> strides = intsOr(n, "strides", spatial, 1);
  SmallVector<int64_t> dilations = intsOr(n, "dilations", spatial, 1);
  SmallVector<int64_t> outputPadding = intsOr(n, "output_padding", spatial, 0);
  if (strides.size() != spatial || dilations.size() != spatial ||
      outputPadding.size() != spatial)
    return n.fail("strides, dilations and output_padding need " +
                  Twine(spatial) + " entries");
  std::string autoPad = n.getString("auto_pad", "NOTSET");
  std::optional<SmallVector<int64_t>> outputShape = n.getInts("output_shape");
  SmallVector<int64_t> pads(2 * spatial, 0);
  if (auto explicitPads = n.getInts("pads")) {
    if (explicitPads->size() != 2 * spatial)
      return n.fail("pads needs " + Twine(2 * spatial) + " entries");
    pads = *explicitPads;
  }
  if (outputShape || autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    SmallVector<int64_t> target;
    if (outputShape) {
      // output_shape may include N and C.
      target.assign(outputShape->end() - std::min(outputShape->size(), spatial),
                    outputShape->end());
      if (target.size() != spatial)
        return n.fail("output_shape needs " + Twine(spatial) + " entries");
    } else {
      for (size_t i = 0; i < spatial; ++i)
        target.push_back(inputType.getDimSize(i + 2) * strides[i]);
    }
    for (size_t i = 0; i < spatial; ++i) {
      int64_t full = strides[i] * (inputType.getDimSize(i + 2) - 1) +
                     outputPadding[i] +
                     (filterType.getDimSize(i + 2) - 1) * dilations[i] + 1;
      int64_t total = full - target[i];
      if (total < 0) {
        outputPadding[i] += -total;
        total = 0;
      }
      int64_t half = total / 2;
      if (autoPad == "SAME_UPPER") {
        pads[i] = half;
        pads[i + spatial] = total - half;
      } else {
        pads[i] = total - half;
        pads[i + spatial] = half;
      }
    }
  } else if (autoPad != "NOTSET" && autoPad != "VALID") {
    return n.fail("auto_pad '" + autoPad + "' is not supported");
  }
  FailureOr<Value> conv = n.create<ConvTransposeOp>(
      ValueRange{n.input(0), n.input(1)},
      {n.array("strides", strides), n.array("padding", pads),
       n.array("dilations", dilations),
       n.array("output_padding", outputPadding),
       n.i64("groups", n.getInt("group", 1))});
  if (failed(conv))
    return failure();
  if (!n.hasInput(2))
    return n.setResult(conv);
  return n.setResult(addChannelBias(n, *conv, n.input(2)));
}

/// A pool of `input` with the node's window attributes.
template <typename OpTy>
FailureOr<Value> buildPool(NodeContext &n, Value input) {
  auto type = cast<RankedTensorType>(input.getType());
  if (type.getRank() < 3)
    return n.fail("input needs rank 3 or more");
  size_t spatial = type.getRank() - 2;
  std::optional<SmallVector<int64_t>> kernel = n.getInts("kernel_shape");
  if (!kernel || kernel->size() != spatial)
    return n.fail("kernel_shape needs " + Twine(spatial) + " entries");
  SmallVector<int64_t> strides = intsOr(n, "strides", spatial, 1);
  SmallVector<int64_t> dilations = intsOr(n, "dilations", spatial, 1);
  if (strides.size() != spatial || dilations.size() != spatial)
    return n.fail("strides and dilations need " + Twine(spatial) + " entries");
  FailureOr<SmallVector<int64_t>> pads = windowPadding(
      n, type.getShape().drop_front(2), *kernel, strides, dilations);
  if (failed(pads))
    return failure();
  SmallVector<NamedAttribute> attrs{n.array("kernel", *kernel),
                                    n.array("strides", strides),
                                    n.array("padding", *pads)};
  if (n.getInt("ceil_mode", 0))
    attrs.push_back(n.unit("ceil_mode"));
  if constexpr (std::is_same_v<OpTy, MaxPoolOp>) {
    if (n.getInt("storage_order", 0) != 0)
      return n.fail("column-major storage_order is not supported");
    if (llvm::any_of(dilations, [](int64_t d) { return d != 1; }))
      attrs.push_back(n.array("dilations", dilations));
  } else {
    if (llvm::any_of(dilations, [](int64_t d) { return d != 1; }))
      attrs.push_back(n.array("dilations", dilations));
    if (n.getInt("count_include_pad", 0))
      attrs.push_back(n.unit("count_include_pad"));
  }
  return n.create<OpTy>(input, attrs);
}

template <typename OpTy> LogicalResult importPool(NodeContext &n) {
  if (failed(n.expectInputs(1, 1)))
    return failure();
  if (n.wantsOutput(1))
    return n.fail("the Indices output is not supported");
  return n.setResult(buildPool<OpTy>(n, n.input(0)));
}

/// (the sum of |x|^p over each window)^(1/p): an average pool of |x|^p
/// times its divisors (zero padding adds nothing to the sums).
LogicalResult importLpPool(NodeContext &n) {
  if (failed(n.expectInputs(1, 1)))
    return failure();
  int64_t p = n.getInt("p", 2);
  if (p < 1)
    return n.fail("p must be 1 or more, not " + Twine(p));
  Value x = n.input(0);
  RankedTensorType type = n.inputType(0);
  FailureOr<Value> magnitude = n.create<AbsOp>(x);
  if (failed(magnitude))
    return failure();
  FailureOr<Value> powered = magnitude;
  if (p > 1)
    powered = n.create<PowOp>(ValueRange{*magnitude, n.splat(type, p)});
  if (failed(powered))
    return failure();
  FailureOr<Value> average = buildPool<AvgPoolOp>(n, *powered);
  if (failed(average))
    return failure();
  auto pool = average->getDefiningOp<AvgPoolOp>();
  if (!pool)
    return n.fail("expected an average pool");
  auto outType = cast<RankedTensorType>(pool.getType());
  FailureOr<Value> divisors =
      n.broadcastTo(n.constant(pool.getDivisors()), outType.getShape());
  if (failed(divisors))
    return failure();
  FailureOr<Value> sum = n.create<MulOp>(ValueRange{*average, *divisors});
  if (failed(sum) || p == 1)
    return n.setResult(sum);
  return n.setResult(
      n.create<PowOp>(ValueRange{*sum, n.splat(outType, 1.0 / p)}));
}

template <typename ReduceTy> LogicalResult importGlobalPool(NodeContext &n) {
  if (failed(n.expectInputs(1, 1)))
    return failure();
  auto type = n.inputType(0);
  if (type.getRank() < 3)
    return n.fail("input needs rank 3 or more");
  SmallVector<int64_t> dims;
  for (int64_t d = 2; d < type.getRank(); ++d)
    dims.push_back(d);
  return n.setResult(n.create<ReduceTy>(
      n.input(0), {n.array("dimensions", dims), n.unit("keepdims")}));
}

LogicalResult importDropout(NodeContext &n) {
  if (failed(n.expectInputs(1, 3)))
    return failure();
  auto type = n.inputType(0);
  bool training = false;
  double ratio = n.getFloat("ratio", 0.5);
  if (n.opset < 7 && n.getInt("is_test", 0) == 0)
    return n.fail("training-mode Dropout (is_test = 0) before opset 7 is not "
                  "supported");
  if (n.opset >= 12) {
    if (n.hasInput(1)) {
      FailureOr<SmallVector<double>> r = n.constFloats(1, "ratio");
      if (failed(r))
        return failure();
      if (r->size() != 1)
        return n.fail("ratio must be a scalar");
      ratio = r->front();
    }
    if (n.hasInput(2)) {
      FailureOr<SmallVector<double>> mode = n.constFloats(2, "training_mode");
      if (failed(mode))
        return failure();
      if (mode->size() != 1)
        return n.fail("training_mode must be a scalar");
      training = mode->front() != 0;
    }
  }
  auto maskType = type.clone(n.b.getI1Type());
  if (!training || ratio == 0.0) {
    n.setOutput(0, n.input(0));
    n.setOutput(1, n.splat(maskType, 1));
    return success();
  }
  // Without a seed attribute each node still needs its own random stream:
  // derive one from the node's first output name, stable across imports.
  int64_t seedValue = n.getOptionalInt("seed").value_or(
      static_cast<int64_t>(llvm::xxh3_64bits(n.node.output(0)) >> 12));
  Value seed = n.constant(DenseElementsAttr::get(
      RankedTensorType::get({}, n.b.getI64Type()), seedValue));
  FailureOr<Operation *> op = n.createOp<DropoutOp>(
      ValueRange{n.input(0), seed}, {n.f64("ratio", ratio)});
  if (failed(op))
    return failure();
  n.setOutput(0, (*op)->getResult(0));
  n.setOutput(1, (*op)->getResult(1));
  return success();
}

/// Resize (opsets 10 to 19) and Upsample (7 to 9).
LogicalResult importResize(NodeContext &n) {
  bool upsample = n.node.op_type() == "Upsample";
  if (failed(n.expectInputs(1, 4)))
    return failure();
  auto type = n.inputType(0);
  int64_t rank = type.getRank();
  SmallVector<double> scales;
  SmallVector<int64_t> sizes;
  if (upsample && n.opset < 9) {
    scales = n.getFloats("scales").value_or(SmallVector<double>{});
  } else {
    unsigned scalesInput = upsample || n.opset < 11 ? 1 : 2;
    if (!upsample && n.opset >= 11 && n.hasInput(3)) {
      FailureOr<SmallVector<int64_t>> s = n.constInts(3, "sizes");
      if (failed(s))
        return failure();
      sizes = *s;
    }
    if (sizes.empty() && n.hasInput(scalesInput)) {
      FailureOr<SmallVector<double>> s = n.constFloats(scalesInput, "scales");
      if (failed(s))
        return failure();
      scales = *s;
    }
  }
  // Since opset 18 `axes` names the dimensions scales and sizes give; the
  // others keep their size.
  SmallVector<int64_t> axes;
  if (n.opset >= 18 && n.attr("axes")) {
    SmallVector<int64_t> given =
        n.getInts("axes").value_or(SmallVector<int64_t>{});
    for (int64_t axis : given) {
      FailureOr<int64_t> a = n.normalizeAxis(axis, rank);
      if (failed(a))
        return failure();
      if (llvm::is_contained(axes, *a))
        return n.fail("axis " + Twine(axis) + " is given twice");
      axes.push_back(*a);
    }
    SmallVector<int64_t> allSizes(type.getShape());
    SmallVector<double> allScales(rank, 1.0);
    if (!sizes.empty() && sizes.size() != axes.size())
      return n.fail("sizes needs one entry per axis");
    if (sizes.empty() && scales.size() != axes.size())
      return n.fail("scales needs one entry per axis");
    for (auto [i, d] : llvm::enumerate(axes)) {
      if (!sizes.empty())
        allSizes[d] = sizes[i];
      else
        allScales[d] = scales[i];
    }
    if (!sizes.empty())
      sizes = std::move(allSizes);
    else
      scales = std::move(allScales);
  } else {
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  }
  if (!sizes.empty()) {
    if (static_cast<int64_t>(sizes.size()) != rank)
      return n.fail("sizes needs one entry per dimension");
    scales.clear();
    for (int64_t d = 0; d < rank; ++d) {
      if (sizes[d] < 0)
        return n.fail("sizes must not be negative");
      scales.push_back(type.getDimSize(d) == 0 ? 1.0
                                               : static_cast<double>(sizes[d]) /
                                                     type.getDimSize(d));
    }
    // keep_aspect_ratio_policy (opset 18): one scale for every axis, the
    // smallest (not_larger) or the largest (not_smaller) of the sizes'.
    std::string policy =
        n.opset >= 18 ? n.getString("keep_aspect_ratio_policy", "stretch")
                      : "stretch";
    if (policy == "not_larger" || policy == "not_smaller") {
      double scale = scales[axes.front()];
      for (int64_t d : axes)
        scale = policy == "not_larger" ? std::min(scale, scales[d])
                                       : std::max(scale, scales[d]);
      for (int64_t d : axes) {
        scales[d] = scale;
        // Rounded half up, as the operator's definition does.
        sizes[d] = static_cast<int64_t>(
            std::floor(scale * static_cast<double>(type.getDimSize(d)) + 0.5));
      }
    } else if (policy != "stretch") {
      return n.fail("keep_aspect_ratio_policy '" + policy +
                    "' is not stretch, not_larger or not_smaller");
    }
  } else {
    if (static_cast<int64_t>(scales.size()) != rank)
      return n.fail("scales needs one entry per dimension");
    for (int64_t d = 0; d < rank; ++d) {
      if (!(scales[d] > 0) || !std::isfinite(scales[d]))
        return n.fail("scales must be positive and finite");
      // Checked before it becomes an integer: a larger double has none.
      double size =
          std::floor(static_cast<double>(type.getDimSize(d)) * scales[d]);
      if (!(size <= static_cast<double>(std::numeric_limits<int32_t>::max())))
        return n.fail("scales give dimension " + Twine(d) +
                      " more than 2147483647 elements");
      sizes.push_back(static_cast<int64_t>(size));
    }
  }
  std::string mode = n.getString("mode", "nearest");
  ResizeMode resizeMode;
  if (mode == "nearest")
    resizeMode = ResizeMode::nearest;
  else if (mode == "linear" || mode == "bilinear")
    resizeMode = ResizeMode::linear;
  else if (mode == "cubic" && !upsample && n.opset >= 11)
    resizeMode = ResizeMode::cubic;
  else
    return n.fail("mode '" + mode + "' is not supported");
  // antialias (opset 18) widens the linear and cubic filters where they
  // shrink a dimension; elsewhere it changes nothing.
  if (n.opset >= 18 && n.getInt("antialias", 0) != 0 &&
      resizeMode != ResizeMode::nearest &&
      llvm::any_of(scales, [](double s) { return s < 1.0; }))
    return n.fail("antialias when downscaling is not supported yet");
  // Before opset 11 coordinates are asymmetric and nearest rounds down.
  bool legacy = upsample || n.opset < 11;
  std::string coordinate =
      legacy ? "asymmetric"
             : n.getString("coordinate_transformation_mode", "half_pixel");
  CoordinateMode coordinateMode;
  if (coordinate == "half_pixel")
    coordinateMode = CoordinateMode::half_pixel;
  else if (coordinate == "pytorch_half_pixel")
    coordinateMode = CoordinateMode::pytorch_half_pixel;
  else if (coordinate == "align_corners")
    coordinateMode = CoordinateMode::align_corners;
  else if (coordinate == "asymmetric")
    coordinateMode = CoordinateMode::asymmetric;
  else if (coordinate == "tf_half_pixel_for_nn")
    coordinateMode = CoordinateMode::tf_half_pixel_for_nn;
  else
    return n.fail("coordinate_transformation_mode '" + coordinate +
                  "' is not supported");
  std::string rounding =
      legacy ? "floor" : n.getString("nearest_mode", "round_prefer_floor");
  NearestMode nearestMode;
  if (rounding == "round_prefer_floor")
    nearestMode = NearestMode::round_prefer_floor;
  else if (rounding == "round_prefer_ceil")
    nearestMode = NearestMode::round_prefer_ceil;
  else if (rounding == "floor")
    nearestMode = NearestMode::floor;
  else if (rounding == "ceil")
    nearestMode = NearestMode::ceil;
  else
    return n.fail("nearest_mode '" + rounding + "' is not supported");
  SmallVector<NamedAttribute> attrs{
      n.named("mode", ResizeModeAttr::get(n.ctx, resizeMode)),
      n.named("coordinate_mode",
              CoordinateModeAttr::get(n.ctx, coordinateMode)),
      n.named("nearest_mode", NearestModeAttr::get(n.ctx, nearestMode)),
      n.named("scales", n.b.getDenseF64ArrayAttr(scales)),
      n.f64("cubic_coeff_a", n.getFloat("cubic_coeff_a", -0.75))};
  if (n.getInt("exclude_outside", 0))
    attrs.push_back(n.unit("exclude_outside"));
  return n.setResult(
      n.create<ResizeOp>(n.input(0), attrs, {type.clone(sizes)}));
}

/// MeanVarianceNormalization, as its function body: (x - E[x]) /
/// (sqrt(E[x^2] - E[x]^2) + 1e-9), the expectations over `axes` (0, 2, 3).
LogicalResult importMeanVarianceNormalization(NodeContext &n) {
  if (failed(n.expectInputs(1, 1)))
    return failure();
  RankedTensorType type = n.inputType(0);
  if (!isa<FloatType>(type.getElementType()))
    return n.fail("expected a float input");
  SmallVector<int64_t> axes;
  for (int64_t axis :
       n.getInts("axes").value_or(SmallVector<int64_t>{0, 2, 3})) {
    FailureOr<int64_t> normalized = n.normalizeAxis(axis, type.getRank());
    if (failed(normalized))
      return failure();
    axes.push_back(*normalized);
  }
  llvm::sort(axes);
  axes.erase(llvm::unique(axes), axes.end());
  auto mean = [&](Value v) -> FailureOr<Value> {
    FailureOr<Value> reduced = n.create<ReduceMeanOp>(
        v, {n.array("dimensions", axes), n.unit("keepdims")});
    if (failed(reduced))
      return failure();
    return n.broadcastTo(*reduced, type.getShape());
  };
  Value x = n.input(0);
  FailureOr<Value> square = n.create<MulOp>(ValueRange{x, x});
  if (failed(square))
    return failure();
  FailureOr<Value> average = mean(x), averageSquare = mean(*square);
  if (failed(average) || failed(averageSquare))
    return failure();
  FailureOr<Value> variance = n.create<MulOp>(ValueRange{*average, *average});
  if (failed(variance))
    return failure();
  variance = n.create<SubOp>(ValueRange{*averageSquare, *variance});
  if (failed(variance))
    return failure();
  FailureOr<Value> deviation = n.create<SqrtOp>(*variance);
  if (failed(deviation))
    return failure();
  deviation = n.create<AddOp>(ValueRange{*deviation, n.splat(type, 1e-9)});
  if (failed(deviation))
    return failure();
  FailureOr<Value> centered = n.create<SubOp>(ValueRange{x, *average});
  if (failed(centered))
    return failure();
  return n.setResult(n.create<DivOp>(ValueRange{*centered, *deviation}));
}

/// LRN: y = x / (bias + alpha / size * s)^beta, where s sums x^2 over the
/// channels within [c - floor((size - 1) / 2), c + ceil((size - 1) / 2)]:
/// the sum of `size` shifted slices of x^2 padded with zeros along channels.
LogicalResult importLRN(NodeContext &n) {
  if (failed(n.expectInputs(1, 1)))
    return failure();
  RankedTensorType type = n.inputType(0);
  if (!isa<FloatType>(type.getElementType()) || type.getRank() < 2)
    return n.fail("expected a float input of rank 2 or more");
  int64_t size = n.getInt("size", 0);
  if (size <= 0)
    return n.fail("size must be positive");
  double alpha = n.getFloat("alpha", 1e-4), beta = n.getFloat("beta", 0.75),
         bias = n.getFloat("bias", 1.0);
  Value x = n.input(0);
  FailureOr<Value> square = n.create<MulOp>(ValueRange{x, x});
  if (failed(square))
    return failure();
  int64_t rank = type.getRank(), channels = type.getDimSize(1);
  SmallVector<int64_t> low(rank, 0), high(rank, 0);
  low[1] = (size - 1) / 2;
  high[1] = size - 1 - low[1];
  FailureOr<Value> padded = n.create<PadOp>(
      *square, {n.array("low", low), n.array("high", high),
                n.named("mode", PadModeAttr::get(n.ctx, PadMode::constant)),
                n.f64("value", 0.0)});
  if (failed(padded))
    return failure();
  auto paddedShape = cast<RankedTensorType>(padded->getType()).getShape();
  Value sum;
  for (int64_t offset = 0; offset < size; ++offset) {
    SmallVector<int64_t> start(rank, 0), limit(paddedShape), stride(rank, 1);
    start[1] = offset;
    limit[1] = offset + channels;
    FailureOr<Value> window = n.create<SliceOp>(
        *padded, {n.array("start", start), n.array("limit", limit),
                  n.array("stride", stride)});
    if (failed(window))
      return failure();
    if (!sum) {
      sum = *window;
      continue;
    }
    FailureOr<Value> added = n.create<AddOp>(ValueRange{sum, *window});
    if (failed(added))
      return failure();
    sum = *added;
  }
  FailureOr<Value> scaled =
      n.create<MulOp>(ValueRange{sum, n.splat(type, alpha / size)});
  if (failed(scaled))
    return failure();
  FailureOr<Value> base =
      n.create<AddOp>(ValueRange{*scaled, n.splat(type, bias)});
  if (failed(base))
    return failure();
  FailureOr<Value> power =
      n.create<PowOp>(ValueRange{*base, n.splat(type, beta)});
  if (failed(power))
    return failure();
  return n.setResult(n.create<DivOp>(ValueRange{x, *power}));
}

} // namespace

void kiln::onnx_import::registerNNOps(OpImporterTable &t) {
  t["LRN"] = importLRN;
  t["MeanVarianceNormalization"] = importMeanVarianceNormalization;
  t["Resize"] = importResize;
  t["Upsample"] = importResize;
  t["MatMul"] = importMatMul;
  t["MatMulInteger"] = importMatMulInteger;
  t["QLinearMatMul"] = importQLinearMatMul;
  t["Gemm"] = importGemm;
  t["Conv"] = importConv;
  t["ConvTranspose"] = importConvTranspose;
  t["MaxPool"] = importPool<MaxPoolOp>;
  t["AveragePool"] = importPool<AvgPoolOp>;
  t["LpPool"] = importLpPool;
  t["GlobalAveragePool"] = importGlobalPool<ReduceMeanOp>;
  t["GlobalMaxPool"] = importGlobalPool<ReduceMaxOp>;
  t["Dropout"] = importDropout;
}
