//===- LayerNorm.h - the fused layer-norm ops' bufferization ----*- C++ -*-===//

#ifndef KILN_TRANSFORMS_LAYERNORM_H
#define KILN_TRANSFORMS_LAYERNORM_H

#include "mlir/IR/DialectRegistry.h"

namespace kiln {

/// Makes kiln.fused_layer_norm and its gradient bufferizable: they read
/// their operands and write new buffers.
void registerFusedLayerNormBufferization(mlir::DialectRegistry &registry);

} // namespace kiln

#endif // KILN_TRANSFORMS_LAYERNORM_H
