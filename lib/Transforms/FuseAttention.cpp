//===- FuseAttention.cpp - forms kiln.attention from its op chain ---------===//

#include "kiln/KilnOps.h"
#include "kiln/Transforms/Attention.h"
#include "kiln/Transforms/Passes.h"

#include "Splat.h"

#include "mlir/Dialect/Traits.h"
#include "mlir/IR/Matchers.h"
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

/// What a select that drops scores fills them with: -inf, or a finite value
/// at most -2^100 (kMaskedFillAtMost), as the lowest float that Hugging
/// Face's models fill with. Where a row keeps a key, the finite fill gives
/// its dropped keys probability 0 exactly, and their scores no gradient, as
/// -inf does; a row that drops every key has uniform probabilities and no
/// gradient at all, which kiln.attention gives as masked_fill.
std::optional<double> dropFill(Value v) {
  std::optional<double> value = floatSplatValue(v);
  if (value && *value <= kMaskedFillAtMost)
    return value;
  return std::nullopt;
}

/// Whether the constant `condition` of a select leaves every row (its last
/// dimension, the keys) a key it keeps: one where it does not hold, or,
/// with `dropWhereFalse`, one where it does.
bool keepsAKeyInEveryRow(Value condition, bool dropWhereFalse) {
  DenseElementsAttr values;
  if (!matchPattern(condition, m_Constant(&values)))
    return false;
  auto type = cast<RankedTensorType>(condition.getType());
  if (type.getRank() == 0)
    return values.getSplatValue<bool>() == dropWhereFalse;
  int64_t keys = type.getShape().back(), index = 0;
  bool kept = false;
  for (bool value : values.getValues<bool>()) {
    kept |= value == dropWhereFalse;
    if (++index % keys == 0) {
      if (!kept)
        return false;
      kept = false;
    }
  }
  return true;
}

/// Whether the constant `condition` of a select over `scoresType` drops
/// exactly the keys after each query's position (where it holds, or with
/// `dropWhereFalse` where it does not), in every batch: a causal fill.
bool dropsAfterDiagonal(Value condition, bool dropWhereFalse,
                        RankedTensorType scoresType) {
  DenseElementsAttr values;
  if (!matchPattern(condition, m_Constant(&values)))
    return false;
  auto type = cast<RankedTensorType>(condition.getType());
  int64_t rank = type.getRank(), scoresRank = scoresType.getRank();
  if (rank < 2 || scoresRank < 2)
    return false;
  int64_t queries = type.getDimSize(rank - 2), keys = type.getDimSize(rank - 1);
  if (queries != keys || queries != scoresType.getDimSize(scoresRank - 2) ||
      keys != scoresType.getDimSize(scoresRank - 1))
    return false;
  int64_t index = 0;
  for (bool value : values.getValues<bool>())
    if ((value != dropWhereFalse) != isAfterDiagonal(index++, queries, keys))
      return false;
  return true;
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
  /// The product's operands before any scaling of theirs.
  Value lhs, rhs;
  double scale = 1.0;
  /// An additive mask, and the condition of a select that drops scores
  /// where it holds (where it does not, with `dropWhereFalse`); either,
  /// both (the select's result plus the mask) or neither. `fill`: what the
  /// select fills with (dropFill).
  Value mask, dropCondition;
  bool dropWhereFalse = false;
  double fill = -INFINITY;
  /// With both, the shape the select's mask and `mask` broadcast to.
  SmallVector<int64_t> maskShape;
};

/// `v` as `x * c`, `c * x` or `x / c` for a splat constant c: x and the
/// factor; `v` itself and 1 otherwise, or when the product or quotient has
/// another user.
std::pair<Value, double> unscaled(Value v) {
  if (auto mul = singleUse<MulOp>(v)) {
    for (auto [factor, other] : {std::pair(mul.getLhs(), mul.getRhs()),
                                 std::pair(mul.getRhs(), mul.getLhs())})
      if (std::optional<double> c = floatSplatValue(factor))
        return {other, *c};
  }
  if (auto div = singleUse<DivOp>(v)) {
    std::optional<double> c = floatSplatValue(div.getRhs());
    if (c && *c != 0)
      return {div.getLhs(), 1.0 / *c};
  }
  return {v, 1.0};
}

