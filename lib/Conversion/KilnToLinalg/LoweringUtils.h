//===- LoweringUtils.h - helpers of the kiln to linalg lowering -*- C++ -*-===//

#ifndef KILN_LIB_CONVERSION_KILNTOLINALG_LOWERINGUTILS_H
#define KILN_LIB_CONVERSION_KILNTOLINALG_LOWERINGUTILS_H

#include "kiln/KilnOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

namespace kiln::lowering {

using BodyBuilder = llvm::function_ref<mlir::Value(
    mlir::OpBuilder &, mlir::Location, mlir::ValueRange)>;

bool isFloat(mlir::Type type);

/// Whether integers of `type` compare, divide and extend as unsigned ones:
/// booleans and the unsigned types. The lowering builds arith ops on the
/// unsigned types as they come and makes every type signless at its end
/// (makeSignless), so the scalar builders see the signedness.
bool isUnsignedLike(mlir::Type type);

/// The signed ordering `predicate` (slt, sle, sgt, sge) as it applies to
/// integers of `type`: its unsigned form where isUnsignedLike(type).
mlir::arith::CmpIPredicate orderFor(mlir::Type type,
                                    mlir::arith::CmpIPredicate predicate);

/// Rewrites every unsigned integer type under `root` (results, block
/// arguments, function types, attributes) to the signless type of its width.
void makeSignless(mlir::Operation *root);

/// A scalar constant of `type` (float, integer or i1).
mlir::Value scalarConstant(mlir::OpBuilder &b, mlir::Location loc,
                           mlir::Type type, double value);

mlir::Value emptyTensor(mlir::OpBuilder &b, mlir::Location loc,
                        mlir::RankedTensorType type);

/// An all-parallel linalg.generic producing `resultType` from `inputs`
/// indexed by `inputMaps` (identity maps when empty); `body` maps the input
/// scalars to the result scalar.
mlir::Value buildMap(mlir::OpBuilder &b, mlir::Location loc,
                     mlir::ValueRange inputs, mlir::RankedTensorType resultType,
                     BodyBuilder body,
                     llvm::ArrayRef<mlir::AffineMap> inputMaps = {});

/// The scalar computation of an elementwise kiln op, or null when `op` is not
/// elementwise.
mlir::Value buildElementwiseScalar(mlir::Operation *op, mlir::OpBuilder &b,
                                   mlir::Location loc, mlir::ValueRange args);

/// Converts a scalar between element types with kiln.cast semantics;
/// `saturate` and `roundMode` apply to the narrow float types.
mlir::Value castScalar(mlir::OpBuilder &b, mlir::Location loc,
                       mlir::Value value, mlir::Type to, bool saturate = true,
                       RoundMode roundMode = RoundMode::up);

/// A narrow scalar (isNarrowType) as f32 (its floats) or i32 (its integers).
mlir::Value widenNarrow(mlir::OpBuilder &b, mlir::Location loc,
                        mlir::Value value);

/// A float, integer or boolean scalar converted to the narrow type `narrow`.
mlir::Value narrowScalar(mlir::OpBuilder &b, mlir::Location loc,
                         mlir::Value value, mlir::Type narrow, bool saturate,
                         RoundMode roundMode);

/// Rewrites every narrow type under `root` to i8, the byte that stores it,
/// and drops the casts to and from that byte the scalar code went through.
void storeNarrowAsBytes(mlir::Operation *root);

void populateElementwiseLoweringPatterns(mlir::RewritePatternSet &patterns);
void populateStructuredLoweringPatterns(mlir::RewritePatternSet &patterns);
void populateNNLoweringPatterns(mlir::RewritePatternSet &patterns);

} // namespace kiln::lowering

#endif // KILN_LIB_CONVERSION_KILNTOLINALG_LOWERINGUTILS_H
