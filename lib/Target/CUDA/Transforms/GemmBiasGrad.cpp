//===- GemmBiasGrad.cpp - bias gradients as matrix-product epilogues ------===//
//
// A linear layer's backward pass reads the gradient of its output twice
// along the same rows: the weight's gradient is a product whose k runs over
// those rows, and the bias's gradient is their sum. cuBLASLt computes that
// sum while it multiplies (its bias-gradient epilogues), from the operand it
// reads anyway, so on the CUDA target the sum becomes a second output of
// the product instead of a reduction kernel of its own.
//
//===----------------------------------------------------------------------===//

#include "kiln/Target/CUDA/Passes.h"
#include "kiln/Transforms/Utils/BlockOrder.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"

namespace kiln {
#define GEN_PASS_DEF_KILNGEMMBIASGRAD
#include "kiln/Target/CUDA/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {

/// Whether `v` is a zero fill of a tensor.empty.
bool isZeroFilled(Value v) {
  auto fill = v.getDefiningOp<linalg::FillOp>();
  return fill && fill.hasPureTensorSemantics() &&
         matchPattern(fill.getDpsInputs()[0], m_AnyZeroFloat()) &&
         fill.getDpsInits()[0].getDefiningOp<tensor::EmptyOp>();
}

/// The tensor `op` sums when it is `out[j] = sum x[..., j]` into a zero
/// fill, over every dimension of an f32 `x` but its last, in order; null
/// otherwise.
Value summedOverRows(linalg::GenericOp op) {
  if (!op.hasPureTensorSemantics() || op.getNumDpsInputs() != 1 ||
      op.getNumDpsInits() != 1 || op.getNumParallelLoops() != 1 ||
      !isZeroFilled(op.getDpsInits()[0]))
    return {};
  Value x = op.getDpsInputs()[0];
  auto type = dyn_cast<RankedTensorType>(x.getType());
  if (!type || !type.hasStaticShape() || type.getRank() < 2 ||
      !type.getElementType().isF32())
    return {};
  unsigned rank = type.getRank();
  MLIRContext *context = op.getContext();
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  if (maps[0] != AffineMap::getMultiDimIdentityMap(rank, context) ||
      maps[1] != AffineMap::get(rank, 0, getAffineDimExpr(rank - 1, context)))
    return {};
  Block *body = op.getBody();
  auto yield = cast<linalg::YieldOp>(body->getTerminator());
  auto add = yield.getValues()[0].getDefiningOp<arith::AddFOp>();
  if (!add || add->getBlock() != body || body->getOperations().size() != 2)
    return {};
  Value element = body->getArgument(0), acc = body->getArgument(1);
  if (!((add.getLhs() == element && add.getRhs() == acc) ||
        (add.getLhs() == acc && add.getRhs() == element)))
    return {};
  return x;
}

/// `x` as a matrix of its rows: `x` itself at rank 2, else a
/// tensor.collapse_shape of it that merges every dimension but the last,
/// or the matrix `x` expands so (a fused layer norm's gradient, computed
/// on rows).
SmallVector<Value> rowViews(Value x) {
  auto type = cast<RankedTensorType>(x.getType());
  if (type.getRank() == 2)
    return {x};
  SmallVector<Value> views;
  if (auto expand = x.getDefiningOp<tensor::ExpandShapeOp>())
    if (expand.getSrcType().getRank() == 2 &&
        expand.getReassociationIndices().back().size() == 1)
      views.push_back(expand.getSrc());
  for (Operation *user : x.getUsers()) {
    auto collapse = dyn_cast<tensor::CollapseShapeOp>(user);
    if (!collapse || collapse.getSrc() != x ||
        collapse.getResultType().getRank() != 2)
      continue;
    SmallVector<ReassociationIndices> groups =
        collapse.getReassociationIndices();
    if (groups.back().size() == 1)
      views.push_back(collapse.getResult());
  }
  return views;
}

/// An unbatched f32 `kiln.matmul` into a zero fill, of static non-empty
/// shape, that reads `rows` (whose rows are its k) as one operand: the
/// right one, not transposed, or the left one, transposed (`ofLhs`). Null
/// otherwise.
linalg::GenericOp productOverRows(Value rows, bool &ofLhs) {
  for (Operation *user : rows.getUsers()) {
    auto product = dyn_cast<linalg::GenericOp>(user);
    if (!product)
      continue;
    auto flags = product->getAttrOfType<DictionaryAttr>("kiln.matmul");
    // (A product with a bias gradient already has two outputs.)
    if (!flags || !product.hasPureTensorSemantics() ||
        product.getNumDpsInputs() != 2 || product.getNumDpsInits() != 1 ||
        product.getNumLoops() != 3 || !isZeroFilled(product.getDpsInits()[0]))
      continue;
    auto outType = cast<RankedTensorType>(product.getResult(0).getType());
    if (!outType.getElementType().isF32() || !outType.hasStaticShape() ||
        outType.getNumElements() == 0)
      continue;
    Value lhs = product.getDpsInputs()[0], rhs = product.getDpsInputs()[1];
    if (lhs == rhs)
      continue;
    if (rhs == rows && !flags.contains("transpose_rhs")) {
      ofLhs = false;
      return product;
    }
    if (lhs == rows && flags.contains("transpose_lhs")) {
      ofLhs = true;
      return product;
    }
  }
  return {};
}

struct KilnGemmBiasGradPass
    : kiln::impl::KilnGemmBiasGradBase<KilnGemmBiasGradPass> {
  void runOnOperation() override {
    SmallVector<linalg::GenericOp> sums;
    getOperation().walk([&](linalg::GenericOp op) {
      if (summedOverRows(op))
        sums.push_back(op);
    });
    for (linalg::GenericOp sum : sums)
      if (succeeded(fold(sum)))
        ++numFolded;
  }

  /// Makes `sum` a second output of a product over the same rows.
  LogicalResult fold(linalg::GenericOp sum) {
    Value x = summedOverRows(sum);
    for (Value rows : rowViews(x)) {
      bool ofLhs = false;
      linalg::GenericOp product = productOverRows(rows, ofLhs);
      if (!product || product->getBlock() != sum->getBlock())
        continue;
      // Where the merged op can go: the product's place, when the sum's
      // users all come later (the rows are there, the product reads them),
      // else the sum's, when the product's operands are there by then (its
      // zero fill is made anew) and its users all come later.
      Operation *at = nullptr;
      DominanceInfo dominance(sum->getParentOp());
      if (kiln::usedOnlyAfter(sum, product))
        at = product;
      else if (kiln::usedOnlyAfter(product, sum) &&
               llvm::all_of(product.getDpsInputs(), [&](Value operand) {
                 return dominance.properlyDominates(operand, sum);
               }))
        at = sum;
      if (!at)
        continue;
      merge(product, sum, ofLhs, at);
      return success();
    }
    return failure();
  }

  void merge(linalg::GenericOp product, linalg::GenericOp sum, bool ofLhs,
             Operation *at) {
    OpBuilder b(at);
    Location loc = product.getLoc();
    MLIRContext *context = product.getContext();
    auto vectorType = cast<RankedTensorType>(sum.getResult(0).getType());
    Value empty = tensor::EmptyOp::create(b, loc, vectorType.getShape(),
                                          vectorType.getElementType());
    Value zero = arith::ConstantOp::create(
        b, loc, b.getZeroAttr(vectorType.getElementType()));
    Value vectorInit = linalg::FillOp::create(b, loc, zero, empty).getResult(0);
    Value outInit = product.getDpsInits()[0];
    if (at == sum.getOperation()) {
      // The product's zero fill, remade here in case it came later.
      auto outType = cast<RankedTensorType>(outInit.getType());
      Value outEmpty = tensor::EmptyOp::create(b, loc, outType.getShape(),
                                               outType.getElementType());
      outInit = linalg::FillOp::create(b, loc, zero, outEmpty).getResult(0);
    }
    // Iteration space m, n, k: the vector runs along n (the right operand's
    // columns) or m (the left one's).
    unsigned along = ofLhs ? 0 : 1, other = ofLhs ? 1 : 0;
    SmallVector<AffineMap> maps = product.getIndexingMapsArray();
    maps.push_back(AffineMap::get(3, 0, getAffineDimExpr(along, context)));
    auto merged = linalg::GenericOp::create(
        b, loc, TypeRange{product.getResult(0).getType(), vectorType},
        product.getDpsInputs(), ValueRange{outInit, vectorInit}, maps,
        product.getIteratorTypesArray());
    IRMapping mapping;
    product.getRegion().cloneInto(&merged.getRegion(), mapping);
    Block *body = merged.getBody();
    BlockArgument acc = body->addArgument(vectorType.getElementType(), loc);
    auto yield = cast<linalg::YieldOp>(body->getTerminator());
    OpBuilder nb(yield);
    // Each element of the operand once: where the other operand's index
    // is 0.
    Value element = body->getArgument(ofLhs ? 0 : 1);
    Value index = linalg::IndexOp::create(nb, loc, other);
    Value first =
        arith::CmpIOp::create(nb, loc, arith::CmpIPredicate::eq, index,
                              arith::ConstantIndexOp::create(nb, loc, 0));
    Value term = arith::SelectOp::create(
        nb, loc, first, element,
        arith::ConstantOp::create(nb, loc, nb.getZeroAttr(acc.getType())));
    Value next = arith::AddFOp::create(nb, loc, acc, term);
    yield->insertOperands(yield->getNumOperands(), next);

    NamedAttrList flags(product->getAttrOfType<DictionaryAttr>("kiln.matmul"));
    flags.set("bias_grad", UnitAttr::get(context));
    if (ofLhs)
      flags.set("bias_grad_of_lhs", UnitAttr::get(context));
    merged->setAttr("kiln.matmul", flags.getDictionary(context));
    product.getResult(0).replaceAllUsesWith(merged.getResult(0));
    sum.getResult(0).replaceAllUsesWith(merged.getResult(1));
    product.erase();
    sum.erase();
  }
};

} // namespace
