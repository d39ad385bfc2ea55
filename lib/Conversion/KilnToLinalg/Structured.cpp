//===- Structured.cpp - shape, data movement and reduction lowerings ------===//

#include "LoweringUtils.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/ReshapeOpsUtils.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::lowering;

namespace {

RankedTensorType rankedType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

struct LowerConstant : OpRewritePattern<ConstantOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ConstantOp op,
                                PatternRewriter &r) const override {
    r.replaceOpWithNewOp<arith::ConstantOp>(op, cast<TypedAttr>(op.getValue()));
    return success();
  }
};

/// Reshape through a rank-1 (or rank-0) intermediate: always expressible with
/// collapse/expand for static shapes.
struct LowerReshape : OpRewritePattern<ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReshapeOp op,
                                PatternRewriter &r) const override {
    Location loc = op.getLoc();
    Value x = op.getInput();
    auto in = rankedType(x);
    auto out = cast<RankedTensorType>(op.getType());
    if (in.getShape() == out.getShape()) {
      r.replaceOp(op, x);
      return success();
    }
    int64_t count = in.getNumElements();
    auto flatType = RankedTensorType::get({count}, in.getElementType());
    Value flat = x;
    if (in.getRank() == 0) {
      flat = tensor::ExpandShapeOp::create(r, loc, flatType, x,
                                           ArrayRef<ReassociationIndices>{});
    } else if (in.getRank() > 1) {
      ReassociationIndices all;
      for (int64_t d = 0; d < in.getRank(); ++d)
        all.push_back(d);
      flat = tensor::CollapseShapeOp::create(
          r, loc, flatType, x, ArrayRef<ReassociationIndices>{all});
    }
    Value result = flat;
    if (out.getRank() == 0) {
      result = tensor::CollapseShapeOp::create(
          r, loc, out, flat, ArrayRef<ReassociationIndices>{});
    } else if (out.getRank() > 1) {
      ReassociationIndices all;
      for (int64_t d = 0; d < out.getRank(); ++d)
        all.push_back(d);
      result = tensor::ExpandShapeOp::create(
          r, loc, out, flat, ArrayRef<ReassociationIndices>{all});
    }
    r.replaceOp(op, result);
    return success();
  }
};

struct LowerBroadcast : OpRewritePattern<BroadcastOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(BroadcastOp op,
                                PatternRewriter &r) const override {
    auto in = rankedType(op.getInput());
    auto out = cast<RankedTensorType>(op.getType());
    int64_t offset = out.getRank() - in.getRank();
    SmallVector<AffineExpr> exprs;
    for (int64_t d = 0; d < in.getRank(); ++d) {
      if (in.getDimSize(d) == 1 && out.getDimSize(d + offset) != 1)
        exprs.push_back(r.getAffineConstantExpr(0));
      else
        exprs.push_back(r.getAffineDimExpr(d + offset));
    }
    AffineMap map = AffineMap::get(out.getRank(), 0, exprs, r.getContext());
    r.replaceOp(
        op, buildMap(r, op.getLoc(), op.getInput(), out,
                     [](OpBuilder &, Location, ValueRange a) { return a[0]; },
                     {map}));
    return success();
  }
};

struct LowerTranspose : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TransposeOp op,
                                PatternRewriter &r) const override {
    auto out = cast<RankedTensorType>(op.getType());
    auto transpose = linalg::TransposeOp::create(
        r, op.getLoc(), op.getInput(), emptyTensor(r, op.getLoc(), out),
        op.getPermutation());
    r.replaceOp(op, transpose.getResult());
    return success();
  }
};

struct LowerSlice : OpRewritePattern<SliceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SliceOp op, PatternRewriter &r) const override {
    auto out = cast<RankedTensorType>(op.getType());
    SmallVector<OpFoldResult> offsets, sizes, strides;
    for (int64_t d = 0; d < out.getRank(); ++d) {
      offsets.push_back(r.getIndexAttr(op.getStart()[d]));
      sizes.push_back(r.getIndexAttr(out.getDimSize(d)));
      strides.push_back(r.getIndexAttr(op.getStride()[d]));
    }
    r.replaceOpWithNewOp<tensor::ExtractSliceOp>(op, out, op.getInput(),
                                                 offsets, sizes, strides);
    return success();
  }
};