/// Matches `matmul(q [* c], k [* c]) [* c | c * | / c]` into `chain`: the
/// scale may be applied to the scores, or to the query or key before the
/// product (as DistilBERT divides the query, and the export of PyTorch's
/// scaled_dot_product_attention multiplies both by the scale's root).
bool matchScaledScores(Value v, Chain &chain) {
  auto [product, scale] = unscaled(v);
  chain.scores = singleUse<MatmulOp>(product);
  if (!chain.scores)
    return false;
  auto [lhs, lhsScale] = unscaled(chain.scores.getLhs());
  auto [rhs, rhsScale] = unscaled(chain.scores.getRhs());
  chain.lhs = lhs;
  chain.rhs = rhs;
  chain.scale = scale * lhsScale * rhsScale;
  return true;
}

/// Matches scaled scores, or scaled scores a select drops where a condition
/// holds (or does not): masked_fill(cond, fill) or where(cond, scores,
/// fill), for a fill dropFill takes.
bool matchSelectedScores(Value v, Chain &chain) {
  if (matchScaledScores(v, chain))
    return true;
  auto select = singleUse<SelectOp>(v);
  if (!select)
    return false;
  std::optional<double> fill = dropFill(select.getOnTrue());
  bool dropWhereTrue = fill.has_value();
  if (!dropWhereTrue)
    fill = dropFill(select.getOnFalse());
  if (!fill)
    return false;
  Value scores = dropWhereTrue ? select.getOnFalse() : select.getOnTrue();
  if (!matchScaledScores(scores, chain))
    return false;
  chain.dropCondition = beforeBroadcast(select.getCond());
  chain.fill = *fill;
  chain.dropWhereFalse = !dropWhereTrue;
  return true;
}

