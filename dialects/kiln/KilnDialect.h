//===- KilnDialect.h - the kiln dialect -------------------------*- C++ -*-===//

#ifndef KILN_KILNDIALECT_H
#define KILN_KILNDIALECT_H

#include "mlir/IR/Dialect.h"

#include "kiln/KilnDialect.h.inc"

#endif // KILN_KILNDIALECT_H