struct LowerReverse : OpRewritePattern<ReverseOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReverseOp op,
                                PatternRewriter &r) const override {
    auto type = cast<RankedTensorType>(op.getType());
    SmallVector<AffineExpr> exprs;
    for (int64_t d = 0; d < type.getRank(); ++d) {
      AffineExpr e = r.getAffineDimExpr(d);
      if (llvm::is_contained(op.getDimensions(), d))
        e = r.getAffineConstantExpr(type.getDimSize(d) - 1) - e;
      exprs.push_back(e);
    }
    AffineMap map = AffineMap::get(type.getRank(), 0, exprs, r.getContext());
    r.replaceOp(
        op, buildMap(r, op.getLoc(), op.getInput(), type,
                     [](OpBuilder &, Location, ValueRange a) { return a[0]; },
                     {map}));
    return success();
  }
};

struct LowerConcat : OpRewritePattern<ConcatOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ConcatOp op,
                                PatternRewriter &r) const override {
    auto out = cast<RankedTensorType>(op.getType());
    Value result = emptyTensor(r, op.getLoc(), out);
    int64_t offset = 0;
    int64_t axis = op.getAxis();
    for (Value input : op.getInputs()) {
      auto in = rankedType(input);
      // An empty part adds nothing (and a slice at the end is out of bounds).
      if (in.getNumElements() == 0) {
        offset += in.getDimSize(axis);
        continue;
      }
      SmallVector<OpFoldResult> offsets(out.getRank(), r.getIndexAttr(0));
      SmallVector<OpFoldResult> sizes,
          strides(out.getRank(), r.getIndexAttr(1));
      offsets[axis] = r.getIndexAttr(offset);
      for (int64_t d = 0; d < in.getRank(); ++d)
        sizes.push_back(r.getIndexAttr(in.getDimSize(d)));
      result = tensor::InsertSliceOp::create(r, op.getLoc(), input, result,
                                             offsets, sizes, strides);
      offset += in.getDimSize(axis);
    }
    r.replaceOp(op, result);
    return success();
  }
};

struct LowerSplit : OpRewritePattern<SplitOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SplitOp op, PatternRewriter &r) const override {
    int64_t offset = 0;
    int64_t axis = op.getAxis();
    SmallVector<Value> results;
    for (Value result : op.getResults()) {
      auto type = rankedType(result);
      // An empty piece is no slice of the input (one at its end would be
      // out of bounds).
      if (type.getNumElements() == 0) {
        results.push_back(emptyTensor(r, op.getLoc(), type));
        offset += type.getDimSize(axis);
        continue;
      }
      SmallVector<OpFoldResult> offsets(type.getRank(), r.getIndexAttr(0));
      SmallVector<OpFoldResult> sizes,
          strides(type.getRank(), r.getIndexAttr(1));
      offsets[axis] = r.getIndexAttr(offset);
      for (int64_t d = 0; d < type.getRank(); ++d)
        sizes.push_back(r.getIndexAttr(type.getDimSize(d)));
      results.push_back(tensor::ExtractSliceOp::create(
          r, op.getLoc(), type, op.getInput(), offsets, sizes, strides));
      offset += type.getDimSize(axis);
    }
    r.replaceOp(op, results);
    return success();
  }
};

/// Builds `linalg.generic` over `resultType` with no inputs whose body gets
/// the iteration indices.
Value buildIndexed(
    OpBuilder &b, Location loc, RankedTensorType resultType, ValueRange inputs,
    ArrayRef<AffineMap> inputMaps,
    function_ref<Value(OpBuilder &, Location, ValueRange, ValueRange)> body) {
  unsigned rank = resultType.getRank();
  SmallVector<AffineMap> maps(inputMaps.begin(), inputMaps.end());
  maps.push_back(b.getMultiDimIdentityMap(rank));
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{resultType}, inputs,
      ValueRange{emptyTensor(b, loc, resultType)}, maps, iterators,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        SmallVector<Value> indices;
        for (unsigned d = 0; d < rank; ++d)
          indices.push_back(linalg::IndexOp::create(nb, nloc, d));
        linalg::YieldOp::create(nb, nloc,
                                body(nb, nloc, indices, args.drop_back()));
      });
  return generic.getResult(0);
}

