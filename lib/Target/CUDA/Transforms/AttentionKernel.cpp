//===- AttentionKernel.cpp - attention as loops that store no scores ------===//
//
// Expanded into its chain (a batched product, the scale and mask, a
// softmax, a second product), attention stores the [B..., Sq, Sk] scores
// several times over and reads them back as many: on a GPU, elementwise
// kernels over matrices far larger than the activations around them. Here
// each query row is one point of an scf.forall that never stores a score:
// it runs over the keys finding the maximum m and the sum l of
// exp(s - m) in a first pass (rescaling l by exp(m_old - m_new) when the
// maximum grows), and weights each value row by its probability
// exp(s - m) / l in a second.
//
// kiln.attention_grad gets two such loops: one over the query rows (the
// query's gradient, from the forward's m and l, and each row's
// rowsum(dO O) for the other), one over the key rows (the key's and the
// value's gradients), each recomputing the probabilities it needs from the
// scores. Where a mask drops every key after some point, or every query
// before some point, the loops end (or start) there. Where the mask fills
// scores (masked_fill, causal_fill), their dS is 0.
//
//===----------------------------------------------------------------------===//

#include "kiln/KilnInterfaces.h"
#include "kiln/KilnOps.h"
#include "kiln/Target/CUDA/Passes.h"
#include "kiln/Transforms/Attention.h"
#include "kiln/Transforms/Utils/NarrowType.h"

#include "mlir/IR/Matchers.h"

#include <limits>

namespace kiln {
#define GEN_PASS_DEF_KILNATTENTIONKERNEL
#include "kiln/Target/CUDA/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

/// What the loops of one attention share: its operands, how they are read,
/// and the builder.
class LoopBuilder {
public:
  /// `narrow`: the type product operands are rounded to as they are read
  /// (null: none). `causal`: each query row sees only the keys up to it,
  /// and `mask` is not read. `maskedFill`, `causalFill`: the scores the
  /// mask fills get no gradient (kiln.attention's masked_fill and
  /// causal_fill).
  LoopBuilder(Operation *op, Value query, Value key, Value value, Value mask,
              double scale, bool causal, bool maskedFill, bool causalFill,
              FloatType narrow)
      : query(query), key(key), value(value), mask(mask), scale(scale),
        causal(causal), maskedFill(maskedFill), causalFill(causalFill),
        narrow(narrow), b(op), loc(op->getLoc()) {
    auto queryType = cast<RankedTensorType>(query.getType());
    batchShape = queryType.getShape().drop_back(2);
    queries = queryType.getShape().drop_back().back();
    keys = cast<RankedTensorType>(key.getType()).getShape().drop_back().back();
    headSize = queryType.getShape().back();
    valueSize = cast<RankedTensorType>(value.getType()).getShape().back();
  }

  /// softmax(q kᵀ scale + mask) v, a point per query row; and each row's
  /// shift m and sum l ([B..., Sq, 2]), which the gradient reuses.
  std::pair<Value, Value> forward() {
    computeBounds(/*columns=*/false);
    auto loop = rowLoop(queries, {valueSize, 2}, "attention");
    SmallVector<Value> q = scaledQuery(loop.row);
    Statistics stats = statistics(loop.row, q);
    // Each key's probability exp(score - m) / l, as the softmax computes it
    // (and rounded as a product's operand under mixed precision), weights
    // its value row.
    SmallVector<Value> zeros(valueSize, f32(0.0));
    scf::ForOp weighted =
        forKeys(loop.row, zeros, [&](Value keyRow, ValueRange carried) {
          Value p =
              rounded(probability(score(q, keyRows(keyRow), loop.row, keyRow),
                                  stats.shift, stats.sum));
          SmallVector<Value> v = readRow(value, keyRow, valueSize, true);
          SmallVector<Value> next;
          for (int64_t e = 0; e < valueSize; ++e)
            next.push_back(math::FmaOp::create(b, loc, p, v[e], carried[e]));
          return next;
        });
    SmallVector<Value> results =
        loop.finish({SmallVector<Value>(weighted.getResults()),
                     SmallVector<Value>{stats.shift, stats.sum}});
    return {results[0], results[1]};
  }

