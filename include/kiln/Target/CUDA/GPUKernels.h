//===- GPUKernels.h - what the CUDA target's kernel passes share -*- C++
//-*-===//

#ifndef KILN_TRANSFORMS_GPUKERNELS_H
#define KILN_TRANSFORMS_GPUKERNELS_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "llvm/ADT/StringMap.h"

namespace kiln {

/// An earlier kernel of `bodies` (keyed by argument types and body) with the
/// same body and argument types as `kernel`, which is then erased; or
/// `kernel` itself, added to `bodies`.
mlir::gpu::GPUFuncOp
deduplicateKernel(mlir::gpu::GPUFuncOp kernel,
                  llvm::StringMap<mlir::gpu::GPUFuncOp> &bodies);

} // namespace kiln

#endif // KILN_TRANSFORMS_GPUKERNELS_H