/// Matches the softmax's input: scaled scores, masked by a select, plus a
/// mask, or both (Hugging Face's GPT-2: the causal select, then the
/// padding mask added), when the select's condition and the mask broadcast
/// together.
bool matchMaskedScores(Value v, Chain &chain) {
  if (matchSelectedScores(v, chain))
    return true;
  auto add = singleUse<AddOp>(v);
  if (!add)
    return false;
  for (auto [scores, mask] : {std::pair(add.getLhs(), add.getRhs()),
                              std::pair(add.getRhs(), add.getLhs())}) {
    if (!matchSelectedScores(scores, chain))
      continue;
    chain.mask = beforeBroadcast(mask);
    if (!chain.dropCondition)
      return true;
    auto condType = cast<RankedTensorType>(chain.dropCondition.getType());
    auto maskType = cast<RankedTensorType>(chain.mask.getType());
    chain.maskShape.clear();
    return condType.hasStaticShape() && maskType.hasStaticShape() &&
           OpTrait::util::getBroadcastedShape(
               condType.getShape(), maskType.getShape(), chain.maskShape);
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

/// `v` broadcast to `shape` (numpy's rules), unless it has that shape.
Value broadcastTo(PatternRewriter &r, Location loc, Value v,
                  ArrayRef<int64_t> shape) {
  auto type = cast<RankedTensorType>(v.getType());
  if (type.getShape() == shape)
    return v;
  return BroadcastOp::create(r, loc, type.clone(shape), v);
}

/// The additive mask: the matched one; select(cond, -inf, 0) for the select
/// (-inf where it drops; the fill itself where the attention is masked_fill
/// or causal_fill: `keepFill`); or the sum of the two, broadcast to
/// `chain.maskShape`.
Value buildMask(PatternRewriter &r, Location loc, const Chain &chain,
                RankedTensorType scoresType, bool keepFill) {
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
  Value drop = splat(keepFill ? chain.fill : -INFINITY), keep = splat(0.0);
  if (chain.dropWhereFalse)
    std::swap(drop, keep);
  Value dropped =
      SelectOp::create(r, loc, type, chain.dropCondition, drop, keep);
  if (!chain.mask)
    return dropped;
  return AddOp::create(r, loc, broadcastTo(r, loc, dropped, chain.maskShape),
                       broadcastTo(r, loc, chain.mask, chain.maskShape));
}

/// How the attention of a matched chain takes its fill.
enum class Fill {
  /// None, -inf, or a finite fill beside a key every row keeps (which is
  /// -inf exactly): an additive mask.
  Additive,
  /// A finite fill alone where a row may drop every key (a condition that
  /// is not a constant keeping a key in every row): that row's
  /// probabilities are uniform and its scores get no gradient, which
  /// kiln.attention's masked_fill gives, the fill in its mask.
  Masked,
  /// A mask added after a finite fill of the scores after each query's
  /// position (Hugging Face's GPT-2 with an attention mask): where the two
  /// drop a row whole, its probabilities are uniform over every score the
  /// sum leaves at the fill, and only those the select kept get a
  /// gradient, which kiln.attention's causal_fill gives.
  Causal,
  /// A mask added after a finite fill on any other condition: the same,
  /// but which scores the select kept no attention knows. Stays expanded.
  Unfusable,
};

Fill fillOf(const Chain &chain) {
  if (!chain.dropCondition || !std::isfinite(chain.fill))
    return Fill::Additive;
  if (!chain.mask)
    return keepsAKeyInEveryRow(chain.dropCondition, chain.dropWhereFalse)
               ? Fill::Additive
               : Fill::Masked;
  auto scoresType =
      cast<RankedTensorType>(chain.scores->getResult(0).getType());
  return dropsAfterDiagonal(chain.dropCondition, chain.dropWhereFalse,
                            scoresType)
             ? Fill::Causal
             : Fill::Unfusable;
}

/// The attention chain `op` (the product of softmax rows with the values)
/// ends, matched into `chain`; failure when `op` ends none.
LogicalResult matchChain(MatmulOp op, Chain &chain) {
  auto softmax = singleUse<SoftmaxOp>(op.getLhs());
  if (op.getTransposeLhs() || !softmax ||
      static_cast<int64_t>(softmax.getAxis()) !=
          softmax.getType().getRank() - 1)
    return failure();
  return success(matchMaskedScores(softmax.getInput(), chain));
}

/// Anchored at the product of the probabilities with the values.
struct FuseAttention : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MatmulOp op,
                                PatternRewriter &r) const override {
    Chain chain;
    if (failed(matchChain(op, chain)))
      return r.notifyMatchFailure(op, "not an attention chain");
    Fill fill = fillOf(chain);
    if (fill == Fill::Unfusable)
      return r.notifyMatchFailure(
          op, "a mask added after a finite fill whose rows may drop every "
              "key");
    bool maskedFill = fill == Fill::Masked, causalFill = fill == Fill::Causal;
    MatmulOp scores = chain.scores;
    Location loc = op.getLoc();
    Value query =
        scores.getTransposeLhs() ? swapLastTwo(r, loc, chain.lhs) : chain.lhs;
    Value key =
        scores.getTransposeRhs() ? chain.rhs : swapLastTwo(r, loc, chain.rhs);
    Value value =
        op.getTransposeRhs() ? swapLastTwo(r, loc, op.getRhs()) : op.getRhs();
    Value mask =
        buildMask(r, loc, chain, cast<RankedTensorType>(scores.getType()),
                  maskedFill || causalFill);
    r.replaceOpWithNewOp<AttentionOp>(op, query, key, value, mask,
                                      r.getF64FloatAttr(chain.scale),
                                      maskedFill ? r.getUnitAttr() : nullptr,
                                      causalFill ? r.getUnitAttr() : nullptr);
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
      return signalPassFailure();
    // Say which chains stay expanded for their fill, so a user can tell why
    // a step stores its score matrices (kilnc prints the first as a note).
    getOperation().walk([](MatmulOp op) {
      Chain chain;
      if (succeeded(matchChain(op, chain)) && fillOf(chain) == Fill::Unfusable)
        op.emitRemark(
            "attention stays expanded, storing its score matrices: it adds a "
            "mask after filling dropped scores with a finite value where a "
            "row may drop every key, on a condition other than a causal one, "
            "and there the fused form would differ from the graph's");
    });
  }
};

} // namespace
