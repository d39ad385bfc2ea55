//===- NN.cpp - matmul, convolution, pooling, dropout and top-k lowerings -===//

#include "LoweringUtils.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::lowering;

namespace {

RankedTensorType rankedType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

Value zeroFilled(OpBuilder &b, Location loc, RankedTensorType type) {
  return linalg::FillOp::create(
             b, loc, scalarConstant(b, loc, type.getElementType(), 0),
             emptyTensor(b, loc, type))
      .getResult(0);
}

Value multiplyAccumulate(OpBuilder &b, Location loc, Value x, Value y,
                         Value acc) {
  if (isFloat(x.getType()))
    return arith::AddFOp::create(b, loc, acc,
                                 arith::MulFOp::create(b, loc, x, y));
  return arith::AddIOp::create(b, loc, acc,
                               arith::MulIOp::create(b, loc, x, y));
}

/// A contraction marked `kiln.matmul` so that the BLAS lowering can find it
/// after bufferization.
struct LowerMatmul : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MatmulOp op,
                                PatternRewriter &r) const override {
    Location loc = op.getLoc();
    auto out = cast<RankedTensorType>(op.getType());
    int64_t batch = out.getRank() - 2;
    // Iteration space: batch..., m, n, k.
    auto dim = [&](int64_t d) { return r.getAffineDimExpr(d); };
    SmallVector<AffineExpr> lhs, rhs, res;
    for (int64_t d = 0; d < batch; ++d) {
      lhs.push_back(dim(d));
      rhs.push_back(dim(d));
      res.push_back(dim(d));
    }
    AffineExpr m = dim(batch), n = dim(batch + 1), k = dim(batch + 2);
    if (op.getTransposeLhs())
      lhs.append({k, m});
    else
      lhs.append({m, k});
    if (op.getTransposeRhs())
      rhs.append({n, k});
    else
      rhs.append({k, n});
    res.append({m, n});
    unsigned count = batch + 3;
    SmallVector<AffineMap> maps{AffineMap::get(count, 0, lhs, r.getContext()),
                                AffineMap::get(count, 0, rhs, r.getContext()),
                                AffineMap::get(count, 0, res, r.getContext())};
    SmallVector<utils::IteratorType> iterators(count - 1,
                                               utils::IteratorType::parallel);
    iterators.push_back(utils::IteratorType::reduction);
    auto generic = linalg::GenericOp::create(
        r, loc, TypeRange{out}, ValueRange{op.getLhs(), op.getRhs()},
        ValueRange{zeroFilled(r, loc, out)}, maps, iterators,
        [&](OpBuilder &b, Location l, ValueRange args) {
          linalg::YieldOp::create(
              b, l, multiplyAccumulate(b, l, args[0], args[1], args[2]));
        });
    SmallVector<NamedAttribute> flags;
    if (op.getTransposeLhs())
      flags.push_back(r.getNamedAttr("transpose_lhs", r.getUnitAttr()));
    if (op.getTransposeRhs())
      flags.push_back(r.getNamedAttr("transpose_rhs", r.getUnitAttr()));
    generic->setAttr("kiln.matmul", r.getDictionaryAttr(flags));
    r.replaceOp(op, generic.getResult(0));
    return success();
  }
};

/// Pads the spatial dimensions of an NC... tensor with `value`.
Value padSpatial(OpBuilder &b, Location loc, Value x, ArrayRef<int64_t> low,
                 ArrayRef<int64_t> high, double value) {
  auto type = rankedType(x);
  if (llvm::all_of(low, [](int64_t p) { return p == 0; }) &&
      llvm::all_of(high, [](int64_t p) { return p == 0; }))
    return x;
  SmallVector<OpFoldResult> lo{b.getIndexAttr(0), b.getIndexAttr(0)};
  SmallVector<OpFoldResult> hi{b.getIndexAttr(0), b.getIndexAttr(0)};
  SmallVector<int64_t> shape(type.getShape());
  for (size_t i = 0; i < low.size(); ++i) {
    lo.push_back(b.getIndexAttr(low[i]));
    hi.push_back(b.getIndexAttr(high[i]));
    shape[i + 2] += low[i] + high[i];
  }
  Value fill = scalarConstant(b, loc, type.getElementType(), value);
  return tensor::PadOp::create(b, loc, type.clone(shape), x, lo, hi, fill)
      .getResult();
}

