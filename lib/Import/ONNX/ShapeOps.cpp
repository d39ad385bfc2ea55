//===- ShapeOps.cpp - importers of shape and data-movement ONNX ops -------===//

#include "NodeContext.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace kiln;
using namespace kiln::onnx_import;

namespace {

LogicalResult importShape(NodeContext &n) {
  if (failed(n.expectInputs(1, 1)))
    return failure();
  ArrayRef<int64_t> shape = n.inputType(0).getShape();
  int64_t rank = shape.size();
  int64_t start = n.getInt("start", 0), end = n.getInt("end", rank);
  auto clampIndex = [rank](int64_t i) {
    if (i < 0)
      i += rank;
    return std::clamp<int64_t>(i, 0, rank);
  };
  start = clampIndex(start);
  end = clampIndex(end);
  n.setOutput(
      0, n.i64Vector(shape.slice(start, std::max<int64_t>(0, end - start))));
  return success();
}

LogicalResult importSize(NodeContext &n) {
  if (failed(n.expectInputs(1, 1)))
    return failure();
  n.setOutput(0,
              n.scalar(n.b.getI64Type(),
                       static_cast<double>(n.inputType(0).getNumElements())));
  return success();
}

LogicalResult importReshape(NodeContext &n) {
  SmallVector<int64_t> target;
  if (n.opset < 5) {
    target = n.getInts("shape").value_or(SmallVector<int64_t>{});
  } else {
    if (failed(n.expectInputs(2, 2)))
      return failure();
    FailureOr<SmallVector<int64_t>> shape = n.constInts(1, "shape");
    if (failed(shape))
      return failure();
    target = *shape;
  }
  auto type = n.inputType(0);
  bool allowZero = n.getInt("allowzero", 0) != 0;
  int64_t known = 1, inferred = -1;
  for (auto [i, dim] : llvm::enumerate(target)) {
    if (dim == 0 && !allowZero) {
      if (static_cast<int64_t>(i) >= type.getRank())
        return n.fail("shape entry " + Twine(i) +
                      " is 0 (copy) but the input has rank " +
                      Twine(type.getRank()));
      dim = type.getDimSize(i);
    }
    if (dim == -1) {
      if (inferred >= 0)
        return n.fail("shape has more than one -1");
      inferred = i;
      continue;
    }
    if (dim < 0)
      return n.fail("shape entry " + Twine(dim) + " is invalid");
    known *= dim;
  }
  if (inferred >= 0) {
    if (known == 0 || type.getNumElements() % known != 0)
      return n.fail(
          "cannot infer the -1 dimension: " + Twine(type.getNumElements()) +
          " elements do not divide by " + Twine(known));
    target[inferred] = type.getNumElements() / known;
  }
  return n.setResult(n.reshape(n.input(0), target));
}

LogicalResult importFlatten(NodeContext &n) {
  if (failed(n.expectInputs(1, 1)))
    return failure();
  auto type = n.inputType(0);
  int64_t axis = n.getInt("axis", 1);
  if (axis < 0)
    axis += type.getRank();
  if (axis < 0 || axis > type.getRank())
    return n.fail("axis is out of range");
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= type.getDimSize(d);
  int64_t inner = type.getNumElements() / std::max<int64_t>(outer, 1);
  if (outer == 0)
    inner = 1;
  for (int64_t d = axis; d < type.getRank() && outer == 0; ++d)
    inner *= type.getDimSize(d);
  return n.setResult(n.reshape(n.input(0), {outer, inner}));
}

/// Axes from the attribute (older opsets) or the second input.
FailureOr<std::optional<SmallVector<int64_t>>> axesOf(NodeContext &n,
                                                      int64_t inputSince) {
  if (n.opset < inputSince)
    return n.getInts("axes");
  if (!n.hasInput(1))
    return std::optional<SmallVector<int64_t>>();
  FailureOr<SmallVector<int64_t>> axes = n.constInts(1, "axes");
  if (failed(axes))
    return failure();
  return std::optional<SmallVector<int64_t>>(*axes);
}

LogicalResult importSqueeze(NodeContext &n) {
  if (failed(n.expectInputs(1, 2)))
    return failure();
  auto type = n.inputType(0);
  FailureOr<std::optional<SmallVector<int64_t>>> axes = axesOf(n, 13);
  if (failed(axes))
    return failure();
  SmallVector<bool> drop(type.getRank(), false);
  if (*axes) {
    for (int64_t axis : **axes) {
      FailureOr<int64_t> a = n.normalizeAxis(axis, type.getRank());
      if (failed(a))
        return failure();
      if (type.getDimSize(*a) != 1)
        return n.fail("cannot squeeze dimension " + Twine(*a) + " of size " +
                      Twine(type.getDimSize(*a)));
      drop[*a] = true;
    }
  } else {
    for (int64_t d = 0; d < type.getRank(); ++d)
      drop[d] = type.getDimSize(d) == 1;
  }
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (!drop[d])
      shape.push_back(type.getDimSize(d));
  return n.setResult(n.reshape(n.input(0), shape));
}

LogicalResult importUnsqueeze(NodeContext &n) {
  if (failed(n.expectInputs(1, 2)))
    return failure();
  auto type = n.inputType(0);
  FailureOr<std::optional<SmallVector<int64_t>>> axes = axesOf(n, 13);
  if (failed(axes))
    return failure();
  if (!*axes)
    return n.fail("axes are required");
  int64_t rank = type.getRank() + (*axes)->size();
  SmallVector<bool> inserted(rank, false);
  for (int64_t axis : **axes) {
    FailureOr<int64_t> a = n.normalizeAxis(axis, rank);
    if (failed(a))
      return failure();
    if (inserted[*a])
      return n.fail("axis " + Twine(axis) + " appears twice");
    inserted[*a] = true;
  }
  SmallVector<int64_t> shape;
  int64_t next = 0;
  for (int64_t d = 0; d < rank; ++d)
    shape.push_back(inserted[d] ? 1 : type.getDimSize(next++));
  return n.setResult(n.reshape(n.input(0), shape));
}

LogicalResult importTranspose(NodeContext &n) {
  if (failed(n.expectInputs(1, 1)))
    return failure();
  int64_t rank = n.inputType(0).getRank();
  SmallVector<int64_t> perm =
      n.getInts("perm").value_or(SmallVector<int64_t>{});
  if (perm.empty())
    for (int64_t d = rank - 1; d >= 0; --d)
      perm.push_back(d);
  for (int64_t &p : perm)
    if (p < 0)
      p += rank;
  return n.setResult(
      n.create<TransposeOp>(n.input(0), {n.array("permutation", perm)}));
}

LogicalResult importExpand(NodeContext &n) {
  if (failed(n.expectInputs(2, 2)))
    return failure();
  FailureOr<SmallVector<int64_t>> shape = n.constInts(1, "shape");
  if (failed(shape))
    return failure();
  // The result is the broadcast of the input shape with `shape`.
  auto type = n.inputType(0);
  SmallVector<Value> operands{
      n.input(0),
      n.splat(RankedTensorType::get(*shape, type.getElementType()), 0)};
  for (int64_t dim : *shape)
    if (dim < 0)
      return n.fail("shape entry " + Twine(dim) + " is invalid");
  if (failed(n.broadcastAll(operands)))
    return failure();
  n.setOutput(0, operands[0]);
  return success();
}

LogicalResult importTile(NodeContext &n) {
  if (failed(n.expectInputs(2, 2)))
    return failure();
  FailureOr<SmallVector<int64_t>> repeats = n.constInts(1, "repeats");
  if (failed(repeats))
    return failure();
  return n.setResult(
      n.create<TileOp>(n.input(0), {n.array("multiples", *repeats)}));
}

LogicalResult importConcat(NodeContext &n) {
  if (n.numInputs() < 1)
    return n.fail("expected at least one input");
  SmallVector<Value> operands;
  for (unsigned i = 0; i < n.numInputs(); ++i) {
    if (!n.hasInput(i))
      return n.fail("input " + Twine(i) +
                    " is missing (Concat's inputs are "
                    "not optional)");
    operands.push_back(n.input(i));
  }
  FailureOr<int64_t> axis = n.normalizeAxis(
      n.getInt("axis", 0),
      cast<RankedTensorType>(operands.front().getType()).getRank());
  if (failed(axis))
    return failure();
  return n.setResult(n.create<ConcatOp>(operands, {n.i64("axis", *axis)}));
}

LogicalResult importSplit(NodeContext &n) {
  if (failed(n.expectInputs(1, 2)))
    return failure();
  auto type = n.inputType(0);
  FailureOr<int64_t> axis =
      n.normalizeAxis(n.getInt("axis", 0), type.getRank());
  if (failed(axis))
    return failure();
  SmallVector<int64_t> sizes;
  if (n.opset < 13) {
    sizes = n.getInts("split").value_or(SmallVector<int64_t>{});
  } else if (n.hasInput(1)) {
    FailureOr<SmallVector<int64_t>> split = n.constInts(1, "split");
    if (failed(split))
      return failure();
    sizes = *split;
  }
  int64_t pieces = n.numOutputs();
  int64_t dim = type.getDimSize(*axis);
  // Since opset 18, num_outputs splits into parts of ceil(dim / parts), the
  // last one smaller where the dimension does not divide.
  if (n.opset >= 18 && n.attr("num_outputs")) {
    int64_t parts = n.getInt("num_outputs", 0);
    if (!sizes.empty())
      return n.fail("split and num_outputs are both given");
    if (parts != pieces)
      return n.fail("num_outputs is " + Twine(parts) + " but the node has " +
                    Twine(pieces) + " outputs");
    int64_t part = pieces < 1 ? 0 : (dim + pieces - 1) / pieces;
    if (pieces < 1 || dim - part * (pieces - 1) < 0)
      return n.fail("dimension " + Twine(dim) + " does not split into " +
                    Twine(pieces) + " parts of " + Twine(part));
    sizes.assign(pieces, part);
    sizes.back() = dim - part * (pieces - 1);
  }
  if (sizes.empty()) {
    if (pieces < 1 || dim % pieces != 0)
      return n.fail("dimension " + Twine(dim) + " does not split evenly into " +
                    Twine(pieces) + " outputs");
    sizes.assign(pieces, dim / pieces);
  }
  if (static_cast<int64_t>(sizes.size()) != pieces)
    return n.fail(Twine(sizes.size()) + " split sizes for " + Twine(pieces) +
                  " outputs");
  FailureOr<Operation *> op = n.createOp<SplitOp>(
      n.input(0), {n.i64("axis", *axis), n.array("sizes", sizes)});
  if (failed(op))
    return failure();
  for (unsigned i = 0; i < (*op)->getNumResults(); ++i)
    n.setOutput(i, (*op)->getResult(i));
  return success();
}

/// Slices `x` along the given axes, ONNX style: negative indices count from
/// the end, bounds clamp, negative steps walk backwards.
FailureOr<Value> sliceAlong(NodeContext &n, Value x, ArrayRef<int64_t> starts,
                            ArrayRef<int64_t> ends, ArrayRef<int64_t> axes,
                            ArrayRef<int64_t> steps) {
  auto type = cast<RankedTensorType>(x.getType());
  int64_t rank = type.getRank();
  SmallVector<int64_t> start(rank, 0), limit(type.getShape()), stride(rank, 1);
  SmallVector<int64_t> reversed;
  SmallVector<bool> seen(rank, false);
  for (size_t i = 0; i < axes.size(); ++i) {
    FailureOr<int64_t> axis = n.normalizeAxis(axes[i], rank);
    if (failed(axis))
      return failure();
    if (seen[*axis])
      return n.fail("axis " + Twine(axes[i]) + " is sliced twice");
    seen[*axis] = true;
    int64_t dim = type.getDimSize(*axis);
    int64_t step = steps.empty() ? 1 : steps[i];
    if (step == 0)
      return n.fail("slice step must not be 0");
    auto clampIndex = [&](int64_t index, int64_t low, int64_t high) {
      if (index < 0)
        index += dim;
      return std::clamp(index, low, high);
    };
    if (step > 0) {
      int64_t s = clampIndex(starts[i], 0, dim);
      int64_t e = clampIndex(ends[i], 0, dim);
      start[*axis] = s;
      limit[*axis] = std::max(s, e);
      stride[*axis] = step;
      continue;
    }
    if (dim == 0) {
      start[*axis] = limit[*axis] = 0;
      continue;
    }
    // Walk backwards from clamp(start, 0, dim-1) down to, not including,
    // clamp(end, -1, dim-1).
    int64_t first = clampIndex(starts[i], 0, dim - 1);
    int64_t last = clampIndex(ends[i], -1, dim - 1);
    // In reversed coordinates r = dim - 1 - i.
    int64_t rs = dim - 1 - first, re = dim - 1 - last;
    reversed.push_back(*axis);
    start[*axis] = std::clamp<int64_t>(rs, 0, dim);
    limit[*axis] = std::clamp<int64_t>(std::max(rs, re), start[*axis], dim);
    stride[*axis] = -step;
  }
  if (!reversed.empty()) {
    llvm::sort(reversed);
    FailureOr<Value> flipped =
        n.create<ReverseOp>(x, {n.array("dimensions", reversed)});
    if (failed(flipped))
      return failure();
    x = *flipped;
  }
  return n.create<SliceOp>(x, {n.array("start", start), n.array("limit", limit),
                               n.array("stride", stride)});
}

LogicalResult importSlice(NodeContext &n) {
  SmallVector<int64_t> starts, ends, axes, steps;
  int64_t rank = n.hasInput(0) ? n.inputType(0).getRank() : 0;
  if (n.opset < 10) {
    if (failed(n.expectInputs(1, 1)))
      return failure();
    starts = n.getInts("starts").value_or(SmallVector<int64_t>{});
    ends = n.getInts("ends").value_or(SmallVector<int64_t>{});
    axes = n.getInts("axes").value_or(SmallVector<int64_t>{});
  } else {
    if (failed(n.expectInputs(3, 5)))
      return failure();
    FailureOr<SmallVector<int64_t>> s = n.constInts(1, "starts");
    if (failed(s))
      return failure();
    FailureOr<SmallVector<int64_t>> e = n.constInts(2, "ends");
    if (failed(e))
      return failure();
    starts = *s;
    ends = *e;
    if (n.hasInput(3)) {
      FailureOr<SmallVector<int64_t>> a = n.constInts(3, "axes");
      if (failed(a))
        return failure();
      axes = *a;
    }
    if (n.hasInput(4)) {
      FailureOr<SmallVector<int64_t>> st = n.constInts(4, "steps");
      if (failed(st))
        return failure();
      steps = *st;
    }
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(i);
  if (starts.size() != ends.size() || axes.size() != starts.size() ||
      (!steps.empty() && steps.size() != starts.size()) ||
      static_cast<int64_t>(starts.size()) > rank)
    return n.fail("starts, ends, axes and steps differ in length");
  return n.setResult(sliceAlong(n, n.input(0), starts, ends, axes, steps));
}

/// Wrap-around padding along every dimension (Pad's `wrap`, opset 19), as
/// slices of `x` concatenated around it: the data is a torus, so a pad wider
/// than the dimension repeats it whole.
FailureOr<Value> wrapPad(NodeContext &n, Value x, ArrayRef<int64_t> low,
                         ArrayRef<int64_t> high) {
  for (int64_t d = 0, rank = low.size(); d < rank; ++d) {
    int64_t before = low[d], after = high[d];
    if (before == 0 && after == 0)
      continue;
    auto type = cast<RankedTensorType>(x.getType());
    int64_t size = type.getDimSize(d);
    if (size == 0)
      return n.fail("wrap padding of the empty dimension " + Twine(d));
    auto piece = [&](int64_t start, int64_t limit) {
      SmallVector<int64_t> starts(type.getRank(), 0), limits(type.getShape()),
          strides(type.getRank(), 1);
      starts[d] = start;
      limits[d] = limit;
      return n.create<SliceOp>(x, {n.array("start", starts),
                                   n.array("limit", limits),
                                   n.array("stride", strides)});
    };
    SmallVector<Value> parts;
    // The `before` elements that precede x on the torus, then x, then the
    // `after` that follow it.
    if (before % size) {
      FailureOr<Value> head = piece(size - before % size, size);
      if (failed(head))
        return failure();
      parts.push_back(*head);
    }
    parts.append(before / size + 1 + after / size, x);
    if (after % size) {
      FailureOr<Value> tail = piece(0, after % size);
      if (failed(tail))
        return failure();
      parts.push_back(*tail);
    }
    FailureOr<Value> joined = n.create<ConcatOp>(parts, {n.i64("axis", d)});
    if (failed(joined))
      return failure();
    x = *joined;
  }
  return x;
}

/// Crops or zero-pads each of `axes` (all by default) to the shape input,
/// centred; an odd difference puts the extra element at the end.
LogicalResult importCenterCropPad(NodeContext &n) {
  if (failed(n.expectInputs(2, 2)))
    return failure();
  Value x = n.input(0);
  RankedTensorType type = n.inputType(0);
  int64_t rank = type.getRank();
  FailureOr<SmallVector<int64_t>> shape = n.constInts(1, "shape");
  if (failed(shape))
    return failure();
  SmallVector<int64_t> axes;
  if (std::optional<SmallVector<int64_t>> given = n.getInts("axes"))
    axes = *given;
  else
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  if (axes.size() != shape->size())
    return n.fail("shape has " + std::to_string(shape->size()) +
                  " values for " + std::to_string(axes.size()) + " axes");
  SmallVector<int64_t> start(rank, 0), limit(type.getShape()), stride(rank, 1),
      low(rank, 0), high(rank, 0);
  for (auto [axis, size] : llvm::zip(axes, *shape)) {
    FailureOr<int64_t> d = n.normalizeAxis(axis, rank);
    if (failed(d))
      return failure();
    if (size < 0)
      return n.fail("shape value " + std::to_string(size) + " is negative");
    int64_t dim = type.getDimSize(*d);
    if (size < dim) {
      start[*d] = (dim - size) / 2;
      limit[*d] = start[*d] + size;
    } else {
      low[*d] = (size - dim) / 2;
      high[*d] = size - dim - low[*d];
    }
  }
  FailureOr<Value> cropped =
      n.create<SliceOp>(x, {n.array("start", start), n.array("limit", limit),
                            n.array("stride", stride)});
  if (failed(cropped))
    return failure();
  return n.setResult(
      n.create<PadOp>(*cropped, {n.array("low", low), n.array("high", high)}));
}

LogicalResult importPad(NodeContext &n) {
  // Since opset 18 an optional fourth input names the axes pads refer to.
  if (failed(n.expectInputs(1, n.opset >= 18 ? 4 : 3)))
    return failure();
  auto type = n.inputType(0);
  int64_t rank = type.getRank();
  SmallVector<int64_t> pads;
  double value = 0.0;
  if (n.opset < 11) {
    pads = n.getInts("pads").value_or(SmallVector<int64_t>{});
    value = n.getFloat("value", 0.0);
  } else {
    FailureOr<SmallVector<int64_t>> p = n.constInts(1, "pads");
    if (failed(p))
      return failure();
    pads = *p;
    if (n.hasInput(2)) {
      FailureOr<SmallVector<double>> v = n.constFloats(2, "constant_value");
      if (failed(v))
        return failure();
      if (v->size() != 1)
        return n.fail("constant_value must hold one value");
      value = v->front();
    }
  }
  if (n.hasInput(3)) {
    FailureOr<SmallVector<int64_t>> axes = n.constInts(3, "axes");
    if (failed(axes))
      return failure();
    if (pads.size() != 2 * axes->size())
      return n.fail("pads has " + Twine(pads.size()) + " entries for " +
                    Twine(axes->size()) + " axes");
    SmallVector<int64_t> full(2 * rank, 0);
    SmallVector<bool> seen(rank, false);
    for (auto [i, axis] : llvm::enumerate(*axes)) {
      FailureOr<int64_t> a = n.normalizeAxis(axis, rank);
      if (failed(a))
        return failure();
      if (seen[*a])
        return n.fail("axis " + Twine(axis) + " is given twice");
      seen[*a] = true;
      full[*a] = pads[i];
      full[rank + *a] = pads[axes->size() + i];
    }
    pads = std::move(full);
  }
  if (static_cast<int64_t>(pads.size()) != 2 * rank)
    return n.fail("pads has " + Twine(pads.size()) + " entries for rank " +
                  Twine(rank));
  std::string mode = n.getString("mode", "constant");
  PadMode padMode = PadMode::constant;
  bool wrap = false;
  if (mode == "constant")
    padMode = PadMode::constant;
  else if (mode == "reflect")
    padMode = PadMode::reflect;
  else if (mode == "edge")
    padMode = PadMode::edge;
  else if (mode == "wrap" && n.opset >= 19)
    wrap = true;
  else
    return n.fail("pad mode '" + mode + "' is not supported");
  // Negative pads crop: slice them off first.
  SmallVector<int64_t> low(pads.begin(), pads.begin() + rank),
      high(pads.begin() + rank, pads.end());
  Value x = n.input(0);
  bool crops = llvm::any_of(pads, [](int64_t p) { return p < 0; });
  if (crops) {
    SmallVector<int64_t> start(rank), limit(rank), stride(rank, 1);
    for (int64_t d = 0; d < rank; ++d) {
      start[d] = std::max<int64_t>(0, -low[d]);
      limit[d] = type.getDimSize(d) - std::max<int64_t>(0, -high[d]);
      if (limit[d] < start[d])
        return n.fail("negative pads remove more than dimension " + Twine(d));
      low[d] = std::max<int64_t>(0, low[d]);
      high[d] = std::max<int64_t>(0, high[d]);
    }
    FailureOr<Value> cropped =
        n.create<SliceOp>(x, {n.array("start", start), n.array("limit", limit),
                              n.array("stride", stride)});
    if (failed(cropped))
      return failure();
    x = *cropped;
  }
  if (wrap)
    return n.setResult(wrapPad(n, x, low, high));
  return n.setResult(
      n.create<PadOp>(x, {n.array("low", low), n.array("high", high),
                          n.named("mode", PadModeAttr::get(n.ctx, padMode)),
                          n.f64("value", value)}));
}

LogicalResult importGather(NodeContext &n) {
  if (failed(n.expectInputs(2, 2)))
    return failure();
  FailureOr<int64_t> axis =
      n.normalizeAxis(n.getInt("axis", 0), n.inputType(0).getRank());
  if (failed(axis))
    return failure();
  return n.setResult(n.create<GatherOp>(ValueRange{n.input(0), n.input(1)},
                                        {n.i64("axis", *axis)}));
}

LogicalResult importGatherElements(NodeContext &n) {
  if (failed(n.expectInputs(2, 2)))
    return failure();
  FailureOr<int64_t> axis =
      n.normalizeAxis(n.getInt("axis", 0), n.inputType(0).getRank());
  if (failed(axis))
    return failure();
  return n.setResult(n.create<GatherElementsOp>(
      ValueRange{n.input(0), n.input(1)}, {n.i64("axis", *axis)}));
}

/// Compress with a constant condition: a gather of the indices where it is
/// true (of the flattened input when there is no axis). A condition shorter
/// than the axis drops the rest, as the spec says.
LogicalResult importCompress(NodeContext &n) {
  if (failed(n.expectInputs(2, 2)))
    return failure();
  FailureOr<SmallVector<int64_t>> condition = n.constInts(1, "condition");
  if (failed(condition))
    return failure();
  Value x = n.input(0);
  RankedTensorType type = n.inputType(0);
  int64_t axis = 0;
  if (n.attr("axis")) {
    FailureOr<int64_t> normalized =
        n.normalizeAxis(n.getInt("axis", 0), type.getRank());
    if (failed(normalized))
      return failure();
    axis = *normalized;
  } else {
    FailureOr<Value> flat = n.reshape(x, {type.getNumElements()});
    if (failed(flat))
      return failure();
    x = *flat;
  }
  int64_t extent = cast<RankedTensorType>(x.getType()).getDimSize(axis);
  if (static_cast<int64_t>(condition->size()) > extent)
    return n.fail("condition has " + Twine(condition->size()) +
                  " elements, more than the " + Twine(extent) +
                  " along the axis");
  SmallVector<int64_t> kept;
  for (auto [i, keep] : llvm::enumerate(*condition))
    if (keep)
      kept.push_back(i);
  auto indexType = RankedTensorType::get({static_cast<int64_t>(kept.size())},
                                         n.b.getI64Type());
  Value indices = n.constant(DenseElementsAttr::get(indexType, ArrayRef(kept)));
  return n.setResult(
      n.create<GatherOp>(ValueRange{x, indices}, {n.i64("axis", axis)}));
}

/// ReverseSequence with constant sequence_lens: batch b's first lens[b]
/// steps reversed, the rest kept; a gather of elements along the time axis
/// at constant indices.
LogicalResult importReverseSequence(NodeContext &n) {
  if (failed(n.expectInputs(2, 2)))
    return failure();
  FailureOr<SmallVector<int64_t>> lengths = n.constInts(1, "sequence_lens");
  if (failed(lengths))
    return failure();
  RankedTensorType type = n.inputType(0);
  int64_t timeAxis = n.getInt("time_axis", 0),
          batchAxis = n.getInt("batch_axis", 1);
  if (type.getRank() < 2 ||
      !((timeAxis == 0 && batchAxis == 1) || (timeAxis == 1 && batchAxis == 0)))
    return n.fail("expected time_axis and batch_axis 0 and 1 (either way) "
                  "of an input of rank 2 or more");
  int64_t steps = type.getDimSize(timeAxis), batch = type.getDimSize(batchAxis);
  if (static_cast<int64_t>(lengths->size()) != batch)
    return n.fail("sequence_lens must hold one length per batch element");
  // [steps, batch] or [batch, steps] indices, spread over the other dims.
  SmallVector<int64_t> shape(type.getRank(), 1);
  shape[timeAxis] = steps;
  shape[batchAxis] = batch;
  SmallVector<int64_t> indices(steps * batch);
  for (int64_t b = 0; b < batch; ++b) {
    int64_t length = (*lengths)[b];
    if (length < 0 || length > steps)
      return n.fail("sequence length " + Twine(length) + " is outside [0, " +
                    Twine(steps) + "]");
    for (int64_t t = 0; t < steps; ++t) {
      int64_t at = timeAxis == 0 ? t * batch + b : b * steps + t;
      indices[at] = t < length ? length - 1 - t : t;
    }
  }
  auto indexType = RankedTensorType::get(shape, n.b.getI64Type());
  FailureOr<Value> spread = n.broadcastTo(
      n.constant(DenseElementsAttr::get(indexType, ArrayRef(indices))),
      type.getShape());
  if (failed(spread))
    return failure();
  return n.setResult(n.create<GatherElementsOp>(ValueRange{n.input(0), *spread},
                                                {n.i64("axis", timeAxis)}));
}

LogicalResult importGatherND(NodeContext &n) {
  if (failed(n.expectInputs(2, 2)))
    return failure();
  return n.setResult(
      n.create<GatherNdOp>(ValueRange{n.input(0), n.input(1)},
                           {n.i64("batch_dims", n.getInt("batch_dims", 0))}));
}

FailureOr<Reduction> scatterReduction(NodeContext &n) {
  std::string reduction = n.getString("reduction", "none");
  if (reduction == "none")
    return Reduction::none;
  if (reduction == "add")
    return Reduction::add;
  if (reduction == "mul")
    return Reduction::mul;
  if (reduction == "max")
    return Reduction::max;
  if (reduction == "min")
    return Reduction::min;
  return n.fail("reduction '" + reduction + "' is not supported");
}

LogicalResult importScatterElements(NodeContext &n) {
  if (failed(n.expectInputs(3, 3)))
    return failure();
  FailureOr<int64_t> axis =
      n.normalizeAxis(n.getInt("axis", 0), n.inputType(0).getRank());
  FailureOr<Reduction> reduction = scatterReduction(n);
  if (failed(axis) || failed(reduction))
    return failure();
  return n.setResult(n.create<ScatterElementsOp>(
      ValueRange{n.input(0), n.input(1), n.input(2)},
      {n.i64("axis", *axis),
       n.named("reduction", ReductionAttr::get(n.ctx, *reduction))},
      {n.input(0).getType()}));
}

LogicalResult importScatterND(NodeContext &n) {
  if (failed(n.expectInputs(3, 3)))
    return failure();
  FailureOr<Reduction> reduction = scatterReduction(n);
  if (failed(reduction))
    return failure();
  return n.setResult(n.create<ScatterNdOp>(
      ValueRange{n.input(0), n.input(1), n.input(2)},
      {n.named("reduction", ReductionAttr::get(n.ctx, *reduction))},
      {n.input(0).getType()}));
}

LogicalResult importConstantOfShape(NodeContext &n) {
  if (failed(n.expectInputs(1, 1)))
    return failure();
  FailureOr<SmallVector<int64_t>> shape = n.constInts(0, "shape");
  if (failed(shape))
    return failure();
  for (int64_t dim : *shape)
    if (dim < 0)
      return n.fail("shape entry " + Twine(dim) + " is negative");
  Type element = n.b.getF32Type();
  DenseElementsAttr fill;
  if (const onnx::AttributeProto *a = n.attr("value")) {
    FailureOr<DenseElementsAttr> value = n.tensorAttr(a->t());
    if (failed(value))
      return failure();
    if (value->getNumElements() != 1)
      return n.fail("value must hold exactly one element");
    fill = *value;
    element = fill.getElementType();
  }
  auto type = RankedTensorType::get(*shape, element);
  if (!fill) {
    n.setOutput(0, n.splat(type, 0.0));
    return success();
  }
  n.setOutput(0, n.constant(DenseElementsAttr::get(
                     type, *fill.value_begin<Attribute>())));
  return success();
}

LogicalResult importRange(NodeContext &n) {
  if (failed(n.expectInputs(3, 3)))
    return failure();
  FailureOr<SmallVector<double>> start = n.constFloats(0, "start");
  FailureOr<SmallVector<double>> limit = n.constFloats(1, "limit");
  FailureOr<SmallVector<double>> delta = n.constFloats(2, "delta");
  if (failed(start) || failed(limit) || failed(delta))
    return failure();
  if (start->size() != 1 || limit->size() != 1 || delta->size() != 1)
    return n.fail("start, limit and delta must be scalars");
  double s = start->front(), l = limit->front(), d = delta->front();
  if (!std::isfinite(s) || !std::isfinite(l) || !std::isfinite(d))
    return n.fail("start, limit and delta must be finite");
  if (d == 0)
    return n.fail("delta must not be 0");
  // Checked before it becomes an integer: a larger double has none.
  double steps = std::max(0.0, std::ceil((l - s) / d));
  if (!(steps <= static_cast<double>(std::numeric_limits<int32_t>::max())))
    return n.fail("start, limit and delta give more than 2147483647 "
                  "elements");
  int64_t count = static_cast<int64_t>(steps);
  auto type = RankedTensorType::get({count}, n.inputType(0).getElementType());
  return n.setResult(n.create<IotaOp>(
      ValueRange{},
      {n.i64("dimension", 0), n.f64("start", s), n.f64("step", d)}, {type}));
}

LogicalResult importEyeLike(NodeContext &n) {
  if (failed(n.expectInputs(1, 1)))
    return failure();
  auto type = n.inputType(0);
  if (type.getRank() != 2)
    return n.fail("input must be a matrix");
  Type element = type.getElementType();
  if (auto dtype = n.getOptionalInt("dtype")) {
    element = elementTypeOf(static_cast<int32_t>(*dtype), n.ctx);
    if (!element)
      return n.fail("dtype is not supported");
  }
  auto resultType = type.clone(element);
  int64_t k = n.getInt("k", 0);
  auto rows = n.create<IotaOp>(ValueRange{}, {n.i64("dimension", 0)},
                               {type.clone(n.b.getI64Type())});
  auto cols = n.create<IotaOp>(ValueRange{},
                               {n.i64("dimension", 1), n.f64("start", -k)},
                               {type.clone(n.b.getI64Type())});
  if (failed(rows) || failed(cols))
    return failure();
  auto diagonal = n.create<CompareOp>(
      ValueRange{*rows, *cols},
      {n.named("predicate",
               ComparePredicateAttr::get(n.ctx, ComparePredicate::eq))});
  if (failed(diagonal))
    return failure();
  return n.setResult(n.create<SelectOp>(
      ValueRange{*diagonal, n.splat(resultType, 1), n.splat(resultType, 0)}, {},
      {resultType}));
}

LogicalResult importTrilu(NodeContext &n) {
  if (failed(n.expectInputs(1, 2)))
    return failure();
  int64_t k = 0;
  if (n.hasInput(1)) {
    FailureOr<SmallVector<int64_t>> kValue = n.constInts(1, "k");
    if (failed(kValue))
      return failure();
    if (kValue->size() != 1)
      return n.fail("k must be a scalar");
    k = kValue->front();
  }
  SmallVector<NamedAttribute> attrs{n.i64("diagonal", k)};
  if (n.getInt("upper", 1) != 0)
    attrs.push_back(n.unit("upper"));
  return n.setResult(n.create<TriluOp>(n.input(0), attrs));
}

/// CumSum and CumProd.
template <typename OpTy> LogicalResult importCumulative(NodeContext &n) {
  if (failed(n.expectInputs(2, 2)))
    return failure();
  FailureOr<SmallVector<int64_t>> axisValue = n.constInts(1, "axis");
  if (failed(axisValue))
    return failure();
  if (axisValue->size() != 1)
    return n.fail("axis must be a scalar");
  FailureOr<int64_t> axis =
      n.normalizeAxis(axisValue->front(), n.inputType(0).getRank());
  if (failed(axis))
    return failure();
  SmallVector<NamedAttribute> attrs{n.i64("axis", *axis)};
  if (n.getInt("exclusive", 0))
    attrs.push_back(n.unit("exclusive"));
  if (n.getInt("reverse", 0))
    attrs.push_back(n.unit("reverse"));
  return n.setResult(n.create<OpTy>(n.input(0), attrs));
}

LogicalResult importTopK(NodeContext &n) {
  if (failed(n.expectInputs(1, 2)))
    return failure();
  int64_t k;
  if (n.opset < 10) {
    k = n.getInt("k", -1);
  } else {
    FailureOr<SmallVector<int64_t>> kValue = n.constInts(1, "K");
    if (failed(kValue))
      return failure();
    if (kValue->size() != 1)
      return n.fail("K must hold one value");
    k = kValue->front();
  }
  FailureOr<int64_t> axis =
      n.normalizeAxis(n.getInt("axis", -1), n.inputType(0).getRank());
  if (failed(axis))
    return failure();
  if (n.getInt("sorted", 1) == 0)
    return n.fail("unsorted top-k is not supported");
  SmallVector<NamedAttribute> attrs{n.i64("k", k), n.i64("axis", *axis)};
  if (n.getInt("largest", 1))
    attrs.push_back(n.unit("largest"));
  FailureOr<Operation *> op = n.createOp<TopKOp>(n.input(0), attrs);
  if (failed(op))
    return failure();
  n.setOutput(0, (*op)->getResult(0));
  n.setOutput(1, (*op)->getResult(1));
  return success();
}

template <typename OpTy> LogicalResult importArgReduce(NodeContext &n) {
  if (failed(n.expectInputs(1, 1)))
    return failure();
  FailureOr<int64_t> axis =
      n.normalizeAxis(n.getInt("axis", 0), n.inputType(0).getRank());
  if (failed(axis))
    return failure();
  SmallVector<NamedAttribute> attrs{n.i64("axis", *axis)};
  if (n.getInt("keepdims", 1))
    attrs.push_back(n.unit("keepdims"));
  if (n.getInt("select_last_index", 0))
    attrs.push_back(n.unit("select_last_index"));
  return n.setResult(n.create<OpTy>(n.input(0), attrs));
}

LogicalResult importOneHot(NodeContext &n) {
  if (failed(n.expectInputs(3, 3)))
    return failure();
  FailureOr<SmallVector<double>> depthValue = n.constFloats(1, "depth");
  if (failed(depthValue))
    return failure();
  if (depthValue->size() != 1 || depthValue->front() < 1)
    return n.fail("depth must be one positive value");
  int64_t depth = static_cast<int64_t>(depthValue->front());
  auto indexType = n.inputType(0);
  auto valuesType = n.inputType(2);
  if (valuesType.getNumElements() != 2)
    return n.fail("values must hold [off, on]");
  int64_t rank = indexType.getRank() + 1;
  FailureOr<int64_t> axis = n.normalizeAxis(n.getInt("axis", -1), rank);
  if (failed(axis))
    return failure();
  SmallVector<int64_t> shape(indexType.getShape());
  shape.insert(shape.begin() + *axis, depth);
  // Indices as i64, negative ones wrapped, then compared against a count.
  FailureOr<Value> indices = n.cast(n.input(0), n.b.getI64Type());
  if (failed(indices))
    return failure();
  auto i64Type = RankedTensorType::get(indexType.getShape(), n.b.getI64Type());
  auto isNegative = n.create<CompareOp>(
      ValueRange{*indices, n.splat(i64Type, 0)},
      {n.named("predicate",
               ComparePredicateAttr::get(n.ctx, ComparePredicate::lt))});
  auto wrapped = n.create<AddOp>(ValueRange{*indices, n.splat(i64Type, depth)});
  if (failed(isNegative) || failed(wrapped))
    return failure();
  auto fixed = n.create<SelectOp>(ValueRange{*isNegative, *wrapped, *indices},
                                  {}, {i64Type});
  if (failed(fixed))
    return failure();
  SmallVector<int64_t> expandedShape(indexType.getShape());
  expandedShape.insert(expandedShape.begin() + *axis, 1);
  auto expanded = n.reshape(*fixed, expandedShape);
  if (failed(expanded))
    return failure();
  auto resultI64 = RankedTensorType::get(shape, n.b.getI64Type());
  auto broadcast = n.broadcastTo(*expanded, shape);
  auto counter =
      n.create<IotaOp>(ValueRange{}, {n.i64("dimension", *axis)}, {resultI64});
  if (failed(broadcast) || failed(counter))
    return failure();
  auto hit = n.create<CompareOp>(
      ValueRange{*broadcast, *counter},
      {n.named("predicate",
               ComparePredicateAttr::get(n.ctx, ComparePredicate::eq))});
  if (failed(hit))
    return failure();
  // off = values[0], on = values[1], broadcast from slices.
  auto resultType = RankedTensorType::get(shape, valuesType.getElementType());
  Value values = n.input(2);
  FailureOr<Value> flat = n.reshape(values, {2});
  if (failed(flat))
    return failure();
  auto pick = [&](int64_t i) -> FailureOr<Value> {
    auto one = n.create<SliceOp>(*flat, {n.array("start", {i}),
                                         n.array("limit", {i + 1}),
                                         n.array("stride", {1})});
    if (failed(one))
      return failure();
    return n.broadcastTo(*one, shape);
  };
  FailureOr<Value> off = pick(0), on = pick(1);
  if (failed(off) || failed(on))
    return failure();
  return n.setResult(
      n.create<SelectOp>(ValueRange{*hit, *on, *off}, {}, {resultType}));
}

/// DepthToSpace and SpaceToDepth: reshape, transpose, reshape.
LogicalResult importDepthSpace(NodeContext &n, bool toSpace) {
  if (failed(n.expectInputs(1, 1)))
    return failure();
  auto type = n.inputType(0);
  if (type.getRank() != 4)
    return n.fail("input must have rank 4 (NCHW)");
  int64_t bs = n.getInt("blocksize", 0);
  if (bs < 1)
    return n.fail("blocksize must be positive");
  int64_t N = type.getDimSize(0), C = type.getDimSize(1),
          H = type.getDimSize(2), W = type.getDimSize(3);
  SmallVector<int64_t> first, perm, last;
  if (toSpace) {
    if (C % (bs * bs) != 0)
      return n.fail("channels do not divide by blocksize^2");
    bool crd = n.getString("mode", "DCR") == "CRD";
    if (crd) {
      first = {N, C / (bs * bs), bs, bs, H, W};
      perm = {0, 1, 4, 2, 5, 3};
    } else {
      first = {N, bs, bs, C / (bs * bs), H, W};
      perm = {0, 3, 4, 1, 5, 2};
    }
    last = {N, C / (bs * bs), H * bs, W * bs};
  } else {
    if (H % bs != 0 || W % bs != 0)
      return n.fail("spatial dimensions do not divide by blocksize");
    first = {N, C, H / bs, bs, W / bs, bs};
    // SpaceToDepth orders the blocks DCR (as it did before `mode`, opset 28)
    // or CRD, as DepthToSpace reads them.
    std::string mode = n.opset >= 28 ? n.getString("mode", "DCR") : "DCR";
    if (mode == "CRD")
      perm = {0, 1, 3, 5, 2, 4};
    else if (mode == "DCR")
      perm = {0, 3, 5, 1, 2, 4};
    else
      return n.fail("mode '" + mode + "' is not DCR or CRD");
    last = {N, C * bs * bs, H / bs, W / bs};
  }
  FailureOr<Value> shaped = n.reshape(n.input(0), first);
  if (failed(shaped))
    return failure();
  FailureOr<Value> moved =
      n.create<TransposeOp>(*shaped, {n.array("permutation", perm)});
  if (failed(moved))
    return failure();
  return n.setResult(n.reshape(*moved, last));
}

} // namespace

FailureOr<SmallVector<Value>>
kiln::onnx_import::splitToSequence(NodeContext &n) {
  if (failed(n.expectInputs(1, 2)))
    return failure();
  auto type = n.inputType(0);
  FailureOr<int64_t> axis =
      n.normalizeAxis(n.getInt("axis", 0), type.getRank());
  if (failed(axis))
    return failure();
  int64_t dim = type.getDimSize(*axis);
  SmallVector<int64_t> sizes;
  bool squeeze = false;
  if (!n.hasInput(1)) {
    // Pieces of one, squeezed unless keepdims.
    sizes.assign(dim, 1);
    squeeze = n.getInt("keepdims", 1) == 0;
  } else {
    FailureOr<SmallVector<int64_t>> split = n.constInts(1, "split");
    if (failed(split))
      return failure();
    if (n.inputType(1).getRank() == 0) {
      int64_t part = split->front();
      if (part < 1)
        return n.fail("split must be positive");
      for (int64_t at = 0; at < dim; at += part)
        sizes.push_back(std::min(part, dim - at));
    } else {
      sizes = *split;
      int64_t total = 0;
      for (int64_t size : sizes) {
        if (size < 0)
          return n.fail("split sizes must not be negative");
        total += size;
      }
      if (total != dim)
        return n.fail("split sizes add up to " + Twine(total) +
                      ", not the dimension's " + Twine(dim));
    }
  }
  if (sizes.empty())
    return n.fail("splitting an empty dimension gives an empty sequence, "
                  "which is not supported");
  FailureOr<Operation *> op = n.createOp<SplitOp>(
      n.input(0), {n.i64("axis", *axis), n.array("sizes", sizes)});
  if (failed(op))
    return failure();
  SmallVector<Value> pieces((*op)->getResults());
  if (squeeze) {
    SmallVector<int64_t> shape(type.getShape());
    shape.erase(shape.begin() + *axis);
    for (Value &piece : pieces) {
      FailureOr<Value> squeezed = n.reshape(piece, shape);
      if (failed(squeezed))
        return failure();
      piece = *squeezed;
    }
  }
  return pieces;
}

void kiln::onnx_import::registerShapeOps(OpImporterTable &t) {
  t["Compress"] = importCompress;
  t["ReverseSequence"] = importReverseSequence;
  t["Shape"] = importShape;
  t["Size"] = importSize;
  t["Reshape"] = importReshape;
  t["Flatten"] = importFlatten;
  t["Squeeze"] = importSqueeze;
  t["Unsqueeze"] = importUnsqueeze;
  t["Transpose"] = importTranspose;
  t["Expand"] = importExpand;
  t["Tile"] = importTile;
  t["Concat"] = importConcat;
  t["Split"] = importSplit;
  t["Slice"] = importSlice;
  t["Pad"] = importPad;
  t["Gather"] = importGather;
  t["GatherElements"] = importGatherElements;
  t["GatherND"] = importGatherND;
  t["ScatterElements"] = importScatterElements;
  t["Scatter"] = importScatterElements;
  t["ScatterND"] = importScatterND;
  t["ConstantOfShape"] = importConstantOfShape;
  t["Range"] = importRange;
  t["EyeLike"] = importEyeLike;
  t["Trilu"] = importTrilu;
  t["CumSum"] = importCumulative<CumsumOp>;
  t["CumProd"] = importCumulative<CumprodOp>;
  t["CenterCropPad"] = importCenterCropPad;
  t["TopK"] = importTopK;
  t["ArgMax"] = importArgReduce<ArgMaxOp>;
  t["ArgMin"] = importArgReduce<ArgMinOp>;
  t["OneHot"] = importOneHot;
  t["DepthToSpace"] = [](NodeContext &n) { return importDepthSpace(n, true); };
  t["SpaceToDepth"] = [](NodeContext &n) { return importDepthSpace(n, false); };
}