Value indexConst(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

/// Clamps an index value into [0, size - 1].
Value clampIndex(OpBuilder &b, Location loc, Value i, int64_t size) {
  Value zero = indexConst(b, loc, 0), last = indexConst(b, loc, size - 1);
  return arith::MinSIOp::create(b, loc, arith::MaxSIOp::create(b, loc, i, zero),
                                last);
}

/// An integer index tensor element as `index`, wrapped when negative and
/// clamped into range so that a bad index never reads outside the tensor.
Value toIndex(OpBuilder &b, Location loc, Value raw, int64_t size) {
  Value i = arith::IndexCastOp::create(b, loc, b.getIndexType(), raw);
  Value zero = indexConst(b, loc, 0);
  Value negative =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, i, zero);
  Value wrapped = arith::AddIOp::create(b, loc, i, indexConst(b, loc, size));
  return clampIndex(
      b, loc, arith::SelectOp::create(b, loc, negative, wrapped, i), size);
}

struct LowerPad : OpRewritePattern<PadOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(PadOp op, PatternRewriter &r) const override {
    Location loc = op.getLoc();
    auto in = rankedType(op.getInput());
    auto out = cast<RankedTensorType>(op.getType());
    Type element = out.getElementType();
    if (op.getMode() == PadMode::constant) {
      SmallVector<OpFoldResult> low, high;
      for (int64_t d = 0; d < in.getRank(); ++d) {
        low.push_back(r.getIndexAttr(op.getLow()[d]));
        high.push_back(r.getIndexAttr(op.getHigh()[d]));
      }
      Value fill =
          scalarConstant(r, loc, element, op.getValue().convertToDouble());
      auto pad =
          tensor::PadOp::create(r, loc, out, op.getInput(), low, high, fill);
      r.replaceOp(op, pad.getResult());
      return success();
    }
    bool reflect = op.getMode() == PadMode::reflect;
    Value input = op.getInput();
    Value result = buildIndexed(
        r, loc, out, {}, {},
        [&](OpBuilder &b, Location l, ValueRange idx, ValueRange) -> Value {
          SmallVector<Value> source;
          for (int64_t d = 0; d < in.getRank(); ++d) {
            int64_t n = in.getDimSize(d);
            Value i = arith::SubIOp::create(b, l, idx[d],
                                            indexConst(b, l, op.getLow()[d]));
            if (reflect) {
              Value zero = indexConst(b, l, 0);
              Value neg = arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt,
                                                i, zero);
              i = arith::SelectOp::create(
                  b, l, neg, arith::SubIOp::create(b, l, zero, i), i);
              Value over = arith::CmpIOp::create(
                  b, l, arith::CmpIPredicate::sge, i, indexConst(b, l, n));
              Value mirrored =
                  arith::SubIOp::create(b, l, indexConst(b, l, 2 * (n - 1)), i);
              i = arith::SelectOp::create(b, l, over, mirrored, i);
            }
            source.push_back(clampIndex(b, l, i, n));
          }
          return tensor::ExtractOp::create(b, l, input, source);
        });
    r.replaceOp(op, result);
    return success();
  }
};

struct LowerTile : OpRewritePattern<TileOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TileOp op, PatternRewriter &r) const override {
    auto in = rankedType(op.getInput());
    auto out = cast<RankedTensorType>(op.getType());
    if (out.getNumElements() == 0) {
      r.replaceOp(op, emptyTensor(r, op.getLoc(), out));
      return success();
    }
    SmallVector<AffineExpr> exprs;
    for (int64_t d = 0; d < in.getRank(); ++d)
      exprs.push_back(r.getAffineDimExpr(d) % in.getDimSize(d));
    AffineMap map = AffineMap::get(out.getRank(), 0, exprs, r.getContext());
    r.replaceOp(
        op, buildMap(r, op.getLoc(), op.getInput(), out,
                     [](OpBuilder &, Location, ValueRange a) { return a[0]; },
                     {map}));
    return success();
  }
};