/// Reshapes through kiln.reshape (lowered by the same conversion).
Value reshapeTo(OpBuilder &b, Location loc, Value v, ArrayRef<int64_t> shape) {
  auto type = rankedType(v);
  if (type.getShape() == shape)
    return v;
  return ReshapeOp::create(b, loc, type.clone(shape), v);
}

/// Grouped N-D convolution as one generic over (n, g, f, o..., c, k...) on
/// views with an explicit group dimension: input [N, G, Cg, S...], filter
/// [G, Fg, Cg, K...], output [N, G, Fg, O...].
Value convolution(OpBuilder &b, Location loc, Value input, Value filter,
                  RankedTensorType out, ArrayRef<int64_t> strides,
                  ArrayRef<int64_t> dilations, int64_t groups) {
  auto inType = rankedType(input);
  auto filterType = rankedType(filter);
  int64_t spatial = out.getRank() - 2;
  int64_t fPerGroup = filterType.getDimSize(0) / groups;
  int64_t cPerGroup = filterType.getDimSize(1);
  SmallVector<int64_t> inShape{inType.getDimSize(0), groups, cPerGroup};
  llvm::append_range(inShape, inType.getShape().drop_front(2));
  SmallVector<int64_t> filterShape{groups, fPerGroup, cPerGroup};
  llvm::append_range(filterShape, filterType.getShape().drop_front(2));
  SmallVector<int64_t> outShape{out.getDimSize(0), groups, fPerGroup};
  llvm::append_range(outShape, out.getShape().drop_front(2));
  Value groupedIn = reshapeTo(b, loc, input, inShape);
  Value groupedFilter = reshapeTo(b, loc, filter, filterShape);
  auto groupedOut = out.clone(outShape);

  MLIRContext *ctx = b.getContext();
  unsigned count = 3 + spatial + 1 + spatial;
  auto dim = [&](unsigned d) { return b.getAffineDimExpr(d); };
  AffineExpr n = dim(0), g = dim(1), f = dim(2), c = dim(3 + spatial);
  SmallVector<AffineExpr> in{n, g, c}, fil{g, f, c}, res{n, g, f};
  for (int64_t i = 0; i < spatial; ++i) {
    AffineExpr o = dim(3 + i), k = dim(4 + spatial + i);
    in.push_back(o * strides[i] + k * dilations[i]);
    fil.push_back(k);
    res.push_back(o);
  }
  SmallVector<AffineMap> maps{AffineMap::get(count, 0, in, ctx),
                              AffineMap::get(count, 0, fil, ctx),
                              AffineMap::get(count, 0, res, ctx)};
  SmallVector<utils::IteratorType> iterators(3 + spatial,
                                             utils::IteratorType::parallel);
  iterators.append(1 + spatial, utils::IteratorType::reduction);
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{groupedOut}, ValueRange{groupedIn, groupedFilter},
      ValueRange{zeroFilled(b, loc, groupedOut)}, maps, iterators,
      [&](OpBuilder &nb, Location l, ValueRange args) {
        linalg::YieldOp::create(
            nb, l, multiplyAccumulate(nb, l, args[0], args[1], args[2]));
      });
  return reshapeTo(b, loc, generic.getResult(0), out.getShape());
}

struct LowerConv : OpRewritePattern<ConvOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ConvOp op, PatternRewriter &r) const override {
    auto out = cast<RankedTensorType>(op.getType());
    int64_t spatial = out.getRank() - 2;
    ArrayRef<int64_t> padding = op.getPadding();
    Value input =
        padSpatial(r, op.getLoc(), op.getInput(), padding.take_front(spatial),
                   padding.drop_front(spatial), 0.0);
    r.replaceOp(op, convolution(r, op.getLoc(), input, op.getFilter(), out,
                                op.getStrides(), op.getDilations(),
                                op.getGroups()));
    return success();
  }
};

