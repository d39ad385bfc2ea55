//===- SplitReductions.cpp - long reductions in two parallel stages -------===//
//
// A GPU kernel runs one thread per point of its parallel loops, each summing
// its reduction loops sequentially. A sum over many rows into few outputs (a
// bias or normalization weight's gradient: [batch, seq, n] into [n]) then
// has few threads with long loops. Splitting the rows into f groups sums
// each group in parallel into a [f, n] partial (f times the threads, 1/f of
// the loop each, neighbouring threads reading neighbouring elements), and a
// second kernel adds the f partials into the output.
//
//===----------------------------------------------------------------------===//

#include "kiln/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"

namespace kiln {
#define GEN_PASS_DEF_KILNSPLITREDUCTIONS
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {

/// Whether `op`'s body is `out + g(inputs)`: the output's element feeds one
/// f32 addf whose result is yielded, and `g` does not read the loop indices
/// (which the split renumbers).
bool isSum(linalg::GenericOp op) {
  Block *body = op.getBody();
  if (!body->getOps<linalg::IndexOp>().empty())
    return false;
  BlockArgument acc = body->getArguments().back();
  auto yield = cast<linalg::YieldOp>(body->getTerminator());
  if (!acc.getType().isF32() || !acc.hasOneUse() ||
      yield.getValues().size() != 1)
    return false;
  auto add = yield.getValues()[0].getDefiningOp<arith::AddFOp>();
  return add && add->getBlock() == body && *acc.getUsers().begin() == add;
}

struct KilnSplitReductionsPass
    : kiln::impl::KilnSplitReductionsBase<KilnSplitReductionsPass> {
  using KilnSplitReductionsBase::KilnSplitReductionsBase;

  void runOnOperation() override {
    SmallVector<linalg::GenericOp> candidates;
    getOperation().walk([&](linalg::GenericOp op) { candidates.push_back(op); });
    for (linalg::GenericOp op : candidates)
      if (succeeded(split(op)))
        ++numSplit;
  }

  /// The number of groups to split `rows` rows into for `columns` outputs:
  /// the most that divides `rows`, keeps at least minRows rows a group and
  /// at most maxThreads threads; 1 when splitting does not pay.
  int64_t groups(int64_t rows, int64_t columns) {
    if (columns >= maxThreads || rows < 2 * minRows)
      return 1;
    for (int64_t f = std::min(rows / minRows, maxThreads / columns); f > 1;
         --f)
      if (rows % f == 0)
        return f;
    return 1;
  }

  /// Splits a sum over leading reduction loops into trailing parallel ones,
  /// every input read whole (identity indexing) and the output indexed by
  /// the parallel loops.
  LogicalResult split(linalg::GenericOp op) {
    if (!op.hasPureTensorSemantics() || op.getNumDpsInits() != 1 ||
        op.getNumReductionLoops() == 0 || op.getNumParallelLoops() == 0 ||
        !isSum(op))
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
    AffineMap partialMap =
        AffineMap::get(partialLoops, 0, partialExprs, context);
    SmallVector<AffineMap> maps(inputs.size(), inputMap);
    maps.push_back(partialMap);
    SmallVector<utils::IteratorType> partialIterators(
        partialLoops - 1, utils::IteratorType::parallel);
    partialIterators.push_back(utils::IteratorType::reduction);
    SmallVector<int64_t> partialShape{f};
    partialShape.append(columnShape);
    Type f32 = b.getF32Type();
    Value empty = tensor::EmptyOp::create(b, loc, partialShape, f32);
    Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0));
    Value zeros =
        linalg::FillOp::create(b, loc, ValueRange{zero}, ValueRange{empty})
            .getResult(0);
    auto partial = linalg::GenericOp::create(
        b, loc, TypeRange{zeros.getType()}, inputs, ValueRange{zeros}, maps,
        partialIterators);
    IRMapping mapping;
    op.getRegion().cloneInto(&partial.getRegion(), mapping);

    // The partials added into the output: loops (columns..., group).
    int64_t finalLoops = 1 + (loops - k);
    SmallVector<AffineExpr> groupExprs{dim(finalLoops - 1)};
    SmallVector<AffineExpr> outExprs;
    for (int64_t c = 0; c < loops - k; ++c) {
      groupExprs.push_back(dim(c));
      outExprs.push_back(dim(c));
    }
    SmallVector<utils::IteratorType> finalIterators(
        finalLoops - 1, utils::IteratorType::parallel);
    finalIterators.push_back(utils::IteratorType::reduction);
    auto total = linalg::GenericOp::create(
        b, loc, op.getResultTypes(), ValueRange{partial.getResult(0)},
        op.getDpsInits(),
        ArrayRef<AffineMap>{AffineMap::get(finalLoops, 0, groupExprs, context),
                            AffineMap::get(finalLoops, 0, outExprs, context)},
        finalIterators, [](OpBuilder &nb, Location nloc, ValueRange args) {
          Value sum = arith::AddFOp::create(nb, nloc, args[1], args[0]);
          linalg::YieldOp::create(nb, nloc, ValueRange{sum});
        });
    op->replaceAllUsesWith(total->getResults());
    op.erase();
    return success();
  }
};

} // namespace
