//===- Support.h - what the compile pipeline and targets share --*- C++ -*-===//

#ifndef KILN_TARGET_SUPPORT_H
#define KILN_TARGET_SUPPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/Error.h"

namespace kiln {

llvm::Error makeError(const llvm::Twine &message);

/// The bytes of a dense tensor or buffer of `type`, statically shaped (a
/// bool takes a byte).
int64_t tensorBytes(mlir::ShapedType type);

/// Runs `pm` on `module`; on failure the error is "<what> failed: <location>:
/// <first error diagnostic>".
llvm::Error runPasses(mlir::PassManager &pm, mlir::ModuleOp module,
                      llvm::StringRef what);

/// Runs `program` with `args` (args[0] is the program); on failure the
/// error names `what` and holds the program's output.
llvm::Error runTool(llvm::StringRef program, llvm::ArrayRef<llvm::StringRef> args,
                    llvm::StringRef what);

} // namespace kiln

#endif // KILN_TARGET_SUPPORT_H