/// conv_transpose as a stride-1 convolution of the stride-dilated, padded
/// input with the spatially flipped, transposed filter.
struct LowerConvTranspose : OpRewritePattern<ConvTransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ConvTransposeOp op,
                                PatternRewriter &r) const override {
    Location loc = op.getLoc();
    auto out = cast<RankedTensorType>(op.getType());
    auto in = rankedType(op.getInput());
    auto filterType = rankedType(op.getFilter());
    int64_t spatial = out.getRank() - 2;
    int64_t groups = op.getGroups();
    ArrayRef<int64_t> strides = op.getStrides(), dilations = op.getDilations(),
                      padding = op.getPadding(),
                      outputPadding = op.getOutputPadding();
    Type element = out.getElementType();
    // 1. Insert stride - 1 zeros between input elements.
    SmallVector<int64_t> dilatedShape(in.getShape().take_front(2));
    for (int64_t i = 0; i < spatial; ++i)
      dilatedShape.push_back((in.getDimSize(i + 2) - 1) * strides[i] + 1);
    auto dilatedType = in.clone(dilatedShape);
    Value input = op.getInput();
    Value dilated = emptyTensor(r, loc, dilatedType);
    {
      SmallVector<AffineMap> maps{
          r.getMultiDimIdentityMap(dilatedType.getRank())};
      SmallVector<utils::IteratorType> iterators(dilatedType.getRank(),
                                                 utils::IteratorType::parallel);
      dilated =
          linalg::GenericOp::create(
              r, loc, TypeRange{dilatedType}, ValueRange{}, ValueRange{dilated},
              maps, iterators,
              [&](OpBuilder &b, Location l, ValueRange) {
                SmallVector<Value> source;
                Value onGrid = scalarConstant(b, l, b.getI1Type(), 1);
                for (int64_t d = 0; d < dilatedType.getRank(); ++d) {
                  Value i = linalg::IndexOp::create(b, l, d);
                  if (d < 2) {
                    source.push_back(i);
                    continue;
                  }
                  Value s =
                      arith::ConstantIndexOp::create(b, l, strides[d - 2]);
                  Value rem = arith::RemUIOp::create(b, l, i, s);
                  Value zero = arith::ConstantIndexOp::create(b, l, 0);
                  onGrid = arith::AndIOp::create(
                      b, l, onGrid,
                      arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, rem,
                                            zero));
                  source.push_back(arith::DivUIOp::create(b, l, i, s));
                }
                Value v = tensor::ExtractOp::create(b, l, input, source);
                linalg::YieldOp::create(
                    b, l,
                    arith::SelectOp::create(b, l, onGrid, v,
                                            scalarConstant(b, l, element, 0))
                        .getResult());
              })
              .getResult(0);
    }
    // 2. Pad by (k - 1) * d - pad on each side (plus output_padding at the
    // end); negative amounts crop.
    SmallVector<int64_t> low, high, cropLow, cropHigh;
    for (int64_t i = 0; i < spatial; ++i) {
      int64_t span = (filterType.getDimSize(i + 2) - 1) * dilations[i];
      int64_t lo = span - padding[i];
      int64_t hi = span - padding[i + spatial] + outputPadding[i];
      low.push_back(std::max<int64_t>(lo, 0));
      high.push_back(std::max<int64_t>(hi, 0));
      cropLow.push_back(std::max<int64_t>(-lo, 0));
      cropHigh.push_back(std::max<int64_t>(-hi, 0));
    }
    Value padded = padSpatial(r, loc, dilated, low, high, 0.0);
    if (llvm::any_of(cropLow, [](int64_t c) { return c > 0; }) ||
        llvm::any_of(cropHigh, [](int64_t c) { return c > 0; })) {
      auto paddedType = rankedType(padded);
      SmallVector<int64_t> start(paddedType.getRank(), 0),
          limit(paddedType.getShape()), stride(paddedType.getRank(), 1);
      for (int64_t i = 0; i < spatial; ++i) {
        start[i + 2] = cropLow[i];
        limit[i + 2] -= cropHigh[i];
      }
      padded = SliceOp::create(r, loc, padded, start, limit, stride);
    }
    // 3. Filter [C, Fg, K...] -> [G*Fg, Cg, K...], spatially flipped.
    int64_t channels = filterType.getDimSize(0);
    int64_t cPerGroup = channels / groups, fPerGroup = filterType.getDimSize(1);
    SmallVector<int64_t> newShape{groups * fPerGroup, cPerGroup};
    llvm::append_range(newShape, filterType.getShape().drop_front(2));
    auto newFilterType = filterType.clone(newShape);
    SmallVector<AffineExpr> exprs;
    AffineExpr o = r.getAffineDimExpr(0), c = r.getAffineDimExpr(1);
    exprs.push_back(o.floorDiv(fPerGroup) * cPerGroup + c);
    exprs.push_back(o % fPerGroup);
    for (int64_t i = 0; i < spatial; ++i)
      exprs.push_back(
          r.getAffineConstantExpr(filterType.getDimSize(i + 2) - 1) -
          r.getAffineDimExpr(i + 2));
    Value filter =
        buildMap(r, loc, op.getFilter(), newFilterType,
                 [](OpBuilder &, Location, ValueRange a) { return a[0]; },
                 {AffineMap::get(newShape.size(), 0, exprs, r.getContext())});
    SmallVector<int64_t> ones(spatial, 1);
    r.replaceOp(
        op, convolution(r, loc, padded, filter, out, ones, dilations, groups));
    return success();
  }
};

