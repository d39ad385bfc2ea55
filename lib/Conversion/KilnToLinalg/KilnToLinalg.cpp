//===- KilnToLinalg.cpp - the convert-kiln-to-linalg pass -----------------===//

#include "LoweringUtils.h"
#include "kiln/Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AttrTypeSubElements.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/DialectConversion.h"

namespace kiln {
#define GEN_PASS_DEF_CONVERTKILNTOLINALG
#include "kiln/Conversion/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

void kiln::lowering::makeSignless(Operation *root) {
  auto signless = [](Type type) -> Type {
    auto integer = dyn_cast<IntegerType>(type);
    if (!integer || !integer.isUnsigned())
      return nullptr;
    return IntegerType::get(type.getContext(), integer.getWidth());
  };
  AttrTypeReplacer replacer;
  replacer.addReplacement([&](IntegerType type) -> std::optional<Type> {
    if (Type replaced = signless(type))
      return replaced;
    return std::nullopt;
  });
  // Constants keep their bits under the signless type.
  replacer.addReplacement(
      [&](DenseIntOrFPElementsAttr attr) -> std::optional<Attribute> {
        if (Type replaced = signless(attr.getElementType()))
          return attr.bitcast(replaced);
        return std::nullopt;
      });
  replacer.addReplacement([&](IntegerAttr attr) -> std::optional<Attribute> {
    if (Type replaced = signless(attr.getType()))
      return IntegerAttr::get(replaced, attr.getValue());
    return std::nullopt;
  });
  replacer.recursivelyReplaceElementsIn(root, /*replaceAttrs=*/true,
                                        /*replaceLocs=*/false,
                                        /*replaceTypes=*/true);
}

namespace {

/// A pure kiln op whose results hold no elements computes nothing: its
/// results are empty tensors (and its operands' offsets, such as a slice
/// starting at the end of its input, need no checking).
struct LowerZeroElementResults : RewritePattern {
  LowerZeroElementResults(MLIRContext *context)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/10, context) {}

  LogicalResult matchAndRewrite(Operation *op,
                                PatternRewriter &r) const override {
    if (!isa<KilnDialect>(op->getDialect()) || op->getNumResults() == 0 ||
        !isMemoryEffectFree(op))
      return failure();
    SmallVector<Value> empties;
    for (Type type : op->getResultTypes()) {
      auto tensor = dyn_cast<RankedTensorType>(type);
      if (!tensor || !tensor.hasStaticShape() || tensor.getNumElements() != 0)
        return failure();
      empties.push_back(lowering::emptyTensor(r, op->getLoc(), tensor));
    }
    r.replaceOp(op, empties);
    return success();
  }
};

struct ConvertKilnToLinalgPass
    : kiln::impl::ConvertKilnToLinalgBase<ConvertKilnToLinalgPass> {
  void runOnOperation() override {
    MLIRContext *context = &getContext();
    ConversionTarget target(*context);
    target.addLegalDialect<linalg::LinalgDialect, tensor::TensorDialect,
                           arith::ArithDialect, math::MathDialect,
                           scf::SCFDialect, func::FuncDialect>();
    target.addIllegalDialect<KilnDialect>();
    // The narrow types' scalar code reaches their bytes through these
    // (storeNarrowAsBytes drops them).
    target.addLegalOp<UnrealizedConversionCastOp>();
    // Parameters stay as module symbols: their values go into the bundle.
    target.addLegalOp<ParamOp>();
    // Collectives stay kiln ops until the target lowers their buffer form.
    target.addLegalOp<AllReduceMeanOp, ReduceScatterMeanOp, AllGatherOp,
                      LocalShardOp>();
    // So do the tensor-core attention and the fused layer norm, for the
    // CUDA runtime's kernels.
    target.addLegalOp<FlashAttentionOp, FlashAttentionGradOp, FusedLayerNormOp,
                      FusedLayerNormGradOp>();
    RewritePatternSet patterns(context);
    patterns.add<LowerZeroElementResults>(context);
    lowering::populateElementwiseLoweringPatterns(patterns);
    lowering::populateStructuredLoweringPatterns(patterns);
    lowering::populateNNLoweringPatterns(patterns);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns)))) {
      signalPassFailure();
      return;
    }
    lowering::makeSignless(getOperation());
    lowering::storeNarrowAsBytes(getOperation());
  }
};

} // namespace
