//===- OutlineKernels.h - one function per kernel ---------------*- C++ -*-===//

#ifndef KILN_TARGET_CPU_OUTLINEKERNELS_H
#define KILN_TARGET_CPU_OUTLINEKERNELS_H

#include "mlir/Pass/Pass.h"

namespace kiln {

/// Moves every top-level kernel (linalg op or copy) of the entry functions
/// into a private function of its own, called from where it was and never
/// inlined.
std::unique_ptr<mlir::Pass> createOutlineKernelsPass();

} // namespace kiln

#endif // KILN_TARGET_CPU_OUTLINEKERNELS_H