struct LowerIota : OpRewritePattern<IotaOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(IotaOp op, PatternRewriter &r) const override {
    auto out = cast<RankedTensorType>(op.getType());
    Type element = out.getElementType();
    double start = op.getStart().convertToDouble();
    double step = op.getStep().convertToDouble();
    int64_t dim = op.getDimension();
    Value result = buildIndexed(
        r, op.getLoc(), out, {}, {},
        [&](OpBuilder &b, Location l, ValueRange idx, ValueRange) -> Value {
          Value i = arith::IndexCastOp::create(b, l, b.getI64Type(), idx[dim]);
          if (isFloat(element)) {
            Value f = arith::SIToFPOp::create(b, l, b.getF64Type(), i);
            Value v = arith::AddFOp::create(
                b, l, scalarConstant(b, l, b.getF64Type(), start),
                arith::MulFOp::create(
                    b, l, f, scalarConstant(b, l, b.getF64Type(), step)));
            return castScalar(b, l, v, element);
          }
          Value v = arith::AddIOp::create(
              b, l, scalarConstant(b, l, b.getI64Type(), start),
              arith::MulIOp::create(
                  b, l, i, scalarConstant(b, l, b.getI64Type(), step)));
          return castScalar(b, l, v, element);
        });
    r.replaceOp(op, result);
    return success();
  }
};

struct LowerGather : OpRewritePattern<GatherOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GatherOp op,
                                PatternRewriter &r) const override {
    auto in = rankedType(op.getInput());
    auto indices = rankedType(op.getIndices());
    auto out = cast<RankedTensorType>(op.getType());
    int64_t axis = op.getAxis(), q = indices.getRank();
    SmallVector<AffineExpr> exprs;
    for (int64_t d = 0; d < q; ++d)
      exprs.push_back(r.getAffineDimExpr(axis + d));
    AffineMap map = AffineMap::get(out.getRank(), 0, exprs, r.getContext());
    Value input = op.getInput();
    Value result = buildIndexed(
        r, op.getLoc(), out, op.getIndices(), {map},
        [&](OpBuilder &b, Location l, ValueRange idx,
            ValueRange args) -> Value {
          SmallVector<Value> source(idx.begin(), idx.begin() + axis);
          source.push_back(toIndex(b, l, args[0], in.getDimSize(axis)));
          for (int64_t d = axis + 1; d < in.getRank(); ++d)
            source.push_back(idx[d - 1 + q]);
          return tensor::ExtractOp::create(b, l, input, source);
        });
    r.replaceOp(op, result);
    return success();
  }
};

struct LowerGatherElements : OpRewritePattern<GatherElementsOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GatherElementsOp op,
                                PatternRewriter &r) const override {
    auto in = rankedType(op.getInput());
    auto out = cast<RankedTensorType>(op.getType());
    int64_t axis = op.getAxis();
    Value input = op.getInput();
    Value result =
        buildIndexed(r, op.getLoc(), out, op.getIndices(),
                     {r.getMultiDimIdentityMap(out.getRank())},
                     [&](OpBuilder &b, Location l, ValueRange idx,
                         ValueRange args) -> Value {
                       SmallVector<Value> source(idx.begin(), idx.end());
                       source[axis] =
                           toIndex(b, l, args[0], in.getDimSize(axis));
                       return tensor::ExtractOp::create(b, l, input, source);
                     });
    r.replaceOp(op, result);
    return success();
  }
};

struct LowerGatherNd : OpRewritePattern<GatherNdOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GatherNdOp op,
                                PatternRewriter &r) const override {
    auto in = rankedType(op.getInput());
    auto indexType = rankedType(op.getIndices());
    auto out = cast<RankedTensorType>(op.getType());
    int64_t batch = op.getBatchDims();
    int64_t depth = indexType.getShape().back();
    int64_t q = indexType.getRank();
    Value input = op.getInput(), indices = op.getIndices();
    Value result = buildIndexed(
        r, op.getLoc(), out, {}, {},
        [&](OpBuilder &b, Location l, ValueRange idx, ValueRange) -> Value {
          // Output dims: indices.shape[:-1] then input.shape[batch+depth:].
          SmallVector<Value> source(idx.begin(), idx.begin() + batch);
          for (int64_t k = 0; k < depth; ++k) {
            SmallVector<Value> at(idx.begin(), idx.begin() + (q - 1));
            at.push_back(indexConst(b, l, k));
            Value raw = tensor::ExtractOp::create(b, l, indices, at);
            source.push_back(toIndex(b, l, raw, in.getDimSize(batch + k)));
          }
          for (int64_t d = batch + depth; d < in.getRank(); ++d)
            source.push_back(idx[(q - 1) + (d - batch - depth)]);
          return tensor::ExtractOp::create(b, l, input, source);
        });
    r.replaceOp(op, result);
    return success();
  }
};

