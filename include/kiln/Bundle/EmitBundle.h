//===- EmitBundle.h - writing compiled models as .kiln bundles --*- C++ -*-===//

#ifndef KILN_BUNDLE_EMITBUNDLE_H
#define KILN_BUNDLE_EMITBUNDLE_H

#include "kiln/Compiler/Compile.h"

#include "llvm/Support/Error.h"

namespace kiln {

struct BundleOptions {
  /// Store no initial value for trainable parameters: the runtime's caller
  /// sets them (kiln-run --params) before the first run.
  bool externalWeights = false;
};

/// Writes `model` to `path` (through a temporary file and a rename).
/// Parameters whose initial value is all zeros (optimizer state, zero
/// biases) take no room in the file.
llvm::Error writeBundle(const CompiledModel &model, llvm::StringRef path,
                        llvm::StringRef modelName,
                        const BundleOptions &options = {});

} // namespace kiln

#endif // KILN_BUNDLE_EMITBUNDLE_H