/// Max and average pooling; the average divides by a per-position count
/// computed here at compile time.
template <typename OpTy> struct LowerPool : OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpTy op, PatternRewriter &r) const override {
    constexpr bool isMax = std::is_same_v<OpTy, MaxPoolOp>;
    Location loc = op.getLoc();
    auto out = cast<RankedTensorType>(op.getType());
    auto in = rankedType(op.getInput());
    int64_t spatial = out.getRank() - 2;
    ArrayRef<int64_t> kernel = op.getKernel(), strides = op.getStrides(),
                      padding = op.getPadding();
    SmallVector<int64_t> dilations(spatial, 1);
    if (auto d = op.getDilations())
      dilations.assign(d->begin(), d->end());
    // Pad enough for every window (ceil mode may run past the end padding).
    SmallVector<int64_t> low, high;
    for (int64_t i = 0; i < spatial; ++i) {
      int64_t span = (kernel[i] - 1) * dilations[i] + 1;
      int64_t needed = (out.getDimSize(i + 2) - 1) * strides[i] + span -
                       in.getDimSize(i + 2) - padding[i];
      low.push_back(padding[i]);
      high.push_back(std::max(needed, padding[i + spatial]));
    }
    Type element = out.getElementType();
    double fill = isMax ? -INFINITY : 0.0;
    Value padded = padSpatial(r, loc, op.getInput(), low, high, fill);
    unsigned count = 2 + 2 * spatial;
    auto dim = [&](unsigned d) { return r.getAffineDimExpr(d); };
    SmallVector<AffineExpr> inExprs{dim(0), dim(1)}, outExprs{dim(0), dim(1)};
    for (int64_t i = 0; i < spatial; ++i) {
      inExprs.push_back(dim(2 + i) * strides[i] +
                        dim(2 + spatial + i) * dilations[i]);
      outExprs.push_back(dim(2 + i));
    }
    // The window dims are iterated through a dummy operand of kernel shape.
    SmallVector<AffineExpr> windowExprs;
    for (int64_t i = 0; i < spatial; ++i)
      windowExprs.push_back(dim(2 + spatial + i));
    Value window = tensor::EmptyOp::create(r, loc, kernel, element);
    SmallVector<AffineMap> maps{
        AffineMap::get(count, 0, inExprs, r.getContext()),
        AffineMap::get(count, 0, windowExprs, r.getContext()),
        AffineMap::get(count, 0, outExprs, r.getContext())};
    SmallVector<utils::IteratorType> iterators(2 + spatial,
                                               utils::IteratorType::parallel);
    iterators.append(spatial, utils::IteratorType::reduction);
    Value init =
        linalg::FillOp::create(r, loc, scalarConstant(r, loc, element, fill),
                               emptyTensor(r, loc, out))
            .getResult(0);
    auto generic = linalg::GenericOp::create(
        r, loc, TypeRange{out}, ValueRange{padded, window}, ValueRange{init},
        maps, iterators, [&](OpBuilder &b, Location l, ValueRange args) {
          Value v =
              isMax ? arith::MaximumFOp::create(b, l, args[2], args[0])
                          .getResult()
                    : arith::AddFOp::create(b, l, args[2], args[0]).getResult();
          linalg::YieldOp::create(b, l, v);
        });
    Value result = generic.getResult(0);
    if constexpr (!isMax) {
      Value divisor = arith::ConstantOp::create(r, loc, op.getDivisors());
      SmallVector<AffineExpr> divExprs;
      for (int64_t i = 0; i < spatial; ++i)
        divExprs.push_back(r.getAffineDimExpr(2 + i));
      result = buildMap(
          r, loc, ValueRange{result, divisor}, out,
          [](OpBuilder &b, Location l, ValueRange a) -> Value {
            return arith::DivFOp::create(b, l, a[0], a[1]);
          },
          {r.getMultiDimIdentityMap(out.getRank()),
           AffineMap::get(out.getRank(), 0, divExprs, r.getContext())});
    }
    r.replaceOp(op, result);
    return success();
  }
};