enum class ReduceKind { Sum, Prod, Max, Min };

Value reductionStep(OpBuilder &b, Location loc, ReduceKind kind, Value acc,
                    Value x);

/// Combines an existing element with an update per a scatter reduction.
Value combine(OpBuilder &b, Location loc, Reduction reduction, Value old,
              Value update) {
  switch (reduction) {
  case Reduction::add:
    return reductionStep(b, loc, ReduceKind::Sum, old, update);
  case Reduction::mul:
    return reductionStep(b, loc, ReduceKind::Prod, old, update);
  case Reduction::max:
    return reductionStep(b, loc, ReduceKind::Max, old, update);
  case Reduction::min:
    return reductionStep(b, loc, ReduceKind::Min, old, update);
  default:
    return update;
  }
}

/// Sequential loops over `shape` threading one tensor through.
Value loopNest(
    OpBuilder &b, Location loc, ArrayRef<int64_t> shape, Value init,
    function_ref<Value(OpBuilder &, Location, ValueRange, Value)> body) {
  SmallVector<Value> lbs, ubs, steps;
  for (int64_t n : shape) {
    lbs.push_back(indexConst(b, loc, 0));
    ubs.push_back(indexConst(b, loc, n));
    steps.push_back(indexConst(b, loc, 1));
  }
  scf::LoopNest nest = scf::buildLoopNest(
      b, loc, lbs, ubs, steps, ValueRange{init},
      [&](OpBuilder &nb, Location nloc, ValueRange ivs, ValueRange iter) {
        return scf::ValueVector{body(nb, nloc, ivs, iter[0])};
      });
  return nest.results.front();
}

struct LowerScatterElements : OpRewritePattern<ScatterElementsOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ScatterElementsOp op,
                                PatternRewriter &r) const override {
    auto in = rankedType(op.getInput());
    auto updatesType = rankedType(op.getUpdates());
    int64_t axis = op.getAxis();
    Value indices = op.getIndices(), updates = op.getUpdates();
    Reduction reduction = op.getReduction();
    Value result = loopNest(
        r, op.getLoc(), updatesType.getShape(), op.getInput(),
        [&](OpBuilder &b, Location l, ValueRange ivs, Value acc) -> Value {
          Value raw = tensor::ExtractOp::create(b, l, indices, ivs);
          SmallVector<Value> target(ivs.begin(), ivs.end());
          target[axis] = toIndex(b, l, raw, in.getDimSize(axis));
          Value update = tensor::ExtractOp::create(b, l, updates, ivs);
          Value old = tensor::ExtractOp::create(b, l, acc, target);
          Value v = combine(b, l, reduction, old, update);
          return tensor::InsertOp::create(b, l, v, acc, target);
        });
    r.replaceOp(op, result);
    return success();
  }
};

struct LowerScatterNd : OpRewritePattern<ScatterNdOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ScatterNdOp op,
                                PatternRewriter &r) const override {
    auto in = rankedType(op.getInput());
    auto indexType = rankedType(op.getIndices());
    auto updatesType = rankedType(op.getUpdates());
    int64_t depth = indexType.getShape().back();
    int64_t q = indexType.getRank();
    Value indices = op.getIndices(), updates = op.getUpdates();
    Reduction reduction = op.getReduction();
    Value result = loopNest(
        r, op.getLoc(), updatesType.getShape(), op.getInput(),
        [&](OpBuilder &b, Location l, ValueRange ivs, Value acc) -> Value {
          SmallVector<Value> target;
          for (int64_t k = 0; k < depth; ++k) {
            SmallVector<Value> at(ivs.begin(), ivs.begin() + (q - 1));
            at.push_back(indexConst(b, l, k));
            Value raw = tensor::ExtractOp::create(b, l, indices, at);
            target.push_back(toIndex(b, l, raw, in.getDimSize(k)));
          }
          for (int64_t d = q - 1; d < static_cast<int64_t>(ivs.size()); ++d)
            target.push_back(ivs[d]);
          Value update = tensor::ExtractOp::create(b, l, updates, ivs);
          Value old = tensor::ExtractOp::create(b, l, acc, target);
          Value v = combine(b, l, reduction, old, update);
          return tensor::InsertOp::create(b, l, v, acc, target);
        });
    r.replaceOp(op, result);
    return success();
  }
};

