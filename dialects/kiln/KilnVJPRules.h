//===- KilnVJPRules.h - what the differentiation rules share ---*- C++ -*-===//
//
// Private to the kiln dialect library: the builder the rules use, and the
// external model that turns a `rule<OpTy>` specialization into an
// implementation of DifferentiableOpInterface.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECTS_KILN_KILNVJPRULES_H
#define KILN_DIALECTS_KILN_KILNVJPRULES_H

#include "kiln/KilnInterfaces.h"
#include "kiln/KilnOps.h"

namespace kiln::vjp {

/// Builds kiln ops at one location.
struct RuleBuilder {
  mlir::OpBuilder &b;
  mlir::Location loc;

  static mlir::RankedTensorType typeOf(mlir::Value v) {
    return mlir::cast<mlir::RankedTensorType>(v.getType());
  }
  mlir::Value splat(mlir::RankedTensorType type, double value);
  mlir::Value like(mlir::Value v, double value) {
    return splat(typeOf(v), value);
  }
  mlir::Value add(mlir::Value x, mlir::Value y) {
    return AddOp::create(b, loc, x, y);
  }
  mlir::Value sub(mlir::Value x, mlir::Value y) {
    return SubOp::create(b, loc, x, y);
  }
  mlir::Value mul(mlir::Value x, mlir::Value y) {
    return MulOp::create(b, loc, x, y);
  }
  mlir::Value div(mlir::Value x, mlir::Value y) {
    return DivOp::create(b, loc, x, y);
  }
  mlir::Value neg(mlir::Value x) { return NegOp::create(b, loc, x); }
  mlir::Value exp(mlir::Value x) { return ExpOp::create(b, loc, x); }
  mlir::Value cmp(ComparePredicate p, mlir::Value x, mlir::Value y) {
    return CompareOp::create(
        b, loc, ComparePredicateAttr::get(b.getContext(), p), x, y);
  }
  mlir::Value select(mlir::Value c, mlir::Value x, mlir::Value y) {
    return SelectOp::create(b, loc, x.getType(), c, x, y);
  }
  mlir::Value reshape(mlir::Value v, llvm::ArrayRef<int64_t> shape);
  mlir::Value broadcast(mlir::Value v, llvm::ArrayRef<int64_t> shape);
  mlir::Value transpose(mlir::Value v, llvm::ArrayRef<int64_t> permutation);
  mlir::Value sum(mlir::Value v, llvm::ArrayRef<int64_t> dims, bool keepdims);
  /// Sums `g` down to `shape`, undoing a numpy broadcast.
  mlir::Value unbroadcast(mlir::Value g, llvm::ArrayRef<int64_t> shape);
  mlir::Value matmul(mlir::Value x, mlir::Value y, bool tx, bool ty) {
    return MatmulOp::create(b, loc, x, y, tx ? b.getUnitAttr() : nullptr,
                            ty ? b.getUnitAttr() : nullptr);
  }
  /// Pads with the constant `value`, `low`/`high` elements per dimension.
  mlir::Value pad(mlir::Value v, llvm::ArrayRef<int64_t> low,
                  llvm::ArrayRef<int64_t> high, double value = 0.0);
  mlir::Value slice(mlir::Value v, llvm::ArrayRef<int64_t> start,
                    llvm::ArrayRef<int64_t> limit,
                    llvm::ArrayRef<int64_t> stride);
  /// The adjoint of slicing a tensor of `shape`: `g` placed at the elements
  /// `start + i * stride`, zeros elsewhere.
  mlir::Value unslice(mlir::Value g, llvm::ArrayRef<int64_t> shape,
                      llvm::ArrayRef<int64_t> start,
                      llvm::ArrayRef<int64_t> stride);
};

bool isFloatTensor(mlir::Value v);

/// The vector-Jacobian product of one op: appends one gradient (or null) per
/// operand to `out`, given one gradient (or null) per result.
template <typename OpTy>
mlir::LogicalResult rule(OpTy op, RuleBuilder &k,
                         llvm::ArrayRef<mlir::Value> grads,
                         llvm::SmallVectorImpl<mlir::Value> &out);

template <typename OpTy>
struct Model : DifferentiableOpInterface::ExternalModel<Model<OpTy>, OpTy> {
  mlir::LogicalResult
  buildVJP(mlir::Operation *op, mlir::OpBuilder &builder,
           llvm::ArrayRef<mlir::Value> resultGradients,
           llvm::SmallVectorImpl<mlir::Value> &operandGradients) const {
    RuleBuilder k{builder, op->getLoc()};
    return rule(mlir::cast<OpTy>(op), k, resultGradients, operandGradients);
  }
};

/// Attaches the rules of `Ops`; the file that specializes `rule` for them
/// calls it.
template <typename... Ops> void attach(mlir::MLIRContext *context) {
  (Ops::template attachInterface<Model<Ops>>(*context), ...);
}

/// The rules of convolutions, pooling, cumulative sums and attention
/// (KilnVJPNN.cpp).
void attachNNRules(mlir::MLIRContext *context);

} // namespace kiln::vjp

#endif // KILN_DIALECTS_KILN_KILNVJPRULES_H
