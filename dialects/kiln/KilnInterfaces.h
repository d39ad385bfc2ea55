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
} // namespace kiln

#endif // KILN_KILNINTERFACES_H
