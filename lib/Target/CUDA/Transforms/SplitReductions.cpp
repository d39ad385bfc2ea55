//===- SplitReductions.cpp - long reductions in two parallel stages -------===//
//
// A GPU kernel runs one thread per point of its parallel loops, each
// combining its reduction loops sequentially. A sum over many rows into few
// outputs (a bias or normalization weight's gradient: [batch, seq, n] into
// [n]) then has few threads with long loops. Splitting the rows into f
// groups sums each group in parallel into a [f, n] partial (f times the
// threads, 1/f of the loop each, neighbouring threads reading neighbouring
// elements), and a second kernel adds the f partials into the output. A
// reduction along rows (softmax, normalization, cross-entropy) has a thread
// per row reading its row alone, far from its neighbours' rows; f
// interleaved parts of each row give neighbouring threads neighbouring
// elements.
//
//===----------------------------------------------------------------------===//

#include "kiln/Target/CUDA/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"

#include <limits>

namespace kiln {
#define GEN_PASS_DEF_KILNSPLITREDUCTIONS
#include "kiln/Target/CUDA/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {

/// The op combining the output's element with the rest in `op`'s body, for
/// a reduction on tensors into one output with parallel loops too:
/// `combine(out, g(inputs))` for an f32 addf, maximumf, maxnumf, minimumf or
/// minnumf whose result is yielded, and whose identity `identity` is set;
/// null otherwise, or when `g` reads the loop indices (which a split
/// renumbers).
Operation *combiner(linalg::GenericOp op, double &identity) {
  if (!op.hasPureTensorSemantics() || op.getNumDpsInits() != 1 ||
      op.getNumParallelLoops() == 0)
    return nullptr;
  Block *body = op.getBody();
  if (!body->getOps<linalg::IndexOp>().empty())
    return nullptr;
  BlockArgument acc = body->getArguments().back();
  auto yield = cast<linalg::YieldOp>(body->getTerminator());
  if (!acc.getType().isF32() || !acc.hasOneUse() ||
      yield.getValues().size() != 1)
    return nullptr;
  Operation *combine = yield.getValues()[0].getDefiningOp();
  if (!combine || combine->getBlock() != body ||
      *acc.getUsers().begin() != combine || combine->getNumOperands() != 2)
    return nullptr;
  double infinity = std::numeric_limits<double>::infinity();
  if (isa<arith::AddFOp>(combine))
    identity = 0.0;
  else if (isa<arith::MaximumFOp, arith::MaxNumFOp>(combine))
    identity = -infinity;
  else if (isa<arith::MinimumFOp, arith::MinNumFOp>(combine))
    identity = infinity;
  else
    return nullptr;
  return combine;
}

/// `combine`'s kind of op on `x` and `y`.
Value recombine(OpBuilder &b, Location loc, Operation *combine, Value x,
                Value y) {
  OperationState state(loc, combine->getName().getStringRef(), ValueRange{x, y},
                       TypeRange{x.getType()}, combine->getAttrs());
  return b.create(state)->getResult(0);
}

/// Replaces `op` by two kernels: `op`'s body over `inputs` (read through
/// `maps`, the last the partial's), combining from the identity into a new
/// f32 partial of `partialShape`, its last loop the only reduction; then the
/// partial combined into `op`'s output, read through `partialMap` and
/// written through `outMap`, whose loops are parallel but the last.
void replaceByTwoStages(OpBuilder &b, linalg::GenericOp op, Operation *combine,
                        double identity, ValueRange inputs,
                        ArrayRef<AffineMap> maps,
                        ArrayRef<int64_t> partialShape, AffineMap partialMap,
                        AffineMap outMap) {
  Location loc = op.getLoc();
  Value empty = tensor::EmptyOp::create(b, loc, partialShape, b.getF32Type());
  Value start = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(identity));
  Value starts =
      linalg::FillOp::create(b, loc, ValueRange{start}, ValueRange{empty})
          .getResult(0);
  SmallVector<utils::IteratorType> partialIterators(
      maps.front().getNumDims() - 1, utils::IteratorType::parallel);
  partialIterators.push_back(utils::IteratorType::reduction);
  auto partial =
      linalg::GenericOp::create(b, loc, TypeRange{starts.getType()}, inputs,
                                ValueRange{starts}, maps, partialIterators);
  IRMapping mapping;
  op.getRegion().cloneInto(&partial.getRegion(), mapping);
  SmallVector<utils::IteratorType> finalIterators(
      partialMap.getNumDims() - 1, utils::IteratorType::parallel);
  finalIterators.push_back(utils::IteratorType::reduction);
  auto total = linalg::GenericOp::create(
      b, loc, op.getResultTypes(), ValueRange{partial.getResult(0)},
      op.getDpsInits(), ArrayRef<AffineMap>{partialMap, outMap}, finalIterators,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        linalg::YieldOp::create(
            nb, nloc,
            ValueRange{recombine(nb, nloc, combine, args[1], args[0])});
      });
  op->replaceAllUsesWith(total->getResults());
  op.erase();
}