  /// The query, key and value gradients for the attention's result `out`
  /// and its gradient `grad`; `known` is forward's statistics of `out`, when
  /// the forward is kiln-attention-kernel's (null: computed again).
  SmallVector<Value> backward(Value out, Value grad, Value known) {
    computeBounds(/*columns=*/true);
    // A point per query row: the query's gradient, and the row's
    // statistics (the shift m, the sum l, rowsum(dO O)) for the key rows.
    auto queryLoop = rowLoop(queries, {headSize, 3}, "attention_dq");
    Value queryRow = queryLoop.row;
    SmallVector<Value> q = scaledQuery(queryRow);
    // rowsum(dO O), which is rowsum(dP P), in f32; dO is a product operand.
    SmallVector<Value> gradRow = readRow(grad, queryRow, valueSize, false);
    SmallVector<Value> outRow = readRow(out, queryRow, valueSize, false);
    Value centre = dot(gradRow, outRow);
    SmallVector<Value> dO =
        llvm::map_to_vector(gradRow, [&](Value v) { return rounded(v); });
    Statistics stats;
    if (known) {
      SmallVector<Value> at = rowIndex(queryRow);
      at.push_back(index(0));
      stats.shift = load(known, at);
      at.back() = index(1);
      stats.sum = load(known, at);
    } else {
      stats = statistics(queryRow, q);
    }
    SmallVector<Value> zeros(headSize, f32(0.0));
    scf::ForOp queryGrad =
        forKeys(queryRow, zeros, [&](Value keyRow, ValueRange carried) {
          SmallVector<Value> k = keyRows(keyRow);
          Value p = probability(score(q, k, queryRow, keyRow), stats.shift,
                                stats.sum);
          Value dp = dot(dO, readRow(value, keyRow, valueSize, true));
          Value ds = unfilled(scoreGrad(p, dp, centre), queryRow, keyRow);
          SmallVector<Value> next;
          for (int64_t d = 0; d < headSize; ++d)
            next.push_back(math::FmaOp::create(b, loc, ds, k[d], carried[d]));
          return next;
        });
    SmallVector<Value> rowStats{stats.shift, stats.sum, centre};
    SmallVector<Value> queryResults = queryLoop.finish(
        {SmallVector<Value>(queryGrad.getResults()), rowStats});
    Value queryGradient = queryResults[0], statsTensor = queryResults[1];

    // A point per key row: the key's and the value's gradients, over the
    // query rows that see it.
    auto keyLoop = rowLoop(keys, {headSize, valueSize}, "attention_dk_dv");
    Value keyRow = keyLoop.row;
    SmallVector<Value> k = readRow(key, keyRow, headSize, true);
    SmallVector<Value> v = readRow(value, keyRow, valueSize, true);
    SmallVector<Value> initial(headSize + valueSize, f32(0.0));
    Value first = index(0);
    if (causal)
      first = keyRow;
    else if (columnStarts)
      first = boundAt(columnStarts, keyRow);
    scf::ForOp keyGrads = loopOver(
        first, index(queries), initial, [&](Value row, ValueRange carried) {
          SmallVector<Value> qi;
          SmallVector<Value> qs = scaledQuery(row, qi);
          SmallVector<Value> at = rowIndex(row);
          at.push_back(index(0));
          Value shift = load(statsTensor, at);
          at.back() = index(1);
          Value sum = load(statsTensor, at);
          at.back() = index(2);
          Value rowCentre = load(statsTensor, at);
          Value p = probability(score(qs, k, row, keyRow), shift, sum);
          SmallVector<Value> dOi = readRow(grad, row, valueSize, true);
          Value ds =
              unfilled(scoreGrad(p, dot(dOi, v), rowCentre), row, keyRow);
          Value pr = rounded(p);
          SmallVector<Value> next;
          for (int64_t d = 0; d < headSize; ++d)
            next.push_back(math::FmaOp::create(b, loc, ds, qi[d], carried[d]));
          for (int64_t e = 0; e < valueSize; ++e)
            next.push_back(
                math::FmaOp::create(b, loc, pr, dOi[e], carried[headSize + e]));
          return next;
        });
    ValueRange sums = keyGrads.getResults();
    SmallVector<Value> keyResults =
        keyLoop.finish({SmallVector<Value>(sums.take_front(headSize)),
                        SmallVector<Value>(sums.drop_front(headSize))});
    return {queryGradient, keyResults[0], keyResults[1]};
  }

private:
  /// A mask other than a constant causal one may still drop whole runs of
  /// scores: every key after some point (a causal mask held in a buffer,
  /// padding), or every query before some point. Its bounds (per row, and
  /// with `columns` per column too), computed before the loops, end (and
  /// for the gradient's key rows, start) them there; the scores they skip
  /// have probability exactly 0, so nothing changes.
  void computeBounds(bool columns) {
    if (!mask || causal || cast<RankedTensorType>(mask.getType()).getRank() < 2)
      return;
    auto maskType = cast<RankedTensorType>(mask.getType());
    // A mask broadcast along the keys has no last key of its own.
    if (maskType.getDimSize(maskType.getRank() - 1) == keys)
      rowEnds = maskBounds(/*perRow=*/true);
    if (columns)
      columnStarts = maskBounds(/*perRow=*/false);
  }

