//===- KilnCanonicalize.cpp - canonicalization patterns of kiln ops -------===//
//
// Matrix products absorb transpositions of their last two dimensions into
// their transpose_lhs / transpose_rhs flags, which the BLAS calls take for
// free: matmul(transpose(a), b) = matmul(a, b) {transpose_lhs}, and
// transpose(matmul(a, b)) = matmul(b, a) with both flags flipped. And
// the negative log-likelihood of a log-softmax over the classes, as older
// exporters and PyTorch's own examples write cross-entropy, is
// kiln.cross_entropy: one op whose gradient kiln-autodiff knows, instead of
// the log-softmax's expansion differentiated term by term.
//
//===----------------------------------------------------------------------===//

#include "kiln/KilnOps.h"

#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace kiln;

namespace {

/// Whether `perm` swaps the last two dimensions and keeps the others.
bool swapsLastTwo(ArrayRef<int64_t> perm) {
  int64_t rank = perm.size();
  if (rank < 2)
    return false;
  for (int64_t d = 0; d < rank - 2; ++d)
    if (perm[d] != d)
      return false;
  return perm[rank - 2] == rank - 1 && perm[rank - 1] == rank - 2;
}

/// The input of a transposition of the last two dimensions, or null.
Value transposedFrom(Value v) {
  auto transpose = v.getDefiningOp<TransposeOp>();
  if (!transpose || !swapsLastTwo(transpose.getPermutation()))
    return {};
  return transpose.getInput();
}

struct AbsorbOperandTranspose : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MatmulOp op,
                                PatternRewriter &rewriter) const override {
    Value lhs = transposedFrom(op.getLhs());
    Value rhs = transposedFrom(op.getRhs());
    if (!lhs && !rhs)
      return failure();
    bool transposeLhs = op.getTransposeLhs() != static_cast<bool>(lhs);
    bool transposeRhs = op.getTransposeRhs() != static_cast<bool>(rhs);
    rewriter.replaceOpWithNewOp<MatmulOp>(
        op, op.getType(), lhs ? lhs : op.getLhs(), rhs ? rhs : op.getRhs(),
        transposeLhs, transposeRhs);
    return success();
  }
};

struct TransposeOfMatmul : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TransposeOp op,
                                PatternRewriter &rewriter) const override {
    auto matmul = op.getInput().getDefiningOp<MatmulOp>();
    if (!matmul || !matmul->hasOneUse() || !swapsLastTwo(op.getPermutation()))
      return failure();
    // (A B)^T = B^T A^T.
    rewriter.replaceOpWithNewOp<MatmulOp>(
        op, op.getType(), matmul.getRhs(), matmul.getLhs(),
        !matmul.getTransposeRhs(), !matmul.getTransposeLhs());
    return success();
  }
};

/// nll_loss(log_softmax(x, axis = 1)) = cross_entropy(x), with the same
/// labels, class weights, reduction and ignore_index; both pick -logp at
/// the labels, and cross_entropy's is lse - x[label]. Only where nothing
/// else reads the log-probabilities, which would otherwise be computed
/// besides.
struct NllLossOfLogSoftmax : OpRewritePattern<NllLossOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(NllLossOp op,
                                PatternRewriter &rewriter) const override {
    auto logSoftmax = op.getInput().getDefiningOp<LogSoftmaxOp>();
    if (!logSoftmax || !logSoftmax->hasOneUse() || logSoftmax.getAxis() != 1)
      return failure();
    rewriter.replaceOpWithNewOp<CrossEntropyOp>(
        op, op.getType(), logSoftmax.getInput(), op.getLabels(), op.getWeight(),
        op.getReductionAttr(), op.getIgnoreIndexAttr(), FloatAttr());
    return success();
  }
};

} // namespace

void NllLossOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                            MLIRContext *context) {
  patterns.add<NllLossOfLogSoftmax>(context);
}

void MatmulOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                           MLIRContext *context) {
  patterns.add<AbsorbOperandTranspose>(context);
}

void TransposeOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                              MLIRContext *context) {
  patterns.add<TransposeOfMatmul>(context);
}
