//===- KilnOps.h - operations of the kiln dialect ---------------*- C++ -*-===//

#ifndef KILN_KILNOPS_H
#define KILN_KILNOPS_H

#include "kiln/KilnDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "kiln/KilnEnums.h.inc"

namespace kiln {
/// Whether `type` is one of the narrow storage types (float8, float4, 4- and
/// 2-bit integers) that only kiln.cast converts.
bool isNarrowType(mlir::Type type);

/// Whether `a predicate b` holds, as kiln.compare computes it.
template <typename T>
bool comparisonHolds(ComparePredicate predicate, T a, T b) {
  switch (predicate) {
  case ComparePredicate::eq:
    return a == b;
  case ComparePredicate::ne:
    return a != b;
  case ComparePredicate::lt:
    return a < b;
  case ComparePredicate::le:
    return a <= b;
  case ComparePredicate::gt:
    return a > b;
  case ComparePredicate::ge:
    return a >= b;
  }
  return false;
}
} // namespace kiln

#define GET_ATTRDEF_CLASSES
#include "kiln/KilnAttrs.h.inc"

#define GET_OP_CLASSES
#include "kiln/KilnOps.h.inc"

#endif // KILN_KILNOPS_H