struct LowerTrilu : OpRewritePattern<TriluOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TriluOp op, PatternRewriter &r) const override {
    auto type = cast<RankedTensorType>(op.getType());
    int64_t rank = type.getRank();
    bool upper = op.getUpper();
    int64_t k = op.getDiagonal();
    Value result = buildIndexed(
        r, op.getLoc(), type, op.getInput(), {r.getMultiDimIdentityMap(rank)},
        [&](OpBuilder &b, Location l, ValueRange idx,
            ValueRange args) -> Value {
          // keep when col - row >= k (upper) or <= k (lower).
          Value diff =
              arith::SubIOp::create(b, l, idx[rank - 1], idx[rank - 2]);
          Value keep = arith::CmpIOp::create(b, l,
                                             upper ? arith::CmpIPredicate::sge
                                                   : arith::CmpIPredicate::sle,
                                             diff, indexConst(b, l, k));
          return arith::SelectOp::create(
              b, l, keep, args[0],
              scalarConstant(b, l, type.getElementType(), 0));
        });
    r.replaceOp(op, result);
    return success();
  }
};

/// The identity element of a reduction kind over `type`.

Value reductionInit(OpBuilder &b, Location loc, Type type, ReduceKind kind) {
  switch (kind) {
  case ReduceKind::Sum:
    return scalarConstant(b, loc, type, 0);
  case ReduceKind::Prod:
    return scalarConstant(b, loc, type, 1);
  case ReduceKind::Max:
  case ReduceKind::Min: {
    bool max = kind == ReduceKind::Max;
    if (auto f = dyn_cast<FloatType>(type))
      return arith::ConstantOp::create(
          b, loc,
          b.getFloatAttr(f, APFloat::getInf(f.getFloatSemantics(), max)));
    unsigned width = type.getIntOrFloatBitWidth();
    APInt value = isUnsignedLike(type)
                      ? (max ? APInt::getZero(width) : APInt::getAllOnes(width))
                  : max ? APInt::getSignedMinValue(width)
                        : APInt::getSignedMaxValue(width);
    return arith::ConstantOp::create(b, loc, b.getIntegerAttr(type, value));
  }
  }
  llvm_unreachable("unknown reduction");
}

Value reductionStep(OpBuilder &b, Location loc, ReduceKind kind, Value acc,
                    Value x) {
  bool f = isFloat(x.getType());
  bool isBool = x.getType().isInteger(1);
  switch (kind) {
  case ReduceKind::Sum:
    return f ? arith::AddFOp::create(b, loc, acc, x).getResult()
             : arith::AddIOp::create(b, loc, acc, x).getResult();
  case ReduceKind::Prod:
    return f ? arith::MulFOp::create(b, loc, acc, x).getResult()
             : arith::MulIOp::create(b, loc, acc, x).getResult();
  case ReduceKind::Max:
    if (isBool)
      return arith::OrIOp::create(b, loc, acc, x);
    if (x.getType().isUnsignedInteger())
      return arith::MaxUIOp::create(b, loc, acc, x);
    return f ? arith::MaximumFOp::create(b, loc, acc, x).getResult()
             : arith::MaxSIOp::create(b, loc, acc, x).getResult();
  case ReduceKind::Min:
    if (isBool)
      return arith::AndIOp::create(b, loc, acc, x);
    if (x.getType().isUnsignedInteger())
      return arith::MinUIOp::create(b, loc, acc, x);
    return f ? arith::MinimumFOp::create(b, loc, acc, x).getResult()
             : arith::MinSIOp::create(b, loc, acc, x).getResult();
  }
  llvm_unreachable("unknown reduction");
}

