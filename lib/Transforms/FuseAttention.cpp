//===- FuseAttention.cpp - forms kiln.attention from its op chain ---------===//

#include "kiln/KilnOps.h"
#include "kiln/Transforms/Passes.h"

#include "Splat.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>

namespace kiln {
#define GEN_PASS_DEF_KILNFUSEATTENTION
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

bool isMinusInfinity(Value v) {
  std::optional<double> value = floatSplatValue(v);
  return value && std::isinf(*value) && *value < 0;
}

/// The OpTy that defines `v`, if `v` has no other user than the chain's
/// next op.
template <typename OpTy> OpTy singleUse(Value v) {
  auto op = v.getDefiningOp<OpTy>();
  return op && op->hasOneUse() ? op : OpTy();
}

/// The input of a broadcast, which kiln.attention's mask does itself.
Value beforeBroadcast(Value v) {
  if (auto broadcast = v.getDefiningOp<BroadcastOp>())
    return broadcast.getInput();
  return v;
}

/// What a matched chain reads, found before any IR is built.
struct Chain {
  MatmulOp scores;
  double scale = 1.0;
  /// An additive mask, or the condition of a select that puts -inf where it
  /// holds (where it does not, with `dropWhereFalse`).
  Value mask, dropCondition;
  bool dropWhereFalse = false;
};

/// Matches `matmul(q, k) [* c | c * | / c]` into `chain`.
bool matchScaledScores(Value v, Chain &chain) {
  if (auto matmul = singleUse<MatmulOp>(v)) {
    chain.scores = matmul;
    return true;
  }
  if (auto mul = singleUse<MulOp>(v)) {
    for (auto [factor, other] : {std::pair(mul.getLhs(), mul.getRhs()),
                                 std::pair(mul.getRhs(), mul.getLhs())}) {
      std::optional<double> c = floatSplatValue(factor);
      if (c && (chain.scores = singleUse<MatmulOp>(other))) {
        chain.scale = *c;
        return true;
      }
    }
    return false;
  }
  if (auto div = singleUse<DivOp>(v)) {
    std::optional<double> c = floatSplatValue(div.getRhs());
    if (c && *c != 0 && (chain.scores = singleUse<MatmulOp>(div.getLhs()))) {
      chain.scale = 1.0 / *c;
      return true;
    }
  }
  return false;
}

/// Matches the softmax's input: scaled scores, plus a mask or masked by a
/// select.
bool matchMaskedScores(Value v, Chain &chain) {
  if (matchScaledScores(v, chain))
    return true;
  if (auto add = singleUse<AddOp>(v)) {
    for (auto [scores, mask] : {std::pair(add.getLhs(), add.getRhs()),
                                std::pair(add.getRhs(), add.getLhs())}) {
      if (matchScaledScores(scores, chain)) {
        chain.mask = beforeBroadcast(mask);
        return true;
      }
    }
    return false;
  }
  if (auto select = singleUse<SelectOp>(v)) {
    // masked_fill(cond, -inf): x + -inf is -inf for every finite score.
    bool dropWhereTrue = isMinusInfinity(select.getOnTrue());
    if (!dropWhereTrue && !isMinusInfinity(select.getOnFalse()))
      return false;
    Value scores = dropWhereTrue ? select.getOnFalse() : select.getOnTrue();
    if (!matchScaledScores(scores, chain))
      return false;
    chain.dropCondition = beforeBroadcast(select.getCond());
    chain.dropWhereFalse = !dropWhereTrue;
    return true;
  }
  return false;
}

/// `v` with its last two dimensions swapped, folded into the transpose that
/// produces it, if one does.
Value swapLastTwo(PatternRewriter &r, Location loc, Value v) {
  auto type = cast<RankedTensorType>(v.getType());
  int64_t rank = type.getRank();
  SmallVector<int64_t> perm;
  Value input = v;
  if (auto transpose = v.getDefiningOp<TransposeOp>()) {
    llvm::append_range(perm, transpose.getPermutation());
    input = transpose.getInput();
  } else {
    llvm::append_range(perm, llvm::seq<int64_t>(0, rank));
  }
  std::swap(perm[rank - 2], perm[rank - 1]);
  if (llvm::equal(perm, llvm::seq<int64_t>(0, rank)))
    return input;
  return TransposeOp::create(r, loc, input, r.getDenseI64ArrayAttr(perm));
}

/// The additive mask: the matched one, or select(cond, -inf, 0).
Value buildMask(PatternRewriter &r, Location loc, const Chain &chain,
                RankedTensorType scoresType) {
  if (!chain.dropCondition)
    return chain.mask;
  auto condType = cast<RankedTensorType>(chain.dropCondition.getType());
  auto type = scoresType.clone(condType.getShape());
  auto splat = [&](double value) -> Value {
    auto element = cast<FloatType>(type.getElementType());
    APFloat v(value);
    bool lost;
    v.convert(element.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
    return ConstantOp::create(r, loc, DenseElementsAttr::get(type, v));
  };
  Value drop = splat(-INFINITY), keep = splat(0.0);
  if (chain.dropWhereFalse)
    std::swap(drop, keep);
  return SelectOp::create(r, loc, type, chain.dropCondition, drop, keep);
}

/// Anchored at the product of the probabilities with the values.
struct FuseAttention : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MatmulOp op,
                                PatternRewriter &r) const override {
    auto softmax = singleUse<SoftmaxOp>(op.getLhs());
    if (op.getTransposeLhs() || !softmax ||
        static_cast<int64_t>(softmax.getAxis()) !=
            softmax.getType().getRank() - 1)
      return r.notifyMatchFailure(op, "not a product of softmax rows");
    Chain chain;
    if (!matchMaskedScores(softmax.getInput(), chain))
      return r.notifyMatchFailure(op, "the softmax does not read scores");
    Location loc = op.getLoc();
    MatmulOp scores = chain.scores;
    Value query = scores.getTransposeLhs()
                      ? swapLastTwo(r, loc, scores.getLhs())
                      : scores.getLhs();
    Value key = scores.getTransposeRhs() ? scores.getRhs()
                                         : swapLastTwo(r, loc, scores.getRhs());
    Value value =
        op.getTransposeRhs() ? swapLastTwo(r, loc, op.getRhs()) : op.getRhs();
    Value mask =
        buildMask(r, loc, chain, cast<RankedTensorType>(scores.getType()));
    r.replaceOpWithNewOp<AttentionOp>(op, query, key, value, mask,
                                      r.getF64FloatAttr(chain.scale));
    return success();
  }
};

struct KilnFuseAttentionPass
    : kiln::impl::KilnFuseAttentionBase<KilnFuseAttentionPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseAttention>(&getContext());
    GreedyRewriteConfig config;
    config.enableFolding(false);
    if (failed(
            applyPatternsGreedily(getOperation(), std::move(patterns), config)))
      signalPassFailure();
  }
};

} // namespace
