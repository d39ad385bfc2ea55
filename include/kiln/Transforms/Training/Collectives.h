//===- Collectives.h - data-parallel collectives ----------------*- C++ -*-===//

#ifndef KILN_TRANSFORMS_COLLECTIVES_H
#define KILN_TRANSFORMS_COLLECTIVES_H

#include "mlir/IR/DialectRegistry.h"

namespace kiln {

/// Makes kiln.all_reduce_mean bufferizable (in place).
void registerCollectivesBufferization(mlir::DialectRegistry &registry);

} // namespace kiln

#endif // KILN_TRANSFORMS_COLLECTIVES_H
