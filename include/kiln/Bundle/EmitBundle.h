//===- EmitBundle.h - writing compiled models as .kiln bundles --*- C++ -*-===//

#ifndef KILN_BUNDLE_EMITBUNDLE_H
#define KILN_BUNDLE_EMITBUNDLE_H

#include "kiln/Compiler/Compile.h"

#include "llvm/Support/Error.h"

namespace kiln {

/// Writes `model` to `path` (through a temporary file and a rename).
llvm::Error writeBundle(const CompiledModel &model, llvm::StringRef path,
                        llvm::StringRef modelName);

} // namespace kiln

#endif // KILN_BUNDLE_EMITBUNDLE_H