  /// An scf.forall over the batch indices and `rows` rows, whose outputs
  /// are [B..., rows, width] tensors; `finish` writes each point's row of
  /// each and returns the results.
  struct RowLoop {
    LoopBuilder &builder;
    scf::ForallOp loop;
    SmallVector<int64_t> widths;
    Value row; ///< the row index of this point

    SmallVector<Value> finish(ArrayRef<SmallVector<Value>> rows) {
      OpBuilder &b = builder.b;
      Location loc = builder.loc;
      Block *body = loop.getBody();
      int64_t rank = builder.batchShape.size() + 2;
      SmallVector<Value> point(body->getArguments().take_front(rank - 1));
      SmallVector<std::pair<Value, Value>> slices;
      SmallVector<OpFoldResult> offsets(point.begin(), point.end()),
          strides(rank, b.getIndexAttr(1));
      offsets.push_back(b.getIndexAttr(0));
      for (auto [i, row] : llvm::enumerate(rows)) {
        Value output = loop.getRegionIterArgs()[i];
        SmallVector<OpFoldResult> sizes = sizesOf(widths[i]);
        auto rowType = RankedTensorType::get({widths[i]}, b.getF32Type());
        Value slice = tensor::ExtractSliceOp::create(b, loc, rowType, output,
                                                     offsets, sizes, strides);
        for (auto [e, element] : llvm::enumerate(row))
          slice = tensor::InsertOp::create(b, loc, element, slice,
                                           builder.index(e));
        slices.push_back({slice, output});
      }
      b.setInsertionPointToStart(loop.getTerminator().getBody());
      for (auto [i, slice] : llvm::enumerate(slices))
        tensor::ParallelInsertSliceOp::create(b, loc, slice.first, slice.second,
                                              offsets, sizesOf(widths[i]),
                                              strides);
      // What follows goes after the loop.
      b.setInsertionPointAfter(loop);
      return SmallVector<Value>(loop.getResults());
    }

    SmallVector<OpFoldResult> sizesOf(int64_t width) {
      SmallVector<OpFoldResult> sizes(builder.batchShape.size() + 1,
                                      builder.b.getIndexAttr(1));
      sizes.push_back(builder.b.getIndexAttr(width));
      return sizes;
    }
  };

  /// `label` names the kernel the loop becomes (withKernelLabel).
  RowLoop rowLoop(int64_t rows, ArrayRef<int64_t> widths, StringRef label) {
    SmallVector<OpFoldResult> counts;
    for (int64_t size : batchShape)
      counts.push_back(b.getIndexAttr(size));
    counts.push_back(b.getIndexAttr(rows));
    SmallVector<Value> outputs;
    for (int64_t width : widths) {
      SmallVector<int64_t> shape(batchShape);
      shape.append({rows, width});
      outputs.push_back(tensor::EmptyOp::create(b, loc, shape, b.getF32Type()));
    }
    auto loop = scf::ForallOp::create(b, withKernelLabel(loc, label), counts,
                                      outputs, /*mapping=*/std::nullopt);
    b.setInsertionPointToStart(loop.getBody());
    SmallVector<Value> ivs(loop.getInductionVars());
    batch.assign(ivs.begin(), ivs.end() - 1);
    return RowLoop{*this, loop, SmallVector<int64_t>(widths), ivs.back()};
  }