/// splitmix64 of (seed, element index): a counter-based random stream, so
/// dropout is a pure function of its seed.
Value randomBits(OpBuilder &b, Location loc, Value seed, Value index) {
  auto c = [&](uint64_t v) {
    return arith::ConstantOp::create(
        b, loc, b.getIntegerAttr(b.getI64Type(), static_cast<int64_t>(v)));
  };
  Value z = arith::AddIOp::create(
      b, loc, arith::MulIOp::create(b, loc, seed, c(0x9E3779B97F4A7C15ull)),
      index);
  auto mix = [&](Value v, uint64_t mul, int shift) {
    Value shifted = arith::ShRUIOp::create(b, loc, v, c(shift));
    return arith::MulIOp::create(
        b, loc, arith::XOrIOp::create(b, loc, v, shifted), c(mul));
  };
  z = mix(z, 0xBF58476D1CE4E5B9ull, 30);
  z = mix(z, 0x94D049BB133111EBull, 27);
  return arith::XOrIOp::create(b, loc, z,
                               arith::ShRUIOp::create(b, loc, z, c(31)));
}

struct LowerDropout : OpRewritePattern<DropoutOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(DropoutOp op,
                                PatternRewriter &r) const override {
    Location loc = op.getLoc();
    auto type = cast<RankedTensorType>(op.getResult().getType());
    auto maskType = cast<RankedTensorType>(op.getMask().getType());
    int64_t rank = type.getRank();
    double ratio = op.getRatio().convertToDouble();
    Type element = type.getElementType();
    SmallVector<int64_t> strides(rank, 1);
    for (int64_t d = rank - 2; d >= 0; --d)
      strides[d] = strides[d + 1] * type.getDimSize(d + 1);
    Value seed = op.getSeed();
    SmallVector<AffineMap> maps{r.getMultiDimIdentityMap(rank),
                                r.getMultiDimIdentityMap(rank),
                                r.getMultiDimIdentityMap(rank)};
    SmallVector<utils::IteratorType> iterators(rank,
                                               utils::IteratorType::parallel);
    auto generic = linalg::GenericOp::create(
        r, loc, TypeRange{type, maskType}, ValueRange{op.getInput()},
        ValueRange{emptyTensor(r, loc, type), emptyTensor(r, loc, maskType)},
        maps, iterators, [&](OpBuilder &b, Location l, ValueRange args) {
          Value linear = arith::ConstantIndexOp::create(b, l, 0);
          for (int64_t d = 0; d < rank; ++d)
            linear = arith::AddIOp::create(
                b, l, linear,
                arith::MulIOp::create(
                    b, l, linalg::IndexOp::create(b, l, d),
                    arith::ConstantIndexOp::create(b, l, strides[d])));
          Value index =
              arith::IndexCastOp::create(b, l, b.getI64Type(), linear);
          Value s = tensor::ExtractOp::create(b, l, seed, ValueRange{});
          Value bits = randomBits(b, l, s, index);
          // The top 53 bits as a double in [0, 1).
          Value top = arith::ShRUIOp::create(
              b, l, bits, scalarConstant(b, l, b.getI64Type(), 11));
          Value u = arith::MulFOp::create(
              b, l, arith::UIToFPOp::create(b, l, b.getF64Type(), top),
              scalarConstant(b, l, b.getF64Type(), 1.0 / 9007199254740992.0));
          Value keep = arith::CmpFOp::create(
              b, l, arith::CmpFPredicate::OGE, u,
              scalarConstant(b, l, b.getF64Type(), ratio));
          Value scaled = arith::MulFOp::create(
              b, l, args[0],
              scalarConstant(b, l, element, 1.0 / (1.0 - ratio)));
          Value y = arith::SelectOp::create(b, l, keep, scaled,
                                            scalarConstant(b, l, element, 0));
          linalg::YieldOp::create(b, l, ValueRange{y, keep});
        });
    r.replaceOp(op, generic.getResults());
    return success();
  }
};