struct KilnSplitReductionsPass
    : kiln::impl::KilnSplitReductionsBase<KilnSplitReductionsPass> {
  using KilnSplitReductionsBase::KilnSplitReductionsBase;

  void runOnOperation() override {
    SmallVector<linalg::GenericOp> candidates;
    getOperation().walk(
        [&](linalg::GenericOp op) { candidates.push_back(op); });
    for (linalg::GenericOp op : candidates) {
      // Matrix products go to the library whole.
      if (op->hasAttr("kiln.matmul"))
        continue;
      if (succeeded(split(op)) || succeeded(splitRows(op)))
        ++numSplit;
    }
  }

  /// The number of interleaved parts to split a row of `length` into: the
  /// most, up to a warp (32), that divides it and leaves at least 4
  /// elements a part; 1 for rows shorter than 64.
  static int64_t parts(int64_t length) {
    if (length < 64)
      return 1;
    for (int64_t f = 32; f > 1; --f)
      if (length % f == 0 && length / f >= 4)
        return f;
    return 1;
  }

  /// A partial combine and a final one for a reduction over one trailing
  /// loop (a row: softmax's sums and maxima, a normalization's moments, the
  /// cross-entropy's log-sum-exp): part g of f combines the row's elements
  /// g, g + f, g + 2f, ..., so that neighbouring threads read neighbouring
  /// elements, into a [rows..., f] partial; the final kernel combines the f
  /// parts of each row into the output.
  LogicalResult splitRows(linalg::GenericOp op) {
    double identity = 0;
    Operation *combine = nullptr;
    if (op.getNumReductionLoops() != 1 || !(combine = combiner(op, identity)))
      return failure();
    int64_t loops = op.getNumLoops();
    int64_t r = loops - 1;
    SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
    if (iterators[r] != utils::IteratorType::reduction)
      return failure();
    AffineMap outMap = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
    if (outMap != AffineMap::getMultiDimIdentityMap(loops, op.getContext())
                      .getMajorSubMap(r))
      return failure();
    SmallVector<int64_t> sizes = op.getStaticLoopRanges();
    if (llvm::any_of(sizes, ShapedType::isDynamic))
      return failure();
    int64_t f = parts(sizes[r]);
    if (f <= 1)
      return failure();
    // Every input is read through a projection: its dimensions are loops,
    // in increasing order.
    for (OpOperand *input : op.getDpsInputOperands()) {
      AffineMap map = op.getMatchingIndexingMap(input);
      if (!map.isProjectedPermutation(/*allowZeroInResults=*/false) ||
          !isa<RankedTensorType>(input->get().getType()))
        return failure();
      for (unsigned i = 1; i < map.getNumResults(); ++i)
        if (map.getDimPosition(i) <= map.getDimPosition(i - 1))
          return failure();
    }

    OpBuilder b(op);
    Location loc = op.getLoc();
    MLIRContext *context = b.getContext();
    auto dim = [&](int64_t d) { return getAffineDimExpr(d, context); };
    // The partial's loops: the rows (0..r-1), the part (r), the element of
    // the part (r + 1).
    int64_t partialLoops = loops + 1;
    SmallVector<Value> inputs;
    SmallVector<AffineMap> maps;
    for (OpOperand *input : op.getDpsInputOperands()) {
      AffineMap map = op.getMatchingIndexingMap(input);
      auto type = cast<RankedTensorType>(input->get().getType());
      SmallVector<AffineExpr> exprs;
      SmallVector<int64_t> shape;
      SmallVector<ReassociationIndices> expand;
      for (unsigned i = 0; i < map.getNumResults(); ++i) {
        unsigned d = map.getDimPosition(i);
        int64_t first = static_cast<int64_t>(shape.size());
        if (d == static_cast<unsigned>(r)) {
          // Element i * f + g: [R] as [R / f, f].
          exprs.push_back(dim(r + 1));
          exprs.push_back(dim(r));
          shape.push_back(sizes[r] / f);
          shape.push_back(f);
          expand.push_back({first, first + 1});
        } else {
          exprs.push_back(dim(d));
          shape.push_back(type.getDimSize(i));
          expand.push_back({first});
        }
      }
      Value value = input->get();
      if (map.isFunctionOfDim(r))
        value = tensor::ExpandShapeOp::create(b, loc, type.clone(shape), value,
                                              expand);
      inputs.push_back(value);
      maps.push_back(AffineMap::get(partialLoops, 0, exprs, context));
    }
    SmallVector<AffineExpr> partialExprs;
    SmallVector<int64_t> partialShape;
    for (int64_t d = 0; d <= r; ++d) {
      partialExprs.push_back(dim(d));
      partialShape.push_back(d < r ? sizes[d] : f);
    }
    maps.push_back(AffineMap::get(partialLoops, 0, partialExprs, context));
    // The parts of each row combined into the output: loops (rows, part).
    SmallVector<AffineExpr> rowExprs;
    for (int64_t d = 0; d < r; ++d)
      rowExprs.push_back(dim(d));
    replaceByTwoStages(b, op, combine, identity, inputs, maps, partialShape,
                       AffineMap::getMultiDimIdentityMap(loops, context),
                       AffineMap::get(loops, 0, rowExprs, context));
    return success();
  }

  /// The number of groups to split `rows` rows into for `columns` outputs:
  /// the most that divides `rows`, keeps at least minRows rows a group and
  /// at most maxThreads threads; 1 when splitting does not pay.
  int64_t groups(int64_t rows, int64_t columns) {
    if (columns >= maxThreads || rows < 2 * minRows)
      return 1;
    for (int64_t f = std::min(rows / minRows, maxThreads / columns); f > 1; --f)
      if (rows % f == 0)
        return f;
    return 1;
  }

  /// Splits a sum over leading reduction loops into trailing parallel ones,
  /// every input read whole (identity indexing) and the output indexed by
  /// the parallel loops.
  LogicalResult split(linalg::GenericOp op) {
    double identity = 0;
    Operation *combine = nullptr;
    if (op.getNumReductionLoops() == 0 || !(combine = combiner(op, identity)))
      return failure();
    SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
    int64_t k = op.getNumReductionLoops();
    int64_t loops = op.getNumLoops();
    for (int64_t d = 0; d < loops; ++d)
      if ((d < k) != (iterators[d] == utils::IteratorType::reduction))
        return failure();
    for (OpOperand *input : op.getDpsInputOperands())
      if (!op.getMatchingIndexingMap(input).isIdentity() ||
          !isa<RankedTensorType>(input->get().getType()))
        return failure();
    AffineMap outMap = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
    if (outMap.getNumResults() != loops - k)
      return failure();
    for (int64_t r = 0; r < loops - k; ++r)
      if (outMap.getResult(r) != getAffineDimExpr(k + r, op.getContext()))
        return failure();
    SmallVector<int64_t> sizes = op.getStaticLoopRanges();
    if (llvm::any_of(sizes, ShapedType::isDynamic))
      return failure();
    int64_t rows = 1, columns = 1;
    for (int64_t d = 0; d < loops; ++d)
      (d < k ? rows : columns) *= sizes[d];
    int64_t f = groups(rows, columns);
    if (f <= 1)
      return failure();

    OpBuilder b(op);
    Location loc = op.getLoc();
    MLIRContext *context = b.getContext();
    SmallVector<int64_t> columnShape(sizes.begin() + k, sizes.end());
    // Each input as [f, rows / f, columns...].
    SmallVector<int64_t> splitShape{f, rows / f};
    splitShape.append(columnShape);
    SmallVector<Value> inputs;
    for (Value input : op.getDpsInputs()) {
      auto type = cast<RankedTensorType>(input.getType());
      SmallVector<ReassociationIndices> collapse{
          llvm::to_vector(llvm::seq<int64_t>(0, k))};
      for (int64_t d = k; d < loops; ++d)
        collapse.push_back({d});
      Value flat = input;
      if (k > 1)
        flat = tensor::CollapseShapeOp::create(b, loc, input, collapse);
      SmallVector<ReassociationIndices> expand{{0, 1}};
      for (int64_t d = 1; d < loops - k + 1; ++d)
        expand.push_back({d + 1});
      inputs.push_back(tensor::ExpandShapeOp::create(
          b, loc, type.clone(splitShape), flat, expand));
    }
    // The partial sums: loops (group, columns..., row in group).
    int64_t partialLoops = 2 + (loops - k);
    auto dim = [&](int64_t d) { return getAffineDimExpr(d, context); };
    SmallVector<AffineExpr> inputExprs{dim(0), dim(partialLoops - 1)};
    SmallVector<AffineExpr> partialExprs{dim(0)};
    for (int64_t c = 0; c < loops - k; ++c) {
      inputExprs.push_back(dim(1 + c));
      partialExprs.push_back(dim(1 + c));
    }
    AffineMap inputMap = AffineMap::get(partialLoops, 0, inputExprs, context);
    SmallVector<AffineMap> maps(inputs.size(), inputMap);
    maps.push_back(AffineMap::get(partialLoops, 0, partialExprs, context));
    SmallVector<int64_t> partialShape{f};
    partialShape.append(columnShape);
    // The partials combined into the output: loops (columns..., group).
    int64_t finalLoops = 1 + (loops - k);
    SmallVector<AffineExpr> groupExprs{dim(finalLoops - 1)};
    SmallVector<AffineExpr> outExprs;
    for (int64_t c = 0; c < loops - k; ++c) {
      groupExprs.push_back(dim(c));
      outExprs.push_back(dim(c));
    }
    replaceByTwoStages(b, op, combine, identity, inputs, maps, partialShape,
                       AffineMap::get(finalLoops, 0, groupExprs, context),
                       AffineMap::get(finalLoops, 0, outExprs, context));
    return success();
  }
};

} // namespace