  Value index(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value f32(double v) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
  }
  /// The element of `tensor` at `indices`, read where it is stored when
  /// `tensor` only rearranges another tensor: a kiln.transpose, a
  /// kiln.reshape that splits the last dimension (the heads of a
  /// projection), a kiln.split or a kiln.slice. Attention's operands are
  /// such views of a projection's output, so the rearranged copies need no
  /// kernel of their own once nothing else reads them.
  Value load(Value tensor, ArrayRef<Value> indices) {
    SmallVector<Value> at(indices);
    while (Operation *def = tensor.getDefiningOp()) {
      if (auto transpose = dyn_cast<kiln::TransposeOp>(def)) {
        SmallVector<Value> from(at.size());
        for (auto [i, p] : llvm::enumerate(transpose.getPermutation()))
          from[p] = at[i];
        at = from;
        tensor = transpose.getInput();
        continue;
      }
      if (auto reshape = dyn_cast<kiln::ReshapeOp>(def)) {
        auto in = cast<RankedTensorType>(reshape.getInput().getType());
        auto out = cast<RankedTensorType>(reshape.getType());
        int64_t rank = in.getRank();
        if (!in.hasStaticShape() || !out.hasStaticShape() ||
            out.getRank() != rank + 1 ||
            in.getShape().drop_back() != out.getShape().take_front(rank - 1) ||
            in.getDimSize(rank - 1) !=
                out.getDimSize(rank - 1) * out.getDimSize(rank))
          break;
        Value last = arith::AddIOp::create(
            b, loc,
            arith::MulIOp::create(b, loc, at[rank - 1],
                                  index(out.getDimSize(rank))),
            at[rank]);
        at.resize(rank);
        at.back() = last;
        tensor = reshape.getInput();
        continue;
      }
      if (auto split = dyn_cast<kiln::SplitOp>(def)) {
        int64_t axis = split.getAxis();
        if (axis < 0 || axis >= static_cast<int64_t>(at.size()))
          break;
        int64_t offset = 0;
        for (int64_t size : split.getSizes().take_front(
                 cast<OpResult>(tensor).getResultNumber()))
          offset += size;
        if (offset != 0)
          at[axis] = arith::AddIOp::create(b, loc, at[axis], index(offset));
        tensor = split.getInput();
        continue;
      }
      if (auto slice = dyn_cast<kiln::SliceOp>(def)) {
        for (auto [i, start, stride] :
             llvm::enumerate(slice.getStart(), slice.getStride())) {
          Value position = at[i];
          if (stride != 1)
            position = arith::MulIOp::create(b, loc, position, index(stride));
          if (start != 0)
            position = arith::AddIOp::create(b, loc, position, index(start));
          at[i] = position;
        }
        tensor = slice.getInput();
        continue;
      }
      break;
    }
    return tensor::ExtractOp::create(b, loc, tensor, at);
  }
  /// `value` rounded to the mixed-precision type (if any) and back.
  Value rounded(Value value) {
    if (!narrow)
      return value;
    Value narrowed = arith::TruncFOp::create(b, loc, narrow, value);
    return arith::ExtFOp::create(b, loc, b.getF32Type(), narrowed);
  }
  /// The indices of row `row` (at this point's batch indices), without the
  /// column.
  SmallVector<Value> rowIndex(Value row) {
    SmallVector<Value> at(batch);
    at.push_back(row);
    return at;
  }
  /// The `width` elements of row `row` of `tensor`, rounded as product
  /// operands when `operand`.
  SmallVector<Value> readRow(Value tensor, Value row, int64_t width,
                             bool operand) {
    SmallVector<Value> at = rowIndex(row);
    at.push_back(Value());
    SmallVector<Value> elements;
    for (int64_t e = 0; e < width; ++e) {
      at.back() = index(e);
      Value element = load(tensor, at);
      elements.push_back(operand ? rounded(element) : element);
    }
    return elements;
  }
  /// The query row `row`, with the scale applied once instead of to each
  /// score; `read` gets the row as read (rounded as a product operand).
  SmallVector<Value> scaledQuery(Value row, SmallVector<Value> &read) {
    Value factor = f32(scale);
    read = readRow(query, row, headSize, true);
    SmallVector<Value> q;
    for (Value element : read)
      q.push_back(arith::MulFOp::create(b, loc, element, factor));
    return q;
  }
  SmallVector<Value> scaledQuery(Value row) {
    SmallVector<Value> read;
    return scaledQuery(row, read);
  }
  SmallVector<Value> keyRows(Value keyRow) {
    return readRow(key, keyRow, headSize, true);
  }
  /// x · y, adding the products in order.
  Value dot(ArrayRef<Value> x, ArrayRef<Value> y) {
    Value sum = arith::MulFOp::create(b, loc, x[0], y[0]);
    for (size_t d = 1; d < x.size(); ++d)
      sum = math::FmaOp::create(b, loc, x[d], y[d], sum);
    return sum;
  }
  /// The score of a query row (scaled) and a key row, masked.
  Value score(ArrayRef<Value> q, ArrayRef<Value> k, Value queryRow,
              Value keyRow) {
    Value s = dot(q, k);
    if (mask && !causal)
      s = arith::AddFOp::create(b, loc, s, maskAt(queryRow, keyRow));
    return s;
  }
  Value probability(Value score, Value shift, Value sum) {
    Value e = math::ExpOp::create(b, loc,
                                  arith::SubFOp::create(b, loc, score, shift));
    return arith::DivFOp::create(b, loc, e, sum);
  }
  /// dS scale, with dS = P (dP - rowsum(dP P)), rounded as the operand of
  /// the query's and key's gradient products.
  Value scoreGrad(Value p, Value dp, Value centre) {
    Value ds = arith::MulFOp::create(b, loc, p,
                                     arith::SubFOp::create(b, loc, dp, centre));
    if (scale != 1.0)
      ds = arith::MulFOp::create(b, loc, ds, f32(scale));
    return rounded(ds);
  }