/// top_k through ranks: element i's rank is the number of elements that come
/// before it in the sorted order; output slot j takes the element of rank j.
struct LowerTopK : OpRewritePattern<TopKOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TopKOp op, PatternRewriter &r) const override {
    Location loc = op.getLoc();
    auto in = rankedType(op.getInput());
    auto valuesType = cast<RankedTensorType>(op.getValues().getType());
    auto indicesType = cast<RankedTensorType>(op.getIndices().getType());
    int64_t rank = in.getRank(), axis = op.getAxis();
    bool largest = op.getLargest();
    Type element = in.getElementType();
    Value input = op.getInput();
    // ranks[..., i, ...] = #{ j : x_j before x_i }.
    auto rankType = in.clone(r.getI64Type());
    SmallVector<AffineExpr> other, self;
    for (int64_t d = 0; d < rank; ++d) {
      self.push_back(r.getAffineDimExpr(d));
      other.push_back(r.getAffineDimExpr(d == axis ? rank : d));
    }
    SmallVector<utils::IteratorType> iterators(rank,
                                               utils::IteratorType::parallel);
    iterators.push_back(utils::IteratorType::reduction);
    auto before = [&](OpBuilder &b, Location l, Value xj, Value xi, Value j,
                      Value i) -> Value {
      Value strictly, equal;
      if (isFloat(element)) {
        strictly = arith::CmpFOp::create(b, l,
                                         largest ? arith::CmpFPredicate::OGT
                                                 : arith::CmpFPredicate::OLT,
                                         xj, xi);
        equal = arith::CmpFOp::create(b, l, arith::CmpFPredicate::OEQ, xj, xi);
      } else {
        strictly = arith::CmpIOp::create(
            b, l,
            orderFor(xj.getType(), largest ? arith::CmpIPredicate::sgt
                                           : arith::CmpIPredicate::slt),
            xj, xi);
        equal = arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, xj, xi);
      }
      Value lower =
          arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt, j, i);
      return arith::OrIOp::create(b, l, strictly,
                                  arith::AndIOp::create(b, l, equal, lower));
    };
    Value ranks =
        linalg::GenericOp::create(
            r, loc, TypeRange{rankType}, ValueRange{input, input},
            ValueRange{zeroFilled(r, loc, rankType)},
            {AffineMap::get(rank + 1, 0, self, r.getContext()),
             AffineMap::get(rank + 1, 0, other, r.getContext()),
             AffineMap::get(rank + 1, 0, self, r.getContext())},
            iterators,
            [&](OpBuilder &b, Location l, ValueRange args) {
              Value i = linalg::IndexOp::create(b, l, axis);
              Value j = linalg::IndexOp::create(b, l, rank);
              Value one = arith::ExtUIOp::create(
                  b, l, b.getI64Type(), before(b, l, args[1], args[0], j, i));
              linalg::YieldOp::create(
                  b, l, arith::AddIOp::create(b, l, args[2], one).getResult());
            })
            .getResult(0);
    // values[..., s, ...] = sum_i x_i * (rank_i == s); same for indices.
    SmallVector<AffineExpr> outExprs, inExprs;
    for (int64_t d = 0; d < rank; ++d) {
      outExprs.push_back(r.getAffineDimExpr(d));
      inExprs.push_back(r.getAffineDimExpr(d == axis ? rank : d));
    }
    auto outMap = AffineMap::get(rank + 1, 0, outExprs, r.getContext());
    auto inMap = AffineMap::get(rank + 1, 0, inExprs, r.getContext());
    auto generic = linalg::GenericOp::create(
        r, loc, TypeRange{valuesType, indicesType}, ValueRange{input, ranks},
        ValueRange{zeroFilled(r, loc, valuesType),
                   zeroFilled(r, loc, indicesType)},
        {inMap, inMap, outMap, outMap}, iterators,
        [&](OpBuilder &b, Location l, ValueRange args) {
          Value slot = arith::IndexCastOp::create(
              b, l, b.getI64Type(), linalg::IndexOp::create(b, l, axis));
          Value i = arith::IndexCastOp::create(
              b, l, b.getI64Type(), linalg::IndexOp::create(b, l, rank));
          Value hit = arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq,
                                            args[1], slot);
          Value v = arith::SelectOp::create(b, l, hit, args[0], args[2]);
          Value idx = arith::SelectOp::create(b, l, hit, i, args[3]);
          linalg::YieldOp::create(b, l, ValueRange{v, idx});
        });
    r.replaceOp(op, generic.getResults());
    return success();
  }
};

/// Interpolation taps of one dimension: input indices and their weights.
struct Taps {
  SmallVector<Value> indices;
  SmallVector<Value> weights;
};

Value f64Const(OpBuilder &b, Location loc, double v) {
  return scalarConstant(b, loc, b.getF64Type(), v);
}

