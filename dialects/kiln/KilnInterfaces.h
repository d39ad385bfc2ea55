//===- KilnInterfaces.h - interfaces of kiln ops ----------------*- C++ -*-===//

#ifndef KILN_KILNINTERFACES_H
#define KILN_KILNINTERFACES_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpDefinition.h"

#include "kiln/KilnInterfaces.h.inc"

namespace kiln {
class KilnDialect;
/// Attaches DifferentiableOpInterface to the kiln ops that have a rule.
void attachDifferentiationRules(KilnDialect &dialect);

/// Builds, at `b`'s insertion point, the reverse-mode gradients of the seeded
/// values with respect to each of `wrt`. `ops` are the operations that may
/// lie between them, in program order; each `seeds` pair is (value, gradient
/// flowing into it). Returns one gradient per `wrt` entry, null where no
/// seeded value depends on it. Fails, with an error on the op, when an op on
/// a path has no DifferentiableOpInterface rule.
mlir::FailureOr<llvm::SmallVector<mlir::Value>>
buildGradients(mlir::OpBuilder &b, mlir::Location loc,
               llvm::ArrayRef<mlir::Operation *> ops,
               llvm::ArrayRef<mlir::Value> wrt,
               llvm::ArrayRef<std::pair<mlir::Value, mlir::Value>> seeds);

/// The part of a training step an op belongs to. buildGradients marks the
/// ops it builds as Backward and kiln-train-step its update as Optimizer, in
/// their locations (a FusedLoc whose metadata names the phase), which every
/// op lowered from them inherits; kiln-plan-memory reads it back to say what
/// the arena holds. Unmarked ops are Forward.
enum class StepPhase { Forward, Backward, Optimizer };

/// `loc`, marked as belonging to `phase`.
mlir::Location withPhase(mlir::Location loc, StepPhase phase);

/// The phase `loc` is marked with, or Forward.
StepPhase phaseOf(mlir::Location loc);

/// `loc`, marked with a label for the kernel an op becomes (a FusedLoc
/// whose metadata is "kiln.kernel.LABEL"; LABEL a C identifier):
/// kiln-gpu-outline-kernels appends it to the kernel's name, so that a
/// profile says what the kernel computes.
mlir::Location withKernelLabel(mlir::Location loc, llvm::StringRef label);

/// The innermost kernel label `loc` is marked with, or "".
std::string kernelLabelOf(mlir::Location loc);
} // namespace kiln

#endif // KILN_KILNINTERFACES_H
