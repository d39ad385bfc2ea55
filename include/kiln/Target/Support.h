//===- Support.h - what the compile pipeline and targets share --*- C++ -*-===//

#ifndef KILN_TARGET_SUPPORT_H
#define KILN_TARGET_SUPPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

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
llvm::Error runTool(llvm::StringRef program,
                    llvm::ArrayRef<llvm::StringRef> args, llvm::StringRef what);

/// Writes `input` to a temporary file (named with `inputSuffix`), runs
/// `program` with the arguments `arguments(inputPath, outputPath)` builds
/// (args[0] is the program), and returns what it wrote to the output file
/// (named with `outputSuffix`). Both files are removed whatever happens.
llvm::Expected<std::string> runToolOnBytes(
    llvm::StringRef input, llvm::StringRef inputSuffix,
    llvm::StringRef outputSuffix, llvm::StringRef program,
    llvm::function_ref<std::vector<std::string>(llvm::StringRef input,
                                                llvm::StringRef output)>
        arguments,
    llvm::StringRef what);

} // namespace kiln

#endif // KILN_TARGET_SUPPORT_H