template <typename OpTy, ReduceKind kind>
struct LowerReduce : OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpTy op, PatternRewriter &r) const override {
    Location loc = op.getLoc();
    auto in = rankedType(op.getInput());
    auto out = cast<RankedTensorType>(op.getType());
    ArrayRef<int64_t> dims = op.getDimensions();
    int64_t rank = in.getRank();
    // Reduce into the shape without the reduced dims, then expand.
    SmallVector<int64_t> keptShape;
    SmallVector<AffineExpr> outExprs;
    SmallVector<utils::IteratorType> iterators;
    for (int64_t d = 0; d < rank; ++d) {
      bool reduced = llvm::is_contained(dims, d);
      iterators.push_back(reduced ? utils::IteratorType::reduction
                                  : utils::IteratorType::parallel);
      if (!reduced) {
        keptShape.push_back(in.getDimSize(d));
        outExprs.push_back(r.getAffineDimExpr(d));
      }
    }
    auto keptType = RankedTensorType::get(keptShape, in.getElementType());
    Value init = reductionInit(r, loc, in.getElementType(), kind);
    Value filled =
        linalg::FillOp::create(r, loc, init, emptyTensor(r, loc, keptType))
            .getResult(0);
    SmallVector<AffineMap> maps{
        r.getMultiDimIdentityMap(rank),
        AffineMap::get(rank, 0, outExprs, r.getContext())};
    auto generic = linalg::GenericOp::create(
        r, loc, TypeRange{keptType}, op.getInput(), ValueRange{filled}, maps,
        iterators, [&](OpBuilder &b, Location l, ValueRange args) {
          linalg::YieldOp::create(b, l,
                                  reductionStep(b, l, kind, args[1], args[0]));
        });
    Value result = generic.getResult(0);
    if (keptType != out)
      result = ReshapeOp::create(r, loc, out, result);
    r.replaceOp(op, result);
    return success();
  }
};

template <typename OpTy> struct LowerArgReduce : OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpTy op, PatternRewriter &r) const override {
    constexpr bool isMax = std::is_same_v<OpTy, ArgMaxOp>;
    Location loc = op.getLoc();
    auto in = rankedType(op.getInput());
    auto out = cast<RankedTensorType>(op.getType());
    int64_t axis = op.getAxis(), rank = in.getRank();
    bool last = op.getSelectLastIndex();
    SmallVector<int64_t> keptShape;
    SmallVector<AffineExpr> outExprs;
    SmallVector<utils::IteratorType> iterators;
    for (int64_t d = 0; d < rank; ++d) {
      iterators.push_back(d == axis ? utils::IteratorType::reduction
                                    : utils::IteratorType::parallel);
      if (d != axis) {
        keptShape.push_back(in.getDimSize(d));
        outExprs.push_back(r.getAffineDimExpr(d));
      }
    }
    Type element = in.getElementType();
    auto valueType = RankedTensorType::get(keptShape, element);
    auto indexType = RankedTensorType::get(keptShape, r.getI64Type());
    Value bestInit =
        linalg::FillOp::create(
            r, loc,
            reductionInit(r, loc, element,
                          isMax ? ReduceKind::Max : ReduceKind::Min),
            emptyTensor(r, loc, valueType))
            .getResult(0);
    Value indexInit = linalg::FillOp::create(
                          r, loc, scalarConstant(r, loc, r.getI64Type(), -1),
                          emptyTensor(r, loc, indexType))
                          .getResult(0);
    AffineMap outMap = AffineMap::get(rank, 0, outExprs, r.getContext());
    auto generic = linalg::GenericOp::create(
        r, loc, TypeRange{valueType, indexType}, op.getInput(),
        ValueRange{bestInit, indexInit},
        {r.getMultiDimIdentityMap(rank), outMap, outMap}, iterators,
        [&](OpBuilder &b, Location l, ValueRange args) {
          Value x = args[0], best = args[1], bestIndex = args[2];
          Value i = arith::IndexCastOp::create(
              b, l, b.getI64Type(), linalg::IndexOp::create(b, l, axis));
          Value better;
          if (isFloat(element)) {
            auto strict =
                isMax ? arith::CmpFPredicate::OGT : arith::CmpFPredicate::OLT;
            auto loose =
                isMax ? arith::CmpFPredicate::OGE : arith::CmpFPredicate::OLE;
            better =
                arith::CmpFOp::create(b, l, last ? loose : strict, x, best);
          } else {
            auto strict =
                isMax ? arith::CmpIPredicate::sgt : arith::CmpIPredicate::slt;
            auto loose =
                isMax ? arith::CmpIPredicate::sge : arith::CmpIPredicate::sle;
            better = arith::CmpIOp::create(
                b, l, orderFor(x.getType(), last ? loose : strict), x, best);
          }
          // The first element always wins over the initial value.
          Value first =
              arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt, bestIndex,
                                    scalarConstant(b, l, b.getI64Type(), 0));
          better = arith::OrIOp::create(b, l, better, first);
          linalg::YieldOp::create(
              b, l,
              ValueRange{arith::SelectOp::create(b, l, better, x, best),
                         arith::SelectOp::create(b, l, better, i, bestIndex)});
        });
    Value result = generic.getResult(1);
    if (indexType != out)
      result = ReshapeOp::create(r, loc, out, result);
    r.replaceOp(op, result);
    return success();
  }
};

