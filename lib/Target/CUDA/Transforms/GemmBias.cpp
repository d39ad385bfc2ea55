//===- GemmBias.cpp - bias additions as matrix-product epilogues ----------===//
//
// A linear layer is a product followed by a bias addition, which fusion puts
// into the kernel that reads the product. cuBLASLt adds a bias vector to
// the product's rows as it stores them (its bias epilogue), so on the CUDA
// target the addition moves into the product: the product accumulates into
// a broadcast of the bias instead of a zero fill, marked `kiln.gemm_bias`,
// which the target turns into the epilogue rather than a kernel, and the
// consumer reads the biased product. A consumer that did nothing else
// becomes a copy that canonicalization removes.
//
//===----------------------------------------------------------------------===//

#include "kiln/Target/CUDA/Passes.h"
#include "kiln/Transforms/Utils/Gemm.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Dominance.h"

namespace kiln {
#define GEN_PASS_DEF_KILNGEMMBIAS
#include "kiln/Target/CUDA/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {

/// The f32 product behind `v` (kiln::zeroFilledProduct) when a bias along
/// `v`'s last dimension is one along the product's.
linalg::GenericOp biasableProduct(Value v) {
  tensor::ExpandShapeOp expand;
  linalg::GenericOp product = kiln::zeroFilledProduct(v, expand);
  if (!product ||
      !getElementTypeOrSelf(product.getResult(0).getType()).isF32() ||
      (expand && expand.getReassociationIndices().back().size() != 1))
    return {};
  return product;
}

/// Whether `map` reads a vector along the last of its loops.
bool isLastDimVector(AffineMap map) {
  return map.getNumResults() == 1 && map.getNumDims() > 0 &&
         map.getResult(0) ==
             getAffineDimExpr(map.getNumDims() - 1, map.getContext());
}

struct KilnGemmBiasPass : kiln::impl::KilnGemmBiasBase<KilnGemmBiasPass> {
  void runOnOperation() override {
    SmallVector<linalg::GenericOp> consumers;
    getOperation().walk([&](linalg::GenericOp op) { consumers.push_back(op); });
    DominanceInfo dominance(getOperation());
    for (linalg::GenericOp op : consumers)
      if (succeeded(fold(op, dominance)))
        ++numFolded;
  }

  /// Moves one bias addition of `op` into the product it reads.
  LogicalResult fold(linalg::GenericOp op, DominanceInfo &dominance) {
    if (!op.hasPureTensorSemantics() || op.getNumDpsInits() != 1 ||
        op.getNumLoops() != op.getNumParallelLoops())
      return failure();
    Block *body = op.getBody();
    for (OpOperand *input : op.getDpsInputOperands()) {
      linalg::GenericOp product = biasableProduct(input->get());
      if (!product || !op.getMatchingIndexingMap(input).isIdentity())
        continue;
      // The product's element feeds exactly one addition, of a vector
      // along the last dimension.
      BlockArgument element = op.getMatchingBlockArgument(input);
      if (!element.hasOneUse())
        continue;
      auto add = dyn_cast<arith::AddFOp>(*element.getUsers().begin());
      if (!add)
        continue;
      Value other = add.getLhs() == element ? add.getRhs() : add.getLhs();
      auto biasArg = dyn_cast<BlockArgument>(other);
      if (!biasArg || biasArg.getOwner() != body || biasArg == element ||
          biasArg.getArgNumber() >= op.getNumDpsInputs())
        continue;
      OpOperand *biasOperand = op.getDpsInputOperand(biasArg.getArgNumber());
      Value bias = biasOperand->get();
      auto biasType = dyn_cast<RankedTensorType>(bias.getType());
      if (!biasType || biasType.getRank() != 1 ||
          !biasType.getElementType().isF32() ||
          !isLastDimVector(op.getMatchingIndexingMap(biasOperand)) ||
          !dominance.properlyDominates(bias, product))
        continue;
      rewrite(product, bias, add, element);
      if (biasArg.use_empty())
        dropInput(op, biasArg.getArgNumber());
      return success();
    }
    return failure();
  }

  /// Rebuilds `op` without its input `index`, which its body no longer
  /// reads.
  void dropInput(linalg::GenericOp op, unsigned index) {
    SmallVector<Value> inputs;
    SmallVector<AffineMap> maps;
    SmallVector<AffineMap> all = op.getIndexingMapsArray();
    for (auto [i, input] : llvm::enumerate(op.getDpsInputs()))
      if (i != index) {
        inputs.push_back(input);
        maps.push_back(all[i]);
      }
    maps.append(all.begin() + op.getNumDpsInputs(), all.end());
    OpBuilder b(op);
    auto rebuilt = linalg::GenericOp::create(
        b, op.getLoc(), op.getResultTypes(), inputs, op.getDpsInits(), maps,
        op.getIteratorTypesArray());
    rebuilt->setDiscardableAttrs(op->getDiscardableAttrDictionary());
    rebuilt.getRegion().takeBody(op.getRegion());
    rebuilt.getBody()->eraseArgument(index);
    op->replaceAllUsesWith(rebuilt->getResults());
    op.erase();
  }

  void rewrite(linalg::GenericOp product, Value bias, arith::AddFOp add,
               BlockArgument element) {
    OpBuilder b(product);
    Location loc = product.getLoc();
    auto type = cast<RankedTensorType>(product.getResult(0).getType());
    int64_t rank = type.getRank();
    Value empty =
        tensor::EmptyOp::create(b, loc, type.getShape(), type.getElementType());
    MLIRContext *context = b.getContext();
    AffineMap vector =
        AffineMap::get(rank, 0, getAffineDimExpr(rank - 1, context), context);
    SmallVector<utils::IteratorType> parallel(rank,
                                              utils::IteratorType::parallel);
    auto broadcast = linalg::GenericOp::create(
        b, loc, TypeRange{type}, ValueRange{bias}, ValueRange{empty},
        ArrayRef<AffineMap>{vector, b.getMultiDimIdentityMap(rank)}, parallel,
        [](OpBuilder &nb, Location nloc, ValueRange args) {
          linalg::YieldOp::create(nb, nloc, ValueRange{args[0]});
        });
    broadcast->setAttr("kiln.gemm_bias", b.getUnitAttr());
    Operation *fill = product.getDpsInits()[0].getDefiningOp();
    product.getDpsInitsMutable()[0].set(broadcast.getResult(0));
    if (fill->use_empty())
      fill->erase();
    add.getResult().replaceAllUsesWith(element);
    add.erase();
  }
};

} // namespace
