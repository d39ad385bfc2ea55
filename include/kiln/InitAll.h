//===- InitAll.h - every dialect and pass Kiln's tools know -----*- C++ -*-===//
//
// One place that registers the world, shared by kilnc and kiln-opt so both
// always see the same dialects and passes.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_INITALL_H
#define KILN_INITALL_H

#include "mlir/IR/DialectRegistry.h"

namespace kiln {

/// Adds the kiln dialect and the upstream dialects Kiln lowers through.
void registerAllDialects(mlir::DialectRegistry &registry);

/// Registers Kiln's passes and the upstream passes its pipelines use.
void registerAllPasses();

} // namespace kiln

#endif // KILN_INITALL_H