  /// `ds`, or 0 where a masked_fill mask fills the score, or with
  /// causal_fill after the query's position (query row `queryRow`, key row
  /// `keyRow`).
  Value unfilled(Value ds, Value queryRow, Value keyRow) {
    if (causalFill && !causal) {
      Value after = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ugt,
                                          keyRow, queryRow);
      ds = arith::SelectOp::create(b, loc, after, f32(0.0), ds);
    }
    if (!maskedFill || !mask || causal)
      return ds;
    Value filled =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLE,
                              maskAt(queryRow, keyRow), f32(kMaskedFillAtMost));
    return arith::SelectOp::create(b, loc, filled, f32(0.0), ds);
  }

  /// A loop from `first` to `end` carrying `initial`; `body` returns what
  /// one iteration makes of the carried values.
  scf::ForOp
  loopOver(Value first, Value end, ArrayRef<Value> initial,
           function_ref<SmallVector<Value>(Value, ValueRange)> body) {
    return scf::ForOp::create(
        b, loc, first, end, index(1), initial,
        [&](OpBuilder &nested, Location, Value iv, ValueRange carried) {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(nested.getInsertionBlock(),
                              nested.getInsertionPoint());
          scf::YieldOp::create(b, loc, body(iv, carried));
        });
  }
  /// A loop over the keys query row `queryRow` sees.
  scf::ForOp forKeys(Value queryRow, ArrayRef<Value> initial,
                     function_ref<SmallVector<Value>(Value, ValueRange)> body) {
    Value end = index(keys);
    if (causal) {
      end = arith::AddIOp::create(b, loc, queryRow, index(1));
    } else if (rowEnds) {
      // 0: a row the mask drops entirely keeps every key, so that its
      // probabilities are 0 / 0 as the softmax's are.
      Value last = boundAt(rowEnds, queryRow);
      Value none = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, last,
                                         index(0));
      end = arith::SelectOp::create(b, loc, none, end, last);
    }
    return loopOver(index(0), end, initial, body);
  }

  /// Where the mask stops dropping scores: per row of the mask (`perRow`),
  /// one past its last key that is not -inf (0 when there is none); per
  /// column, its first query that is not -inf (the scores' query count
  /// when there is none). An i32 tensor of the mask's shape without its key
  /// or query dimension.
  Value maskBounds(bool perRow) {
    auto maskType = cast<RankedTensorType>(mask.getType());
    int64_t rank = maskType.getRank();
    int64_t reduced = perRow ? rank - 1 : rank - 2;
    SmallVector<int64_t> shape;
    SmallVector<AffineExpr> kept;
    SmallVector<utils::IteratorType> iterators;
    for (int64_t d = 0; d < rank; ++d) {
      iterators.push_back(d == reduced ? utils::IteratorType::reduction
                                       : utils::IteratorType::parallel);
      if (d == reduced)
        continue;
      shape.push_back(maskType.getDimSize(d));
      kept.push_back(b.getAffineDimExpr(d));
    }
    Type i32 = b.getI32Type();
    int64_t none = perRow ? 0 : queries;
    Value init = tensor::EmptyOp::create(b, loc, shape, i32);
    Value start = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(none));
    Value filled = linalg::FillOp::create(b, loc, start, init).getResult(0);
    SmallVector<AffineMap> maps{b.getMultiDimIdentityMap(rank),
                                AffineMap::get(rank, 0, kept, b.getContext())};
    auto generic = linalg::GenericOp::create(
        b, withKernelLabel(loc, "attention_mask_bounds"),
        TypeRange{filled.getType()}, ValueRange{mask}, ValueRange{filled}, maps,
        iterators, [&](OpBuilder &nb, Location nloc, ValueRange args) {
          Value at = arith::IndexCastOp::create(
              nb, nloc, i32, linalg::IndexOp::create(nb, nloc, reduced));
          if (perRow)
            at = arith::AddIOp::create(
                nb, nloc, at,
                arith::ConstantOp::create(nb, nloc, nb.getI32IntegerAttr(1)));
          // NaN counts as kept: it reaches the result as the softmax's does.
          Value kept = arith::CmpFOp::create(
              nb, nloc, arith::CmpFPredicate::UNE, args[0],
              arith::ConstantOp::create(
                  nb, nloc,
                  nb.getF32FloatAttr(
                      -std::numeric_limits<double>::infinity())));
          Value here = arith::SelectOp::create(
              nb, nloc, kept, at,
              arith::ConstantOp::create(nb, nloc, nb.getI32IntegerAttr(none)));
          Value bound =
              perRow
                  ? arith::MaxSIOp::create(nb, nloc, args[1], here).getResult()
                  : arith::MinSIOp::create(nb, nloc, args[1], here).getResult();
          linalg::YieldOp::create(nb, nloc, ValueRange{bound});
        });
    return generic.getResult(0);
  }

  /// The bound of score row (or key column) `row` at this point's batch
  /// indices, through the mask's broadcast, as an index.
  Value boundAt(Value bounds, Value row) {
    return arith::IndexCastOp::create(b, loc, b.getIndexType(),
                                      broadcastLoad(bounds, rowIndex(row)));
  }

  /// The shift m (the maximum score, or 0 where every score is -inf) and
  /// the sum l of exp(score - m) of a query row.
  struct Statistics {
    Value shift, sum;
  };
  /// One pass over the keys, both updated as each key comes (l rescaled by
  /// exp(m_old - m_new) when the maximum grows).
  Statistics statistics(Value queryRow, ArrayRef<Value> q) {
    Value negInf = f32(-std::numeric_limits<double>::infinity());
    scf::ForOp loop = forKeys(
        queryRow, {negInf, f32(0.0)}, [&](Value keyRow, ValueRange carried) {
          Value s = score(q, keyRows(keyRow), queryRow, keyRow);
          Value grown = arith::MaximumFOp::create(b, loc, carried[0], s);
          Value shift = finiteShift(grown);
          Value rescale = math::ExpOp::create(
              b, loc, arith::SubFOp::create(b, loc, carried[0], shift));
          Value weight = math::ExpOp::create(
              b, loc, arith::SubFOp::create(b, loc, s, shift));
          return SmallVector<Value>{
              grown, math::FmaOp::create(b, loc, carried[1], rescale, weight)};
        });
    return {finiteShift(loop.getResult(0)), loop.getResult(1)};
  }

  /// `maximum`, or 0 while every score so far is -inf (masked): nothing has
  /// weight yet, and shifting by 0 keeps exp(-inf - -inf) from making NaN.
  Value finiteShift(Value maximum) {
    Value none =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, maximum,
                              f32(-std::numeric_limits<double>::infinity()));
    return arith::SelectOp::create(b, loc, none, f32(0.0), maximum);
  }

  /// The mask element for this score.
  Value maskAt(Value queryRow, Value keyRow) {
    SmallVector<Value> scoreIndex = rowIndex(queryRow);
    scoreIndex.push_back(keyRow);
    return broadcastLoad(mask, scoreIndex);
  }

  /// The element of `tensor` (numpy-broadcast, from the right, to a shape
  /// indexed by `full`) at `full`: a size-1 dimension reads index 0.
  Value broadcastLoad(Value tensor, ArrayRef<Value> full) {
    auto type = cast<RankedTensorType>(tensor.getType());
    int64_t offset = full.size() - type.getRank();
    SmallVector<Value> at;
    for (auto [d, size] : llvm::enumerate(type.getShape()))
      at.push_back(size == 1 ? index(0) : full[d + offset]);
    return load(tensor, at);
  }

  Value query, key, value, mask;
  /// maskBounds per row and per column (null: none).
  Value rowEnds, columnStarts;
  double scale;
  bool causal, maskedFill, causalFill;
  FloatType narrow;
  OpBuilder b;
  Location loc;
  ArrayRef<int64_t> batchShape;
  int64_t queries, keys, headSize, valueSize;
  /// The batch indices of the point being built.
  SmallVector<Value> batch;
};