/// Clamps an f64 index into [0, size - 1] and converts it to `index`.
Value clampedIndex(OpBuilder &b, Location loc, Value position, int64_t size) {
  Value clamped = arith::MinimumFOp::create(
      b, loc, arith::MaximumFOp::create(b, loc, position, f64Const(b, loc, 0)),
      f64Const(b, loc, static_cast<double>(size - 1)));
  Value i = arith::FPToSIOp::create(b, loc, b.getI64Type(), clamped);
  return arith::IndexCastOp::create(b, loc, b.getIndexType(), i);
}

/// The input coordinate that output coordinate `x` maps to.
Value sourceCoordinate(OpBuilder &b, Location loc, ResizeOp op, Value x,
                       int64_t inSize, int64_t outSize, double scale) {
  auto c = [&](double v) { return f64Const(b, loc, v); };
  Value xf = arith::SIToFPOp::create(
      b, loc, b.getF64Type(),
      arith::IndexCastOp::create(b, loc, b.getI64Type(), x));
  auto halfPixel = [&] {
    return arith::SubFOp::create(
        b, loc,
        arith::DivFOp::create(b, loc, arith::AddFOp::create(b, loc, xf, c(0.5)),
                              c(scale)),
        c(0.5));
  };
  // ONNX measures the resized length as input length times scale, which
  // differs from the integer output size when the scale was given.
  double resizedLength = static_cast<double>(inSize) * scale;
  switch (op.getCoordinateMode()) {
  case CoordinateMode::half_pixel:
    return halfPixel();
  case CoordinateMode::pytorch_half_pixel:
    return resizedLength > 1 ? halfPixel() : c(0);
  case CoordinateMode::align_corners:
    if (resizedLength == 1)
      return c(0);
    return arith::MulFOp::create(
        b, loc, xf, c(static_cast<double>(inSize - 1) / (resizedLength - 1)));
  case CoordinateMode::asymmetric:
    return arith::DivFOp::create(b, loc, xf, c(scale));
  case CoordinateMode::tf_half_pixel_for_nn:
    return arith::DivFOp::create(
        b, loc, arith::AddFOp::create(b, loc, xf, c(0.5)), c(scale));
  }
  llvm_unreachable("unknown coordinate mode");
}

Taps resizeTaps(OpBuilder &b, Location loc, ResizeOp op, Value x,
                int64_t inSize, int64_t outSize, double scale) {
  auto c = [&](double v) { return f64Const(b, loc, v); };
  Taps taps;
  if (inSize == outSize && scale == 1.0) {
    taps.indices.push_back(x);
    taps.weights.push_back(c(1));
    return taps;
  }
  Value pos = sourceCoordinate(b, loc, op, x, inSize, outSize, scale);
  if (op.getMode() == ResizeMode::nearest) {
    Value rounded;
    switch (op.getNearestMode()) {
    case NearestMode::round_prefer_floor:
      rounded = math::CeilOp::create(
          b, loc, arith::SubFOp::create(b, loc, pos, c(0.5)));
      break;
    case NearestMode::round_prefer_ceil:
      rounded = math::FloorOp::create(
          b, loc, arith::AddFOp::create(b, loc, pos, c(0.5)));
      break;
    case NearestMode::floor:
      rounded = math::FloorOp::create(b, loc, pos);
      break;
    case NearestMode::ceil:
      rounded = math::CeilOp::create(b, loc, pos);
      break;
    }
    taps.indices.push_back(clampedIndex(b, loc, rounded, inSize));
    taps.weights.push_back(c(1));
    return taps;
  }
  Value base = math::FloorOp::create(b, loc, pos);
  Value t = arith::SubFOp::create(b, loc, pos, base);
  auto at = [&](double offset) {
    return arith::AddFOp::create(b, loc, base, c(offset)).getResult();
  };
  if (op.getMode() == ResizeMode::linear) {
    taps.indices = {clampedIndex(b, loc, at(0), inSize),
                    clampedIndex(b, loc, at(1), inSize)};
    taps.weights = {arith::SubFOp::create(b, loc, c(1), t), t};
    return taps;
  }
  // Cubic convolution (Keys) with coefficient A.
  double a = op.getCubicCoeffA().convertToDouble();
  auto near = [&](Value s) { // |s| <= 1
    // ((A + 2) s - (A + 3)) s^2 + 1
    Value inner = arith::SubFOp::create(
        b, loc, arith::MulFOp::create(b, loc, c(a + 2), s), c(a + 3));
    return arith::AddFOp::create(
        b, loc,
        arith::MulFOp::create(b, loc, inner,
                              arith::MulFOp::create(b, loc, s, s)),
        c(1));
  };
  auto far = [&](Value s) { // 1 < |s| < 2
    // ((A s - 5A) s + 8A) s - 4A
    Value v = arith::SubFOp::create(
        b, loc, arith::MulFOp::create(b, loc, c(a), s), c(5 * a));
    v = arith::AddFOp::create(b, loc, arith::MulFOp::create(b, loc, v, s),
                              c(8 * a));
    return arith::SubFOp::create(b, loc, arith::MulFOp::create(b, loc, v, s),
                                 c(4 * a));
  };
  Value oneMinusT = arith::SubFOp::create(b, loc, c(1), t);
  SmallVector<Value> weights{
      far(arith::AddFOp::create(b, loc, t, c(1))), near(t), near(oneMinusT),
      far(arith::AddFOp::create(b, loc, oneMinusT, c(1)))};
  SmallVector<Value> positions{at(-1), at(0), at(1), at(2)};
  if (op.getExcludeOutside()) {
    Value total = c(0);
    for (auto [w, p] : llvm::zip(weights, positions)) {
      Value inside = arith::AndIOp::create(
          b, loc,
          arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGE, p, c(0)),
          arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLE, p,
                                c(static_cast<double>(inSize - 1))));
      w = arith::SelectOp::create(b, loc, inside, w, c(0));
      total = arith::AddFOp::create(b, loc, total, w);
    }
    for (Value &w : weights)
      w = arith::DivFOp::create(b, loc, w, total);
  }
  for (auto [w, p] : llvm::zip(weights, positions)) {
    taps.indices.push_back(clampedIndex(b, loc, p, inSize));
    taps.weights.push_back(w);
  }
  return taps;
}