/// Cumulative sums as a reduction over a second copy of the axis:
/// out[i] = sum_k x[k] * (k <= i) (or k < i, or k >= i ...).
/// kiln.cumsum and kiln.cumprod: each output element reduces the inputs up
/// to it (or from it, reversed) along the axis.
template <typename OpTy, ReduceKind kind>
struct LowerCumulative : OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpTy op, PatternRewriter &r) const override {
    Location loc = op.getLoc();
    auto type = cast<RankedTensorType>(op.getType());
    int64_t rank = type.getRank(), axis = op.getAxis();
    bool exclusive = op.getExclusive(), reverse = op.getReverse();
    SmallVector<AffineExpr> inExprs, outExprs;
    for (int64_t d = 0; d < rank; ++d) {
      inExprs.push_back(r.getAffineDimExpr(d == axis ? rank : d));
      outExprs.push_back(r.getAffineDimExpr(d));
    }
    SmallVector<utils::IteratorType> iterators(rank,
                                               utils::IteratorType::parallel);
    iterators.push_back(utils::IteratorType::reduction);
    Type element = type.getElementType();
    Value filled =
        linalg::FillOp::create(r, loc, reductionInit(r, loc, element, kind),
                               emptyTensor(r, loc, type))
            .getResult(0);
    auto generic = linalg::GenericOp::create(
        r, loc, TypeRange{type}, op.getInput(), ValueRange{filled},
        {AffineMap::get(rank + 1, 0, inExprs, r.getContext()),
         AffineMap::get(rank + 1, 0, outExprs, r.getContext())},
        iterators, [&](OpBuilder &b, Location l, ValueRange args) {
          Value i = linalg::IndexOp::create(b, l, axis);
          Value k = linalg::IndexOp::create(b, l, rank);
          arith::CmpIPredicate p =
              reverse ? (exclusive ? arith::CmpIPredicate::sgt
                                   : arith::CmpIPredicate::sge)
                      : (exclusive ? arith::CmpIPredicate::slt
                                   : arith::CmpIPredicate::sle);
          Value take = arith::CmpIOp::create(b, l, p, k, i);
          Value x = arith::SelectOp::create(b, l, take, args[0],
                                            reductionInit(b, l, element, kind));
          linalg::YieldOp::create(b, l, reductionStep(b, l, kind, args[1], x));
        });
    r.replaceOp(op, generic.getResult(0));
    return success();
  }
};

} // namespace

void kiln::lowering::populateStructuredLoweringPatterns(
    RewritePatternSet &patterns) {
  patterns.add<
      LowerConstant, LowerReshape, LowerBroadcast, LowerTranspose, LowerSlice,
      LowerReverse, LowerConcat, LowerSplit, LowerPad, LowerTile, LowerIota,
      LowerGather, LowerGatherElements, LowerGatherNd, LowerScatterElements,
      LowerScatterNd, LowerTrilu, LowerReduce<ReduceSumOp, ReduceKind::Sum>,
      LowerReduce<ReduceProdOp, ReduceKind::Prod>,
      LowerReduce<ReduceMaxOp, ReduceKind::Max>,
      LowerReduce<ReduceMinOp, ReduceKind::Min>, LowerArgReduce<ArgMaxOp>,
      LowerArgReduce<ArgMinOp>, LowerCumulative<CumsumOp, ReduceKind::Sum>,
      LowerCumulative<CumprodOp, ReduceKind::Prod>>(patterns.getContext());
}
