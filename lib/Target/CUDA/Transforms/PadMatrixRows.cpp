//===- PadMatrixRows.cpp - products' matrices stored with aligned rows ----===//
//
// cuBLASLt's fastest kernels load rows in pieces of 16 bytes, which a
// matrix whose rows are not a multiple of 16 bytes long (GPT-2's 50257
// logits per token) does not have. Computed into a buffer whose rows are
// padded instead, the same matrix is a view with a larger leading
// dimension: the product takes it as it is, and the kernels that compute
// or read it index the view.
//
//===----------------------------------------------------------------------===//

#include "kiln/Target/CUDA/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace kiln {
#define GEN_PASS_DEF_KILNPADMATRIXROWS
#include "kiln/Target/CUDA/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {

bool keepsLastDimension(ArrayRef<ReassociationIndices> reassociation) {
  return !reassociation.empty() && reassociation.back().size() == 1;
}

/// The use of a tensor.empty that `v` is computed into: through the
/// destinations of the linalg ops that compute it, and reshapes that keep
/// its last dimension. Null when there is none.
OpOperand *emptyBehind(Value v) {
  OpOperand *use = nullptr;
  while (Operation *def = v.getDefiningOp()) {
    if (isa<tensor::EmptyOp>(def))
      return use;
    if (auto linalgOp = dyn_cast<linalg::LinalgOp>(def);
        linalgOp && linalgOp.hasPureTensorSemantics()) {
      use = linalgOp.getDpsInitOperand(cast<OpResult>(v).getResultNumber());
    } else if (auto expand = dyn_cast<tensor::ExpandShapeOp>(def);
               expand && keepsLastDimension(expand.getReassociationIndices())) {
      use = &expand.getSrcMutable();
    } else if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(def);
               collapse &&
               keepsLastDimension(collapse.getReassociationIndices())) {
      use = &collapse.getSrcMutable();
    } else {
      return nullptr;
    }
    v = use->get();
  }
  return nullptr;
}

/// Whether `v`, bufferized as a view of type `view`, reaches only ops
/// that take such a view as it is: linalg ops (whose results computed in
/// `v` are that view too), tensor.extract, and reshapes the view allows
/// (whose results must reach only such ops as well).
bool reachesOnlyViews(Value v, MemRefType view) {
  for (OpOperand &use : v.getUses()) {
    Operation *user = use.getOwner();
    if (auto linalgOp = dyn_cast<linalg::LinalgOp>(user)) {
      if (linalgOp.isDpsInit(&use) &&
          !reachesOnlyViews(linalgOp.getTiedOpResult(&use), view))
        return false;
      continue;
    }
    if (isa<tensor::ExtractOp>(user))
      continue;
    if (auto expand = dyn_cast<tensor::ExpandShapeOp>(user)) {
      FailureOr<MemRefType> expanded =
          memref::ExpandShapeOp::computeExpandedType(
              view, expand.getResultType().getShape(),
              expand.getReassociationIndices());
      if (failed(expanded) || !reachesOnlyViews(expand.getResult(), *expanded))
        return false;
      continue;
    }
    if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(user)) {
      SmallVector<ReassociationIndices> groups =
          collapse.getReassociationIndices();
      if (!memref::CollapseShapeOp::isGuaranteedCollapsible(view, groups) ||
          !reachesOnlyViews(
              collapse.getResult(),
              memref::CollapseShapeOp::computeCollapsedType(view, groups)))
        return false;
      continue;
    }
    return false;
  }
  return true;
}

struct KilnPadMatrixRowsPass
    : kiln::impl::KilnPadMatrixRowsBase<KilnPadMatrixRowsPass> {
  using Base::Base;

  void runOnOperation() override {
    if (rowAlignment < 1) {
      getOperation().emitError("kiln-pad-matrix-rows: row-alignment must be "
                               "at least 1 byte");
      return signalPassFailure();
    }
    SmallVector<linalg::GenericOp> products;
    getOperation().walk([&](linalg::GenericOp op) {
      if (op->hasAttr("kiln.matmul") && op.hasPureTensorSemantics() &&
          op.getNumDpsInputs() == 2)
        products.push_back(op);
    });
    for (linalg::GenericOp product : products)
      for (Value matrix : {product.getDpsInputs()[0], product.getDpsInputs()[1],
                           product.getDpsInits()[0]})
        pad(matrix);
  }

  /// Computes `matrix` into a row-padded buffer when its rows are not a
  /// multiple of rowAlignment bytes long and it can be.
  void pad(Value matrix) {
    auto type = dyn_cast<RankedTensorType>(matrix.getType());
    if (!type || !type.hasStaticShape() || type.getRank() < 2 ||
        type.getDimSize(type.getRank() - 2) < 2)
      return;
    unsigned bits = type.getElementTypeBitWidth();
    int64_t cols = type.getShape().back();
    if (bits % 8 != 0 || rowAlignment % (bits / 8) != 0 ||
        (cols * bits / 8) % rowAlignment == 0)
      return;
    OpOperand *use = emptyBehind(matrix);
    if (!use)
      return;
    auto empty = use->get().getDefiningOp<tensor::EmptyOp>();
    RankedTensorType emptyType = empty.getType();
    if (!emptyType.hasStaticShape())
      return;
    int64_t elementsPerRow = rowAlignment / (bits / 8);
    SmallVector<int64_t> padded(emptyType.getShape());
    padded.back() = llvm::alignTo(padded.back(), elementsPerRow);

    // Row-major strides of the padded buffer: the view's layout.
    SmallVector<int64_t> strides(padded.size(), 1);
    for (int64_t d = static_cast<int64_t>(padded.size()) - 2; d >= 0; --d)
      strides[d] = strides[d + 1] * padded[d + 1];
    MLIRContext *context = &getContext();
    auto view =
        MemRefType::get(emptyType.getShape(), emptyType.getElementType(),
                        StridedLayoutAttr::get(context, 0, strides));

    OpBuilder b(empty);
    Location loc = empty.getLoc();
    auto whole =
        tensor::EmptyOp::create(b, loc, padded, emptyType.getElementType());
    int64_t rank = emptyType.getRank();
    SmallVector<OpFoldResult> offsets(rank, b.getIndexAttr(0)),
        ones(rank, b.getIndexAttr(1)), sizes;
    for (int64_t size : emptyType.getShape())
      sizes.push_back(b.getIndexAttr(size));
    auto slice = tensor::ExtractSliceOp::create(b, loc, emptyType, whole,
                                                offsets, sizes, ones);
    use->set(slice);
    if (!reachesOnlyViews(slice, view)) {
      use->set(empty);
      slice.erase();
      whole.erase();
      return;
    }
    if (empty.use_empty())
      empty.erase();
    ++numPadded;
  }
};

} // namespace