struct LowerResize : OpRewritePattern<ResizeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ResizeOp op,
                                PatternRewriter &r) const override {
    Location loc = op.getLoc();
    auto in = rankedType(op.getInput());
    auto out = cast<RankedTensorType>(op.getType());
    int64_t rank = out.getRank();
    Type element = out.getElementType();
    Value input = op.getInput();
    SmallVector<AffineMap> maps{r.getMultiDimIdentityMap(rank)};
    SmallVector<utils::IteratorType> iterators(rank,
                                               utils::IteratorType::parallel);
    auto generic = linalg::GenericOp::create(
        r, loc, TypeRange{out}, ValueRange{},
        ValueRange{emptyTensor(r, loc, out)}, maps, iterators,
        [&](OpBuilder &b, Location l, ValueRange) {
          SmallVector<Taps> taps;
          for (int64_t d = 0; d < rank; ++d)
            taps.push_back(resizeTaps(
                b, l, op, linalg::IndexOp::create(b, l, d), in.getDimSize(d),
                out.getDimSize(d), op.getScales()[d]));
          // Sum over every combination of one tap per dimension.
          Value sum = f64Const(b, l, 0);
          SmallVector<size_t> choice(rank, 0);
          while (true) {
            SmallVector<Value> index;
            Value weight = f64Const(b, l, 1);
            for (int64_t d = 0; d < rank; ++d) {
              index.push_back(taps[d].indices[choice[d]]);
              weight = arith::MulFOp::create(b, l, weight,
                                             taps[d].weights[choice[d]]);
            }
            Value v =
                castScalar(b, l, tensor::ExtractOp::create(b, l, input, index),
                           b.getF64Type());
            sum = arith::AddFOp::create(b, l, sum,
                                        arith::MulFOp::create(b, l, weight, v));
            int64_t d = rank - 1;
            while (d >= 0 && ++choice[d] == taps[d].indices.size())
              choice[d--] = 0;
            if (d < 0)
              break;
          }
          linalg::YieldOp::create(b, l, castScalar(b, l, sum, element));
        });
    r.replaceOp(op, generic.getResult(0));
    return success();
  }
};

} // namespace

void kiln::lowering::populateNNLoweringPatterns(RewritePatternSet &patterns) {
  patterns.add<LowerMatmul, LowerConv, LowerConvTranspose, LowerPool<MaxPoolOp>,
               LowerPool<AvgPoolOp>, LowerDropout, LowerTopK, LowerResize>(
      patterns.getContext());
}