struct KilnAttentionKernelPass
    : kiln::impl::KilnAttentionKernelBase<KilnAttentionKernelPass> {
  using KilnAttentionKernelBase::KilnAttentionKernelBase;

  void runOnOperation() override {
    FloatType narrow = narrowFloatType(&getContext(), amp);
    if (!narrow && !amp.empty()) {
      getOperation().emitError("kiln-attention-kernel: amp must be bf16, f16 "
                               "or empty, not '")
          << amp << "'";
      return signalPassFailure();
    }
    SmallVector<Operation *> ops;
    getOperation().walk([&](Operation *op) {
      if (isa<AttentionOp, AttentionGradOp>(op))
        ops.push_back(op);
    });
    // The statistics of each output the pass computed, for its gradient.
    llvm::DenseMap<Value, Value> statisticsOf;
    for (Operation *op : ops) {
      if (auto attention = dyn_cast<AttentionOp>(op)) {
        std::optional<LoopBuilder> loops = builderFor(
            op, attention.getQuery(), attention.getKey(), attention.getValue(),
            attention.getMask(), attention.getScale().convertToDouble(),
            attention.getMaskedFill(), attention.getCausalFill(), narrow);
        if (!loops)
          continue;
        auto [out, statistics] = loops->forward();
        attention.replaceAllUsesWith(out);
        statisticsOf[out] = statistics;
      } else {
        auto grad = cast<AttentionGradOp>(op);
        std::optional<LoopBuilder> loops =
            builderFor(op, grad.getQuery(), grad.getKey(), grad.getValue(),
                       grad.getMask(), grad.getScale().convertToDouble(),
                       grad.getMaskedFill(), grad.getCausalFill(), narrow);
        if (!loops)
          continue;
        grad.replaceAllUsesWith(loops->backward(
            grad.getOut(), grad.getGrad(), statisticsOf.lookup(grad.getOut())));
      }
      op->erase();
    }
  }

  /// The loop builder for an attention on these operands, if this pass
  /// takes it: f32 tensors, query and value head sizes from 1 to
  /// max-head-size.
  std::optional<LoopBuilder> builderFor(Operation *op, Value query, Value key,
                                        Value value, Value mask, double scale,
                                        bool maskedFill, bool causalFill,
                                        FloatType narrow) {
    auto isF32 = [](Value v) {
      return cast<RankedTensorType>(v.getType()).getElementType().isF32();
    };
    if (!isF32(query) || !isF32(key) || !isF32(value) || (mask && !isF32(mask)))
      return std::nullopt;
    auto queryType = cast<RankedTensorType>(query.getType());
    int64_t headSize = queryType.getShape().back();
    int64_t valueSize =
        cast<RankedTensorType>(value.getType()).getShape().back();
    if (headSize < 1 || headSize > maxHeadSize || valueSize < 1 ||
        valueSize > maxHeadSize)
      return std::nullopt;
    int64_t queries = queryType.getShape().drop_back().back();
    int64_t keys =
        cast<RankedTensorType>(key.getType()).getShape().drop_back().back();
    SmallVector<Operation *> fixed;
    bool causal = isCausalMask(mask, queries, keys, fixed);
    if (causal)
      fixParameters(fixed);
    return LoopBuilder(op, query, key, value, mask, scale, causal, maskedFill,
                       causalFill, narrow);
  }
};

} // namespace
