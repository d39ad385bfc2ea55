//===- NarrowType.h - the 16-bit float types passes take by name -*- C++
//-*-===//

#ifndef KILN_TRANSFORMS_NARROWTYPE_H
#define KILN_TRANSFORMS_NARROWTYPE_H

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringRef.h"

namespace kiln {

/// The type an `amp`-style pass option names: bf16 or f16; null for any
/// other name.
mlir::FloatType narrowFloatType(mlir::MLIRContext *context,
                                llvm::StringRef name);

} // namespace kiln

#endif // KILN_TRANSFORMS_NARROWTYPE_H
